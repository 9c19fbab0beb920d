"""Print every slowdown claim of a ``kernelwatch analyze --json`` report with its series around the claim.

What a person labels by eye (docs/analysis.md, "OpenBLAS, claim by claim"): a
claim is a ``regression``, ``drift_regression``, a ``divergent_change`` whose
worse machine slowed by ``min_effect`` or more, or a ``pending`` slowdown (the
statuses ``kw_to_list.py --pending`` maps). For each: the series, the blamed
commit pair, the reported change, and the values (divided by the series'
median) 15 commits either side, ``>`` marking the first commit at the new level.

    python experiments/detection/openblas_claims.py REPORT.json RESULTS_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.store.dataset import build_inputs, load_input  # noqa: E402


def is_claim(f: dict, min_effect: float) -> bool:
    st, ch = f["status"], f["magnitude"]["change"]
    return (
        st in ("regression", "drift_regression")
        or (st == "pending" and ch is not None and ch > 0)
        or (st == "divergent_change" and (f["extra"].get("change_worse_machine") or 0) >= min_effect)
    )


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    rep = json.loads(Path(argv[1]).read_text())
    inp = build_inputs(load_input(argv[2], repo=None))
    by = {(s.key.machine, s.key.benchmark, tuple(str(v) for _, v in s.key.params), s.key.timing): s for s in inp.series}
    n = 0
    for f in rep["findings"]:
        if not is_claim(f, rep["config"]["min_effect"]):
            continue
        k = f["key"]
        s = by.get((k["machine"], k["benchmark"], tuple(str(v) for _, v in k["params"]), k["timing"]))
        n += 1
        print(f"=== claim {n}: {f['status']} {k['machine']} / {k['benchmark']} {k['params']}")
        print(
            f"    named commits {f['commit_range'][0][:10]} -> {f['commit_range'][1][:10]}; change {f['magnitude']['change']}"
        )
        if s is None:
            print("    (series not found)")
            continue
        commits = [p.commit for p in s.points]
        j = commits.index(f["commit_range"][1]) if f["commit_range"][1] in commits else len(commits) - 1
        vals = sorted(p.value for p in s.points if p.value)
        med = vals[len(vals) // 2] if vals else 1.0
        row = [
            f"{'>' if i == j else ' '}{i}:{'FAIL' if not s.points[i].value else f'{s.points[i].value / med:.3f}'}"
            for i in range(max(0, j - 15), min(len(commits), j + 15))
        ]
        print(f"    value / series median by commit index, {len(commits)} points:")
        for a in range(0, len(row), 10):
            print("     " + " ".join(row[a : a + 10]))
    print(f"{n} claims")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
