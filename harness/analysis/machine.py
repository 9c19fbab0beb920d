"""Machine events: many series of one machine moving together and coming back.

A code change moves the series it touches and the new level holds; a slow
phase of the host (a noisy neighbour, a throttled clock, a shared cache) moves
most series of that machine at once for a few commits and then lets them
return. asv and Otava test each series alone, so such a phase reads as N
regressions and N improvements; here it is one event with its evidence.

Why our own: no kept change-point library tests a *panel* of series for a
shared transient (ruptures, Otava and asv's step detection are univariate).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from harness.analysis.events import STEP_STATUSES
from harness.analysis.model import AnalysisConfig

#: An event needs at least this many series of the machine measured at its commits...
MACHINE_EVENT_MIN_SERIES = 3
#: ...and at least this share of them moving the same way by half the median move or more.
MACHINE_EVENT_MIN_AGREE = 2.0 / 3.0
#: Points either side of a possible event that give a series' level before and after it.
LEVEL_POINTS = 5


def machine_events(
    analyses: Sequence,
    excursions: list[dict],
    findings: Sequence,
    machine_commits: Mapping[str, Sequence[str]],
    config: AnalysisConfig = AnalysisConfig(),
) -> list[dict]:
    """Find machine-wide transient moves and label what they touch.

    For each machine, the tested series (oriented log values, up = worse) are
    lined up on the machine's commits. A run of ``L = 1 .. confirm_after - 1``
    commits starting at ``t`` is an event when, over the series with values
    there (at least :data:`MACHINE_EVENT_MIN_SERIES`): the median move of the
    run against each series' median of the :data:`LEVEL_POINTS` commits before
    reaches ``min_effect``; at least :data:`MACHINE_EVENT_MIN_AGREE` of the
    series moved the same way by at least half that median; every commit of
    the run moved (its median over the series is at least half the move); and the median
    level of the commits after the run is back within a third of the move (a
    move that holds is a change, even when it touches every series).

    Side effects: excursion rows (:func:`harness.analysis.events.excursion_rows`)
    inside an event get its ``id`` in ``machine_event``; a step finding of the
    machine whose new level starts inside the event keeps its status and gets a
    ``machine_event`` annotation (its commit may be the event's, not the code's).

    Returns one dict per event, oldest first per machine: ``id``
    (``me-<machine>-<first commit 12>``), ``machine``, ``commit_range`` (last
    commit before, first commit of the event), ``back_at`` (first commit after
    it), ``length`` (commits), ``n_series`` (series that moved with it),
    ``n_tested`` (series with values there), ``median_ratio`` (median move as a
    time ratio: > 1 slower), ``direction`` and ``reason``.
    """
    theta = math.log1p(config.min_effect)
    out: list[dict] = []
    by_machine: dict[str, list] = {}
    for a in analyses:
        if a.n_positions > 0 and a.n_valid:
            by_machine.setdefault(a.series.key.machine, []).append(a)
    for machine, group in sorted(by_machine.items()):
        commits = list(machine_commits.get(machine) or ())
        if len(group) < MACHINE_EVENT_MIN_SERIES or len(commits) < 2 * LEVEL_POINTS:
            continue
        Y = _panel(group, commits)
        out.extend(_scan(Y, commits, machine, theta, config.confirm_after - 1))
    _label(out, excursions, findings, machine_commits)
    return out


def _panel(group: Sequence, commits: Sequence[str]) -> np.ndarray:
    """Series x commits matrix of oriented log values (NaN where no value)."""
    pos = {c: i for i, c in enumerate(commits)}
    Y = np.full((len(group), len(commits)), np.nan)
    for r, a in enumerate(group):
        y = np.log(np.asarray(a.valid_values, dtype=float))
        if a.series.direction.value == "higher_is_better":
            y = -y
        for c, v in zip(a.valid_commits, y):
            j = pos.get(c)
            if j is not None:
                Y[r, j] = v
    return Y


def _scan(Y: np.ndarray, commits: Sequence[str], machine: str, theta: float, max_len: int) -> list[dict]:
    """Events of one machine's panel (see :func:`machine_events`)."""
    T = Y.shape[1]
    out = []
    t = LEVEL_POINTS
    while t < T - 1:
        before = _nanmedian_rows(Y[:, t - LEVEL_POINTS : t])
        best = None
        for L in range(1, max_len + 1):
            if t + L + 1 > T:
                break
            run = _nanmedian_rows(Y[:, t : t + L]) - before
            after = _nanmedian_rows(Y[:, t + L : t + L + LEVEL_POINTS]) - before
            ok = ~np.isnan(run) & ~np.isnan(after)
            if ok.sum() < MACHINE_EVENT_MIN_SERIES:
                continue
            move = float(np.median(run[ok]))
            if abs(move) < theta:
                continue
            agree = int(np.sum(run[ok] * np.sign(move) >= 0.5 * abs(move)))
            back = float(np.median(after[ok]))
            # every commit of the run moved, not only most of them (else the
            # run starts one commit early and its median still reads moved)
            each = [float(np.nanmedian(Y[ok, j] - before[ok])) for j in range(t, t + L)]
            if min(e * np.sign(move) for e in each) < 0.5 * abs(move):
                continue
            if agree >= MACHINE_EVENT_MIN_AGREE * ok.sum() and abs(back) <= abs(move) / 3.0:
                best = (L, move, agree, int(ok.sum()))  # the longest run that passes
        if best is None:
            t += 1
            continue
        L, move, agree, n = best
        direction = "slower" if move > 0 else "faster"
        first, back_at = commits[t], commits[t + L]
        out.append(
            {
                "id": f"me-{machine}-{first[:12]}",
                "machine": machine,
                "commit_range": [commits[t - 1], first],
                "back_at": back_at,
                "length": L,
                "n_series": agree,
                "n_tested": n,
                "median_ratio": math.exp(move),
                "direction": direction,
                "reason": (
                    f"{agree} of the {n} series of {machine} measured there moved {direction} together "
                    f"(median x{math.exp(move):.3g}) for {L} commit{'s' if L > 1 else ''} from {first[:12]} "
                    f"and came back at {back_at[:12]}: the machine, not the code"
                ),
            }
        )
        t += L + 1
    return out


def _nanmedian_rows(a: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN; NaN for a row without values."""
    out = np.full(a.shape[0], np.nan)
    has = ~np.all(np.isnan(a), axis=1)
    if has.any():
        out[has] = np.nanmedian(a[has], axis=1)
    return out


def _label(events: list[dict], excursions: list[dict], findings: Sequence, machine_commits: Mapping) -> None:
    """Mark the excursions and step findings that start inside an event."""
    for ev in events:
        pos = {c: i for i, c in enumerate(machine_commits.get(ev["machine"]) or ())}
        lo, hi = pos[ev["commit_range"][1]], pos[ev["back_at"]]
        for row in excursions:
            at = pos.get(row["commit_range"][1])
            if row["key"]["machine"] == ev["machine"] and at is not None and lo <= at <= hi:
                row["machine_event"] = ev["id"]
        for f in findings:
            if f.key is None or f.key.machine != ev["machine"] or f.status.value not in STEP_STATUSES:
                continue
            at = pos.get(f.commit_after)
            if at is not None and lo <= at <= hi:
                f.annotations.append({"kind": "machine_event", "text": ev["reason"], "evidence": {"id": ev["id"]}})
