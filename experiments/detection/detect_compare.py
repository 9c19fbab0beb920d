"""Choose the detection core by measurement: every detector through the same analysis, on detect_bench's data.

For each configuration of ``../shared/tools/detect_bench.py`` (P8: new regressions in
the newest 4 commits, 2% noise; P9a/P9b: events mid-history, 1% and 3% noise;
120 commits x 3 machines x 16 benchmarks) and seed, ``synth_asv.py`` writes a
history; the results are loaded once and analysed in-process with each
``AnalysisConfig.detector`` (the rest of the analysis -- spike cleaning,
refinement, tail rule, significance, FDR -- is the same), the slowdown claims
are mapped as ``kw_to_list.py --pending`` does and scored by
``score_detections.py --window W``. Skips (exit 0 with a note) when
``../shared/tools`` is absent. ``otava`` needs ``pip install --no-deps apache-otava``.

    python experiments/detection/detect_compare.py [--detectors binseg,rbf,asv,otava] [--seeds 1,2,3] [--window 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TOOLS = ROOT.parent / "shared" / "tools"
CONFIGS = {
    "P8": "--commits 120 --machines 3 --benchmarks 16 --noise 0.02 --tail 4",
    "P9a": "--commits 120 --machines 3 --benchmarks 16 --noise 0.01",
    "P9b": "--commits 120 --machines 3 --benchmarks 16 --noise 0.03",
}
SLOWER = ("regression", "drift_regression")


def detections(report: dict, results: Path) -> list[dict]:
    """The slowdown claims of a report, as kw_to_list.py --pending maps them."""
    bj = json.loads((results / "benchmarks.json").read_text())
    pidx = {}
    for name, meta in bj.items():
        if isinstance(meta, dict):
            for i, combo in enumerate(itertools.product(*meta.get("params", []))):
                pidx[(name, tuple(str(x).strip("'") for x in combo))] = i
    out, seen = [], set()
    me = report["config"]["min_effect"]
    for f in report["findings"]:
        st, ch = f["status"], f["magnitude"]["change"]
        ok = (
            st in SLOWER
            or (st == "pending" and ch is not None and ch > 0)
            or (st == "divergent_change" and (f["extra"].get("change_worse_machine") or 0) >= me)
        )
        if not ok:
            continue
        k = f["key"]
        d = {
            "machine": k["machine"],
            "benchmark": k["benchmark"],
            "param_idx": pidx[(k["benchmark"], tuple(str(v).strip("'") for _n, v in k["params"]))],
            "commit": f["commit_range"][1],
        }
        t = tuple(d.values())
        if t not in seen:
            seen.add(t)
            out.append(d)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detectors", default="binseg,rbf,asv,otava")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--configs", default="P8,P9a,P9b")
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--work", default=None)
    a = ap.parse_args(argv)
    if not (TOOLS / "synth_asv.py").is_file():
        print(f"note: {TOOLS} absent; nothing measured")
        return 0
    from harness import analysis as A
    from harness.store.dataset import build_inputs, load_input

    work = Path(a.work or tempfile.mkdtemp(prefix="detect_compare."))
    dets = a.detectors.split(",")
    tot: dict[tuple, list] = {}
    for cfg in a.configs.split(","):
        for seed in a.seeds.split(","):
            out = work / f"{cfg}_s{seed}"
            if not (out / "truth.json").is_file():
                subprocess.run(
                    [sys.executable, str(TOOLS / "synth_asv.py"), str(out), *CONFIGS[cfg].split(), "--seed", seed],
                    check=True,
                    capture_output=True,
                )
            inp = build_inputs(load_input(out / "results", out / "repo"))
            for det in dets:
                t0 = time.perf_counter()
                rep = A.analyze(
                    inp.series,
                    A.AnalysisConfig(detector=det),
                    machine_commits=inp.machine_commits,
                    commit_order=inp.commit_order,
                ).as_dict()
                dt = time.perf_counter() - t0
                lst = out / f"{det}_list.json"
                lst.write_text(json.dumps(detections(rep, out / "results")))
                p = subprocess.run(
                    [
                        sys.executable,
                        str(TOOLS / "score_detections.py"),
                        str(out / "truth.json"),
                        "--list",
                        str(lst),
                        "--window",
                        str(a.window),
                    ],
                    capture_output=True,
                    text=True,
                )
                m = re.search(r"recall (\d+)/(\d+) = [\d.]+; detections (\d+), false (\d+)", p.stdout)
                found, pos, n, fp = (int(x) for x in m.groups())
                print(f"{cfg:4s} s{seed} {det:7s} recall {found}/{pos}  false {fp} of {n}  ({dt:.1f} s)", flush=True)
                t = tot.setdefault((cfg, det), [0, 0, 0, 0, 0.0])
                for i, v in enumerate((found, pos, n, fp, dt)):
                    t[i] += v
    print(f"\n| config | {' | '.join(dets)} |\n|---|{'---|' * len(dets)}")
    for cfg in a.configs.split(","):
        cells = []
        for det in dets:
            found, pos, n, fp, dt = tot[(cfg, det)]
            cells.append(f"{found / max(pos, 1):.2f} / {(n - fp) / max(n, 1):.2f} ({dt:.1f} s)")
        print(f"| {cfg} | {' | '.join(cells)} |")
    print(f"(recall / precision at --window {a.window}, seeds {a.seeds}; seconds: analysis only, all seeds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
