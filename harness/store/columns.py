"""The columnar reader behind :func:`harness.store.results.load_columns`.

One results file's format-2 rows are filed into groups (machine x benchmark x
parameter grid [x environment]); each group is then classified at once with
numpy (failed, skipped, invalid, a record's non-``ok`` metrics status) and cut
into per-series parts, which are joined in commit order. Rules as asv's
``Results.load`` (see :mod:`harness.store.asvfile`).
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import numpy as np

from harness.core import guards as _guards
from harness.core import metrics as _metrics
from harness.core import records as _records
from harness.core import schema as _schema
from harness.core.costs import seconds_per_unit
from harness.core.model import IMPOSSIBLE
from harness.store.asvfile import ResultsFile, clean_param, type_from_name, unit_from_name
from harness.store.model import ENV_PARAM, CommitInfo, ResultSet, SeriesColumns, SeriesKey

_HEX = _schema._HEX  # the one rule of a commit hash (harness.core.schema.MIN_HASH_LEN)

#: The per-value columns a :class:`Group` keeps, by asv's column name, and the
#: index of each in ``Group.cols`` (read as ``g.cols[CI_A]``, never a bare number).
VALUE_COLUMNS = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "samples")
RESULT, CI_A, CI_B, Q_25, Q_75, SAMPLES = range(len(VALUE_COLUMNS))


def finite(x):
    try:
        x = float(x)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float range
        return None
    return x if math.isfinite(x) else None


def _at(seq, i):
    return seq[i] if isinstance(seq, list) and i < len(seq) else None


#: Rows a :class:`Group` keeps as parsed before :meth:`Group.compact` turns them
#: into arrays. Parsed rows cost ~40x their float64 arrays (a list and a float
#: object per entry); 256 rows of every benchmark of a machine are a few MB.
COMPACT_ROWS = 256


class Group:
    """Rows of one benchmark with one parameter grid on one machine, as read.

    The value columns (result, CI, quartiles) of every :data:`COMPACT_ROWS` rows
    are compacted into float64 arrays (:meth:`compact`); ``samples`` stay lists.
    """

    __slots__ = ("machine", "name", "entries", "seq", "commits", "env", "version", "started", "cols", "done")

    def __init__(self, machine: str, name: str, entries: list):
        self.machine, self.name, self.entries = machine, name, entries
        self.seq, self.commits, self.env, self.version, self.started = [], [], [], [], []
        self.cols = tuple([] for _ in VALUE_COLUMNS)  # one list per VALUE_COLUMNS entry
        self.done: list = []  # compacted chunks: (rows, f, [(row, j, raw)], ci_a, ci_b, q_25, q_75)

    def compact(self, quartiles: bool = True) -> None:
        """Turn the parsed value rows not yet compacted into float64 arrays
        (NaN for anything not a finite number, :func:`_floats`), keeping the raw
        entry of each value that is not a finite positive number (few: failed,
        skipped or invalid, classified in :func:`finish_group`)."""
        raw = self.cols[RESULT]
        rows = len(raw)
        if rows == 0:
            return
        shape = (rows, len(self.entries))
        f = _floats(raw, shape)
        bad = [(int(r), int(j), raw[r][j]) for r, j in zip(*np.nonzero(~(~np.isnan(f) & (f > 0))))]
        a, b = _floats(self.cols[CI_A], shape), _floats(self.cols[CI_B], shape)
        q1 = _floats(self.cols[Q_25], shape) if quartiles else None
        q3 = _floats(self.cols[Q_75], shape) if quartiles else None
        self.done.append((rows, f, bad, a, b, q1, q3))
        for i in (RESULT, CI_A, CI_B, Q_25, Q_75):
            self.cols[i].clear()

    def arrays(self, quartiles: bool = True) -> tuple:
        """``(f, bad, ci_a, ci_b, q_25, q_75)`` of every row, in reading order
        (``bad`` rows counted from the first row; quartiles ``None`` when not read)."""
        self.compact(quartiles)
        if len(self.done) == 1:
            _, f, bad, a, b, q1, q3 = self.done[0]
            return f, bad, a, b, q1, q3
        off, bad = 0, []
        for rows, _, bd, *_rest in self.done:
            bad.extend((r + off, j, x) for r, j, x in bd)
            off += rows

        def cat(k):
            return None if self.done[0][k] is None else np.concatenate([d[k] for d in self.done])

        return cat(1), bad, cat(3), cat(4), cat(5), cat(6)


def collect_file(
    rs: ResultSet,
    machine: str,
    res: ResultsFile,
    path: Path,
    seq: int,
    groups: dict,
    keys: dict,
    quartiles: bool = True,
    recent: dict | None = None,
    split_env: bool = False,
) -> bool:
    """File one results file's rows into their groups (one per machine x
    benchmark x parameter grid [x environment when ``split_env``]). ``recent``
    remembers the last grid seen per benchmark, which is nearly always the next
    one's too. Returns False when the file is skipped."""
    commit = res.commit_hash
    if not commit:
        rs.errors.append(f"{path}: no commit hash; file skipped")
        return False
    if not isinstance(commit, str) or not _HEX.fullmatch(commit):
        # The hash names output files (commit pages): never let it be a path.
        rs.errors.append(f"{path}: commit hash {str(commit)[:60]!r} is not a hex string; file skipped")
        return False
    info = rs.commits.get(commit)
    date = res.date if isinstance(res.date, (int, float)) and not isinstance(res.date, bool) else None
    if date is not None and _schema.date_ms_problem(
        date, _schema.COMMIT_DATE_MS_MIN
    ):  # NaN, infinite, before 1990 or past 2100
        rs.errors.append(f"{path}: commit date {res.date!r} is not a plausible epoch in ms; date unknown")
        date = None
    if info is None:
        rs.commits[commit] = CommitInfo(hash=commit, date_ms=int(date) if date is not None else None)
    elif info.date_ms is None and date is not None:
        info.date_ms = int(date)
    rs.env_params[(machine, commit)] = dict(res.params or {})
    col = {c: i for i, c in enumerate(res.columns)}
    i_res, i_par, i_ver, i_start = col.get("result"), col.get("params"), col.get("version"), col.get("started_at")
    skipped = () if quartiles else ("stats_q_25", "stats_q_75")
    idx = tuple(-1 if c in skipped else col.get(c) for c in VALUE_COLUMNS)
    top = max([j for j in idx + (i_par, i_ver, i_start) if j is not None], default=-1)
    env_name = res.env_name
    env_key = env_name if split_env else None
    recent = {} if recent is None else recent
    if split_env:
        recent = recent.setdefault(("env", env_name), {})
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
            g = groups.get((machine, name, pkey, env_key))
            if g is None:
                entries = _series_entries(rs, machine, name, pkey, env_key, path)
                if not _series_room(rs, keys, entries, path, name):
                    continue
                for key, unit, typ, _tail in entries:
                    keys.setdefault(key, (unit, typ))
                g = groups[(machine, name, pkey, env_key)] = Group(machine, name, entries)
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
            g.cols[RESULT][-1] = [v] + [None] * (n - 1)  # a bare value: asv's unparameterised form
        if len(g.cols[RESULT]) >= COMPACT_ROWS:
            g.compact(quartiles)
    return True


