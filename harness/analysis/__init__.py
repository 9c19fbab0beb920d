"""Regression, drift and cross-architecture divergence analysis (pure: no I/O).

Every function here takes series (plain data) and returns records with a
:class:`Status` and a reason; reading results directories is
:mod:`harness.results`' job, printing is :mod:`harness.analysis_cli`'s.

Model
-----
A *series* is machine x benchmark x parameters x timing method (see
``shared/ARCHITECTURE.md``). Its points are ordered by commit (git history, else
commit date; the caller orders them). Values are oriented before anything is
detected: ``y = log(value)`` for lower-is-better metrics (time, memory) and
``y = -log(value)`` for higher-is-better ones (tflops, gbps, mfu, bw_util, sol),
so an *upward* move of ``y`` is always a regression and a step of ``d`` in ``y``
is a ratio ``exp(d)`` in the natural unit. (asv feeds raw values to its
detector and so treats every metric as lower-is-better; see
``shared/ASV_NOTES.md``.)

Per series (:func:`analyze_series`):

1. **Noise**: ``sigma = 1.4826 * median(|diff(y)|) / sqrt(2)``, the MAD of first
   differences (Rousseeuw & Croux 1993 consistency constant; differencing makes it
   immune to level shifts, the median to outliers), floored at
   ``AnalysisConfig.noise_floor``.
2. **Change points**: ``ruptures.KernelCPD`` with an RBF kernel on ``y / sigma``
   (Arlot, Celisse & Harchaoui 2019, "A kernel multiple change-point algorithm via
   model selection", JMLR 20), penalised linearly in the number of change points.
   The bounded kernel makes one outlier cheap to keep inside a segment. The choice
   over ``asv.step_detect`` (L1 Potts) and ruptures PELT/l1 was made by
   measurement: ``scripts/compare_detectors.py`` and ``docs/analysis.md``.
   Benchmark-``version`` and environment boundaries are always tested too.
3. **Significance** of a candidate at index ``k``: the step is
   ``d = median(y[after]) - median(y[before])`` over the neighbouring segments
   (at most ``window`` points each side); its standard error is
   ``sigma * sqrt(pi/2) * sqrt(1/n1 + 1/n2)`` (the asymptotic variance of a sample
   median under Gaussian noise is ``pi/2 * sigma^2 / n``); the two-sided normal
   p-value is multiplied by the number of positions the detector could have
   chosen (Bonferroni over positions: the location was picked from the same data).
   Where raw samples were recorded for the commits on both sides of the step,
   a Mann-Whitney U test on them (as ``asv compare`` does) must agree.
4. **Drift** against a baseline window: a run of ``2..drift_max_len`` commits that
   each move the same way by less than ``min_effect`` but together by at least
   ``min_effect`` relative to the median of the ``window`` commits before the run.
5. **Gaps**: a ``None`` value is a failure, counted and reported; a series whose
   last value is older than its machine's newest commit is *missing since* that
   commit.

Across series (:func:`analyze`): Benjamini-Hochberg at level ``fdr_q`` over all
step and drift tests (Benjamini & Hochberg 1995, JRSS B 57), a published false
alarm budget, and cross-machine rules (:func:`divergent_changes`,
:func:`efficiency_gaps`, :func:`generation_speedups`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

REPORT_SCHEMA = "kernelwatch-analysis"
REPORT_VERSION = 1

#: Metric names (or name suffixes) whose larger values are better. Everything
#: else (time, latency, memory) is lower-is-better.
HIGHER_IS_BETTER = ("tflops", "gbps", "mfu", "bw_util", "sol", "gflops", "throughput", "speedup")

#: Environment keys whose change explains a step as "not a code change".
ENV_KEYS = ("gpu", "driver", "cuda", "torch", "triton", "harness", "timing", "python", "env_name")

#: A ramp in which one commit carries more than this share of the total change
#: is a step (plus noise), not a creeping drift.
DRIFT_MAX_SHARE = 0.9

_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_MAD_TO_SIGMA = 1.4826


class Direction(str, Enum):
    """Which way is better for a metric."""

    LOWER_IS_BETTER = "lower_is_better"
    HIGHER_IS_BETTER = "higher_is_better"


class Status(str, Enum):
    """What a finding says. Values are stable strings used in the JSON report."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    DRIFT_REGRESSION = "drift_regression"
    DRIFT_IMPROVEMENT = "drift_improvement"
    PENDING = "pending"  # a change at the newest commits, too few points to confirm
    VERSION_CHANGE = "benchmark_version_change"
    ENV_CHANGE = "environment_change"
    FAILING = "failing"
    MISSING = "missing"
    DIVERGENT_CHANGE = "divergent_change"
    EFFICIENCY_GAP = "efficiency_gap"
    UNEXPECTED_SPEEDUP = "unexpected_generation_speedup"


#: Statuses that a gate should treat as "something got worse in the code".
ALERT_STATUSES = frozenset({Status.REGRESSION, Status.DRIFT_REGRESSION, Status.DIVERGENT_CHANGE})


def direction_for(metric: str | None = None, unit: str | None = None) -> Direction:
    """Direction of a metric from its name or unit.

    ``tflops``, ``gbps``, ``mfu``, ``bw_util``, ``sol`` (and ``*_measured``,
    ``gflops``, ``throughput``, ``speedup``) are higher-is-better; time, latency
    and memory, and anything unknown, are lower-is-better (asv's convention).
    """
    for text in (metric, unit):
        if not text:
            continue
        t = text.lower()
        base = t[: -len("_measured")] if t.endswith("_measured") else t
        for name in HIGHER_IS_BETTER:
            if base == name or base.endswith("_" + name) or base.endswith("." + name) or base.startswith(name + "/"):
                return Direction.HIGHER_IS_BETTER
    return Direction.LOWER_IS_BETTER


# --------------------------------------------------------------------------- input model


