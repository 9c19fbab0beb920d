"""The control kernels' move between base and head rounds, applied to the verdicts
(issue 24: "the gate normalises or refuses when the controls moved").

The controls (:mod:`kernels.control`) are the same code at base and head, measured
in the same interleaved rounds as the suite, so a significant move of a control is
the machine's. No peer tracker has such a rule to reuse (asv's ``continuous`` and
``compare`` read each benchmark alone), hence this module.

The rule, for each series that is not a control and did not run the same compiled
code on both sides (those never block, :func:`harness.gate.decide.same_code_verdict`):

- the *drift range* is ``[r_min, r_max]``, the smallest and largest ratio (head p50 /
  base p50, time) among the controls whose own verdict was SLOWER or FASTER, with 1.0
  added (a control that did not move says the machine may not have moved either);
- the series' ratio ``r`` normalised by the drift lies in ``[r / r_max, r / r_min]``;
- a SLOWER whose normalised ratio can fall within the threshold (``r / r_max <= 1 +
  threshold``) is **refused**: it becomes UNCERTAIN, and the check exits 2 (the machine
  moved by as much as the slowdown: neither "block" nor "pass" is defensible);
- a SAME, FASTER or UNCERTAIN whose normalised ratio can exceed the threshold (``r /
  r_min > 1 + threshold``: the machine got faster during head's rounds and could hide a
  slowdown) is refused the same way;
- any other verdict stands, its reason saying the change normalised by the controls.

Without a control that moved, nothing changes. The drift is that of the first look
(the controls are measured in every check's first rounds, not in the sequential
gate's later looks of the open series alone).
"""

from __future__ import annotations

from dataclasses import replace

from harness.core.model import is_control
from harness.gate.decide import Status, Verdict, _pct


def drift_range(verdicts: dict) -> tuple[float, float, list[str]] | None:
    """``(r_min, r_max, labels)`` of the controls that moved significantly, or ``None``.

    ``verdicts`` maps ``(benchmark, params)`` to the controls' *classified* verdicts
    (before :func:`~harness.gate.decide.same_code_verdict` turns them into SAME):
    a control counts when its status is SLOWER or FASTER and it has a finite ratio.
    The range always includes 1.0.
    """
    moved = [
        v
        for (name, _p), v in verdicts.items()
        if is_control(name)
        and v.status in (Status.SLOWER, Status.FASTER)
        and v.stats is not None
        and v.stats.ratio == v.stats.ratio
        and 0.0 < v.stats.ratio < float("inf")
    ]
    if not moved:
        return None
    ratios = [v.stats.ratio for v in moved]
    return min([1.0, *ratios]), max([1.0, *ratios]), [f"{v.label} {_pct(v.stats.ratio - 1)}" for v in moved]


def apply_drift(v: Verdict, drift: tuple[float, float, list[str]] | None) -> tuple[Verdict, str | None]:
    """The verdict of one series once the controls' move is taken into account.

    Returns ``(verdict, problem or None)``; a problem makes the check exit 2. Controls,
    same-code series, verdicts without a ratio and statuses other than SLOWER, FASTER,
    SAME and UNCERTAIN are returned unchanged, as is everything when ``drift`` is ``None``.
    """
    if drift is None or is_control(v.benchmark) or v.same_code or v.stats is None:
        return v, None
    if v.status not in (Status.SLOWER, Status.FASTER, Status.SAME, Status.UNCERTAIN):
        return v, None
    r = v.stats.ratio
    if not (r == r and 0.0 < r < float("inf")):
        return v, None
    r_min, r_max, labels = drift
    limit = 1.0 + (v.threshold if v.threshold is not None else 0.05)
    low, high = r / r_max, r / r_min
    moved = "; ".join(labels)
    span = f"{_pct(low - 1)}..{_pct(high - 1)}" if low != high else _pct(low - 1)
    if v.status is Status.SLOWER and low <= limit:
        why = (
            f"the controls moved between base and head rounds ({moved}): normalised by them the change is "
            f"{span}, which reaches within the threshold {limit - 1:.0%}; the machine, not the code, may "
            f"explain it"
        )
    elif v.status is not Status.SLOWER and high > limit:
        why = (
            f"the controls moved between base and head rounds ({moved}): normalised by them the change is "
            f"{span}, which reaches beyond the threshold {limit - 1:.0%}; the machine may hide a slowdown"
        )
    else:
        return replace(v, reason=f"{v.reason}; normalised by the controls ({moved}): {span}"), None
    out = replace(v, status=Status.UNCERTAIN, borderline=False, reason=f"{why}; measured {v.reason}")
    return out, f"{v.label}: undecided, the machine moved: {why}"
