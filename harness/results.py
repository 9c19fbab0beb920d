"""Load any asv results directory (ours or foreign, format v1 or v2) plus our records.

This is the one module that reads asv's files. It wraps asv's own readers
(``asv.results.Results.load``, ``get_result_value``, ``get_result_stats``,
``get_result_samples``), which carry no stable-API promise, and never lets one
bad file stop the rest: each unusable file becomes a one-line entry in
:attr:`ResultSet.errors` naming it.

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

import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness import records as _records


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


@dataclass
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

    def commit_order(self) -> list[str]:
        """Commits sorted by git order when known, else by stored date, then hash."""
        def key(c: CommitInfo):
            return (c.order if c.order is not None else math.inf, c.date_ms if c.date_ms is not None else math.inf, c.hash)
        return [c.hash for c in sorted(self.commits.values(), key=key)]

    def usable(self) -> bool:
        return any(p.value is not None for s in self.series.values() for p in s.points)


def _param_strings(params) -> list[list[str]]:
    if not params:
        return []
    return [[str(v) for v in axis] for axis in params]


def _clean(v: str) -> str:
    """asv stores parameter values as repr strings ("'torch'"); show them bare."""
    v = str(v)
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


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


def _type_from_name(name: str) -> str | None:
    """asv's naming convention (``time_``, ``mem_``, ``peakmem_``, ``track_``) for
    results whose benchmark is missing from ``benchmarks.json``."""
    last = name.rsplit(".", 1)[-1]
    for prefix, kind in (("time_", "time"), ("peakmem_", "peakmemory"), ("mem_", "memory"), ("track_", "track")):
        if last.startswith(prefix):
            return kind
    return None


def _unit_from_name(name: str) -> str | None:
    return {"time": "seconds", "peakmemory": "bytes", "memory": "bytes"}.get(_type_from_name(name))


def _finite(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load(results_dir: str | os.PathLike, repo: str | os.PathLike | None = None,
         with_records: bool = True) -> ResultSet:
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

    Raises
    ------
    FileNotFoundError
        ``results_dir`` does not exist or is not a folder.
    """
    from asv.results import Results
    from asv import util as asv_util

    base = Path(results_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"results directory {base} does not exist or is not a folder")
    rs = ResultSet(results_dir=base)
    _load_benchmarks_json(base, rs)
    recs = _records.load_records(base, rs.errors) if with_records else {}

    for mdir in sorted(p for p in base.iterdir() if p.is_dir()):
        mjson = mdir / "machine.json"
        if not mjson.exists():
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
        if with_records:
            from harness import calibrate

            cal = calibrate.load_latest(base, machine, rs.errors)
            if cal:
                rs.calibrations[machine] = cal
        for path in sorted(mdir.glob("*.json")):
            if path.name == "machine.json":
                continue
            try:
                res = _load_results_file(path)
            except asv_util.UserError as exc:
                rs.errors.append(f"{path}: {str(exc).strip().splitlines()[0]}")
                continue
            except Exception as exc:  # asv raises assorted errors on malformed files
                rs.errors.append(f"{path}: cannot load ({type(exc).__name__}: {exc})")
                continue
            rs.files_loaded += 1
            _add_results(rs, machine, res, path, recs)

    if repo is not None:
        _order_by_git(rs, Path(repo))
    order = {c: i for i, c in enumerate(rs.commit_order())}
    for s in rs.series.values():
        s.points.sort(key=lambda p: order.get(p.commit, math.inf))
    return rs


