"""Tolerances that mean something: each op's per-dtype tolerance against an error
budget written in units of its dtype's unit roundoff, and controls run through
``check_provider`` that sit just outside (rejected) and just inside (accepted) the
tolerance, relative to ``|reference|``, plus a down-cast control per op and dtype.

The budget is the derivation of the tolerance: how many roundings of the output
dtype the op's arithmetic and accumulation can cost with the suite's inputs. A
tolerance above its budget fails here, so loosening any tolerance by 10x fails
(every tolerance sits within 4x of its budget); one below a single rounding
would reject a correctly rounded result and fails too.
"""

from __future__ import annotations

import pytest
import torch

import kernels
from kernels import _backends
from kernels._check import LAYOUTS, WrongResult, check_provider, make_noncontiguous

OPS = kernels.all_ops()

#: Unit roundoff u = 2**-p of the format a value is rounded to (p = significand
#: bits including the implicit one): fp32 24, tf32 and fp16 11, bf16 8 (IEEE 754;
#: NVIDIA's TF32 is 10 stored mantissa bits, so 11).
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}

#: The dtype each op's output is rounded to, when it is not the op's dtype.
OUTPUT_ROUNDING = {
    ("matmul", "fp8"): "bf16",  # fp8 GEMMs write bf16
    ("reduction", "fp16"): "fp32",  # the sum is the fp32 accumulator whatever the input
    ("reduction", "bf16"): "fp32",
}

#: Error budget per op and dtype as (atol, rtol) in units of u of the output
#: rounding. Outputs are O(1) in every op's inputs (|out| < ~5), so an absolute
#: budget in units of u means the same as a relative one. 0 means exact.
BUDGET_ULPS = {
    # One correctly rounded add: <= 1u; 4u leaves room for FTZ/ulp-sized flushes.
    "vector_add": {"fp32": (4, 4), "fp16": (4, 4), "bf16": (4, 4)},
    # fp32: CuPy's __expf is 2 + 1.16*|x| ulp (CUDA C Programming Guide, "Intrinsic
    # Functions") with |x| <= ~25 for scale-3 inputs, about 60u; the row sum of up
    # to N = 1823 terms in fp32 adds log2(N)u per level of the tree: 256u.
    # 16-bit: fp32 inside, one output rounding (1u) in [0, 1]; the eager unfused
    # provider rounds exp and the sum too: 8u relative, 2-4u absolute.
    "softmax": {"fp32": (32, 256), "fp16": (4, 8), "bf16": (2, 8)},
    # fp32: a K-term dot product errs by up to K*u*sum|a||b| (Higham, "Accuracy and
    # Stability of Numerical Algorithms", 2nd ed., sec. 3.1); with O(1) outputs and
    # the largest benchmarked K = 8192 that is 8192u. tf32: both operands rounded
    # to tf32 (2u per product) under fp32 accumulation, relative to O(1) outputs
    # with cancellation: 64u. fp16/bf16: one output rounding plus tensor-core
    # accumulation order: 32u / 16u. fp8: inputs exact in the reference; bf16
    # output rounding (1u) plus Hopper's ~14-bit fp8 accumulation (arXiv:2412.19437
    # sec. 3.3.2), about 1u more: 4u of bf16.
    "matmul": {"fp32": (8192, 8192), "tf32": (64, 64), "fp16": (32, 32), "bf16": (16, 16), "fp8": (4, 4)},
    # fp32: mean and variance over N <= 8192 in fp32 trees (log2 N = 13u each),
    # amplified by (mean/std)^2 ~ 4-9 for x ~ N(2, 1) in the shifted sums: 256u.
    # 16-bit: the eager sequence rounds mean, x - mean, rstd, *w, +b in the input
    # dtype (5 roundings, each scaled by |out| <~ 3): 16u absolute, 8u relative.
    "layernorm": {"fp32": (256, 256), "fp16": (16, 16), "bf16": (16, 8)},
    # As layernorm: sum of squares in fp32, rstd, two products; the eager
    # sequence rounds x^2, the mean, rstd and two products in the input dtype.
    "rmsnorm": {"fp32": (256, 256), "fp16": (16, 16), "bf16": (16, 8)},
    # fp32: two chained GEMMs over S <= 4096 keys plus exp2 approximations in the
    # online softmax: 512u. 16-bit: p rounded to the input dtype before p @ v (1u
    # of a convex combination), one output rounding, fp32 accumulation: 8u.
    "attention": {"fp32": (512, 512), "fp16": (8, 8), "bf16": (8, 8)},
    # A copy: bit-exact.
    "transpose": {"fp32": (0, 0), "fp16": (0, 0), "bf16": (0, 0)},
    # fp32 output for every input dtype (the inputs are exact in the reference):
    # up to 2**28 / 4096 = 65536 fp32 atomic adds into one accumulator, random
    # rounding sqrt(65536) = 256u typical, 8x for tails: 2048u.
    "reduction": {"fp32": (2048, 2048), "fp16": (2048, 2048), "bf16": (2048, 2048)},
    # Integer counts under one exact bin rule.
    "histogram": {"fp32": (0, 0), "fp16": (0, 0), "bf16": (0, 0)},
    # fp32: PyTorch's vectorised CPU GELU errs by 1.16e-6 absolute (~20u, measured,
    # see kernels/bias_gelu.py), libdevice erff by 2 ulp: 64u absolute, 256u
    # relative near the zeros of gelu. 16-bit: fp32 inside plus the eager
    # intermediate rounding of x + bias passed through gelu' <= 1.13: 8u.
    "bias_gelu": {"fp32": (64, 256), "fp16": (8, 8), "bf16": (8, 8)},
}


