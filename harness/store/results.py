"""Load any asv results directory (ours or foreign, format v1 or v2) plus our records.

This is the one module that reads asv's files. Format v1 is migrated with
asv's own ``Results.update_to_2``; format v2 rows (``result_columns``) are read
directly, with the semantics of asv's ``Results.load`` / ``get_result_value`` /
``get_result_stats`` / ``get_result_samples`` (see :func:`read_results_file`
for why). One bad file never stops the rest: each unusable file becomes a
one-line entry in :attr:`ResultSet.errors` naming it.

Model (see ``../shared/ARCHITECTURE.md``):

- a *machine* is a folder with a ``machine.json``;
- a *series* is machine x benchmark x parameters x timing method
  (:class:`SeriesKey`); for our suite the timing method is the ``timing``
  parameter, for foreign suites it is ``None``;
- a *point* is one commit's value in a series; a failed result is ``value=None``
  with ``reason="failed"``, a skipped one is not a point at all;
- commits are ordered by git history when a repository is given, else by the
  commit date stored in the results files (never by file order).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import metrics as _metrics
from harness.core import records as _records
from harness.core.costs import seconds_per_unit
from harness.store.asvfile import ResultsFile, clean_param, read_results_file, type_from_name, unit_from_name


@dataclass(frozen=True)
class SeriesKey:
    machine: str
    benchmark: str
    params: tuple[tuple[str, str], ...]  # (name, value) pairs in asv's order
    timing: str | None

    def param_dict(self) -> dict:
        return dict(self.params)

    def label(self) -> str:
        p = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.benchmark}({p})" if p else self.benchmark

    def slug(self) -> str:
        """Stable file-name-safe id."""
        import hashlib

        h = hashlib.sha1(repr((self.machine, self.benchmark, self.params, self.timing)).encode()).hexdigest()[:12]
        return h


@dataclass(slots=True)  # millions of points at scale: slots halve their memory and speed up creation
class Point:
    commit: str
    value: float | None
    reason: str | None = None  # "failed" or "invalid: ..." when value is None
    ci_99: tuple[float, float] | None = None
    q_25: float | None = None
    q_75: float | None = None
    samples: list[float] | None = None
    version: str | None = None
    env_name: str | None = None
    started_at: int | None = None
    record: dict | None = None


@dataclass
class Series:
    key: SeriesKey
    unit: str | None
    type: str | None
    points: list[Point] = field(default_factory=list)  # in commit order after ResultSet.order()


@dataclass
class CommitInfo:
    hash: str
    date_ms: int | None
    order: int | None = None
    subject: str | None = None
    author: str | None = None


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
    #: Per machine, how many points with one of our records got each read-time
    #: status (:func:`harness.core.metrics.guard_record`): ``{"ok": n, "timing_bug": n, ...}``.
    health: dict[str, dict[str, int]] = field(default_factory=dict)

    def commit_order(self) -> list[str]:
        """Commits sorted by git order when known, else by stored date, then hash."""
        def key(c: CommitInfo):
            return (c.order if c.order is not None else math.inf, c.date_ms if c.date_ms is not None else math.inf, c.hash)
        return [c.hash for c in sorted(self.commits.values(), key=key)]

    def usable(self) -> bool:
        return any(p.value is not None for s in self.series.values() for p in s.points)


_HEX = re.compile(r"[0-9a-fA-F]{4,64}")

def _load_benchmarks_json(results_dir: Path, rs: ResultSet) -> None:
    path = results_dir / "benchmarks.json"
    if not path.exists():
        return
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        rs.errors.append(f"{path}: unreadable benchmarks metadata ({exc}); benchmark units and versions unknown")
        return
    if not isinstance(data, dict):
        rs.errors.append(f"{path}: expected a JSON object")
        return
    for name, meta in data.items():
        if name != "version" and isinstance(meta, dict):
            rs.benchmarks[name] = meta


def _finite(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load(results_dir: str | os.PathLike, repo: str | os.PathLike | None = None,
         with_records: bool = True, machines=None) -> ResultSet:
    """Load ``results_dir``.

    Parameters
    ----------
    results_dir : path
        An asv results directory: ``benchmarks.json`` (optional) and one folder
        per machine with ``machine.json`` and result files.
    repo : path, optional
        A git repository holding the commits: gives history order, subjects
        and authors (GitPython). Commits it does not know keep their stored date.
    with_records : bool
        Also attach kernelwatch records (``<machine>/kernelwatch/*.jsonl``).
    machines : iterable of str, optional
        Load only these machines (folder name or ``machine.json`` name); all by default.

    Raises
    ------
    FileNotFoundError
        ``results_dir`` does not exist or is not a folder.
    """
    rs, columns = load_columns(results_dir, repo, with_records=with_records, machines=machines)
    for key, c in columns.items():
        s = rs.series[key] = Series(key=key, unit=c.unit, type=c.type)
        s.points = c.points()
    return rs


@dataclass
class SeriesColumns:
    """One series as arrays, in commit order (see :func:`load_columns`).

    Every per-point sequence has one entry per point; a point is one commit's
    result (asv's skipped results, NaN, are not points). ``value`` is float64
    seconds (or the benchmark's unit) with NaN where the point has no value, and
    then ``reason[i]`` says why (``"failed"``, ``"invalid: ..."``, or a record's
    ``timing_bug``/``invalid`` status); ``ci_lo``/``ci_hi`` (asv's 99% CI of the
    median), ``q_25``/``q_75`` are NaN where absent. ``samples`` and ``records``
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
        return [Point(c, None if v != v else v, r, None if a != a else (a, b), None if x != x else x,
                      None if y != y else y, sm, ve, en, st, rc)
                for c, v, r, a, b, x, y, sm, ve, en, st, rc in zip(
                    self.commits, vals, self.reason, lo, hi, q1, q3, smp, self.version, self.env_name,
                    self.started_at, rec)]


def load_columns(results_dir: str | os.PathLike, repo: str | os.PathLike | None = None,
                 with_records: bool = True, machines=None,
                 quartiles: bool = True, keep_raw: list | None = None) -> tuple[ResultSet, dict[SeriesKey, SeriesColumns]]:
    """Load ``results_dir`` as arrays instead of :class:`Point` objects.

    Same input, rules and errors as :func:`load` (which is built on it); the
    returned :class:`ResultSet` has machines, benchmarks, commits, environment
    parameters, calibrations and errors but no series: those are the
    ``{SeriesKey: SeriesColumns}`` mapping, in first-seen order. Meant for
    consumers of millions of points (``kernelwatch publish``), where one Python
    object per point costs more than everything else. ``quartiles=False``
    leaves ``q_25``/``q_75`` NaN (a fifth less work for readers that do not
    show them). ``keep_raw``, a list, receives the parsed rows instead of
    their being freed on return: a worker process that exits right afterwards
    (without freeing, as multiprocessing's do) saves freeing tens of millions
    of objects.

    Raises
    ------
    FileNotFoundError
        ``results_dir`` does not exist or is not a folder.
    """
    import gc

    # Parsing creates tens of millions of lists and floats and no reference
    # cycles; the cyclic collector would rescan them over and over (a third
    # of the time at 10,000 commits). Reference counting still frees everything.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_columns(results_dir, repo, with_records, machines, quartiles, keep_raw)
    finally:
        if was_enabled:
            gc.enable()


def _load_columns(results_dir, repo, with_records, machines, quartiles, keep_raw=None):
    import numpy as np
    from asv import util as asv_util

    base = Path(results_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"results directory {base} does not exist or is not a folder")
    rs = ResultSet(results_dir=base)
    _load_benchmarks_json(base, rs)
    recs = _records.load_records(base, rs.errors) if with_records else {}

    wanted = set(machines) if machines is not None else None
    groups: dict = {}
    keys: dict = {}  # SeriesKey -> (unit, type), first-seen order
    seq = 0
    for mdir in sorted(p for p in base.iterdir() if p.is_dir()):
        mjson = mdir / "machine.json"
        if not mjson.exists():
            continue
        if wanted is not None and mdir.name not in wanted:
            try:
                name = json.loads(mjson.read_text()).get("machine")
            except (OSError, ValueError, AttributeError):
                name = None
            if name not in wanted:
                continue
        try:
            minfo = json.loads(mjson.read_text())
            if not isinstance(minfo, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            rs.errors.append(f"{mjson}: unreadable machine description ({exc}); folder skipped")
            continue
        machine = str(minfo.get("machine") or mdir.name)
        rs.machines[machine] = minfo
        recent: dict = {}
        if with_records:
            cal = _records.latest_calibration(base, machine, rs.errors)
            if cal:
                rs.calibrations[machine] = cal
        for path in sorted(mdir.glob("*.json")):
            if path.name == "machine.json":
                continue
            try:
                res = read_results_file(path)
            except asv_util.UserError as exc:
                rs.errors.append(f"{path}: {str(exc).strip().splitlines()[0]}")
                continue
            except Exception as exc:  # malformed files raise assorted errors
                rs.errors.append(f"{path}: cannot load ({type(exc).__name__}: {exc})")
                continue
            rs.files_loaded += 1
            _collect(rs, machine, res, path, seq, groups, keys, quartiles, recent)
            seq += 1

    if repo is not None:
        _order_by_git(rs, Path(repo))
    order = {c: i for i, c in enumerate(rs.commit_order())}
    parts: dict = {}
    for g in groups.values():
        _finish_group(g, order, recs, parts, np, quartiles, cals=rs.calibrations, health=rs.health)
    _report_under_measured(rs, base)
    columns = {}
    for key, (unit, typ) in keys.items():
        columns[key] = _join_parts(key, unit, typ, parts.get(key, []), np)
    if keep_raw is not None:
        keep_raw.append(groups)
    return rs, columns


def _at(seq, i):
    return seq[i] if isinstance(seq, list) and i < len(seq) else None


class _Group:
    """Rows of one benchmark with one parameter grid on one machine, as read."""

    __slots__ = ("machine", "name", "entries", "seq", "commits", "env", "version", "started", "cols")

    def __init__(self, machine: str, name: str, entries: list):
        self.machine, self.name, self.entries = machine, name, entries
        self.seq, self.commits, self.env, self.version, self.started = [], [], [], [], []
        self.cols = ([], [], [], [], [], [])  # result, ci_99_a, ci_99_b, q_25, q_75, samples


def _collect(rs: ResultSet, machine: str, res: ResultsFile, path: Path, seq: int, groups: dict, keys: dict,
             quartiles: bool = True, recent: dict | None = None) -> None:
    """File one results file's rows into their groups (one per machine x
    benchmark x parameter grid). ``recent`` remembers the last grid seen per
    benchmark, which is nearly always the next one's too."""
    commit = res.commit_hash
    if not commit:
        rs.errors.append(f"{path}: no commit hash; file skipped")
        return
    if not isinstance(commit, str) or not _HEX.fullmatch(commit):
        # The hash names output files (commit pages): never let it be a path.
        rs.errors.append(f"{path}: commit hash {str(commit)[:60]!r} is not a hex string; file skipped")
        return
    info = rs.commits.get(commit)
    date = res.date if isinstance(res.date, (int, float)) and not isinstance(res.date, bool) else None
    if date is not None and not (0 <= date < 4102444800000):  # NaN, infinite, negative or past 2100
        rs.errors.append(f"{path}: commit date {res.date!r} is not a plausible epoch in ms; date unknown")
        date = None
    if info is None:
        rs.commits[commit] = CommitInfo(hash=commit, date_ms=int(date) if date is not None else None)
    elif info.date_ms is None and date is not None:
        info.date_ms = int(date)
    rs.env_params[(machine, commit)] = dict(res.params or {})
    col = {c: i for i, c in enumerate(res.columns)}
    i_res, i_par, i_ver, i_start = col.get("result"), col.get("params"), col.get("version"), col.get("started_at")
    idx = (i_res, col.get("stats_ci_99_a"), col.get("stats_ci_99_b"),
           col.get("stats_q_25") if quartiles else -1, col.get("stats_q_75") if quartiles else -1, col.get("samples"))
    top = max([j for j in idx + (i_par, i_ver, i_start) if j is not None], default=-1)
    env_name = res.env_name
    recent = {} if recent is None else recent
    for name in sorted(res.results):
        row = res.results[name]
        if not isinstance(row, list):
            rs.errors.append(f"{path}: benchmark {name}: malformed result (row is {type(row).__name__}, not a list)")
            continue
        full = len(row) > top  # the usual case: every column present
        params = (row[i_par] if full else _at(row, i_par)) if i_par is not None else None
        last = recent.get(name)
        if last is not None and last[0] == params:
            g = last[1]
        else:
            try:
                pkey = tuple(map(tuple, params or ()))  # hashable; values become strings in _series_entries
            except TypeError as exc:
                rs.errors.append(f"{path}: benchmark {name}: malformed result (TypeError: {exc})")
                continue
            g = groups.get((machine, name, pkey))
            if g is None:
                entries = _series_entries(rs, machine, name, pkey)
                for key, unit, typ, _tail in entries:
                    keys.setdefault(key, (unit, typ))
                g = groups[(machine, name, pkey)] = _Group(machine, name, entries)
            recent[name] = (params, g)
        n = len(g.entries)
        g.seq.append(seq)
        g.commits.append(commit)
        g.env.append(env_name)
        g.version.append((row[i_ver] if full else _at(row, i_ver)) if i_ver is not None else None)
        g.started.append((row[i_start] if full else _at(row, i_start)) if i_start is not None else None)
        for cl, j in zip(g.cols, idx):
            if j is None:
                cl.append(_nones(n))
            elif j >= 0:  # -1: a column this reader was asked to skip
                c = row[j] if full else None
                cl.append(c if (c.__class__ is list and len(c) == n) else _column(row, j, n))
        v = row[i_res] if (i_res is not None and i_res < len(row)) else None
        if v is not None and v.__class__ is not list:
            g.cols[0][-1] = [v] + [None] * (n - 1)  # a bare value: asv's unparameterised form


@functools.lru_cache(maxsize=None)
def _nones(n: int) -> tuple:
    """A shared, read-only row of ``n`` absent entries."""
    return (None,) * n


def _column(row: list, j: int | None, n: int) -> list:
    """Column ``j`` of a format-2 row as a list of ``n`` per-combination entries
    (``None`` where the column, the row or the entry is absent)."""
    c = row[j] if j is not None and j < len(row) else None
    if c.__class__ is list and len(c) == n:
        return c
    if not isinstance(c, list):
        return [None] * n
    return c[:n] if len(c) > n else c + [None] * (n - len(c))


def _floats(rows: list, shape: tuple, np):
    """``rows`` (lists of numbers or None) as a float64 array with NaN for
    anything that is not a finite number (the rule of :func:`_finite`)."""
    try:  # every row has shape[1] entries (_column); None becomes NaN
        a = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64, count=shape[0] * shape[1]).reshape(shape)
    except (TypeError, ValueError):
        a = np.array([[_finite(x) if _finite(x) is not None else np.nan for x in r] for r in rows],
                     dtype=np.float64).reshape(shape)
    a[~np.isfinite(a)] = np.nan
    return a


def _guard_records(records: list, value, unit, machine: str, cals: dict | None, health: dict | None) -> None:
    """Validate each point's record when read (:func:`harness.core.metrics.guard_record`),
    in place: the record's ``metrics`` become the figures derived again from the
    point's value and cost against the machine's validated calibration, with
    the read-time status (the written ones are kept as ``metrics_written``).
    Counts the statuses into ``health[machine]``; an ``above_ceiling`` point
    is noted on the calibration (``under_measured``)."""
    cal = (cals or {}).get(machine)
    scale = seconds_per_unit(unit)
    counts = health.setdefault(machine, {}) if health is not None else {}
    for i, rec in enumerate(records):
        if rec is None:
            continue
        v = float(value[i])
        t = v * scale if (scale is not None and v == v) else None
        m = _metrics.guard_record(rec, time_s=t, calibration=cal)
        records[i] = dict(rec, metrics=m.as_dict(), metrics_written=rec.get("metrics"))
        if v == v or m.status != _metrics.STATUS_OK:
            counts[m.status] = counts.get(m.status, 0) + 1
        if m.status == _metrics.STATUS_ABOVE_CEILING and cal is not None:
            under = cal.setdefault("under_measured", [])
            if len(under) < 20:
                under.append({"benchmark": rec.get("benchmark"), "params": rec.get("params"),
                              "commit": rec.get("commit"), "reason": m.reason})
            cal["under_measured_points"] = cal.get("under_measured_points", 0) + 1


def _report_under_measured(rs: ResultSet, base: Path) -> None:
    """One line per calibration that some kernel beat: the ceiling is under-measured."""
    for machine, cal in sorted(rs.calibrations.items()):
        n = cal.get("under_measured_points")
        if not n:
            continue
        first = (cal.get("under_measured") or [{}])[0]
        path = _records.records_dir(base, machine) / _records.CALIBRATION_FILE
        rs.errors.append(f"{path}: calibration of {cal.get('date', '?')} is under-measured: {n} point(s) "
                         f"above its ceilings, e.g. {first.get('benchmark')} {first.get('params')}: "
                         f"{first.get('reason')}; run `kernelwatch calibrate` on a quiet machine")


def _finish_group(g: _Group, order: dict, recs: dict, parts: dict, np, quartiles: bool = True,
                  cals: dict | None = None, health: dict | None = None) -> None:
    """Classify every value of a group (vectorised) and cut it into per-series parts.

    Rules, as asv: ``None`` is a failed result; a float NaN is skipped (not a
    point); anything else must be a finite positive number or it is invalid.
    Every record is validated when read (:func:`_guard_records`); a record
    whose status is then not ``ok`` (invalid, timing_bug, above_ceiling,
    contended) invalidates its point: no value, no samples, the reason kept.
    """
    R, n = len(g.commits), len(g.entries)
    if R == 0 or n == 0:
        return
    shape = (R, n)
    raw = g.cols[0]
    f = _floats(raw, shape, np)
    good = ~np.isnan(f) & (f > 0)
    skip = np.zeros(shape, dtype=bool)
    reason = np.full(shape, None, dtype=object)
    for r, j in zip(*np.nonzero(~good)):  # failed, skipped or invalid: few, so classified one by one
        x = raw[r][j]
        if x is None:
            reason[r, j] = "failed"
        elif type(x) is float and x != x:
            skip[r, j] = True
        else:
            reason[r, j] = f"invalid: value {x!r}"
    f[~good] = np.nan
    a, b = _floats(g.cols[1], shape, np), _floats(g.cols[2], shape, np)
    both = ~(np.isnan(a) | np.isnan(b))
    lo, hi = np.where(both, a, np.nan), np.where(both, b, np.nan)
    if quartiles:
        q1, q3 = _floats(g.cols[3], shape, np), _floats(g.cols[4], shape, np)
    else:
        q1 = q3 = np.full(shape, np.nan)
    smp_rows = g.cols[5]
    has_smp = any(map(any, smp_rows))
    commits = np.array(g.commits, dtype=object)
    okey = np.array([order.get(c, len(order)) for c in g.commits], dtype=np.int64)
    seqs = np.array(g.seq, dtype=np.int64)
    rank = np.lexsort((seqs, okey))
    rank_rows = rank.tolist()
    by_rank = ([g.version[r] for r in rank_rows], [g.env[r] for r in rank_rows], [g.started[r] for r in rank_rows],
               commits[rank].tolist())
    any_skip = skip.any(axis=0)
    for j, (key, _unit, _typ, tail) in enumerate(g.entries):
        keep = rank[~skip[rank, j]] if any_skip[j] else rank
        rows = keep.tolist() if any_skip[j] else rank_rows
        if any_skip[j]:
            lists = ([g.version[r] for r in rows], [g.env[r] for r in rows], [g.started[r] for r in rows],
                     commits[keep].tolist())
        else:
            lists = by_rank  # shared by the series of this group (read-only)
        samples = None
        if has_smp:
            samples = []
            for r in rows:
                sm = smp_rows[r][j]
                samples.append([float(x) for x in sm if _finite(x) is not None] if sm else None)
        records = None
        value, rsn = f[keep, j], reason[keep, j].tolist()
        c_lo, c_hi, c_q1, c_q3 = lo[keep, j], hi[keep, j], q1[keep, j], q3[keep, j]
        if recs:
            records = [recs.get((g.machine, g.commits[r], g.name) + tail) for r in rows]
            _guard_records(records, value, _unit, g.machine, cals, health)
            for i, rec in enumerate(records):
                status = ((rec or {}).get("metrics") or {}).get("status")
                if rec is not None and status not in (None, "ok"):
                    # An invalid or physically impossible time (harness.core.metrics guards)
                    # is never a number in an average, a plot or a regression test.
                    value[i] = c_lo[i] = c_hi[i] = c_q1[i] = c_q3[i] = np.nan
                    if samples is not None:
                        samples[i] = None
                    rsn[i] = f"{status}: {(rec.get('metrics') or {}).get('reason') or 'no reason recorded'}"
        parts.setdefault(key, []).append((okey[keep], seqs[keep], SeriesColumns(
            key=key, unit=None, type=None, commits=lists[3], value=value, reason=rsn,
            ci_lo=c_lo, ci_hi=c_hi, q_25=c_q1, q_75=c_q3,
            version=lists[0], env_name=lists[1], started_at=lists[2], samples=samples, records=records)))


def _join_parts(key: SeriesKey, unit, typ, parts: list, np) -> SeriesColumns:
    """One series from its parts (a benchmark whose parameter grid changed over
    time contributes a part per grid), in commit order."""
    if not parts:
        e = np.empty(0)
        return SeriesColumns(key, unit, typ, [], e, [], e, e, e, e, [], [], [])
    if len(parts) == 1:
        c = parts[0][2]
    else:
        okey = np.concatenate([p[0] for p in parts])
        seqs = np.concatenate([p[1] for p in parts])
        rank = np.lexsort((seqs, okey)).tolist()
        cs = [p[2] for p in parts]

        def cat_list(attr):
            return [x for c in cs for x in getattr(c, attr)]

        def pick(lst):
            return [lst[i] for i in rank]

        def cat_arr(attr):
            return np.concatenate([getattr(c, attr) for c in cs])[rank]

        smp = None if all(c.samples is None for c in cs) else pick(
            [x for c in cs for x in (c.samples if c.samples is not None else [None] * len(c))])
        rec = None if all(c.records is None for c in cs) else pick(
            [x for c in cs for x in (c.records if c.records is not None else [None] * len(c))])
        c = SeriesColumns(key, unit, typ, pick(cat_list("commits")), cat_arr("value"), pick(cat_list("reason")),
                          cat_arr("ci_lo"), cat_arr("ci_hi"), cat_arr("q_25"), cat_arr("q_75"),
                          pick(cat_list("version")), pick(cat_list("env_name")), pick(cat_list("started_at")),
                          smp, rec)
    c.unit, c.type = unit, typ
    return c


def _series_entries(rs: ResultSet, machine: str, name: str, pkey: tuple) -> list:
    """``(SeriesKey, unit, type, record-key tail)`` of each parameter combination
    of ``name``, in asv's order (``itertools.product`` of the parameter lists)."""
    meta = rs.benchmarks.get(name, {})
    names = meta.get("param_names") or [f"param{i + 1}" for i in range(len(pkey))]
    combos = list(itertools.product(*pkey)) if pkey else [()]
    unit = meta.get("unit") or unit_from_name(name)
    typ = meta.get("type") or type_from_name(name)
    out = []
    for combo in combos:
        clean = tuple((str(n), clean_param(v)) for n, v in zip(names, combo))
        timing = dict(clean).get("timing")
        key = SeriesKey(machine=machine, benchmark=name, params=clean, timing=timing)
        out.append((key, unit, typ, (tuple(sorted(clean)), timing)))
    return out


def _order_by_git(rs: ResultSet, repo: Path) -> None:
    try:
        import git

        r = git.Repo(repo, search_parent_directories=True)
    except Exception as exc:
        rs.errors.append(f"{repo}: not a usable git repository ({type(exc).__name__}); ordering by stored commit date")
        return
    try:
        history = r.git.rev_list("--all", "--topo-order", "--reverse").split()
    except Exception as exc:
        rs.errors.append(f"{repo}: cannot read history ({exc}); ordering by stored commit date")
        return
    pos = {h: i for i, h in enumerate(history)}
    for c in rs.commits.values():
        if c.hash in pos:
            c.order = pos[c.hash]
            try:
                commit = r.commit(c.hash)
                c.subject = commit.summary
                c.author = commit.author.name
                if c.date_ms is None:
                    c.date_ms = int(commit.committed_date) * 1000
            except Exception:
                pass
