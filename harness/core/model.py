"""The one vocabulary of kernelwatch: series, points, statuses, directions and
the change wording, defined once here and imported by every stage.

- :class:`SeriesKey`, :class:`Point`, :class:`Series`: a series is machine x
  benchmark x parameters x timing method (``shared/ARCHITECTURE.md``); its
  points are one commit's result each. :mod:`harness.store` loads them,
  :mod:`harness.analysis` reads them, :mod:`harness.report` draws them.
- :class:`Status`: what a finding of the analysis says (the stable strings of
  the JSON report, ``docs/analysis.md``); :class:`EventStatus`: what a commit's
  event on the site says, grouping the findings of that commit;
  :class:`RowStatus`: the site's other row kinds; :class:`GateStatus`: what
  the PR gate says of a series.
- :class:`Direction` and :func:`direction_for`: which way is better.
- :func:`change_text` (and :func:`signed_pct`): the one wording of a change (``+26.8% slower``,
  ``x5.74 slower``, ``-10.5% faster``; ``worse``/``better`` for rates), used
  by the analysis' reasons, the site and the terminal.
- :func:`printable`: a string from the data made safe for a terminal (control
  characters shown as ``\\x1b`` text), used on every data-derived line printed.

Pure data; no I/O, no numpy, no torch.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

#: Parameter name of the asv environment when it is part of a series' identity.
ENV_PARAM = "asv_env"

#: Metric names (or name suffixes) whose larger values are better. Everything
#: else (time, latency, memory) is lower-is-better.
HIGHER_IS_BETTER = ("tflops", "gbps", "mfu", "bw_util", "sol", "gflops", "throughput", "speedup")


class _StrEnum(str, Enum):
    """A ``str`` enum that prints as its value on every Python (``enum.StrEnum``
    is 3.11+): f-strings, ``str()``, jinja2 and ``json`` all see ``"regression"``."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Direction(_StrEnum):
    """Which way is better for a metric."""

    LOWER_IS_BETTER = "lower_is_better"
    HIGHER_IS_BETTER = "higher_is_better"


class Status(_StrEnum):
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


#: Annotation kind of a step between two commits that ran the same compiled code in
#: the same environment (:mod:`harness.analysis.autotune`): the machine moved, not the code.
SAME_CODE_KIND = "same_compiled_code"

#: The one label the pages give a figure above its ceiling or peak, whichever way it
#: got there: a point's ``above_ceiling`` guard status
#: (:data:`harness.core.metrics.STATUS_ABOVE_CEILING`), a utilisation above 100%
#: within the guard margin, or a calibration whose ceilings a point of the suite beat
#: (issue 25: pages said "above 100%", "above_ceiling" and "under-measured" for it).
ABOVE_CEILING_LABEL = "above ceiling"

#: The label of a figure that is itself within its ceiling, but whose ceiling is
#: doubtful (a calibration the suite beat, or one measured under contention): a
#: kernel at 0.1% of such a ceiling read "above ceiling" on every page (issue 25,
#: newcomer trial of 2026-12-03).
DOUBTFUL_CEILING_LABEL = "doubtful ceiling"

#: Statuses that a gate should treat as "something got worse in the code".
ALERT_STATUSES = frozenset({Status.REGRESSION, Status.DRIFT_REGRESSION, Status.DIVERGENT_CHANGE})
#: Per-series statuses that claim a slowdown, confirmed or not.
SLOWER_STATUSES = (Status.REGRESSION, Status.DRIFT_REGRESSION, Status.PENDING)
#: Confirmed slowdowns (a pending one is not yet).
CONFIRMED_REGRESSIONS = (Status.REGRESSION, Status.DRIFT_REGRESSION)
FASTER_STATUSES = (Status.IMPROVEMENT, Status.DRIFT_IMPROVEMENT)
#: Findings comparing machines, not commits.
CROSS_STATUSES = (Status.DIVERGENT_CHANGE, Status.EFFICIENCY_GAP, Status.UNEXPECTED_SPEEDUP)


