"""``kernelwatch run``: benchmark commits of this repository on this machine with asv.

For each commit of the range that this machine has not measured yet, run
``asv run`` through the ``kernelwatch`` environment plugin (no environment
build, the commit checked out and imported from asv's build folder), with
samples recorded; the suite writes kernelwatch records beside asv's results.
Then build the site. Commits already measured on this machine are skipped, so
a second run over the same commits only re-publishes.

Faults (issue 14):

- **Atomic**: asv writes its results file in place, so an interrupted run used
  to leave a truncated file. Each commit is measured into a scratch folder
  (``<results>/.kernelwatch/scratch-*``, same file system) and its files are
  moved into place with ``os.replace`` only once they parse
  (:func:`promote_scratch`); records first, the asv results file last (its
  presence is what "measured" means). A commit cut off (SIGTERM from
  ``timeout``, asv failing, a kill) keeps the records of the cases that
  finished: they are moved into the results folder, the commit is measured
  again by the next run, which names such commits (:mod:`harness.measure.cutoff`).
- **Quarantine**: a results file of this machine that does not parse (or lacks
  ``commit_hash``) is moved to ``<results>/.kernelwatch/quarantine/`` with a
  warning naming it, and its commit is measured again (:func:`quarantine_bad_results`).
- **Exclusive**: one ``kernelwatch run`` (or ``check``) per results folder at a
  time, by an advisory ``fcntl.flock`` on ``<results>/.kernelwatch/lock``
  (:func:`results_lock`); a second one says who holds it (pid, host, command,
  since when) and waits up to ``lock_wait_s`` seconds.

Folders whose names start with a dot are kernelwatch's own, never machines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import devices, files, metrics, procs
from harness.core.model import printable
from harness.core.workspace import (  # noqa: F401  (the shared workspace; re-exported)
    DEFAULT_LOCK_WAIT_S,
    RESULTS_STATE_DIR,
    STATE_DIR,
    LockBusy,
    Workspace,
    WorkspaceError,
    repo_root,
    results_lock,
    write_machine_entry,
)
from harness.measure import calibrate, cutoff

DEFAULT_RANGE_COUNT = 5

#: A run that cannot start (not a git repository, bad range, asv missing): the
#: workspace's error, one class for every command (:mod:`harness.core.workspace`).
RunError = WorkspaceError


@dataclass
class RunSummary:
    machine: str
    commits: list[str]
    measured: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    site: Path | None = None
    warnings: list[str] = field(default_factory=list)


def _resolve_ref(repo, ref: str, spec: str) -> str:
    """Full hash of one side of a range, or :class:`RunError` naming the side that does not exist."""
    import git

    try:
        return repo.commit(ref).hexsha
    except (git.BadName, ValueError, git.GitCommandError, TypeError):
        raise RunError(
            f"commit range {spec!r}: {ref!r} is not a commit, branch or tag in {repo.working_tree_dir}"
        ) from None


def resolve_commits(root: Path, range_spec: str | None, count: int = DEFAULT_RANGE_COUNT) -> list[str]:
    """Full hashes of the commits to measure, oldest first.

    ``None`` means the last ``count`` commits of the current branch; ``A..B`` is
    git's range (an empty side means ``HEAD``); a single ref is that one commit.
    Both follow first parents only (``git rev-list --first-parent``, as asv's own
    range resolution does), so a merge counts as one commit of the branch and the
    merged branch's own commits are not measured.

    Raises
    ------
    RunError
        Naming the ref that does not exist (``'nonexistent' is not a commit ...``),
        for ``A...B`` (symmetric difference, not supported), or an empty range.
    """
    import git

    repo = git.Repo(root)
    if range_spec is not None and not range_spec.strip():
        raise RunError(f"empty commit range: give 'A..B', one ref, or nothing for the last {count} commits")
    try:
        if range_spec is None:
            _resolve_ref(repo, "HEAD", "HEAD")
            shas = repo.git.rev_list("--first-parent", f"--max-count={count}", "HEAD").split()
        elif "..." in range_spec:
            raise RunError(
                f"commit range {range_spec!r}: 'A...B' (symmetric difference) is not supported; "
                "use 'A..B' (the commits after A up to B)"
            )
        elif ".." in range_spec:
            left, right = range_spec.split("..", 1)
            a = _resolve_ref(repo, left or "HEAD", range_spec)
            b = _resolve_ref(repo, right or "HEAD", range_spec)
            shas = repo.git.rev_list("--first-parent", f"{a}..{b}").split()
            if not shas:
                raise RunError(
                    f"commit range {range_spec!r} is empty: {right or 'HEAD'} ({b[:12]}) has no commit "
                    f"that {left or 'HEAD'} ({a[:12]}) lacks (reversed range?)"
                )
        else:
            shas = [_resolve_ref(repo, range_spec, range_spec)]
    except git.GitCommandError as exc:
        raise RunError(f"cannot resolve commit range {range_spec!r}: {str(exc).strip().splitlines()[-1]}") from None
    if not shas:
        raise RunError(f"commit range {range_spec!r} is empty")
    return list(reversed(shas))


def measured_commits(results_dir: Path, machine: str | None = None) -> set[str]:
    """Full hashes that already have an asv result file for ``machine`` (any machine when ``None``).

    A file that does not parse does not count (see :func:`quarantine_bad_results`)."""
    done = set()
    pattern = "*/*.json" if machine is None else f"{machine}/*.json"
    for p in Path(results_dir).glob(pattern):
        if p.name == "machine.json" or p.parent.name.startswith("."):
            continue
        try:
            data = files.read_json(p)  # bounded; a FIFO or a link to a device is refused, never read
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("commit_hash"), str):
            done.add(data["commit_hash"])
    return done


def _results_file_problem(path: Path) -> str | None:
    """Why an asv results file cannot be used (``None`` if it parses as one)."""
    try:
        data = files.read_json(path)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason})"
    except files.InputLimitError as exc:
        return f"cannot read ({exc})"
    except ValueError as exc:
        return f"truncated or not valid JSON ({exc})"
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    if not isinstance(data.get("commit_hash"), str):
        return "no 'commit_hash' string"
    if not isinstance(data.get("results"), dict):
        return "no 'results' object"
    return None


def quarantine_bad_results(results_dir: Path, machine: str, log=print) -> list[str]:
    """Move every results file of ``machine`` that does not parse out of the way.

    A truncated file (an interrupted asv, a full disk) would otherwise be
    skipped by every reader, or stop asv itself. It goes to
    ``<results>/.kernelwatch/quarantine/<machine>/<name>.quarantined`` (kept,
    for a post-mortem; no ``.json`` suffix, so asv's walker ignores it) and its
    commit counts as not measured, so this run measures it again.

    Returns one warning per file, naming the file, the reason and where it went.
    """
    out = []
    mdir = Path(results_dir) / machine
    if not mdir.is_dir():
        return out
    for path in sorted(mdir.glob("*.json")):
        if path.name == "machine.json":
            continue
        why = _results_file_problem(path)
        if why is None:
            continue
        dest_dir = Path(results_dir) / RESULTS_STATE_DIR / "quarantine" / machine
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}.quarantined"
        os.replace(path, dest)
        prefix = path.name.split("-", 1)[0]
        # asv names a file <commit[:8]>-<env>.json; another name says nothing of a commit
        again = (
            f"commit {prefix} will be measured again"
            if "-" in path.name and re.fullmatch(r"[0-9a-f]{7,40}", prefix)
            else "its name is not <commit>-<env>.json, so no commit is measured again for it"
        )
        msg = f"{path}: {why}; moved to {dest}; {again}"
        log(f"warning: {msg}")
        out.append(msg)
    return out


def new_scratch(results_dir: Path, machine: str, tag: str) -> Path:
    """An empty scratch results folder beside ``results_dir``'s machines, seeded
    with this machine's calibration (the suite reads it from
    ``KERNELWATCH_RESULTS_DIR`` for measured ceilings)."""
    from harness.core import records

    scratch = Path(results_dir) / RESULTS_STATE_DIR / f"scratch-{tag}-{os.getpid()}"
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    cal = records.records_dir(results_dir, machine) / "calibration.jsonl"
    if cal.is_file():
        dst = records.records_dir(scratch, machine)
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cal, dst / cal.name)
    return scratch


def promote_scratch(scratch: Path, results_dir: Path) -> tuple[list[Path], list[str]]:
    """Move what asv and the suite wrote into ``scratch`` into ``results_dir``.

    Only whole files move: every asv results file must parse
    (:func:`_results_file_problem`), else it stays behind and is reported.
    ``os.replace`` within one file system is atomic, so a reader sees the old
    file or the new one, never half of one. Records move before the results
    file they describe; ``benchmarks.json`` and ``machine.json`` are replaced.
    The calibration copied in by :func:`new_scratch` is not moved back.

    Returns ``(results files moved, problems)``.
    """
    moved, problems = [], []
    results_dir = Path(results_dir)
    for mdir in sorted(p for p in scratch.iterdir() if p.is_dir()):
        dest = results_dir / mdir.name
        dest.mkdir(parents=True, exist_ok=True)
        cutoff.move_records(mdir, dest)
        mj = mdir / "machine.json"
        if mj.is_file():
            os.replace(mj, dest / "machine.json")
        for f in sorted(mdir.glob("*.json")):
            why = _results_file_problem(f)
            if why is not None:
                problems.append(f"{f}: {why}; not moved into {dest}")
                continue
            os.replace(f, dest / f.name)
            moved.append(dest / f.name)
    bj = scratch / "benchmarks.json"
    if bj.is_file():
        try:
            files.read_json(bj)
            os.replace(bj, results_dir / "benchmarks.json")
        except OSError as exc:
            problems.append(f"{bj}: cannot read ({exc.strerror or exc}); benchmarks.json not replaced")
        except ValueError as exc:
            problems.append(f"{bj}: not valid JSON ({exc}); benchmarks.json not replaced")
    return moved, problems


def failed_benchmarks(results_dir: Path, machine: str, sha: str) -> list[str]:
    """Labels of the benchmark cases stored as failed (``null``) for one commit."""
    import itertools

    from harness.store.asvfile import clean_param as _clean
    from harness.store.asvfile import read_results_file as _load_results_file

    out = []
    for path in sorted((results_dir / machine).glob(f"{sha[:8]}-*.json")):
        try:
            res = _load_results_file(path)
        except Exception:
            continue
        # res is harness.results._ResultsFile (format-2 rows, one per benchmark).
        col = {c: i for i, c in enumerate(res.columns)}
        for name in sorted(res.results):
            row = res.results[name]
            params = (row[col["params"]] if "params" in col and col["params"] < len(row) else None) or []
            values = row[col["result"]] if "result" in col and col["result"] < len(row) else None
            combos = list(itertools.product(*params)) if params else [()]
            values = values if isinstance(values, list) else [values] * len(combos)
            for combo, v in zip(combos, values):
                if v is None:
                    out.append(f"{name}({', '.join(_clean(c) for c in combo)})" if combo else name)
    return out


def write_asv_config(root: Path, results_dir: Path, dest: Path | None = None) -> Path:
    """A copy of the repository's asv.conf.json with absolute paths and our
    results folder, in ``dest`` (default ``.kernelwatch/asv.conf.json``; asv
    changes into the config's folder). Written to a temporary file and renamed,
    so a concurrent reader never sees half of it; each run passes its own
    ``dest``, so a concurrent ``check`` cannot repoint a run's results."""
    import re

    src = root / "asv.conf.json"
    try:
        conf = json.loads(re.sub(r"^\s*//.*$", "", src.read_text(), flags=re.M))
    except (OSError, ValueError) as exc:
        raise RunError(f"{src}: cannot read asv configuration: {exc}") from None
    conf.update(
        {
            "repo": str(root),
            "benchmark_dir": str(root / conf.get("benchmark_dir", "benchmarks")),
            "env_dir": str(root / ".asv" / "env"),
            "results_dir": str(results_dir),
            "html_dir": str(root / ".asv" / "html"),
            "plugins": [".harness.measure.asv_env"],
        }
    )
    path = Path(dest) if dest is not None else root / STATE_DIR / "asv.conf.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(conf, indent=2))
    os.replace(tmp, path)
    return path


def run_commits(
    range_spec: str | None = None,
    *,
    quick: bool = False,
    results_dir: str | os.PathLike | None = None,
    repo: str | os.PathLike = ".",
    bench_filter: str | None = None,
    show_progress: bool = True,
    log=print,
    lock_wait_s: float | None = None,
    rounds: int = 1,
    calibrate: bool = True,
) -> RunSummary:
    """Measure each unmeasured commit of ``range_spec`` on this machine.

    ``rounds`` is asv's ``rounds`` attribute for every case (``asv run -a
    rounds=N``): each case runs in N processes spread over the commit's run
    (asv runs round N of every case, then round N-1, ...) and asv's value is the
    median of all their samples. More rounds average out the process-to-process
    spread of a shared CPU (``docs/performance.md``: A/A p50 difference 4.3% with
    1 round, 1.2% with 4 on the 2-vCPU VM); they cannot average out a slow phase
    of the host that lasts the whole run.

    ``calibrate=False`` never calibrates: without a usable stored calibration
    the run says so and the figures against measured ceilings are withheld
    (a lease calibrates in its own capped phase, not inside bench-head's budget).

    Holds the results folder's lock for the whole run (:func:`results_lock`,
    waiting up to ``lock_wait_s``); quarantines this machine's unreadable
    results files first (their commits are measured again); measures each
    commit into a scratch folder and moves its files into place when whole.

    Raises
    ------
    RunError
        Not a repository, a bad range (naming the ref that does not exist), an
        unreadable ``asv.conf.json``; :class:`LockBusy` when another run holds
        the folder past ``lock_wait_s``.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise RunError(f"rounds must be a positive integer, got {rounds!r}")
    try:  # a bad $KERNELWATCH_PHASE_LIMIT_S fails now, not after calibrating
        procs.phase_limit("measure")
    except procs.LimitError as exc:
        raise RunError(str(exc)) from None
    if bench_filter:
        try:  # asv would fail on it only after calibrating, per commit, in a log
            re.compile(bench_filter)
        except re.error as exc:
            raise RunError(f"--bench {bench_filter!r} is not a regular expression: {exc}") from None
    ws = Workspace.open(repo, "run")
    root = ws.root
    results = Path(results_dir) if results_dir else root / ("results-quick" if quick else "results")
    results = results.resolve()
    commits = resolve_commits(root, range_spec)
    results.mkdir(parents=True, exist_ok=True)
    with (
        results_lock(results, what=f"kernelwatch run {range_spec or ''}".strip(), wait_s=lock_wait_s, log=log),
        cutoff.sigterm_raises(),
    ):
        return _run_locked(
            ws,
            results,
            commits,
            quick=quick,
            bench_filter=bench_filter,
            show_progress=show_progress,
            log=log,
            rounds=rounds,
            calibrate=calibrate,
        )


def _run_locked(
    ws: Workspace,
    results: Path,
    commits: list[str],
    *,
    quick: bool,
    bench_filter: str | None,
    show_progress: bool,
    log,
    rounds: int = 1,
    calibrate: bool = True,
) -> RunSummary:
    root = ws.root
    ident = ws.identify()
    machine, launch = ws.machine, ws.launch
    summary = RunSummary(machine=machine, commits=commits)
    # Left by a run killed outright (we hold the lock: nobody else is using it):
    # its records are kept, the rest removed.
    summary.warnings += cutoff.salvage_stale_scratch(results, log=log)
    summary.warnings += quarantine_bad_results(results, machine, log=log)
    partial = cutoff.records_without_results(results, machine, measured_commits(results, machine))
    if partial:
        msg = (
            f"records without asv results (commits cut off before asv stored them) on {machine}: "
            + ", ".join(f"{c[:8]} ({n} records)" for c, n in partial.items())
            + "; kept, and a commit in this range is measured again"
        )
        log(f"warning: {msg}")
        summary.warnings.append(msg)

    summary.warnings += _ensure_calibration(results, machine, ident, quick=quick, allowed=calibrate, log=log)

    done = measured_commits(results, machine)
    todo = [c for c in commits if c not in done]
    summary.skipped = [c for c in commits if c in done]
    if summary.skipped:
        log(f"{len(summary.skipped)} of {len(commits)} commits already measured on {machine}: skipped")

    progress = None
    if show_progress and todo:
        from rich.markup import escape
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            transient=False,
        )
        progress.start()
        task = progress.add_task(f"benchmarking on {escape(printable(machine))}", total=len(todo))
    try:
        for sha in todo:
            if progress:
                progress.update(task, description=f"benchmarking {sha[:8]} on {escape(printable(machine))}")
            if not (show_progress and sys.stderr.isatty()):
                # A log or CI gets one line per commit (rich draws nothing off a terminal).
                log(f"benchmarking {sha[:8]} on {printable(machine)} ({todo.index(sha) + 1}/{len(todo)})")
            _measure_one(
                root,
                results,
                machine,
                sha,
                quick=quick,
                launch=launch,
                bench_filter=bench_filter,
                summary=summary,
                log=log,
                rounds=rounds,
            )
            if progress:
                progress.advance(task)
    finally:
        if progress:
            progress.stop()
    for sha, why in summary.failed.items():
        log(f"{sha[:8]}: {why}")
    return summary


def _ensure_calibration(results: Path, machine: str, ident, *, quick: bool, allowed: bool, log) -> list[str]:
    """Calibrate (within :data:`calibrate.DEFAULT_TIME_CAP_S`) when ``machine`` has no usable
    calibration and ``allowed``; say what could not be calibrated. Returns warnings."""
    threads = devices.cpu_timing_threads() if ident.kind == "cpu" else calibrate.ANY_THREADS
    if calibrate.load_latest(results, machine, cpu_threads=threads) is not None:
        return []
    if not allowed:
        msg = (
            f"no usable calibration of {machine} in {results} and --no-calibrate: the figures against "
            "measured ceilings (mfu_measured, bw_util_measured) are withheld; run kernelwatch calibrate"
        )
        log(f"warning: {msg}")
        return [msg]
    log(
        f"calibrating {machine} (measured ceilings: copy bandwidth, matmul FLOP/s; cap {calibrate.DEFAULT_TIME_CAP_S:g} s)"
    )
    t0 = time.monotonic()
    cal = calibrate.measure(
        ident,
        quick=quick,
        time_cap_s=calibrate.DEFAULT_TIME_CAP_S,
        # a line per figure, with the seconds so far: never silent for the cap's 90 s
        progress=lambda msg: log(f"  calibrate ({time.monotonic() - t0:.0f} s): {msg}"),
    )
    calibrate.save(cal, results)
    figs = [(k, cal.get(k) or {}) for k in calibrate.BANDWIDTH_FIGURES]
    figs += [(f"matmul {d}", m) for d, m in cal["matmul"].items()]
    bad = [f"{k} ({f.get('status')})" for k, f in figs if f.get("status") != metrics.STATUS_OK]
    shaky = [k for k, f in figs if f.get("status") == metrics.STATUS_OK and f.get("stable") is False]
    out = []
    if shaky:
        # kept, not withheld: the pages badge them "unstable" and every figure against
        # them "doubtful ceiling"; the run used to say nothing (newcomer trial, 2026-12-03)
        out.append(
            f"calibration of {machine}: {', '.join(shaky)} unstable (their best runs did not agree); kept, and "
            "the figures against them are marked 'doubtful ceiling'; run kernelwatch calibrate on a quiet machine"
        )
        log(f"warning: {out[-1]}")
    if not bad:
        return out
    busy = any(f.get("status") == metrics.STATUS_CONTENDED for _, f in figs)
    msg = (
        ("could not calibrate: contended (the CPU was busy; not repeated); " if busy else "")
        + f"could not calibrate {', '.join(bad)} on {machine}: the figures that need them are withheld"
        + ("; run kernelwatch calibrate on a quiet machine" if busy else "")
    )
    log(f"warning: {msg}")
    return out + [msg]


def asv_run_options(bench_filter: str | None, rounds: int) -> list[str]:
    """The ``asv run`` options of one commit's measurement: ``--bench`` and, for
    more than one round, ``-a rounds=N`` (asv's attribute override)."""
    out = ["--bench", bench_filter] if bench_filter else []
    if rounds > 1:
        out += ["-a", f"rounds={rounds}"]
    return out


#: asv's line for a benchmark that finished (``[ 50.00%] ··· suite.x.track_time   ok``)
#: or one that started a round (``[ 25.00%] ··· Running (suite.x.track_time--).``).
_ASV_DONE = re.compile(
    r"^\[\s*(?P<pct>\d+(?:\.\d+)?)%\]\s*·+\s+(?P<name>[\w.]+)\s+(?P<status>ok|failed|\d+/\d+ failed|skipped|n/a)\s*$"
)
_ASV_RUNNING = re.compile(r"^\[\s*(?P<pct>\d+(?:\.\d+)?)%\]\s*·+\s+Running \((?P<name>[\w.]+)--\)")


class CaseProgress:
    """One progress line per asv benchmark of a commit's ``asv run``, with the
    elapsed time (issue 25: a commit of the suite took minutes with nothing
    printed): ``on_line`` for :func:`harness.core.procs.run_bounded`.

    ``log`` gets ``"  <sha8> [ 50%] suite.x.track_time: ok (83 s)"`` for each
    benchmark asv finished, ``"... running (41 s)"`` for each round it started
    (``rounds`` > 1); ``clock`` is seconds (injectable). Other lines are ignored.
    """

    def __init__(self, sha: str, log, clock=time.monotonic):
        self.sha, self.log, self.clock = sha[:8], log, clock
        self.t0 = clock()
        self.lines = 0

    def __call__(self, line: str) -> None:
        m = _ASV_DONE.match(line)
        what = None
        if m:
            what = m["status"]
        else:
            m = _ASV_RUNNING.match(line)
            if m:
                what = "running"
        if m is None:
            return
        self.lines += 1
        secs = self.clock() - self.t0
        self.log(f"  {self.sha} [{float(m['pct']):3.0f}%] {printable(m['name'])}: {what} ({secs:.0f} s)")


def _abandon(scratch: Path, results: Path, conf: Path) -> int:
    """A commit's asv run that did not finish: move the records of the cases that
    did into ``results`` (:func:`harness.measure.cutoff.keep_records`), remove the
    scratch folder and the run's configuration. Returns how many records were kept."""
    kept = sum(cutoff.keep_records(scratch, results).values())
    shutil.rmtree(scratch, ignore_errors=True)
    conf.unlink(missing_ok=True)
    return kept


def _measure_one(
    root: Path,
    results: Path,
    machine: str,
    sha: str,
    *,
    quick: bool,
    launch: str,
    bench_filter: str | None,
    summary: RunSummary,
    log=print,
    rounds: int = 1,
) -> None:
    """``asv run`` of one commit into a scratch folder, then its whole files into ``results``."""
    scratch = new_scratch(results, machine, sha[:12])
    # Its own configuration (in the repository's .kernelwatch/, where the plugin path resolves):
    # a concurrent check rewriting the shared one cannot repoint this run's results.
    conf = write_asv_config(root, scratch, dest=root / STATE_DIR / f"asv-run-{os.getpid()}.conf.json")
    env = dict(os.environ)
    env.update(
        {
            "KERNELWATCH_RESULTS_DIR": str(scratch),
            "KERNELWATCH_MACHINE": machine,
            "KERNELWATCH_QUICK": "1" if quick else "0",
        }
    )
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(sha + "\n")
        hashfile = fh.name
    cmd = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "--config",
        str(conf),
        "--machine",
        machine,
        "--launch-method",
        launch,
        "--record-samples",
        "--show-stderr",
        f"HASHFILE:{hashfile}",
    ]
    cmd += asv_run_options(bench_filter, rounds)
    log_path = root / STATE_DIR / "logs" / f"{sha[:8]}-{machine}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # Bounded (issue 29): at the phase's limit every process of this asv run goes.
        proc = procs.run_bounded(
            cmd, phase=f"run: measure {sha[:12]}", kind="measure", env=env, cwd=root, on_line=CaseProgress(sha, log)
        )
    except procs.PhaseTimeout as exc:
        kept = _abandon(scratch, results, conf)
        log_path.write_text(exc.output + f"\n--- stopped ---\n{exc}\n")
        summary.failed[sha] = f"{exc}; no asv result, {kept} records of finished cases kept; see {log_path}"
        log(f"  {sha[:12]}: {exc}")
        return
    except BaseException:  # SIGTERM (cutoff.sigterm_raises), Ctrl-C: keep what finished
        n = _abandon(scratch, results, conf)
        log(f"{sha[:8]}: interrupted; kept {n} records of the cases that finished in {results} (no asv result)")
        raise
    finally:
        os.unlink(hashfile)
    log_path.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    try:
        if sha in measured_commits(scratch, machine):
            _, problems = promote_scratch(scratch, results)
            for msg in problems:
                log(f"warning: {msg}")
            summary.warnings += problems
        else:
            problems = []
            kept = cutoff.keep_records(scratch, results)
            if kept:
                log(f"{sha[:8]}: asv stored no result; kept {sum(kept.values())} records of the cases that finished")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        conf.unlink(missing_ok=True)
    if sha in measured_commits(results, machine):
        summary.measured.append(sha)
        broken = failed_benchmarks(results, machine, sha)
        if broken:
            summary.failed[sha] = (
                f"{len(broken)} failed: {'; '.join(broken[:5])}"
                + (f" and {len(broken) - 5} more" if len(broken) > 5 else "")
                + f"; see {log_path}"
            )
        elif proc.returncode != 0:
            summary.failed[sha] = f"asv exited {proc.returncode}; see {log_path}"
    else:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        why = "; ".join(problems) if problems else tail[0]
        summary.failed[sha] = f"asv stored no result (exit {proc.returncode}): {why}; see {log_path}"
