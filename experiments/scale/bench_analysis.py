"""Speed of ``harness.analysis.analyze`` on the two sizes of issue 12.

Synthetic series (3% log-normal noise, a 10% step in every 20th series, a null
in every 50th point, a benchmark-version change in every 30th series) go
through the full analysis: change points, drift scan, Benjamini-Hochberg,
events, false-alarm budget and the cross-machine divergence rule. Imports are
done before the clock starts. Goals (2 cores): 100 commits x 300 series x 3
machines <= 2 s; 1,000 commits x 504 series x 2 machines <= 10 s. Prints each
best time and its ratio to the goal.

    python experiments/scale/bench_analysis.py                  # both sizes
    python experiments/scale/bench_analysis.py --commits 100 --series 300 --machines 3 --goal 2 [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import analysis as A  # noqa: E402


def make_series(commits: int, series: int, machines: int, seed: int = 0) -> tuple[list[A.Series], list[str]]:
    rng = np.random.default_rng(seed)
    hashes = [f"{i:040x}" for i in range(commits)]
    out = []
    for m in range(machines):
        for s in range(series):
            level = np.ones(commits)
            if s % 20 == 0:
                level[commits // 2 :] *= 1.1
            vals = level * np.exp(0.03 * rng.standard_normal(commits))
            version = ["v1"] * commits
            if s % 30 == 0:
                version = ["v1"] * (commits // 3) + ["v2"] * (commits - commits // 3)
            pts = [
                A.Point(
                    hashes[i],
                    None if (i + s) % 50 == 0 else float(vals[i]),
                    reason="failed" if (i + s) % 50 == 0 else None,
                    version=version[i],
                )
                for i in range(commits)
            ]
            out.append(
                A.Series(A.SeriesKey(f"machine{m}", f"bench{s // 10}", (("n", str(s % 10)),)), pts, unit="seconds")
            )
    return out, hashes


SIZES = ((100, 300, 3, 2.0), (1000, 504, 2, 10.0))


def bench(commits: int, n_series: int, machines: int, goal: float, repeat: int) -> float:
    series, hashes = make_series(commits, n_series, machines)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rep = A.analyze(series, commit_order=hashes)
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(
        f"analysis of {commits} commits x {n_series} series x {machines} machines ({len(series)} series): "
        f"best {best:.2f} s, median {sorted(times)[len(times) // 2]:.2f} s over {repeat} runs; goal <= {goal:g} s "
        f"(ratio {best / goal:.2f})"
    )
    print(
        f"  findings: {rep.summary['findings_by_status']}; events {rep.summary['events']}; expected false alerts "
        f"{rep.budget['expected_false_alerts']:.3g}"
    )
    return best / goal


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=None, help="one size only (with --series, --machines, --goal)")
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--machines", type=int, default=3)
    ap.add_argument("--goal", type=float, default=2.0, help="seconds (default: 2)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    A.analyze(make_series(20, 3, 1)[0])  # warm imports (scipy)
    sizes = ((a.commits, a.series, a.machines, a.goal),) if a.commits else SIZES
    ratios = [bench(c, s, m, g, a.repeat) for c, s, m, g in sizes]
    return 0 if all(r <= 1.0 for r in ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
