"""Properties of the gate's decision on generated samples (hypothesis).

The boundary tests (``tests/test_gate_boundaries.py``) pin each threshold at
hand-picked values; these check, on arbitrary positive samples, that a status
is never given against its own definition (``harness.gate.decide``'s module
docstring), and that the decision depends on ratios only: scaling every sample
by a power of two (exact in floating point) changes nothing.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.model import GateStatus
from harness.gate.decide import GateConfig, SeriesInput, Side, classify

CFG = GateConfig(bootstrap=300)
# Samples around one level with up to 2% jitter: most generated pairs are
# significant, so the statuses' boundaries (a 3% change is significant but within
# the threshold) are exercised, not only UNCERTAIN.
jitter = st.lists(st.floats(min_value=-0.02, max_value=0.02, allow_nan=False), min_size=1, max_size=14)
level = st.floats(min_value=1e-6, max_value=1e-2)
factor = st.sampled_from([0.5, 0.8, 0.95, 0.97, 1.0, 1.03, 1.04, 1.06, 1.2, 2.0])


def _series(base, head):
    return SeriesInput("b", (), Side(present=True, samples=list(base)), Side(present=True, samples=list(head)))


@settings(max_examples=150, deadline=None)
@given(lv=level, jb=jitter, jh=jitter, f=factor)
def test_a_status_is_never_given_against_its_definition(lv, jb, jh, f):
    base, head = [lv * (1 + j) for j in jb], [lv * f * (1 + j) for j in jh]
    v = classify(_series(base, head), CFG)
    s = v.stats
    slow, fast = 1 + CFG.threshold, 1 / (1 + CFG.threshold)
    if v.status is GateStatus.SLOWER:
        assert s.ratio > slow and s.p_value < CFG.alpha and s.ci_low > 1.0
        assert min(s.n_base, s.n_head) >= CFG.min_samples
    elif v.status is GateStatus.FASTER:
        assert s.ratio < fast and s.p_value < CFG.alpha and s.ci_high < 1.0
        assert min(s.n_base, s.n_head) >= CFG.min_samples
    elif v.status is GateStatus.SAME:
        assert fast <= s.ratio <= slow
    else:
        assert v.status is GateStatus.UNCERTAIN
        assert not (fast <= s.ratio <= slow)
    assert v.blocking == (v.status is GateStatus.SLOWER)


@settings(max_examples=60, deadline=None)
@given(lv=level, jb=jitter, jh=jitter, f=factor, k=st.integers(min_value=-8, max_value=8))
def test_the_decision_depends_on_ratios_only(lv, jb, jh, f, k):
    base, head = [lv * (1 + j) for j in jb], [lv * f * (1 + j) for j in jh]
    c = 2.0**k
    a = classify(_series(base, head), CFG)
    b = classify(_series([x * c for x in base], [x * c for x in head]), CFG)
    assert (a.status, a.borderline) == (b.status, b.borderline)
    assert a.stats.ratio == b.stats.ratio