def _series_room(rs: ResultSet, keys: dict, entries: list, path: Path, name: str) -> bool:
    """Whether the series of a new group fit the folder's
    :data:`harness.core.files.MAX_FOLDER_SERIES` with those already in ``keys``; a row
    that does not is named in ``rs.errors`` (the first
    :data:`harness.store.layout.MAX_OVER_NAMED` rows, again on a machine redone in
    memory; :func:`harness.store.layout.report_over_folder_limit` counts the rest)."""
    from harness.core import files as _files
    from harness.store.layout import MAX_OVER_NAMED

    new = sum(1 for e in entries if e[0] not in keys)
    if len(keys) + new <= _files.MAX_FOLDER_SERIES:
        return True
    over = rs.grid_points.setdefault("series_over", {})
    over[(str(path), name)] = new
    if (str(path), name) in itertools.islice(over, MAX_OVER_NAMED):
        rs.errors.append(
            f"{path}: benchmark {name}: its {new:,} new series would take the folder past "
            f"MAX_FOLDER_SERIES={_files.MAX_FOLDER_SERIES:,} series (harness/core/files.py); row skipped "
            "(split the results folder to read all of it)"
        )
    return False


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


def _floats(rows: list, shape: tuple):
    """``rows`` (lists of numbers or None) as a float64 array with NaN for
    anything that is not a finite number (the rule of :func:`finite`)."""
    try:  # every row has shape[1] entries (_column); None becomes NaN
        a = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64, count=shape[0] * shape[1]).reshape(shape)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float range (10**400)
        a = np.array(
            [[finite(x) if finite(x) is not None else np.nan for x in r] for r in rows], dtype=np.float64
        ).reshape(shape)
    a[~np.isfinite(a)] = np.nan
    return a


