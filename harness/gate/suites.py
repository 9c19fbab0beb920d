"""Base's suite against head's, for ``kernelwatch check`` (issue 29): each side's
suite comes from its own commit (:func:`harness.gate.asvrun.suite_conf`), so what
one side lacks is named with its cause.

- :func:`acknowledge_removals`: a benchmark head's suite dropped while importing
  cleanly is BROKEN unless a ``Perf-Benchmark-Removed`` trailer of ``base..head``
  names it; then it is REMOVED, with the commit and the reason.
- :func:`unmeasured_on_head`: a case of base's suite that head did not measure
  although head's suite still lists it (head's ``setup`` raising
  ``NotImplementedError``, asv's skip: NaN on both sides, since head's suite
  measures both), or whose benchmark lost every one of base's parameter
  combinations, is BROKEN unless a ``Perf-Benchmark-Removed`` trailer names it
  (hostile trial h29t F4); one combination gone while others of its benchmark are
  measured (a provider renamed) is REMOVED.
- :func:`name_base_import_errors`: a NEW series whose benchmark base's suite lacks
  because base's op or benchmark module fails to import (head fixes it) says so.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.model import GateStatus as Status
from harness.gate.decide import Acknowledgement, Verdict
from harness.gate.probe import DELETED_ON_HEAD, op_of, probe_suite
from harness.gate.settings import REMOVAL_TRAILER

#: How :func:`unmeasured_on_head` starts the reason of a case head's suite lists but
#: did not measure (skipped); a removal trailer may acknowledge it.
SKIPPED_ON_HEAD = "in base's suite and head's, not measured on head (skipped?)"
#: ... and of a case whose benchmark kept none of base's parameter combinations.
EMPTIED_ON_HEAD = "in base's suite; head's suite lists none of this benchmark's parameter combinations"
#: The reasons a ``Perf-Benchmark-Removed`` trailer may turn into REMOVED.
ACKNOWLEDGEABLE = (DELETED_ON_HEAD, SKIPPED_ON_HEAD, EMPTIED_ON_HEAD)
_BLOCKS = (
    "; a case head does not measure cannot be compared, so it blocks unless a commit of the pull "
    f"request says it was removed on purpose (a {REMOVAL_TRAILER} trailer)"
)


def unmeasured_on_head(key: tuple, head_grid: set | None, measured: set) -> tuple[Status, str]:
    """Status and reason of ``key`` = ``(benchmark, params)``, a case of base's suite
    (base's discovery) that head has no value for.

    ``head_grid`` is head's discovered grid (``None``: head's suite could not be
    listed), ``measured`` the keys head has a result for. BROKEN, with a reason
    starting with :data:`SKIPPED_ON_HEAD`, when head's suite lists the case (asv
    records NaN, "skipped", for a ``setup`` raising ``NotImplementedError``; head's
    suite measures base too, so both sides are NaN) or head's grid is unknown;
    BROKEN with :data:`EMPTIED_ON_HEAD` when head lists none of the benchmark's
    combinations that base has; REMOVED when only this combination is gone and
    others of the same benchmark are measured on head (a provider renamed)."""
    bname = key[0]
    if head_grid is None:
        return Status.BROKEN, SKIPPED_ON_HEAD + ": head's suite could not be listed" + _BLOCKS
    if key in head_grid:
        return Status.BROKEN, (
            SKIPPED_ON_HEAD + ": asv stored no value for head (NaN: a setup raising "
            "NotImplementedError, asv's skip)" + _BLOCKS
        )
    if not any(k[0] == bname for k in measured):
        return Status.BROKEN, EMPTIED_ON_HEAD + _BLOCKS
    return Status.REMOVED, "in base's suite, not in head's: this parameter combination is gone (not measured)"


def acknowledge_removals(verdicts: list[Verdict], removals: list[Acknowledgement]) -> list[str]:
    """Turn each BROKEN verdict of a benchmark that head's suite dropped while
    importing cleanly or that head did not measure (reason starting with one of
    :data:`ACKNOWLEDGEABLE`) and that one of ``removals`` matches (its pattern on the benchmark name or the
    series label) into REMOVED, acknowledged, in place. An import error on head
    stays BROKEN whatever a trailer says: that is a breakage, not a removal.
    Returns one warning per acknowledged series."""
    warnings = []
    for v in verdicts:
        if v.status is not Status.BROKEN or not v.reason.startswith(ACKNOWLEDGEABLE):
            continue
        a = next((a for a in removals if a.matches(v.benchmark, v.label)), None)
        if a is None:
            continue
        v.status, v.acknowledged = Status.REMOVED, a
        v.reason = f"removed from head's suite on purpose: {REMOVAL_TRAILER} in {a.commit[:12]} ({a.reason})"
        warnings.append(f"{v.label}: {v.reason}")
    return warnings


def name_base_import_errors(
    root: Path, base_sha: str, work: Path, base_meta: dict, verdicts: list[Verdict], quick: bool
) -> list[str]:
    """For each NEW verdict whose benchmark base's own suite lacks, import base's
    suite in a clean export (:func:`harness.gate.probe.probe_suite`); where base's
    op or benchmark module fails to import, append the error to the verdict's
    reason (in place). Returns one warning per failing op or module, naming base's
    commit and the error; ``[]`` when there is nothing to explain."""
    news = [v for v in verdicts if v.status is Status.NEW and v.benchmark not in base_meta]
    if not news:
        return []
    ops = sorted({o for o in (op_of(v.benchmark) for v in news) if o})
    probe = probe_suite(root, base_sha, work, ops, quick=quick)
    warnings, said = [], set()
    for v in news:
        op, mod = op_of(v.benchmark), v.benchmark.split(".", 1)[0]
        why = (probe["ops"].get(op) if op else None) or probe["modules"].get(mod) or probe["ops"].get("*")
        if not why:
            continue
        lead = f"op {op!r}" if op and probe["ops"].get(op) else f"benchmark module {mod!r}"
        v.reason += f"; base's suite lacks it: {lead} fails to import on base: {why}"
        if lead not in said:
            said.add(lead)
            warnings.append(f"on base {base_sha[:12]}, {lead} fails to import (head fixes it): {why}")
    return warnings
