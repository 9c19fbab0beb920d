"""The gate normalises by the control kernels, or refuses (issue 24, item 3).

Sides are built from fixed sample lists (no asv, no timing): each round has ten
samples spread by 0.1%, so classification is decided by the ratio alone.
"""

from __future__ import annotations

import pytest

from harness.core.records import CODE_SCHEME
from harness.gate import check, controls
from harness.gate import decide as gate
from harness.gate.decide import Side, Status
from harness.gate.settings import CheckSettings

CODE = {"scheme": CODE_SCHEME, "fingerprint": "0123456789abcdef", "coverage": {"python": "ok"}}
OTHER = {**CODE, "fingerprint": "fedcba9876543210"}
COPY = ("suite.control_copy.track_time", (("provider", "torch"),))
MATMUL = ("suite.control_matmul.track_time", (("provider", "torch"),))
ADD = ("suite.vector_add.track_time", (("provider", "torch"),))


def _sides(ratio: float, code_b, code_h) -> dict:
    base = [[1.0e-3 * (1 + 0.001 * i) for i in range(10)] for _ in range(6)]
    head = [[x * ratio for x in r] for r in base]
    flat = lambda rs: [x for r in rs for x in r]  # noqa: E731
    return {
        "base": Side(True, samples=flat(base), rounds=base, code=code_b),
        "head": Side(True, samples=flat(head), rounds=head, code=code_h),
    }


def _decide(table: dict):
    found = check._Found()
    settings = CheckSettings(gate=gate.GateConfig(bootstrap=200), remeasure=False)
    verdicts = {(v.benchmark, v.params): v for v in check._decide(table, {}, {}, set(), {}, settings, found, {})}
    return verdicts, found


def test_a_slowdown_the_size_of_the_controls_move_is_refused_not_blocked():
    verdicts, found = _decide(
        {COPY: _sides(1.10, CODE, CODE), MATMUL: _sides(1.09, CODE, CODE), ADD: _sides(1.10, CODE, OTHER)}
    )
    v = verdicts[ADD]
    assert v.status is Status.UNCERTAIN and not v.blocking
    assert "controls moved" in v.reason and "within the threshold" in v.reason
    assert any("the machine moved" in p and "vector_add" in p for p in found.problems)
    assert gate.exit_code(list(verdicts.values())) != gate.EXIT_SLOWER
    # the controls themselves are the same code: SAME, never blocking
    assert verdicts[COPY].status is Status.SAME and verdicts[COPY].same_code


def test_a_slowdown_far_beyond_the_controls_move_still_blocks():
    verdicts, found = _decide({COPY: _sides(1.10, CODE, CODE), ADD: _sides(1.60, CODE, OTHER)})
    v = verdicts[ADD]
    assert v.status is Status.SLOWER and v.blocking
    assert "normalised by the controls" in v.reason and "+45" in v.reason  # 1.60 / 1.10
    assert not found.problems


def test_a_machine_faster_on_head_cannot_hide_a_slowdown():
    # The controls ran 10% faster in head's rounds; the changed kernel measured the same:
    # normalised, it is about 11% slower. Not a pass.
    verdicts, found = _decide({COPY: _sides(0.90, CODE, CODE), ADD: _sides(1.00, CODE, OTHER)})
    v = verdicts[ADD]
    assert v.status is Status.UNCERTAIN
    assert "hide a slowdown" in v.reason
    assert found.problems and "the machine moved" in found.problems[0]


def test_controls_that_did_not_move_change_nothing_negative_control():
    verdicts, found = _decide({COPY: _sides(1.0, CODE, CODE), ADD: _sides(1.10, CODE, OTHER)})
    v = verdicts[ADD]
    assert v.status is Status.SLOWER and v.blocking
    assert "controls" not in v.reason and not found.problems


def test_same_code_series_are_not_refused_when_the_controls_moved():
    verdicts, found = _decide({COPY: _sides(0.90, CODE, CODE), ADD: _sides(1.00, CODE, CODE)})
    assert verdicts[ADD].status is Status.SAME and verdicts[ADD].same_code
    assert not found.problems


@pytest.mark.parametrize(
    ("ratio", "status", "refused"),
    [(1.20, Status.SLOWER, False), (1.12, Status.SLOWER, True), (1.00, Status.SAME, False)],
)
def test_apply_drift_boundaries(ratio, status, refused):
    drift = (1.0, 1.08, ["suite.control_copy.track_time +8.0%"])
    v = gate.Verdict("suite.vector_add.track_time", (), status, "measured", threshold=0.05, stats=_stats(ratio))
    out, problem = controls.apply_drift(v, drift)
    assert (problem is not None) is refused
    assert out.status is (Status.UNCERTAIN if refused else status)


