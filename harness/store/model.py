"""The loaded-results model of :mod:`harness.store.results`: series as columns and
the result set that holds them. Series keys, points and series are the one
model of :mod:`harness.core.model`, re-exported here.

See :mod:`harness.store.results` for the rules (what a machine, a series and a
point are, and how bad input is reported).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
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
        """The same data as :class:`Point` objects (``samples`` as stored)."""
        return PointView(self)._make(None, None, tuple_samples=False)

    def point_view(self) -> "PointView":
        """The same points as :meth:`points`, made on access instead of held
        (:class:`PointView`): ``kernelwatch publish`` runs the analysis on these."""
        return PointView(self)


class PointView(Sequence):
    """A series' points, read from its :class:`SeriesColumns` when accessed.

    A sequence of :class:`Point` (``len``, indexing, slicing, iteration), equal
    to ``columns.points()`` point for point, except that ``samples`` are tuples
    (as :func:`harness.store.dataset.build_inputs` makes them) and each access
    makes new ``Point`` objects: setting an attribute of one changes nothing
    stored. Why: a ``Point`` costs about 220 bytes with its value and CI tuple
    (``experiments/scale/phase_memory.py``: +223 MiB for the 1,008,000 points
    of 1,000 commits x 2 machines x 504 series, against 38.5 MiB for the
    columns' arrays), and the analysis needs every series in one process while
    reading each series' points in a few passes only (issue 28).

    ``pick`` (positions into the columns, in order) keeps some points only;
    ``env`` (one mapping or ``None`` per kept point, shared between points) is
    each point's :attr:`Point.env`. :meth:`commit_list` and :meth:`value_list`
    give the commits and values without making points (the protocol of
    :func:`harness.core.model.point_commits` and ``point_values``).
    """

    __slots__ = ("_c", "_pick", "_env")

    def __init__(self, columns: SeriesColumns, pick: list[int] | None = None, env: list | None = None):
        n = len(columns.commits) if pick is None else len(pick)
        if env is not None and len(env) != n:
            raise ValueError(f"{columns.key.label()}: {len(env)} environments for {n} points")
        self._c, self._pick, self._env = columns, pick, env

    def __len__(self) -> int:
        return len(self._c.commits) if self._pick is None else len(self._pick)

    def _rows(self, pos: list[int] | None):
        """Per-point field lists of the columns, at ``pos`` (all when ``None``)."""
        c = self._c

        def take(seq):
            if seq is None:
                return None
            return seq if pos is None else [seq[i] for i in pos]

        def floats(arr):
            return arr.tolist() if pos is None else arr[pos].tolist()

        return (
            take(c.commits),
            floats(c.value),
            take(c.reason),
            floats(c.ci_lo),
            floats(c.ci_hi),
            floats(c.q_25),
            floats(c.q_75),
            take(c.samples),
            take(c.version),
            take(c.env_name),
            take(c.started_at),
            take(c.records),
        )

    def _make(self, pos: list[int] | None, envs, tuple_samples: bool = True) -> list[Point]:
        """The points at ``pos`` (all when ``None``) with environments ``envs``;
        ``tuple_samples`` makes each sample list a tuple (an empty one ``None``)."""
        tup = tuple_samples
        cs, vs, rs, lo, hi, q1, q3, sm, ve, en, st, rc = self._rows(pos)
        n = len(cs)
        sm = sm if sm is not None else [None] * n
        rc = rc if rc is not None else [None] * n
        envs = envs if envs is not None else [None] * n
        return [
            Point(
                c,
                None if v != v else v,
                r,
                None if a != a else (a, b),
                None if x != x else x,
                None if y != y else y,
                (tuple(s) or None) if tup and s is not None and not isinstance(s, tuple) else s,
                vv,
                e,
                t,
                rec,
                env,
            )
            for c, v, r, a, b, x, y, s, vv, e, t, rec, env in zip(cs, vs, rs, lo, hi, q1, q3, sm, ve, en, st, rc, envs)
        ]

    def __iter__(self):
        return iter(self._make(self._pick, self._env))

    def __getitem__(self, j):
        n = len(self)
        if isinstance(j, slice):
            idx = list(range(*j.indices(n)))
        else:
            if isinstance(j, bool):
                raise TypeError("point indices must be integers or slices, not bool")
            try:
                j = operator.index(j)  # numpy integers too, as a list takes them
            except TypeError:
                raise TypeError(f"point indices must be integers or slices, not {type(j).__name__}") from None
            if j < 0:
                j += n
            if not 0 <= j < n:
                raise IndexError("point index out of range")
            idx = [j]
        pos = idx if self._pick is None else [self._pick[k] for k in idx]
        envs = None if self._env is None else [self._env[k] for k in idx]
        out = self._make(pos, envs)
        return out if isinstance(j, slice) else out[0]

    def __reversed__(self):
        return reversed(self._make(self._pick, self._env))

    def __eq__(self, other) -> bool:
        if isinstance(other, (PointView, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # a sequence compared by value, as a list

    def __repr__(self) -> str:
        return f"PointView({self._c.key.label()}, {len(self)} points)"

    def commit_list(self) -> list[str]:
        """The points' commits, in order, without making points."""
        c = self._c.commits
        return list(c) if self._pick is None else [c[i] for i in self._pick]

    def value_list(self) -> list[float | None]:
        """The points' values (``None`` where a point has none), without making points."""
        vals = self._c.value.tolist() if self._pick is None else self._c.value[self._pick].tolist()
        return [None if v != v else v for v in vals]

    def fields(self):
        """``(commit, value, reason, env_name, record)`` of each point, in order,
        without making points (``value`` ``None`` where the point has none)."""
        cs, vs, rs = self.commit_list(), self.value_list(), self._c.reason
        en, rc = self._c.env_name, self._c.records
        pos = range(len(cs)) if self._pick is None else self._pick
        return [(c, v, rs[i], en[i], rc[i] if rc is not None else None) for c, v, i in zip(cs, vs, pos)]

    def has_records(self) -> bool:
        """Whether any point has a record, without making points."""
        rc = self._c.records
        if rc is None:
            return False
        return any(rc[i] is not None for i in (range(len(rc)) if self._pick is None else self._pick))

    def select(self, keep: list[int], env: list | None = None) -> "PointView":
        """The points at ``keep`` (positions in this view, in order), with ``env``
        (one per kept point) as their environments."""
        keep = list(keep)
        if self._pick is None and keep == list(range(len(self))):
            return PointView(self._c, None, env)  # every point: no positions to hold
        pick = keep if self._pick is None else [self._pick[k] for k in keep]
        return PointView(self._c, pick, env)
