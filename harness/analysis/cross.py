"""Cross-machine rules: divergent changes, efficiency gaps, generation speedups."""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from harness.analysis.model import (
    _SQRT_HALF_PI,
    AnalysisConfig,
    Direction,
    Finding,
    Series,
    SeriesAnalysis,
    Status,
    _param_pairs,
)
from harness.analysis.series import _oriented, _usable
from harness.analysis.stats import _z_for, robust_noise
from harness.core.model import change_text


@dataclass(frozen=True)
class DevicePeaks:
    """Peaks of the device a machine measures on (from :mod:`harness.core.devices`).

    ``name`` is the device name; ``peak_gbps`` GB/s; ``peak_tflops`` maps dtype
    -> dense TFLOP/s (tensor-core rates for ``bf16``/``fp16``/``tf32``/``fp8``,
    vector rate for ``fp32``/``fp64``).
    """

    name: str
    peak_gbps: float | None
    peak_tflops: Mapping[str, float]

    def __post_init__(self) -> None:
        """Raises ``ValueError`` naming the device and the field for an empty
        name, or a peak that is not a real number, finite and at least the
        smallest normal float, once converted to ``float`` (a peak is data with a
        source; NaN, inf, zero, negative or subnormal peaks cannot be one).
        Peaks are stored as ``float`` (a ``Fraction`` or ``Decimal`` peak too)."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"DevicePeaks: name must be a non-empty string, got {self.name!r}")
        if self.peak_gbps is not None:
            object.__setattr__(self, "peak_gbps", _as_count(self.peak_gbps, f"DevicePeaks {self.name!r}: peak_gbps"))
        if not isinstance(self.peak_tflops, Mapping):
            raise ValueError(
                f"DevicePeaks {self.name!r}: peak_tflops must map dtype -> TFLOP/s, got {type(self.peak_tflops).__name__}"
            )
        object.__setattr__(
            self,
            "peak_tflops",
            {
                dtype: _as_count(v, f"DevicePeaks {self.name!r}: peak_tflops[{dtype!r}]")
                for dtype, v in self.peak_tflops.items()
            },
        )


def _as_count(v, what: str, *, zero_ok: bool = False) -> float:
    """``float(v)`` when ``v`` is a number (not ``bool`` or ``str``) whose float is
    finite and normal (at least ``sys.float_info.min``; ``0.0`` too when
    ``zero_ok``); else ``ValueError`` starting with ``what``."""
    f = None
    if not isinstance(v, (bool, str, bytes)):
        try:
            f = float(v)
        except (TypeError, ValueError, OverflowError):
            f = None
    ok = f is not None and math.isfinite(f) and (f >= sys.float_info.min or (zero_ok and f == 0.0))
    if not ok:
        bound = ">= 0" if zero_ok else "> 0"
        raise ValueError(f"{what} must be a finite number {bound} (a normal float), got {v!r}")
    return f


@dataclass(frozen=True)
class CaseCost:
    """Cost of one benchmark case, for roofline predictions.

    ``flops`` and ``bytes_total`` per invocation; ``dtype`` names the peak to
    use; ``uses_tensor_cores`` picks tensor vs vector peak.
    """

    flops: float
    bytes_total: float
    dtype: str
    uses_tensor_cores: bool = False

    def __post_init__(self) -> None:
        """Raises ``ValueError`` for a count that is not a finite number >= 0
        once converted to ``float`` (stored as ``float``)."""
        for field_name in ("flops", "bytes_total"):
            object.__setattr__(
                self, field_name, _as_count(getattr(self, field_name), f"CaseCost: {field_name}", zero_ok=True)
            )

    def peak_tflops(self, dev: DevicePeaks) -> float | None:
        if self.uses_tensor_cores:
            return dev.peak_tflops.get(self.dtype)
        return dev.peak_tflops.get("fp64" if self.dtype == "fp64" else "fp32")


#: The largest log ratio between two machines a finding can carry: 1e50, as
#: for the points of one series (``harness.analysis.run.MAX_LOG_FROM_MEDIAN``);
#: beyond it the two are not the same quantity, and ``math.exp`` of the CI's
#: ends would overflow or underflow soon after.
_MAX_LOG_RATIO = math.log(1e50)


def _defensible(log_ratio: float, log_half_width: float = 0.0) -> bool:
    """A ratio ``exp(log_ratio)`` with a CI of ``exp(log_ratio +- log_half_width)``
    that a finding can show: both finite, every end within :data:`_MAX_LOG_RATIO`."""
    return (
        math.isfinite(log_ratio)
        and math.isfinite(log_half_width)
        and abs(log_ratio) + abs(log_half_width) <= _MAX_LOG_RATIO
    )


def _level(values: np.ndarray, start: int, stop: int, W: int) -> tuple[float, int]:
    seg = values[max(start, stop - W) : stop]
    return float(np.median(seg)), seg.size


def divergent_changes(
    analyses: Sequence[SeriesAnalysis],
    config: AnalysisConfig,
    *,
    commit_order: Sequence[str] | None = None,
    devices: Mapping[str, DevicePeaks] | None = None,
) -> list[Finding]:
    """Same commits, opposite fates on different machines.

    For each case (benchmark, params, timing) measured on two or more machines
    and each change point found on any of them between commits ``a`` and ``b``,
    the change across the same commits is estimated on every machine (median of
    up to ``window`` points at or before ``a`` against those at or after ``b``,
    bounded by that machine's own change points). A pair is *divergent* when one
    machine significantly improves and another significantly regresses (both 99%
    CIs exclude no change, both beyond ``min_effect``), or when their changes
    differ by more than ``divergence_threshold`` with non-overlapping CIs.
    The finding is keyed on the worse machine and named at that machine's own
    pair across the change (its last valid commit at or before ``a``, first at
    or after ``b``): a machine that failed at, or never ran, ``a`` or ``b`` is
    not blamed on commits it has no value for, and one change seen from two
    machines' change points is one finding (the narrowest such pair).
    Machines are compared only when their devices differ (or are unknown), and
    never with themselves (two series of one case on one machine). Raises
    ``TypeError`` when ``devices`` is not a mapping machine -> :class:`DevicePeaks`.
    Why long: the pairwise comparison keeps both machines' estimates, CIs and
    names together for the finding's reason.
    """
    if devices is not None:
        _check_devices(devices)
    zq = _z_for(config.ci_level)
    theta = math.log1p(config.min_effect)
    rank = {c: i for i, c in enumerate(commit_order)} if commit_order else None
    by_case: dict[tuple, list[SeriesAnalysis]] = {}
    for a in analyses:
        if a.n_valid >= config.min_points and a.noise:
            by_case.setdefault(a.series.key.case(), []).append(a)
    seen: dict[tuple, tuple[str, Finding]] = {}  # (worse, other, after) -> (before, finding)
    for case, group in by_case.items():
        if len({g.series.key.machine for g in group}) < 2:
            continue
        if rank is None:
            order: dict[str, int] = {}
            for g in group:
                for c in g.valid_commits:
                    order.setdefault(c, len(order))
        else:
            order = rank
        boundaries = set()
        for g in group:
            for c in g.candidates:
                if c.kind == "step" and not c.annotation and abs(c.d) >= theta:
                    boundaries.add((g.valid_commits[c.index - 1], g.valid_commits[c.index]))
        for ca, cb in sorted(boundaries, key=lambda t: order.get(t[1], 0)):
            ra, rb = order.get(ca), order.get(cb)
            if ra is None or rb is None:
                continue
            est = []
            for g in group:
                r = _effect_across(g, ra, rb, order, config)
                if r is not None:
                    est.append((g, *r))
            for (gi, di, sei, pair_i), (gj, dj, sej, pair_j) in itertools.combinations(est, 2):
                if gi.series.key.machine == gj.series.key.machine:
                    continue  # two series of one case on one machine: not a cross-machine pair
                if devices:
                    pi, pj = devices.get(gi.series.key.machine), devices.get(gj.series.key.machine)
                    if pi and pj and pi.name == pj.name:
                        continue
                lo_i, hi_i = di - zq * sei, di + zq * sei
                lo_j, hi_j = dj - zq * sej, dj + zq * sej
                sig_i = lo_i > 0 or hi_i < 0
                sig_j = lo_j > 0 or hi_j < 0
                opposite = sig_i and sig_j and di * dj < 0 and abs(di) >= theta and abs(dj) >= theta
                apart = abs(di - dj) > config.divergence_threshold and (hi_i < lo_j or hi_j < lo_i)
                if not (opposite or apart):
                    continue
                worse, better = (gi, gj) if di > dj else (gj, gi)
                pair_w, pair_b = (pair_i, pair_j) if worse is gi else (pair_j, pair_i)
                # one change seen from two machines' change points (machines that ran
                # different commits): one finding, at the narrowest pair of the worse machine
                named = (worse.series.key, better.series.key, pair_w[1])
                if named in seen and order.get(seen[named][0], -1) >= order.get(pair_w[0], -1):
                    continue
                dw, db = max(di, dj), min(di, dj)
                sew = sei if worse is gi else sej
                seb = sej if worse is gi else sei
                sed = math.sqrt(sew**2 + seb**2)
                if not _defensible(dw - db, zq * sed):  # no number to defend
                    continue
                ratio = math.exp(dw - db)
                ci = (math.exp(dw - db - zq * sed), math.exp(dw - db + zq * sed))
                why = (
                    "opposite significant changes"
                    if opposite
                    else f"changes differ by more than {config.divergence_threshold:.0%} with non-overlapping CIs"
                )
                seen[named] = (
                    pair_w[0],
                    Finding(
                        Status.DIVERGENT_CHANGE,
                        f"{case[0]}{_params_text(case[1])} on "
                        f"{worse.series.key.machine} vs {better.series.key.machine}",
                        worse.series.key,
                        pair_w[0],
                        pair_w[1],
                        ratio,
                        ci,
                        math.expm1(dw - db),
                        f"{why}: {_fmt_change(dw)} on {worse.series.key.machine}, {_fmt_change(db)} on "
                        f"{better.series.key.machine} "
                        + (
                            "between the same commits"
                            if pair_w == pair_b
                            else f"across the same change ({pair_w[0][:12]}..{pair_w[1][:12]} measured on "
                            f"{worse.series.key.machine}, {pair_b[0][:12]}..{pair_b[1][:12]} on "
                            f"{better.series.key.machine})"
                        ),
                        other_key=better.series.key,
                        extra={
                            "change_worse_machine": math.expm1(dw),
                            "change_other_machine": math.expm1(db),
                            # did the worse machine itself get worse (its CI clear of 0, beyond
                            # min_effect), or did only the other one move?
                            "worse_machine_moved": bool(
                                abs(dw) >= theta and ((lo_i > 0) if worse is gi else (lo_j > 0))
                            ),
                        },
                    ),
                )
    return [f for _before, f in seen.values()]


def _fmt_change(d: float) -> str:
    """A cross-machine change (oriented log units) in the one wording, ``worse``/``better``."""
    return change_text(math.expm1(d), higher=True)


def _params_text(params) -> str:
    return "(" + ", ".join(f"{k}={v}" if k else str(v) for k, v in _param_pairs(params)) + ")"


def _effect_across(a: SeriesAnalysis, ra: int, rb: int, order: Mapping[str, int], config: AnalysisConfig):
    """``(d, se, (before, after))`` of series ``a`` between global ranks ``ra``
    (before) and ``rb`` (after): its move, standard error, and the commits of its
    own last valid point at or before ``ra`` and first at or after ``rb`` (the
    pair it measured the change across, which a failure or a commit it did not
    run can make wider than the boundary's)."""
    ranks = np.array([order.get(c, -1) for c in a.valid_commits])
    k = int(np.searchsorted(ranks, rb, side="left"))  # first index at or after b
    kb = int(np.searchsorted(ranks, ra, side="right"))  # one past last index at or before a
    if kb < 1 or k >= ranks.size or kb > k:
        return None
    y = _oriented(a.valid_values, a.series.direction)
    cps = [lv[0] for lv in a.levels[1:]]
    lo = max([c for c in cps if c <= kb - 1] + [0])
    hi = min([c for c in cps if c > k] + [y.size])
    lo = max(lo, kb - config.window)
    hi = min(hi, k + config.window)
    if kb - lo < 2 or hi - k < 2:
        return None
    before, after = y[lo:kb], y[k:hi]
    d = float(np.median(after) - np.median(before))
    se = a.noise * _SQRT_HALF_PI * math.sqrt(1 / before.size + 1 / after.size)
    return d, se, (a.valid_commits[kb - 1], a.valid_commits[k])


def _latest_level(s: Series, W: int) -> tuple[float, float, int, str] | None:
    """Median of the last ``W`` usable values (finite, above zero; after the last
    change is unknown here, so a short window), its relative standard error (NaN
    from one value), count and the commit of the newest usable value."""
    kept = [p for p in s.points if _usable(p.value)]
    if not kept:
        return None
    seg = np.array([float(p.value) for p in kept[-W:]], dtype=float)
    lv = np.log(seg)
    if seg.size >= 2:
        sig = robust_noise(lv)
        se = sig * _SQRT_HALF_PI / math.sqrt(seg.size)
    else:
        se = float("nan")
    return float(np.median(seg)), se, seg.size, kept[-1].commit


def _check_devices(devices) -> None:
    """Raises ``TypeError`` unless ``devices`` is a mapping machine -> :class:`DevicePeaks`."""
    if not isinstance(devices, Mapping):
        raise TypeError(f"devices must map machine -> DevicePeaks, got {type(devices).__name__}")
    for machine, d in devices.items():
        if d is not None and not isinstance(d, DevicePeaks):
            raise TypeError(f"devices[{machine!r}] must be a DevicePeaks or None, got {type(d).__name__}")


def _one_point_note(pairs) -> str:
    """``" (from one point on X: no CI)"`` for the machines whose level is one value."""
    ones = [s.key.machine for s, lv in pairs if lv[2] < 2]
    return f" (from one point on {' and '.join(ones)}: no CI)" if ones else ""


def efficiency_gaps(
    series_list: Sequence[Series], devices: Mapping[str, DevicePeaks], config: AnalysisConfig = AnalysisConfig()
) -> list[Finding]:
    """Same kernel and parameters, much lower ``sol`` on one GPU than another.

    Uses series whose ``metric`` is ``sol`` (speed-of-light fraction, higher is
    better; from our records). For each case on machines with different devices,
    the latest level (median of the last 5 values) is compared: a ratio
    ``sol_low / sol_high <= efficiency_gap_ratio`` with the CIs apart is a gap.
    A level of one point has no standard error: the finding then has no CI and
    its reason says so. A ratio that does not fit a float (values 1e300 apart)
    is no finding. Raises ``TypeError`` when ``devices`` is not a mapping
    machine -> :class:`DevicePeaks`.
    """
    _check_devices(devices)
    zq = _z_for(config.ci_level)
    by_case: dict[tuple, list[tuple[Series, tuple]]] = {}
    for s in series_list:
        if (s.metric or "").lower() != "sol":
            continue
        lv = _latest_level(s, 5)
        if lv is not None:
            by_case.setdefault(s.key.case(), []).append((s, lv))
    out = []
    for case, group in by_case.items():
        for (si, li), (sj, lj) in itertools.combinations(group, 2):
            di, dj = devices.get(si.key.machine), devices.get(sj.key.machine)
            if di is None or dj is None or di.name == dj.name:
                continue
            (lo_s, lo_l), (hi_s, hi_l) = ((si, li), (sj, lj)) if li[0] < lj[0] else ((sj, lj), (si, li))
            log_r = math.log(lo_l[0]) - math.log(hi_l[0])
            se = math.sqrt(lo_l[1] ** 2 + hi_l[1] ** 2)  # NaN when a level is one point: no CI
            if not _defensible(log_r, zq * se if math.isfinite(se) else 0.0):
                continue  # levels 1e50 or more apart: no number to defend
            r = math.exp(log_r)
            if r > config.efficiency_gap_ratio:
                continue
            ci = (math.exp(log_r - zq * se), math.exp(log_r + zq * se)) if se and math.isfinite(se) else None
            if ci and ci[1] > 1.0:
                continue
            dl, dh = devices[lo_s.key.machine], devices[hi_s.key.machine]
            out.append(
                Finding(
                    Status.EFFICIENCY_GAP,
                    f"{case[0]}{_params_text(case[1])} on {dl.name} vs {dh.name}",
                    lo_s.key,
                    lo_l[3],
                    hi_l[3],
                    r,
                    ci,
                    None,
                    f"reaches {lo_l[0]:.0%} of speed-of-light on {dl.name} but {hi_l[0]:.0%} on {dh.name} "
                    f"(ratio {r:.2f} <= {config.efficiency_gap_ratio})" + _one_point_note(((lo_s, lo_l), (hi_s, hi_l))),
                    other_key=hi_s.key,
                    extra={"sol_low": lo_l[0], "sol_high": hi_l[0]},
                )
            )
    return out


def predicted_speedup(cost: CaseCost, a: DevicePeaks, b: DevicePeaks) -> tuple[float, str] | None:
    """Roofline-predicted speedup from device ``a`` to ``b`` and the bound used.

    The bound is decided on ``a`` (arithmetic intensity ``flops / bytes`` against
    the ridge point ``peak_flops / peak_bandwidth``; Williams et al., CACM 2009):
    memory-bound -> ``peak_gbps_b / peak_gbps_a``; compute-bound -> the ratio of
    the dtype's peak TFLOP/s. ``None`` when a needed peak is unknown.
    """
    pa, pb = cost.peak_tflops(a), cost.peak_tflops(b)
    if not (a.peak_gbps and b.peak_gbps) or cost.bytes_total <= 0:
        return None
    if pa and cost.flops > 0:
        ridge = pa * 1e12 / (a.peak_gbps * 1e9)
        if cost.flops / cost.bytes_total >= ridge:
            return (pb / pa, "compute") if pb else None
    return b.peak_gbps / a.peak_gbps, "memory"


def generation_speedups(
    series_list: Sequence[Series],
    devices: Mapping[str, DevicePeaks],
    costs: Mapping[tuple, CaseCost],
    config: AnalysisConfig = AnalysisConfig(),
) -> list[Finding]:
    """Measured speedup between two GPUs far from the roofline prediction.

    For each time series (lower-is-better) case on two machines with different
    devices and a known :class:`CaseCost` (keyed ``(benchmark, params)``), the
    measured speedup ``time_a / time_b`` (latest levels) is compared with
    :func:`predicted_speedup`; outside ``[1/speedup_tolerance,
    speedup_tolerance]`` times the prediction (CI included) is reported. A level
    of one point has no standard error: the finding then has no CI, is decided
    on the estimate, and its reason says so. Raises ``TypeError`` when
    ``devices`` is not a mapping machine -> :class:`DevicePeaks`.
    """
    _check_devices(devices)
    zq = _z_for(config.ci_level)
    by_case: dict[tuple, list[tuple[Series, tuple]]] = {}
    for s in series_list:
        if s.direction is not Direction.LOWER_IS_BETTER or (
            s.metric and s.metric.lower() not in ("time", "latency_ms")
        ):
            continue
        cost = costs.get((s.key.benchmark, s.key.params))
        if cost is None:
            continue
        lv = _latest_level(s, 5)
        if lv is not None:
            by_case.setdefault(s.key.case(), []).append((s, lv))
    out = []
    for case, group in by_case.items():
        cost = costs[(case[0], case[1])]
        for (sa, la), (sb, lb) in itertools.combinations(group, 2):
            da, db = devices.get(sa.key.machine), devices.get(sb.key.machine)
            if da is None or db is None or da.name == db.name:
                continue
            # older/slower-bandwidth device first so speedups read A -> B
            if (da.peak_gbps or 0) > (db.peak_gbps or 0):
                sa, la, da, sb, lb, db = sb, lb, db, sa, la, da
            pred = predicted_speedup(cost, da, db)
            if pred is None:
                continue
            log_m = math.log(la[0]) - math.log(lb[0])
            log_rel = log_m - math.log(pred[0])
            se = math.sqrt(la[1] ** 2 + lb[1] ** 2)  # NaN when a level is one point: no CI
            half = zq * se if math.isfinite(se) else 0.0
            if not (_defensible(log_m) and _defensible(log_rel, half)):
                continue  # levels 1e50 or more apart: no number to defend
            measured, rel = math.exp(log_m), math.exp(log_rel)
            ci = (math.exp(log_rel - half), math.exp(log_rel + half)) if math.isfinite(se) else None
            tol = config.speedup_tolerance
            lo, hi = ci if ci else (rel, rel)
            if lo <= tol and hi >= 1.0 / tol:
                continue
            out.append(
                Finding(
                    Status.UNEXPECTED_SPEEDUP,
                    f"{case[0]}{_params_text(case[1])} {da.name} -> {db.name}",
                    sb.key,
                    la[3],
                    lb[3],
                    rel,
                    ci,
                    None,
                    f"measured speedup {measured:.2f}x from {da.name} to {db.name}, roofline predicts "
                    f"{pred[0]:.2f}x ({pred[1]}-bound: {'bandwidth' if pred[1] == 'memory' else 'FLOP'} ratio); "
                    f"measured/predicted {rel:.2f} outside [{1 / tol:.2f}, {tol:.2f}]"
                    + _one_point_note(((sa, la), (sb, lb))),
                    other_key=sa.key,
                    extra={"measured_speedup": measured, "predicted_speedup": pred[0], "bound": pred[1]},
                )
            )
    return out
