"""Time one benchmark case and record it: the body of every asv benchmark.

Called from ``benchmarks/suite.py`` inside asv's benchmark process. Where the
record goes:

- ``KERNELWATCH_RESULTS_DIR`` (set by ``kernelwatch run``), else the
  ``results_dir`` of the ``asv.conf.json`` in ``ASV_CONF_DIR`` (plain ``asv run``);
- the commit is ``ASV_COMMIT`` (set by asv for each commit it measures).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import kernels
from kernels import _backends
from kernels._check import check_provider

from harness import calibrate, devices, metrics, records, timing

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


def _quick() -> bool:
    return os.environ.get("KERNELWATCH_QUICK", "0") not in ("", "0")


def prepare(op_name: str, provider_name: str, shape: tuple, dtype: str, method: str) -> Case:
    """Build inputs and check correctness on the op's small odd shape first.

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

    # Correctness first: a fast wrong kernel must never look like a speed-up.
    check_provider(op, prov.fn, op.test_shapes[-1], dtype, device)

    inputs = op.make_inputs(shape, dtype, device, seed=0)
    rotated = None
    if method == "graph":
        # Rotate over copies so the graph does not replay one cache-resident working set.
        copies = [inputs] + [op.make_inputs(shape, dtype, device, seed=s) for s in (1, 2)]
        rotated = [(lambda ins=ins: prov.fn(*ins)) for ins in copies]
    config = DEFAULT_CONFIGS[method]
    if _quick():
        config = timing.quick(config)
    return Case(op=op, provider=prov, shape=shape, dtype=dtype, method=method, device=device, inputs=inputs,
                call=lambda: prov.fn(*inputs), rotated=rotated, config=config)


def measure(case: Case) -> timing.TimingResult:
    ident = devices.identify(case.device)
    if case.device == "cuda":
        return timing.time_cuda(case.call, case.config, l2_bytes=ident.l2_bytes, rotated=case.rotated)
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


def build_record(case: Case, res: timing.TimingResult, benchmark: str, commit: str, machine: str,
                 ident: devices.DeviceIdentity, cal: dict | None) -> dict:
    cost = case.op.cost(case.shape, case.dtype)
    ds = calibrate.datasheet_peaks(ident, case.dtype, case.op.uses_tensor_cores)
    ms = calibrate.measured_peaks(cal, case.dtype, case.op.uses_tensor_cores)
    hot_in_cache = case.method in ("hot", "graph", "cpu") and metrics.working_set_in_cache(cost, ident.cache_bytes)
    m = metrics.compute_metrics(cost, res.p50_s, ds, ms, bandwidth_guard=not hot_in_cache)
    config = {}
    if case.provider.config is not None:
        try:
            config = case.provider.config(*case.inputs)
        except Exception as exc:
            config = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "schema": records.RECORD_SCHEMA,
        "harness_version": devices.harness_version(),
        "machine": machine,
        "commit": commit,
        "benchmark": benchmark,
        "params": {"provider": case.provider.name, "shape": "x".join(map(str, case.shape)),
                   "dtype": case.dtype, "timing": case.method},
        "op": case.op.name,
        "provider": case.provider.name,
        "backend": case.provider.backend,
        "shape": list(case.shape),
        "dtype": case.dtype,
        "uses_tensor_cores": case.op.uses_tensor_cores,
        "device": ident.as_dict(),
        "timing": {k: v for k, v in res.as_dict().items()},
        "cost": cost.as_dict(),
        "metrics": m.as_dict(),
        "working_set_in_cache": hot_in_cache,
        "launch_config": config,
        "correct": True,
        "created_at": records.now_iso(),
    }


def run(case: Case, benchmark: str) -> dict:
    """Time the case, write its record (when inside an asv run), return asv's
    ``{"samples": [...], "number": 1}``.

    An invalid time (zero, NaN, infinite) is raised as ``RuntimeError`` rather
    than handed to asv, so it becomes a failed result, never a number.
    """
    res = measure(case)
    bad = [s for s in res.samples_s if metrics.valid_time(s)]
    if bad or not res.samples_s:
        raise RuntimeError(f"{benchmark}: invalid timing samples {bad[:3]!r}")
    commit = os.environ.get("ASV_COMMIT")
    out_dir = results_dir()
    if commit and out_dir is not None:
        ident = devices.identify(case.device)
        machine = os.environ.get("KERNELWATCH_MACHINE") or ident.machine_name()
        cal = calibrate.load_latest(out_dir, machine)
        rec = build_record(case, res, benchmark, commit, machine, ident, cal)
        records.write_record(out_dir, rec)
    return {"samples": res.samples_s, "number": 1}