def _u(op_name: str, dtype: str) -> float:
    return UNIT_ROUNDOFF[OUTPUT_ROUNDING.get((op_name, dtype), dtype)]


OP_DTYPES = [pytest.param(name, dt, id=f"{name}-{dt}") for name, op in OPS.items() for dt in op.dtypes]


def test_every_op_and_dtype_has_a_budget():
    missing = [(n, dt) for n, op in OPS.items() for dt in op.dtypes if dt not in BUDGET_ULPS.get(n, {})]
    assert missing == []


@pytest.mark.parametrize("op_name,dtype", OP_DTYPES)
def test_tolerance_within_its_error_budget(op_name, dtype):
    tol = OPS[op_name].tolerance(dtype)
    k_atol, k_rtol = BUDGET_ULPS[op_name][dtype]
    u = _u(op_name, dtype)
    slack = 1 + 1e-9  # decimal literals such as 1.2e-7 for 2u
    assert tol.atol <= k_atol * u * slack, f"atol {tol.atol:g} = {tol.atol / u:.1f}u > budget {k_atol}u"
    assert tol.rtol <= k_rtol * u * slack, f"rtol {tol.rtol:g} = {tol.rtol / u:.1f}u > budget {k_rtol}u"
    if k_rtol:
        # Tighter than one rounding would reject a correctly rounded result.
        assert tol.rtol >= u, f"rtol {tol.rtol:g} < one rounding ({u:g})"


def _edge(op, dtype, factor):
    """The reference itself, moved by ``factor`` times the allowed error
    ``atol + rtol * |ref|`` (alternating signs). For an exact op (zero tolerance)
    ``factor > 1`` moves one element by one ulp (floating) or one count (integer)."""
    tol = op.tolerance(dtype)

    def fn(*inputs):
        ref = op.reference(*inputs)
        if tol.atol == 0 and tol.rtol == 0:
            out = ref.clone()
            if factor <= 1:
                return out
            flat = out.view(-1)
            i = flat.numel() // 2
            if flat.dtype.is_floating_point:
                step = flat[i : i + 1].to(kernels._base.torch_dtype(dtype))
                flat[i] = torch.nextafter(step, torch.full_like(step, float("inf"))).double()[0]
            else:
                flat[i] += 1
            return out
        ref = ref.double()
        sign = torch.ones_like(ref).view(-1)
        sign[1::2] = -1
        return ref + factor * sign.view(ref.shape) * (tol.atol + tol.rtol * ref.abs())

    return fn


@pytest.mark.parametrize("op_name,dtype", OP_DTYPES)
def test_just_outside_the_tolerance_is_rejected(op_name, dtype):
    op = OPS[op_name]
    with pytest.raises(WrongResult):
        check_provider(op, _edge(op, dtype, 1.5), op.test_shapes[-1], dtype, "cpu")


@pytest.mark.parametrize("op_name,dtype", OP_DTYPES)
def test_just_inside_the_tolerance_is_accepted(op_name, dtype):
    op = OPS[op_name]
    check_provider(op, _edge(op, dtype, 0.5), op.test_shapes[-1], dtype, "cpu")


#: The next lower precision a down-cast kernel would silently compute in. tf32
#: goes to fp8: at the tests' shapes its tolerance cannot tell tf32 from bf16
#: math (a bf16 down-cast passes), which the budget above makes explicit.
DOWNCAST = {
    "fp32": torch.bfloat16,
    "tf32": torch.float8_e4m3fn,
    "fp16": torch.bfloat16,
    "bf16": torch.float8_e4m3fn,
    "fp8": torch.float8_e5m2,
}


def downcast(fn, low: torch.dtype):
    """``fn`` computing on inputs rounded to ``low`` (and its floating output too),
    in the original dtypes: a kernel that silently loses precision."""

    def wrong(*inputs):
        cast = [
            t.to(low).to(t.dtype) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else t for t in inputs
        ]
        out = fn(*cast)
        return out.to(low).to(out.dtype) if out.dtype.is_floating_point else out

    return wrong


@pytest.mark.parametrize("op_name,dtype", OP_DTYPES)
def test_downcast_control_is_rejected(op_name, dtype):
    op = OPS[op_name]
    prov = op.providers["torch"]
    with pytest.raises(WrongResult):
        check_provider(op, downcast(prov.fn, DOWNCAST[dtype]), op.test_shapes[-1], dtype, "cpu")


