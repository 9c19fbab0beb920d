"""The decision of ``kernelwatch check``, as pure functions: samples -> statistics ->
status -> exit code, plus acknowledgements; the markdown summary is
:mod:`harness.gate.summary` (re-exported here).

Nothing here runs a benchmark, reads a file or calls git; :mod:`harness.gate.check`
does the measuring and hands the samples in. Every function returns the same
output for the same input (the bootstrap uses a fixed seed).

Model
-----
A *series* here is one benchmark x parameter combination (timing method
included) on the device the check runs on. For each series the check has
``base`` and ``head`` samples (seconds per call, all rounds pooled) and
classifies it:

========== ==================================================================
SLOWER     head's median is above ``1 + threshold`` times base's, the
           Mann-Whitney U test rejects "same distribution" at ``alpha``, and
           the bootstrap interval of the ratio (which resamples asv rounds,
           i.e. processes, when they are known) lies above 1.
FASTER     the mirror image: below ``1 / (1 + threshold)``, significant.
SAME       the change is within the practical threshold (significant or not).
UNCERTAIN  the change is beyond the threshold but not significant, or there
           are too few samples to test: shown, never hidden, never blocks.
BROKEN     head failed (an exception, a wrong result caught by the checker,
           a timeout): blocks with exit code 2.
NEW        head measured it, base has no usable value (absent, skipped,
           or failed on base).
REMOVED    base measured it, head does not have it (absent or skipped);
           :mod:`harness.gate.check` turns a skip on head, or a whole
           benchmark gone, into BROKEN unless a removal trailer names it.
========== ==================================================================

Why both a test and a threshold: a test alone flags 0.3% changes on a quiet
GPU that nobody should act on; a threshold alone fails innocent pull requests
on a noisy runner. NVBench's ``nvbench_compare_robust.py`` and asv's
``continuous`` (``-f`` factor plus Mann-Whitney) combine the two the same way.

*Borderline* results are re-measured once before they may block (see
:func:`confirm`): a SLOWER whose 99% bootstrap interval of the ratio of medians
reaches below ``1 + borderline_factor * threshold`` (it cannot rule out a
slowdown near the threshold), and an UNCERTAIN slowdown.

Exit codes (:func:`exit_code`): 0 nothing blocks; 1 at least one SLOWER that is
not acknowledged; 2 at least one BROKEN, or nothing could be compared at all.
Never a count (a count of 256 would wrap to 0 in a shell).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, replace
from typing import Iterable, Sequence

import numpy as np

# The pull-request summary lives in harness.gate.summary; its names are this module's too.
from harness.core.model import GateStatus
from harness.gate.summary import SUMMARY_LIMIT_BYTES, md_code, md_escape, render_markdown  # noqa: F401
from harness.gate.summary import pct as _pct

EXIT_OK = 0
EXIT_SLOWER = 1
EXIT_BROKEN = 2

#: ``git interpret-trailers`` key of an acknowledgement.
ACK_TRAILER = "Perf-Regression-Acknowledged"


#: The gate's statuses are the one vocabulary's (:class:`harness.core.model.GateStatus`).
Status = GateStatus


#: Worst first: the order of the summary table.
SEVERITY = {
    Status.BROKEN: 0,
    Status.SLOWER: 1,
    Status.UNCERTAIN: 2,
    Status.NEW: 3,
    Status.REMOVED: 4,
    Status.FASTER: 5,
    Status.SAME: 6,
}


@dataclass(frozen=True)
class GateConfig:
    """Decision parameters.

    Attributes
    ----------
    threshold : float
        Practical threshold, relative (0.05 = a 5% change of the median).
    alpha : float
        Significance level of the two-sided Mann-Whitney U test.
    min_samples : int
        Fewer samples on either side -> UNCERTAIN (asv's own Mann-Whitney needs 6).
    borderline_factor : float
        A SLOWER is borderline (re-measured) when the lower end of the ratio's
        interval is below ``1 + borderline_factor * threshold``.
    confidence : float
        Level of the bootstrap interval of the ratio of medians.
    bootstrap : int
        Bootstrap resamples.
    thresholds : tuple of (pattern, float)
        Per-benchmark thresholds: the first pattern (``fnmatch`` glob) that
        matches the benchmark name or the series label wins.
    """

    threshold: float = 0.05
    alpha: float = 0.01
    min_samples: int = 6
    borderline_factor: float = 2.0
    confidence: float = 0.99
    bootstrap: int = 2000
    thresholds: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if not (0 < self.threshold < 10):
            raise ValueError(f"threshold must be a relative change in (0, 10), got {self.threshold!r}")
        if not (0 < self.alpha < 0.5):
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha!r}")
        if self.min_samples < 2:
            raise ValueError("min_samples must be at least 2")
        if self.borderline_factor < 1:
            raise ValueError("borderline_factor must be at least 1")
        if not (0.5 < self.confidence < 1):
            raise ValueError(f"confidence must be in (0.5, 1), got {self.confidence!r}")
        if self.bootstrap < 100:
            raise ValueError("bootstrap must be at least 100 resamples")
        for pattern, value in self.thresholds:
            if not isinstance(pattern, str) or not pattern:
                raise ValueError(f"threshold override pattern must be a non-empty string, got {pattern!r}")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not (0 < value < 10):
                raise ValueError(f"threshold override for {pattern!r} must be a number in (0, 10), got {value!r}")

    def threshold_for(self, benchmark: str, label: str) -> tuple[float, str]:
        """``(threshold, where it came from)`` for one series."""
        for pattern, value in self.thresholds:
            if fnmatch.fnmatchcase(benchmark, pattern) or fnmatch.fnmatchcase(label, pattern):
                return float(value), f"override {pattern!r}"
        return self.threshold, "default"


@dataclass
class Side:
    """One commit's measurement of one series.

    ``present`` is False when the series was not run at that commit (absent from
    the suite, or skipped with ``NotImplementedError``); ``failed`` when it ran and
    failed, with ``error`` the exception line when known. ``samples`` are seconds;
    ``rounds`` splits them by asv round (process) when that is known, which lets
    the interval of the ratio account for differences between rounds.
    """

    present: bool
    failed: bool = False
    samples: list[float] | None = None
    error: str | None = None
    rounds: list[list[float]] | None = None  # the same samples, one list per asv round, when known
    #: the ``code_identity`` every round's record carries, when they all agree (issue 24)
    code: dict | None = None

    @classmethod
    def absent(cls) -> "Side":
        return cls(present=False)


@dataclass
class SeriesInput:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    base: Side
    head: Side

    @property
    def label(self) -> str:
        return series_label(self.benchmark, self.params)


def series_label(benchmark: str, params: Sequence[tuple[str, str]]) -> str:
    p = ", ".join(f"{k}={v}" for k, v in params)
    return f"{benchmark}({p})" if p else benchmark


@dataclass(frozen=True)
class Stats:
    """Comparison of two samples. Times in seconds; ``ratio`` = head p50 / base p50;
    ``ci_low``/``ci_high`` the bootstrap interval of that ratio (``None`` when a
    side has fewer than 2 samples); ``p_value`` two-sided Mann-Whitney U (``None``
    when it cannot be computed)."""

    n_base: int
    n_head: int
    base_p50_s: float
    head_p50_s: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    rounds_base: int = 1
    rounds_head: int = 1

    @property
    def change(self) -> float:
        """Relative change of the median: +0.10 = 10% slower."""
        return self.ratio - 1.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Acknowledgement:
    """A ``Perf-Regression-Acknowledged: <pattern> reason=<text>`` trailer."""

    pattern: str
    reason: str
    commit: str
    author: str | None = None

    def matches(self, benchmark: str, label: str) -> bool:
        return fnmatch.fnmatchcase(benchmark, self.pattern) or fnmatch.fnmatchcase(label, self.pattern)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Verdict:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    status: Status
    reason: str
    threshold: float | None = None
    threshold_source: str | None = None
    stats: Stats | None = None
    borderline: bool = False
    acknowledged: Acknowledgement | None = None
    first: Stats | None = None  # the first measurement, when this verdict comes from a re-measurement
    remeasured: Stats | None = None  # the re-measurement alone
    same_code: bool = False  # base and head ran the same compiled code (harness.measure.fingerprint)

    @property
    def label(self) -> str:
        return series_label(self.benchmark, self.params)

    @property
    def blocking(self) -> bool:
        return self.status is Status.SLOWER and self.acknowledged is None

    def as_dict(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "params": dict(self.params),
            "label": self.label,
            "status": self.status.value,
            "blocking": self.blocking,
            "reason": self.reason,
            "threshold": self.threshold,
            "threshold_source": self.threshold_source,
            "stats": self.stats.as_dict() if self.stats else None,
            "borderline": self.borderline,
            "acknowledged": self.acknowledged.as_dict() if self.acknowledged else None,
            "first_measurement": self.first.as_dict() if self.first else None,
            "remeasurement": self.remeasured.as_dict() if self.remeasured else None,
            "same_code": self.same_code,
        }


# ----------------------------------------------------------------------------- statistics


def _clean_samples(xs: Iterable[float] | None) -> np.ndarray:
    if xs is None:
        return np.empty(0)
    a = np.asarray([float(x) for x in xs], dtype=float)
    return a[np.isfinite(a) & (a > 0)]


def _rounds_array(rounds: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    clean = [r for r in (_clean_samples(r) for r in rounds) if r.size]
    lengths = np.array([r.size for r in clean])
    padded = np.full((len(clean), int(lengths.max())), np.nan)
    for i, r in enumerate(clean):
        padded[i, : r.size] = r
    return padded, lengths


def _bootstrap_medians(
    rounds: Sequence[Sequence[float]], n: int, rng: np.random.Generator, chunk: int = 250
) -> np.ndarray:
    """Two-stage bootstrap of the pooled median: draw the rounds with replacement,
    then the samples within each drawn round with replacement (Davison & Hinkley,
    *Bootstrap Methods and their Application*, 1997, sec. 3.8). With one round this
    is the ordinary bootstrap."""
    padded, lengths = _rounds_array(rounds)
    r, width = padded.shape
    out = np.empty(n)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        pick = rng.integers(0, r, size=(m, r))  # which round fills each slot
        lens = lengths[pick]  # (m, r)
        pos = np.floor(rng.random((m, r, width)) * lens[..., None]).astype(int)
        vals = padded[pick[..., None], pos]
        vals[np.arange(width)[None, None, :] >= lens[..., None]] = np.nan  # slots shorter than width
        out[start : start + m] = np.nanmedian(vals.reshape(m, r * width), axis=1)
    return out


def sample_stats(
    base: Sequence[float],
    head: Sequence[float],
    *,
    confidence: float = 0.99,
    bootstrap: int = 2000,
    seed: int = 0,
    base_rounds: Sequence[Sequence[float]] | None = None,
    head_rounds: Sequence[Sequence[float]] | None = None,
) -> Stats:
    """Ratio of medians (head / base), its bootstrap interval and the Mann-Whitney p-value.

    Parameters
    ----------
    base, head : sequence of float
        Per-call times in seconds; non-finite and non-positive values are dropped.
    confidence : float
        Level of the percentile bootstrap interval of the ratio of medians
        (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13).
    base_rounds, head_rounds : sequence of sequences of float, optional
        The same samples split by asv round. When given, the interval comes from a
        two-stage bootstrap (rounds, then samples within rounds), so a difference
        that only one round shows does not look certain: samples of one process
        are not independent of each other, which the Mann-Whitney test assumes.
    seed : int
        Seed of the resampling, so the same samples always give the same interval.

    Raises
    ------
    ValueError
        If either side has no usable sample.
    """
    from scipy.stats import mannwhitneyu

    b, h = _clean_samples(base), _clean_samples(head)
    if b.size == 0 or h.size == 0:
        raise ValueError(f"need at least one positive finite sample per side, got {b.size} base and {h.size} head")
    br = [r for r in (base_rounds or [b]) if _clean_samples(r).size] or [b]
    hr = [r for r in (head_rounds or [h]) if _clean_samples(r).size] or [h]
    mb, mh = float(np.median(b)), float(np.median(h))
    ratio = mh / mb
    ci_low = ci_high = None
    if b.size >= 2 and h.size >= 2:
        rng = np.random.default_rng(seed)
        ratios = _bootstrap_medians(hr, bootstrap, rng) / _bootstrap_medians(br, bootstrap, rng)
        tail = (1 - confidence) / 2 * 100
        ci_low, ci_high = (float(x) for x in np.percentile(ratios, [tail, 100 - tail]))
    p = None
    if b.size >= 2 and h.size >= 2:
        if np.ptp(np.concatenate([b, h])) == 0:
            p = 1.0  # every sample identical: no evidence of a difference
        else:
            p = float(mannwhitneyu(h, b, alternative="two-sided").pvalue)
    return Stats(
        n_base=int(b.size),
        n_head=int(h.size),
        base_p50_s=mb,
        head_p50_s=mh,
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p,
        rounds_base=len(br),
        rounds_head=len(hr),
    )


def _describe(st: Stats) -> str:
    ci = f", 99% CI {_pct(st.ci_low - 1)}..{_pct(st.ci_high - 1)}" if st.ci_low is not None else ""
    p = f", p={st.p_value:.2g}" if st.p_value is not None else ""
    return f"{_pct(st.change)}{ci}{p}, n={st.n_base}/{st.n_head}"


# ----------------------------------------------------------------------------- classification


def classify(series: SeriesInput, config: GateConfig = GateConfig()) -> Verdict | None:
    """Status of one series from its two sides; ``None`` when neither side ran it.

    See the module docstring for the statuses. ``borderline`` marks results that
    :mod:`harness.gate.check` re-measures before they may block.
    """
    label = series.label
    thr, src = config.threshold_for(series.benchmark, label)
    v = Verdict(
        benchmark=series.benchmark,
        params=tuple(series.params),
        status=Status.SAME,
        reason="",
        threshold=thr,
        threshold_source=src,
    )
    base, head = series.base, series.head
    if head.present and head.failed:
        why = head.error or "failed on head (no error message captured)"
        if base.present and base.failed:
            why += "; it fails on base too (not introduced by this change, but still broken)"
        v.status, v.reason = Status.BROKEN, why
        return v
    head_samples = _clean_samples(head.samples) if head.present else np.empty(0)
    base_ok = base.present and not base.failed
    if not head.present:
        if not base.present:
            return None
        v.status = Status.REMOVED
        v.reason = "measured on base, not run on head" if base_ok else "failed on base, not run on head"
        return v
    if not base_ok:
        v.status = Status.NEW
        v.reason = (
            ("no baseline: it fails on base (" + (base.error or "no message") + ")")
            if base.present
            else "no baseline: not run on base"
        )
        return v
    base_samples = _clean_samples(base.samples)
    if base_samples.size == 0 or head_samples.size == 0:
        v.status = Status.UNCERTAIN
        v.reason = f"no timing samples recorded (base {base_samples.size}, head {head_samples.size})"
        return v
    st = sample_stats(
        base_samples,
        head_samples,
        confidence=config.confidence,
        bootstrap=config.bootstrap,
        base_rounds=base.rounds,
        head_rounds=head.rounds,
    )
    v.stats = st
    slow_limit, fast_limit = 1.0 + thr, 1.0 / (1.0 + thr)
    beyond_slow, beyond_fast = st.ratio > slow_limit, st.ratio < fast_limit
    too_few = min(st.n_base, st.n_head) < config.min_samples or st.p_value is None
    if too_few:
        v.status = Status.UNCERTAIN if (beyond_slow or beyond_fast) else Status.SAME
        v.reason = (
            f"{_describe(st)}: too few samples for a test (need {config.min_samples} per side)"
            if v.status is Status.UNCERTAIN
            else f"{_describe(st)}: within the {thr:.0%} threshold (too few samples for a test)"
        )
        v.borderline = beyond_slow
        return v
    # Significant = the test rejects AND the round-aware interval excludes "no change"
    # in the same direction (the test alone trusts every sample to be independent).
    significant_slow = st.p_value < config.alpha and st.ci_low is not None and st.ci_low > 1.0
    significant_fast = st.p_value < config.alpha and st.ci_high is not None and st.ci_high < 1.0
    significant = significant_slow or significant_fast
    if beyond_slow and significant_slow:
        v.status = Status.SLOWER
        v.borderline = st.ci_low is None or st.ci_low < 1.0 + config.borderline_factor * thr
        v.reason = f"{_describe(st)}: slower than the {thr:.0%} threshold (significant at alpha={config.alpha:g})"
    elif beyond_fast and significant_fast:
        v.status = Status.FASTER
        v.reason = f"{_describe(st)}: faster beyond the {thr:.0%} threshold (significant at alpha={config.alpha:g})"
    elif beyond_slow or beyond_fast:
        v.status = Status.UNCERTAIN
        v.borderline = beyond_slow
        why = (
            f"p >= alpha={config.alpha:g}"
            if st.p_value >= config.alpha
            else f"the {config.confidence:.0%} interval over {st.rounds_base}+{st.rounds_head} rounds includes no change"
        )
        v.reason = (
            f"{_describe(st)}: beyond the {thr:.0%} threshold but not significant ({why}); the runner may be noisy"
        )
    else:
        v.status = Status.SAME
        tag = "significant" if significant else "not significant"
        v.reason = f"{_describe(st)}: within the {thr:.0%} threshold ({tag})"
    return v


def needs_remeasure(v: Verdict) -> bool:
    """A result that may block (or would, with more evidence) and is not clear-cut."""
    return v.borderline and v.status in (Status.SLOWER, Status.UNCERTAIN)


def confirm(first: Verdict, again: SeriesInput, pooled: SeriesInput, config: GateConfig = GateConfig()) -> Verdict:
    """Final verdict of a borderline series after one re-measurement.

    ``again`` holds the re-measurement alone, ``pooled`` the first measurement's
    samples plus the re-measurement's. The pooled samples decide the status,
    except that SLOWER (blocking) also requires the re-measurement alone to be
    SLOWER: a slowdown that does not reproduce becomes UNCERTAIN, never a block.
    A failure during the re-measurement makes the series BROKEN.
    """
    second = classify(again, config)
    final = classify(pooled, config)
    if second is None or final is None:
        out = replace(first, reason=first.reason + "; the re-measurement did not run it (kept the first result)")
        out.borderline = False
        return out
    if second.status is Status.BROKEN:
        second.first = first.stats
        second.reason = "failed on re-measurement: " + second.reason
        return second
    final.first, final.remeasured = first.stats, second.stats
    final.borderline = False
    if final.status is Status.SLOWER and second.status is not Status.SLOWER:
        final.status = Status.UNCERTAIN
        final.reason = (
            f"not confirmed on re-measurement: first {_describe(first.stats) if first.stats else first.status.value}"
            f", again {_describe(second.stats) if second.stats else second.status.value}; "
            f"pooled {final.reason}"
        )
    else:
        final.reason = f"re-measured: pooled {final.reason}"
        if second.stats is not None:
            final.reason += f"; re-measurement alone {_describe(second.stats)}"
    return final


# ----------------------------------------------------------------------------- same compiled code

#: Same code measured beyond ``max(UNSTABLE_MIN, UNSTABLE_FACTOR * threshold)``, with
#: the whole interval of the ratio beyond it: the machine, not the code, moved that
#: much (exit 2). A point estimate past the limit is not enough: on the 2-vCPU VM
#: under load, same-code checks measured 0.80x-1.35x with intervals reaching back
#: inside the limit (10 docs-only checks, ``docs/performance.md``).
UNSTABLE_FACTOR = 5.0
UNSTABLE_MIN = 0.25


def _beyond(st: Stats | None, ratio: float, limit: float) -> bool:
    """The ratio, and its whole interval when there is one, lies beyond ``1 + limit``
    or below ``1 / (1 + limit)``."""
    lo = st.ci_low if st is not None and st.ci_low is not None else ratio
    hi = st.ci_high if st is not None and st.ci_high is not None else ratio
    bound = 1.0 + limit
    return (ratio > bound and lo > bound) or (ratio < 1.0 / bound and hi < 1.0 / bound)


def same_code_verdict(v: Verdict, series: SeriesInput) -> tuple[Verdict, str | None]:
    """Apply "the gate never blocks a head whose compiled kernels equal base's" (issue 24).

    When both sides carry the same ``code_identity``
    (:func:`harness.core.records.same_code`), a SLOWER/FASTER/SAME/UNCERTAIN
    verdict becomes SAME, saying "same compiled code as base", with the measured
    change kept in the reason; unless the measurements differ significantly by
    more than ``max(UNSTABLE_MIN, UNSTABLE_FACTOR * threshold)``, the whole bootstrap
    interval of the ratio beyond it (the ratio alone when there is no interval): then it is
    UNCERTAIN and the second element is a problem line (the check exits 2,
    "unstable machine"). Other verdicts and differing code pass through unchanged.
    Returns ``(verdict, problem or None)``.
    """
    from harness.core.records import same_code

    if v.status not in (Status.SLOWER, Status.FASTER, Status.SAME, Status.UNCERTAIN):
        return v, None
    if not same_code(series.base.code, series.head.code):
        return v, None
    fp = str(series.head.code.get("fingerprint"))
    v = replace(v, same_code=True, borderline=False)
    thr = v.threshold if v.threshold is not None else 0.05
    limit = max(UNSTABLE_MIN, UNSTABLE_FACTOR * thr)
    ratio = v.stats.ratio if v.stats else 1.0
    if v.status in (Status.SLOWER, Status.FASTER) and _beyond(v.stats, ratio, limit):
        v.status = Status.UNCERTAIN
        v.reason = (
            f"same compiled code as base (fingerprint {fp}), yet measured {_pct(ratio - 1)}, "
            f"beyond {limit:.0%}: the machine is unstable; {v.reason}"
        )
        return v, f"{v.label}: unstable machine: the same compiled code measured {_pct(ratio - 1)} apart"
    v.status = Status.SAME
    v.reason = f"same compiled code as base (fingerprint {fp}): a difference is the machine's; measured {v.reason}"
    return v, None


# ----------------------------------------------------------------------------- acknowledgements

_ACK_RE = re.compile(r"^(?P<pattern>\S+)\s+reason=(?P<reason>.*\S)\s*$", re.S)


#: What is left of a pattern once its wildcards (``*``, ``?``, ``[...]``) and separators are removed:
#: nothing means it names no benchmark and matches every one.
_WILDCARDS = re.compile(r"\[[^\]]*\]|[*?.()=,\s]")


def matches_everything(pattern: str, names: Iterable[str] = ()) -> bool:
    """``pattern`` acknowledges every benchmark: it is wildcards only (``*``, ``*.*``,
    ``?*``), or it matches each of ``names`` (the suite's benchmark names, two or more),
    as ``suite.*`` does. Such a trailer is refused: it would wave through any slowdown or
    removal, including ones made after it was written (issue 29)."""
    if not _WILDCARDS.sub("", pattern):
        return True
    names = list(names)
    return len(names) >= 2 and all(fnmatch.fnmatchcase(n, pattern) for n in names)


def parse_acknowledgement(value: str, commit: str, author: str | None = None) -> Acknowledgement:
    """Parse the value of a ``Perf-Regression-Acknowledged`` trailer.

    Format: ``<pattern> reason=<text>``; ``pattern`` is an ``fnmatch`` glob
    matched against the benchmark name (``suite.vector_add.track_time``) and the
    series label (``suite.vector_add.track_time(provider=torch, ...)``).

    Raises
    ------
    ValueError
        If the value has no pattern or no non-empty ``reason=``, or the pattern is
        wildcards only (:func:`matches_everything`).
    """
    m = _ACK_RE.match(" ".join(str(value).split()))
    if not m:
        raise ValueError(f"commit {commit[:12]}: {ACK_TRAILER}: {value!r} is not '<benchmark pattern> reason=<text>'")
    if matches_everything(m["pattern"]):
        raise ValueError(
            f"commit {commit[:12]}: {ACK_TRAILER}: pattern {m['pattern']!r} names no benchmark and would "
            "acknowledge every one; name the benchmarks (suite.vector_add.*)"
        )
    return Acknowledgement(pattern=m["pattern"], reason=m["reason"], commit=commit, author=author)


def apply_acknowledgements(verdicts: Iterable[Verdict], acks: Sequence[Acknowledgement]) -> list[Verdict]:
    """Mark each SLOWER verdict that an acknowledgement matches (the first one
    in ``acks`` order); it then warns instead of blocking. Other statuses are
    never acknowledged: a BROKEN kernel is not a performance trade-off."""
    out = []
    for v in verdicts:
        if v.status is Status.SLOWER and v.acknowledged is None:
            for a in acks:
                if a.matches(v.benchmark, v.label):
                    v = replace(v, acknowledged=a)
                    break
        out.append(v)
    return out


# ----------------------------------------------------------------------------- exit code


def exit_code(verdicts: Sequence[Verdict]) -> int:
    """0 nothing blocks, 1 an unacknowledged SLOWER, 2 a BROKEN series or
    nothing measured at all. BROKEN wins over SLOWER."""
    if not verdicts:
        return EXIT_BROKEN
    if any(v.status is Status.BROKEN for v in verdicts):
        return EXIT_BROKEN
    if any(v.blocking for v in verdicts):
        return EXIT_SLOWER
    return EXIT_OK


def sort_worst_first(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """BROKEN, blocking SLOWER, acknowledged SLOWER, UNCERTAIN, NEW, REMOVED,
    FASTER, SAME; within a status the largest slowdown first, then by label."""

    def key(v: Verdict):
        ratio = v.stats.ratio if v.stats else 1.0
        return (SEVERITY[v.status], 0 if v.blocking else 1, -ratio, v.label)

    return sorted(verdicts, key=key)


def counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    c = {s.value: 0 for s in Status}
    for v in verdicts:
        c[v.status.value] += 1
    return c