@dataclass(frozen=True)
class Point:
    """One commit's measurement in a series.

    Attributes
    ----------
    commit : str
        Full commit hash.
    value : float or None
        The measurement in the series' unit (seconds for asv ``time_``); ``None``
        when the benchmark failed or was skipped, with ``reason``.
    reason : str or None
        Why ``value`` is ``None``.
    ci : (float, float) or None
        Confidence interval of the value (asv: 99% CI of the median).
    samples : tuple of float or None
        Raw samples when recorded (same unit as ``value``).
    version : str or None
        Benchmark version (asv ``version``: a source hash unless set).
    env : mapping or None
        Environment identity: any of :data:`ENV_KEYS` (driver, CUDA, torch, ...).
    """

    commit: str
    value: float | None
    reason: str | None = None
    ci: tuple[float, float] | None = None
    samples: tuple[float, ...] | None = None
    version: str | None = None
    env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class SeriesKey:
    """Identity of a series: machine x benchmark x parameters x timing method."""

    machine: str
    benchmark: str
    params: tuple = ()
    timing: str | None = None

    def label(self) -> str:
        p = ", ".join(f"{k}={v}" if k else str(v) for k, v in _param_pairs(self.params))
        t = f" [{self.timing}]" if self.timing else ""
        return f"{self.machine} / {self.benchmark}({p}){t}"

    def case(self) -> tuple:
        """The machine-independent part (benchmark, params, timing)."""
        return (self.benchmark, self.params, self.timing)

    def as_dict(self) -> dict:
        return {
            "machine": self.machine,
            "benchmark": self.benchmark,
            "params": [[k, v] for k, v in _param_pairs(self.params)],
            "timing": self.timing,
        }


def _param_pairs(params) -> list[tuple[str | None, object]]:
    out = []
    for p in params:
        if isinstance(p, (tuple, list)) and len(p) == 2:
            out.append((p[0], p[1]))
        else:
            out.append((None, p))
    return out


@dataclass
class Series:
    """An ordered series of points.

    ``points`` must be in commit order (oldest first) and hold each commit once.
    ``metric`` names what is measured (``"time"``, ``"tflops"``, ``"sol"``...)
    and, with ``unit``, decides the :class:`Direction`.
    """

    key: SeriesKey
    points: list[Point]
    unit: str | None = None
    metric: str | None = None
    direction: Direction | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, SeriesKey):
            raise TypeError(f"Series.key must be a SeriesKey, got {type(self.key).__name__}")
        if self.direction is None:
            self.direction = direction_for(self.metric, self.unit)
        seen = set()
        for p in self.points:
            if p.commit in seen:
                raise ValueError(f"{self.key.label()}: commit {p.commit} appears twice")
            seen.add(p.commit)


@dataclass(frozen=True)
class AnalysisConfig:
    """Thresholds and windows. Defaults follow asv where asv has one.

    min_effect : relative change below which nothing is reported (asv's default
        ``regressions_thresholds`` is 0.05).
    fdr_q : Benjamini-Hochberg level across all tests of a run.
    window : most points on each side of a change used to estimate it.
    min_segment : points needed after a change to confirm it (fewer: ``pending``).
    min_points : series with fewer valid points get no change detection.
    drift_max_len : longest run of commits considered one creeping drift.
    noise_floor : smallest relative noise assumed (guards zero-noise series).
    penalty : RBF change-point penalty per change point, in kernel-cost units,
        on ``y / sigma`` (chosen by ``scripts/compare_detectors.py``).
    gamma : RBF kernel bandwidth parameter on ``y / sigma``.
    ci_level : two-sided level of the reported confidence intervals.
    sample_alpha : level of the Mann-Whitney confirmation on raw samples.
    divergence_threshold : |change_A - change_B| (log ratio) for a divergent change.
    efficiency_gap_ratio : sol_low / sol_high at or below which a gap is reported.
    speedup_tolerance : measured/predicted generation speedup outside
        ``[1/tol, tol]`` is unexpected.
    """

    min_effect: float = 0.05
    fdr_q: float = 0.05
    window: int = 20
    min_segment: int = 3
    min_points: int = 6
    drift_max_len: int = 5
    noise_floor: float = 1e-3
    penalty: float = 5.0
    gamma: float = 0.25
    ci_level: float = 0.99
    sample_alpha: float = 0.01
    divergence_threshold: float = 0.10
    efficiency_gap_ratio: float = 0.7
    speedup_tolerance: float = 1.5
    detector: str = "rbf"

    def __post_init__(self) -> None:
        if not 0 < self.fdr_q < 1:
            raise ValueError(f"fdr_q must be in (0, 1), got {self.fdr_q}")
        if self.min_effect <= 0:
            raise ValueError(f"min_effect must be positive, got {self.min_effect}")
        if self.window < 2 or self.min_segment < 1 or self.min_points < 3:
            raise ValueError("window >= 2, min_segment >= 1 and min_points >= 3 are required")
        if self.detector not in DETECTORS:
            raise ValueError(f"unknown detector {self.detector!r}; one of {sorted(DETECTORS)}")


# --------------------------------------------------------------------------- output model


@dataclass
class Finding:
    """One thing the analysis says about one series (or a pair of series).

    ``ratio`` is after/before in the series' natural unit (1.10 = the time grew
    10%, or the throughput grew 10%); ``ci`` is its confidence interval at
    ``AnalysisConfig.ci_level``; ``change`` is the signed relative change in the
    *bad* direction (+0.10 = 10% worse, whatever the metric's direction).
    ``commit_before`` is the last commit at the old level, ``commit_after`` the
    first at the new one. ``p_value`` is adjusted for the choice of position,
    ``q_value`` for the number of tests in the run (Benjamini-Hochberg).
    """

    status: Status
    series: str
    key: SeriesKey | None
    commit_before: str | None
    commit_after: str | None
    ratio: float | None
    ci: tuple[float, float] | None
    change: float | None
    reason: str
    p_value: float | None = None
    q_value: float | None = None
    other_key: SeriesKey | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "status": self.status.value,
            "series": self.series,
            "key": self.key.as_dict() if self.key else None,
            "other_key": self.other_key.as_dict() if self.other_key else None,
            "commit_range": [self.commit_before, self.commit_after],
            "magnitude": {
                "ratio": _clean(self.ratio),
                "ci": [_clean(self.ci[0]), _clean(self.ci[1])] if self.ci else None,
                "change": _clean(self.change),
            },
            "p_value": _clean(self.p_value),
            "q_value": _clean(self.q_value),
            "reason": self.reason,
            "extra": {k: _clean(v) for k, v in self.extra.items()},
        }


