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
samples = st.lists(st.floats(min_value=1e-6, max_value=1e-2, allow_nan=False), min_size=1, max_size=14)
factor = st.sampled_from([0.5, 0.8, 0.95, 1.0, 1.04, 1.06, 1.2, 2.0])


def _series(base, head):
    return SeriesInput("b", (), Side(present=True, samples=list(base)), Side(present=True, samples=list(head)))


@settings(max_examples=80, deadline=None)
@given(base=samples, head=samples, f=factor)
def test_a_status_is_never_given_against_its_definition(base, head, f):
    head = [x * f for x in head]
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
@given(base=samples, head=samples, f=factor, k=st.integers(min_value=-8, max_value=8))
def test_the_decision_depends_on_ratios_only(base, head, f, k):
    head = [x * f for x in head]
    c = 2.0**k
    a = classify(_series(base, head), CFG)
    b = classify(_series([x * c for x in base], [x * c for x in head]), CFG)
    assert (a.status, a.borderline) == (b.status, b.borderline)
    assert a.stats.ratio == b.stats.ratio