def test_a_refusal_names_the_normalised_change_and_the_threshold():
    """The reason of a refused SLOWER gives the normalised change and the threshold in
    percent (mutation: ``limit - 1`` as ``limit * 1`` printed 105%); a drift known to
    one ratio (``r_min == r_max``, a caller's own estimate) gives one change, not a
    span (mutation: ``_pct(low - 1)`` as ``_pct(low * 1)`` printed +101.8%)."""
    v = gate.Verdict(ADD[0], ADD[1], Status.SLOWER, "measured", threshold=0.05, stats=_stats(1.12))
    out, problem = controls.apply_drift(v, (1.0, 1.08, ["suite.control_copy.track_time +8.0%"]))
    assert out.status is Status.UNCERTAIN
    assert "the change is +3.7%..+12.0%, which reaches within the threshold 5%;" in out.reason  # 1.12/1.08..1.12
    out, problem = controls.apply_drift(v, (1.10, 1.10, ["suite.control_copy.track_time +10.0%"]))
    assert out.status is Status.UNCERTAIN and problem is not None
    assert "the change is +1.8%, which reaches within the threshold 5%;" in out.reason  # 1.12 / 1.10
    assert "the change is +1.8%, which reaches within the threshold 5%;" in problem
    # a SAME the machine may hide: the threshold in percent too
    same = gate.Verdict(ADD[0], ADD[1], Status.SAME, "measured", threshold=0.10, stats=_stats(1.0))
    out, _ = controls.apply_drift(same, (0.85, 1.0, ["suite.control_copy.track_time -15.0%"]))
    assert "which reaches beyond the threshold 10%;" in out.reason


def test_same_code_without_an_interval_is_judged_by_its_ratio():
    """Same compiled code on both sides and no bootstrap interval (too few samples, or
    a verdict built without one): the ratio alone decides "unstable machine", beyond
    25% (mutation: ``st is not None and st.ci_low is not None`` as ``or``, which took
    the missing interval for the bound, or read it from missing stats)."""
    sides = _sides(1.0, CODE, CODE)
    series = gate.SeriesInput(ADD[0], ADD[1], sides["base"], sides["head"])
    no_ci = lambda r: gate.Stats(60, 60, 1e-3, 1e-3 * r, r, None, None, 0.001)  # noqa: E731
    v = gate.Verdict(ADD[0], ADD[1], Status.SLOWER, "measured", threshold=0.05, stats=no_ci(2.0))
    out, problem = gate.same_code_verdict(v, series)
    assert out.status is Status.UNCERTAIN and out.same_code
    assert problem and "unstable machine" in problem and "+100.0%" in problem
    # control: 20% apart is within the 25% the machine may move: SAME, never blocking
    v = gate.Verdict(ADD[0], ADD[1], Status.SLOWER, "measured", threshold=0.05, stats=no_ci(1.2))
    out, problem = gate.same_code_verdict(v, series)
    assert out.status is Status.SAME and problem is None
    # a SLOWER without any statistics: nothing says the machine moved: SAME
    v = gate.Verdict(ADD[0], ADD[1], Status.SLOWER, "measured", threshold=0.05)
    out, problem = gate.same_code_verdict(v, series)
    assert out.status is Status.SAME and problem is None and "same compiled code" in out.reason


def test_drift_range_counts_only_controls_that_moved():
    moved = gate.Verdict("suite.control_copy.track_time", (), Status.SLOWER, "", stats=_stats(1.08))
    still = gate.Verdict("suite.control_matmul.track_time", (), Status.SAME, "", stats=_stats(1.30))
    other = gate.Verdict("suite.vector_add.track_time", (), Status.SLOWER, "", stats=_stats(2.0))
    r_min, r_max, labels = controls.drift_range({(v.benchmark, ()): v for v in (moved, still, other)})
    assert (r_min, r_max) == (1.0, 1.08) and len(labels) == 1
    assert controls.drift_range({(still.benchmark, ()): still}) is None


def _stats(ratio: float) -> gate.Stats:
    return gate.Stats(60, 60, 1e-3, 1e-3 * ratio, ratio, ratio * 0.99, ratio * 1.01, 0.0)
