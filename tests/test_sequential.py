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


@pytest.mark.parametrize(("alpha", "spending"), [(0.025, "pocock"), (0.025, "obrien-fleming")])
def test_two_look_boundaries_spend_exactly_alpha(alpha, spending):
    """Two looks have a closed form: (Z1, Z2) is bivariate normal with correlation
    sqrt(1/2), so b2 solves P(Z1 <= b1, Z2 <= b2) = 1 - alpha, a one-dimensional
    integral (200-point Gauss-Legendre, exact to 1e-12 here). The recursion must match
    it to the 1e-4 its docstring promises (mutation: trapezoid end weight
    ``new_w[-1]`` as ``new_w[+1]``, off by ~7e-4)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    b1, b2 = seq.boundaries(alpha, 2, spending)
    assert b1 == pytest.approx(norm.isf(seq.spent(0.5, alpha, spending)), abs=1e-9)
    rho = math.sqrt(0.5)
    x, w = np.polynomial.legendre.leggauss(200)
    z, w = (x + 1) / 2 * (b1 + 12) - 12, w * (b1 + 12) / 2  # nodes on [-12, b1]

    def crossed(b):
        return 1.0 - float(np.sum(w * norm.pdf(z) * norm.cdf((b - rho * z) / math.sqrt(1 - rho**2))))

    exact = brentq(lambda b: crossed(b) - alpha, 0.0, 8.0, xtol=1e-12)
    assert b2 == pytest.approx(exact, abs=1e-4)


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


def test_a_significant_speedup_within_the_threshold_is_same_not_faster():
    """Head 1% faster in every round pair: the interval lies below 0 but inside the 5%
    threshold, so the look says SAME; only a change beyond the threshold is FASTER
    (mutation: ``est < -thr`` as ``est is not -thr``, always true)."""
    cfg = seq.SequentialConfig(step=6, max_rounds=12)  # two looks: the first is not the cap
    small = [-0.010, -0.011, -0.009, -0.0105, -0.0095, -0.010]
    lk = seq.look(small, 1, cfg, 0.05)
    assert not lk.final
    assert lk.high is not None and lk.high < 0  # significantly faster ...
    assert lk.decision is GateStatus.SAME  # ... but within the threshold
    assert "within the 5% threshold" in seq.describe(lk, 0.05)
    # control: 10% faster in every pair is beyond the threshold
    big = [x - 0.1 for x in small]
    assert seq.look(big, 1, cfg, 0.05).decision is GateStatus.FASTER


def test_look_accepts_every_threshold_the_gate_accepts():
    """The gate's thresholds are relative changes in (0, 10) (``GateConfig``); a look
    takes the same range: 9.5 (950%) decides, 10 is refused
    (mutation: ``threshold < 10`` as ``threshold < 9``)."""
    cfg = seq.SequentialConfig(step=2, max_rounds=4)
    d = [math.log(12.0) + e for e in (0.01, -0.01, 0.005, -0.005)]  # 12x slower
    lk = seq.look(d, 2, cfg, 9.5)
    assert lk.decision is GateStatus.SLOWER
    assert seq.look([0.0, 0.001, -0.001, 0.0], 2, cfg, 9.99).decision is GateStatus.SAME
    for bad in (10.0, 0.0):
        with pytest.raises(ValueError, match=r"in \(0, 10\)"):
            seq.look(d, 2, cfg, bad)


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


def _repo(path):
    import shutil
    import subprocess
    from pathlib import Path

    path.mkdir(parents=True)
    shutil.copy2(Path(__file__).resolve().parent.parent / "asv.conf.json", path / "asv.conf.json")

    def git(*a):
        subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "kw@example.invalid")
    git("config", "user.name", "kw")
    (path / "NOTES.md").write_text("base\n")
    (path / "benchmarks").mkdir()  # each side's suite is exported from its commit (issue 29)
    (path / "benchmarks" / "__init__.py").write_text("")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    (path / "NOTES.md").write_text("head\n")
    git("commit", "-qam", "head")
    return path


SAME = {"scheme": "kernelwatch-code/1", "fingerprint": "00ff00ff00ff00ff", "coverage": {"python": "ok"}}


@pytest.mark.parametrize(
    "factor, code, looks, identity",
    [(4.0, 1, 1, None), (1.0, 0, None, None), (1.0, 0, 1, SAME), (4.0, 2, 1, SAME)],
    ids=["4x-blocks", "aa-looks-on", "same-code-passes", "same-code-4x-unstable"],
)
def test_check_measures_open_series_look_by_look(tmp_path, monkeypatch, factor, code, looks, identity):
    """run_check with a fake measurement: a 4x head blocks after the first look;
    unchanged code (rounds 5% apart) is measured look by look, only the open
    series, and never blocks; the same compiled code on both sides passes after
    one look, saying so, or (4x apart) reports an unstable machine, exit 2."""
    from harness.gate import check
    from harness.gate.decide import Side

    repo = _repo(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(check, "discover", lambda *a, **k: ({}, set(), None))
    rng = np.random.default_rng(7)
    key = ("suite.vector_add.track_time", (("provider", "torch"),))
    calls = []

    def side(f, n):
        rounds = [list(1e-3 * f * np.exp(rng.normal(rng.normal(0, 0.05), 0.02, 10))) for _ in range(n)]
        return Side(True, samples=[x for r in rounds for x in r], rounds=rounds, code=identity)

    def fake_measure_pair(roles, bench, *, rounds, tag, **kw):
        calls.append((tag, tuple(bench), rounds))
        return {key: {"base": side(1.0, rounds), "head": side(factor, rounds)}}, set(), [], [], []

    monkeypatch.setattr(check, "measure_pair", fake_measure_pair)
    out = check.run_check("main~1", "main", repo=repo, json_out=tmp_path / "r.json", log=lambda m: None)
    assert out.exit_code == code, out.report
    (v,) = out.verdicts
    label = v.label
    assert out.report["config"]["sequential"]["max_rounds"] == 12
    if identity is not None:
        assert len(calls) == 1 and v.same_code and out.report["series"][0]["same_code"]
        assert "same compiled code as base" in v.reason
        assert (v.status is GateStatus.SAME) == (code == 0)
        assert code == 0 or any("unstable machine" in p for p in out.report["problems"])
        return
    n_looks = len(out.report["looks"][label])
    # the report counts the series that needed more than one look
    # (mutation: ``len(looks) > 1`` as ``> 0``)
    assert out.report["remeasured"] == (1 if n_looks > 1 else 0)
    assert f"{out.report['remeasured']} series needed more than one look" in out.markdown
    if looks is not None:
        assert n_looks == looks and v.status is GateStatus.SLOWER and len(calls) == 1
    else:
        assert v.status in (GateStatus.SAME, GateStatus.UNCERTAIN, GateStatus.FASTER)
        assert n_looks == len(calls) > 1
        assert [c[0] for c in calls[1:]] == [f"look{k}" for k in range(2, n_looks + 1)]
        assert all(c[1] and "vector_add" in c[1][0] for c in calls[1:])  # only the open series
    assert "group-sequential boundary" in out.markdown


def test_settings_enable_the_sequential_gate_by_default_and_validate_it():
    from harness.gate.settings import CheckError, parse_settings

    s = parse_settings({}, "t")
    assert s.sequential == seq.SequentialConfig(alpha=0.01, step=2, max_rounds=12)
    assert parse_settings({"sequential": False}, "t").sequential is None
    s = parse_settings({"rounds": 3, "max_rounds": 9, "spending": "obrien-fleming"}, "t")
    assert (s.sequential.step, s.sequential.looks, s.sequential.spending) == (3, 3, "obrien-fleming")
    for bad, match in (
        ({"sequential": "yes"}, "sequential must be"),
        ({"spending": "wald"}, "spending must be"),
        ({"rounds": 4, "max_rounds": 2}, "max_rounds"),
        ({"max_rounds": 2.5}, "max_rounds must be an integer"),
    ):
        with pytest.raises(CheckError, match=match):
            parse_settings(bad, "kernelwatch.toml [check]")


def test_a_look_that_measures_nothing_fails_closed(tmp_path, monkeypatch):
    """asv storing nothing at a later look: the series is UNCERTAIN (undecided), the
    look's problem is reported and the check exits 2, never a block or a pass."""
    from harness.gate import check
    from harness.gate.decide import Side

    repo = _repo(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(check, "discover", lambda *a, **k: ({}, set(), None))
    key = ("suite.vector_add.track_time", (("provider", "torch"),))
    rng = np.random.default_rng(2)

    def side(f):
        rounds = [list(1e-3 * f * np.exp(rng.normal(rng.normal(0, 0.2), 0.02, 10))) for _ in range(2)]
        return Side(True, samples=[x for r in rounds for x in r], rounds=rounds)

    def fake_measure_pair(roles, bench, *, rounds, tag, **kw):
        if tag == "measure":
            return {key: {"base": side(1.0), "head": side(1.3)}}, set(), [], [], []
        return {}, set(), [], ["asv stored no result for head 0123456789ab (exit 1): boom"], []

    monkeypatch.setattr(check, "measure_pair", fake_measure_pair)
    out = check.run_check("main~1", "main", repo=repo, json_out=tmp_path / "r.json", log=lambda m: None)
    assert out.exit_code == 2
    (v,) = out.verdicts
    assert v.status is GateStatus.UNCERTAIN and "did not measure it" in v.reason
    assert any(p.startswith("sequential look 2: asv stored no result") for p in out.report["problems"])
