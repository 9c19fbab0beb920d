"""The sequential gate against the fixed-round gate, on injected data (issue 24).

What it measures
----------------
For each injected slowdown (0 = A/A, 2%, 5%, 10%, 4x) and each gate, over
``--trials`` simulated checks of one series:

* the **block rate** (at effect 0 that is the false-block rate),
* the **mean rounds per side** the gate measured (re-measurements included).

Gates compared, on the same simulated rounds:

* ``sequential``: :mod:`harness.gate.sequential` (looks every ``--step`` rounds,
  cap ``--cap``, Pocock-type alpha spending, one-sided ``--alpha``);
* ``fixed-R``: today's gate (:func:`harness.gate.decide.classify`, and
  :func:`~harness.gate.decide.confirm` with the next R rounds as the
  re-measurement of a borderline result), with R = 2 (the default) and R = 6
  (the CPU recommendation of ``docs/pr-gate.md``);
* ``fixed-R, no boundary``: the sequential statistic looked at every ``--step``
  rounds at the *fixed* level ``--alpha`` (no spending): the negative control,
  whose false-block rate grows with the number of looks.

Injected data
-------------
Two sources:

* **synthetic** (default): each round (one process) has a log-median offset
  ``N(0, sigma_round)``; its ``--samples`` samples are lognormal around it with
  ``sigma_sample``; a **slow phase** of the machine (entered with probability
  ``--phase-p`` per round, lasting ``--phase-len`` rounds, ``--phase-slow``
  slower) hits base and head alike, as on this project's VM (6 processes in a
  row 22-31% slower, issue 24). Head's samples are multiplied by
  ``1 + effect``.
* **measured** (``--from-json FILE``, the ``--json`` output of
  ``experiments/cpu-noise/gate_power.py``): A/A rounds measured on a real machine,
  resampled with replacement as round pairs, head scaled by ``1 + effect``.

It times nothing and writes nothing unless ``--markdown FILE`` is given; the
figures go to ``docs/performance.md`` ("Sequential gate").

Usage::

    python experiments/sequential-gate/simulate.py                     # ~2 minutes on 2 busy cores
    python experiments/sequential-gate/simulate.py --sigma-round 0.06 --trials 400
    python experiments/sequential-gate/simulate.py --from-json power.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.gate import decide as gate  # noqa: E402
from harness.gate import sequential as seq  # noqa: E402
from harness.gate.decide import GateConfig, SeriesInput, Side, Status  # noqa: E402

EFFECTS = (0.0, 0.02, 0.05, 0.10, 3.0)


def synthetic_rounds(
    rng: np.random.Generator,
    n: int,
    *,
    effect: float,
    sigma_round: float,
    sigma_sample: float,
    samples: int,
    phase_p: float,
    phase_len: int,
    phase_slow: float,
) -> tuple[list[list[float]], list[list[float]]]:
    """``n`` interleaved round pairs (base, head) of ``samples`` seconds each; see the module docstring."""
    base, head = [], []
    left = 0
    for _ in range(n):
        if left == 0 and rng.random() < phase_p:
            left = phase_len
        phase = math.log1p(phase_slow) if left > 0 else 0.0
        left = max(0, left - 1)
        for out, scale in ((base, 1.0), (head, 1.0 + effect)):
            mu = math.log(1e-4) + phase + rng.normal(0, sigma_round)
            out.append(list(scale * np.exp(mu + rng.normal(0, sigma_sample, samples))))
    return base, head


def measured_rounds(rng, pool: list, n: int, effect: float):
    """``n`` round pairs drawn with replacement from measured A/A pairs, head scaled."""
    pick = rng.integers(0, len(pool), n)
    return [pool[i][0] for i in pick], [[x * (1 + effect) for x in pool[i][1]] for i in pick]


def _side(rounds):
    return Side(present=True, samples=[x for r in rounds for x in r], rounds=[list(r) for r in rounds])


def fixed_gate(base, head, rounds: int, cfg: GateConfig) -> tuple[bool, int]:
    """Today's gate on the first ``rounds`` (+ ``rounds`` more to confirm): (blocked, rounds used)."""
    b, h = _side(base[:rounds]), _side(head[:rounds])
    v = gate.classify(SeriesInput("s", (), b, h), cfg)
    used = rounds
    if gate.needs_remeasure(v):
        b2, h2 = _side(base[rounds : 2 * rounds]), _side(head[rounds : 2 * rounds])
        pooled = SeriesInput("s", (), _side(base[: 2 * rounds]), _side(head[: 2 * rounds]))
        v = gate.confirm(v, SeriesInput("s", (), b2, h2), pooled, cfg)
        used = 2 * rounds
    return v.status is Status.SLOWER, used


def sequential_gate(base, head, cfg: seq.SequentialConfig, threshold: float) -> tuple[bool, int]:
    looks = seq.run_sequence(base, head, cfg, threshold)
    last = looks[-1]
    return last.decision is Status.SLOWER, cfg.rounds_at(last.look)


def naive_gate(base, head, cfg: seq.SequentialConfig, threshold: float) -> tuple[bool, int]:
    """The negative control: the same looks, each at the fixed level ``alpha`` (no spending)."""
    from scipy.stats import t as student

    thr = math.log1p(threshold)
    for k in range(1, cfg.looks + 1):
        r = cfg.rounds_at(k)
        d = seq.round_pairs(base[:r], head[:r])
        if d.size < 2:
            continue
        se = d.std(ddof=1) / math.sqrt(d.size)
        if se > 0 and student.sf(d.mean() / se, d.size - 1) < cfg.alpha and d.mean() > thr:
            return True, r
    return False, cfg.rounds_at(cfg.looks)


