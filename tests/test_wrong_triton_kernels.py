"""Negative controls for the Triton provider family: kernels with the bugs Triton
code really has (an off-by-one mask, a wrong stride), launched like the real
providers, must be rejected by the same ``check_provider`` that passes the real
kernels. Each wrong kernel is the real one with one line changed; where the bug
is invisible on contiguous inputs (a row offset computed as ``row * N * stride_xn``
equals ``row * stride_xm`` when the rows are packed) the test says so and shows
that a padded or transposed layout exposes it."""

from __future__ import annotations

import pytest
import torch

import kernels
from kernels import _backends
from kernels._check import WrongResult, check_provider

pytestmark = pytest.mark.skipif(
    not _backends.availability("triton").runnable, reason=_backends.availability("triton").reason
)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

DEVICE = _backends.provider_device("triton")


# --- vector_add: off-by-one mask ------------------------------------------------


@triton.jit
def _add_off_by_one_kernel(x_ptr, y_ptr, out_ptr, n_elements, stride_x, stride_y, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements - 1  # BUG: the last element is never loaded (other=0)
    x = tl.load(x_ptr + offsets * stride_x, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets * stride_y, mask=mask, other=0.0)
    out = x.to(tl.float32) + y.to(tl.float32)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=offsets < n_elements)


def wrong_vector_add(x, y):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _add_off_by_one_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, x.stride(0), y.stride(0), BLOCK_SIZE=1024)
    return out


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", [(19,), (1823,)])
def test_off_by_one_mask_in_vector_add_is_rejected(dtype, shape):
    with pytest.raises(WrongResult):
        check_provider(kernels.get_op("vector_add"), wrong_vector_add, shape, dtype, DEVICE)


# --- reduction: off-by-one mask in the partial sums ------------------------------


@triton.jit
def _partial_sums_off_by_one(x_ptr, partial_ptr, n_elements, stride_x, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets * stride_x, mask=offsets < n_elements - 1, other=0.0).to(tl.float32)  # BUG
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


def wrong_sum(x):
    from kernels import reduction

    n = x.numel()
    n_partials = triton.cdiv(n, 256)
    partials = torch.empty((n_partials,), dtype=torch.float32, device=x.device)
    out = torch.empty((), dtype=torch.float32, device=x.device)
    _partial_sums_off_by_one[(n_partials,)](x, partials, n, x.stride(0), BLOCK_SIZE=256)
    reduction._final_sum_kernel[(1,)](partials, out, n_partials, BLOCK_SIZE=64)
    return out


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_off_by_one_mask_in_reduction_is_rejected(dtype):
    with pytest.raises(WrongResult):
        check_provider(kernels.get_op("reduction"), wrong_sum, (1823,), dtype, DEVICE)


# --- softmax: wrong row stride ----------------------------------------------------


@triton.jit
def _softmax_wrong_row_stride(out_ptr, x_ptr, stride_xm, stride_xn, stride_om, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # BUG: the row offset assumes packed rows (row * n_cols * stride_xn, not row * stride_xm).
    x = tl.load(x_ptr + row * n_cols * stride_xn + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_om + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def wrong_softmax(x):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax_wrong_row_stride[(M,)](
        out, x, x.stride(0), x.stride(1), out.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N)
    )
    return out


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_wrong_row_stride_in_softmax_is_rejected_on_padded_rows(dtype):
    # Padded rows only: on a transposed view the wrong offsets would read past
    # the buffer (undefined behaviour in the interpreter, not a clean failure).
    with pytest.raises(WrongResult):
        check_provider(kernels.get_op("softmax"), wrong_softmax, (7, 1823), dtype, DEVICE, noncontiguous="padded")


def test_wrong_row_stride_is_invisible_on_packed_rows():
    # Why contiguous (and every-other-element) inputs alone could not catch it:
    # there stride_xm == n_cols * stride_xn.
    op = kernels.get_op("softmax")
    check_provider(op, wrong_softmax, (7, 1823), "fp32", DEVICE)
    check_provider(op, wrong_softmax, (7, 1823), "fp32", DEVICE, noncontiguous="strided")


# --- transpose: wrong output stride --------------------------------------------------


@triton.jit
def _transpose_wrong_out_stride(x_ptr, out_ptr, M, N, n_elements, stride_xm, stride_xn, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    i = offsets // N
    j = offsets % N
    x = tl.load(x_ptr + i * stride_xm + j * stride_xn, mask=mask)
    tl.store(out_ptr + j * N + i, x, mask=mask & (j * N + i < n_elements))  # BUG: out's row stride is M, not N


def wrong_transpose(x):
    M, N = x.shape
    out = torch.zeros((N, M), dtype=x.dtype, device=x.device)
    _transpose_wrong_out_stride[(triton.cdiv(M * N, 1024),)](
        x, out, M, N, M * N, x.stride(0), x.stride(1), BLOCK_SIZE=1024
    )
    return out


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_wrong_output_stride_in_transpose_is_rejected(dtype):
    with pytest.raises(WrongResult):
        check_provider(kernels.get_op("transpose"), wrong_transpose, (37, 1823), dtype, DEVICE)


# --- the real kernels pass the same checks -------------------------------------------


@pytest.mark.parametrize(
    "op_name,prov_name,shape,layout",
    [
        ("vector_add", "triton", (1823,), False),
        ("reduction", "triton_tree", (1823,), False),
        ("softmax", "triton", (7, 1823), "padded"),
        ("softmax", "triton", (7, 1823), "transposed"),
        ("transpose", "triton_naive", (37, 1823), False),
    ],
)
def test_the_real_kernels_pass_where_the_wrong_ones_fail(op_name, prov_name, shape, layout):
    op = kernels.get_op(op_name)
    check_provider(op, op.providers[prov_name].fn, shape, "bf16", DEVICE, noncontiguous=layout)
