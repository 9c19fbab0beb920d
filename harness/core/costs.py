"""The one cost registry: FLOPs and compulsory bytes of every benchmark case.

Three sources, one entry point (:func:`cost_of`):

- our kernels: ``kernels.<op>.cost()``, evaluated by the benchmark bridge
  (:mod:`harness.measure.bench`) and stored as the record's ``cost`` block;
- Liger-Kernel's CSVs: :func:`liger_cost`, from the row's configuration (the
  importer stores the result in the point's record the same way);
- the OpenBLAS asv suite (``OpenMathLib/BLAS-Benchmarks``): :func:`openblas_cost`,
  from the case's parameters.

Nothing else in :mod:`harness` computes a FLOP or byte count for a case; the
figures derived from a cost and a time come from :mod:`harness.core.metrics`.
Pure: no I/O, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds per unit of a stored time (asv stores seconds, Liger milliseconds).
UNIT_SECONDS = {"seconds": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

_DTYPE_BYTES = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4, "torch.float64": 8}
_DTYPE_NAME = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32", "torch.float64": "fp64"}


def seconds_per_unit(unit: str | None) -> float | None:
    """Seconds in one ``unit`` (``seconds``, ``s``, ``ms``, ``us``, ``ns``; case-insensitive),
    or ``None`` when ``unit`` is not a time unit."""
    return UNIT_SECONDS.get((unit or "").lower())


@dataclass(frozen=True)
class Cost:
    """Analytic cost of one kernel invocation.

    Attributes
    ----------
    flops : int
        Floating-point operations (a fused multiply-add counts as 2).
    bytes_read : int
        Bytes the kernel must read from device memory at least once.
    bytes_written : int
        Bytes the kernel must write to device memory at least once.

    The byte counts are the *compulsory* traffic (each input read once, each
    output written once), as NVBench's ``add_global_memory_reads/writes`` declare
    it, so ``bytes / time`` is the achieved effective bandwidth and the roofline
    floor built from it is a true lower bound.
    """

    flops: int
    bytes_read: int
    bytes_written: int

    def __post_init__(self) -> None:
        for name in ("flops", "bytes_read", "bytes_written"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Cost.{name} must be a non-negative int, got {value!r}")

    @property
    def bytes_total(self) -> int:
        """``bytes_read + bytes_written``."""
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte of compulsory traffic; ``None`` when no bytes move."""
        return self.flops / self.bytes_total if self.bytes_total else None

    def as_dict(self) -> dict:
        return {"flops": self.flops, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written}


@dataclass(frozen=True)
class KernelCost:
    """FLOPs and compulsory bytes of one invocation, the dtype whose peak applies,
    and whether the work runs on tensor cores. ``derivation`` says how."""

    flops: int
    bytes_total: int
    dtype: str
    uses_tensor_cores: bool
    derivation: str

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per byte of compulsory traffic; ``None`` when no bytes move
        (the attribute :func:`harness.core.metrics.compute_metrics` reads)."""
        return self.flops / self.bytes_total if self.bytes_total else None

    def as_dict(self) -> dict:
        return {
            "flops": self.flops,
            "bytes_total": self.bytes_total,
            "dtype": self.dtype,
            "uses_tensor_cores": self.uses_tensor_cores,
            "derivation": self.derivation,
        }


# --------------------------------------------------------------------------- registry


def cost_of(benchmark: str, params, record: dict | None = None) -> tuple[KernelCost | None, str | None]:
    """The cost of one case, from whichever source knows it.

    Parameters
    ----------
    benchmark : str
        asv benchmark name (``benchmarks.gemm.time_gemm``, ``suite.softmax.track_time``,
        ``liger.rms_norm.speed``).
    params : mapping or sequence of (name, value) pairs
        The case's parameters as stored.
    record : dict, optional
        The point's record: our benchmark bridge's (``cost`` with ``flops``,
        ``bytes_read``/``bytes_written`` or ``bytes_total``, ``dtype``) or the
        Liger importer's (``cost`` or ``cost_reason``).

    Returns
    -------
    (KernelCost, None) or (None, reason)
        The record's cost when it has a complete one; else the OpenBLAS rule for
        an OpenBLAS case (``benchmarks.*`` with a ``variant`` parameter); else
        ``None`` with the record's ``cost_reason`` or ``"no cost known"``.
    """
    rec = record or {}
    c = rec.get("cost")
    if isinstance(c, dict):
        total = c.get("bytes_total")
        if total is None:
            total = (c.get("bytes_read") or 0) + (c.get("bytes_written") or 0)
        dtype = c.get("dtype") or rec.get("dtype")
        if c.get("flops") is not None and dtype:
            return KernelCost(
                int(c["flops"]),
                int(total),
                str(dtype),
                bool(c.get("uses_tensor_cores", rec.get("uses_tensor_cores", False))),
                str(c.get("derivation") or "recorded by the benchmark"),
            ), None
    p = dict(params)
    if is_openblas_case(benchmark, p):
        return openblas_cost(benchmark, p)
    return None, rec.get("cost_reason") or "no cost known"


def is_openblas_case(benchmark: str, params: dict) -> bool:
    """An OpenBLAS asv case: ``benchmarks.<kernel>.time_<kernel>`` with a ``variant``."""
    return benchmark.startswith("benchmarks.") and "variant" in params


# --------------------------------------------------------------------------- Liger


def liger_cost(
    kernel: str, mode: str, x_name: str, x_value: float, config: dict
) -> tuple[KernelCost | None, str | None]:
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
        return KernelCost(
            sum(p[0] for p in parts),
            sum(p[1] for p in parts),
            _DTYPE_NAME[dt],
            False,
            f"{kernel} {mode}: M={M}, {x_name}={H}, {dt}",
        ), None
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
        return KernelCost(
            f_fwd * mult,
            b_pass * passes,
            _DTYPE_NAME[dt],
            True,
            f"{kernel} MLP {mode}: tokens={tokens}, hidden={h}, intermediate={i}, {dt}",
        ), None
    return None, f"{kernel}: cost not derivable from the benchmark configuration"


# --------------------------------------------------------------------------- OpenBLAS

_BLAS_DTYPE = {
    "s": ("fp32", 4, False),
    "d": ("fp64", 8, False),
    "c": ("fp32", 8, True),
    "z": ("fp64", 16, True),
    "dz": ("fp64", 16, True),
}


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
        f, b = 2 * n**3 * k4, 3 * n * n * e
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
        f, b = int((2 * n**3 / 3 + 2 * n * n) * k4), (n * n + 2 * n) * e
    else:
        return None, f"{benchmark}: no closed-form cost"
    return KernelCost(int(f), int(b), dtype, False, f"{kernel} {variant} n={n}"), None
