"""How well can any detector name the commit of a small step? An oracle bound for detect_bench's P9 configurations.

Monte Carlo: ``n`` points of Gaussian noise (``sigma`` = the synthetic noise of
``../shared/tools/synth_asv.py``: its values are ``base * exp(N(0, noise))``,
so ``log(value)`` has exactly that noise) with one step of ``log(ratio)`` at a
uniformly drawn commit in ``[10, n - 10)`` (synth_asv's margin). The oracle
knows there is exactly one step and knows ``sigma``; it names the commit by

* ``mle``: the least-squares split (the profile likelihood of one mean shift,
  Hinkley 1970, Biometrika 57; what binary segmentation followed by Bai's
  refinement returns for an isolated step), or
* ``bayes``: the commit whose +-``window`` neighbourhood holds the most
  posterior mass (flat prior on the commit, levels integrated out): the best
  possible rule for "within +-window commits", which is what
  ``score_detections.py --window`` scores.

It prints ``P(|named - true| <= window)`` per step size. With
``--expected`` and ``../shared/tools`` present it also writes the P9b
histories of the given seeds (synth_asv.py, into a temporary folder), counts
their true regressions by size and prints the recall an oracle could expect
there: the ceiling for any detector at ``--window 1``.

    python experiments/detection/locate_bound.py [--noise 0.03] [--window 1] [--runs 20000] [--expected 1,2,3 --expected 4,5,6,7,8]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT.parent / "shared" / "tools"
P9B = "--commits 120 --machines 3 --benchmarks 16 --noise 0.03"


def hit_rates(
    ratio: float, noise: float, *, n: int = 120, window: int = 1, runs: int = 20000, margin: int = 10, seed: int = 0
) -> tuple[float, float]:
    """``(mle, bayes)``: fraction of ``runs`` histories whose step (``ratio``,
    relative noise ``noise``, ``n`` points) each oracle names within
    ``+-window`` commits. Raises ``ValueError`` for ``ratio <= 0``, ``noise <=
    0`` or ``n < 2 * margin + 1``."""
    if not (ratio > 0 and noise > 0 and n > 2 * margin):
        raise ValueError(f"hit_rates needs ratio > 0, noise > 0, n > 2 margin; got {ratio}, {noise}, {n}")
    rng = np.random.default_rng(seed)
    d = math.log(ratio)
    ks = np.arange(1, n)  # first index of the new level
    hits = np.zeros(2)
    done = 0
    while done < runs:  # in chunks: a (runs, n) array of splits would not fit in memory
        m = min(2000, runs - done)
        k0 = rng.integers(margin, n - margin, size=m)
        y = rng.normal(0.0, noise, size=(m, n))
        y[np.arange(n)[None, :] >= k0[:, None]] += d
        s = np.cumsum(y, axis=1)
        left = s[:, ks - 1]
        gain = (left - ks * (s[:, -1:] / n)) ** 2 * n / (ks * (n - ks))  # drop in squared error of a split at k
        mle = ks[np.argmax(gain, axis=1)]
        lp = gain / (2 * noise**2) - 0.5 * np.log(ks * (n - ks))  # log posterior, levels integrated (flat)
        w = np.exp(lp - lp.max(axis=1, keepdims=True))
        c = np.cumsum(np.pad(w, ((0, 0), (window + 1, window))), axis=1)
        mass = c[:, 2 * window + 1 :] - c[:, : -(2 * window + 1)]  # posterior mass of [k - window, k + window]
        bayes = ks[np.argmax(mass, axis=1)]
        hits += (np.sum(np.abs(mle - k0) <= window), np.sum(np.abs(bayes - k0) <= window))
        done += m
    return float(hits[0] / runs), float(hits[1] / runs)


def expected_recall(seeds: str, noise: float, window: int, runs: int) -> str:
    """The oracle's expected recall on the P9b histories of ``seeds``
    (regressions and divergent slowdowns by their ratio; drifts, matched
    anywhere in their span, counted as found)."""
    work = Path(tempfile.mkdtemp(prefix="locate_bound."))
    sizes: dict[float, int] = {}
    n_pos = 0
    for seed in seeds.split(","):
        out = work / f"P9b_s{seed}"
        subprocess.run(
            [sys.executable, str(TOOLS / "synth_asv.py"), str(out), *P9B.split(), "--seed", seed],
            check=True,
            capture_output=True,
        )
        t = json.loads((out / "truth.json").read_text())
        for e in t["events"]:
            if e["kind"] in ("regression", "divergent_slower"):
                sizes[e["ratio"]] = sizes.get(e["ratio"], 0) + 1
                n_pos += 1
        n_pos += len({(e["machine"], e["benchmark"], e["param_idx"]) for e in t["events"] if e["kind"] == "drift_part"})
    miss_mle = miss_bayes = 0.0
    p_all = 1.0
    for r, c in sizes.items():
        m, b = hit_rates(r, noise, window=window, runs=runs)
        miss_mle += c * (1 - m)
        miss_bayes += c * (1 - b)
        p_all *= b**c
    by = ", ".join(f"x{r:g}: {c}" for r, c in sorted(sizes.items()))
    return (
        f"seeds {seeds}: {n_pos} true slowdowns (steps {by}; the rest drifts); expected recall of the oracle "
        f"mle {1 - miss_mle / n_pos:.3f}, bayes {1 - miss_bayes / n_pos:.3f}; chance that bayes names every step "
        f"within +-{window}: {p_all:.2f}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--expected", action="append", default=[], help="seeds (e.g. 1,2,3) of P9b histories")
    a = ap.parse_args(argv)
    print(f"one step in 120 points, noise {a.noise:.0%}: P(named commit within +-{a.window} of the true one)")
    print("| step | step / noise | mle (least squares) | bayes (best for the window) |\n|---|---|---|---|")
    for r in (1.05, 1.10, 1.15, 1.25):
        m, b = hit_rates(r, a.noise, window=a.window, runs=a.runs)
        print(f"| x{r:g} | {math.log(r) / a.noise:.2f} | {m:.3f} | {b:.3f} |")
    for seeds in a.expected:
        if not (TOOLS / "synth_asv.py").is_file():
            print(f"note: {TOOLS} absent; no expected recall")
            break
        print(expected_recall(seeds, a.noise, a.window, a.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
