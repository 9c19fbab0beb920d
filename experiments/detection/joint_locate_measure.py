"""Measure joint localisation of steps across series (a pooled change point per group) on detect_bench's data.

The idea: steps that several series show within a few commits of each other
are one change, so their commit is better estimated from the pooled
likelihood of all of them than from each series alone. This script measures
it as a post-processing of ``harness.analysis.analyze``'s report, without
changing the analysis: step findings (``regression``, ``improvement``,
``divergent_change``, ``pending``) are clustered by commit (single linkage,
at most ``--gap`` commits apart); for a cluster of two or more, each
candidate commit ``k`` in the cluster's span +-2 gets the pooled statistic
``sum_s (mean(y_s[k:k+50]) - mean(y_s[k-50:k]))^2 n1 n2 / (n1 + n2) / sigma_s^2``
(twice the log-likelihood gain of a split at ``k``, summed over the series);
the whole cluster moves to the best ``k`` when a common commit costs at most
``--guard`` in twice the log-likelihood against each series' own best.
Scored as ``score_detections.py --window W`` does (mapped as
``kw_to_list.py --pending``). Skips (exit 0 with a note) without
``../shared/tools``.

    python experiments/detection/joint_locate_measure.py [--configs P9b] [--seeds 1,2,3] [--guard 2,6] [--window 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from detect_compare import CONFIGS, TOOLS, detections  # noqa: E402

STEPS = ("regression", "improvement", "divergent_change", "pending")


def score(truth: dict, dets: list[dict], window: int) -> tuple[int, int, int, int]:
    """``(found, positives, detections, false)`` as score_detections.py counts them."""
    pos = {c: i for i, c in enumerate(truth["commits"])}
    positives, drifts = [], {}
    for e in truth["events"]:
        key = (e["machine"], e["benchmark"], e.get("param_idx"))
        if e["kind"] in ("regression", "divergent_slower"):
            positives.append((key, e["index"], e["index"]))
        elif e["kind"] == "drift_part":
            lo, hi = drifts.get(key, (e["index"], e["index"]))
            drifts[key] = (min(lo, e["index"]), max(hi, e["index"]))
    positives += [(k, lo, hi) for k, (lo, hi) in drifts.items()]
    found = [False] * len(positives)
    fp = 0
    for d in dets:
        i = pos[d["commit"]]
        key = (d["machine"], d["benchmark"], d["param_idx"])
        hit = False
        for j, (pk, lo, hi) in enumerate(positives):
            if pk == key and lo - window <= i <= hi + window:
                found[j] = hit = True
        fp += not hit
    return sum(found), len(positives), len(dets), fp


def relocate(report: dict, ys: dict[str, np.ndarray], commits: list[str], gap: int, guard: float) -> int:
    """Move clustered step findings of ``report`` to their pooled commit (in
    place); returns how many moved. ``ys``: log values per series label, in
    commit order (NaN where failed)."""
    cpos = {c: i for i, c in enumerate(commits)}
    n = len(commits)
    fs = sorted(
        (
            (f, cpos[f["commit_range"][1]])
            for f in report["findings"]
            if f["status"] in STEPS and f["commit_range"][1] in cpos and f["series"] in ys
        ),
        key=lambda x: x[1],
    )
    clusters, cur = [], []
    for x in fs:
        if cur and x[1] - cur[-1][1] > gap:
            clusters.append(cur)
            cur = []
        cur.append(x)
    if cur:
        clusters.append(cur)
    moved = 0
    for cl in clusters:
        if len(cl) < 2:
            continue
        ks = list(range(max(min(p for _f, p in cl) - 2, 3), min(max(p for _f, p in cl) + 2, n - 3) + 1))
        stats = []
        for f, _p in cl:
            y = ys[f["series"]]
            sig = f["extra"].get("noise_rel") or float(np.nanstd(np.diff(y))) / np.sqrt(2)
            row = []
            for k in ks:
                a, b = y[max(0, k - 50) : k], y[k : k + 50]
                a, b = a[~np.isnan(a)], b[~np.isnan(b)]
                row.append((b.mean() - a.mean()) ** 2 * a.size * b.size / (a.size + b.size) / sig**2)
            stats.append(np.array(row))
        pooled = np.sum(stats, axis=0)
        kstar = ks[int(np.argmax(pooled))]
        if sum(s.max() for s in stats) - pooled.max() <= guard:
            for f, p in cl:
                if p != kstar:
                    f["commit_range"] = [commits[kstar - 1], commits[kstar]]
                    moved += 1
    return moved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="P9b")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--guard", default="2,6")
    ap.add_argument("--gap", type=int, default=2)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--work", default=None)
    a = ap.parse_args(argv)
    if not (TOOLS / "synth_asv.py").is_file():
        print(f"note: {TOOLS} absent; nothing measured")
        return 0
    from harness import analysis as A
    from harness.store.dataset import build_inputs, load_input

    work = Path(a.work or tempfile.mkdtemp(prefix="joint_locate."))
    guards = [float(g) for g in a.guard.split(",")]
    tot: dict[tuple, list[int]] = {}
    for cfg in a.configs.split(","):
        for seed in a.seeds.split(","):
            out = work / f"{cfg}_s{seed}"
            if not (out / "truth.json").is_file():
                subprocess.run(
                    [sys.executable, str(TOOLS / "synth_asv.py"), str(out), *CONFIGS[cfg].split(), "--seed", seed],
                    check=True,
                    capture_output=True,
                )
            truth = json.loads((out / "truth.json").read_text())
            inp = build_inputs(load_input(out / "results", out / "repo"))
            ys = {}
            for s in inp.series:
                v = np.array([p.value if p.value else np.nan for p in s.points], dtype=float)
                if v.size == len(truth["commits"]):
                    ys[s.key.label()] = np.log(v)
            rows = []
            for g in [None] + guards:
                rep = A.analyze(
                    inp.series, A.AnalysisConfig(), machine_commits=inp.machine_commits, commit_order=inp.commit_order
                ).as_dict()
                moved = 0 if g is None else relocate(rep, ys, truth["commits"], a.gap, g)
                r = score(truth, detections(rep, out / "results"), a.window)
                name = "per series" if g is None else f"joint, guard {g:g}"
                rows.append(f"{name}: {r[0]}/{r[1]} found, {r[3]} false of {r[2]} ({moved} moved)")
                t = tot.setdefault((cfg, name), [0, 0, 0, 0])
                for i in range(4):
                    t[i] += r[i]
            print(f"{cfg} s{seed}: " + "; ".join(rows), flush=True)
    print("\n| config | localisation | recall | precision |\n|---|---|---|---|")
    for (cfg, name), (f, p, n, fp) in tot.items():
        print(f"| {cfg} | {name} | {f}/{p} = {f / max(p, 1):.3f} | {n - fp}/{n} = {(n - fp) / max(n, 1):.3f} |")
    print(f"(--window {a.window}, seeds {a.seeds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
