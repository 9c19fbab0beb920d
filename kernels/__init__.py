"""kernelwatch's kernel suite: one module per op family.

Each module defines ``OP``, an :class:`kernels._base.Op` with its reference,
seeded inputs, tolerances, cost model and providers. Add a family by adding a
module and its name to :data:`OP_MODULES`.
"""

from __future__ import annotations

import importlib

from kernels import _backends  # noqa: F401  (must run before any triton import)
from kernels._base import Cost, Op, Provider, Tolerance, parse_shape, shape_label

#: Module names under ``kernels`` that define an ``OP``, in display order.
OP_MODULES: tuple[str, ...] = (
    "vector_add",
    "softmax",
    "matmul",
    "layernorm",
    "rmsnorm",
    "attention",
    "transpose",
    "reduction",
    "histogram",
    "bias_gelu",
)

__all__ = ["Cost", "Op", "Provider", "Tolerance", "OP_MODULES", "get_op", "all_ops", "shape_label", "parse_shape"]


def get_op(name: str) -> Op:
    """Import and return the op called ``name``.

    Raises
    ------
    KeyError
        If no op family of that name exists in this version of the suite.
    """
    if name.startswith("control_"):  # the frozen control kernels (kernels/control.py)
        from kernels.control import CONTROL_OPS

        if name in CONTROL_OPS:
            return CONTROL_OPS[name]
    if name not in OP_MODULES:
        raise KeyError(f"unknown op {name!r}; known ops: {', '.join(OP_MODULES)}")
    module = importlib.import_module(f"kernels.{name}")
    return module.OP


def all_ops() -> dict[str, Op]:
    """Every op family, by name. A module that fails to import raises, naming it."""
    ops = {}
    for name in OP_MODULES:
        try:
            ops[name] = get_op(name)
        except Exception as exc:
            raise ImportError(f"kernels.{name} failed to import: {type(exc).__name__}: {exc}") from exc
    return ops
