"""Load any asv results directory (ours or foreign, format v1 or v2) plus our records.

This is the one module that reads asv's files. Format v1 is migrated with
asv's own ``Results.update_to_2``; format v2 rows (``result_columns``) are read
directly, with the semantics of asv's ``Results.load`` / ``get_result_value`` /
``get_result_stats`` / ``get_result_samples`` (see :func:`read_results_file`
for why). One bad file never stops the rest: each unusable file becomes a
one-line entry in :attr:`ResultSet.errors` naming it.

Model (``docs/architecture.md`` has the stages around it):

- a *machine* is a folder with a ``machine.json``;
- a *series* is machine x benchmark x parameters x timing method
  (:class:`SeriesKey`); for our suite the timing method is the ``timing``
  parameter, for foreign suites it is ``None``;
- a *point* is one commit's value in a series; a failed result is ``value=None``
  with ``reason="failed"``, a skipped one is not a point at all;
- commits are ordered by git history when a repository is given, else by the
  commit date stored in the results files (never by file order).

Bad input (issue 14), every file checked by :mod:`harness.core.schema` before use:

- a file of the wrong shape is skipped, a wrong row of a file is skipped, each
  with one line in :attr:`ResultSet.errors` naming the file (and benchmark) and
  the field; everything else loads. Callers exit 2 only when nothing usable
  remains (:meth:`ResultSet.usable`).
- every entry of the results folder is accounted for: a file or a dangling
  symlink where a machine folder should be, a folder that cannot be read, one
  without (or with a dangling or unreadable) ``machine.json`` -> a warning
  naming it. Names starting with a dot are kernelwatch's own (lock, scratch,
  quarantine) and are not machines.
- two folders whose ``machine.json`` name the same machine are kept apart: the
  folder named like the machine (else the first in name order) keeps the name,
  the other becomes ``<name> (<folder>)``, with a warning naming both.
- environments: on a machine where one commit was measured in more than one
  asv environment (a py3.11 and a py3.12 file for one commit, a normal asv
  matrix), the environment name is part of the series identity
  (:attr:`SeriesKey.env` and a last parameter ``asv_env``) for that machine,
  with a warning naming the machine,
  a commit and the environments. Where environments only follow each other
  (py3.7 up to some commit, py3.8 after), a series spans them and the change
  is annotated as an environment change, as before (series identities stay).
- commits: with ``repo`` given, a results commit that is not in the
  repository's history is *parked*: a warning naming it and its file, ordered
  by stored date before the history (``CommitInfo.parked``), never the newest.
  When *no* results commit is in the history, the repository is not the
  measured project: one warning, and every commit is ordered by stored date.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

from harness.core import files as _files
from harness.core import records as _records
from harness.core import schema as _schema
from harness.store import columns as _columns
from harness.store import layout as _layout
from harness.store.asvfile import read_results_file

# The model lives in harness.store.model; these names are this module's public API too.
from harness.store.model import (
    ENV_PARAM,  # noqa: F401
    CommitInfo,  # noqa: F401
    Point,  # noqa: F401
    ResultSet,
    Series,  # noqa: F401
    SeriesColumns,
    SeriesKey,
)


def _load_benchmarks_json(results_dir: Path, rs: ResultSet) -> None:
    path = results_dir / "benchmarks.json"
    try:
        present = path.exists()
    except OSError as exc:  # a results folder that cannot be searched: listing it says so next
        rs.errors.append(f"{path}: cannot read ({exc.strerror or exc}); benchmark units and versions unknown")
        return
    if not present:
        rs.errors.append(
            f"{path}: missing (warning): benchmark units and types fall back to asv's naming "
            "convention (time_ -> seconds, mem_/peakmem_ -> bytes, track_ -> no unit), parameter "
            "names to param1, param2, ... (so cost rules keyed on them give no tflops/gbps), "
            "versions are unknown; copy the benchmarks.json that asv wrote beside the machines"
        )
        return
    try:
        data = _files.read_json(path, problems=rs.errors)
    except (OSError, ValueError) as exc:
        rs.errors.append(f"{path}: unreadable benchmarks metadata ({exc}); benchmark units and versions unknown")
        return
    try:
        rs.benchmarks.update(_schema.benchmarks_json(data, path, rs.errors))
    except _schema.SchemaError as exc:
        rs.errors.append(f"{exc}; file ignored: benchmark units, parameter names and versions unknown")


def load(
    results_dir: str | os.PathLike,
    repo: str | os.PathLike | None = None,
    with_records: bool = True,
    machines=None,
    on_access: bool = False,
) -> ResultSet:
    """Load ``results_dir``.

    Parameters
    ----------
    results_dir : path
        An asv results directory: ``benchmarks.json`` (optional) and one folder
        per machine with ``machine.json`` and result files.
    repo : path, optional
        A git repository holding the commits: gives history order (of its
        HEAD), subjects and authors (GitPython). A commit outside HEAD's history
        (unknown, or only on a tag or another branch) is parked: ordered by its
        stored date before the history, never the newest.
    with_records : bool
        Also attach kernelwatch records (``<machine>/kernelwatch/*.jsonl``).
    machines : iterable of str, optional
        Load only these machines (folder name or ``machine.json`` name); all by default.
    on_access : bool
        Each series' ``points`` a :class:`harness.store.model.PointView` (points made
        when read, about a fifth of the memory: issue 28) instead of a list; for
        readers that do not change the points (``kernelwatch analyze``).

    Raises
    ------
    FileNotFoundError
        ``results_dir`` does not exist or is not a folder.
    """
    rs, columns = load_columns(results_dir, repo, with_records=with_records, machines=machines)
    for key, c in columns.items():
        s = rs.series[key] = Series(key=key, unit=c.unit, type=c.type)
        s.points = c.point_view() if on_access else c.points()
    return rs


def _round_records(results_dir: str | os.PathLike, problems: list[str]):
    """``(machine, commit, benchmark, sorted params, record)`` for each valid
    kernelwatch record of a results folder, in the order the rounds ran."""
    for path in sorted(Path(results_dir).glob(f"*/{_records.RECORDS_SUBDIR}/*.jsonl")):
        machine, commit = path.parent.parent.name, path.stem
        for i, rec in enumerate(_records.read_jsonl(path, problems)):
            try:
                _schema.record(rec, f"{path}:{i + 1}")
            except _schema.SchemaError as exc:
                problems.append(f"{exc}; record skipped (no round split for it)")
                continue
            if _records.misplaced_record(rec, path, machine, None) or not rec.get("benchmark"):
                continue  # misplaced ones are named by load_records
            params = tuple(sorted((str(k), str(v)) for k, v in (rec.get("params") or {}).items()))
            yield machine, commit, rec["benchmark"], params, rec


def record_rounds(results_dir: str | os.PathLike, problems: list[str]) -> dict:
    """``{(machine, commit, benchmark, sorted params): [samples of each round]}`` from the
    kernelwatch records of a results folder: the suite writes one record per asv
    round (process), in the order the rounds ran. A record that fails
    :func:`harness.core.schema.record` is left out, with a line in ``problems``
    (it then gives no round split; its samples stay in the asv results)."""
    out: dict = {}
    for machine, commit, bench, params, rec in _round_records(results_dir, problems):
        smp = (rec.get("timing") or {}).get("samples_s")
        if isinstance(smp, list):
            out.setdefault((machine, commit, bench, params), []).append([float(x) for x in smp])
    return out


def record_code(results_dir: str | os.PathLike, problems: list[str]) -> dict:
    """``{(machine, commit, benchmark, sorted params): [code_identity of each round]}``
    (``None`` for a round whose record has none: written before issue 24), as
    :func:`record_rounds` reads them."""
    out: dict = {}
    for machine, commit, bench, params, rec in _round_records(results_dir, problems):
        ci = rec.get("code_identity")
        out.setdefault((machine, commit, bench, params), []).append(ci if isinstance(ci, dict) else None)
    return out


def load_columns(
    results_dir: str | os.PathLike,
    repo: str | os.PathLike | None = None,
    with_records: bool = True,
    machines=None,
    quartiles: bool = True,
    keep_raw: list | None = None,
) -> tuple[ResultSet, dict[SeriesKey, SeriesColumns]]:
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
    from harness.store import parse_cache

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_columns(results_dir, repo, with_records, machines, quartiles, keep_raw)
    finally:
        if was_enabled:
            gc.enable()
        cache = parse_cache.active()
        if cache is not None:
            cache.flush()  # this process' entries, even when it leaves by os._exit


def _load_columns(results_dir, repo, with_records, machines, quartiles, keep_raw=None):
    base = Path(results_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"results directory {base} does not exist or is not a folder")
    rs = ResultSet(results_dir=base)
    _load_benchmarks_json(base, rs)

    wanted = set(machines) if machines is not None else None
    claimed: dict = {}  # machine name -> folder that holds it
    groups: dict = {}
    keys: dict = {}  # SeriesKey -> (unit, type), first-seen order
    seq = 0
    for mdir, minfo in _layout.machine_folders(base, rs.errors, wanted):
        machine = _layout.claim_machine_name(rs.errors, mdir, minfo, claimed)
        rs.machines[machine] = minfo
        recent: dict = {}
        if with_records:
            cal = _records.latest_calibration(base, mdir.name, rs.errors)
            if cal:
                rs.calibrations[machine] = cal
        try:
            paths = [q for q in sorted(mdir.glob("*.json")) if q.name != "machine.json"]
        except OSError as exc:
            rs.errors.append(f"{mdir}: cannot list the machine folder ({exc.strerror or exc}); machine skipped")
            continue
        mark = (len(rs.errors), seq, rs.files_loaded)
        streamed = _stream_machine(rs, machine, paths, seq, groups, keys, quartiles, recent)
        if streamed is not None:
            seq = streamed
            continue
        # A commit in two files or two environments: undo and take the whole machine in memory.
        del rs.errors[mark[0] :]
        seq, rs.files_loaded = mark[1], mark[2]
        for gk in [k for k in groups if k[0] == machine]:
            del groups[gk]
        for k in [k for k in keys if k.machine == machine]:
            del keys[k]
        recent = {}
        seq = _machine_in_memory(rs, mdir, machine, paths, seq, groups, keys, quartiles, recent, repo)

    # A folder's records belong to that folder's machine (two folders naming one
    # machine are kept apart, so their records must not mix either).
    recs = (
        _records.load_records(base, rs.errors, machine_of={d.name: m for m, d in claimed.items()})
        if with_records
        else {}
    )
    if repo is not None:
        _order_by_git(rs, Path(repo))
    order = {c: i for i, c in enumerate(rs.commit_order())}
    parts: dict = {}
    for g in groups.values():
        rs.skipped_points += _columns.finish_group(
            g, order, recs, parts, quartiles, cals=rs.calibrations, health=rs.health
        )
    _columns.report_under_measured(rs, base, {m: d.name for m, d in claimed.items()})
    _columns.report_unlisted(rs, base)
    _layout.report_over_folder_limit(rs.results_dir, rs.grid_points, rs.errors)
    columns = {}
    for key, (unit, typ) in keys.items():
        columns[key] = _columns.join_parts(key, unit, typ, parts.get(key, []))
    if keep_raw is not None:
        keep_raw.append(groups)
    return rs, columns


#: A commit hash as asv stores it: 40 hex digits (git's SHA-1), lower case.
FULL_HASH_LEN = 40
#: The shortest prefix taken for a commit (git's default abbreviation).
MIN_SHORT_HASH_LEN = 7


def _lower_hex_hash(res) -> None:
    """Lower-case ``res.commit_hash`` in place when it is a hex string (asv stores lower case)."""
    h = res.commit_hash
    if isinstance(h, str) and h != h.lower() and all(ch in "0123456789abcdefABCDEF" for ch in h):
        res.commit_hash = h.lower()


def _canonical_commits(loaded: list, rs: ResultSet, repo) -> None:
    """One spelling per commit, in place: a hex ``commit_hash`` is lower-cased,
    and a short one (7 to 39 hex digits) becomes the full hash it abbreviates
    when exactly one is known: among the full hashes of this machine's files
    and of the machines read before, else from ``repo`` when given (git
    resolves it). Otherwise a short hash would be a commit of its own, its
    point beside the full hash's and ordered apart from it. Each expansion is
    named in a warning; an ambiguous or unknown short hash stays as stored.
    """
    for _, res in loaded:
        _lower_hex_hash(res)
    full = {c for c in rs.commits if len(c) == FULL_HASH_LEN}
    full |= {
        res.commit_hash
        for _, res in loaded
        if isinstance(res.commit_hash, str) and len(res.commit_hash) == FULL_HASH_LEN
    }
    git_repo = None
    for path, res in loaded:
        h = res.commit_hash
        if not isinstance(h, str) or not (MIN_SHORT_HASH_LEN <= len(h) < FULL_HASH_LEN):
            continue
        if not all(ch in "0123456789abcdef" for ch in h):
            continue
        hits = [c for c in full if c.startswith(h)]
        if not hits and repo is not None:
            try:
                import git

                git_repo = git_repo or git.Repo(repo, search_parent_directories=True)
                hits = [git_repo.commit(h).hexsha]
            except Exception:  # not a repository, unknown or ambiguous prefix: kept as stored
                hits = []
        if len(hits) == 1:
            rs.errors.append(f"{path}: commit hash {h} is abbreviated; read as {hits[0]}")
            res.commit_hash = hits[0]
            full.add(hits[0])
        elif len(hits) > 1:
            rs.errors.append(f"{path}: commit hash {h} abbreviates {len(hits)} known commits; kept as stored")


def _name_agrees(path: Path, res, errors: list) -> None:
    """A warning when a file named for one commit (asv's ``<hash[:8]>-<env>.json``)
    holds another's ``commit_hash``: a copied or renamed file made the named
    commit vanish while the warning spoke only of the other (hostile trial round 7).
    The content wins, as asv reads it."""
    prefix = path.name.split("-", 1)[0].lower()
    c = res.commit_hash
    if len(prefix) == 8 and all(ch in "0123456789abcdef" for ch in prefix) and isinstance(c, str) and c:
        if not c.lower().startswith(prefix) and not prefix.startswith(c.lower()):
            errors.append(f"{path}: named for commit {prefix} but holds commit_hash {c[:12]}; read as {c[:12]}")


def _read_one(path: Path, errors: list, budget: dict | None = None):
    """One results file, or ``None`` with a line in ``errors`` naming it.

    ``budget`` (:attr:`ResultSet.grid_points`): the combinations each file declared,
    ``None`` the running total; a file taking the total over
    :data:`harness.core.files.MAX_FOLDER_GRID_POINTS` is skipped by name. A file read
    again (a machine redone in memory) replaces its own count."""
    from asv import util as asv_util

    try:
        res = read_results_file(path, errors)
    except asv_util.UserError as exc:
        errors.append(f"{path}: {str(exc).strip().splitlines()[0]}; file skipped")
        return None
    except Exception as exc:  # malformed files raise assorted errors
        errors.append(f"{path}: cannot load ({type(exc).__name__}: {exc}); file skipped")
        return None
    _name_agrees(path, res, errors)
    if budget is None:
        return res
    return res if _layout.within_folder_budget(path, res, errors, budget) else None


def _stream_machine(rs, machine, paths, seq, groups, keys, quartiles, recent) -> int | None:
    """Read and file one machine's results files one at a time, so only one
    parsed file is in memory (the groups compact their rows as they grow,
    :meth:`harness.store.columns.Group.compact`). Returns the next ``seq``, or
    ``None`` as soon as a commit turns up in a second file or environment: those
    rules (:func:`_one_file_per_commit`, split environments) need every file of
    the machine at once, and the caller redoes the machine in memory. The
    errors come out in the order of the in-memory path (read errors first)."""
    read_errs: list[str] = []
    start = len(rs.errors)
    envs: dict = {}
    for path in paths:
        res = _read_one(path, read_errs, rs.grid_points)
        if res is None:
            continue
        _lower_hex_hash(res)
        if isinstance(res.commit_hash, str) and len(res.commit_hash) < FULL_HASH_LEN:
            return None  # an abbreviated hash: expanded against the whole machine (_canonical_commits)
        try:
            if res.commit_hash in envs:
                return None
            envs[res.commit_hash] = res.env_name
        except TypeError:  # an unhashable commit: the in-memory path names it
            return None
        rs.files_loaded += 1
        if _columns.collect_file(rs, machine, res, path, seq, groups, keys, quartiles, recent, False):
            rs.file_of.setdefault(res.commit_hash, str(path))
        seq += 1
    rs.errors[start:start] = read_errs
    return seq


def _machine_in_memory(rs, mdir, machine, paths, seq, groups, keys, quartiles, recent, repo=None) -> int:
    """Read every results file of one machine, then apply the rules for one
    commit in several files or environments and file the rows. Returns the next ``seq``."""
    loaded = [(path, res) for path in paths if (res := _read_one(path, rs.errors, rs.grid_points)) is not None]
    _canonical_commits(loaded, rs, repo)
    loaded = _one_file_per_commit(mdir, machine, loaded, rs.errors)
    envs_of: dict = {}
    for _, res in loaded:
        envs_of.setdefault(res.commit_hash, set()).add(res.env_name)
    both = sorted(c for c, e in envs_of.items() if len(e) > 1)
    split_env = bool(both)
    if split_env:
        envs = sorted({res.env_name for _, res in loaded})
        rs.errors.append(
            f"{mdir}: machine {machine!r} has {len(both)} commit(s) measured in more than one asv "
            f"environment (e.g. {both[0][:12]} in {', '.join(sorted(envs_of[both[0]]))}): the "
            f"environment is part of each series' identity on this machine (series kept apart, "
            f"parameter asv_env; environments: {', '.join(envs)})"
        )
    for path, res in loaded:
        rs.files_loaded += 1
        if _columns.collect_file(rs, machine, res, path, seq, groups, keys, quartiles, recent, split_env):
            rs.file_of.setdefault(res.commit_hash, str(path))
        seq += 1
    return seq


def _ran_at(path: Path, res) -> tuple:
    """When a results file's benchmarks ran: the latest ``started_at`` of its rows
    (asv's epoch ms), then the file's modification time, then its name."""
    started = max((_row_started(res, r) for r in res.results.values()), default=-math.inf)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (started, mtime, path.name)


def _one_file_per_commit(mdir: Path, machine: str, loaded: list, errors: list[str]) -> list:
    """The rule for one commit in several results files of one machine and asv
    environment (a re-run, or a copied file): one point per benchmark
    combination, with the runs as its samples.

    Per benchmark, the file whose row of it ran last (its ``started_at``, then
    the file's :func:`_ran_at`) wins the
    point's value, CI, quartiles, benchmark version, start time and record (a
    re-run replaces the run before it, as asv's own re-run overwrites its
    file); the older files' runs of that benchmark become samples of the point
    (:func:`_pool_runs`). Benchmarks only an older file holds are kept from it
    (disjoint files merge). One warning per commit names every file. A second
    environment is not a re-run (its series get the ``asv_env`` parameter).
    Works on the rows already in memory: nothing is read twice.
    """
    by: dict = {}
    for path, res in loaded:
        by.setdefault((res.commit_hash, res.env_name), []).append((path, res))
    dropped = set()
    for (commit, env), files in by.items():
        if len(files) < 2 or not isinstance(commit, str):
            continue
        ran = {id(res): _ran_at(path, res) for path, res in files}
        files.sort(key=lambda f: ran[id(f[1])], reverse=True)
        runs: dict = {}  # benchmark -> [(results file, row)], the point's owner first
        for name in sorted(set().union(*(res.results for _, res in files))):
            holders = [res for _, res in files if name in res.results]
            holders.sort(key=lambda r: (_row_started(r, r.results[name]), ran[id(r)]), reverse=True)
            runs[name] = [(r, r.results[name]) for r in holders]
        parts = []
        for path, res in files:
            names = set(res.results)
            kept = {k for k in names if runs[k][0][0] is res}
            if kept != names:
                res.results = {k: v for k, v in res.results.items() if k in kept}
            if not kept:
                dropped.add(id(res))
            parts.append(f"{path} ({len(kept)} of {len(names)} benchmark(s) used)")
        pooled = sum(_pool_runs(rows) for rows in runs.values() if len(rows) > 1)
        errors.append(
            f"{mdir}: machine {machine!r} has commit {commit[:12]} in environment {env!r} in "
            f"{len(files)} results files; per benchmark the file that ran last wins, benchmarks only "
            f"an older file holds are kept, {pooled} older run(s) of the same benchmarks are samples "
            f"of its points: " + "; ".join(parts)
        )
    return [(p, r) for p, r in loaded if id(r) not in dropped]


def _row_started(res, row) -> float:
    """asv's ``started_at`` of one row (epoch ms), ``-inf`` when absent or not a number."""
    i = res.columns.index("started_at") if "started_at" in res.columns else None
    v = row[i] if i is not None and isinstance(row, list) and len(row) > i else None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else -math.inf


def _row_cells(res, row) -> tuple[dict, object, object]:
    """``({combination: (value, raw samples or None)}, started_at, version)`` of one
    format-2 row of ``res``, for the combinations with a finite positive value."""
    col = {c: i for i, c in enumerate(res.columns)}

    def at(name):
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else None

    params = at("params") or []
    values = at("result")
    values = values if isinstance(values, list) else [values]
    raw = at("samples")
    out = {}
    for j, combo in enumerate(itertools.product(*params) if params else [()]):
        v = _columns.finite(values[j]) if j < len(values) else None
        if v is None or v <= 0:
            continue
        sm = raw[j] if isinstance(raw, list) and j < len(raw) and isinstance(raw[j], list) else None
        sm = [x for x in map(_columns.finite, sm) if x is not None] if sm else None
        out[tuple(map(str, combo))] = (v, sm or None)
    return out, at("started_at"), at("version")


def _pool_runs(rows: list) -> int:
    """Write the runs of one benchmark into the samples of its owner's row.

    ``rows`` is ``[(results file, row)]`` of one benchmark at one commit and
    environment, the owner (the run that wins the point) first, then older
    runs. An older row is a run when it has the owner's benchmark version and
    a ``started_at`` not seen yet (the same ``started_at`` is a copy of a run
    already taken, not another). Per combination where the owner has a value
    and some older run too, ``samples`` becomes asv's raw ``samples`` of every
    run pooled when every run has them, else one value per run, oldest run
    first in both cases (so without raw samples ``len(samples)`` is the
    number of runs). The owner's row gets a ``samples`` column if its file had
    none. Returns how many older rows were taken as runs.
    """
    (res, row), older = rows[0], [(r, w) for r, w in rows[1:] if isinstance(w, list)]
    if not isinstance(row, list):
        return 0  # malformed: named when its file is read (harness.store.columns.collect_file)
    mine, start, version = _row_cells(res, row)
    seen = {start} if start is not None else set()
    cells = {c: [v] for c, v in mine.items()}
    taken = 0
    for o_res, o_row in older:
        theirs, o_start, o_version = _row_cells(o_res, o_row)
        if o_version != version or (o_start is not None and o_start in seen) or not (theirs.keys() & cells.keys()):
            continue
        if o_start is not None:
            seen.add(o_start)
        taken += 1
        for c in theirs.keys() & cells.keys():
            cells[c].append(theirs[c])
    if not taken:
        return 0
    if "samples" not in res.columns:
        res.columns = list(res.columns) + ["samples"]
    i = res.columns.index("samples")
    row.extend([None] * (len(res.columns) - len(row)))
    params = (row[res.columns.index("params")] if "params" in res.columns else None) or []
    combos = [tuple(map(str, c)) for c in (itertools.product(*params) if params else [()])]
    current = row[i] if isinstance(row[i], list) and len(row[i]) == len(combos) else [None] * len(combos)
    merged = list(current)
    for j, c in enumerate(combos):
        per_run = cells.get(c) or []
        if len(per_run) < 2:
            continue
        per_run = per_run[::-1]  # oldest first
        if all(raw for _, raw in per_run):
            merged[j] = [x for _, raw in per_run for x in raw]
        else:
            merged[j] = [v for v, _ in per_run]
    row[i] = merged
    return taken


def _known_commits(r) -> set[str]:
    """Every commit reachable from any ref of the GitPython repository ``r`` (empty on error)."""
    try:
        return set(r.git.rev_list("--all").split())
    except Exception:
        return set()


def _order_by_git(rs: ResultSet, repo: Path) -> None:
    try:
        import git

        r = git.Repo(repo, search_parent_directories=True)
    except Exception as exc:
        rs.errors.append(f"{repo}: not a usable git repository ({type(exc).__name__}); ordering by stored commit date")
        return
    try:
        # HEAD's history only: a commit reachable from nothing but a tag or another
        # branch is no ancestor of the newest results, so it is parked below, never
        # shown as "Latest results" nor paired with a commit that is not its parent.
        history = r.git.rev_list("--topo-order", "--reverse", "HEAD").split()
    except Exception:
        history = []
    try:
        history = history or r.git.rev_list("--all", "--topo-order", "--reverse").split()
    except Exception as exc:
        rs.errors.append(f"{repo}: cannot read history ({exc}); ordering by stored commit date")
        return
    pos = {h: i for i, h in enumerate(history)}
    parked = sorted(
        (c for c in rs.commits.values() if c.hash not in pos),
        key=lambda c: (c.date_ms if c.date_ms is not None else math.inf, c.hash),
    )
    if parked and len(parked) == len(rs.commits):
        # Not one commit of the results is in this repository: it is not the
        # measured project (publishing a foreign suite from our checkout).
        rs.errors.append(
            f"{repo}: none of the {len(parked)} results commits is in this repository's history "
            "(is it the measured project?); ordering by stored commit date"
        )
        return
    elsewhere = _known_commits(r) if parked else set()
    for i, c in enumerate(parked):
        # Not in this repository's history: before the history, by stored date,
        # so it is never taken for the newest commit ("Latest results").
        c.parked = True
        c.order = i - len(parked)
        where = rs.file_of.get(c.hash, "a results file")
        what = (
            f"is on a tag or branch of {repo} but not in the history of its HEAD"
            if c.hash in elsewhere
            else f"is not in the history of {repo}"
        )
        rs.errors.append(
            f"{where}: commit {c.hash[:12]} {what}; parked: ordered by its "
            "stored date before the history, never as the newest commit"
        )
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
