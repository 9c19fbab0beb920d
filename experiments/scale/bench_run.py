#!/usr/bin/env python
"""How long does ``kernelwatch run`` take for 5 commits on this machine?

Copies this repository's tracked files into a temporary git repository with 5
commits (the copy as committed, then 4 small commits), then times:

1. ``kernelwatch run --quick`` over the 5 commits   (goal on 2 CPU cores: <= 120 s)
2. ``kernelwatch run`` over the 5 commits           (goal on 2 CPU cores: <= 600 s)
3. the same ``kernelwatch run`` again               (only re-publishes)

Usage: python experiments/scale/bench_run.py [--skip-full]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def git(cwd, *args):
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="kw",
        GIT_AUTHOR_EMAIL="kw@example.invalid",
        GIT_COMMITTER_NAME="kw",
        GIT_COMMITTER_EMAIL="kw@example.invalid",
    )
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def make_repo(dst: Path, commits: int = 5) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for f in filter(None, files):
        src = ROOT / f.decode()
        if src.is_file():
            out = dst / f.decode()
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)
    git(dst, "init", "-q", "-b", "main")
    git(dst, "add", "-A")
    git(dst, "commit", "-q", "-m", "snapshot")
    for i in range(1, commits):
        (dst / "CHANGES.txt").write_text(f"change {i}\n")
        git(dst, "add", "CHANGES.txt")
        git(dst, "commit", "-q", "-m", f"change {i}")


def timed(cwd: Path, *args) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(cwd)),
    )
    return time.perf_counter() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-full", action="store_true", help="only the --quick run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        make_repo(repo)
        rows = []
        t, p = timed(repo, "run", "--quick", "--results", str(repo / "rq"), "--out", str(repo / "sq"))
        rows.append(("kernelwatch run --quick (5 commits)", t, p.returncode, 120))
        if not args.skip_full:
            t, p = timed(repo, "run", "--results", str(repo / "rf"), "--out", str(repo / "sf"))
            rows.append(("kernelwatch run (5 commits)", t, p.returncode, 600))
            t, p = timed(repo, "run", "--results", str(repo / "rf"), "--out", str(repo / "sf"))
            rows.append(("kernelwatch run again (re-publish only)", t, p.returncode, None))
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
        for name, secs, rc, goal in rows:
            g = f"goal <= {goal} s: {'met' if secs <= goal else 'MISSED'}" if goal else ""
            print(f"{name:45s} {secs:8.1f} s  exit {rc}  {g}")
        bad = [r for r in rows if r[2] != 0]
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
