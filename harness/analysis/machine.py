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
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from harness.analysis.events import STEP_STATUSES
from harness.analysis.model import AnalysisConfig, Direction, Series

#: An event needs at least this many series of the machine measured at its commits...
MACHINE_EVENT_MIN_SERIES = 3
#: ...and at least this share of them moving the same way by half the median move or more.
MACHINE_EVENT_MIN_AGREE = 2.0 / 3.0
#: Points either side of a possible event that give a series' level before and after it.
LEVEL_POINTS = 5
#: A benchmark-wide event (one benchmark's series of one machine, the rest quiet)
#: needs at least this many of its series: a slow run of that benchmark's process.
BENCHMARK_EVENT_MIN_SERIES = 6


def detect(
    series_list: Sequence[Series],
    machine_commits: Mapping[str, Sequence[str]],
    config: AnalysisConfig = AnalysisConfig(),
) -> tuple[list[dict], list[Series]]:
    """Machine events of a run, and the series with each event's move taken out.

    For each machine, the series with at least ``min_points`` usable values
    (oriented log values, up = worse) are lined up on the machine's commits. A
    run of ``L = 1 .. confirm_after - 1`` commits starting at ``t`` is an event
    when, over the series with values there (at least
    :data:`MACHINE_EVENT_MIN_SERIES`): the median move of the run against each
    series' median of the :data:`LEVEL_POINTS` commits before reaches
    ``min_effect``; at least :data:`MACHINE_EVENT_MIN_AGREE` of the series moved
    the same way by at least half that median; every commit of the run moved
    (its median is at least half the move); and the median level of the
    commits after the run is back within a third of the move (a move that
    holds is a change, even when it touches every series). The longest such
    run is the event.

    The series that moved with an event have its median move divided out of
    their values (and samples) inside it before change detection, as a control
    kernel's move would be: the phase then reads as nothing, an outlier beside
    it as an outlier, and a real step inside it lands on its own commit.

    Returns ``(events, series)``: one dict per event, oldest first per machine,
    ``id`` (``me-<machine>-<first commit 12>``), ``machine``, ``commit_range``
    (last commit before, first commit of the event), ``back_at`` (first commit
    after it), ``length`` (commits), ``n_series`` (series that moved with it and
    were corrected), ``n_tested`` (series with values there), ``median_ratio``
    (the median move as a ratio of the bad direction: > 1 worse), ``direction``
    (``slower`` / ``faster``), ``reason``; and ``series_list`` with the moved
    series replaced by their corrected copies (same keys, same order).
    """
    theta = math.log1p(config.min_effect)
    events: list[dict] = []
    out = list(series_list)
    by_machine: dict[str, list[int]] = {}
    for i, s in enumerate(series_list):
        by_machine.setdefault(s.key.machine, []).append(i)
    for machine, rows in sorted(by_machine.items()):
        commits = list(machine_commits.get(machine) or ())
        if len(rows) < MACHINE_EVENT_MIN_SERIES or len(commits) < 2 * LEVEL_POINTS:
            continue
        events.extend(_scan_group(out, rows, commits, machine, None, MACHINE_EVENT_MIN_SERIES, theta, config))
        by_bench: dict[str, list[int]] = {}
        for i in rows:
            by_bench.setdefault(out[i].key.benchmark, []).append(i)
        for bench, brows in sorted(by_bench.items()):
            if len(brows) >= BENCHMARK_EVENT_MIN_SERIES and len(brows) < len(rows):
                events.extend(
                    _scan_group(out, brows, commits, machine, bench, BENCHMARK_EVENT_MIN_SERIES, theta, config)
                )
    return events, out


def _scan_group(out: list, rows: list[int], commits, machine, bench, min_series, theta, config) -> list[dict]:
    """Events of one panel (a machine's series, or one benchmark's of a
    machine with ``bench``); the series that moved are corrected in ``out``."""
    Y, used = _panel([out[i] for i in rows], commits, config.min_points)
    if len(used) < min_series:
        return []
    found = []
    for ev, members, move in _scan(Y, commits, machine, theta, config.confirm_after - 1, min_series, bench):
        found.append(ev)
        inside = set(commits[commits.index(ev["commit_range"][1]) : commits.index(ev["back_at"])])
        for m in members:
            i = rows[used[m]]
            out[i] = _divide_out(out[i], inside, move)
    return found


