#!/usr/bin/env python
"""After ``kernelwatch run``, does the overview show any utilisation above 100% as a plain number?

Runs ``kernelwatch run`` (``--quick`` by default) on a commit range into a
scratch results folder and site, optionally with busy-loop neighbours
(``experiments/cpu-noise/busy_neighbour.py``), then reads every page of the site and lists
each percentage above 100% printed as bare text (not inside a badge: a guarded
figure is a ``<span class="badge ...">`` carrying its reason), and the guard
badges and health counts of the overview. The load average is printed before
and after, since on a shared machine it is part of the result.

Usage::

    python experiments/cpu-noise/overview_check.py [--range HEAD] [--neighbour 1] [--full] [--keep DIR]
                                     [--results DIR]  # reuse results, only publish and read

Exit code: 0 none found, 1 some found, 2 the run or the site failed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CELL_PCT = re.compile(r"(<[^<>]+>)\s*(\d+(?:\.\d+)?)%\s*<")
BADGE = re.compile(r'<span class="badge (?:bad|warn)"[^>]*>([^<]*)</span>')


def plain_above_100(html: str) -> list[str]:
    """Percentages above 100% that are the bare text of an element other than a badge."""
    return [
        m.group(2) for m in CELL_PCT.finditer(html) if float(m.group(2)) > 100.0 and 'class="badge' not in m.group(1)
    ]


def scan(site: Path) -> dict:
    """Plain percentages above 100% per page, and the overview's badges."""
    found = {}
    for page in sorted(site.rglob("*.html")):
        hits = plain_above_100(page.read_text(encoding="utf-8"))
        if hits:
            found[str(page.relative_to(site))] = hits
    index = (site / "index.html").read_text(encoding="utf-8")
    health = re.search(r'<table class="health".*?</table>', index, re.S)
    return {
        "plain_above_100": found,
        "overview_badges": BADGE.findall(index),
        "health_badges": BADGE.findall(health.group(0)) if health else [],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--range", default="HEAD", help="commits for kernelwatch run (default: HEAD)")
    ap.add_argument("--neighbour", type=int, default=0, help="busy-loop neighbours during the run (default: 0)")
    ap.add_argument("--full", action="store_true", help="the full grid instead of --quick")
    ap.add_argument("--bench", default=None, help="only benchmarks matching this regular expression")
    ap.add_argument("--results", default=None, help="use these results (skip the run), publish and read them")
    ap.add_argument("--keep", default=None, help="scratch folder to keep (default: a temporary one, removed)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from busy_neighbour import loadavg, neighbours

    scratch = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="kw-overview-"))
    scratch.mkdir(parents=True, exist_ok=True)
    site = scratch / "site"
    try:
        print(f"before: {loadavg()}")
        t0 = time.monotonic()
        if a.results:
            cmd = [
                sys.executable,
                "-m",
                "harness.cli",
                "publish",
                "--results",
                a.results,
                "--out",
                str(site),
                "--analysis",
                "off",
            ]
        else:
            cmd = (
                [
                    sys.executable,
                    "-m",
                    "harness.cli",
                    "run",
                    a.range,
                    "--results",
                    str(scratch / "results"),
                    "--out",
                    str(site),
                ]
                + ([] if a.full else ["--quick"])
                + (["--bench", a.bench] if a.bench else [])
            )
        with neighbours(a.neighbour, cpu=0):
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        print(
            f"after: {loadavg()}; {a.neighbour} busy neighbour(s); {' '.join(cmd[2:])}: exit {proc.returncode} "
            f"in {time.monotonic() - t0:.0f} s"
        )
        if not (site / "index.html").exists():
            print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
            return 2
        res = scan(site)
        print(f"guard badges in the health line: {res['health_badges'] or 'none'}")
        print(
            f"badges on the overview: {len(res['overview_badges'])} "
            f"({sum(1 for b in res['overview_badges'] if b.endswith('%'))} utilisations above 100% as badges)"
        )
        n = sum(len(v) for v in res["plain_above_100"].values())
        print(f"plain percentages above 100% on any page: {n}")
        for page, hits in res["plain_above_100"].items():
            print(f"  {page}: {', '.join(h + '%' for h in hits[:10])}")
        return 1 if n else 0
    finally:
        if not a.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