class EventStatus(_StrEnum):
    """What one commit's event on the site says, from its findings' statuses
    (:func:`harness.report.attention.event_status`)."""

    REGRESSION = "regression"
    PENDING = "pending"
    MIXED = "mixed"
    IMPROVEMENT = "improvement"
    DIVERGENT_CHANGE = "divergent_change"
    BENCHMARK_CHANGED = "benchmark_changed"
    ENVIRONMENT_CHANGED = "environment_changed"


class GateStatus(_StrEnum):
    """What ``kernelwatch check`` says of one series, base against head
    (:func:`harness.gate.decide.classify`; ``docs/pr-gate.md``)."""

    SLOWER = "SLOWER"
    FASTER = "FASTER"
    SAME = "SAME"
    UNCERTAIN = "UNCERTAIN"
    BROKEN = "BROKEN"
    NEW = "NEW"
    REMOVED = "REMOVED"


class RowStatus(_StrEnum):
    """Kinds of rows on the site's findings page that are not one finding of the
    analysis (:func:`harness.report.attention.collapse`)."""

    RENAMED_OR_REPLACED = "renamed_or_replaced"  # series that stopped where others started
    INSUFFICIENT_HISTORY = "insufficient_history"  # too few points to judge


def direction_for(metric: str | None = None, unit: str | None = None) -> Direction:
    """Direction of a metric from its unit, else its name.

    The unit decides when it is one we recognise (:func:`unit_direction`): a
    rate, an amount per unit of time (``GB/s``, ``GFLOP/s``, ``TFLOP/s``,
    ``ops/s``, ``items/s``, ``it/s``, ``samples per second``, ``Gbps``,
    ``TFLOPS``, ``IOPS``...), is higher-is-better; asv's own units (``seconds``
    for ``time_``, ``bytes`` for ``mem_``/``peakmem_``, ``unit``, the default of
    ``track_``) and any time or size are lower-is-better, since asv compares
    every benchmark as lower-is-better (asv 0.6 ``asv/commands/compare.py``;
    ``shared/ASV_NOTES.md``). Otherwise the name decides: ``tflops``, ``gbps``,
    ``mfu``, ``bw_util``, ``sol`` (and ``*_measured``, ``gflops``,
    ``throughput``, ``speedup``: :data:`HIGHER_IS_BETTER`) or a name that is
    itself a rate unit are higher-is-better; anything else is lower-is-better.
    """
    if unit:
        d = unit_direction(unit)
        if d is not None:
            return d
    for text in (metric, unit):
        if not text:
            continue
        t = text.lower()
        base = t[: -len("_measured")] if t.endswith("_measured") else t
        for name in HIGHER_IS_BETTER:
            if base == name or base.endswith("_" + name) or base.endswith("." + name) or base.startswith(name + "/"):
                return Direction.HIGHER_IS_BETTER
        if unit_direction(text) is Direction.HIGHER_IS_BETTER:
            return Direction.HIGHER_IS_BETTER
    return Direction.LOWER_IS_BETTER


def direction_assumed(metric: str | None = None, unit: str | None = None) -> bool:
    """True when neither the unit nor the name says which way is better, so
    :func:`direction_for` fell back on asv's convention (lower is better).

    ``%``, ``score``, ``accuracy``, ``count``, ``fraction``: an accuracy in % that
    halves and an error rate in % that halves read the same; kernelwatch cannot
    tell them apart, so it says so (the analysis summary's ``direction_assumed``,
    one warning per unit, and the finding's reason) instead of deciding silently
    (issue 29, round 4). A series with no unit (asv's ``time_`` default) is not
    assumed: its unit is seconds.
    """
    if not isinstance(unit, str) or not unit.strip():
        return False
    if unit_direction(unit) is not None:
        return False
    return direction_for(metric, unit) is Direction.LOWER_IS_BETTER


#: Units asv itself gives a benchmark: ``time_`` -> ``seconds``, ``mem_`` and
#: ``peakmem_`` -> ``bytes``, ``track_`` -> ``unit`` unless it says otherwise
#: (asv_runner 0.3 ``benchmarks/time.py``, ``mem.py``, ``peakmem.py``, ``track.py``).
ASV_UNITS = ("seconds", "bytes", "unit")

