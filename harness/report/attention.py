"""Triage: what the overview and the findings page lead with.

Events (one per commit that moved something, from the analysis report's
``events[]``, see the analysis/site contract; :func:`fallback_events` groups
the findings by commit range when a report has none), the health lists
(series too noisy to judge, values that fail a guard, points measured under
contention, series with not enough history), the collapse of benchmarks that
stopped while others started at the same commit into one "renamed or replaced"
row, the current series (those still reporting), and the default baseline of
the kernel x GPU matrix (the oldest commit the current series have).

Pure functions of the :class:`harness.report.model.SiteModel`; they return
finished strings and numbers for the templates.
"""

from __future__ import annotations

import math

import numpy as np

from harness.core.model import (
    CONFIRMED_REGRESSIONS,
    FASTER_STATUSES,
    SLOWER_STATUSES,
    EventStatus,
    RowStatus,
    Status,
)
from harness.report import bookkeeping
from harness.report import fmt as F
from harness.report.model import SAMPLES_AGREE_TAG, STATUS_CLASS, SiteModel, key_tuple, samples_note

#: Per-series statuses that claim a slowdown (``divergent_change`` only when a machine got slower).
SLOWER = SLOWER_STATUSES
FASTER = FASTER_STATUSES
#: Findings that say a series changed at a commit: what an event groups.
EVENT_STATUSES = SLOWER + FASTER + (Status.VERSION_CHANGE, Status.ENV_CHANGE)
#: Event statuses that lead the overview; the others are listed below them, folded.
LEAD_EVENTS = (EventStatus.REGRESSION, EventStatus.PENDING, EventStatus.MIXED)
EVENT_CLASS = {
    EventStatus.REGRESSION: "bad",
    EventStatus.DIVERGENT_CHANGE: "warn",
    EventStatus.PENDING: "warn",
    EventStatus.MIXED: "bad",
    EventStatus.IMPROVEMENT: "good",
    EventStatus.BENCHMARK_CHANGED: "note",
    EventStatus.ENVIRONMENT_CHANGED: "note",
}
#: Series named per event on the overview (the commit page has every one).
EVENT_SERIES_SHOWN = 6
#: Share of the current series the default matrix baseline must cover.
BASELINE_COVERAGE = 0.9


def _magnitude(m) -> tuple[float | None, float | None]:
    """``(ratio, change)`` of an event series' magnitude (a dict like a finding's, or a bare ratio)."""
    if isinstance(m, dict):
        ratio, change = F.num(m.get("ratio")), F.num(m.get("change"))
    else:
        ratio, change = F.num(m), None
    if change is None and ratio is not None:
        change = ratio - 1.0
    return ratio, change


def _event_status(statuses: list[str]) -> str:
    slower = [s for s in statuses if s in SLOWER]
    faster = [s for s in statuses if s in FASTER]
    if slower and faster:
        return EventStatus.MIXED
    if slower:
        return EventStatus.PENDING if all(s == EventStatus.PENDING for s in slower) else EventStatus.REGRESSION
    if faster:
        return EventStatus.IMPROVEMENT
    if statuses and all(s == Status.ENV_CHANGE for s in statuses):
        return EventStatus.ENVIRONMENT_CHANGED
    return EventStatus.BENCHMARK_CHANGED


