"""Every op x provider x dtype that can run here against its reference, on
odd and non-contiguous shapes, plus negative controls that the checker must reject.

CuPy providers run here only on a GPU with CuPy installed (else they skip).
What only that run checks: that each CUDA C kernel computes what its launcher
model says (reductions, warp shuffles, shared memory, atomics, fp32
accumulation and the output rounding), that it stays in bounds at run time,
and the device's launch limits (threads, shared memory, registers). The
launchers themselves (sizes, strides, grid, argument order, entry point per
dtype) are checked without a GPU in ``tests/test_cupy_launch_model.py``, the
sources' compilation in ``tests/test_cuda_sources.py``."""

from __future__ import annotations

import pytest
import torch

import kernels
from kernels import _backends
from kernels._check import WrongResult, check_provider

OPS = kernels.all_ops()


def _device(provider) -> str:
    return _backends.provider_device(provider.backend)


# Known gap (TRITON_INTERPRET=1): Triton's interpreter returns
# garbage for tl.dot on two bf16 operands. Kept visible as a strict xfail on the
# CPU; on a GPU the same case must pass. tests/test_tolerances.py runs the same
# kernels with the operands up-cast before tl.dot, so bf16 loads, masks and
# stores are still checked on the CPU.
INTERPRETER_BF16_DOT = {("matmul", "triton", "bf16"), ("attention", "triton", "bf16")}


def _torch_bf16_matmul_reads_past_rows() -> bool:
    """True where PyTorch's CPU bf16 matmul reads one element past each row of ``A``
    when ``K`` is odd (found here by the NaN-poisoned padding of ``make_noncontiguous``).

    Measured with torch 2.13.0+cpu on an Intel Xeon with AMX (``amx_bf16``): a
    ``(19, 19)`` view of a ``(19, 22)`` buffer whose padding is NaN times a
    contiguous ``(19, 19)`` gives 304 NaN of 361 outputs; even ``K`` (32, 64), fp16,
    fp32 and padding in ``B`` are right, and finite padding gives right results
    (the extra element is multiplied by zero). The AMD EPYC machines of earlier
    runs did not show it. An upstream read past the row, not a kernelwatch bug;
    the probe keeps the xfail to the machines that have it."""
    if not hasattr(_torch_bf16_matmul_reads_past_rows, "seen"):
        a = torch.full((19, 22), float("nan"), dtype=torch.bfloat16)[:, :19]
        a.copy_(torch.ones(19, 19))
        out = torch.matmul(a, torch.ones(19, 19, dtype=torch.bfloat16))
        _torch_bf16_matmul_reads_past_rows.seen = bool(torch.isnan(out).any())
    return _torch_bf16_matmul_reads_past_rows.seen


def _layouts(op, shape, last: bool) -> list:
    """Input layouts a case is checked in: contiguous and row-padded for every
    shape; for the largest shape also transposed (when an input has two
    dimensions above 1) and every-other-element."""
    layouts = [False, "padded"]
    if last:
        inputs = op.make_inputs(shape, op.dtypes[0], "cpu")
        if any(isinstance(t, torch.Tensor) and t.dim() >= 2 and min(t.shape[-2:]) > 1 for t in inputs):
            layouts.append("transposed")
        layouts.append("strided")
    return layouts


def _cases():
    for op_name, op in OPS.items():
        for prov_name, prov in op.providers.items():
            for dtype in op.dtypes:
                if not prov.supports(dtype):
                    continue
                for i, shape in enumerate(op.test_shapes):
                    for layout in _layouts(op, shape, i == len(op.test_shapes) - 1):
                        marks = []
                        avail = _backends.availability(prov.backend)
                        if not avail.runnable:
                            marks.append(pytest.mark.skip(reason=avail.reason))
                        elif (
                            (op_name, prov_name, dtype, layout) == ("matmul", "torch", "bf16", "padded")
                            and shape[0] > 1  # (M, N, K): A is (M, K); one row is not padded
                            and shape[2] % 2 == 1
                            and _device(prov) == "cpu"
                            and _torch_bf16_matmul_reads_past_rows()
                        ):
                            marks.append(
                                pytest.mark.xfail(
                                    strict=True,
                                    raises=WrongResult,
                                    reason="PyTorch CPU bf16 matmul (AMX) reads one element past each row "
                                    "of A at odd K: the NaN padding reaches the output",
                                )
                            )
                        elif (op_name, prov_name, dtype) in INTERPRETER_BF16_DOT and _backends.triton_interpreted():
                            marks.append(
                                pytest.mark.xfail(
                                    strict=True,
                                    raises=WrongResult,
                                    reason="Triton interpreter: tl.dot on bf16 operands is wrong on CPU",
                                )
                            )
                        sid = f"{op_name}-{prov_name}-{dtype}-{'x'.join(map(str, shape))}-{layout or 'contig'}"
                        yield pytest.param(op_name, prov_name, dtype, shape, layout, id=sid, marks=marks)


def test_interpreter_xfails_name_existing_providers():
    for op_name, prov_name, dtype in INTERPRETER_BF16_DOT:
        assert prov_name in OPS[op_name].providers, (op_name, prov_name)
        assert OPS[op_name].providers[prov_name].supports(dtype), (op_name, prov_name, dtype)