# A time unit, as the denominator of a rate or a unit of its own.
_TIME_UNIT = r"(?:s|secs?|seconds?|ms|msecs?|milliseconds?|us|µs|μs|usecs?|microseconds?|ns|nsecs?|nanoseconds?|min|mins|minutes?|h|hrs?|hours?|days?)"
# ``<amount>/<time>`` or ``<amount> per <time>``: GB/s, GFLOP/s, it/s, items per second.
_RATE = re.compile(r"^(?P<amount>.*?\S)\s*(?:/|\bper\s+)\s*(?:1\s*)?" + _TIME_UNIT + r"$")
# The ``...ps`` spellings of rates: bps, Gbps, GBps, FLOPS, TFLOPS, IOPS, fps, qps, tps, rps.
_PS = re.compile(r"^(?:[kmgtpe]i?)?(?:bps|bitps|byteps|flops|iops|fps|qps|tps|rps)$")
# Times and sizes: lower-is-better.
_SIZE = re.compile(r"^(?:[kmgtpe]i?)?(?:b|bytes?|bits?)$")


#: A frequency is a rate (events per second): higher is better.
_HZ = re.compile(r"[kmgt]?hz")
#: A factor against a baseline: kernelwatch's and Liger's ``speedup`` tracks.
SPEEDUP_UNITS = frozenset({"x", "times", "speedup"})


def unit_direction(unit: str | None) -> Direction | None:
    """Direction a unit implies, or ``None`` when the unit does not say.

    Rates (an amount per time: ``GB/s``, ``GiB/s``, ``GFLOP/s``, ``TFLOP/s``,
    ``ops/s``, ``items/s``, ``it/s``, ``samples/sec``, ``tokens per second``,
    ``1/s``; the ``...ps`` spellings ``Gbps``, ``GBps``, ``TFLOPS``, ``IOPS``,
    ``fps``), frequencies (``Hz``, ``kHz``, ``MHz``, ``GHz``) and factors
    (``x``, ``times``: a speed-up) are higher-is-better; asv's own units (:data:`ASV_UNITS`), times
    (``s``, ``ms``, ``us``...) and sizes (``B``, ``KiB``, ``GB``...) and
    time per amount (``s/it``, ``ms/op``) are lower-is-better. Case, surrounding
    space and a ``*_measured`` suffix are ignored. Anything else (``%``,
    ``fraction``, ``count``) gives ``None``: the metric's name decides.
    """
    if not isinstance(unit, str):
        return None
    u = unit.strip().lower()
    if u.endswith("_measured"):
        u = u[: -len("_measured")]
    if not u:
        return None
    m = _RATE.match(u)
    if m and not re.fullmatch(_TIME_UNIT, m["amount"].strip()):  # s/s is a ratio, not a rate
        return Direction.HIGHER_IS_BETTER
    if _PS.match(u) or _HZ.fullmatch(u) or u in SPEEDUP_UNITS:
        return Direction.HIGHER_IS_BETTER
    if u in ASV_UNITS or re.fullmatch(_TIME_UNIT, u) or _SIZE.match(u):
        return Direction.LOWER_IS_BETTER
    if re.fullmatch(_TIME_UNIT + r"\s*(?:/|\bper\s+)\s*\S.*", u):  # s/it, ms per op
        return Direction.LOWER_IS_BETTER
    return None


#: How the reason of a point whose number no benchmark can measure starts: zero,
#: negative or infinite (``harness.store.columns.finish_group``), 50 orders of
#: magnitude off its series (``harness.analysis.run``). Counted apart as
#: ``impossible_points`` in the analysis summary (issue 29 S5).
IMPOSSIBLE = "invalid: impossible value"


#: C0 controls, DEL and C1 controls (ECMA-48): a terminal acts on them (colour,
#: cursor moves, clear screen, OSC 8 hyperlinks) instead of showing them.
#: Also the bidirectional embeddings, overrides and isolates (U+202A..U+202E,
#: U+2066..U+2069; Unicode UAX #9): shown raw they reorder the rest of the line
#: ("trojan source", CVE-2021-42574), so a name can read as another; and lone
#: surrogates (U+D800..U+DFFF), which no UTF-8 terminal or file can take.
_INVISIBLE = "\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROL_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")


