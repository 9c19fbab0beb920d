"""Choose the change-point detector by measurement (numbers for docs/analysis.md).

Synthetic series (60 commits, log-normal noise) with known change points go
through (a) each detector alone and (b) the whole analysis (significance, FDR)
with that detector. Scenarios: pure noise (Gaussian and Student-t, 3%), one
+50% outlier, a +10% and a +5% step at commit 30, a +10% step 5 commits before
the end. Reported: share of series with any change point / any alert (should
be 0 on noise and outliers), share with the step found exactly at commit 30 or
within one commit, and milliseconds per series. Optionally (``--openblas``)
the number of alerts on the real OpenBLAS results per detector.

    python experiments/detection/compare_detectors.py [--reps 100] [--openblas ../shared/data/asv-openblas/results]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import analysis as A  # noqa: E402

N = 60
SCENARIOS = {
    "noise 3%": lambda r: 0.03 * r.standard_normal(N),
    "t3 noise 3%": lambda r: 0.03 * r.standard_t(3, N) / np.sqrt(3),
    "outlier +50%": lambda r: 0.03 * r.standard_normal(N) + np.log(1.5) * (np.arange(N) == 25),
    "step +10% @30": lambda r: 0.03 * r.standard_normal(N) + np.log(1.10) * (np.arange(N) >= 30),
    "step +5% @30": lambda r: 0.03 * r.standard_normal(N) + np.log(1.05) * (np.arange(N) >= 30),
    "step +10% @55": lambda r: 0.03 * r.standard_normal(N) + np.log(1.10) * (np.arange(N) >= 55),
}


def run(detector: str, reps: int) -> list[dict]:
    cfg = A.AnalysisConfig(detector=detector)
    rows = []
    for name, gen in SCENARIOS.items():
        rng = np.random.default_rng(1234)
        at = 55 if "@55" in name else 30
        raw_any = raw_exact = raw_near = 0
        alert_any = alert_exact = 0
        t_det = 0.0
        for _ in range(reps):
            y = gen(rng)
            sigma = A.robust_noise(y)
            t0 = time.perf_counter()
            cps = A.DETECTORS[detector](y / sigma, cfg)
            t_det += time.perf_counter() - t0
            raw_any += bool(cps)
            raw_exact += at in cps
            raw_near += any(abs(c - at) <= 1 for c in cps)
            commits = [f"{i:040x}" for i in range(N)]
            s = A.Series(A.SeriesKey("m", "b"), [A.Point(c, float(np.exp(v))) for c, v in zip(commits, y)])
            rep = A.analyze([s], cfg)
            alerts = [
                f
                for f in rep.findings
                if f.status in (A.Status.REGRESSION, A.Status.DRIFT_REGRESSION, A.Status.PENDING)
            ]
            alert_any += bool(alerts)
            alert_exact += any(f.commit_after == commits[at] for f in alerts)
        rows.append(
            {
                "detector": detector,
                "scenario": name,
                "raw_any": raw_any / reps,
                "raw_exact": raw_exact / reps,
                "raw_within_1": raw_near / reps,
                "alert_any": alert_any / reps,
                "alert_exact": alert_exact / reps,
                "ms_per_series": 1e3 * t_det / reps,
            }
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--detectors", default="rbf,asv,pelt_l1")
    ap.add_argument("--openblas", default=None, help="asv results directory of the OpenBLAS data")
    a = ap.parse_args(argv)
    print("| detector | scenario | any cp | cp exact | cp +-1 | any alert | alert exact | ms/series |")
    print("|---|---|---|---|---|---|---|---|")
    for det in a.detectors.split(","):
        reps = a.reps if det != "pelt_l1" else max(a.reps // 10, 5)  # pure Python, ~100x slower
        for r in run(det, reps):
            print(
                f"| {r['detector']} | {r['scenario']} | {r['raw_any']:.2f} | {r['raw_exact']:.2f} | "
                f"{r['raw_within_1']:.2f} | {r['alert_any']:.2f} | {r['alert_exact']:.2f} | {r['ms_per_series']:.2f} |"
            )
    if a.openblas:
        from harness.store import results
        from harness.store.dataset import build_inputs

        inp = build_inputs(results.load(a.openblas))
        for det in a.detectors.split(","):
            if det == "pelt_l1":
                continue
            t0 = time.perf_counter()
            rep = A.analyze(
                inp.series,
                A.AnalysisConfig(detector=det),
                machine_commits=inp.machine_commits,
                commit_order=inp.commit_order,
            )
            print(f"OpenBLAS, {det}: {rep.summary['findings_by_status']} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