# --- layouts ------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(19,), (7, 19), (19, 1), (1, 19), (2, 3, 37, 24)])
def test_make_noncontiguous_really_is_noncontiguous(layout, shape):
    t = torch.randn(shape)
    v = make_noncontiguous(t, layout)
    assert not v.is_contiguous() and torch.equal(v, t) and v.data_ptr() != t.data_ptr()


def test_layouts_have_the_strides_they_promise():
    t = torch.randn(7, 19)
    assert make_noncontiguous(t, "padded").stride() == (22, 1)
    assert make_noncontiguous(t, "transposed").stride() == (1, 7)
    assert make_noncontiguous(t, "strided").stride() == (38, 2)
    with pytest.raises(ValueError, match="unknown layout"):
        make_noncontiguous(t, "diagonal")


@pytest.mark.parametrize("op_name", list(OPS))
def test_every_op_input_of_two_or_more_elements_becomes_noncontiguous(op_name):
    op = OPS[op_name]
    for layout in LAYOUTS:
        for t in op.make_inputs(op.test_shapes[-1], op.dtypes[0], "cpu"):
            if isinstance(t, torch.Tensor) and t.numel() > 1:
                assert not make_noncontiguous(t, layout).is_contiguous(), (op_name, layout, tuple(t.shape))


def _runnable_providers():
    for op_name, op in OPS.items():
        for prov_name, prov in op.providers.items():
            if not _backends.availability(prov.backend).runnable:
                continue
            for dtype in op.dtypes:
                if prov.supports(dtype):
                    yield pytest.param(op_name, prov_name, dtype, id=f"{op_name}-{prov_name}-{dtype}")


@pytest.mark.parametrize("op_name,prov_name,dtype", list(_runnable_providers()))
def test_providers_copy_only_when_they_say_so(op_name, prov_name, dtype, monkeypatch):
    """A provider declaring ``needs_contiguous`` copies strided inputs explicitly;
    every other one hands them to its kernel as they are (no hidden ``.contiguous()``)."""
    op = OPS[op_name]
    prov = op.providers[prov_name]
    device = _backends.provider_device(prov.backend)
    shape = op.test_shapes[1]
    inputs = tuple(
        make_noncontiguous(t) if isinstance(t, torch.Tensor) else t for t in op.make_inputs(shape, dtype, device)
    )
    copies = []
    real = torch.Tensor.contiguous

    def is_input(t):  # the very view passed in (not, say, a transposed output view of it)
        return any(
            isinstance(i, torch.Tensor)
            and t.data_ptr() == i.data_ptr()
            and t.shape == i.shape
            and t.stride() == i.stride()
            for i in inputs
        )

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if out.data_ptr() != self.data_ptr() and is_input(self):
            copies.append(tuple(self.shape))
        return out

    monkeypatch.setattr(torch.Tensor, "contiguous", spy)
    try:
        prov.fn(*inputs)
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    if prov.copies_noncontiguous(dtype):
        # torch's fp8 GEMM on a GPU zero-pads odd shapes into fresh buffers: a copy
        # too, but not through .contiguous().
        if not (dtype == "fp8" and device != "cpu"):
            assert copies, f"{prov_name} declares needs_contiguous but made no copy"
    else:
        assert copies == [], f"{prov_name} copied {copies} without declaring needs_contiguous"


# --- bf16 Triton with the dot up-cast -------------------------------------------


def _upcast_cases():
    from kernels import attention, matmul

    variants = {
        "matmul": lambda a, b, *_: matmul.triton_matmul(a, b, upcast_dot=True),
        "attention": lambda q, k, v, causal: attention.triton_attention(q, k, v, causal, upcast_dot=True),
    }
    for op_name, fn in variants.items():
        shapes = OPS[op_name].test_shapes
        for shape in shapes:
            # Strided layouts on the smaller shapes: the interpreter's GEMM at the
            # largest one costs seconds per layout.
            for layout in (False,) if shape == shapes[-1] else (False, "padded", "transposed"):
                yield pytest.param(
                    op_name, fn, shape, layout, id=f"{op_name}-{'x'.join(map(str, shape))}-{layout or 'contig'}"
                )


@pytest.mark.skipif(not _backends.availability("triton").runnable, reason="triton not runnable here")
@pytest.mark.parametrize("op_name,fn,shape,layout", list(_upcast_cases()))
def test_bf16_triton_with_upcast_dot_matches_reference(op_name, fn, shape, layout):
    """bf16 loads, masks and stores of the matmul and attention kernels, checked
    on the CPU where a bf16 ``tl.dot`` is wrong (the strict xfails in
    tests/test_kernels.py keep that gap visible)."""
    check_provider(OPS[op_name], fn, shape, "bf16", _backends.provider_device("triton"), noncontiguous=layout)