def _visible(m) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def printable(text, keep_layout: bool = False) -> str:
    """``text`` (any object, through ``str``) with every C0/C1 control character
    and DEL replaced by its visible escape (``"\\x1b"`` as four characters,
    ``"\\x00"`` for NUL), so a benchmark, machine or path name from the data
    cannot colour, move, clear or hyperlink the terminal it is printed to
    (issue 29 F4). ``keep_layout=True`` keeps newline and tab, for multi-line
    messages. Markup is a separate matter: rich still needs ``escape``/``Text``.
    Bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069) and lone
    surrogates are shown the same way, as ``"\\u202e"`` (issue 29 S3, F3).
    """
    pattern = _CONTROL_BUT_LAYOUT if keep_layout else _CONTROL
    return pattern.sub(_visible, str(text))


def signed_pct(x) -> str:
    """A fraction as a signed percentage with one decimal (0.05 -> ``+5.0%``);
    ``n/a`` for ``None`` or a value that is not finite."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:+.1f}%"


def change_text(change, higher: bool | None = None) -> str:
    """A change in the one wording of the analysis, the site and the terminal.

    ``change`` is the signed relative change in the bad direction (+0.268 =
    26.8% worse; the analysis' ``magnitude.change``), shown ``+26.8% slower`` /
    ``-10.5% faster`` (``worse`` / ``better`` when ``higher`` says higher is
    better), as a factor from 2x (``x5.74 slower``, not ``+474.0%``); ``n/a``
    when unknown (``None``, a bool, not finite).
    """
    if change is None or isinstance(change, bool) or not isinstance(change, (int, float)) or not math.isfinite(change):
        return "n/a"
    if change == 0:
        return "+0.0%"
    lower = not higher
    word = ("slower" if lower else "worse") if change > 0 else ("faster" if lower else "better")
    return f"x{1 + change:.3g} {word}" if change >= 1 else f"{100 * change:+.1f}% {word}"


def _param_pairs(params) -> list[tuple[str | None, object]]:
    """``params`` as ``(name, value)`` pairs; a bare value has name ``None``."""
    out = []
    for p in params:
        if isinstance(p, (tuple, list)) and len(p) == 2:
            out.append((p[0], p[1]))
        else:
            out.append((None, p))
    return out


@dataclass(frozen=True)
class SeriesKey:
    """Identity of a series: machine x benchmark x parameters x timing method.

    ``params`` are ``(name, value)`` pairs in asv's order (strings as asv
    stores them). ``env`` is the asv environment name, set only on machines
    where a commit was measured in more than one environment; it is then also
    the last parameter, ``("asv_env", name)`` (:data:`ENV_PARAM`), so every
    consumer that keys series by (machine, benchmark, params, timing) keeps
    them apart (asv's own graphs add the environment as one more dimension).
    """

    machine: str
    benchmark: str
    params: tuple = ()
    timing: str | None = None
    env: str | None = None

    def param_dict(self) -> dict:
        return dict(self.params)

    def label(self) -> str:
        """``machine / benchmark(p=v, ...) [timing]``: unique within a run."""
        t = f" [{self.timing}]" if self.timing else ""
        return f"{self.machine} / {self.case_label()}{t}"

    def case_label(self) -> str:
        """``benchmark(p=v, ...)``: the case, without machine and timing."""
        p = ", ".join(f"{k}={v}" if k else str(v) for k, v in _param_pairs(self.params))
        return f"{self.benchmark}({p})" if p else self.benchmark

    def case(self) -> tuple:
        """The machine-independent part (benchmark, params, timing)."""
        return (self.benchmark, self.params, self.timing)

    def slug(self) -> str:
        """Stable file-name-safe id (12 hex digits of SHA-1 of the identity)."""
        return hashlib.sha1(repr((self.machine, self.benchmark, self.params, self.timing)).encode()).hexdigest()[:12]

    def as_dict(self) -> dict:
        return {
            "machine": self.machine,
            "benchmark": self.benchmark,
            "params": [[k, v] for k, v in _param_pairs(self.params)],
            "timing": self.timing,
        }


@dataclass(slots=True)  # millions of points at scale: slots halve their memory and speed up creation
class Point:
    """One commit's result in a series.

    Attributes
    ----------
    commit : str
        Full commit hash.
    value : float or None
        The measurement in the series' unit (seconds for asv ``time_``); ``None``
        when the benchmark failed, with ``reason``.
    reason : str or None
        Why ``value`` is ``None``: ``"failed"``, ``"invalid: ..."`` or a record's status.
    ci : (float, float) or None
        asv's 99% CI of the median; for a Liger point the envelope of its runs'
        ``y_value_20..y_value_80`` (:func:`harness.store.importers._liger_point`).
    q_25, q_75 : float or None
        Quartiles of the samples, as asv stores them.
    samples : sequence of float or None
        In the series' unit: asv's raw samples, or one value per run where one
        commit (a Liger version, an asv re-run) was run more than once, so
        ``len(samples)`` is the number of runs (:func:`harness.store.results._pool_runs`).
    version : str or None
        Benchmark version (asv ``version``: a source hash unless set).
    env_name : str or None
        asv environment name of the run.
    started_at : int or None
        asv's start time of the benchmark, ms since the epoch.
    record : dict or None
        kernelwatch's record of the case (``docs/records.md``), when one was written.
    env : mapping or None
        Environment identity for the analysis: any of the analysis' ``ENV_KEYS``
        (driver, CUDA, torch, ...; :func:`harness.store.dataset.build_inputs`).
    """

    commit: str
    value: float | None
    reason: str | None = None
    ci: tuple[float, float] | None = None
    q_25: float | None = None
    q_75: float | None = None
    samples: list[float] | tuple[float, ...] | None = None
    version: str | None = None
    env_name: str | None = None
    started_at: int | None = None
    record: dict | None = None
    env: Mapping[str, str] | None = None


@dataclass
class Series:
    """An ordered series of points.

    ``points`` are in commit order (oldest first) and hold each commit once
    (:class:`ValueError` otherwise, at construction). ``unit`` and ``type`` are
    asv's (``"seconds"``, ``"time"``); ``metric`` names what is measured
    (``"time"``, ``"tflops"``, ``"sol"``...) and, with ``unit``, decides the
    :class:`Direction` unless one is given.

    Raises
    ------
    TypeError
        When ``key`` is not a :class:`SeriesKey`.
    ValueError
        When a commit appears twice in ``points``, or ``direction`` is neither a
        :class:`Direction` nor one's value (``"higher_is_better"`` is taken as
        :attr:`Direction.HIGHER_IS_BETTER`).
    """

    key: SeriesKey
    points: list[Point] = field(default_factory=list)
    unit: str | None = None
    type: str | None = None
    metric: str | None = None
    direction: Direction | None = None
    #: The newest commit whose results name this series when that is later than its
    #: newest point: points left out of the analysis (measured under CPU contention,
    #: :func:`harness.store.dataset.build_inputs`) still show the series ran there,
    #: so it is not "missing" after them. ``None``: the newest point's commit.
    last_seen: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, SeriesKey):
            raise TypeError(f"Series.key must be a SeriesKey, got {type(self.key).__name__}")
        if self.direction is None:
            self.direction = direction_for(self.metric, self.unit)
        else:
            # the analysis compares with ``is``: a bare "higher_is_better" string
            # would read as lower-is-better there
            self.direction = Direction(self.direction)
        seen = set()
        for c in point_commits(self.points):
            if c in seen:
                raise ValueError(f"{self.key.label()}: commit {c} appears twice")
            seen.add(c)


def point_commits(points) -> list[str]:
    """The commits of a sequence of :class:`Point`, in order. A sequence that
    makes its points on access (:class:`harness.store.model.PointView`) gives
    them through its ``commit_list()`` without making points."""
    fast = getattr(points, "commit_list", None)
    return fast() if fast is not None else [p.commit for p in points]


def point_values(points) -> list:
    """The values (``None`` where a point has none) of a sequence of
    :class:`Point`, in order; through ``value_list()`` where the sequence has one
    (see :func:`point_commits`)."""
    fast = getattr(points, "value_list", None)
    return fast() if fast is not None else [p.value for p in points]


#: A benchmark whose name contains this is a control kernel (``kernels/control.py``,
#: ``suite.control_copy.track_time``): frozen code that measures the machine.
CONTROL_MARK = "control"


def is_control(benchmark: str) -> bool:
    """True for a control kernel's benchmark name (contains :data:`CONTROL_MARK`)."""
    return CONTROL_MARK in str(benchmark)
