"""Which commits changed the benchmark suite (reads ``asv.conf.json`` and the git history).

Input for the analysis' "benchmark changed" label (issue 12, rule 5b): a
commit whose diff touches asv's ``benchmark_dir``, ``asv.conf.json`` or
another path the suite reads. The analysis itself does no I/O; it gets the
result of :func:`benchmark_change_notes` as plain data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from harness.core.model import EventStatus


def suite_paths(results_dir: str | Path, repo: str | Path) -> list[str]:
    """Paths (relative to the repository root) whose change means the benchmark
    suite changed: asv's ``benchmark_dir`` (default ``benchmarks``) and
    ``asv.conf.json``, read from the ``asv.conf.json`` beside the results
    directory or at the repository root (asv's JSON-with-comments loader)."""
    from asv.util import load_json

    root = Path(repo)
    bench_dir = "benchmarks"
    for conf in (Path(results_dir).parent / "asv.conf.json", root / "asv.conf.json"):
        if conf.is_file():
            try:
                bench_dir = str(load_json(str(conf), js_comments=True).get("benchmark_dir") or bench_dir)
            except Exception:  # an unreadable config leaves the default; the load step reports bad files
                pass
            break
    return [bench_dir.rstrip("/"), "asv.conf.json"]


def benchmark_change_notes(repo: str | Path, commits: Sequence[str], paths: Sequence[str]) -> tuple[dict, str | None]:
    """``{commit: [{kind: "benchmark_changed", text, evidence}]}`` for every
    commit in ``commits`` whose diff against its parent touches ``paths``
    (GitPython: one ``git log --name-only -- paths``). Returns the notes and
    an error message (``None`` when the repository was read)."""
    try:
        import git

        r = git.Repo(repo, search_parent_directories=True)
        out = r.git.log("--all", "--format=@@%H", "--name-only", "--", *paths)
    except Exception as exc:  # not a repository, git missing: the analysis runs without the label
        return {}, f"{repo}: could not read the git history for benchmark changes ({type(exc).__name__}: {exc})"
    wanted = set(commits)
    notes: dict[str, list[dict]] = {}
    cur = None
    files: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("@@"):
            cur = line[2:].strip()
            files[cur] = []
        elif line.strip() and cur:
            files[cur].append(line.strip())
    for c, fs in files.items():
        if c in wanted and fs:
            shown = ", ".join(fs[:4]) + (f" and {len(fs) - 4} more" if len(fs) > 4 else "")
            notes[c] = [
                {
                    "kind": EventStatus.BENCHMARK_CHANGED,
                    "text": f"benchmark changed: this commit touches the suite ({shown})",
                    "evidence": {"files": fs, "paths": list(paths)},
                }
            ]
    return notes, None