def _add_results(rs: ResultSet, machine: str, res, path: Path, recs: dict) -> None:
    commit = res.commit_hash
    if not commit:
        rs.errors.append(f"{path}: no commit hash; file skipped")
        return
    info = rs.commits.get(commit)
    date = res.date if isinstance(res.date, (int, float)) else None
    if info is None:
        rs.commits[commit] = CommitInfo(hash=commit, date_ms=int(date) if date is not None else None)
    elif info.date_ms is None and date is not None:
        info.date_ms = int(date)
    rs.env_params[(machine, commit)] = dict(res.params or {})

    for name in sorted(res.get_all_result_keys()):
        meta = rs.benchmarks.get(name, {})
        try:
            values = res.get_result_value(name, res.get_result_params(name))
            params = res.get_result_params(name)
            stats = res.get_result_stats(name, params)
            samples = res.get_result_samples(name, params)
        except Exception as exc:
            rs.errors.append(f"{path}: benchmark {name}: malformed result ({type(exc).__name__}: {exc})")
            continue
        version = (res.benchmark_version or {}).get(name)
        started = (res.started_at or {}).get(name)
        pstr = _param_strings(params)
        names = meta.get("param_names") or [f"param{i + 1}" for i in range(len(pstr))]
        combos = list(itertools.product(*pstr)) if pstr else [()]
        if values is None:
            values = [None] * len(combos)
        if not isinstance(values, list):
            values = [values]
        for i, combo in enumerate(combos):
            value = values[i] if i < len(values) else None
            clean = tuple((str(n), _clean(v)) for n, v in zip(names, combo))
            timing = dict(clean).get("timing")
            key = SeriesKey(machine=machine, benchmark=name, params=clean, timing=timing)
            series = rs.series.get(key)
            if series is None:
                series = rs.series[key] = Series(key=key, unit=meta.get("unit") or _unit_from_name(name),
                                                 type=meta.get("type") or _type_from_name(name))
            if value is not None and isinstance(value, float) and math.isnan(value):
                continue  # NaN = skipped in asv: not a point
            st = stats[i] if stats and i < len(stats) else None
            smp = samples[i] if samples and i < len(samples) else None
            v = _finite(value) if value is not None else None
            reason = None
            if value is None:
                reason = "failed"
            elif v is None or v <= 0:
                reason = f"invalid: value {value!r}"
                v = None
            pt = Point(commit=commit, value=v, reason=reason, version=version, env_name=res.env_name,
                       started_at=started)
            if st:
                ci = (st.get("ci_99_a"), st.get("ci_99_b"))
                if all(_finite(x) is not None for x in ci):
                    pt.ci_99 = (float(ci[0]), float(ci[1]))
                pt.q_25, pt.q_75 = _finite(st.get("q_25")), _finite(st.get("q_75"))
            if smp:
                pt.samples = [float(x) for x in smp if _finite(x) is not None]
            rkey = (machine, commit, name, tuple(sorted(clean)), timing)
            pt.record = recs.get(rkey)
            status = ((pt.record or {}).get("metrics") or {}).get("status")
            if status not in (None, "ok"):
                # An invalid or physically impossible time (harness.metrics guards)
                # is never a number in an average, a plot or a regression test.
                pt.value, pt.samples, pt.ci_99, pt.q_25, pt.q_75 = None, None, None, None, None
                pt.reason = f"{status}: {(pt.record.get('metrics') or {}).get('reason') or 'no reason recorded'}"
            series.points.append(pt)


def _load_results_file(path: Path):
    """``asv.results.Results.load``, migrating format v1 in memory (as ``asv
    update`` would on disk, but without touching the user's files)."""
    import tempfile

    from asv import util as asv_util
    from asv.results import Results

    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except ValueError as exc:
        raise asv_util.UserError(f"not valid JSON ({exc})") from None
    except OSError as exc:
        raise asv_util.UserError(f"cannot read ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise asv_util.UserError(f"expected a JSON object, got {type(raw).__name__}")
    version = raw.get("version")
    if version == Results.api_version:
        return Results.load(str(path))
    if version == 1:
        try:
            raw = Results.update_to_2(raw)
        except Exception as exc:
            raise asv_util.UserError(f"format v1 file could not be migrated ({type(exc).__name__}: {exc})") from None
        raw["version"] = 2
    elif version != Results.api_version:
        raise asv_util.UserError(f"unsupported asv results format version {version!r}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp) / "m" / path.name
        tmp_path.parent.mkdir()
        tmp_path.write_text(json.dumps(raw))
        return Results.load(str(tmp_path))


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