def run(a) -> list[dict]:
    rng = np.random.default_rng(a.seed)
    scfg = seq.SequentialConfig(alpha=a.alpha, step=a.step, max_rounds=a.cap)
    fcfg = GateConfig(threshold=a.threshold, alpha=a.alpha, bootstrap=a.bootstrap)
    fcfg_default = GateConfig(threshold=0.05, alpha=a.alpha, bootstrap=a.bootstrap)
    pool = None
    if a.from_json:
        data = json.loads(Path(a.from_json).read_text())
        pool = [p for s in data["rounds"] for p in zip(s["base"], s["head"])]
        if not pool:
            raise SystemExit(f"{a.from_json}: no rounds stored")
    gates = {
        f"sequential (cap {a.cap}, step {a.step})": lambda b, h: sequential_gate(b, h, scfg, a.threshold),
        f"fixed 2 rounds, threshold {fcfg_default.threshold:.0%}": lambda b, h: fixed_gate(b, h, 2, fcfg_default),
        f"fixed 6 rounds, threshold {a.threshold:.0%}": lambda b, h: fixed_gate(b, h, 6, fcfg),
        "looks at a fixed level (negative control)": lambda b, h: naive_gate(b, h, scfg, a.threshold),
    }
    need = max(a.cap, 12)
    rows = []
    for effect in EFFECTS:
        acc = {g: [0, 0] for g in gates}
        for _ in range(a.trials):
            if pool is not None:
                base, head = measured_rounds(rng, pool, need, effect)
            else:
                base, head = synthetic_rounds(
                    rng,
                    need,
                    effect=effect,
                    sigma_round=a.sigma_round,
                    sigma_sample=a.sigma_sample,
                    samples=a.samples,
                    phase_p=a.phase_p,
                    phase_len=a.phase_len,
                    phase_slow=a.phase_slow,
                )
            for g, fn in gates.items():
                blocked, used = fn(base, head)
                acc[g][0] += blocked
                acc[g][1] += used
        for g, (blocks, used) in acc.items():
            rows.append({"gate": g, "effect": effect, "block_rate": blocks / a.trials, "mean_rounds": used / a.trials})
    return rows


def render(rows: list[dict], a) -> str:
    gates = list(dict.fromkeys(r["gate"] for r in rows))
    head = "| gate | " + " | ".join(_effect(e) for e in EFFECTS) + " | mean rounds per side (A/A / 5% / 4x) |"
    lines = [head, "|" + "---|" * (len(EFFECTS) + 2)]
    for g in gates:
        by = {r["effect"]: r for r in rows if r["gate"] == g}
        cells = [f"{by[e]['block_rate']:.1%}" for e in EFFECTS]
        mr = f"{by[0.0]['mean_rounds']:.1f} / {by[0.05]['mean_rounds']:.1f} / {by[3.0]['mean_rounds']:.1f}"
        lines.append(f"| {g} | " + " | ".join(cells) + f" | {mr} |")
    src = (
        f"measured A/A rounds from {a.from_json}"
        if a.from_json
        else f"synthetic: sigma_round {a.sigma_round}, sigma_sample {a.sigma_sample}, {a.samples} samples/round, "
        f"slow phases p={a.phase_p}/round x {a.phase_len} rounds x +{a.phase_slow:.0%}"
    )
    return (
        f"Block rate per injected slowdown ({a.trials} trials each, seed {a.seed}; {src}; "
        f"alpha {a.alpha}, sequential threshold {a.threshold:.0%}):\n\n" + "\n".join(lines) + "\n"
    )


def _effect(e: float) -> str:
    return "A/A (false blocks)" if e == 0 else (f"{1 + e:.0f}x" if e >= 1 else f"+{e:.0%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200, help="simulated checks per effect (default: 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--alpha", type=float, default=0.01, help="level (default: 0.01)")
    p.add_argument("--threshold", type=float, default=0.01, help="practical threshold (default: 0.01)")
    p.add_argument("--cap", type=int, default=12, help="sequential round cap per side (default: 12)")
    p.add_argument("--step", type=int, default=2, help="rounds per look (default: 2)")
    p.add_argument("--sigma-round", type=float, default=0.03, help="log sd between rounds (default: 0.03)")
    p.add_argument("--sigma-sample", type=float, default=0.10, help="log sd within a round (default: 0.10)")
    p.add_argument("--samples", type=int, default=20, help="samples per round (default: 20)")
    p.add_argument("--phase-p", type=float, default=0.05, help="slow-phase start probability per round")
    p.add_argument("--phase-len", type=int, default=6, help="slow-phase length in rounds (default: 6)")
    p.add_argument("--phase-slow", type=float, default=0.25, help="slow-phase slowdown (default: 0.25)")
    p.add_argument("--bootstrap", type=int, default=500, help="fixed gate's bootstrap resamples (default: 500)")
    p.add_argument("--from-json", default=None, help="resample measured A/A rounds (gate_power.py --json output)")
    p.add_argument("--markdown", default=None, help="also write the table here")
    a = p.parse_args(argv)
    if a.trials < 1:
        p.error("--trials must be positive")
    md = render(run(a), a)
    print(md)
    if a.markdown:
        Path(a.markdown).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
