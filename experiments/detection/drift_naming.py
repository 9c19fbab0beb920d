"""Which commit should a creeping drift be named at: its first commit, or the
commit of its largest single move?

Monte Carlo on synthetic series (issue 23): a flat level with lognormal noise
``sigma``, then a drift of ``L`` consecutive equal moves of ``step`` each (the
shape ``synth_asv.py`` injects as ``drift_part``: three 4% moves), then the new
level. Each series goes through the whole analysis (:func:`harness.analysis.analyze`,
one series per report); for every ``drift_regression`` found, the script checks
whether each naming rule lands within ``+-window`` commits of the drift's span
(the scorer's rule, ``score_detections.py``). Prints one row per noise level:
drifts found, hit rate of each rule, and how often the two differ.

    python experiments/detection/drift_naming.py [--reps 300] [--window 1]

The result is written into docs/analysis.md ("Naming a creeping drift").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import harness.analysis as A  # noqa: E402
from harness.analysis.findings import _largest_move  # noqa: E402


def _series(values, commits):
    pts = [A.Point(c, float(v)) for c, v in zip(commits, values)]
    return A.Series(A.SeriesKey("m", "bench", (("n", "1"),)), pts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--n", type=int, default=100, help="points per series (default 100)")
    ap.add_argument("--moves", type=int, default=3, help="moves in the drift (default 3)")
    ap.add_argument("--step", type=float, default=0.04, help="size of each move (default 0.04)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    commits = [f"{i:040x}" for i in range(a.n)]
    cfg = A.AnalysisConfig()
    print(
        f"{a.reps} series of {a.n} points, a drift of {a.moves} x {a.step:.0%} at a random place, window +-{a.window}"
    )
    print(
        "noise | how the drift was found | drifts found | named at first commit: hit | at largest move: hit | rules differ"
    )
    for sigma in (0.01, 0.02, 0.03):
        tally = {"scan": [0, 0, 0, 0], "merged steps": [0, 0, 0, 0]}
        for _ in range(a.reps):
            s0 = int(rng.integers(30, a.n - 30))
            lvl = np.ones(a.n)
            for j in range(a.moves):
                lvl[s0 + j :] *= 1 + a.step
            y = lvl * np.exp(sigma * rng.standard_normal(a.n))
            series = _series(y, commits)
            an = A.analyze_series(series, cfg)
            lo, hi = s0 - a.window, s0 + a.moves - 1 + a.window
            for c in an.candidates:
                if c.kind != "drift" or c.d <= 0 or c.p_value > cfg.fdr_q:
                    continue
                t = tally["merged steps" if c.moves else "scan"]
                k = (
                    _largest_move(c)
                    if c.moves
                    else max(range(max(c.start, 1), c.index + 1), key=lambda j: y[j] - y[j - 1])
                )
                t[0] += 1
                t[1] += lo <= c.start <= hi
                t[2] += lo <= k <= hi
                t[3] += k != c.start
        for how, (found, hit_first, hit_big, differ) in tally.items():
            print(
                f"{sigma:.0%} | {how} | {found} | {hit_first / max(found, 1):.3f} | {hit_big / max(found, 1):.3f} | "
                f"{differ / max(found, 1):.3f}"
            )


if __name__ == "__main__":
    main()
