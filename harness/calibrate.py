"""Measured ceilings: what this device actually reaches.

``kernelwatch calibrate`` measures

- memory bandwidth: a large device-to-device copy (``dst.copy_(src)``), counting
  bytes read plus bytes written, with the L2 flushed between samples on CUDA;
- matmul FLOP/s per dtype (``torch.matmul`` on random data): fp32, tf32, fp16,
  bf16 and fp8 (``torch._scaled_mm``, compute capability 8.9 and up) on CUDA;
  fp32 and bf16 on the CPU.

and stores the result per machine with its date and software versions. MFU and
bw_util are then reported against these ceilings (``mfu_measured`` ...) beside
the datasheet figures. On a CPU there is no datasheet: the measured ceilings are
the peaks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness import timing
from harness.devices import DeviceIdentity, identify, lookup_spec
from harness.metrics import Peaks
from harness.records import CALIBRATION_SCHEMA, append_jsonl, now_iso, read_jsonl, records_dir

CALIBRATION_FILE = "calibration.jsonl"


@dataclass(frozen=True)
class CalibrationPlan:
    copy_bytes: int
    matmul_n: int
    dtypes: tuple[str, ...]
    config: timing.TimingConfig


def plan_for(ident: DeviceIdentity, quick: bool = False) -> CalibrationPlan:
    """Sizes: the copy is large against the last-level cache (>= 8x, and at least
    256 MiB on GPUs) so it measures DRAM; the matmul is big enough to saturate."""
    cache = ident.cache_bytes or (64 << 20)
    if ident.kind == "cuda":
        copy_bytes = max(8 * cache, 1 << 30 if not quick else 256 << 20)
        n = 8192 if not quick else 4096
        dtypes = ("fp32", "tf32", "fp16", "bf16", "fp8")
        cfg = timing.TimingConfig(method="cold", max_time_s=2.0 if not quick else 0.5)
    else:
        copy_bytes = max(8 * cache, 256 << 20 if not quick else 64 << 20)
        n = 1024 if not quick else 512
        dtypes = ("fp32", "bf16")
        cfg = timing.TimingConfig(method="cpu", max_time_s=1.5 if not quick else 0.3)
    if quick:
        cfg = timing.quick(cfg)
    return CalibrationPlan(copy_bytes=int(copy_bytes), matmul_n=n, dtypes=dtypes, config=cfg)


def _time(fn, ident: DeviceIdentity, cfg: timing.TimingConfig) -> timing.TimingResult:
    if ident.kind == "cuda":
        return timing.time_cuda(fn, cfg, l2_bytes=ident.l2_bytes)
    return timing.time_cpu(fn, cfg)


def _fp8_unsupported(ident: DeviceIdentity) -> str | None:
    import torch

    if ident.kind != "cuda":
        return "fp8 matmul needs a CUDA device"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return "this torch has no float8_e4m3fn/_scaled_mm"
    major, minor = (int(x) for x in (ident.compute_capability or "0.0").split("."))
    if (major, minor) < (8, 9):
        return f"fp8 tensor cores need compute capability >= 8.9, device has {ident.compute_capability}"
    return None


def measure(ident: DeviceIdentity | None = None, quick: bool = False, progress=None) -> dict:
    """Run the calibration on this machine's benchmark device.

    Returns
    -------
    dict
        ``{"schema", "machine", "date", "device", "versions", "copy": {...},
        "matmul": {dtype: {...}}, "skipped": {dtype: reason}}``; figures in GB/s
        and TFLOP/s, with the p50 time and the samples' spread.
    """
    import torch

    ident = ident or identify()
    plan = plan_for(ident, quick)
    dev = "cuda" if ident.kind == "cuda" else "cpu"
    say = progress or (lambda msg: None)

    say(f"copy bandwidth: {plan.copy_bytes / 2**20:.0f} MiB")
    n_el = plan.copy_bytes // 4
    src = torch.ones(n_el, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    res = _time(lambda: dst.copy_(src), ident, plan.config)
    copy_bytes = 2 * n_el * 4  # read src + write dst
    copy = {
        "bytes": copy_bytes, "p50_s": res.p50_s, "gbps": copy_bytes / res.p50_s / 1e9,
        "ci_rel": res.ci_rel, "converged": res.converged, "n_samples": len(res.samples_s), "method": res.method,
    }
    del src, dst

    matmul, skipped = {}, {}
    n = plan.matmul_n
    g = torch.Generator(device="cpu").manual_seed(0)
    for dtype in plan.dtypes:
        say(f"matmul {dtype}: {n}^3")
        try:
            if dtype == "fp8":
                reason = _fp8_unsupported(ident)
                if reason:
                    skipped[dtype] = reason
                    continue
                a = torch.randn(n, n, generator=g).to(dev).to(torch.float8_e4m3fn)
                b = torch.randn(n, n, generator=g).to(dev).to(torch.float8_e4m3fn).t()  # column-major B
                one = torch.tensor(1.0, device=dev)
                fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
            else:
                tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
                a = torch.randn(n, n, generator=g).to(dev, tdt)
                b = torch.randn(n, n, generator=g).to(dev, tdt)
                tf32 = dtype == "tf32"

                def fn(a=a, b=b, tf32=tf32):
                    old = torch.backends.cuda.matmul.allow_tf32
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    try:
                        return torch.matmul(a, b)
                    finally:
                        torch.backends.cuda.matmul.allow_tf32 = old

            cfg = plan.config if ident.kind == "cpu" else timing.TimingConfig(
                method="hot", max_time_s=plan.config.max_time_s, target_rel=plan.config.target_rel)
            r = _time(fn, ident, cfg)
            matmul[dtype] = {"shape": [n, n, n], "p50_s": r.p50_s, "tflops": 2 * n**3 / r.p50_s / 1e12,
                             "ci_rel": r.ci_rel, "converged": r.converged, "n_samples": len(r.samples_s), "method": r.method}
        except Exception as exc:  # a dtype the device or BLAS cannot do is skipped, with why
            skipped[dtype] = f"{type(exc).__name__}: {exc}"
    return {
        "schema": CALIBRATION_SCHEMA,
        "machine": ident.machine_name(),
        "date": now_iso(),
        "device": ident.as_dict(),
        "versions": dict(ident.versions),
        "quick": quick,
        "copy": copy,
        "matmul": matmul,
        "skipped": skipped,
    }


def save(cal: dict, results_dir) -> Path:
    """Append to ``<results>/<machine>/kernelwatch/calibration.jsonl`` (history kept; latest wins)."""
    path = records_dir(results_dir, cal["machine"]) / CALIBRATION_FILE
    append_jsonl(path, cal)
    return path


def load_latest(results_dir, machine: str, errors: list[str] | None = None) -> dict | None:
    """The newest usable calibration of ``machine`` under ``results_dir``, or ``None``."""
    path = records_dir(results_dir, machine) / CALIBRATION_FILE
    if not path.exists():
        return None
    latest = None
    for cal in read_jsonl(path, errors):
        if cal.get("schema") == CALIBRATION_SCHEMA and isinstance(cal.get("copy"), dict):
            latest = cal
    return latest


def measured_peaks(cal: dict | None, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Ceilings for an op from a calibration: the copy bandwidth, and the matmul
    rate of ``dtype`` for tensor-core ops, or the fp32 matmul rate (CUDA-core /
    SIMD FMA rate) for everything else."""
    if not cal:
        return None
    gb = (cal.get("copy") or {}).get("gbps")
    key = dtype if uses_tensor_cores else "fp32"
    tf = ((cal.get("matmul") or {}).get(key) or {}).get("tflops")
    return Peaks(tflops=tf, gbps=gb, source=f"measured {cal.get('date', '?')} on {cal.get('machine', '?')}")


def datasheet_peaks(ident: DeviceIdentity, dtype: str, uses_tensor_cores: bool) -> Peaks | None:
    """Datasheet ceilings for an op on ``ident``; ``None`` on a CPU or an unknown GPU."""
    if ident.kind != "cuda":
        return None
    spec = lookup_spec(ident.name)
    if spec is None:
        return None
    return Peaks(tflops=spec.peak_for(dtype, uses_tensor_cores), gbps=spec.peak_gbps,
                 source=f"datasheet {spec.sku}: {spec.source.split(';')[0].strip()}")


def write_file(cal: dict, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=2, sort_keys=True) + "\n")
    return out
