"""Importers for peers' benchmark data, into :mod:`harness.store.results`' model.

- :func:`load_liger_csv` / :func:`load_liger_csvs`: Liger-Kernel's
  ``benchmark/data/all_benchmark_data.csv`` layout (one row per kernel x provider
  x mode x metric x x-value, with p20/p50/p80), one machine per ``gpu_name``;
  costs derived from the kernel configuration where the configuration is
  complete enough (:func:`liger_cost`).
- :func:`openblas_cost`: FLOPs and compulsory bytes of the OpenBLAS asv suite's
  cases (``OpenMathLib/BLAS-Benchmarks``), so its times become GFLOP/s.

A file that cannot be used raises :class:`ImportError_` with a one-line message
naming the file and line; :func:`load_liger_csvs` records it and goes on with the
other files.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from harness.store import results as _results

LIGER_COLUMNS = (
    "kernel_name", "kernel_provider", "kernel_operation_mode", "metric_name", "metric_unit", "x_name",
    "x_label", "x_value", "y_value_50", "y_value_20", "y_value_80", "extra_benchmark_config_str",
    "gpu_name", "timestamp", "liger_version",
)

_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)")

_DTYPE_BYTES = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4, "torch.float64": 8}
_DTYPE_NAME = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32", "torch.float64": "fp64"}


class ImportError_(ValueError):
    """Input that an importer cannot use; the message names the file and line."""


@dataclass(frozen=True)
class KernelCost:
    """FLOPs and compulsory bytes of one invocation, the dtype whose peak applies,
    and whether the work runs on tensor cores. ``derivation`` says how."""

    flops: int
    bytes_total: int
    dtype: str
    uses_tensor_cores: bool
    derivation: str

    def as_dict(self) -> dict:
        return {"flops": self.flops, "bytes_total": self.bytes_total, "dtype": self.dtype,
                "uses_tensor_cores": self.uses_tensor_cores, "derivation": self.derivation}


# --------------------------------------------------------------------------- Liger


def liger_cost(kernel: str, mode: str, x_name: str, x_value: float, config: dict) -> tuple[KernelCost | None, str | None]:
    """Cost of a Liger-Kernel benchmark case from its configuration.

    Returns ``(cost, None)`` or ``(None, reason)``. Byte counts are compulsory
    traffic (each tensor read or written once); FLOP counts for the norms are
    per-element operation counts that only serve to place the kernel on the
    roofline (they are far below any ridge point, so the kernel is memory-bound
    whatever the exact count). ``full`` = forward + backward.

    - ``rms_norm`` (x: M x H, weight H): forward reads x, w, writes y:
      ``(2MH + H) e`` bytes, ``4MH`` flops (square, sum, scale, weight); backward
      reads dy, x, w, writes dx, dw: ``(3MH + 2H) e`` bytes, ``8MH`` flops.
    - ``layer_norm`` (x: M x N, weight and bias N): forward ``(2MN + 2N) e``
      bytes, ``8MN`` flops; backward ``(3MN + 4N) e`` bytes, ``12MN`` flops.
    - ``swiglu`` / ``geglu`` (the LLaMA MLP: gate and up projections h -> i, an
      elementwise gate, down projection i -> h, over B*T tokens): forward
      ``2 * B*T * 3*h*i`` flops on tensor cores, backward twice that; bytes are
      the weights ``3hi e`` plus input and output ``2 B T h e`` per pass.
    - ``cross_entropy`` and ``rope``: the configuration lacks the dtype (and for
      rope the batch size), so no cost is derived.
    """
    if kernel in ("rms_norm", "layer_norm"):
        dt = config.get("dtype")
        rows = config.get("M")
        if dt not in _DTYPE_BYTES or not isinstance(rows, int):
            return None, f"{kernel}: configuration lacks M or a known dtype"
        e = _DTYPE_BYTES[dt]
        M, H = rows, int(x_value)
        if kernel == "rms_norm":
            fwd = (4 * M * H, (2 * M * H + H) * e)
            bwd = (8 * M * H, (3 * M * H + 2 * H) * e)
        else:
            fwd = (8 * M * H, (2 * M * H + 2 * H) * e)
            bwd = (12 * M * H, (3 * M * H + 4 * H) * e)
        parts = {"forward": [fwd], "backward": [bwd], "full": [fwd, bwd]}.get(mode)
        if parts is None:
            return None, f"{kernel}: unknown mode {mode!r}"
        return KernelCost(sum(p[0] for p in parts), sum(p[1] for p in parts), _DTYPE_NAME[dt], False,
                          f"{kernel} {mode}: M={M}, {x_name}={H}, {dt}"), None
    if kernel in ("swiglu", "geglu"):
        dt = config.get("dtype")
        B = config.get("B", config.get("bsz"))
        h, i = config.get("hidden_size"), config.get("intermediate_size")
        if dt not in _DTYPE_BYTES or not all(isinstance(v, int) for v in (B, h, i)):
            return None, f"{kernel}: configuration lacks batch, hidden_size, intermediate_size or dtype"
        e = _DTYPE_BYTES[dt]
        tokens = B * int(x_value)
        f_fwd = 2 * tokens * 3 * h * i
        b_pass = (3 * h * i + 2 * tokens * h) * e
        mult = {"forward": 1, "backward": 2, "full": 3}.get(mode)
        if mult is None:
            return None, f"{kernel}: unknown mode {mode!r}"
        passes = {"forward": 1, "backward": 1, "full": 2}[mode]
        return KernelCost(f_fwd * mult, b_pass * passes, _DTYPE_NAME[dt], True,
                          f"{kernel} MLP {mode}: tokens={tokens}, hidden={h}, intermediate={i}, {dt}"), None
    return None, f"{kernel}: cost not derivable from the benchmark configuration"


def _machine_for_gpu(gpu: str) -> str:
    from harness.core.devices import machine_name_for

    return machine_name_for("liger", "cuda", gpu)


def _num(text: str, path: Path, lineno: int, col: str) -> float:
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ImportError_(f"{path}:{lineno}: column {col} is not a number: {text!r}") from None
    if not math.isfinite(v):
        raise ImportError_(f"{path}:{lineno}: column {col} is not finite: {text!r}")
    return v


def read_liger_rows(path: str | Path) -> list[dict]:
    """Rows of one Liger benchmark CSV, validated.

    Raises
    ------
    ImportError_
        Merge-conflict markers (naming the first marker's line), a missing
        column, a row with the wrong number of fields, a non-numeric value, or an
        unparsable configuration; the message is one line naming file and line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportError_(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    for lineno, line in enumerate(lines, start=1):
        if _CONFLICT.match(line):
            raise ImportError_(
                f"{path}:{lineno}: git merge-conflict marker {line.strip()[:40]!r}; the file holds two "
                f"unresolved versions, resolve the conflict before importing")
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise ImportError_(f"{path}: empty file") from None
    missing = [c for c in LIGER_COLUMNS if c not in header]
    if missing:
        raise ImportError_(f"{path}:1: not a Liger benchmark CSV, missing columns {missing}")
    rows = []
    for lineno, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise ImportError_(f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
        r = dict(zip(header, fields))
        try:
            cfg = json.loads(r["extra_benchmark_config_str"] or "{}")
        except ValueError as exc:
            raise ImportError_(f"{path}:{lineno}: extra_benchmark_config_str is not JSON ({exc.msg})") from None
        if not isinstance(cfg, dict):
            raise ImportError_(f"{path}:{lineno}: extra_benchmark_config_str is not a JSON object")
        r["config"] = cfg
        for col in ("x_value", "y_value_50", "y_value_20", "y_value_80"):
            r[col] = _num(r[col], path, lineno, col)
        if not r["gpu_name"].strip():
            raise ImportError_(f"{path}:{lineno}: empty gpu_name")
        r["lineno"] = lineno
        rows.append(r)
    if not rows:
        raise ImportError_(f"{path}: no data rows")
    return rows


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def load_liger_csvs(paths: Iterable[str | Path], into: _results.ResultSet | None = None) -> _results.ResultSet:
    """Import Liger benchmark CSVs into a :class:`harness.store.results.ResultSet`.

    Each ``gpu_name`` becomes a machine (``liger-<gpu slug>``, with ``gpu`` in its
    machine info); each ``liger_version`` a pseudo-commit ``liger-v<version>``
    dated by its earliest timestamp; each (kernel, metric, provider, mode,
    x_name, configuration, x value) a series ``liger.<kernel>.<metric>`` with
    the p50 as value and p20/p50/p80, the derived cost and its reason in
    ``Point.record``. Unusable files go to ``errors`` (one line each) and the
    others still import. Duplicate rows keep the last one.
    """
    paths = [Path(p) for p in paths]
    rs = into or _results.ResultSet(results_dir=paths[0].parent if paths else Path("."))
    for path in paths:
        try:
            rows = read_liger_rows(path)
        except ImportError_ as exc:
            rs.errors.append(str(exc))
            continue
        rs.files_loaded += 1
        for r in rows:
            gpu = r["gpu_name"].strip()
            machine = _machine_for_gpu(gpu)
            minfo = rs.machines.setdefault(machine, {"machine": machine, "gpu": gpu, "source": "liger-csv"})
            commit = f"liger-v{r['liger_version'].strip() or 'unknown'}"
            try:
                ts = _dt.datetime.strptime(r["timestamp"].strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc)
                date_ms = int(ts.timestamp() * 1000)
            except ValueError:
                date_ms = None
            info = rs.commits.get(commit)
            if info is None:
                rs.commits[commit] = _results.CommitInfo(hash=commit, date_ms=date_ms,
                                                         subject=f"Liger-Kernel {r['liger_version']}")
            elif date_ms is not None and (info.date_ms is None or date_ms < info.date_ms):
                info.date_ms = date_ms
            rs.env_params[(machine, commit)] = {"gpu": gpu, "liger_version": r["liger_version"]}
            kernel, metric, mode = r["kernel_name"], r["metric_name"], r["kernel_operation_mode"]
            params = (("provider", r["kernel_provider"]), ("mode", mode),
                      *((str(k), str(v)) for k, v in sorted(r["config"].items())),
                      (r["x_name"], _fmt_num(r["x_value"])))
            bench = f"liger.{kernel}.{metric}"
            key = _results.SeriesKey(machine=machine, benchmark=bench, params=params, timing=None)
            series = rs.series.get(key)
            unit = r["metric_unit"]
            if series is None:
                series = rs.series[key] = _results.Series(key=key, unit=unit,
                                                          type="time" if metric == "speed" else metric)
            record = {"p20": r["y_value_20"], "p50": r["y_value_50"], "p80": r["y_value_80"],
                      "device": {"name": gpu}, "source": f"{path}:{r['lineno']}", "timestamp": r["timestamp"]}
            if metric == "speed":
                cost, why = liger_cost(kernel, mode, r["x_name"], r["x_value"], r["config"])
                record["cost"] = cost.as_dict() if cost else None
                record["cost_reason"] = why
                record["time_s"] = r["y_value_50"] * _UNIT_SECONDS.get(unit, float("nan"))
            series.points = [p for p in series.points if p.commit != commit]
            series.points.append(_results.Point(commit=commit, value=r["y_value_50"], version=None,
                                                env_name=f"liger {r['liger_version']}", record=record))
    order = {c: i for i, c in enumerate(rs.commit_order())}
    for s in rs.series.values():
        s.points.sort(key=lambda p: order.get(p.commit, math.inf))
    return rs


_UNIT_SECONDS = {"s": 1.0, "seconds": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def find_liger_csvs(folder: str | Path) -> list[Path]:
    """CSV files in ``folder`` (not recursive) whose header is Liger's."""
    out = []
    for p in sorted(Path(folder).glob("*.csv")):
        try:
            with open(p, encoding="utf-8") as fh:
                head = fh.readline()
        except (OSError, UnicodeDecodeError):
            continue
        if all(c in head for c in ("kernel_name", "kernel_provider", "y_value_50")):
            out.append(p)
    return out


# --------------------------------------------------------------------------- OpenBLAS

_BLAS_DTYPE = {"s": ("fp32", 4, False), "d": ("fp64", 8, False), "c": ("fp32", 8, True), "z": ("fp64", 16, True),
               "dz": ("fp64", 16, True)}


def openblas_cost(benchmark: str, params: dict) -> tuple[KernelCost | None, str | None]:
    """Cost of an OpenBLAS asv case (``benchmarks.<kernel>.time_<kernel>``).

    ``variant`` is the BLAS prefix (s, d: real fp32/fp64; c, z: complex, where a
    multiply-add costs 8 real flops instead of 2 — the LAPACK Working Note 41
    convention). Sizes are ``n``; compulsory bytes count each operand once.

    - gemm: ``2 n^3`` flops (x4 complex); A, B read, C written: ``3 n^2 e``
    - syrk: ``n^2 (n + 1)`` flops (half of C; x4 complex); ``2 n^2 e``
    - gemv: ``2 n^2`` flops (x4 complex); ``(n^2 + 2n) e``
    - gbmv (kl = ku = ``kl``, band ``2 kl + 1``): ``2 n (2 kl + 1)`` flops; ``((2 kl + 1) n + 2n) e``
    - axpy: ``2n`` flops; ``3n e``; dot: ``2n``; ``2n e``; nrm2: ``2n`` (``4n`` for dz); ``n e``
    - gesv (one right-hand side): ``2/3 n^3 + 2 n^2`` flops (LU + solve; x4 complex); ``(n^2 + 2n) e``

    Returns ``(cost, None)`` or ``(None, reason)`` (gesdd, syev: iterative, no
    closed-form count).
    """
    kernel = benchmark.rsplit(".", 1)[-1].removeprefix("time_").lower()
    variant = str(params.get("variant", "")).strip("'\"")
    if variant not in _BLAS_DTYPE:
        return None, f"{benchmark}: unknown variant {variant!r}"
    dtype, e, cplx = _BLAS_DTYPE[variant]
    try:
        n = int(str(params.get("size")).strip("'\""))
    except (TypeError, ValueError):
        return None, f"{benchmark}: no integer size"
    k4 = 4 if cplx else 1
    if kernel == "gemm":
        f, b = 2 * n ** 3 * k4, 3 * n * n * e
    elif kernel == "syrk":
        f, b = n * n * (n + 1) * k4, 2 * n * n * e
    elif kernel == "gemv":
        f, b = 2 * n * n * k4, (n * n + 2 * n) * e
    elif kernel == "gbmv":
        kl = int(str(params.get("kl")).strip("'\""))
        f, b = 2 * n * (2 * kl + 1) * k4, ((2 * kl + 1) * n + 2 * n) * e
    elif kernel == "axpy":
        f, b = 2 * n * k4, 3 * n * e
    elif kernel == "dot":
        f, b = 2 * n * k4, 2 * n * e
    elif kernel == "nrm2":
        f, b = (4 if cplx else 2) * n, n * e
    elif kernel == "gesv":
        f, b = int((2 * n ** 3 / 3 + 2 * n * n) * k4), (n * n + 2 * n) * e
    else:
        return None, f"{benchmark}: no closed-form cost"
    return KernelCost(int(f), int(b), dtype, False, f"{kernel} {variant} n={n}"), None