@pytest.mark.parametrize("op_name,prov_name,dtype,shape,noncontiguous", list(_cases()))
def test_provider_matches_reference(op_name, prov_name, dtype, shape, noncontiguous):
    op = OPS[op_name]
    prov = op.providers[prov_name]
    try:
        check_provider(op, prov.fn, shape, dtype, _device(prov), noncontiguous=noncontiguous)
    except NotImplementedError as exc:  # a capability this device lacks (e.g. fp8 below sm_89), with its reason
        pytest.skip(str(exc))


def _unwritten(fn):
    def wrong(*inputs):
        return torch.zeros_like(fn(*inputs))

    return wrong


def _perturbed(fn):
    """Right everywhere but one element, which is off by 1% of the largest output + 0.1."""

    def wrong(*inputs):
        out = fn(*inputs).clone()
        flat = out.view(-1)
        bump = 0.01 * flat.abs().max().to(flat.dtype) + 0.1
        if not flat.dtype.is_floating_point:  # integer outputs (histogram counts): off by at least one
            bump = bump.ceil().to(flat.dtype)
        flat[flat.numel() // 2] += bump
        return out

    return wrong


def _negative_cases():
    """Every provider family that can run here (torch, triton, cupy) in every dtype
    it supports; a provider whose own result is a known xfail is wrapped in its
    place by nothing (its wrong output would be rejected for the wrong reason)."""
    for op_name, op in OPS.items():
        for prov_name, prov in op.providers.items():
            avail = _backends.availability(prov.backend)
            for dtype in op.dtypes:
                if not prov.supports(dtype):
                    continue
                if (op_name, prov_name, dtype) in INTERPRETER_BF16_DOT and _backends.triton_interpreted():
                    continue
                marks = [] if avail.runnable else [pytest.mark.skip(reason=avail.reason)]
                yield pytest.param(op_name, prov_name, dtype, id=f"{op_name}-{prov_name}-{dtype}", marks=marks)


#: One provider output per (op, provider, dtype), shared by the wrappers below.
_OUTPUTS: dict = {}


def _cached(key, fn):
    def run(*inputs):
        if key not in _OUTPUTS:
            _OUTPUTS[key] = fn(*inputs)
        return _OUTPUTS[key].clone()

    return run


@pytest.mark.parametrize("op_name,prov_name,dtype", list(_negative_cases()))
@pytest.mark.parametrize("make_wrong", [_unwritten, _perturbed], ids=["unwritten", "one-element-off"])
def test_negative_control_is_rejected(op_name, prov_name, dtype, make_wrong):
    op = OPS[op_name]
    prov = op.providers[prov_name]
    # matmul's largest test shape costs seconds per dtype in Triton's interpreter.
    shape = (19, 19, 19) if op_name == "matmul" else op.test_shapes[-1]
    fn = _cached((op_name, prov_name, dtype), prov.fn)
    try:
        fn(*op.make_inputs(shape, dtype, _device(prov)))
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    with pytest.raises(WrongResult):
        check_provider(op, make_wrong(fn), shape, dtype, _device(prov))


@pytest.mark.parametrize("op_name", list(OPS))
def test_op_specific_negative_control_is_rejected(op_name):
    """Each family ships a deliberately wrong kernel (``WRONG``) that looks plausible."""
    import importlib

    module = importlib.import_module(f"kernels.{op_name}")
    wrong = getattr(module, "WRONG", None)
    if wrong is None:
        pytest.fail(f"kernels.{op_name} defines no WRONG negative control")
    op = OPS[op_name]
    with pytest.raises(WrongResult):
        check_provider(op, wrong, op.test_shapes[-1], op.dtypes[0], "cpu")


@pytest.mark.parametrize("op_name", list(OPS))
def test_every_op_has_torch_and_triton(op_name):
    backends = {p.backend for p in OPS[op_name].providers.values()}
    assert "torch" in backends and "triton" in backends, backends


@pytest.mark.parametrize("op_name", list(OPS))
def test_cost_is_pure_and_positive(op_name):
    op = OPS[op_name]
    shape = op.test_shapes[-1]
    c1 = op.cost(shape, op.dtypes[0])
    c2 = op.cost(shape, op.dtypes[0])
    assert c1 == c2
    assert c1.bytes_total > 0


def test_inputs_are_seeded():
    op = OPS["vector_add"]
    a = op.make_inputs((1823,), "fp32", "cpu", seed=3)
    b = op.make_inputs((1823,), "fp32", "cpu", seed=3)
    c = op.make_inputs((1823,), "fp32", "cpu", seed=4)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_unknown_op_raises_keyerror():
    with pytest.raises(KeyError, match="unknown op"):
        kernels.get_op("no_such_op")


@pytest.mark.parametrize(
    "op_name,shape,dtype,flops,bytes_read,bytes_written",
    [
        ("vector_add", (1000,), "fp32", 1000, 8000, 4000),
        ("vector_add", (1000,), "bf16", 1000, 4000, 2000),
        ("softmax", (4, 10), "fp32", 200, 160, 160),
        ("matmul", (2, 3, 4), "fp32", 48, (8 + 12) * 4, 6 * 4),
        ("matmul", (128, 256, 64), "bf16", 2 * 128 * 256 * 64, (128 * 64 + 64 * 256) * 2, 128 * 256 * 2),
        ("matmul", (128, 256, 64), "tf32", 2 * 128 * 256 * 64, (128 * 64 + 64 * 256) * 4, 128 * 256 * 4),
    ],
)
def test_cost_against_hand_computed(op_name, shape, dtype, flops, bytes_read, bytes_written):
    c = OPS[op_name].cost(shape, dtype)
    assert (c.flops, c.bytes_read, c.bytes_written) == (flops, bytes_read, bytes_written)