def fallback_events(report: dict | None) -> list[dict]:
    """Events in the shape of the contract's ``events[]``, made from ``findings[]``
    by grouping the change findings (:data:`EVENT_STATUSES`) on their commit
    range; for reports written before the analysis emitted events."""
    groups: dict[tuple, dict] = {}
    for i, f in enumerate((report or {}).get("findings") or []):
        if not isinstance(f, dict) or f.get("status") not in EVENT_STATUSES:
            continue
        cr = f.get("commit_range")
        if not isinstance(cr, list) or len(cr) != 2 or not all(isinstance(c, str) for c in cr):
            continue
        ev = groups.setdefault(
            tuple(cr),
            {"id": f"ev-{cr[1][:8]}", "commit_range": list(cr), "series": [], "machines": [], "annotations": []},
        )
        ratio, change = _magnitude(f.get("magnitude"))
        st = str(f["status"])
        direction = "slower" if st in SLOWER else "faster" if st in FASTER else None
        ev["series"].append(
            {
                "key": f.get("key"),
                "status": st,
                "magnitude": f.get("magnitude"),
                "direction": direction,
                "finding_index": i,
                "reason": f.get("reason"),
            }
        )
        m = (f.get("key") or {}).get("machine") if isinstance(f.get("key"), dict) else None
        if m and m not in ev["machines"]:
            ev["machines"].append(m)
        if st in (Status.VERSION_CHANGE, Status.ENV_CHANGE):
            kind = EventStatus.BENCHMARK_CHANGED if st == Status.VERSION_CHANGE else Status.ENV_CHANGE
            if not any(a["kind"] == kind for a in ev["annotations"]):
                ev["annotations"].append({"kind": kind, "text": str(f.get("reason") or ""), "evidence": None})
    out = []
    for ev in groups.values():
        ev["status"] = _event_status([s["status"] for s in ev["series"]])
        ev["n_slower"] = sum(1 for s in ev["series"] if s["direction"] == "slower")
        ev["n_faster"] = sum(1 for s in ev["series"] if s["direction"] == "faster")
        ratios = [_magnitude(s["magnitude"])[0] for s in ev["series"] if s["direction"] == "slower"]
        ratios = [r for r in ratios if r is not None]
        ev["max_magnitude"] = max(ratios) if ratios else None
        out.append(ev)
    return out


def _one_divergence_per_case(series: list[dict]) -> list[dict]:
    """An event's series with the divergences of one case (every pair of
    machines that diverged at this commit) as one row, the largest kept,
    ``n`` the pairs it stands for: a divergence is listed once per commit."""
    out, seen = [], {}
    for r in series:
        if r["status"] not in DIVERGENT:
            out.append(r)
            continue
        k = (r["status"], r["case"])
        if k in seen:
            seen[k]["n"] += 1
            continue
        seen[k] = r = dict(r)
        out.append(r)
    return out


#: Statuses listed once per case in an event (one per pair of machines in the report).
DIVERGENT = (Status.DIVERGENT_CHANGE,)


def _event_series(model: SiteModel, ev: dict, findings: list, undone: dict | None = None) -> list[dict]:
    """The series rows of one event (label, link, status, doubt tags, change in
    :func:`harness.report.fmt.change_text`, reason), slower first, largest
    first, one row per diverging case (:func:`_one_divergence_per_case`)."""
    series = []
    for s in ev.get("series") or []:
        if not isinstance(s, dict):
            continue
        kd = s.get("key") if isinstance(s.get("key"), dict) else None
        if kd is not None and s.get("timing") is not None and kd.get("timing") is None:
            kd = dict(kd, timing=s["timing"])  # the contract keeps the timing method beside the key
        k = key_tuple(kd)
        sv = model.by_key.get(k) if k else None
        if sv is None and k is not None:  # a key without its timing method
            sv = next((v for kk, v in model.by_key.items() if kk[:3] == k[:3]), None)
        ratio, change = _magnitude(s.get("magnitude"))
        reason = s.get("reason")
        fi = s.get("finding_index")
        own = findings[fi] if isinstance(fi, int) and 0 <= fi < len(findings) and isinstance(findings[fi], dict) else {}
        if reason is None:
            reason = own.get("reason")
        reason = (undone or {}).get((k, (own.get("commit_range") or [None, None])[-1]), reason)
        tags = tag_badges(model, sv.key) if sv else []
        note = samples_note(own, ((model.report or {}).get("config") or {}).get("sample_alpha"))
        if note:  # the samples test did not tell the two commits apart: not evidence yet
            tags.append(F.badge(SAMPLES_AGREE_TAG, note, css="warn"))
        st = str(s.get("status") or "")
        label = (
            f"{sv.machine} / {sv.label}"
            if sv
            else f"{(s.get('key') or {}).get('machine', '?')} / {(s.get('key') or {}).get('benchmark', '?')}"
        )
        series.append(
            {
                "label": label,
                "key": sv.key if sv else k,
                "href": sv.href if sv else None,
                "status": st,
                "n": 1,
                "case": (sv.benchmark, sv.params) if sv else label,
                "machine": sv.machine if sv else None,
                "tags": tags,
                "cls": STATUS_CLASS.get(st, "note"),
                "change": F.change_text(change, sv.higher if sv else None),
                "abs_change": abs(change) if change is not None else 0.0,
                "direction": str(s.get("direction") or ""),
                "reason": str(reason or ""),
                "annotations": own.get("annotations") or [],
            }
        )
    series.sort(key=lambda r: (r["direction"] != "slower", -r["abs_change"], r["label"]))
    return _one_divergence_per_case(series)


