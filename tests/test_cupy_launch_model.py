"""CuPy launchers without a GPU: argument and stride logic against a model.

A CuPy provider is a Python launcher (sizes, strides, grid, block, argument
order, kernel name by dtype) around a CUDA C kernel. Without a GPU the kernel
cannot run, but the launcher can: here ``kernels._cupy.kernel`` returns the
entry point's name and ``kernels._cupy.launch`` runs a pure-Python (torch,
float64) model of that kernel's *indexing as written in its CUDA source*
(``x[row * sxm + col * sxn]``, grid-stride loops, one block per row ...) on
the CPU tensors' storage. So a launcher that passes the wrong stride, swaps
two arguments, launches too few blocks or picks the f16 entry point for bf16
data gives a wrong result, checked against the op's fp64 reference with the
dtype's tolerance, on contiguous, padded, transposed and strided inputs.

What only a GPU checks (``tests/test_kernels.py`` with CuPy present, and
``tests/test_cuda_sources.py`` compiles each source without one): that the
CUDA C itself computes what the model says (its reductions, shuffles, shared
memory, atomics, fp32 accumulation and rounding), that the kernel respects
its bounds at run time, and launch limits (block size, shared memory,
registers) on a real device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kernels
from kernels import _cupy
from kernels._check import WrongResult, compare, make_noncontiguous

OPS = kernels.all_ops()
SUFFIX = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "b4": None, "b2": None}


def _mem(t: torch.Tensor) -> torch.Tensor:
    """A flat view of ``t``'s storage starting at its first element: ``mem[i]`` is
    what a CUDA kernel reads at ``ptr + i`` elements."""
    total = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((total - t.storage_offset(),), (1,), t.storage_offset())


def _dtype_of(name: str) -> torch.dtype | None:
    return SUFFIX.get(name.rsplit("_", 1)[-1])


def _check_dtype(name, *ts):
    want = _dtype_of(name)
    for t in ts:
        if want is not None and t.dtype != want:
            raise TypeError(f"{name} reads {want} but got a {t.dtype} tensor")


def _threads(grid, block, axis=0) -> int:
    return int(grid[axis]) * int(block[axis])


# ----------------------------------------------------------------------------- kernel models
# One per CUDA source, indexing as the source does; values in float64.


def _vector_add(name, grid, block, args, shared):
    x, y, out, n = args  # flat indexing: x[i], y[i] (the launcher makes them contiguous)
    _check_dtype(name, x, y, out)
    i = torch.arange(int(n))
    _mem(out)[i] = (_mem(x)[i].double() + _mem(y)[i].double()).to(out.dtype)


def _bias_gelu(name, grid, block, args, shared):
    x, bias, out, M, N, sxm, sxn, sb = args
    _check_dtype(name, x, bias, out)
    M, N = int(M), int(N)
    cols = torch.arange(min(_threads(grid, block), N))  # threads past N return
    rows = torch.arange(M)  # grid-stride over rows: every row, whatever gridDim.y
    xv = _mem(x)[rows[:, None] * int(sxm) + cols[None, :] * int(sxn)].double()
    z = xv + _mem(bias)[cols * int(sb)].double()
    _mem(out)[(rows[:, None] * N + cols[None, :]).reshape(-1)] = (
        (0.5 * z * (1 + torch.erf(z / math.sqrt(2)))).reshape(-1).to(out.dtype)
    )


def _row_kernel(fn):
    """Models of one-block-per-row kernels: rows ``0 .. gridDim.x - 1``."""

    def model(name, grid, block, args, shared):
        fn(name, int(grid[0]), args)

    return model


@_row_kernel
def _softmax(name, rows, args):
    x, out, sxm, sxn, n = args
    _check_dtype(name, x, out)
    r, j = torch.arange(rows), torch.arange(int(n))
    v = _mem(x)[r[:, None] * int(sxm) + j[None, :] * int(sxn)].double()
    _mem(out)[(r[:, None] * int(n) + j[None, :]).reshape(-1)] = torch.softmax(v, -1).reshape(-1).to(out.dtype)


@_row_kernel
def _layernorm(name, rows, args):
    x, w, b, out, n, sxm, sxn, sw, sb, eps = args
    _check_dtype(name, x, w, b, out)
    r, j = torch.arange(rows), torch.arange(int(n))
    v = _mem(x)[r[:, None] * int(sxm) + j[None, :] * int(sxn)].double()
    mean = v.mean(-1, keepdim=True)
    y = (v - mean) * torch.rsqrt(((v - mean) ** 2).mean(-1, keepdim=True) + float(eps))
    y = y * _mem(w)[j * int(sw)].double() + _mem(b)[j * int(sb)].double()
    _mem(out)[(r[:, None] * int(n) + j[None, :]).reshape(-1)] = y.reshape(-1).to(out.dtype)


@_row_kernel
def _rmsnorm(name, rows, args):
    x, w, out, n, sxm, sxn, sw, eps = args
    _check_dtype(name, x, w, out)
    r, j = torch.arange(rows), torch.arange(int(n))
    v = _mem(x)[r[:, None] * int(sxm) + j[None, :] * int(sxn)].double()
    y = v * torch.rsqrt((v * v).mean(-1, keepdim=True) + float(eps)) * _mem(w)[j * int(sw)].double()
    _mem(out)[(r[:, None] * int(n) + j[None, :]).reshape(-1)] = y.reshape(-1).to(out.dtype)


def _matmul(name, grid, block, args, shared):
    a, b, c, M, N, K, sam, sak, sbk, sbn = args
    _check_dtype("x_f32", a, b, c)
    M, N, K = int(M), int(N), int(K)
    rows = torch.arange(min(_threads(grid, block, 1), M))
    cols = torch.arange(min(_threads(grid, block, 0), N))
    k = torch.arange(K)
    av = _mem(a)[rows[:, None] * int(sam) + k[None, :] * int(sak)].double()
    bv = _mem(b)[k[:, None] * int(sbk) + cols[None, :] * int(sbn)].double()
    _mem(c)[(rows[:, None] * N + cols[None, :]).reshape(-1)] = (av @ bv).reshape(-1).to(c.dtype)


def _transpose(name, grid, block, args, shared):
    x, out, M, N, sxm, sxn = args
    if int(x.element_size()) != int(name.rsplit("_b", 1)[-1]):
        raise TypeError(f"{name} moves {name[-1]}-byte elements, got {x.dtype}")
    M, N = int(M), int(N)
    tile = int(block[0])  # TILE == blockDim.x; each block covers TILE rows in steps of BLOCK_ROWS
    i = torch.arange(min(int(grid[1]) * tile, M))
    j = torch.arange(min(int(grid[0]) * tile, N))
    v = _mem(x)[i[:, None] * int(sxm) + j[None, :] * int(sxn)]
    _mem(out)[(j[None, :] * M + i[:, None]).reshape(-1)] = v.reshape(-1)


def _grid_stride(n, sx, x):
    return _mem(x)[torch.arange(int(n)) * int(sx)].double()


def _sum_atomic(name, grid, block, args, shared):
    x, out, n, sx = args
    _check_dtype(name, x)
    _mem(out)[0] += _grid_stride(n, sx, x).sum().float()


def _sum_partials(name, grid, block, args, shared):
    x, partials, n, sx = args
    _check_dtype(name, x)
    blocks, threads = int(grid[0]), int(block[0])
    i = torch.arange(int(n))
    owner = (i // threads) % blocks  # grid-stride loop: element i belongs to block (i / blockDim) mod gridDim
    sums = torch.zeros(blocks, dtype=torch.float64).index_add_(0, owner, _grid_stride(n, sx, x))
    _mem(partials)[:blocks] = sums.float()


def _sum_final(name, grid, block, args, shared):
    partials, out, n_partials = args
    _mem(out)[0] = _mem(partials)[: int(n_partials)].double().sum().float()


def _histogram(name, grid, block, args, shared):
    x, hist, n, sx, bins = args
    _check_dtype(name, x)
    bins = int(bins)
    if "private" in name and int(shared) < 4 * bins:
        raise ValueError(f"{name}: {shared} bytes of shared memory for {bins} int counters")
    v = _grid_stride(n, sx, x).float()
    v = v[(v >= 0) & (v < 1)]
    idx = torch.clamp((v * bins).floor(), max=bins - 1).long()
    _mem(hist)[:bins] += torch.bincount(idx, minlength=bins).to(hist.dtype)


MODELS = {
    "vector_add": _vector_add,
    "bias_gelu": _bias_gelu,
    "softmax": _softmax,
    "layernorm": _layernorm,
    "rmsnorm": _rmsnorm,
    "matmul_tiled": _matmul,
    "transpose": _transpose,
    "sum_atomic": _sum_atomic,
    "sum_partials": _sum_partials,
    "sum_final": _sum_final,
    "histogram": _histogram,
}


def _model_for(name: str):
    for prefix, model in MODELS.items():
        if name.startswith(prefix):
            return model
    raise KeyError(f"no model for CUDA entry point {name!r}")


@pytest.fixture
def fake_cupy(monkeypatch):
    """Launches go to the models; returns the list of ``(name, grid, block)`` launched."""
    launched = []

    def kernel(src, name, options=None):
        if name not in src.names:
            raise ValueError(f"{name!r} is not an entry point of the {src.op} source ({src.names})")
        return name

    def launch(fn, grid, block, args, shared_mem=0):
        for g in tuple(grid) + tuple(block):
            if int(g) < 1:
                raise ValueError(f"{fn}: empty launch {grid} x {block}")
        if math.prod(block) > 1024:
            raise ValueError(f"{fn}: {math.prod(block)} threads per block, CUDA allows 1024")
        if any(int(g) > 65535 for g in tuple(grid)[1:]):
            raise ValueError(f"{fn}: grid {tuple(grid)}, CUDA allows at most 65535 blocks in y and z")
        launched.append((fn, tuple(grid), tuple(block)))
        _model_for(fn)(fn, grid, block, args, shared_mem)

    monkeypatch.setattr(_cupy, "kernel", kernel)
    monkeypatch.setattr(_cupy, "launch", launch)
    monkeypatch.setattr(_cupy, "check_cuda_tensor", lambda *ts: None)
    monkeypatch.setattr(_cupy, "ptr", lambda t: t)  # the models read the tensor's storage
    return launched


def _cases():
    for op_name, op in OPS.items():
        for prov in op.providers.values():
            if prov.backend != "cupy":
                continue
            for dtype in op.dtypes:
                if not prov.supports(dtype) or dtype in ("fp8", "tf32"):
                    continue
                for layout in ("contig", "padded", "transposed", "strided"):
                    shape = op.test_shapes[-1]
                    yield pytest.param(
                        op_name, prov.name, dtype, shape, layout, id=f"{op_name}-{prov.name}-{dtype}-{layout}"
                    )


@pytest.mark.parametrize("op_name,prov_name,dtype,shape,layout", list(_cases()))
def test_cupy_launcher_matches_reference_through_the_model(fake_cupy, op_name, prov_name, dtype, shape, layout):
    op = OPS[op_name]
    inputs = op.make_inputs(shape, dtype, "cpu")
    ref = op.reference(*inputs)
    if layout != "contig":
        inputs = tuple(make_noncontiguous(t, layout) if isinstance(t, torch.Tensor) else t for t in inputs)
    out = op.providers[prov_name].fn(*inputs)
    assert fake_cupy, "the provider launched nothing"
    compare(op, out, ref, dtype, label=f"{op_name}/{prov_name}/{layout} (model)")


def test_every_cuda_entry_point_has_a_model():
    for src in _cupy.SOURCES.values():
        for name in src.names:
            _model_for(name)


def test_block_edges_are_covered(fake_cupy):
    """Shapes one past each launcher's block: the grid must cover the last element."""
    from kernels import bias_gelu, histogram, reduction

    op = OPS["bias_gelu"]
    x, b = op.make_inputs((3, bias_gelu.CUDA_BLOCK + 1), "fp32", "cpu")
    compare(op, op.providers["cupy"].fn(x, b), op.reference(x, b), "fp32", "bias_gelu edge")
    op = OPS["reduction"]
    n = reduction.CUDA_BLOCK * reduction.CUDA_MAX_BLOCKS + 1  # more elements than threads: grid-stride
    (x,) = op.make_inputs((n,), "fp32", "cpu")
    for p in ("cupy_atomic", "cupy_tree"):
        compare(op, op.providers[p].fn(x), op.reference(x), "fp32", f"reduction {p} edge")
    op = OPS["histogram"]
    x, bins = op.make_inputs((histogram.CUDA_BLOCK + 1, 257), "fp16", "cpu")
    for p in ("cupy_atomic", "cupy_private"):
        compare(op, op.providers[p].fn(x, bins), op.reference(x, bins), "fp16", f"histogram {p} edge")
    op = OPS["matmul"]
    a, bb = op.make_inputs((17, 33, 5), "fp32", "cpu")  # one past the 16x16 tile in M and N
    compare(op, op.providers["cupy"].fn(a, bb), op.reference(a, bb), "fp32", "matmul edge")


