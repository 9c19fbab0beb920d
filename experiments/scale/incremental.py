#!/usr/bin/env python
"""``kernelwatch publish`` after one new commit, through the results cache, against a full publish (issue 28).

On one ``vs_asv.py`` history (``../shared/tools/synth_asv.py``, generated once
into ``--data``): a working copy of its results without the newest commit's
files is published once through a fresh cache (``--cache``, warming it); then
the newest commit's files are added (on every machine, or on the first
``--new-on`` machines) and the same history is published three ways, each a
child process measured as in ``vs_asv.py`` (CPU of all its processes, peak of
the largest):

- ``full``: ``--cache off``, what every publish cost before the cache;
- ``cold``: through an empty cache (a first publish: it writes every entry);
- ``after one commit``: through the warmed cache (only the new files' JSON is
  read and checked).

The three sites must be byte-identical (every file compared); the script
prints the CPU and memory ratios against ``full``. Issue 28's goal for an
incremental publish is <= 0.1x a full one's time, output identical.

Usage::

    python experiments/scale/incremental.py --data /tmp/h28-1k [--new-on 1] [--json OUT]

Exits 0 when the sites agree and the goal is met, 1 when the goal is missed,
3 when the sites differ, 2 when the history cannot be made.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_asv import ROOT, SYNTH, _measure, generate  # noqa: E402

GOAL = 0.1


def _same_tree(a: Path, b: Path) -> list[str]:
    """Files that differ or exist on one side only (relative paths)."""
    diff: list[str] = []
    cmp = filecmp.dircmp(a, b)
    stack = [(cmp, "")]
    while stack:
        c, rel = stack.pop()
        diff += [f"{rel}{n}" for n in c.left_only + c.right_only + c.funny_files]
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        diff += [f"{rel}{n}" for n in mismatch + errors]
        stack += [(sub, f"{rel}{name}/") for name, sub in c.subdirs.items()]
    return sorted(diff)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="history folder (made by synth_asv.py if absent)")
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--machines", type=int, default=2)
    ap.add_argument("--benchmarks", type=int, default=84)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--new-on", type=int, default=0, help="machines that get the new commit (default: every one)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if not SYNTH.exists():
        print(f"no {SYNTH}: cannot make the history", file=sys.stderr)
        return 2
    generate(a.data, a.commits, a.machines, a.benchmarks, a.seed)
    repo = a.data / "repo"
    newest = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    head = newest.stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="kw-incr-"))
    try:
        results = work / "results"
        shutil.copytree(a.data / "results", results)
        machines = sorted(p for p in results.iterdir() if (p / "machine.json").exists())
        held = work / "held"
        moved = 0
        for i, m in enumerate(machines):
            if a.new_on and i >= a.new_on:
                continue
            for f in m.glob(f"{head[:8]}-*.json"):
                (held / m.name).mkdir(parents=True, exist_ok=True)
                f.rename(held / m.name / f.name)
                moved += 1
        if not moved:
            print(f"no results file of the newest commit {head[:8]} found", file=sys.stderr)
            return 2
        kw = [sys.executable, "-m", "harness.cli", "publish", "--results", str(results), "--repo", str(repo)]
        warm = work / "cache-warm"
        before = _measure([*kw, "--out", str(work / "site-before"), "--cache", str(warm)], ROOT)
        for m in held.iterdir():
            for f in m.iterdir():
                f.rename(results / m.name / f.name)
        runs = {
            "full (--cache off)": _measure([*kw, "--out", str(work / "site-full"), "--cache", "off"], ROOT),
            "cold cache (a first publish)": _measure(
                [*kw, "--out", str(work / "site-cold"), "--cache", str(work / "cache-cold")], ROOT
            ),
            "after one commit (warm cache)": _measure(
                [*kw, "--out", str(work / "site-incr"), "--cache", str(warm)], ROOT
            ),
        }
        diffs = _same_tree(work / "site-full", work / "site-incr") + _same_tree(work / "site-full", work / "site-cold")
        full = runs["full (--cache off)"]
        print(f"history {a.data}: {len(machines)} machines, newest commit {head[:8]} added as {moved} file(s)")
        print(f"publish before it (warming the cache): {before['cpu_s']:.1f} s CPU, {before['peak_mib']:.0f} MiB")
        print("| publish | CPU | peak memory | wall | CPU vs full |")
        print("|---|---|---|---|---|")
        for name, r in runs.items():
            if r["rc"] != 0:
                print(f"{name} failed (exit {r['rc']}): {r['stderr'][-500:]}", file=sys.stderr)
                return 2
            print(
                f"| {name} | {r['cpu_s']:.1f} s | {r['peak_mib']:.0f} MiB | {r['wall_s']:.1f} s | "
                f"{r['cpu_s'] / full['cpu_s']:.2f}x |"
            )
        ratio = runs["after one commit (warm cache)"]["cpu_s"] / full["cpu_s"]
        print(f"sites identical: {'yes' if not diffs else 'NO: ' + ', '.join(diffs[:5])}")
        print(
            f"after one commit: {ratio:.2f}x a full publish's CPU (goal <= {GOAL}x): {'met' if ratio <= GOAL else 'not met'}"
        )
        if a.json:
            out = {"data": str(a.data), "head": head, "files_added": moved, "before": before, "runs": runs}
            out.update(ratio=ratio, identical=not diffs, differing=diffs[:50])
            a.json.write_text(json.dumps(out, indent=1) + "\n")
        if diffs:
            return 3
        return 0 if ratio <= GOAL else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
