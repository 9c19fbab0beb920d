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

from harness.analysis.drift import _row_medians
from harness.analysis.events import STEP_STATUSES
from harness.analysis.model import AnalysisConfig, Direction, Series
from harness.core.model import is_control, point_commits, point_values

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
        Y, used = _panel([series_list[i] for i in rows], commits, config.min_points)
        prow = [rows[u] for u in used]  # panel row -> index into series_list
        events.extend(_scan_group(out, Y, prow, commits, machine, None, MACHINE_EVENT_MIN_SERIES, theta, config))
        by_bench: dict[str, list[int]] = {}
        for r, i in enumerate(prow):
            by_bench.setdefault(series_list[i].key.benchmark, []).append(r)
        for bench, brows in sorted(by_bench.items()):
            if len(brows) >= BENCHMARK_EVENT_MIN_SERIES and len(brows) < len(prow):
                sub = Y[brows]  # a copy: the benchmark's rows with the machine's events taken out
                found = _scan_group(
                    out,
                    sub,
                    [prow[r] for r in brows],
                    commits,
                    machine,
                    bench,
                    BENCHMARK_EVENT_MIN_SERIES,
                    theta,
                    config,
                )
                events.extend(found)
    return events, out


def _scan_group(out: list, Y: np.ndarray, prow: list[int], commits, machine, bench, min_series, theta, config):
    """Events of one panel ``Y`` (a machine's series, or one benchmark's of a
    machine with ``bench``; row ``r`` is ``out[prow[r]]``); the series that
    moved are corrected in ``out`` and in ``Y``."""
    if len(prow) < min_series:
        return []
    found = []
    for ev, members, move in _scan(Y, commits, machine, theta, config.confirm_after - 1, min_series, bench):
        found.append(ev)
        a, b = commits.index(ev["commit_range"][1]), commits.index(ev["back_at"])
        _control_evidence(ev, Y, prow, out, a, b, move)
        inside = set(commits[a:b])
        for m in members:
            out[prow[m]] = _divide_out(out[prow[m]], inside, move)
            Y[m, a:b] -= move
    return found


def _control_evidence(ev: dict, Y: np.ndarray, prow: list[int], out: list, a: int, b: int, move: float) -> None:
    """Add ``controls`` to an event: the move of each control kernel's series
    (``suite.control_*``, :func:`harness.core.model.is_control`) over the event's
    commits ``[a, b)`` against its median of the :data:`LEVEL_POINTS` commits
    before, as a ratio in the bad direction, and ``moved`` (the same way as the
    event, by at least half its median ``move``); and say so in the reason. Frozen
    code that moved with the rest is the evidence that the machine moved."""
    controls = []
    for r, i in enumerate(prow):
        s = out[i]
        if not is_control(s.key.benchmark):
            continue
        inside, before = Y[r, a:b], Y[r, max(0, a - LEVEL_POINTS) : a]
        if not np.isfinite(inside).any() or not np.isfinite(before).any():
            continue
        m = float(np.nanmedian(inside) - np.nanmedian(before))
        moved = m * move > 0 and abs(m) >= abs(move) / 2
        controls.append({"key": s.key.label(), "benchmark": s.key.benchmark, "ratio": math.exp(m), "moved": moved})
    ev["controls"] = controls
    if not controls:
        return
    text = ", ".join(f"{c['benchmark']} x{c['ratio']:.3g}" for c in controls)
    if any(c["moved"] for c in controls):
        ev["reason"] += (
            f"; the control kernels moved with them ({text}): frozen code that moved is the machine's evidence"
        )
    else:
        ev["reason"] += f"; the control kernels did not move ({text}): weaker evidence that it was the machine"