def test_bias_gelu_grid_y_is_the_rows_up_to_the_cuda_limit(fake_cupy):
    """One block-row per row up to gridDim.y's limit (65535), then the rows loop
    (grid-stride): the launch and the recorded config use exactly that, and
    every row is computed (mutation: ``_MAX_GRID_Y = 65535`` as ``65534``)."""
    op = OPS["bias_gelu"]
    prov = op.providers["cupy"]
    for M, grid_y in ((65534, 65534), (65535, 65535), (65536, 65535)):
        x, b = op.make_inputs((M, 1), "fp32", "cpu")
        out = prov.fn(x, b)
        assert fake_cupy[-1][1] == (1, grid_y), M
        assert prov.config(x, b)["grid_y"] == grid_y
        compare(op, out, op.reference(x, b), "fp32", f"bias_gelu M={M}")


# ----------------------------------------------------------------------------- negative controls


def _softmax_ignoring_strides(x):
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype)
    fn = _cupy.kernel(_cupy.SOURCES[("softmax", "softmax_f32")], "softmax_f32")
    _cupy.launch(fn, (M,), (256,), (_cupy.ptr(x), _cupy.ptr(out), np.int64(N), np.int64(1), np.int64(N)))  # BUG
    return out


def _bias_gelu_short_grid(x, bias):
    from kernels import bias_gelu

    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype)
    fn = _cupy.kernel(bias_gelu.CUDA_SOURCE, "bias_gelu_f32")
    args = (x, bias, out, np.int64(M), np.int64(N), np.int64(x.stride(0)), np.int64(x.stride(1)), np.int64(1))
    _cupy.launch(fn, (N // bias_gelu.CUDA_BLOCK, M), (bias_gelu.CUDA_BLOCK,), args)  # BUG: floor, not cdiv
    return out


def test_model_rejects_a_launcher_that_ignores_strides(fake_cupy):
    op = OPS["softmax"]
    (x,) = op.make_inputs((7, 1823), "fp32", "cpu")
    compare(op, _softmax_ignoring_strides(x), op.reference(x), "fp32")  # packed rows: invisible
    with pytest.raises(WrongResult):
        compare(op, _softmax_ignoring_strides(make_noncontiguous(x, "transposed")), op.reference(x), "fp32")


def test_model_rejects_a_grid_one_block_short(fake_cupy):
    op = OPS["bias_gelu"]
    x, b = op.make_inputs((3, 300), "fp32", "cpu")
    with pytest.raises(WrongResult):
        compare(op, _bias_gelu_short_grid(x, b), op.reference(x, b), "fp32")


def test_model_rejects_the_wrong_entry_point_for_the_dtype(fake_cupy):
    op = OPS["softmax"]
    (x,) = op.make_inputs((3, 5), "bf16", "cpu")
    out = torch.empty_like(x)
    fn = _cupy.kernel(_cupy.SOURCES[("softmax", "softmax_f32")], "softmax_f16")  # BUG: f16 for bf16 data
    with pytest.raises(TypeError, match="float16"):
        _cupy.launch(fn, (3,), (256,), (x, out, np.int64(5), np.int64(1), np.int64(5)))


def test_cupy_transpose_refuses_more_row_tiles_than_gridDim_y_allows(fake_cupy):
    """M = 65535 tiles of 32 rows launches; one row more needs 65536 blocks
    along y and is refused with that count and the limit in the message, before
    any launch (mutation: the message's ``grid[1]`` as ``grid[2]``)."""
    from kernels import transpose

    prov = OPS["transpose"].providers["cupy_tiled"]
    ok = torch.zeros((65535 * 32, 1), dtype=torch.float32)
    prov.fn(ok)
    assert fake_cupy[-1][1] == (1, 65535)
    n_launched = len(fake_cupy)
    big = torch.zeros((65535 * 32 + 1, 1), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"M=2097121 needs 65536 blocks along y, over CUDA's limit 65535"):
        prov.fn(big)
    assert len(fake_cupy) == n_launched
    assert transpose._MAX_GRID_Y == 65535