def _left_status(series: list[dict]) -> str:
    """The status of an event from the series left once its bookkeeping is
    counted under Health: none left, :data:`~harness.report.bookkeeping.HEALTH_EVENT`
    (no event); divergences only, a divergence (not "benchmark_changed");
    else :func:`_event_status`."""
    left = {r["status"] for r in series}
    if not left:
        return bookkeeping.HEALTH_EVENT
    if len(left) == 1 and left <= set(DIVERGENT):
        return left.pop()
    return _event_status([r["status"] for r in series])


def events(model: SiteModel) -> list[dict]:
    """The report's events (or :func:`fallback_events`) as rows for the pages, newest first.

    Each row: status and class, commit range (full and short hashes, whether
    each has a page), the head commit's subject and date, machines, counts of
    slower and faster series, the worst slowdown, the first
    :data:`EVENT_SERIES_SHOWN` series (label, link, change, status) and the
    annotations (benchmark or environment changes that explain the step).
    """
    report = model.report
    if report is None:
        return []
    raw = report.get("events")
    source = "analysis"
    if not isinstance(raw, list):
        raw, source = fallback_events(report), "grouped from the findings"
    findings = report.get("findings") or []
    # a step that the newest commits may undo says so in the findings rows
    # (harness.report.model._note_undoing); the events show the same words
    undone = {(r["skey"], r["c1"]): r["reason"] for r in model.findings if r.get("undone_by")}
    rows = []
    for ev in raw:
        if not isinstance(ev, dict):
            continue
        cr = list(ev.get("commit_range") or []) + [None, None]
        c0 = cr[0] if isinstance(cr[0], str) else None
        c1 = cr[1] if isinstance(cr[1], str) else None
        every = _event_series(model, ev, findings, undone)
        # bookkeeping series (a pending change of a series that stopped long ago, ...) are counted under Health
        series = [r for r in every if not bookkeeping.is_health_series(model, r["status"], r["key"], r["annotations"])]
        n_health = len(every) - len(series)
        st = str(ev.get("status") or _event_status([s["status"] for s in series]))
        if n_health:
            st = _left_status(series)
        if series and all(r["status"] == Status.PENDING for r in series):
            st = EventStatus.PENDING  # unconfirmed both ways is no "mixed" red: nothing is confirmed yet
        worst = F.num(ev.get("max_magnitude"))
        slow_rows = [r for r in series if r["direction"] == "slower"]
        # the machine of the worst slowdown: "worst +4.8% slower on A, B" read as if both
        # machines got 4.8% slower, where B got faster (a newcomer on OpenBLAS, 2026-12-07)
        worst_row = max(slow_rows, key=lambda r: r["abs_change"]) if slow_rows else None
        head = model.commits[model.cidx[c1]] if c1 in model.cidx else None
        ann = [
            {"kind": str(a.get("kind") or ""), "text": str(a.get("text") or "")}
            for a in ev.get("annotations") or []
            if isinstance(a, dict)
        ]
        for m in sorted({r["machine"] for r in series if r["machine"]}):
            for n in env_notes(model, m, c0, c1):
                if n not in ann:
                    ann.append(n)
        machines = [str(m) for m in ev.get("machines") or []] or sorted({s["label"].split(" / ")[0] for s in series})
        if n_health:  # the machines of the series listed, not of those counted under Health
            machines = sorted({s["label"].split(" / ")[0] for s in series})
        n_doubt = sum(1 for r in series if r["tags"])
        # Counted from the series' own statuses: a pending, divergent or improved series is not "slower".
        n_slower = sum(1 for r in series if r["status"] in CONFIRMED_REGRESSIONS)
        pend = [r for r in series if r["status"] == Status.PENDING]
        n_pending_faster = sum(
            1 for r in pend if r["direction"] == "faster" or r["change"].endswith(("faster", "better"))
        )
        n_pending = len(pend) - n_pending_faster
        rows.append(
            {
                "doubt": F.badge(
                    f"{n_doubt} of {len(series)} noisy or contended",
                    "series listed under Health as too noisy to judge or measured under contention: "
                    "their change is not a confirmed one",
                    css="warn",
                )
                if n_doubt
                else "",
                "id": str(ev.get("id") or f"ev-{(c1 or '')[:8]}"),
                "status": st,
                "cls": EVENT_CLASS.get(st, "note"),
                "c0": c0 if c0 in model.cidx else None,
                "c1": c1 if c1 in model.cidx else None,
                "c0_short": (c0 or "")[:8],
                "c1_short": (c1 or "")[:8],
                "subject": head["subject"] if head else "",
                "date": head["date"] if head else "",
                "machines": ", ".join(machines),
                "n_slower": n_slower,
                "n_pending": n_pending,
                "n_pending_faster": n_pending_faster,
                "n_faster": sum(1 for r in series if r["status"] in FASTER),
                "n_series": len(series),
                "n_health": n_health,
                "worst": worst_row["change"]
                if worst_row
                else (F.change_text(worst - 1.0) if worst is not None else "n/a"),
                "worst_on": (worst_row or {}).get("machine") or "",
                "series": series[:EVENT_SERIES_SHOWN],
                "annotations": ann,
                "order": model.cidx.get(c1, model.cidx.get(c0, -1)),
                "source": source,
            }
        )
    rows.sort(key=lambda r: (-r["order"], r["id"]))
    return rows