def _panel(group: Sequence[Series], commits: Sequence[str], min_points: int) -> tuple[np.ndarray, list[int]]:
    """Series x commits matrix of oriented log values (NaN where no usable
    value) of the series with at least ``min_points`` values, and their indices."""
    pos = {c: i for i, c in enumerate(commits)}
    rows, used = [], []
    for r, s in enumerate(group):
        row = np.full(len(commits), np.nan)
        for p in s.points:
            v, j = p.value, pos.get(p.commit)
            if j is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf:
                row[j] = math.log(v)
        if np.sum(~np.isnan(row)) >= min_points:
            rows.append(-row if s.direction is Direction.HIGHER_IS_BETTER else row)
            used.append(r)
    return (np.array(rows) if rows else np.zeros((0, len(commits)))), used


def _divide_out(s: Series, inside: set, move: float) -> Series:
    """``s`` with the oriented log move ``move`` taken out of its points inside."""
    f = math.exp(-move if s.direction is Direction.LOWER_IS_BETTER else move)
    pts = []
    for p in s.points:
        if p.commit in inside and isinstance(p.value, (int, float)) and not isinstance(p.value, bool):
            p = replace(
                p,
                value=p.value * f,
                ci=tuple(x * f for x in p.ci) if p.ci else p.ci,
                samples=tuple(x * f for x in p.samples) if p.samples else p.samples,
            )
        pts.append(p)
    return replace(s, points=pts)


def _scan(
    Y: np.ndarray,
    commits: Sequence[str],
    machine: str,
    theta: float,
    max_len: int,
    min_series: int = MACHINE_EVENT_MIN_SERIES,
    bench: str | None = None,
) -> list[tuple]:
    """Events of one panel (see :func:`detect`) as ``(event, members, move)``:
    ``members`` the panel rows that moved with it, ``move`` its median (oriented
    log). ``bench``: the panel is that benchmark's series of ``machine``."""
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
            if ok.sum() < min_series:
                continue
            move = float(np.median(run[ok]))
            if abs(move) < theta:
                continue
            moved = ok & (np.nan_to_num(run) * np.sign(move) >= 0.5 * abs(move))
            back = float(np.median(after[ok]))
            # every commit of the run moved, not only most of them (else the
            # run starts one commit early and its median still reads moved)
            each = [float(np.nanmedian(Y[ok, j] - before[ok])) for j in range(t, t + L)]
            if min(e * np.sign(move) for e in each) < 0.5 * abs(move):
                continue
            if moved.sum() >= MACHINE_EVENT_MIN_AGREE * ok.sum() and abs(back) <= abs(move) / 3.0:
                best = (L, move, np.flatnonzero(moved).tolist(), int(ok.sum()))  # the longest run that passes
        if best is None:
            t += 1
            continue
        L, move, members, n = best
        direction = "slower" if move > 0 else "faster"
        first, back_at = commits[t], commits[t + L]
        scope = f"{bench} on {machine}" if bench else machine
        ev = {
            "id": f"me-{machine}-{first[:12]}" if bench is None else f"be-{machine}-{bench}-{first[:12]}",
            "machine": machine,
            "scope": "benchmark" if bench else "machine",
            "benchmark": bench,
            "commit_range": [commits[t - 1], first],
            "back_at": back_at,
            "length": L,
            "n_series": len(members),
            "n_tested": n,
            "median_ratio": math.exp(move),
            "direction": direction,
            "reason": (
                f"{len(members)} of the {n} series of {scope} measured there moved {direction} together "
                f"(median x{math.exp(move):.3g}) for {L} commit{'s' if L > 1 else ''} from {first[:12]} "
                f"and came back at {back_at[:12]}: "
                + ("that benchmark's run, not the code" if bench else "the machine, not the code")
                + "; their points there are divided by the median move before change detection"
            ),
        }
        out.append((ev, members, move))
        t += L + 1
    return out


def _nanmedian_rows(a: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN; NaN for a row without values."""
    out = np.full(a.shape[0], np.nan)
    has = ~np.all(np.isnan(a), axis=1)
    if has.any():
        out[has] = np.nanmedian(a[has], axis=1)
    return out


def label(events: list[dict], excursions: list[dict], findings: Sequence, machine_commits: Mapping) -> None:
    """Mark the excursions and the step findings that start inside an event
    (from its first commit to the first one back): excursion rows get its
    ``id`` in ``machine_event``; a step finding keeps its status (it held with
    the event's move taken out) and gets a ``machine_event`` annotation."""
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
