"""The sequential gate's rule (harness.gate.sequential): boundaries, error rate
under repeated looks (with the fixed-level negative control), early stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.model import GateStatus
from harness.gate import sequential as seq


def test_obrien_fleming_boundaries_match_gsdesign():
    # gsDesign::gsDesign(k=5, test.type=1, alpha=0.025, sfu=sfLDOF)$upper$bound
    b = seq.boundaries(0.025, 5, "obrien-fleming")
    assert b == pytest.approx((4.877, 3.357, 2.680, 2.290, 2.031), abs=2e-3)
    # negative control: Pocock-type spending gives flat boundaries, not these
    p = seq.boundaries(0.025, 5, "pocock")
    assert p == pytest.approx((2.438, 2.427, 2.410, 2.397, 2.386), abs=2e-3)
    assert p[0] < b[0] - 2


def test_spent_reaches_alpha_at_the_end_and_rejects_bad_input():
    for s in seq.SPENDING:
        assert seq.spent(1.0, 0.01, s) == pytest.approx(0.01)
        assert seq.spent(0.5, 0.01, s) < 0.01
    with pytest.raises(ValueError, match="information fraction"):
        seq.spent(0.0, 0.01, "pocock")
    with pytest.raises(ValueError, match="spending"):
        seq.spent(0.5, 0.01, "haybittle")


def _null_rates(alpha: float, trials: int = 1500) -> tuple[float, float]:
    """False-block rate of the sequential rule and of the same looks at a fixed level,
    on round pairs with no difference (normal log ratios, sd 0.05)."""
    from scipy.stats import t as student

    cfg = seq.SequentialConfig(alpha=alpha, step=2, max_rounds=12)
    rng = np.random.default_rng(1)
    d_all = rng.normal(0.0, 0.05, size=(trials, cfg.max_rounds))
    seq_blocks = naive_blocks = 0
    for d in d_all:
        for k in range(1, cfg.looks + 1):
            lk = seq.look(d[: cfg.rounds_at(k)], k, cfg, threshold=1e-9)
            if lk.decision is not None:
                seq_blocks += lk.decision is GateStatus.SLOWER
                break
        for k in range(1, cfg.looks + 1):
            x = d[: cfg.rounds_at(k)]
            if student.sf(x.mean() / (x.std(ddof=1) / math.sqrt(x.size)), x.size - 1) < alpha:
                naive_blocks += 1
                break
    return seq_blocks / trials, naive_blocks / trials


def test_false_block_rate_holds_under_repeated_looks():
    alpha = 0.05
    rate, naive = _null_rates(alpha)
    se = math.sqrt(alpha * (1 - alpha) / 1500)
    assert rate <= alpha + 3 * se, rate
    # negative control: six looks at a fixed 5% level block far more often
    assert naive > alpha + 5 * se, naive
    assert naive > 1.5 * rate


def test_clear_slowdown_stops_at_the_first_look_and_null_never_blocks():
    cfg = seq.SequentialConfig()
    rng = np.random.default_rng(3)
    base = [list(1e-3 * np.exp(rng.normal(0, 0.01, 20))) for _ in range(12)]
    slow = [list(4e-3 * np.exp(rng.normal(0, 0.01, 20))) for _ in range(12)]
    looks = seq.run_sequence(base, slow, cfg, 0.05)
    assert len(looks) == 1 and looks[0].decision is GateStatus.SLOWER
    assert looks[0].ratio == pytest.approx(4.0, rel=0.05)
    assert "crossed the sequential boundary" in seq.describe(looks[0], 0.05)
    # same code, noisy rounds (5% between processes): never SLOWER, runs to a decision
    same = [list(1e-3 * np.exp(rng.normal(rng.normal(0, 0.05), 0.05, 20))) for _ in range(12)]
    looks = seq.run_sequence(base, same, cfg, 0.05)
    assert looks[-1].decision in (GateStatus.SAME, GateStatus.UNCERTAIN)


def test_cap_decides_an_open_series_without_blocking():
    cfg = seq.SequentialConfig(step=2, max_rounds=4)
    d = [0.30, -0.10, 0.25, -0.05]  # big spread, mean +10%: beyond the threshold, not significant
    lk = seq.look(d, 2, cfg, 0.05)
    assert lk.final and lk.decision is GateStatus.UNCERTAIN
    lk = seq.look(d[:2], 1, cfg, 0.05)
    assert lk.decision is None  # not the cap: keep measuring


def test_round_pairs_drop_bad_samples_and_empty_rounds():
    d = seq.round_pairs([[1.0, 1.0], [float("nan")], [2.0]], [[2.0, 2.0], [1.0], [-1.0, 4.0]])
    assert d.tolist() == pytest.approx([math.log(2), math.log(2)])


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"alpha": 0.7}, "alpha"),
        ({"step": 0}, "step"),
        ({"max_rounds": 1}, "max_rounds"),
        ({"step": 4, "max_rounds": 2}, "max_rounds"),
        ({"spending": "bonferroni"}, "spending"),
    ],
)
def test_config_rejects_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        seq.SequentialConfig(**kw)
