"""Speed of ``harness.analysis.analyze``: 100 commits x 300 series x 3 machines.

Synthetic series (3% log-normal noise, a 10% step in every 20th series, a null
in every 50th point, a benchmark-version change in every 30th series) go
through the full analysis: change points, drift scan, Benjamini-Hochberg,
false-alarm budget and the cross-machine divergence rule. Imports (ruptures
pulls in scipy) are done before the clock starts. Goal: <= 2 s on 2 cores.

    python scripts/bench_analysis.py [--commits 100] [--series 300] [--machines 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import analysis as A  # noqa: E402


def make_series(commits: int, series: int, machines: int, seed: int = 0) -> tuple[list[A.Series], list[str]]:
    rng = np.random.default_rng(seed)
    hashes = [f"{i:040x}" for i in range(commits)]
    out = []
    for m in range(machines):
        for s in range(series):
            level = np.ones(commits)
            if s % 20 == 0:
                level[commits // 2:] *= 1.1
            vals = level * np.exp(0.03 * rng.standard_normal(commits))
            version = ["v1"] * commits
            if s % 30 == 0:
                version = ["v1"] * (commits // 3) + ["v2"] * (commits - commits // 3)
            pts = [A.Point(hashes[i], None if (i + s) % 50 == 0 else float(vals[i]),
                           reason="failed" if (i + s) % 50 == 0 else None, version=version[i])
                   for i in range(commits)]
            out.append(A.Series(A.SeriesKey(f"machine{m}", f"bench{s // 10}", (("n", str(s % 10)),)), pts,
                                unit="seconds"))
    return out, hashes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--machines", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    series, hashes = make_series(a.commits, a.series, a.machines)
    A.analyze(series[:3])  # warm imports (ruptures, scipy)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        rep = A.analyze(series, commit_order=hashes)
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(f"analysis of {a.commits} commits x {a.series} series x {a.machines} machines "
          f"({len(series)} series): best {best:.2f} s, median {sorted(times)[len(times) // 2]:.2f} s "
          f"over {a.repeat} runs; goal <= 2 s")
    print(f"findings: {rep.summary['findings_by_status']}; expected false alerts "
          f"{rep.budget['expected_false_alerts']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
