"""The asv suite: every op x provider x shape x dtype x timing method.

One class per op family (``suite.<op>.track_time``), parameterised over
``provider``, ``shape``, ``dtype`` and ``timing``. The grid depends on the
device: on a GPU every provider at large shapes with ``cold`` timing (more
methods with ``KERNELWATCH_TIMING=cold,hot,graph``); on a CPU only providers
whose times mean something there (PyTorch) at small shapes with ``cpu`` timing.
Triton under the interpreter is never timed; ``kernelwatch list`` says why.

Each benchmark returns ``{"samples": [seconds...], "number": 1}``, so asv
computes the median, its CI and the Mann-Whitney test itself, and writes a
kernelwatch record (tflops, gbps, mfu, bw_util, sol ...) beside asv's result.

No CUDA work happens at import time: asv imports this module in every process.
"""

from __future__ import annotations

import os

import kernels
from kernels import _backends
from kernels._base import parse_shape, shape_label


def _preload() -> None:
    """Import once what every case imports (:func:`harness.measure.bench.preload`):
    under asv's ``forkserver`` the forked cases share it (about 3.5 s a case saved
    on a 2-core CPU). Failing here would fail discovery; the case names it instead."""
    try:
        from harness.measure import bench
    except ImportError:  # the case's own import reports it, with the case
        return
    bench.preload()


_preload()

#: Bump a class's version when what it measures changes (not for comments):
#: asv cuts history at a version change and the analysis annotates the step.
SUITE_VERSION = "1"


def _device() -> str:
    return _backends.benchmark_device()


def _quick() -> bool:
    """``KERNELWATCH_QUICK`` through the one yes/no reader (``false``/``off``/``no`` are off).

    Raises ``ValueError`` (:class:`harness.core.env.EnvError`) for any other value."""
    from harness.core import env

    return env.flag("KERNELWATCH_QUICK")


def _timing_methods() -> list[str]:
    if _device() == "cpu":
        return ["cpu"]
    wanted = [m.strip() for m in os.environ.get("KERNELWATCH_TIMING", "cold").split(",") if m.strip()]
    return wanted or ["cold"]


def _grid(op) -> list[list[str]]:
    dev = _device()
    providers = [name for name, p in op.providers.items() if _backends.availability(p.backend).timeable]
    shapes = op.bench_shapes.get("quick" if _quick() else dev) or op.test_shapes[-1:]
    dtypes = op.bench_dtypes.get(dev) or [op.dtypes[0]]
    return [providers or ["none"], [shape_label(s) for s in shapes], list(dtypes), _timing_methods()]


class _OpBenchmark:
    """Shared body: set up inputs, check correctness, time, record."""

    op_name: str = ""
    param_names = ["provider", "shape", "dtype", "timing"]
    unit = "seconds"
    timeout = 900
    version = SUITE_VERSION

    def setup(self, provider, shape, dtype, timing):
        from harness.measure import bench

        # NotImplementedError = asv's "skipped" (op or provider absent at this
        # commit, dtype unsupported, backend not timeable here).
        self.case = bench.prepare(self.op_name, provider, parse_shape(shape), dtype, timing)

    def track_time(self, provider, shape, dtype, timing):
        from harness.measure import bench

        return bench.run(self.case, benchmark=f"suite.{self.op_name}.track_time")

    def teardown(self, provider, shape, dtype, timing):
        self.case = None


def _make(op_name: str):
    try:
        op = kernels.get_op(op_name)
    except Exception as exc:  # a broken op module must not hide the rest of the suite
        import sys

        print(f"kernelwatch: cannot load op {op_name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return type(op_name, (_OpBenchmark,), {"op_name": op_name, "params": _grid(op), "__doc__": op.description})


# The frozen control kernels (kernels/control.py) run with every suite: they measure the machine.
for _name in (*kernels.OP_MODULES, "control_copy", "control_matmul"):
    _cls = _make(_name)
    if _cls is not None:
        globals()[_name] = _cls
del _name, _cls
