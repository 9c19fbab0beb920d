"""Family-specific checks for transpose, reduction, histogram and bias_gelu:
hand-computed costs, hand-computed outputs on edge inputs, and code paths the
generic reference tests do not reach at their small shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kernels
from kernels import _backends
from kernels._check import WrongResult, check_provider

FAMILIES = ("transpose", "reduction", "histogram", "bias_gelu")
OPS = {name: kernels.get_op(name) for name in FAMILIES}


def _runnable(op_name):
    """(name, provider) pairs that can run here, with the device their inputs live on."""
    out = []
    for name, prov in OPS[op_name].providers.items():
        if _backends.availability(prov.backend).runnable:
            out.append(pytest.param(name, id=name))
    return out


def _device(op_name, prov_name):
    return _backends.provider_device(OPS[op_name].providers[prov_name].backend)


@pytest.mark.parametrize(
    "op_name,shape,dtype,flops,bytes_read,bytes_written",
    [
        # transpose: a copy, M*N elements each way
        ("transpose", (4, 10), "fp32", 0, 160, 160),
        ("transpose", (3, 5), "bf16", 0, 30, 30),
        # reduction: n adds, n elements read, one fp32 scalar written
        ("reduction", (1000,), "fp32", 1000, 4000, 4),
        ("reduction", (1000,), "bf16", 1000, 2000, 4),
        ("reduction", (1,), "fp16", 1, 2, 4),
        # histogram: one multiply per value, n values read, bins int32 counts written
        ("histogram", (1000, 256), "fp32", 1000, 4000, 1024),
        ("histogram", (10, 7), "bf16", 10, 20, 28),
        # bias_gelu: 6 flops per element; x and bias read, out written
        ("bias_gelu", (4, 10), "fp32", 240, (40 + 10) * 4, 160),
        ("bias_gelu", (2, 3), "bf16", 36, (6 + 3) * 2, 12),
    ],
)
def test_cost_against_hand_computed(op_name, shape, dtype, flops, bytes_read, bytes_written):
    c = OPS[op_name].cost(shape, dtype)
    assert (c.flops, c.bytes_read, c.bytes_written) == (flops, bytes_read, bytes_written)


@pytest.mark.parametrize("op_name", FAMILIES)
def test_bench_shapes_are_valid_and_big_enough(op_name):
    op = OPS[op_name]
    for key in ("cuda", "cpu", "quick"):
        assert op.bench_shapes[key], key
        for shape in op.bench_shapes[key]:
            op.check_shape(shape)
    assert len(op.bench_shapes["quick"]) == 1
    # The largest CUDA case must stream well past a 60 MB L2 in its cheapest dtype.
    biggest = max(op.cost(s, op.bench_dtypes["cuda"][-1]).bytes_total for s in op.bench_shapes["cuda"])
    assert biggest > 4 * 60e6
    assert op.bench_dtypes["cpu"] == ["fp32"]


# --- transpose ------------------------------------------------------------------


@pytest.mark.parametrize("prov_name", _runnable("transpose"))
def test_transpose_small_by_hand(prov_name):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(_device("transpose", prov_name))
    out = OPS["transpose"].providers[prov_name].fn(x)
    assert out.is_contiguous() and out.shape == (3, 2)
    assert out.cpu().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


@pytest.mark.parametrize("prov_name", _runnable("transpose"))
def test_transpose_of_transposed_view(prov_name):
    # A column-major view (strides (1, M)): the kernels must honour both strides.
    op = OPS["transpose"]
    (x,) = op.make_inputs((33, 70), "fp16", _device("transpose", prov_name), seed=2)
    view = x.t()
    out = op.providers[prov_name].fn(view)
    assert torch.equal(out.cpu(), x.cpu())


# --- reduction ------------------------------------------------------------------


@pytest.mark.parametrize("prov_name", _runnable("reduction"))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_reduction_length_one_and_output_contract(prov_name, dtype):
    op = OPS["reduction"]
    dev = _device("reduction", prov_name)
    x = torch.tensor([-2.5], dtype=kernels._base.torch_dtype(dtype), device=dev)
    out = op.providers[prov_name].fn(x)
    assert out.dim() == 0 and out.dtype == torch.float32
    assert out.item() == -2.5


@pytest.mark.parametrize("prov_name", _runnable("reduction"))
def test_reduction_by_hand(prov_name):
    dev = _device("reduction", prov_name)
    x = torch.arange(1, 101, dtype=torch.float32, device=dev)  # 1 + ... + 100
    assert OPS["reduction"].providers[prov_name].fn(x).item() == 5050.0


def test_reduction_tree_second_pass_loops():
    # Tiny blocks: 1823 elements -> 114 partials -> 29 iterations of the one-program second pass.
    from kernels import reduction

    op = OPS["reduction"]
    check_provider(
        op, lambda x: reduction._triton_sum_tree(x, 16, 4), (1823,), "fp32", _device("reduction", "triton_tree")
    )
    check_provider(
        op,
        lambda x: reduction._triton_sum_tree(x, 16, 4),
        (1823,),
        "bf16",
        _device("reduction", "triton_tree"),
        noncontiguous=True,
    )


def test_reduction_tolerance_rejects_a_lost_block():
    # Dropping the first Triton block of 12289 elements loses ~1/3 of the sum.
    from kernels import reduction

    op = OPS["reduction"]
    with pytest.raises(WrongResult):
        check_provider(op, lambda x: x[reduction.TRITON_BLOCK_SIZE :].float().sum(), (12289,), "fp32", "cpu")


# --- histogram ------------------------------------------------------------------

_NEXT_BELOW_1 = float(np.nextafter(np.float32(1), np.float32(0)))
_NEXT_BELOW_THIRD = float(np.nextafter(np.float32(1 / 3), np.float32(0)))


@pytest.mark.parametrize("prov_name", _runnable("histogram"))
@pytest.mark.parametrize(
    "values,bins,expected",
    [
        # 0 and -0 -> bin 0; edges 0.25, 0.5, 0.75 open their bins; 1.0 and
        # anything negative, NaN or infinite are not counted; the largest fp32
        # below 1 is in the last bin.
        ([0.0, -0.0, 0.25, 0.5, 0.75, 1.0, _NEXT_BELOW_1, -1e-30, math.nan, math.inf, -math.inf], 4, [2, 1, 1, 2]),
        # Non-power-of-two bins: fp32(1/3) * 3 rounds to 1.0 (bin 1); the fp32
        # just below it gives 1 - 2**-24 (bin 0); fp32(2/3) * 3 rounds to 2.0.
        ([float(np.float32(1 / 3)), _NEXT_BELOW_THIRD, float(np.float32(2 / 3))], 3, [1, 1, 1]),
        ([_NEXT_BELOW_THIRD, _NEXT_BELOW_THIRD, 0.999], 3, [2, 0, 1]),
        ([0.5, 2.0, -3.0], 1, [1]),
    ],
    ids=["edges-pow2", "thirds", "below-third", "one-bin"],
)
def test_histogram_edges_by_hand(prov_name, values, bins, expected):
    op = OPS["histogram"]
    x = torch.tensor(values, dtype=torch.float32, device=_device("histogram", prov_name))
    out = op.providers[prov_name].fn(x, bins)
    assert out.dtype == torch.int32
    assert out.cpu().tolist() == expected
    assert op.reference(x.cpu(), bins).tolist() == expected


def test_histogram_inputs_exercise_the_definition():
    op = OPS["histogram"]
    x, bins = op.make_inputs((4099, 256), "fp32", "cpu")
    ignored = ~((x >= 0) & (x < 1))
    assert bins == 256
    assert 0.1 * x.numel() < ignored.sum() < 0.3 * x.numel()
    assert torch.isnan(x).any() and torch.isinf(x).any() and (x == 1.0).any()
    edges = torch.arange(bins + 1, dtype=torch.float32) / bins
    assert torch.isin(x, edges).sum() > x.numel() // 10
    # Every edge k / bins, k = 0 .. bins, occurs (each bin's lower edge, and 1.0),
    # not a few edges repeated (mutation: `i // 8 % (bins + 1)` as `i & 8 % ...`).
    assert torch.isin(edges, x).all(), f"edges missing: {edges[~torch.isin(edges, x)].tolist()[:5]}"
    assert op.reference(x, bins).sum() == (~ignored).sum()


def test_histogram_private_grid_stride_loop():
    # One program walking all blocks exercises the loop and the merge.
    from kernels import histogram

    op = OPS["histogram"]
    dev = _device("histogram", "triton_private")
    check_provider(op, lambda x, b: histogram._triton_histogram_private(x, b, 1), (4099, 37), "fp32", dev)
    check_provider(
        op, lambda x, b: histogram._triton_histogram_private(x, b, 2), (4099, 256), "bf16", dev, noncontiguous=True
    )


def test_histogram_checker_rejects_float_counts():
    op = OPS["histogram"]
    with pytest.raises(WrongResult, match="integer reference"):
        check_provider(op, lambda x, b: op.reference(x, b).float(), (1823, 37), "fp32", "cpu")


def test_histogram_bad_bins_raise():
    from kernels import histogram

    x = torch.rand(10)
    with pytest.raises(ValueError, match="bins"):
        histogram.torch_histogram(x, 0)
    with pytest.raises(ValueError, match="bins"):
        histogram.triton_histogram_atomic(x, 1.5)
    with pytest.raises(ValueError, match="bins <= 4096"):
        histogram.triton_histogram_private(x, 4097)
    with pytest.raises(ValueError, match="bins"):
        OPS["histogram"].make_inputs((10, 2**24), "fp32", "cpu")


# --- bias_gelu ------------------------------------------------------------------


@pytest.mark.parametrize("prov_name", _runnable("bias_gelu"))
def test_bias_gelu_by_hand(prov_name):
    # gelu(z) = z * Phi(z): gelu(-1) = -Phi(-1), gelu(0) = 0, gelu(1) = Phi(1), gelu(2) = 2 Phi(2).
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    expected = [-phi(-1.0), 0.0, phi(1.0), 2 * phi(2.0)]
    dev = _device("bias_gelu", prov_name)
    x = torch.zeros((3, 4), dtype=torch.float32, device=dev)
    bias = torch.tensor([-1.0, 0.0, 1.0, 2.0], device=dev)
    x_before = x.clone()
    out = OPS["bias_gelu"].providers[prov_name].fn(x, bias)
    torch.testing.assert_close(out.cpu(), torch.tensor([expected] * 3), atol=3e-6, rtol=1e-5)
    assert torch.equal(x, x_before), "provider modified its input"


@pytest.mark.parametrize("prov_name", [p for p in ("triton",) if _backends.availability("triton").runnable])
def test_bias_gelu_rejects_mismatched_inputs(prov_name):
    fn = OPS["bias_gelu"].providers[prov_name].fn
    with pytest.raises(ValueError, match="bias"):
        fn(torch.zeros(3, 4), torch.zeros(5))
    with pytest.raises(TypeError, match="bias"):
        fn(torch.zeros(3, 4), torch.zeros(4, dtype=torch.float16))


@pytest.mark.skipif(not _backends.availability("triton").runnable, reason="triton not runnable here")
def test_bias_gelu_triton_launches_up_to_the_cuda_grid_y_limit(monkeypatch):
    """Axis 1 of the Triton grid holds one program per 1024 columns, at most
    65535 (CUDA's limit on gridDim.y): N = 65535 * 1024 launches, one column
    more is refused with a ValueError naming both counts
    (mutation: ``_MAX_GRID_Y = 65535`` as ``65534``)."""
    from kernels import bias_gelu

    grids = []

    class FakeKernel:  # the interpreter would take minutes over 65535 programs
        def __getitem__(self, grid):
            grids.append(grid)
            return lambda *args, **kwargs: None

    monkeypatch.setattr(bias_gelu, "_bias_gelu_kernel", FakeKernel())

    def inputs(N):  # stride-0 views: no memory behind the 64M columns
        return torch.zeros((1, 1), dtype=torch.float16).expand(1, N), torch.zeros(1, dtype=torch.float16).expand(N)

    assert bias_gelu.TRITON_BLOCK_SIZE_N == 1024
    bias_gelu.triton_bias_gelu(*inputs(65535 * 1024))
    assert grids == [(1, 65535)]
    with pytest.raises(ValueError, match="needs 65536 programs along axis 1, over 65535"):
        bias_gelu.triton_bias_gelu(*inputs(65535 * 1024 + 1))
    assert grids == [(1, 65535)]
