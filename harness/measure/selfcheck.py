"""``kernelwatch selfcheck``: check the timing itself on a CUDA machine.

Three checks, each a pure decision function over measured numbers (so the
logic is tested on synthetic inputs without a GPU):

1. **Copy bandwidth** (:func:`check_copy_bandwidth`): a device-to-device copy much
   larger than L2, timed ``cold``, reaches at least
   :data:`COPY_BW_MIN_FRACTION` (80%) of the datasheet DRAM bandwidth, counting
   bytes read plus bytes written. A well-written copy reaches about 90% on
   current HBM parts (4.3 of 4.8 TB/s measured on an H200); much less means the
   timer includes something else (host overhead, a flush, a sync).
2. **Timer agreement** (:func:`check_timer_agreement`): our ``cold`` median and
   ``triton.testing.do_bench(..., return_mode="median")`` agree within
   :data:`TIMER_AGREEMENT_REL` (2%) on the same kernels. ``do_bench`` (triton
   ``testing.py``) times the same way we do in ``cold`` mode: CUDA events
   around each call, a 256 MB buffer zeroed before every call outside the
   events, synchronise at the end. The two are run in alternating rounds
   (:data:`ROUNDS`) so a slow clock drift cannot favour one of them, and the
   medians of the rounds are compared.
3. **Cold is never faster than hot beyond noise** (:func:`check_cold_not_faster_rounds`),
   on the kernels where the L2 matters (the two copies, ``Kernel.l2_matters``):
   flushing L2 can only remove cache hits, so a ``cold`` time below the ``hot``
   one means the flush leaked into the timed region or the samples are
   misassigned. Cold and hot are timed in :data:`ROUNDS` interleaved rounds
   (cold-hot, hot-cold, ...), each round's median clock-normalised
   (:func:`round_time`), and the check fails only when cold is faster in every
   round and the median gap exceeds :data:`COLD_HOT_FLOOR_REL` (1%) plus, for a
   working set larger than L2, the write-back allowance
   (:func:`writeback_allowance`): ``cold`` flushes by *reading* a buffer, so a
   cold copy starts with a clean L2 while a hot one first writes back the dirty
   lines its previous call left, up to an L2's worth (the asymmetry
   :func:`harness.core.metrics.dram_bytes_lower_bound` models); on
   ``copy_large`` a correct timer finds cold 1-2% faster (issue 26 finding 6).
   Not on the bf16 matmul: its data is not what the L2 changes, and ``hot``
   runs back to back at the power cap, so a correct timer finds hot *slower* there.
4. **The flush evicts** (:func:`check_flush_evicts`), on the L2-resident copy
   (``Kernel.fits_l2``): hot reads its working set from L2, cold must fetch it
   from DRAM, so cold must be slower by at least :data:`FLUSH_EVICTS_MIN_REL`
   (10%) in the median of the rounds; within :data:`FLUSH_NO_EFFECT_REL` (2%)
   the flush evidently did not evict and the check fails.

Every measured time is also passed through the integrity guard
(:func:`harness.metrics.integrity_guard`) against the datasheet.

Exit codes (the CLI's convention): 0 every check passed; 1 a check failed (the
timing is wrong on this machine); 2 nothing to check here (no CUDA device: the
report says so) or no check could decide.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from harness.core import metrics, records
from harness.measure import timing

REPORT_SCHEMA = 1
COPY_BW_MIN_FRACTION = 0.80
TIMER_AGREEMENT_REL = 0.02
#: ``cudaEventElapsedTime`` has a resolution of about 0.5 us (CUDA Runtime API
#: documentation); a relative tolerance below that is not measurable.
EVENT_RESOLUTION_S = 0.5e-6
COLD_HOT_FLOOR_REL = 0.01
#: Check 4: an L2-resident copy timed cold must be at least this much slower than hot
#: (an H200's L2 serves a copy about twice as fast as its HBM) to pass ...
FLUSH_EVICTS_MIN_REL = 0.10
#: ... and fails when it is within this of hot: the flush did not evict.
FLUSH_NO_EFFECT_REL = 0.02
ROUNDS = 3

PASS = "pass"
FAIL = "fail"
UNDECIDED = "undecided"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_CHECK = 2


@dataclass
class Check:
    """Outcome of one check on one kernel.

    ``status`` is ``pass``, ``fail`` or ``undecided`` (not enough information,
    e.g. no datasheet bandwidth for this GPU, or too few samples for a CI);
    ``value`` and ``threshold`` are the compared numbers in the unit ``unit``.
    """

    name: str
    kernel: str
    status: str
    reason: str
    value: float | None = None
    threshold: float | None = None
    unit: str | None = None
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------- pure decisions


def _positive(x) -> bool:
    return metrics.valid_time(x) is None


def check_copy_bandwidth(
    kernel: str,
    bytes_moved: int,
    time_s: float | None,
    peak_gbps: float | None,
    min_fraction: float = COPY_BW_MIN_FRACTION,
) -> Check:
    """Pass when ``bytes_moved / time_s`` reaches ``min_fraction`` of ``peak_gbps``.

    ``value`` is the fraction reached. Undecided without a datasheet bandwidth
    or without a usable time. Raises ``ValueError`` for ``bytes_moved <= 0`` or a
    fraction outside (0, 1].
    """
    if bytes_moved <= 0:
        raise ValueError(f"bytes_moved must be positive, got {bytes_moved}")
    if not (0 < min_fraction <= 1):
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction}")
    name = "copy_bandwidth"
    if not _positive(time_s):
        return Check(name, kernel, UNDECIDED, f"no usable time ({metrics.valid_time(time_s)})", threshold=min_fraction)
    gbps = bytes_moved / time_s / 1e9
    if not peak_gbps:
        return Check(
            name,
            kernel,
            UNDECIDED,
            f"measured {gbps:.1f} GB/s, but this GPU has no datasheet bandwidth in harness/data/gpu_specs.csv",
            threshold=min_fraction,
            details={"gbps": gbps},
        )
    frac = gbps / peak_gbps
    ok = frac >= min_fraction
    return Check(
        name,
        kernel,
        PASS if ok else FAIL,
        f"copy reached {gbps:.1f} GB/s = {frac:.1%} of the datasheet {peak_gbps:.0f} GB/s "
        f"({'>=' if ok else '<'} {min_fraction:.0%})",
        value=frac,
        threshold=min_fraction,
        unit="fraction of datasheet bandwidth",
        details={"gbps": gbps, "peak_gbps": peak_gbps, "bytes_moved": bytes_moved, "time_s": time_s},
    )


def check_timer_agreement(
    kernel: str,
    ours_s: Sequence[float],
    theirs_s: Sequence[float],
    tol_rel: float = TIMER_AGREEMENT_REL,
    resolution_s: float = EVENT_RESOLUTION_S,
) -> Check:
    """Pass when the median of ``ours_s`` and of ``theirs_s`` differ by at most the
    tolerance, relative to ``theirs`` (the reference timer ``triton.testing.do_bench``).

    The tolerance is ``max(tol_rel, resolution_s / median(theirs))``: 2% for any
    kernel longer than 25 us, the event timer's resolution for shorter ones.
    Each sequence holds one median per round, seconds. ``value`` is
    ``median(ours) / median(theirs) - 1``. Undecided when either side has no
    usable time. Raises ``ValueError`` for ``tol_rel <= 0`` or ``resolution_s < 0``.
    """
    if resolution_s < 0:
        raise ValueError(f"resolution_s must be >= 0, got {resolution_s}")
    if tol_rel <= 0:
        raise ValueError(f"tol_rel must be positive, got {tol_rel}")
    name = "timer_agreement"
    ours = [x for x in ours_s if _positive(x)]
    theirs = [x for x in theirs_s if _positive(x)]
    if not ours or not theirs:
        return Check(
            name,
            kernel,
            UNDECIDED,
            "no usable time from " + ("our timer" if not ours else "do_bench"),
            threshold=tol_rel,
        )
    a, b = statistics.median(ours), statistics.median(theirs)
    diff = a / b - 1
    tol = max(tol_rel, resolution_s / b)
    ok = abs(diff) <= tol
    return Check(
        name,
        kernel,
        PASS if ok else FAIL,
        f"ours {a * 1e3:.4g} ms vs do_bench {b * 1e3:.4g} ms: {diff:+.2%} ({'within' if ok else 'beyond'} {tol:.1%})",
        value=diff,
        threshold=tol,
        unit="relative difference",
        details={"ours_s": list(ours), "do_bench_s": list(theirs)},
    )


def check_cold_not_faster(
    kernel: str, cold_samples: Sequence[float], hot_samples: Sequence[float], floor_rel: float = COLD_HOT_FLOOR_REL
) -> Check:
    """Fail when ``cold`` is faster than ``hot`` beyond noise.

    Beyond noise = the 99% median CIs do not overlap (cold's upper bound below
    hot's lower bound) and ``1 - p50(cold) / p50(hot) > floor_rel``. ``value`` is
    ``p50(cold) / p50(hot) - 1`` (negative: cold faster). Undecided when either
    side has too few samples for a 99% CI (fewer than 8).
    """
    name = "cold_not_faster_than_hot"
    cold = [x for x in cold_samples if _positive(x)]
    hot = [x for x in hot_samples if _positive(x)]
    ci_c, ci_h = timing.median_ci(cold), timing.median_ci(hot)
    if ci_c is None or ci_h is None:
        return Check(
            name,
            kernel,
            UNDECIDED,
            f"too few samples for a 99% median CI (cold {len(cold)}, hot {len(hot)})",
            threshold=floor_rel,
        )
    pc, ph = statistics.median(cold), statistics.median(hot)
    rel = pc / ph - 1
    faster = ci_c[1] < ci_h[0] and -rel > floor_rel
    details = {"cold_p50_s": pc, "hot_p50_s": ph, "cold_ci_s": list(ci_c), "hot_ci_s": list(ci_h)}
    if faster:
        return Check(
            name,
            kernel,
            FAIL,
            f"cold median {pc * 1e3:.4g} ms is {-rel:.2%} below hot {ph * 1e3:.4g} ms "
            "and the 99% CIs do not overlap: the flush leaks into the timed region",
            value=rel,
            threshold=floor_rel,
            unit="relative difference",
            details=details,
        )
    return Check(
        name,
        kernel,
        PASS,
        f"cold {pc * 1e3:.4g} ms vs hot {ph * 1e3:.4g} ms ({rel:+.2%})",
        value=rel,
        threshold=floor_rel,
        unit="relative difference",
        details=details,
    )


def round_time(res) -> tuple[float | None, bool]:
    """A round's time for check 3: the clock-normalised median
    (``p50_clock_normalised_s``, :func:`harness.measure.clock_batches.normalise`) when NVML gave
    clocks, else the raw median; and whether it was normalised."""
    if res.p50_clock_normalised_s is not None:
        return res.p50_clock_normalised_s, True
    return res.p50_s, False


def check_cold_not_faster_rounds(
    kernel: str, cold_s: Sequence[float | None], hot_s: Sequence[float | None], floor_rel: float = COLD_HOT_FLOOR_REL
) -> Check:
    """Check 3 on interleaved rounds: ``cold_s[i]`` and ``hot_s[i]`` were timed
    back to back in round ``i`` (seconds, clock-normalised where possible).

    Fails when cold is below hot in *every* paired round and the median of
    ``cold / hot - 1`` is below ``-floor_rel``: a leak of the flush is
    systematic, while a clock or power change between two runs flips sign
    across interleaved rounds. ``value`` is that median. Undecided with fewer
    than two usable pairs.
    """
    name = "cold_not_faster_than_hot"
    pairs = [(c, h) for c, h in zip(cold_s, hot_s) if _positive(c) and _positive(h)]
    if len(pairs) < 2:
        return Check(name, kernel, UNDECIDED, f"{len(pairs)} usable cold/hot round pairs (need 2)", threshold=floor_rel)
    rel = [c / h - 1 for c, h in pairs]
    med = statistics.median(rel)
    details = {"cold_s": [c for c, _ in pairs], "hot_s": [h for _, h in pairs], "rel_by_round": rel}
    if all(r < 0 for r in rel) and -med > floor_rel:
        return Check(
            name,
            kernel,
            FAIL,
            f"cold faster than hot in all {len(rel)} interleaved rounds, median "
            f"{-med:.2%}: the flush leaks into the timed region",
            value=med,
            threshold=floor_rel,
            unit="relative difference",
            details=details,
        )
    return Check(
        name,
        kernel,
        PASS,
        f"cold vs hot over {len(rel)} interleaved rounds: median {med:+.2%}",
        value=med,
        threshold=floor_rel,
        unit="relative difference",
        details=details,
    )


def writeback_allowance(cost, l2_bytes: int | None) -> float:
    """How much faster than hot a correct ``cold`` call may be, relative: the share of
    the call's bytes that a hot call additionally writes back to DRAM (dirty output
    lines of its previous call, at most an L2's worth) and a read-flushed cold call
    does not. Zero when the working set fits in L2 (hot then overwrites its lines
    in place) or the L2 size is unknown."""
    total = cost.bytes_total
    if not l2_bytes or total <= 0 or total <= l2_bytes:
        return 0.0
    return min(l2_bytes, cost.bytes_written) / total


def check_flush_evicts(
    kernel: str,
    cold_s: Sequence[float | None],
    hot_s: Sequence[float | None],
    min_rel: float = FLUSH_EVICTS_MIN_REL,
    none_rel: float = FLUSH_NO_EFFECT_REL,
) -> Check:
    """Check 4 on the interleaved rounds of an L2-resident kernel: pass when the
    median of ``cold / hot - 1`` is at least ``min_rel``, fail when it is below
    ``none_rel`` (cold as fast as hot: the flush left the working set in L2),
    undecided in between or with fewer than two usable pairs. ``value`` is that median."""
    name = "flush_evicts"
    pairs = [(c, h) for c, h in zip(cold_s, hot_s) if _positive(c) and _positive(h)]
    if len(pairs) < 2:
        return Check(name, kernel, UNDECIDED, f"{len(pairs)} usable cold/hot round pairs (need 2)", threshold=min_rel)
    rel = [c / h - 1 for c, h in pairs]
    med = statistics.median(rel)
    details = {"rel_by_round": rel, "fail_below": none_rel}
    kw = dict(value=med, threshold=min_rel, unit="relative difference", details=details)
    if med < none_rel:
        why = f"cold is only {med:+.2%} vs hot on an L2-resident copy: the flush does not evict the L2"
        return Check(name, kernel, FAIL, why, **kw)
    if med >= min_rel:
        return Check(name, kernel, PASS, f"cold {med:+.2%} slower than hot: the flush evicts", **kw)
    return Check(name, kernel, UNDECIDED, f"cold only {med:+.2%} slower than hot (< {min_rel:.0%})", **kw)


def check_guard(kernel: str, cost, time_s: float | None, datasheet, dram_bytes: int | None = None) -> Check:
    """Pass when the measured time is physically possible
    (:func:`harness.metrics.integrity_guard` against the datasheet, holding
    ``dram_bytes`` against its bandwidth when given)."""
    name = "integrity_guard"
    if not _positive(time_s):
        return Check(name, kernel, FAIL, f"invalid time: {metrics.valid_time(time_s)}")
    if datasheet is None:
        return Check(name, kernel, UNDECIDED, "no datasheet peaks for this GPU")
    bug = metrics.integrity_guard(cost, time_s, datasheet, dram_bytes=dram_bytes)
    return Check(name, kernel, FAIL if bug else PASS, bug or "within the datasheet roofline")


def overall(checks: Sequence[Check]) -> tuple[str, int]:
    """``(status, exit code)``: ``fail``/1 if any check failed, else ``pass``/0 if
    at least one passed, else ``undecided``/2."""
    if any(c.status == FAIL for c in checks):
        return FAIL, EXIT_FAILED
    if any(c.status == PASS for c in checks):
        return PASS, EXIT_OK
    return UNDECIDED, EXIT_CANNOT_CHECK


# --------------------------------------------------------------------- measurement (CUDA)


@dataclass
class Kernel:
    """One kernel the self-check times: ``fn()`` launches it on the current stream.
    ``l2_matters``: cold and hot differ through the L2 (check 3 applies);
    ``fits_l2``: its working set fits in L2, so hot must beat cold (check 4)."""

    name: str
    fn: Callable[[], object]
    cost: object  # kernels._base.Cost
    description: str
    l2_matters: bool = False
    fits_l2: bool = False


def _kernels(torch, l2_bytes: int | None, quick: bool) -> list[Kernel]:
    from harness.core.costs import Cost

    l2 = l2_bytes or (50 << 20)
    out = []
    big = max(8 * l2, (256 << 20) if quick else (1 << 30))
    src = torch.ones(big // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    out.append(
        Kernel(
            "copy_large",
            lambda: dst.copy_(src),
            Cost(0, big, big),
            f"torch copy_ of {big / 2**20:.0f} MiB (>= 8x L2): DRAM bandwidth",
            l2_matters=True,
        )
    )
    small = max(1 << 20, l2 // 4)  # src + dst = L2/2: stays in L2 when hot
    s_src = torch.ones(small // 4, dtype=torch.float32, device="cuda")
    s_dst = torch.empty_like(s_src)
    out.append(
        Kernel(
            "copy_l2_resident",
            lambda: s_dst.copy_(s_src),
            Cost(0, small, small),
            f"torch copy_ of {small / 2**20:.0f} MiB (src + dst = L2/2): hot must be faster than cold",
            l2_matters=True,
            fits_l2=True,
        )
    )
    n = 2048 if quick else 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    out.append(
        Kernel(
            f"matmul_bf16_{n}",
            lambda: torch.matmul(a, b),
            Cost(2 * n**3, 2 * 2 * n * n, 2 * n * n),
            f"torch.matmul bf16 {n}^3: compute-bound",
        )
    )
    try:
        import kernels
        from kernels import _backends

        op = kernels.get_op("vector_add")
        prov = op.providers.get("triton")
        if prov is not None and _backends.availability(prov.backend).timeable:
            shape = (1 << 24,) if quick else (1 << 26,)
            ins = op.make_inputs(shape, "fp32", "cuda", seed=0)
            out.append(
                Kernel(
                    "triton_vector_add",
                    lambda: prov.fn(*ins),
                    op.cost(shape, "fp32"),
                    f"kernelwatch's Triton vector_add, n={shape[0]} fp32",
                )
            )
    except Exception as exc:  # the self-check still runs on the torch kernels
        print(f"kernelwatch selfcheck: Triton vector_add unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
    return out


def _summary(r: timing.TimingResult) -> dict:
    return {
        "p50_s": r.p50_s,
        "p20_s": r.p20_s,
        "p80_s": r.p80_s,
        "ci_rel": r.ci_rel,
        "n_samples": len(r.samples_s),
        "converged": r.converged,
        "stop_reason": r.stop_reason,
        "flush_bytes": r.flush_bytes,
        "clocks": r.clocks,
        "p50_clock_normalised_s": r.p50_clock_normalised_s,
        "p50_unthrottled_s": r.p50_unthrottled_s,
    }


def _no_cuda_report(reason: str) -> dict:
    return {
        "schema": REPORT_SCHEMA,
        "kind": "kernelwatch-selfcheck",
        "date": records.now_iso(),
        "status": "no_cuda",
        "exit_code": EXIT_CANNOT_CHECK,
        "reason": reason,
        "harness_version": _harness_version(),
        "device": None,
        "checks": [],
        "measurements": {},
        "thresholds": _thresholds(),
    }


def _harness_version() -> str:
    from harness import __version__

    return __version__


def _thresholds() -> dict:
    return {
        "copy_bw_min_fraction": COPY_BW_MIN_FRACTION,
        "timer_agreement_rel": TIMER_AGREEMENT_REL,
        "cold_hot_floor_rel": COLD_HOT_FLOOR_REL,
        "rounds": ROUNDS,
        "peak_margin": metrics.PEAK_MARGIN,
    }


def run(quick: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    """Run the self-check on this machine's CUDA device and return the report.

    Returns
    -------
    dict
        ``{"schema", "kind", "date", "status", "exit_code", "reason", "device",
        "harness_version", "thresholds", "checks": [...], "measurements": {kernel: ...}}``.
        Without CUDA: ``status == "no_cuda"``, ``exit_code == 2`` and no checks.
        Never raises for a kernel that cannot be timed: its checks are
        ``undecided`` with the error as reason.
    """
    say = progress or (lambda m: None)
    try:
        import torch

        has_cuda = bool(torch.cuda.is_available())
    except Exception as exc:
        return _no_cuda_report(f"torch cannot query CUDA ({type(exc).__name__}: {exc})")
    if not has_cuda:
        return _no_cuda_report(
            "no CUDA device visible (torch.cuda.is_available() is False): "
            "the self-check times GPU kernels, so there is nothing to check on this machine"
        )

    import triton.testing  # noqa: F401  (a missing Triton fails the run here, before any timing)

    from harness.core import devices
    from harness.measure import clocks

    ident = devices.identify("cuda")
    spec = devices.lookup_spec(ident.name)
    # Quick: ~1.5 s a kernel (3 rounds of <= 0.25 s ours + 50 ms do_bench, one hot run).
    base = timing.TimingConfig(method="cold", max_time_s=0.25 if quick else 1.0, min_time_s=0.05)
    rep_ms = 50 if quick else 200
    checks: list[Check] = []
    measurements: dict = {}
    with clocks.open_monitor() as monitor:
        for k in _kernels(torch, ident.l2_bytes, quick):
            say(f"{k.name}: {k.description}")
            measurements[k.name], kernel_checks = _check_kernel(k, base, ident, spec, monitor, rep_ms)
            checks.extend(kernel_checks)
    status, code = overall(checks)
    failed = [f"{c.name}[{c.kernel}]" for c in checks if c.status == FAIL]
    return {
        "schema": REPORT_SCHEMA,
        "kind": "kernelwatch-selfcheck",
        "date": records.now_iso(),
        "status": status,
        "exit_code": code,
        "reason": ("failed: " + ", ".join(failed))
        if failed
        else ("every decided check passed" if status == PASS else "no check could decide"),
        "harness_version": _harness_version(),
        "device": ident.as_dict(),
        "datasheet": spec.as_dict() if spec else None,
        "quick": quick,
        "thresholds": _thresholds(),
        "checks": [c.as_dict() for c in checks],
        "measurements": measurements,
    }


def _check_kernel(k, base: timing.TimingConfig, ident, spec, monitor, rep_ms: int) -> tuple[dict, list[Check]]:
    """Time one self-check kernel and decide its checks: ``(entry, checks)``, the
    kernel's ``measurements`` entry and its checks (timer agreement, cold not
    faster than hot where the L2 matters, the guard, copy bandwidth). A kernel
    that cannot be timed gives one ``undecided`` check with the error."""
    from harness.measure import calibrate

    entry: dict = {"description": k.description, "cost": k.cost.as_dict()}
    try:
        ours, theirs, cold_res = _timer_rounds(k, base, ident, monitor, rep_ms)
        rounds, hot_res, normalised = _cold_hot_rounds(k, base, ident, monitor)
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
        return entry, [Check("timing", k.name, UNDECIDED, f"could not time: {entry['error']}")]
    checks: list[Check] = []
    entry.update({"cold": _summary(cold_res), "cold_p50_by_round_s": ours, "do_bench_median_by_round_s": theirs})
    checks.append(check_timer_agreement(k.name, ours, theirs))
    if k.l2_matters:
        entry.update(
            {
                "hot": _summary(hot_res),
                "check3_cold_by_round_s": rounds["cold"],
                "check3_hot_by_round_s": rounds["hot"],
                "check3_clock_normalised": all(normalised),
            }
        )
        floor = COLD_HOT_FLOOR_REL + writeback_allowance(k.cost, ident.l2_bytes)
        checks.append(check_cold_not_faster_rounds(k.name, rounds["cold"], rounds["hot"], floor_rel=floor))
        if k.fits_l2:
            checks.append(check_flush_evicts(k.name, rounds["cold"], rounds["hot"]))
    ds = calibrate.datasheet_peaks(
        ident, "bf16" if k.name.startswith("matmul") else "fp32", uses_tensor_cores=k.name.startswith("matmul")
    )
    checks.append(
        check_guard(
            k.name,
            k.cost,
            statistics.median(ours),
            ds,
            dram_bytes=metrics.dram_bytes_lower_bound(k.cost, "cold", ident.l2_bytes),
        )
    )
    if k.name == "copy_large":
        checks.append(
            check_copy_bandwidth(k.name, k.cost.bytes_total, statistics.median(ours), spec.peak_gbps if spec else None)
        )
    return entry, checks


def _timer_rounds(k, base: timing.TimingConfig, ident, monitor, rep_ms: int):
    """:data:`ROUNDS` rounds of our cold timing (write flush) and ``triton.testing.do_bench``:
    ``(ours_s, theirs_s, last_cold_result)``, per-call seconds per round."""
    import triton.testing

    ours, theirs, cold_res = [], [], None
    for _ in range(ROUNDS):
        # do_bench flushes by writing (zero_): compare like with like.
        cold_res = timing.time_cuda(k.fn, replace(base, l2_flush="write"), l2_bytes=ident.l2_bytes, monitor=monitor)
        ours.append(cold_res.p50_s)
        # do_bench: warmup/rep in ms; median of its per-call times, ms.
        theirs.append(triton.testing.do_bench(k.fn, warmup=25, rep=rep_ms, return_mode="median") / 1e3)
    return ours, theirs, cold_res


def _cold_hot_rounds(k, base: timing.TimingConfig, ident, monitor):
    """Check 3 on the kernels where the L2 matters: interleaved rounds, production
    cold (read flush) and hot, order alternating. ``(rounds, last_hot_result,
    normalised)``: per-round seconds by method, and whether each was clock-normalised."""
    rounds = {"cold": [], "hot": []}
    hot_res, normalised = None, []
    for i in range(ROUNDS if k.l2_matters else 0):
        for m in ("cold", "hot") if i % 2 == 0 else ("hot", "cold"):
            r = timing.time_cuda(k.fn, replace(base, method=m), l2_bytes=ident.l2_bytes, monitor=monitor)
            t, norm = round_time(r)
            rounds[m].append(t)
            normalised.append(norm)
            if m == "hot":
                hot_res = r
    return rounds, hot_res, normalised


def _json_safe(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_report(report: dict, path: str | os.PathLike) -> Path:
    """Write ``report`` as indented JSON (non-finite numbers become ``null``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_json_safe(report), indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path


def format_report(report: dict) -> list[str]:
    """Human-readable lines: one per check, then the verdict."""
    lines = []
    if report["status"] == "no_cuda":
        return [f"selfcheck: no CUDA device: {report['reason']}"]
    dev = (report.get("device") or {}).get("name", "?")
    for c in report["checks"]:
        lines.append(f"{c['status'].upper():9s} {c['name']:24s} {c['kernel']:20s} {c['reason']}")
    lines.append(f"selfcheck on {dev}: {report['status']} ({report['reason']})")
    return lines