def _clean(v):
    """Floats that are not finite become ``None`` (the report never carries NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating,)):
        return _clean(float(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


@dataclass
class Candidate:
    """A tested change inside one series (before Benjamini-Hochberg)."""

    kind: str  # "step" or "drift"
    index: int  # index into the valid points: first point at the new level
    start: int  # first index of the change (== index for a step; first ramp point for a drift)
    d: float  # change in oriented log units (+ = worse)
    se: float
    p_value: float  # adjusted for the positions tested
    n_before: int
    n_after: int
    p_samples: float | None = None
    annotation: str | None = None  # "version" / "env" with details in reason
    annotation_reason: str | None = None


@dataclass
class SeriesAnalysis:
    """Per-series result before the run-wide FDR step."""

    series: Series
    n_points: int
    n_valid: int
    n_failed: int
    failure_reasons: dict
    noise: float | None  # relative (log) noise sigma
    se_typical: float | None
    n_positions: int
    candidates: list[Candidate]
    gap_findings: list[Finding]
    valid_commits: list[str]
    valid_values: np.ndarray
    levels: list[tuple[int, int]]  # (start, stop) index ranges of the segments


# --------------------------------------------------------------------------- helpers


def _norm_sf2(z: float) -> float:
    """Two-sided normal tail probability ``P(|Z| >= |z|)``."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def _z_for(level: float) -> float:
    """Two-sided normal quantile for a confidence level (0.99 -> 2.576)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2.0)


def robust_noise(y: np.ndarray, floor: float = 1e-3) -> float:
    """Robust noise sigma of a series from the MAD of its first differences.

    ``sigma = 1.4826 * median(|diff(y)|) / sqrt(2)``; for ``y = log(value)`` it is
    the relative noise. Differences are immune to level shifts and the median to
    outliers. Returns at least ``floor``. Raises ``ValueError`` for fewer than
    two points.
    """
    y = np.asarray(y, dtype=float)
    if y.size < 2:
        raise ValueError("robust_noise needs at least two points")
    d = np.abs(np.diff(y))
    return max(float(_MAD_TO_SIGMA * np.median(d) / math.sqrt(2.0)), floor)


def benjamini_hochberg(p_values: Sequence[float], q: float, m: int | None = None) -> tuple[np.ndarray, float]:
    """Benjamini-Hochberg step-up procedure.

    Parameters
    ----------
    p_values : sequence of float
        p-values of the tests.
    q : float
        False discovery rate level.
    m : int, optional
        Number of hypotheses (defaults to ``len(p_values)``; pass a larger ``m``
        when untested hypotheses count, e.g. series with no candidate).

    Returns
    -------
    q_values : ndarray
        BH-adjusted p-values (``min_{j>=i} p_(j) m / j``, capped at 1).
    threshold : float
        The largest p-value rejected, or ``q / m`` (the first rung) when none is.

    Reference: Benjamini & Hochberg (1995), JRSS B 57(1), 289-300.
    """
    p = np.asarray(p_values, dtype=float)
    n = p.size
    m = max(int(m or n), n, 1)
    if n == 0:
        return p, q / m
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, n + 1)
    qv = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(qv, 1.0)
    passed = np.nonzero(p[order] <= q * np.arange(1, n + 1) / m)[0]
    thr = float(p[order][passed[-1]]) if passed.size else q / m
    return out, thr


# --------------------------------------------------------------------------- detectors


def detect_rbf(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points (indices of the first point of each new segment) by
    ``ruptures.KernelCPD`` (RBF kernel, C implementation) on standardised ``z``."""
    import ruptures as rpt

    n = z.size
    if n < 2 * config.min_segment:
        return []
    algo = rpt.KernelCPD(kernel="rbf", params={"gamma": config.gamma}, min_size=config.min_segment)
    bkps = algo.fit(z.reshape(-1, 1)).predict(pen=config.penalty)
    return [int(b) for b in bkps if 0 < b < n]


def detect_pelt_l1(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points by ``ruptures.Pelt`` with the robust ``l1`` cost (pure Python:
    kept for the comparison in ``docs/analysis.md``; too slow for 900 series)."""
    import ruptures as rpt

    n = z.size
    if n < 2 * config.min_segment:
        return []
    # l1 cost of pure noise grows ~ sqrt(2/pi) per point in sigma units; the
    # penalty is in the same units as the rbf one after scaling (measured).
    bkps = rpt.Pelt(model="l1", min_size=config.min_segment, jump=1).fit(z.reshape(-1, 1)).predict(pen=config.penalty * 1.5)
    return [int(b) for b in bkps if 0 < b < n]


def detect_asv(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points from ``asv.step_detect.detect_steps`` (L1 Potts model with
    asv's automatic penalty). ``z`` is oriented so up is worse; asv wants a
    positive lower-is-better signal, so it gets ``exp(sigma-scaled z)``."""
    from asv import step_detect

    vals = list(np.exp(z * 0.01))  # any monotone positive map; asv is scale-aware only through ratios
    steps = step_detect.detect_steps(vals)
    return [int(s[0]) for s in steps[1:]]


DETECTORS: dict[str, Callable[[np.ndarray, AnalysisConfig], list[int]]] = {
    "rbf": detect_rbf,
    "pelt_l1": detect_pelt_l1,
    "asv": detect_asv,
}


# --------------------------------------------------------------------------- per series


def _oriented(values: np.ndarray, direction: Direction) -> np.ndarray:
    y = np.log(values)
    return -y if direction is Direction.HIGHER_IS_BETTER else y


def _env_diff(a: Point, b: Point) -> list[str]:
    ea, eb = dict(a.env or {}), dict(b.env or {})
    out = []
    for k in sorted(set(ea) | set(eb)):
        if k in ENV_KEYS or k not in ("machine",):
            va, vb = ea.get(k), eb.get(k)
            if va != vb and not (va in (None, "") and vb in (None, "")):
                out.append(f"{k} {va or '?'} -> {vb or '?'}")
    return out


def _boundary_annotation(pts: Sequence[Point], k: int) -> tuple[str, str] | None:
    """Version / environment change between valid points k-1 and k."""
    a, b = pts[k - 1], pts[k]
    if a.version and b.version and a.version != b.version:
        return "version", f"benchmark version changed {a.version[:8]} -> {b.version[:8]}"
    env = _env_diff(a, b)
    if env:
        return "env", "environment changed: " + "; ".join(env)
    return None


def _sample_test(a: Point, b: Point) -> float | None:
    """Mann-Whitney U p-value between two commits' raw samples (asv needs >= 6 a side)."""
    if not a.samples or not b.samples or len(a.samples) < 6 or len(b.samples) < 6:
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a.samples, b.samples, alternative="two-sided").pvalue)


def _step_test(y: np.ndarray, k: int, lo: int, hi: int, sigma: float, n_pos: int) -> tuple[float, float, float, int, int]:
    before = y[max(lo, 0):k]
    after = y[k:hi]
    n1, n2 = before.size, after.size
    d = float(np.median(after) - np.median(before))
    se = sigma * _SQRT_HALF_PI * math.sqrt(1.0 / n1 + 1.0 / n2)
    p = min(1.0, _norm_sf2(d / se) * max(n_pos, 1))
    return d, se, p, n1, n2


