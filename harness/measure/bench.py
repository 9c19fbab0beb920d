"""Time one benchmark case and record it: the body of every asv benchmark.

Called from ``benchmarks/suite.py`` inside asv's benchmark process. Where the
record goes:

- ``KERNELWATCH_RESULTS_DIR`` (set by ``kernelwatch run``), else the
  ``results_dir`` of the ``asv.conf.json`` in ``ASV_CONF_DIR`` (plain ``asv run``);
- the commit is ``ASV_COMMIT`` (set by asv for each commit it measures).

``KERNELWATCH_EXCLUDE_THROTTLED=1`` drops samples taken while NVML reported a
slowdown reason (they are flagged in the record either way).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import kernels
from harness.core import devices, env, metrics, records
from harness.measure import calibrate, clocks, timing, timing_base
from kernels import _backends
from kernels._base import inputs_on
from kernels._check import WrongResult, check_provider


def preload() -> float:
    """Import, once, what every case imports lazily; returns the seconds it took.

    ``benchmarks/suite.py`` calls it at import. On the CPU ``kernelwatch run``
    uses asv's ``forkserver``, which imports the suite once per commit and forks a
    process per case: what the suite imports is then shared, what a case imports
    is paid again in every case. Measured here (2-core Xeon, 2026-12-03; a
    softmax case, cProfile): ``scipy.stats`` (the median CI) 2.0 s and
    ``torch.distributed.tensor`` (imported by the first
    ``torch.testing.assert_close``) 1.5 s, of a case's 5.9 s; the suite has 34
    cases on the CPU. No CUDA work is done (asv's rule for import time). With
    ``spawn`` (GPUs) each process still pays once, only earlier, before its
    measurement starts.
    """
    t0 = time.perf_counter()
    import torch

    timing_base.import_statistics()
    if torch.distributed.is_available():
        import torch.distributed.tensor  # noqa: F401  (what assert_close imports on first use)
    return time.perf_counter() - t0


#: Default timing configuration per method; KERNELWATCH_QUICK=1 loosens it.
DEFAULT_CONFIGS = {
    "cpu": timing.TimingConfig(method="cpu", max_time_s=1.0),
    "cold": timing.TimingConfig(method="cold", max_time_s=2.0),
    "hot": timing.TimingConfig(method="hot", max_time_s=2.0),
    "graph": timing.TimingConfig(method="graph", max_time_s=2.0),
}


@dataclass
class Case:
    op: object
    provider: object
    shape: tuple
    dtype: str
    method: str
    device: str
    inputs: tuple
    call: object
    rotated: list | None
    config: timing.TimingConfig
    bench_check: dict = field(default_factory=lambda: {"checked": False, "reason": "not run"})


#: Cases already checked at the bench shape in this process (asv runs each
#: case in a fresh process; ``kernelwatch`` tests may prepare one many times).
_CHECKED: dict[tuple, dict] = {}


def check_at_bench_shape(op, fn, inputs: tuple, dtype: str, label: str) -> dict:
    """Run the provider once on the bench inputs and compare with the op's
    reference computed on the same device (float64 where the reference
    up-casts), with the op's tolerance for ``dtype`` (``|out - ref| <= atol +
    rtol * |ref|``, the semantics of :func:`kernels._check.compare`, evaluated on
    the device so 8192^2 outputs never cross to the host).

    The autotuned configs chosen at bench shapes (matmul at 8192, attention at
    S=4096) are otherwise never checked against the reference: the test shapes
    are small and odd. Returns ``{"checked": True, "max_abs_err", "seconds"}``,
    or ``{"checked": False, "reason"}`` when the reference does not fit in
    device memory. Raises :class:`kernels._check.WrongResult` for a mismatch.
    """
    import torch

    t0 = time.perf_counter()
    try:
        ref = op.reference(*inputs)
        out = fn(*inputs)
        if isinstance(out, torch.Tensor) and out.is_cuda:
            torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        return {"checked": False, "reason": f"reference does not fit in device memory: {str(exc)[:200]}"}
    if not isinstance(out, torch.Tensor):
        raise WrongResult(f"{label}: provider returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        raise WrongResult(f"{label}: shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}")
    tol = op.tolerance(dtype)
    got, want = out.detach().to(torch.float64), ref.detach().to(device=out.device, dtype=torch.float64)
    err = (got - want).abs()
    bad = ~(err <= tol.atol + tol.rtol * want.abs())  # NaN where the reference has none is bad too
    bad &= ~(torch.isnan(got) & torch.isnan(want))
    n_bad = int(bad.sum())
    finite = err[torch.isfinite(err)]
    max_err = float(finite.max()) if finite.numel() else None
    del ref, got, want, err
    if n_bad:
        raise WrongResult(
            f"{label}: {n_bad} of {out.numel()} elements beyond atol={tol.atol} rtol={tol.rtol} "
            f"at the bench shape (max abs error {max_err})"
        )
    return {
        "checked": True,
        "max_abs_err": max_err,
        "atol": tol.atol,
        "rtol": tol.rtol,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def check_cuda_case(op, fn, inputs: tuple, dtype: str, key: tuple, label: str) -> dict:
    """Correctness of a CUDA case, once per case and process: at the bench shape
    only (:func:`check_at_bench_shape`), on the inputs it is timed on, so Triton
    compiles (and autotunes) the kernel once, at that shape. A check first at the
    op's small odd test shape compiled a second specialisation and autotuned a
    second key: the bf16 matmul's compiles took 77 s instead of about half
    (issue 26 finding 1); the odd shapes are checked on CUDA by the correctness
    phase and on the CPU in CI. Only when the bench-shape check cannot run (its
    reference does not fit) is the provider checked at the test shape instead
    (``test_shape_checked`` in the result). Raises
    :class:`kernels._check.WrongResult` for a mismatch."""
    if key not in _CHECKED:
        res = check_at_bench_shape(op, fn, inputs, dtype, label)
        if not res.get("checked"):
            check_provider(op, fn, op.test_shapes[-1], dtype, "cuda")
            res = dict(res, test_shape_checked=True)
        _CHECKED[key] = res
    return _CHECKED[key]


def _quick() -> bool:
    return env.flag("KERNELWATCH_QUICK")


def prepare(op_name: str, provider_name: str, shape: tuple, dtype: str, method: str) -> Case:
    """Build inputs and check correctness: on the CPU on the op's small odd shape
    first; on CUDA generate the bench inputs on the device
    (:func:`kernels._base.inputs_on`) and check at the bench shape only
    (:func:`check_cuda_case`: one compile; the outcome goes into the record as
    ``correct_at_bench_shape``).

    Raises
    ------
    NotImplementedError
        The case cannot be timed here (asv records it as skipped): unknown op or
        provider at this commit, unsupported dtype, untimeable backend, or a
        timing method that does not fit the device.
    kernels._check.WrongResult
        The provider is wrong: asv records a failure, and ``kernelwatch check``
        reports the series BROKEN.
    """
    try:
        op = kernels.get_op(op_name)
    except KeyError as exc:
        raise NotImplementedError(str(exc)) from None
    prov = op.providers.get(provider_name)
    if prov is None:
        raise NotImplementedError(f"op {op_name} has no provider {provider_name!r} at this commit")
    if dtype not in op.dtypes or not prov.supports(dtype):
        raise NotImplementedError(f"{op_name}/{provider_name} does not support {dtype}")
    avail = _backends.availability(prov.backend)
    if not avail.timeable:
        raise NotImplementedError(f"{op_name}/{provider_name}: {avail.reason}")
    device = _backends.benchmark_device()
    if (device == "cpu") != (method == "cpu"):
        raise NotImplementedError(f"timing method {method!r} does not apply to device {device!r}")
    shape = op.check_shape(tuple(shape))

    # Correctness first: a fast wrong kernel must never look like a speed-up
    # (on CUDA at the bench shape below, one compile).
    if device != "cuda":
        check_provider(op, prov.fn, op.test_shapes[-1], dtype, device)

    # Bench inputs generated on the device itself (seconds saved per case).
    on_device = inputs_on(device) if device == "cuda" else contextlib.nullcontext()
    with on_device:
        inputs = op.make_inputs(shape, dtype, device, seed=0)
    # ... and correctness once at the bench shape, on the device.
    key = (op_name, provider_name, tuple(shape), dtype)
    if device == "cuda":
        label = f"{op_name}/{provider_name}[{'x'.join(map(str, shape))}, {dtype}]"
        bench_check = check_cuda_case(op, prov.fn, inputs, dtype, key, label)
    else:
        bench_check = {"checked": False, "reason": "CPU run: checked at the test shapes only"}
    rotated = None
    work = op.cost(shape, dtype).bytes_total
    l2 = devices.identify(device).l2_bytes if device == "cuda" else None
    if method == "graph" or (method == "cold" and l2 and work < l2):
        # Rotate over enough copies that one pass writes >= 2x L2, so the graph
        # does not replay one cache-resident working set, and a cold batch of a
        # short call reads each copy from DRAM (timing.rotation_count).
        n_copies = timing.rotation_count(work, l2)
        with on_device:
            copies = [inputs] + [op.make_inputs(shape, dtype, device, seed=s) for s in range(1, n_copies)]
        rotated = [(lambda ins=ins: prov.fn(*ins)) for ins in copies]
    config = DEFAULT_CONFIGS[method]
    if method == "cpu":
        # The thread count is part of the series' provenance (config and harness version).
        config = dataclasses.replace(config, threads=devices.cpu_timing_threads())
    if _quick():
        config = timing.quick(config)
    if env.flag("KERNELWATCH_EXCLUDE_THROTTLED"):
        # Recorded in the timing configuration, so it is part of the provenance.
        config = dataclasses.replace(config, exclude_throttled=True)
    return Case(
        op=op,
        provider=prov,
        shape=shape,
        dtype=dtype,
        method=method,
        device=device,
        inputs=inputs,
        call=lambda: prov.fn(*inputs),
        rotated=rotated,
        config=config,
        bench_check=bench_check,
    )


def measure(case: Case) -> timing.TimingResult:
    """Time ``case`` with its configuration; on CUDA with NVML clocks read around
    every batch (unknown, not an error, where NVML is unavailable)."""
    ident = devices.identify(case.device)
    if case.device == "cuda":
        with clocks.open_monitor() as monitor:
            return timing.time_cuda(
                case.call, case.config, l2_bytes=ident.l2_bytes, rotated=case.rotated, monitor=monitor
            )
    return timing.time_cpu(case.call, case.config)


def results_dir() -> Path | None:
    """Where records go (see module docstring); ``None`` outside an asv run."""
    explicit = os.environ.get("KERNELWATCH_RESULTS_DIR")
    if explicit:
        return Path(explicit)
    conf_dir = os.environ.get("ASV_CONF_DIR")
    if not conf_dir:
        return None
    conf_path = Path(conf_dir) / "asv.conf.json"
    try:
        # asv.conf.json allows // comments; strip them before parsing.
        text = re.sub(r"^\s*//.*$", "", conf_path.read_text(), flags=re.M)
        conf = json.loads(text)
    except (OSError, ValueError):
        return Path(conf_dir) / "results"
    return Path(conf_dir) / conf.get("results_dir", "results")


def build_record(
    case: Case,
    res: timing.TimingResult,
    benchmark: str,
    commit: str,
    machine: str,
    ident: devices.DeviceIdentity,
    cal: dict | None,
) -> dict:
    cost = case.op.cost(case.shape, case.dtype)
    ds = calibrate.datasheet_peaks(ident, case.dtype, case.op.uses_tensor_cores)
    ms = calibrate.measured_peaks(cal, case.dtype, case.op.uses_tensor_cores)
    hot_in_cache = case.method in ("hot", "graph", "cpu") and metrics.working_set_in_cache(cost, ident.cache_bytes)
    bad = invalid_samples(res)
    if bad:
        m = dataclasses.replace(metrics.compute_metrics(cost, None, ds, ms), reason=bad)
    else:
        # The guard holds only the bytes that must reach DRAM in the timed call
        # against the datasheet bandwidth (writes can stay in L2 even when cold).
        dram = metrics.dram_bytes_lower_bound(cost, case.method, ident.cache_bytes)
        m = metrics.compute_metrics(
            cost,
            res.p50_s,
            ds,
            ms,
            bandwidth_guard=not hot_in_cache and dram > 0,
            dram_bytes=dram,
            cache_resident=hot_in_cache,
            cache_bytes=ident.cache_bytes,
        )
    facts = _compile_facts(case)
    config = {}
    if case.provider.config is not None:
        try:
            config = case.provider.config(*case.inputs)
        except Exception as exc:
            config = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "schema": records.RECORD_SCHEMA,
        "harness_version": devices.harness_version(ident.kind, cpu_threads=case.config.threads),
        "machine": machine,
        "commit": commit,
        "benchmark": benchmark,
        "params": {
            "provider": case.provider.name,
            "shape": "x".join(map(str, case.shape)),
            "dtype": case.dtype,
            "timing": case.method,
        },
        "op": case.op.name,
        "provider": case.provider.name,
        "backend": case.provider.backend,
        "shape": list(case.shape),
        "dtype": case.dtype,
        "uses_tensor_cores": case.op.uses_tensor_cores,
        "device": ident.as_dict(),
        "timing": _json_safe(res.as_dict()),
        "cost": cost.as_dict(),
        "metrics": m.as_dict(),
        "working_set_in_cache": hot_in_cache,
        "launch_config": config,
        "compile_facts": facts,
        "code_identity": _code_identity(case, facts),
        "correct": True,
        "correct_at_bench_shape": case.bench_check,
        "created_at": records.now_iso(),
    }


def _code_identity(case: Case, facts: dict) -> dict:
    """What the case ran (:func:`harness.measure.fingerprint.code_identity`; never raises)."""
    from harness.measure import fingerprint

    return fingerprint.code_identity(case, facts)


def _compile_facts(case: Case) -> dict:
    """Triton compile facts of the case (:func:`harness.measure.compile_facts.safe_compile_facts`; never raises)."""
    from harness.measure import compile_facts

    return compile_facts.safe_compile_facts(case)


def invalid_samples(res: timing.TimingResult) -> str | None:
    """Why the samples of ``res`` cannot be used (none, or any zero, negative,
    NaN or infinite sample), else ``None``."""
    if not res.samples_s:
        return f"no timing samples ({res.stop_reason})"
    bad = [(i, s) for i, s in enumerate(res.samples_s) if metrics.valid_time(s)]
    if bad:
        i, s = bad[0]
        return f"{len(bad)} of {len(res.samples_s)} timing samples invalid (sample {i}: {metrics.valid_time(s)})"
    return None


def _json_safe(obj):
    """``obj`` with NaN/infinite floats replaced by ``None`` (records hold no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def run(case: Case, benchmark: str) -> dict:
    """Time the case, write its record (when inside an asv run), return asv's
    ``{"samples": [...], "number": 1}``.

    Raises
    ------
    RuntimeError
        When the record's status is not ``ok``: an invalid time (no samples, or
        a zero, negative, NaN or infinite one) or a timing bug (faster than the
        datasheet allows, :func:`harness.metrics.integrity_guard`). asv then
        stores a failed result, never a number; the record (written first)
        keeps the reason.
    """
    res = measure(case)
    commit = os.environ.get("ASV_COMMIT")
    out_dir = results_dir()
    ident = devices.identify(case.device)
    machine = env.machine("KERNELWATCH_MACHINE") or ident.machine_name()
    threads = case.config.threads if case.device == "cpu" else calibrate.ANY_THREADS
    cal = calibrate.load_latest(out_dir, machine, cpu_threads=threads) if out_dir is not None else None
    rec = build_record(case, res, benchmark, commit or "", machine, ident, cal)
    if commit and out_dir is not None:
        records.write_record(out_dir, rec)
    m = rec["metrics"]
    if m["status"] != metrics.STATUS_OK:
        raise RuntimeError(f"{benchmark}: {m['status']}: {m['reason']}")
    return {"samples": res.samples_s, "number": 1}
