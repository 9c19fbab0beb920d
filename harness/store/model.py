"""The loaded-results model of :mod:`harness.store.results`: series as columns and
the result set that holds them. Series keys, points and series are the one
model of :mod:`harness.core.model`, re-exported here.

See :mod:`harness.store.results` for the rules (what a machine, a series and a
point are, and how bad input is reported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.model import ENV_PARAM, Point, Series, SeriesKey  # noqa: F401  (the one series model)

if TYPE_CHECKING:
    import numpy as np


@dataclass
class CommitInfo:
    hash: str
    date_ms: int | None
    order: int | None = None
    subject: str | None = None
    author: str | None = None
    #: True when a repository was given and this commit is not in its history:
    #: ordered by stored date *before* the history (negative ``order``), never newest.
    parked: bool = False


@dataclass
class ResultSet:
    results_dir: Path
    machines: dict[str, dict] = field(default_factory=dict)
    benchmarks: dict[str, dict] = field(default_factory=dict)
    commits: dict[str, CommitInfo] = field(default_factory=dict)
    series: dict[SeriesKey, Series] = field(default_factory=dict)
    env_params: dict[tuple[str, str], dict] = field(default_factory=dict)  # (machine, commit) -> results params
    calibrations: dict[str, dict] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    files_loaded: int = 0
    skipped_points: int = 0  # asv results stored as NaN (asv: benchmark skipped), not points
    file_of: dict[str, str] = field(default_factory=dict)  # commit -> first results file naming it
    #: Parameter combinations each results file declares (path -> count, ``None`` -> the
    #: total), against :data:`harness.core.files.MAX_FOLDER_GRID_POINTS`.
    grid_points: dict = field(default_factory=dict)
    #: Per machine, how many points with one of our records got each read-time
    #: status (:func:`harness.core.guards.guard_record`): ``{"ok": n, "timing_bug": n, ...}``.
    health: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Benchmarks with results that a loaded benchmarks.json does not list: name -> the
    #: first results file naming it (one warning for all, :func:`harness.store.columns.report_unlisted`).
    unlisted: dict[str, str] = field(default_factory=dict)

    def commit_order(self) -> list[str]:
        """Commits sorted by git order when known, else by stored date, then hash."""

        def key(c: CommitInfo):
            return (
                c.order if c.order is not None else math.inf,
                c.date_ms if c.date_ms is not None else math.inf,
                c.hash,
            )

        return [c.hash for c in sorted(self.commits.values(), key=key)]

    def usable(self) -> bool:
        return any(p.value is not None for s in self.series.values() for p in s.points)


@dataclass
class SeriesColumns:
    """One series as arrays, in commit order (see :func:`load_columns`).

    Every per-point sequence has one entry per point; a point is one commit's
    result (asv's skipped results, NaN, are not points). ``value`` is float64
    seconds (or the benchmark's unit) with NaN where the point has no value, and
    then ``reason[i]`` says why (``"failed"``, ``"invalid: ..."``, or a record's
    ``timing_bug``/``invalid`` status); ``ci_lo``/``ci_hi`` (asv's 99% CI of the
    median), ``q_25``/``q_75`` are NaN where absent. ``samples`` (as
    :attr:`Point.samples`: raw, or one per run of a re-run commit) and ``records``
    are ``None`` when no point has any.
    """

    key: SeriesKey
    unit: str | None
    type: str | None
    commits: list
    value: "np.ndarray"
    reason: list
    ci_lo: "np.ndarray"
    ci_hi: "np.ndarray"
    q_25: "np.ndarray"
    q_75: "np.ndarray"
    version: list
    env_name: list
    started_at: list
    samples: list | None = None
    records: list | None = None

    def __len__(self) -> int:
        return len(self.commits)

    def points(self) -> list[Point]:
        """The same data as :class:`Point` objects."""
        n = len(self.commits)
        vals, lo, hi = self.value.tolist(), self.ci_lo.tolist(), self.ci_hi.tolist()
        q1, q3 = self.q_25.tolist(), self.q_75.tolist()
        smp = self.samples or [None] * n
        rec = self.records or [None] * n
        return [
            Point(
                c,
                None if v != v else v,
                r,
                None if a != a else (a, b),
                None if x != x else x,
                None if y != y else y,
                sm,
                ve,
                en,
                st,
                rc,
            )
            for c, v, r, a, b, x, y, sm, ve, en, st, rc in zip(
                self.commits, vals, self.reason, lo, hi, q1, q3, smp, self.version, self.env_name, self.started_at, rec
            )
        ]