def guard_records(records: list, value, unit, machine: str, cals: dict | None, health: dict | None) -> None:
    """Validate each point's record when read (:func:`harness.core.guards.guard_record`),
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
        m = _guards.guard_record(rec, time_s=t, calibration=cal)
        records[i] = dict(rec, metrics=m.as_dict(), metrics_written=rec.get("metrics"))
        if v == v or m.status != _metrics.STATUS_OK:
            counts[m.status] = counts.get(m.status, 0) + 1
        if m.status == _metrics.STATUS_ABOVE_CEILING and cal is not None:
            under = cal.setdefault("under_measured", [])
            if len(under) < 20:
                under.append(
                    {
                        "benchmark": rec.get("benchmark"),
                        "params": rec.get("params"),
                        "commit": rec.get("commit"),
                        "reason": m.reason,
                    }
                )
            cal["under_measured_points"] = cal.get("under_measured_points", 0) + 1


def report_under_measured(rs: ResultSet, base: Path, folder_of: dict | None = None) -> None:
    """One line per calibration that some kernel beat: the ceiling is under-measured."""
    for machine, cal in sorted(rs.calibrations.items()):
        n = cal.get("under_measured_points")
        if not n:
            continue
        um = cal.get("under_measured")
        first = um[0] if isinstance(um, list) and um and isinstance(um[0], dict) else {}
        params = first.get("params")
        # as the pages name a case, never a Python dict repr (newcomer trial, 2026-12-03)
        params = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) if isinstance(params, dict) else params
        folder = (folder_of or {}).get(machine, machine)
        path = _records.records_dir(base, folder) / _records.CALIBRATION_FILE
        rs.errors.append(
            f"{path}: calibration of {cal.get('date', '?')} is under-measured: {n} point(s) "
            f"above its ceilings, e.g. {first.get('benchmark')}({params}): "
            f"{first.get('reason')}; run `kernelwatch calibrate` on a quiet machine"
        )


def report_unlisted(rs: ResultSet, base: Path) -> None:
    """One warning for the benchmarks with results that ``benchmarks.json`` does not
    list (asv writes the file for the newest suite only, so renamed benchmarks of
    old commits are common in real histories: OpenBLAS has 8). Their parameter
    names, unit and version are then guesses, which used to be silent (hostile
    trial round 6, S-e)."""
    if not rs.unlisted:
        return
    names = sorted(rs.unlisted)
    shown = ", ".join(f"{n} ({rs.unlisted[n]})" for n in names[:3]) + (" ..." if len(names) > 3 else "")
    rs.errors.append(
        f"{base / 'benchmarks.json'} does not list {len(names)} benchmark(s) that have results, e.g. {shown}: "
        "their parameters are named param1, param2, ..., their unit read from their name, their version unknown"
    )


def finish_group(
    g: Group,
    order: dict,
    recs: dict,
    parts: dict,
    quartiles: bool = True,
    cals: dict | None = None,
    health: dict | None = None,
) -> int:
    """Classify every value of a group (vectorised) and cut it into per-series parts.

    Rules, as asv: ``None`` is a failed result; a float NaN is skipped (not a
    point); anything else must be a finite positive number or it is invalid.
    Every record is validated when read (:func:`guard_records`); a record
    whose status is then not ``ok`` (invalid, timing_bug, above_ceiling,
    contended) invalidates its point: no value, no samples, the reason kept.
    Returns how many values were skipped (NaN).
    """
    R, n = len(g.commits), len(g.entries)
    if R == 0 or n == 0:
        return 0
    shape = (R, n)
    f, bad, a, b, q1, q3 = g.arrays(quartiles)
    skip = np.zeros(shape, dtype=bool)
    reason = np.full(shape, None, dtype=object)
    for r, j, x in bad:  # failed, skipped or invalid: few, so classified one by one
        if x is None:
            reason[r, j] = "failed"
        elif type(x) is float and x != x:
            skip[r, j] = True
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            # zero, negative or infinite: no time, size or count asv measures (issue 29 S5)
            reason[r, j] = f"{IMPOSSIBLE} {x!r} (a result is a finite number > 0)"
        else:
            reason[r, j] = f"invalid: value {x!r}"
        f[r, j] = np.nan
    both = ~(np.isnan(a) | np.isnan(b))
    lo, hi = np.where(both, a, np.nan), np.where(both, b, np.nan)
    if not quartiles:
        q1 = q3 = np.full(shape, np.nan)
    smp_rows = g.cols[SAMPLES]
    has_smp = any(map(any, smp_rows))
    commits = np.array(g.commits, dtype=object)
    okey = np.array([order.get(c, len(order)) for c in g.commits], dtype=np.int64)
    seqs = np.array(g.seq, dtype=np.int64)
    rank = np.lexsort((seqs, okey))
    rank_rows = rank.tolist()
    by_rank = (
        [g.version[r] for r in rank_rows],
        [g.env[r] for r in rank_rows],
        [g.started[r] for r in rank_rows],
        commits[rank].tolist(),
    )
    any_skip = skip.any(axis=0)
    for j, (key, _unit, _typ, tail) in enumerate(g.entries):
        keep = rank[~skip[rank, j]] if any_skip[j] else rank
        rows = keep.tolist() if any_skip[j] else rank_rows
        if any_skip[j]:
            lists = (
                [g.version[r] for r in rows],
                [g.env[r] for r in rows],
                [g.started[r] for r in rows],
                commits[keep].tolist(),
            )
        else:
            lists = by_rank  # shared by the series of this group (read-only)
        samples = None
        if has_smp:
            samples = []
            for r in rows:
                sm = smp_rows[r][j]
                samples.append([float(x) for x in sm if finite(x) is not None] if sm else None)
        records = None
        value, rsn = f[keep, j], reason[keep, j].tolist()
        c_lo, c_hi, c_q1, c_q3 = lo[keep, j], hi[keep, j], q1[keep, j], q3[keep, j]
        if recs:
            records = [recs.get((g.machine, g.commits[r], g.name) + tail) for r in rows]
            guard_records(records, value, _unit, g.machine, cals, health)
            for i, rec in enumerate(records):
                status = ((rec or {}).get("metrics") or {}).get("status")
                if rec is not None and status not in (None, "ok", _metrics.STATUS_ABOVE_CEILING):
                    # An invalid, impossible or contended time is never in an average, plot or test;
                    # above_ceiling keeps its sound time (the ceiling is under-measured).
                    value[i] = c_lo[i] = c_hi[i] = c_q1[i] = c_q3[i] = np.nan
                    if samples is not None:
                        samples[i] = None
                    rsn[i] = f"{status}: {(rec.get('metrics') or {}).get('reason') or 'no reason recorded'}"
        parts.setdefault(key, []).append(
            (
                okey[keep],
                seqs[keep],
                SeriesColumns(
                    key=key,
                    unit=None,
                    type=None,
                    commits=lists[3],
                    value=value,
                    reason=rsn,
                    ci_lo=c_lo,
                    ci_hi=c_hi,
                    q_25=c_q1,
                    q_75=c_q3,
                    version=lists[0],
                    env_name=lists[1],
                    started_at=lists[2],
                    samples=samples,
                    records=records,
                ),
            )
        )
    return int(skip.sum())


def join_parts(key: SeriesKey, unit, typ, parts: list) -> SeriesColumns:
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

        smp = (
            None
            if all(c.samples is None for c in cs)
            else pick([x for c in cs for x in (c.samples if c.samples is not None else [None] * len(c))])
        )
        rec = (
            None
            if all(c.records is None for c in cs)
            else pick([x for c in cs for x in (c.records if c.records is not None else [None] * len(c))])
        )
        c = SeriesColumns(
            key,
            unit,
            typ,
            pick(cat_list("commits")),
            cat_arr("value"),
            pick(cat_list("reason")),
            cat_arr("ci_lo"),
            cat_arr("ci_hi"),
            cat_arr("q_25"),
            cat_arr("q_75"),
            pick(cat_list("version")),
            pick(cat_list("env_name")),
            pick(cat_list("started_at")),
            smp,
            rec,
        )
    c.unit, c.type = unit, typ
    return c


def _series_entries(
    rs: ResultSet, machine: str, name: str, pkey: tuple, env: str | None = None, path: Path | None = None
) -> list:
    """``(SeriesKey, unit, type, record-key tail)`` of each parameter combination
    of ``name``, in asv's order (``itertools.product`` of the parameter lists).
    ``path``: the results file whose row declared ``pkey`` (named when its
    parameter lists do not match benchmarks.json's ``param_names``)."""
    meta = rs.benchmarks.get(name, {})
    if rs.benchmarks and name not in rs.benchmarks and name not in rs.unlisted:
        # a benchmarks.json that lists others but not this one: its parameter names,
        # unit and version are guesses, which used to be silent (hostile trial round 6, S-e)
        rs.unlisted[name] = str(path if path is not None else f"the results of {machine}")
    names = meta.get("param_names") or []
    if len(names) != len(pkey):
        if names:
            where = path if path is not None else f"the results of {machine}"
            rs.errors.append(
                f"{where}: benchmark {name}: its row has {len(pkey)} parameter lists, "
                f"{rs.results_dir / 'benchmarks.json'} declares {len(names)} param_names; named param1, param2, ..."
            )
        names = [f"param{i + 1}" for i in range(len(pkey))]
    combos = list(itertools.product(*pkey)) if pkey else [()]
    unit = meta.get("unit") or unit_from_name(name)
    typ = meta.get("type") or type_from_name(name)
    out = []
    for combo in combos:
        clean = tuple((str(n), clean_param(v)) for n, v in zip(names, combo))
        timing = dict(clean).get("timing")
        ident = clean + ((ENV_PARAM, env),) if env is not None else clean
        key = SeriesKey(machine=machine, benchmark=name, params=ident, timing=timing, env=env)
        out.append((key, unit, typ, (tuple(sorted(clean)), timing)))  # records carry no environment
    return out