# --------------------------------------------------------------------------- findings


def _new_series_by_machine(model: SiteModel) -> dict[str, list[tuple[int, str]]]:
    """Per machine, ``(global index of its first valid point, benchmark)`` of every series."""
    out: dict[str, list] = {}
    for s in model.series:
        valid = np.flatnonzero(~np.isnan(s.v))
        if valid.size:
            out.setdefault(s.machine, []).append((int(s.gx[valid[0]]), s.benchmark))
    return out


#: Findings of one machine and commit range that are listed as one row per benchmark.
GROUPED = (Status.MISSING, Status.VERSION_CHANGE, Status.ENV_CHANGE, RowStatus.INSUFFICIENT_HISTORY)


def _names(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def collapse(model: SiteModel, findings: list[dict]) -> list[dict]:
    """Findings as triage rows: the ``missing`` findings of one machine over the
    same commits become one ``renamed_or_replaced`` row when series of that
    machine started at the commit where they stopped (both lists named), else
    one row per benchmark, as do version and environment changes. Each row says how many findings it stands for (``n``), so counts add up."""
    starts = _new_series_by_machine(model)
    groups: dict[tuple, list] = {}
    out: list[dict] = []
    for f in findings:
        if f["status"] not in GROUPED:
            out.append(dict(f, n=1, started=""))
            continue
        k = (f["status"], f["machine"], f["c0"], f["c1"])
        if k not in groups:
            groups[k] = []
            out.append({"_group": k})
        groups[k].append(f)
    rows = []
    for r in out:
        if "_group" not in r:
            rows.append(r)
            continue
        st, m, c0, c1 = r["_group"]
        members = groups[r["_group"]]
        gone = sorted({f["benchmark"] for f in members})
        # The series stopped after c0: the machine's next measured commit is
        # where they should have reported, and where a renamed one starts.
        lo = model.cidx.get(c0)
        mc = model.maps.get(m)
        nxt = None
        if lo is not None and mc is not None and len(mc):
            j = int(np.searchsorted(mc, lo, side="right"))
            nxt = int(mc[j]) if j < len(mc) else None
        started = [b for x, b in starts.get(m, []) if nxt is not None and x == nxt]
        new = sorted(set(started))
        if new and st == Status.MISSING:
            at = model.order[nxt]
            rows.append(
                dict(
                    members[0],
                    status=RowStatus.RENAMED_OR_REPLACED,
                    cls="note",
                    n=len(members),
                    series=f"{m}: {len(members)} series of {len(gone)} benchmark(s) stopped, "
                    f"{len(started)} series of {len(new)} benchmark(s) started at {at[:8]}",
                    benchmark=" ".join(gone),
                    href=None,
                    started=" ".join(new),
                    c1=at,
                    c1_short=at[:8],
                    reason=f"stopped: {_names(gone)}; started: {_names(new)}",
                )
            )
            continue
        by_bench: dict[str, list] = {}
        for f in members:
            by_bench.setdefault(f["benchmark"], []).append(f)
        for b, fs in by_bench.items():
            row = dict(fs[0], n=len(fs), started="")
            if len(fs) > 1:
                row["series"] = f"{m} / {b} ({len(fs)} cases)"
            rows.append(row)
    return rows


#: Findings page order: real regressions first, then what needs a look, then the rest.
TRIAGE_ORDER = (
    Status.REGRESSION,
    Status.DRIFT_REGRESSION,
    Status.PENDING,
    Status.DIVERGENT_CHANGE,
    Status.FAILING,
    Status.MISSING,
    RowStatus.RENAMED_OR_REPLACED,
    Status.EFFICIENCY_GAP,
    Status.UNEXPECTED_SPEEDUP,
    RowStatus.INSUFFICIENT_HISTORY,
    Status.IMPROVEMENT,
    Status.DRIFT_IMPROVEMENT,
    Status.VERSION_CHANGE,
    Status.ENV_CHANGE,
)


def triage_rows(model: SiteModel, findings: list[dict] | None = None) -> list[dict]:
    """:func:`collapse` of ``findings`` (default: every finding), most serious
    kind first, then newest, then largest."""
    rank = {s: i for i, s in enumerate(TRIAGE_ORDER)}
    rows = collapse(model, model.findings if findings is None else findings)
    return sorted(rows, key=lambda r: (rank.get(r["status"], len(rank)), -r["order"], -r["abs_change"], r["series"]))


# --------------------------------------------------------------------------- health


def health_groups(model: SiteModel) -> list[dict]:
    """The bookkeeping findings (:mod:`harness.report.bookkeeping`) per health
    kind, in :data:`~harness.report.bookkeeping.HEALTH_KINDS` order: ``kind``,
    ``what`` it counts, ``n`` (findings) and ``rows`` (:func:`triage_rows`, each
    row saying how many findings it stands for)."""
    per: dict[str, list] = {}
    for f in bookkeeping.health_findings(model):
        per.setdefault(f["health"], []).append(f)
    return [
        {"kind": k, "what": what, "n": len(per[k]), "rows": triage_rows(model, per[k])}
        for k, what in bookkeeping.kinds_of(per, bookkeeping.confirm_window(model.report))
    ]


def current_keys(model: SiteModel) -> set:
    """Keys of the series still reporting: without a ``missing`` finding row
    (:class:`harness.report.model.SiteModel` ``findings``) when an analysis
    report exists, else with a point at their machine's newest commit."""
    if model.report is not None:
        # the site's rows: a "missing" series measured under contention since is still reporting
        gone = {f["skey"] for f in model.findings if f["status"] == Status.MISSING}
        return {s.key for s in model.series if s.key not in gone}
    out = set()
    for s in model.series:
        newest = model.maps[s.machine][-1] if len(model.maps[s.machine]) else None
        if newest is not None and len(s.gx) and int(s.gx[-1]) == int(newest):
            out.add(s.key)
    return out


def _series_row(model: SiteModel, sv, why: str) -> dict:
    return {"label": f"{sv.machine} / {sv.label}", "href": sv.href, "why": why, "key": sv.key}


def guard_failures(model: SiteModel) -> list[dict]:
    """Latest values not to be trusted: a status other than ``ok`` on the record,
    or an efficiency above 100% of its peak by more than the guard margin (a
    wrong cost model, peak or timing). One above 100% but within the margin
    passed the guards (:data:`harness.report.fmt.UTIL_NOTE`: noise of the peak
    or the time) and is shown as a badge where it appears, not listed here as failing."""
    from harness.core.metrics import PEAK_MARGIN
    from harness.report.model import _status_of

    out = []
    for s in model.series:
        la = s.latest or {}
        guarded = _status_of(la.get("fail_reason")) if la.get("failed") else None
        if guarded:  # the newest point itself failed a guard when read: excluded, but named here
            out.append(_series_row(model, s, str(la.get("fail_reason"))))
            continue
        if la.get("status") not in (None, "ok"):  # the status with its reason, not the bare word
            why = f"{la['status']}: {la['status_reason']}" if la.get("status_reason") else str(la["status"])
            out.append(_series_row(model, s, why))
            continue
        m = la.get("metrics") or {}
        over = [
            f"{k} {F.pct(m[k])}" for k in ("mfu", "bw_util", "sol") if m.get(k) is not None and m[k] > 1.0 + PEAK_MARGIN
        ]
        if over:
            out.append(_series_row(model, s, "above the peak: " + ", ".join(over)))
    return out


def failing_counts(model: SiteModel) -> dict:
    """The two "failing" counts of the site and how they reconcile.

    ``now``: series whose newest result failed (the overview's "failing at the
    newest commit"); ``findings``: the analysis' ``failing`` findings, one per
    series with a failed result anywhere in its history (the findings page's
    ``failing``), of which ``still`` are failing at their newest commit and
    ``fixed`` are valid again since.
    """
    now = {s.key for s in model.series if (s.latest or {}).get("failed")}
    fail = [f for f in model.findings if f["status"] == Status.FAILING]
    still = sum(1 for f in fail if f["skey"] in now)
    return {"now": len(now), "findings": len(fail), "still": still, "fixed": len(fail) - still}


def health(model: SiteModel) -> dict:
    """The overview's health lists: ``too_noisy``, ``guard``, ``contention``,
    ``insufficient_history``, ``failing`` (each a list of rows with label,
    link and why), plus where each list came from."""
    report = model.report or {}
    h = report.get("health") if isinstance(report.get("health"), dict) else None
    label_of = {}
    try:
        from harness.analysis import SeriesKey as AKey

        label_of = {AKey(s.machine, s.benchmark, tuple(s.params), s.timing).label(): s for s in model.series}
    except Exception:
        pass

    def from_keys(keys, why):
        rows = []
        for k in keys or []:
            kt = key_tuple(k) if isinstance(k, dict) else None
            sv = model.by_key.get(kt) if kt else None
            if sv is None and kt is not None:
                sv = next((v for kk, v in model.by_key.items() if kk[:3] == kt[:3]), None)
            if sv is not None:
                rows.append(_series_row(model, sv, (k.get("reason") if isinstance(k, dict) else None) or why))
        return rows

    cfg = report.get("config") or {}
    min_effect, min_points = F.num(cfg.get("min_effect")), cfg.get("min_points")
    if h is not None:
        noisy = from_keys(h.get("too_noisy"), "too noisy to judge")
        short = from_keys(h.get(RowStatus.INSUFFICIENT_HISTORY), "not enough history")
        src = "analysis health"
    else:
        noisy, short = [], []
        for r in report.get("series") or []:
            if not isinstance(r, dict) or r.get("series") not in label_of:
                continue
            sv = label_of[r["series"]]
            mdc = F.num(r.get("min_detectable_change"))
            if mdc is not None and min_effect is not None and mdc > min_effect:
                noisy.append(
                    _series_row(
                        model, sv, f"smallest detectable change {F.pct(mdc)} > reported threshold {F.pct(min_effect)}"
                    )
                )
            # (a series without a single valid point is failing, listed as such)
            if isinstance(min_points, int) and isinstance(r.get("valid"), int) and 0 < r["valid"] < min_points:
                short.append(
                    _series_row(model, sv, f"not enough history: {F.plural(r['valid'], 'point')}, need {min_points}")
                )
        for f in report.get("findings") or []:
            if isinstance(f, dict) and f.get("status") == RowStatus.INSUFFICIENT_HISTORY:
                short += from_keys([f.get("key")], str(f.get("reason") or "not enough history"))
        src = "derived from the analysis series table" if report else ""
    # the newest point measured under contention (no value: the one shown is older), or throttled
    contention = [
        dict(
            _series_row(
                model,
                s,
                str((s.latest or {}).get("contended"))
                if (s.latest or {}).get("contended")
                else "throttled: " + str((s.latest or {}).get("throttled")),
            ),
            # a throttled run's value is the median of its clean samples: shown, not withheld
            throttled=not (s.latest or {}).get("contended"),
        )
        for s in model.series
        if (s.latest or {}).get("contended") or (s.latest or {}).get("throttled")
    ]
    failing = [
        _series_row(model, s, str((s.latest or {}).get("fail_reason") or "failed"))
        for s in model.series
        if (s.latest or {}).get("failed")
    ]
    return {
        "too_noisy": noisy,
        "guard": guard_failures(model),
        "contention": contention,
        RowStatus.INSUFFICIENT_HISTORY: short,
        Status.FAILING: failing,
        "source": src,
    }


# --------------------------------------------------------------------------- baseline


def current_baseline(model: SiteModel) -> str | None:
    """The oldest commit the current series have: the oldest commit at or after
    which at least :data:`BASELINE_COVERAGE` of the series still reporting
    (:func:`current_keys`) have a valid result. ``None`` when there is no such
    commit before the newest one."""
    keys = current_keys(model)
    firsts = []
    for s in model.series:
        if s.key not in keys:
            continue
        valid = np.flatnonzero(~np.isnan(s.v))
        if valid.size:
            firsts.append(int(s.gx[valid[0]]))
    if not firsts or len(model.order) < 2:
        return None
    firsts.sort()
    b = firsts[max(0, math.ceil(BASELINE_COVERAGE * len(firsts)) - 1)]
    return model.order[b] if b < len(model.order) - 1 else None


def change_points(model: SiteModel) -> dict[tuple, list[tuple[int, str]]] | None:
    """Per series key, ``(commit index, status)`` where the analysis found a
    tested change (:data:`SLOWER` or :data:`FASTER`, ``pending`` included:
    callers tell it apart); ``None`` without a report."""
    if model.report is None:
        return None
    out: dict[tuple, list[tuple[int, str]]] = {}
    for f in model.report.get("findings") or []:
        if not isinstance(f, dict) or f.get("status") not in SLOWER + FASTER:
            continue
        k = key_tuple(f.get("key"))
        cr = f.get("commit_range") or []
        if k is not None and len(cr) == 2 and cr[1] in model.cidx:
            out.setdefault(k, []).append((model.cidx[cr[1]], str(f["status"])))
    return out


# --------------------------------------------------------------------------- qualifying findings

#: The tag a finding or a move carries when its series is listed under Health.
NOISY_TAG, CONTENDED_TAG = "noisy series", "under contention"
#: The tag of a series whose newest run kept its value from its clean samples (the
#: throttled ones dropped): drawn as a plain point, so not "under contention", which
#: the charts' orange triangles mean (a newcomer found the two meanings under one word).
THROTTLED_TAG = "throttled samples dropped"


def doubts(model: SiteModel) -> dict[tuple, list[tuple[str, str]]]:
    """Per series key, the health lists it is on, as ``(tag, reason)``: too noisy
    to judge (:data:`NOISY_TAG`) and newest result measured under contention
    (:data:`CONTENDED_TAG`). A finding, a commit-page move or a matrix speed-up
    of such a series carries the tag, so the page never says "regression" on
    a series it also calls too noisy to judge."""
    hl = health(model)
    out: dict[tuple, list[tuple[str, str]]] = {}
    for rows, tag0 in ((hl["too_noisy"], NOISY_TAG), (hl["contention"], CONTENDED_TAG)):
        for r in rows:
            tag = THROTTLED_TAG if tag0 == CONTENDED_TAG and r.get("throttled") else tag0
            lst = out.setdefault(r["key"], [])
            if tag not in (t for t, _ in lst):
                lst.append((tag, f"{tag}: {r['why']} (listed under Health on the overview)"))
    return out


def tag_badges(model: SiteModel, key) -> list:
    """The :func:`doubts` of series ``key`` as warning badges (reason on hover)."""
    return [F.badge(t, why, css="warn") for t, why in model.doubt.get(key, ())]


def env_notes(model: SiteModel, machine: str, c0: str | None, c1: str | None) -> list[dict]:
    """Environment changes (harness version, torch, ...) of ``machine`` in the
    commit range ``(c0, c1]`` of a finding, as annotations ``{kind, text}``."""
    lo, hi = model.cidx.get(c0, -1), model.cidx.get(c1)
    if hi is None:
        return []
    return [
        {"kind": Status.ENV_CHANGE, "text": e["text"]} for e in model.env_changes.get(machine, []) if lo < e["x"] <= hi
    ]


def qualify(model: SiteModel) -> None:
    """Set ``model.doubt`` (:func:`doubts`) and, on every finding row, ``tags``
    (its series' doubt badges) and ``notes`` (the finding's own annotations,
    then the environment changes in its commit range, :func:`env_notes`), and
    ``health`` (:func:`harness.report.bookkeeping.classify`)."""
    model.doubt = doubts(model)
    bookkeeping.classify(model)
    for f in model.findings:
        f["tags"] = tag_badges(model, f.get("skey"))
        if f.get("samples_note"):
            f["tags"].append(F.badge(SAMPLES_AGREE_TAG, f["samples_note"], css="warn"))
        notes = list(f.get("annotations") or [])
        for n in env_notes(model, f["machine"], f["c0"], f["c1"]):
            if n not in notes:
                notes.append(n)
        f["notes"] = notes
