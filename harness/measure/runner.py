"""``kernelwatch run``: benchmark commits of this repository on this machine with asv.

For each commit of the range that this machine has not measured yet, run
``asv run`` through the ``kernelwatch`` environment plugin (no environment
build, the commit checked out and imported from asv's build folder), with
samples recorded; the suite writes kernelwatch records beside asv's results.
Then build the site. Commits already measured on this machine are skipped, so
a second run over the same commits only re-publishes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.measure import calibrate
from harness.core import devices

DEFAULT_RANGE_COUNT = 5
STATE_DIR = ".kernelwatch"


class RunError(RuntimeError):
    """A run that cannot start (not a git repository, bad range, asv missing)."""


@dataclass
class RunSummary:
    machine: str
    commits: list[str]
    measured: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    site: Path | None = None


def repo_root(path: str | os.PathLike = ".") -> Path:
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RunError(f"{Path(path).resolve()} is not inside a git repository") from None
    return Path(repo.working_tree_dir)


def resolve_commits(root: Path, range_spec: str | None, count: int = DEFAULT_RANGE_COUNT) -> list[str]:
    """Full hashes of the commits to measure, oldest first.

    ``None`` means the last ``count`` commits of the current branch; ``A..B`` is
    git's range; a single ref is that one commit.
    """
    import git

    repo = git.Repo(root)
    try:
        if range_spec is None:
            shas = repo.git.rev_list(f"--max-count={count}", "HEAD").split()
        elif ".." in range_spec:
            shas = repo.git.rev_list(range_spec).split()
        else:
            shas = [repo.commit(range_spec).hexsha]
    except (git.GitCommandError, ValueError, git.BadName) as exc:
        raise RunError(f"cannot resolve commit range {range_spec!r}: {str(exc).strip().splitlines()[-1]}") from None
    if not shas:
        raise RunError(f"commit range {range_spec!r} is empty")
    return list(reversed(shas))


def measured_commits(results_dir: Path, machine: str | None = None) -> set[str]:
    """Full hashes that already have an asv result file for ``machine`` (any machine when ``None``)."""
    done = set()
    pattern = "*/*.json" if machine is None else f"{machine}/*.json"
    for p in Path(results_dir).glob(pattern):
        if p.name == "machine.json":
            continue
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("commit_hash"), str):
            done.add(data["commit_hash"])
    return done


def failed_benchmarks(results_dir: Path, machine: str, sha: str) -> list[str]:
    """Labels of the benchmark cases stored as failed (``null``) for one commit."""
    import itertools

    from harness.store.asvfile import clean_param as _clean, read_results_file as _load_results_file

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


def write_machine_entry(info: dict) -> Path:
    """Merge ``info`` into ``~/.asv-machine.json`` (other machines kept), as
    ``asv machine`` would, with kernelwatch's GPU identity keys added."""
    path = Path(os.path.expanduser("~/.asv-machine.json"))
    data = {}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = {}
    data[info["machine"]] = info
    data["version"] = 1
    path.write_text(json.dumps(data, indent=4, sort_keys=True))
    return path


def write_asv_config(root: Path, results_dir: Path) -> Path:
    """A copy of the repository's asv.conf.json with absolute paths and our
    results folder, in ``.kernelwatch/`` (asv changes into the config's folder)."""
    import re

    src = root / "asv.conf.json"
    try:
        conf = json.loads(re.sub(r"^\s*//.*$", "", src.read_text(), flags=re.M))
    except (OSError, ValueError) as exc:
        raise RunError(f"{src}: cannot read asv configuration: {exc}") from None
    conf.update({
        "repo": str(root),
        "benchmark_dir": str(root / conf.get("benchmark_dir", "benchmarks")),
        "env_dir": str(root / ".asv" / "env"),
        "results_dir": str(results_dir),
        "html_dir": str(root / ".asv" / "html"),
        "plugins": [".harness.measure.asv_env"],
    })
    state = root / STATE_DIR
    state.mkdir(exist_ok=True)
    path = state / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
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
) -> RunSummary:
    """Measure each unmeasured commit of ``range_spec`` on this machine."""
    root = repo_root(repo)
    results = Path(results_dir) if results_dir else root / ("results-quick" if quick else "results")
    results = results.resolve()
    results.mkdir(parents=True, exist_ok=True)
    commits = resolve_commits(root, range_spec)
    ident = devices.identify()
    machine = ident.machine_name()
    write_machine_entry(devices.asv_machine_info(ident))
    conf = write_asv_config(root, results)
    summary = RunSummary(machine=machine, commits=commits)

    threads = devices.cpu_timing_threads() if ident.kind == "cpu" else calibrate.ANY_THREADS
    if calibrate.load_latest(results, machine, cpu_threads=threads) is None:
        log(f"calibrating {machine} (measured ceilings: copy bandwidth, matmul FLOP/s)")
        cal = calibrate.measure(ident, quick=quick)
        calibrate.save(cal, results)

    done = measured_commits(results, machine)
    todo = [c for c in commits if c not in done]
    summary.skipped = [c for c in commits if c in done]
    if summary.skipped:
        log(f"{len(summary.skipped)} of {len(commits)} commits already measured on {machine}: skipped")

    env = dict(os.environ)
    env.update({
        "KERNELWATCH_RESULTS_DIR": str(results),
        "KERNELWATCH_MACHINE": machine,
        "KERNELWATCH_QUICK": "1" if quick else "0",
    })
    # forkserver imports torch once per commit instead of once per case; it is
    # unsafe once a CUDA context exists, so GPUs keep asv's default (spawn).
    launch = "forkserver" if ident.kind == "cpu" else "spawn"

    progress = None
    if show_progress and todo:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TimeElapsedColumn(), transient=False)
        progress.start()
        task = progress.add_task(f"benchmarking on {machine}", total=len(todo))
    try:
        for sha in todo:
            if progress:
                progress.update(task, description=f"benchmarking {sha[:8]} on {machine}")
            if not (show_progress and sys.stderr.isatty()):
                # A log or CI gets one line per commit (rich draws nothing off a terminal).
                log(f"benchmarking {sha[:8]} on {machine} ({todo.index(sha) + 1}/{len(todo)})")
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
                fh.write(sha + "\n")
                hashfile = fh.name
            cmd = [sys.executable, "-m", "asv", "run", "--config", str(conf), "--machine", machine,
                   "--launch-method", launch, "--record-samples", "--show-stderr", f"HASHFILE:{hashfile}"]
            if bench_filter:
                cmd += ["--bench", bench_filter]
            proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
            os.unlink(hashfile)
            log_path = root / STATE_DIR / "logs" / f"{sha[:8]}-{machine}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
            if sha in measured_commits(results, machine):
                summary.measured.append(sha)
                broken = failed_benchmarks(results, machine, sha)
                if broken:
                    summary.failed[sha] = f"{len(broken)} failed: {'; '.join(broken[:5])}" + (
                        f" and {len(broken) - 5} more" if len(broken) > 5 else "") + f"; see {log_path}"
                elif proc.returncode != 0:
                    summary.failed[sha] = f"asv exited {proc.returncode}; see {log_path}"
            else:
                tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
                summary.failed[sha] = f"asv stored no result (exit {proc.returncode}): {tail[0]}; see {log_path}"
            if progress:
                progress.advance(task)
    finally:
        if progress:
            progress.stop()
    for sha, why in summary.failed.items():
        log(f"{sha[:8]}: {why}")
    return summary