def analyze_series(series: Series, config: AnalysisConfig = AnalysisConfig(),
                   machine_commits: Sequence[str] | None = None) -> SeriesAnalysis:
    """Detect steps, drifts and gaps in one series.

    Parameters
    ----------
    series : Series
        Points in commit order.
    config : AnalysisConfig
    machine_commits : sequence of str, optional
        Every commit its machine has results for, in order; lets a series that
        stops be reported as missing since its last value.

    Returns
    -------
    SeriesAnalysis
        Candidates carry position-adjusted p-values; :func:`analyze` applies
        Benjamini-Hochberg across series and turns them into findings.

    Raises
    ------
    TypeError
        ``series`` is not a :class:`Series`.
    """
    if not isinstance(series, Series):
        raise TypeError(f"analyze_series needs a Series, got {type(series).__name__}")
    pts = series.points
    valid = []
    failed = 0
    reasons: dict[str, int] = {}
    for p in pts:
        v = p.value
        ok = v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
        if ok:
            valid.append(p)
        else:
            failed += 1
            r = p.reason or ("null result" if v is None else f"unusable value {v!r}")
            reasons[r] = reasons.get(r, 0) + 1
    label = series.key.label()
    gaps = _gap_findings(series, valid, failed, reasons, machine_commits)
    n = len(valid)
    values = np.array([p.value for p in valid], dtype=float)
    base = dict(series=series, n_points=len(pts), n_valid=n, n_failed=failed, failure_reasons=reasons,
                gap_findings=gaps, valid_commits=[p.commit for p in valid], valid_values=values)
    if n < config.min_points:
        return SeriesAnalysis(noise=robust_noise(_oriented(values, series.direction), config.noise_floor) if n >= 2 else None,
                              se_typical=None, n_positions=0, candidates=[], levels=[(0, n)] if n else [], **base)
    y = _oriented(values, series.direction)
    sigma = robust_noise(y, config.noise_floor)
    n_pos = max(n - 2 * config.min_segment + 1, 1)
    cps = DETECTORS[config.detector](y / sigma, config)

    # Version / environment boundaries are always tested; a detected change point
    # one commit away from such a boundary is attributed to it (detectors are often
    # off by one in noise, and the boundary is the known cause).
    bounds = {}
    for k in range(1, n):
        a, b = valid[k - 1], valid[k]
        if a.version == b.version and a.env == b.env:
            continue
        ann = _boundary_annotation(valid, k)
        if ann:
            bounds[k] = ann
    snapped = []
    for c in cps:
        near = [b for b in (c, c - 1, c + 1) if b in bounds]
        snapped.append(near[0] if near else c)
    cps = sorted(set(snapped) | set(bounds))
    levels = []
    edges = [0] + cps + [n]
    for a, b in zip(edges[:-1], edges[1:]):
        levels.append((a, b))

    cands: list[Candidate] = []
    W = config.window
    for i, k in enumerate(cps):
        lo = max(edges[i], k - W)
        hi = min(edges[i + 2], k + W)
        if k - lo < 1 or hi - k < 1:
            continue
        d, se, p, n1, n2 = _step_test(y, k, lo, hi, sigma, n_pos)
        c = Candidate("step", k, k, d, se, p, n1, n2, p_samples=_sample_test(valid[k - 1], valid[k]))
        if k in bounds:
            c.annotation, c.annotation_reason = bounds[k]
        cands.append(c)
    cands.extend(_drift_candidates(y, sigma, config, cps, bounds))
    se_typ = sigma * _SQRT_HALF_PI * math.sqrt(2.0 / max(min(W, n // 2), 1))
    return SeriesAnalysis(noise=sigma, se_typical=se_typ, n_positions=n_pos, candidates=cands, levels=levels, **base)


def _drift_candidates(y: np.ndarray, sigma: float, config: AnalysisConfig, cps: list[int], bounds: dict) -> list[Candidate]:
    """Runs of 2..drift_max_len commits moving the same way (the first by more
    than ``2 sigma`` from the baseline, each next one further), none by more than
    :data:`DRIFT_MAX_SHARE` of the total, fitting a ramp better than a step,
    that
    together move at least ``min_effect`` away from the median of the
    ``window`` points before the run."""
    n = y.size
    theta = math.log1p(config.min_effect)
    W = config.window
    Lmax = config.drift_max_len
    out: list[Candidate] = []
    if n < 5:
        return out
    dy = np.diff(y)
    n_tests = max(n * (Lmax - 1), 1)
    # median of the (up to) W points before each possible ramp start s, never
    # reaching back across a change point (a step is not a drift's baseline)
    base = np.full(n, np.nan)
    nbase = np.zeros(n, dtype=int)
    edges = [0] + [c for c in cps if 0 < c < n] + [n]
    for a, b in zip(edges[:-1], edges[1:]):
        top = min(b, n - 1)  # ramp starts s in a+3 .. top
        if top < a + 3:
            continue
        s = np.arange(a + 3, top + 1)
        idx = s[:, None] - W + np.arange(W)[None, :]
        win = np.where(idx >= a, y[np.clip(idx, 0, n - 1)], np.nan)
        base[s] = _row_medians(win)
        nbase[s] = np.minimum(s - a, W)
    best: list[tuple] = []
    # a ramp's first commit leaves the baseline by more than 2 sigma; its sign
    # is the drift's direction (few positions pass, so the loops below are short)
    S0 = np.arange(3, n - 1)
    first0 = y[S0] - base[S0]
    keep = ~np.isnan(first0) & (np.abs(np.nan_to_num(first0)) > 2.0 * sigma)
    S0, first0 = S0[keep], first0[keep]
    if S0.size == 0:
        return out
    sgn0 = np.sign(first0)
    for L in range(2, Lmax + 1):
        inr = S0 + L - 1 < n
        S, sg = S0[inr], sgn0[inr]
        if S.size == 0:
            break
        total = sg * (y[S + L - 1] - base[S])
        # every commit of the ramp moves the same way, none carries most of
        # the change (that would be a step)
        biggest = sg * (y[S] - base[S])
        ok = np.ones(S.size, dtype=bool)
        for k in range(1, L):
            inc = sg * dy[S + k - 1]
            ok &= inc > 0
            biggest = np.maximum(biggest, inc)
        ok &= (total >= theta) & (biggest <= DRIFT_MAX_SHARE * total)
        # persistence: the commits after the ramp (if any) must stay nearer
        # the new level than the baseline, else it was an excursion
        for j in range(config.min_segment - 1):
            idx = S + L + j
            later = np.where(idx < n, sg * (y[np.minimum(idx, n - 1)] - base[S]), np.inf)
            ok &= later >= 0.5 * total
        for s, sign in zip(S[ok], sg[ok]):
            s = int(s)
            e = s + L  # exclusive end of the ramp
            b = float(base[s])
            # level after the ramp: its last point and any later points up to
            # the next change point that stay within 2 sigma of it
            after = [y[e - 1]]
            nxt = min([c for c in cps if c >= e] + [n])
            for j in range(e, min(nxt, e + W)):
                if abs(y[j] - y[e - 1]) <= 2 * sigma:
                    after.append(y[j])
                else:
                    break
            lvl = float(np.median(after))
            d = lvl - b
            if sign * d < theta:
                continue
            # a ramp must fit the ramp points better than a step to the new
            # level does (by 6 sigma^2, measured on synthetic steps and ramps), else it is a step
            # that noise made look gradual
            ramp = y[s:e]
            frac = np.arange(1, L + 1) / L
            sse_ramp = float(np.sum((ramp - (b + frac * d)) ** 2))
            sse_step = float(np.sum((ramp - lvl) ** 2))
            if sse_step - sse_ramp < 6.0 * sigma * sigma:
                continue
            n1 = int(nbase[s])
            var_after = (_SQRT_HALF_PI ** 2 if len(after) > 2 else 1.0) / len(after)
            se = sigma * math.sqrt(var_after + (_SQRT_HALF_PI ** 2) / n1)
            p = min(1.0, _norm_sf2(d / se) * n_tests)
            best.append((p > 1e-3, sse_ramp / L, p, s, e, d, se, n1, len(after)))
    # keep non-overlapping runs: clearly significant ones first, and among
    # those the ramp that fits its points best (noise next to a drift makes
    # longer and shorter overlapping ramps pass too)
    best.sort()
    used: list[tuple[int, int]] = []
    for _weak, _fit, p, s, e, d, se, n1, n2 in best:
        if any(not (e <= a or s >= b) for a, b in used):
            continue
        used.append((s, e))
        c = Candidate("drift", e - 1, s, d, se, p, n1, n2)
        inside = [k for k in bounds if s <= k < e]
        if inside:
            c.annotation, c.annotation_reason = bounds[inside[0]]
        out.append(c)
    return out


def _row_medians(a: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN (rows have at least one value).
    ``np.nanmedian`` loops in Python over rows for this shape; a sort does not."""
    srt = np.sort(a, axis=1)  # NaN sorts last
    k = np.sum(~np.isnan(a), axis=1)
    lo = np.take_along_axis(srt, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(srt, (k // 2)[:, None], axis=1)[:, 0]
    return 0.5 * (lo + hi)


def _gap_findings(series: Series, valid: list[Point], failed: int, reasons: dict,
                  machine_commits: Sequence[str] | None) -> list[Finding]:
    label = series.key.label()
    out = []
    why = "; ".join(f"{r} x{c}" for r, c in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
    if failed:
        ok_ids = {id(p) for p in valid}
        last_fail = next((p.commit for p in reversed(series.points) if id(p) not in ok_ids), None)
        out.append(Finding(
            Status.FAILING, label, series.key, None, last_fail, None, None, None,
            f"{failed} of {len(series.points)} results failed (null): {why}" if valid
            else f"all {len(series.points)} results failed (null): {why}",
            extra={"failed": failed, "total": len(series.points)}))
    if valid:
        last_ok = valid[-1].commit
        later = []
        if machine_commits is not None:
            order = {c: i for i, c in enumerate(machine_commits)}
            if last_ok in order:
                later = list(machine_commits[order[last_ok] + 1:])
        else:
            idx = [p.commit for p in series.points].index(last_ok)
            later = [p.commit for p in series.points[idx + 1:]]
        if later:
            present = {p.commit for p in series.points}
            n_null = sum(1 for c in later if c in present)
            out.append(Finding(
                Status.MISSING, label, series.key, last_ok, later[-1], None, None, None,
                f"missing since commit {last_ok[:12]}: no value in the {len(later)} later commits "
                f"({n_null} failed, {len(later) - n_null} without a result)",
                extra={"later_commits": len(later), "later_failed": n_null}))
    return out


# --------------------------------------------------------------------------- run


@dataclass
class Report:
    """The result of :func:`analyze`; :meth:`as_dict` is the versioned JSON report."""

    config: AnalysisConfig
    findings: list[Finding]
    series: list[dict]
    budget: dict
    summary: dict
    extras: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        cfg = asdict(self.config)
        return {
            "schema": REPORT_SCHEMA,
            "version": REPORT_VERSION,
            "config": cfg,
            "summary": self.summary,
            "false_alarm_budget": self.budget,
            "findings": [f.as_dict() for f in self.findings],
            "series": self.series,
            **self.extras,
        }


def _ratio_ci(d: float, se: float, z: float, direction: Direction) -> tuple[float, tuple[float, float]]:
    """Natural-unit ratio after/before and its CI from an oriented log step."""
    sgn = -1.0 if direction is Direction.HIGHER_IS_BETTER else 1.0
    lo, hi = sgn * (d - z * se), sgn * (d + z * se)
    return math.exp(sgn * d), (math.exp(min(lo, hi)), math.exp(max(lo, hi)))


def analyze(series_list: Iterable[Series], config: AnalysisConfig = AnalysisConfig(), *,
            machine_commits: Mapping[str, Sequence[str]] | None = None,
            commit_order: Sequence[str] | None = None,
            costs: Mapping[tuple, "CaseCost"] | None = None,
            devices: Mapping[str, "DevicePeaks"] | None = None,
            aux_series: Sequence[Series] = ()) -> Report:
    """Analyse every series of a run.

    Parameters
    ----------
    series_list : iterable of Series
    config : AnalysisConfig
    machine_commits : mapping machine -> ordered commits with any result there
        (for "missing since"); defaults to the commits seen in its series.
    commit_order : global commit order (oldest first) used to line machines up
        for cross-machine rules; defaults to first-seen order.
    costs : mapping ``(benchmark, params)`` -> :class:`CaseCost`, for the
        generation-speedup rule.
    devices : mapping machine -> :class:`DevicePeaks`, for the cross-GPU rules.
    aux_series : series used only by the cross-GPU rules (``sol`` series for
        :func:`efficiency_gaps`), not tested for changes (they mirror the time
        series and would double the tests).

    Returns
    -------
    Report
        Findings (status enum, series, commit range, ratio with CI, reason), the
        false-alarm budget and a per-series noise table.
    """
    series_list = list(series_list)
    zq = _z_for(config.ci_level)
    if machine_commits is None:
        mc: dict[str, list[str]] = {}
        for s in series_list:
            lst = mc.setdefault(s.key.machine, [])
            seen = set(lst)
            for p in s.points:
                if p.commit not in seen:
                    lst.append(p.commit)
                    seen.add(p.commit)
        if commit_order is not None:
            rank = {c: i for i, c in enumerate(commit_order)}
            for k in mc:
                mc[k].sort(key=lambda c: rank.get(c, len(rank)))
        machine_commits = mc
    analyses = [analyze_series(s, config, machine_commits.get(s.key.machine)) for s in series_list]

    # ---- Benjamini-Hochberg over every step/drift test of the run
    # Two families: changes that would be blamed on the code (the alerts whose
    # false-discovery rate the budget is about) and changes at version or
    # environment boundaries (annotations); mixing them would let many real
    # version-change steps raise the threshold for code alerts.
    flat = [(a, c) for a in analyses for c in a.candidates if not c.annotation]
    flat_ann = [(a, c) for a in analyses for c in a.candidates if c.annotation]
    n_tested = sum(1 for a in analyses if a.n_positions > 0)
    m = max(n_tested, len(flat))
    qv, thr = benjamini_hochberg([c.p_value for _, c in flat], config.fdr_q, m)
    qv_ann, _thr_ann = benjamini_hochberg([c.p_value for _, c in flat_ann], config.fdr_q)
    theta = math.log1p(config.min_effect)
    findings: list[Finding] = []
    accepted: dict[int, list[tuple[Candidate, float]]] = {}
    for (a, c), q in list(zip(flat, qv)) + list(zip(flat_ann, qv_ann)):
        if abs(c.d) < theta or q > config.fdr_q:
            continue
        accepted.setdefault(id(a), []).append((c, float(q)))
    for a in analyses:
        acc = accepted.get(id(a), [])
        drifts = [(c, q) for c, q in acc if c.kind == "drift"]
        for c, q in acc:
            if c.kind == "step" and any(d.start - 1 <= c.index <= d.index + 1 for d, _ in drifts):
                continue  # the step is part of a creeping drift, reported as such
            findings.append(_candidate_finding(a, c, q, zq, config))
        findings.extend(a.gap_findings)

    # ---- a whole benchmark that stops at one commit was removed or renamed
    per_bench: dict[tuple, int] = {}
    for s in series_list:
        per_bench[(s.key.machine, s.key.benchmark)] = per_bench.get((s.key.machine, s.key.benchmark), 0) + 1
    stopped: dict[tuple, list[Finding]] = {}
    for f in findings:
        if f.status is Status.MISSING and f.key is not None:
            stopped.setdefault((f.key.machine, f.key.benchmark, f.commit_before), []).append(f)
    for (machine, bench, _c), group in stopped.items():
        if len(group) == per_bench.get((machine, bench)) and len(group) > 1:
            for f in group:
                f.reason += f"; all {len(group)} cases of {bench} stopped there (benchmark removed or renamed?)"

    # ---- false-alarm budget
    budget, series_rows = _budget(analyses, config, thr, m, len(flat))

    # ---- cross-machine rules
    cross: list[Finding] = []
    cross.extend(divergent_changes(analyses, config, commit_order=commit_order, devices=devices))
    if devices:
        cross.extend(efficiency_gaps(list(series_list) + list(aux_series), devices, config))
        if costs:
            cross.extend(generation_speedups(series_list, devices, costs, config))
    findings.extend(cross)

    counts: dict[str, int] = {}
    for f in findings:
        counts[f.status.value] = counts.get(f.status.value, 0) + 1
    summary = {
        "series": len(series_list),
        "series_tested": n_tested,
        "machines": sorted({s.key.machine for s in series_list}),
        "points": sum(a.n_points for a in analyses),
        "failed_points": sum(a.n_failed for a in analyses),
        "series_all_failed": sum(1 for a in analyses if a.n_valid == 0 and a.n_points),
        "findings_by_status": dict(sorted(counts.items())),
        "alerts": sum(1 for f in findings if f.status in ALERT_STATUSES),
    }
    return Report(config=config, findings=findings, series=series_rows, budget=budget, summary=summary)


def _candidate_finding(a: SeriesAnalysis, c: Candidate, q: float, zq: float, config: AnalysisConfig) -> Finding:
    s = a.series
    label = s.key.label()
    ratio, ci = _ratio_ci(c.d, c.se, zq, s.direction)
    before = a.valid_commits[c.start - 1]
    after = a.valid_commits[c.index] if c.kind == "step" else a.valid_commits[c.start]
    worse = c.d > 0
    pct = f"{abs(math.expm1(c.d)) * 100:.1f}%"
    unit_word = "higher" if s.direction is Direction.HIGHER_IS_BETTER else "lower"
    extra = {"n_before": c.n_before, "n_after": c.n_after, "noise_rel": a.noise, "kind": c.kind,
             "direction": s.direction.value}
    if c.p_samples is not None:
        extra["p_samples"] = c.p_samples
    if c.kind == "drift":
        extra["drift_end_commit"] = a.valid_commits[c.index]
        extra["drift_commits"] = c.index - c.start + 1
    if c.annotation:
        st = Status.VERSION_CHANGE if c.annotation == "version" else Status.ENV_CHANGE
        reason = (f"{pct} {'worse' if worse else 'better'} ({unit_word} is better) at a "
                  f"{c.annotation_reason}; not attributed to the code")
    elif c.kind == "drift" and c.index == a.n_valid - 1 and c.n_after < 2:
        st = Status.PENDING
        reason = (f"creeping {'slowdown' if worse else 'speed-up'} at the newest commits: {c.index - c.start + 1} "
                  f"consecutive commits each moved the same way, {pct} in total against the median of the "
                  f"{c.n_before} commits before; the next commit confirms it or shows an excursion")
    elif c.kind == "drift":
        st = Status.DRIFT_REGRESSION if worse else Status.DRIFT_IMPROVEMENT
        reason = (f"creeping {'slowdown' if worse else 'speed-up'}: {c.index - c.start + 1} consecutive commits each "
                  f"moved the same way (none by more than {DRIFT_MAX_SHARE:.0%} of the change), {pct} in total against the median of "
                  f"the {c.n_before} commits before")
    elif c.n_after < config.min_segment:
        st = Status.PENDING
        reason = (f"{pct} {'worse' if worse else 'better'} at the newest {c.n_after} commit(s); needs "
                  f"{config.min_segment} to tell a step from an outlier")
    elif c.p_samples is not None and c.p_samples > config.sample_alpha:
        st = Status.PENDING
        reason = (f"{pct} {'worse' if worse else 'better'} between segments, but the recorded samples of the two "
                  f"commits do not differ (Mann-Whitney p={c.p_samples:.3g})")
    else:
        st = Status.REGRESSION if worse else Status.IMPROVEMENT
        reason = (f"step: {pct} {'worse' if worse else 'better'} ({unit_word} is better), median of {c.n_after} "
                  f"commits after vs {c.n_before} before, noise {a.noise * 100:.2f}%")
    return Finding(st, label, s.key, before, after, ratio, ci, math.expm1(c.d), reason,
                   p_value=c.p_value, q_value=q, extra=extra)


def _budget(analyses: list[SeriesAnalysis], config: AnalysisConfig, thr: float, m: int, n_tests: int):
    """Expected false alerts per run from each series' noise.

    For a series with no real change, an alert needs (a) a BH-significant test,
    probability at most ``thr`` (the run's BH threshold), and (b) an estimated
    step of at least ``min_effect``: with the typical window standard error
    ``se``, at most ``n_positions * P(|N(0, se)| >= log(1 + min_effect))`` (union
    bound over positions). A series contributes ``min(a, b)``; their sum is the
    expected number of false alerts of this run. The same sum with a fixed
    per-series level of 0.01 (point-by-point alerting without FDR control) is
    published for comparison.
    """
    theta = math.log1p(config.min_effect)
    zpow = 0.8416  # one-sided normal quantile for 80% power
    total = 0.0
    naive = 0.0
    rows = []
    for a in analyses:
        row = {"series": a.series.key.label(), "points": a.n_points, "valid": a.n_valid, "failed": a.n_failed,
               "noise_rel": a.noise, "direction": a.series.direction.value}
        if a.se_typical and a.n_positions:
            pe = min(1.0, a.n_positions * _norm_sf2(theta / a.se_typical))
            fa = min(thr, pe)
            total += fa
            naive += min(0.01, pe)
            from statistics import NormalDist

            a_pos = min(max(thr / max(a.n_positions, 1), 1e-15), 0.5)
            z_thr = NormalDist().inv_cdf(1.0 - a_pos / 2.0)
            row["false_alarm_p"] = fa
            row["min_detectable_change"] = math.expm1((z_thr + zpow) * a.se_typical)
        rows.append(row)
    budget = {
        "fdr_q": config.fdr_q,
        "hypotheses": m,
        "tests": n_tests,
        "bh_threshold_p": thr,
        "expected_false_alerts": total,
        "expected_false_alerts_without_fdr": naive,
        "method": "sum over series of min(BH threshold, n_positions * P(|step| >= min_effect | noise)); "
                  "without FDR: per-series level 0.01",
        "noisiest_series": [r["series"] for r in sorted(
            (r for r in rows if r.get("noise_rel")), key=lambda r: -r["noise_rel"])[:5]],
    }
    return budget, rows


# --------------------------------------------------------------------------- cross-machine


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

    def peak_tflops(self, dev: DevicePeaks) -> float | None:
        if self.uses_tensor_cores:
            return dev.peak_tflops.get(self.dtype)
        return dev.peak_tflops.get("fp64" if self.dtype == "fp64" else "fp32")


def _level(values: np.ndarray, start: int, stop: int, W: int) -> tuple[float, int]:
    seg = values[max(start, stop - W):stop]
    return float(np.median(seg)), seg.size


def divergent_changes(analyses: Sequence[SeriesAnalysis], config: AnalysisConfig, *,
                      commit_order: Sequence[str] | None = None,
                      devices: Mapping[str, DevicePeaks] | None = None) -> list[Finding]:
    """Same commits, opposite fates on different machines.

    For each case (benchmark, params, timing) measured on two or more machines
    and each change point found on any of them between commits ``a`` and ``b``,
    the change across the same commits is estimated on every machine (median of
    up to ``window`` points at or before ``a`` against those at or after ``b``,
    bounded by that machine's own change points). A pair is *divergent* when one
    machine significantly improves and another significantly regresses (both 99%
    CIs exclude no change, both beyond ``min_effect``), or when their changes
    differ by more than ``divergence_threshold`` with non-overlapping CIs.
    Machines are compared only when their devices differ (or are unknown).
    """
    zq = _z_for(config.ci_level)
    theta = math.log1p(config.min_effect)
    rank = {c: i for i, c in enumerate(commit_order)} if commit_order else None
    by_case: dict[tuple, list[SeriesAnalysis]] = {}
    for a in analyses:
        if a.n_valid >= config.min_points and a.noise:
            by_case.setdefault(a.series.key.case(), []).append(a)
    out: list[Finding] = []
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
            for i in range(len(est)):
                for j in range(i + 1, len(est)):
                    gi, di, sei = est[i]
                    gj, dj, sej = est[j]
                    if devices:
                        pi, pj = devices.get(gi.series.key.machine), devices.get(gj.series.key.machine)
                        if pi and pj and pi.name == pj.name:
                            continue
                    lo_i, hi_i = di - zq * sei, di + zq * sei
                    lo_j, hi_j = dj - zq * sej, dj + zq * sej
                    sig_i = lo_i > 0 or hi_i < 0
                    sig_j = lo_j > 0 or hi_j < 0
                    opposite = (sig_i and sig_j and di * dj < 0 and abs(di) >= theta and abs(dj) >= theta)
                    apart = abs(di - dj) > config.divergence_threshold and (hi_i < lo_j or hi_j < lo_i)
                    if not (opposite or apart):
                        continue
                    worse, better = (gi, gj) if di > dj else (gj, gi)
                    dw, db = max(di, dj), min(di, dj)
                    sew = sei if worse is gi else sej
                    seb = sej if worse is gi else sei
                    ratio = math.exp(dw - db)
                    sed = math.sqrt(sew ** 2 + seb ** 2)
                    ci = (math.exp(dw - db - zq * sed), math.exp(dw - db + zq * sed))
                    why = ("opposite significant changes" if opposite else
                           f"changes differ by more than {config.divergence_threshold:.0%} with non-overlapping CIs")
                    out.append(Finding(
                        Status.DIVERGENT_CHANGE, f"{case[0]}{_params_text(case[1])} on "
                        f"{worse.series.key.machine} vs {better.series.key.machine}", worse.series.key, ca, cb,
                        ratio, ci, math.expm1(dw - db),
                        f"{why}: {_fmt_change(dw)} on {worse.series.key.machine}, {_fmt_change(db)} on "
                        f"{better.series.key.machine} between the same commits",
                        other_key=better.series.key,
                        extra={"change_worse_machine": math.expm1(dw), "change_other_machine": math.expm1(db)}))
    return out


def _fmt_change(d: float) -> str:
    pct = math.expm1(d) * 100
    return f"{abs(pct):.1f}% {'worse' if pct > 0 else 'better'}"


def _params_text(params) -> str:
    return "(" + ", ".join(f"{k}={v}" if k else str(v) for k, v in _param_pairs(params)) + ")"


def _effect_across(a: SeriesAnalysis, ra: int, rb: int, order: Mapping[str, int], config: AnalysisConfig):
    """(d, se) of series ``a`` between global ranks ``ra`` (before) and ``rb`` (after)."""
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
    return d, se


def _latest_level(s: Series, W: int) -> tuple[float, float, int, str] | None:
    """Median of the last ``W`` valid values (after the last change is unknown
    here, so a short window), its relative standard error, count and last commit."""
    vals = [p.value for p in s.points if p.value is not None and math.isfinite(p.value) and p.value > 0]
    if not vals:
        return None
    seg = np.array(vals[-W:], dtype=float)
    lv = np.log(seg)
    if seg.size >= 2:
        sig = robust_noise(lv)
        se = sig * _SQRT_HALF_PI / math.sqrt(seg.size)
    else:
        se = float("nan")
    last = [p.commit for p in s.points if p.value is not None][-1]
    return float(np.median(seg)), se, seg.size, last


def efficiency_gaps(series_list: Sequence[Series], devices: Mapping[str, DevicePeaks],
                    config: AnalysisConfig = AnalysisConfig()) -> list[Finding]:
    """Same kernel and parameters, much lower ``sol`` on one GPU than another.

    Uses series whose ``metric`` is ``sol`` (speed-of-light fraction, higher is
    better; from our records). For each case on machines with different devices,
    the latest level (median of the last 5 values) is compared: a ratio
    ``sol_low / sol_high <= efficiency_gap_ratio`` with the CIs apart is a gap.
    """
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
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                (si, li), (sj, lj) = group[i], group[j]
                di, dj = devices.get(si.key.machine), devices.get(sj.key.machine)
                if di is None or dj is None or di.name == dj.name:
                    continue
                (lo_s, lo_l), (hi_s, hi_l) = ((si, li), (sj, lj)) if li[0] < lj[0] else ((sj, lj), (si, li))
                r = lo_l[0] / hi_l[0]
                if r > config.efficiency_gap_ratio:
                    continue
                se = math.sqrt((lo_l[1] if math.isfinite(lo_l[1]) else 0) ** 2 + (hi_l[1] if math.isfinite(hi_l[1]) else 0) ** 2)
                ci = (r * math.exp(-zq * se), r * math.exp(zq * se)) if se else None
                if ci and ci[1] > 1.0:
                    continue
                dl, dh = devices[lo_s.key.machine], devices[hi_s.key.machine]
                out.append(Finding(
                    Status.EFFICIENCY_GAP, f"{case[0]}{_params_text(case[1])} on {dl.name} vs {dh.name}", lo_s.key,
                    lo_l[3], hi_l[3], r, ci, None,
                    f"reaches {lo_l[0]:.0%} of speed-of-light on {dl.name} but {hi_l[0]:.0%} on {dh.name} "
                    f"(ratio {r:.2f} <= {config.efficiency_gap_ratio})",
                    other_key=hi_s.key, extra={"sol_low": lo_l[0], "sol_high": hi_l[0]}))
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


def generation_speedups(series_list: Sequence[Series], devices: Mapping[str, DevicePeaks],
                        costs: Mapping[tuple, CaseCost], config: AnalysisConfig = AnalysisConfig()) -> list[Finding]:
    """Measured speedup between two GPUs far from the roofline prediction.

    For each time series (lower-is-better) case on two machines with different
    devices and a known :class:`CaseCost` (keyed ``(benchmark, params)``), the
    measured speedup ``time_a / time_b`` (latest levels) is compared with
    :func:`predicted_speedup`; outside ``[1/speedup_tolerance,
    speedup_tolerance]`` times the prediction (CI included) is reported.
    """
    zq = _z_for(config.ci_level)
    by_case: dict[tuple, list[tuple[Series, tuple]]] = {}
    for s in series_list:
        if s.direction is not Direction.LOWER_IS_BETTER or (s.metric and s.metric.lower() not in ("time", "latency_ms")):
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
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                (sa, la), (sb, lb) = group[i], group[j]
                da, db = devices.get(sa.key.machine), devices.get(sb.key.machine)
                if da is None or db is None or da.name == db.name:
                    continue
                # older/slower-bandwidth device first so speedups read A -> B
                if (da.peak_gbps or 0) > (db.peak_gbps or 0):
                    sa, la, da, sb, lb, db = sb, lb, db, sa, la, da
                pred = predicted_speedup(cost, da, db)
                if pred is None:
                    continue
                measured = la[0] / lb[0]
                rel = measured / pred[0]
                se = math.sqrt(sum(x ** 2 for x in (la[1], lb[1]) if math.isfinite(x)))
                ci = (rel * math.exp(-zq * se), rel * math.exp(zq * se))
                tol = config.speedup_tolerance
                if ci[0] <= tol and ci[1] >= 1.0 / tol:
                    continue
                out.append(Finding(
                    Status.UNEXPECTED_SPEEDUP, f"{case[0]}{_params_text(case[1])} {da.name} -> {db.name}", sb.key,
                    la[3], lb[3], rel, ci, None,
                    f"measured speedup {measured:.2f}x from {da.name} to {db.name}, roofline predicts "
                    f"{pred[0]:.2f}x ({pred[1]}-bound: {'bandwidth' if pred[1] == 'memory' else 'FLOP'} ratio); "
                    f"measured/predicted {rel:.2f} outside [{1 / tol:.2f}, {tol:.2f}]",
                    other_key=sa.key, extra={"measured_speedup": measured, "predicted_speedup": pred[0], "bound": pred[1]}))
    return out