def _panel(group: Sequence[Series], commits: Sequence[str], min_points: int) -> tuple[np.ndarray, list[int]]:
    """Series x commits matrix of oriented log values (NaN where no usable
    value) of the series with at least ``min_points`` values, and their indices."""
    pos = {c: i for i, c in enumerate(commits)}
    rows, used = [], []
    T = len(commits)
    for r, s in enumerate(group):
        cs, vs = point_commits(s.points), point_values(s.points)
        idx = np.fromiter((pos.get(c, T) for c in cs), dtype=np.int64, count=len(cs))
        val = np.fromiter((v if type(v) in (float, int) else np.nan for v in vs), dtype=float, count=len(vs))
        with np.errstate(all="ignore"):
            good = (idx < T) & (val > 0) & (val < math.inf)
        if int(good.sum()) < min_points:
            continue
        row = np.full(T, np.nan)
        row[idx[good]] = np.log(val[good])
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
    if T < LEVEL_POINTS + 2:
        return out
    # window medians, each over series x start commit: win[w][:, u] = median of Y[:, u:u+w]
    win = {w: _window_medians(Y, w) for w in sorted({*range(1, max_len + 1), LEVEL_POINTS})}
    before_all = np.full_like(Y, np.nan)
    before_all[:, LEVEL_POINTS:] = win[LEVEL_POINTS][:, : T - LEVEL_POINTS]  # median of the 5 before t
    # the panel's median move per (L, t), to skip the commits where nothing moved
    moves = {}
    with np.errstate(all="ignore"):
        for L in range(1, max_len + 1):
            d = win[L] - before_all
            d[:, T - L :] = np.nan
            moves[L] = _nanmedian_cols(d)
    biggest = np.nanmax(np.abs(np.vstack([np.nan_to_num(m) for m in moves.values()])), axis=0)
    t = LEVEL_POINTS
    while t < T - 1:
        best = None
        if biggest[t] < theta:
            t += 1
            continue
        before = before_all[:, t]
        for L in range(1, max_len + 1):
            if t + L + 1 > T:
                break
            run = win[L][:, t] - before
            after = (
                win[LEVEL_POINTS][:, t + L] - before if t + L + LEVEL_POINTS <= T else _tail_median(Y, t + L) - before
            )
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
            each = [Y[ok, j] - before[ok] for j in range(t, t + L)]
            each = [float(np.median(e[~np.isnan(e)])) if np.any(~np.isnan(e)) else 0.0 for e in each]
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


def _window_medians(Y: np.ndarray, w: int) -> np.ndarray:
    """``out[:, u]`` = median of ``Y[:, u:u+w]`` ignoring NaN (NaN where the
    window has no value or runs past the end). One sort for every window at
    once (:func:`harness.analysis.drift._row_medians`, NaN for a window without
    values); ``np.nanmedian`` per window cost 30 s on 100 x 900 series."""
    S, T = Y.shape
    out = np.full((S, T), np.nan)
    if T < w:
        return out
    if w == 1:
        out[:] = Y
        return out
    windows = np.lib.stride_tricks.sliding_window_view(Y, w, axis=1)  # (S, T - w + 1, w)
    out[:, : T - w + 1] = _row_medians(windows.reshape(-1, w)).reshape(S, T - w + 1)
    return out


def _tail_median(Y: np.ndarray, u: int) -> np.ndarray:
    """Median of ``Y[:, u:]`` per row ignoring NaN (the newest points, fewer than a window)."""
    return _window_medians(Y[:, u:], Y.shape[1] - u)[:, 0]


def _nanmedian_cols(d: np.ndarray) -> np.ndarray:
    """Median of each column ignoring NaN; NaN for a column without values."""
    return _window_medians(d.T, d.shape[0])[:, 0] if d.shape[0] else np.full(d.shape[1], np.nan)


def label(events: list[dict], excursions: list[dict], findings: Sequence, machine_commits: Mapping) -> None:
    """Mark the excursions and the step findings that start inside an event
    (from its first commit to the first one back; of its benchmark only, for a
    benchmark event): excursion rows get its
    ``id`` in ``machine_event``; a step finding keeps its status (it held with
    the event's move taken out) and gets a ``machine_event`` annotation."""
    for ev in events:
        pos = {c: i for i, c in enumerate(machine_commits.get(ev["machine"]) or ())}
        lo, hi = pos[ev["commit_range"][1]], pos[ev["back_at"]]
        bench = ev.get("benchmark")  # a benchmark event touches that benchmark's series only
        for row in excursions:
            at = pos.get(row["commit_range"][1])
            if row["key"]["machine"] != ev["machine"] or (bench and row["key"]["benchmark"] != bench):
                continue
            if at is not None and lo <= at <= hi:
                row["machine_event"] = ev["id"]
        for f in findings:
            if f.key is None or f.key.machine != ev["machine"] or f.status.value not in STEP_STATUSES:
                continue
            if bench and f.key.benchmark != bench:
                continue
            at = pos.get(f.commit_after)
            if at is not None and lo <= at <= hi:
                f.annotations.append({"kind": "machine_event", "text": ev["reason"], "evidence": {"id": ev["id"]}})
