"""Findings grouped by commit, annotations that say "not the code", run health.

Pure functions over the per-series findings of :mod:`harness.analysis` (no
I/O; the git diff behind "benchmark changed" is read by the CLI and arrives
here as plain data). The contract is in ``docs/analysis.md`` ("The report"): one *event* per commit pair (or range) that moved
something, listing the series it moved with directions and sizes across
machines, its annotations with their evidence, and counts.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

#: Per-series statuses that describe a change of level at a commit pair.
STEP_STATUSES = (
    "regression",
    "improvement",
    "drift_regression",
    "drift_improvement",
    "pending",
    "benchmark_version_change",
    "environment_change",
)
#: Of those, the ones that claim a slowdown once confirmed.
CONFIRMED_SLOWER = ("regression", "drift_regression")

#: Metric names (``Series.metric``) that are timings; every other track of a
#: benchmark (memory bytes, iteration counts, sizes) describes its workload.
TIME_METRICS = ("time", "latency_ms", "seconds")


def _short(c: str | None) -> str:
    return (c or "?")[:12]


def benchmark_family(benchmark: str) -> str:
    """The asv class (or module) a benchmark belongs to: its dotted name
    without the last part (``suite.Collide.time_step`` -> ``suite.Collide``);
    tracks of one family measure the same workload."""
    return benchmark.rsplit(".", 1)[0] if "." in benchmark else benchmark


def workload_annotations(step_findings: Sequence, moved: Mapping[tuple, list[dict]]) -> None:
    """Annotate time findings whose benchmark's non-time tracks jump at the same commit.

    Parameters
    ----------
    step_findings : findings (``harness.analysis.Finding``) of time series
        with a commit pair; each gets an ``annotations`` entry of kind
        ``workload_changed`` when ``moved`` has a track of the same machine,
        family and parameters at the same pair.
    moved : mapping ``(machine, family, params, (before, after))`` -> list of
        ``{"benchmark", "ratio"}``: non-time tracks with a significant step there.
    """
    for f in step_findings:
        k = f.key
        hits = moved.get((k.machine, benchmark_family(k.benchmark), k.params, (f.commit_before, f.commit_after)))
        if not hits:
            continue
        ev = ", ".join(f"{h['benchmark'].rsplit('.', 1)[-1]} x{h['ratio']:.3g}" for h in hits[:5])
        f.annotations.append(
            {
                "kind": "workload_changed",
                "text": f"workload changed? other tracks of this benchmark jumped at the same commit ({ev})",
                "evidence": {"tracks": hits},
            }
        )
        f.reason += f"; workload changed? {ev} at the same commit"


def commit_annotations(findings: Iterable, notes: Mapping[str, Sequence[Mapping]]) -> None:
    """Attach per-commit notes (e.g. ``benchmark_changed`` from the git diff,
    built by the CLI) to every step finding whose new level starts at that
    commit; the finding keeps its status and gains the label and evidence."""
    if not notes:
        return
    for f in findings:
        if f.status.value not in STEP_STATUSES or f.commit_after not in notes:
            continue
        for n in notes[f.commit_after]:
            f.annotations.append(dict(n))
            f.reason += f"; {n.get('text', n.get('kind'))}"


def _event_status(rows: list[dict], kinds: set[str]) -> str:
    sts = {r["status"] for r in rows}
    if "benchmark_changed" in kinds or sts == {"benchmark_version_change"}:
        return "benchmark_changed"
    if "environment_change" in kinds or sts == {"environment_change"}:
        return "environment_changed"
    code = [r for r in rows if r["status"] not in ("benchmark_version_change", "environment_change")]
    slower = [r for r in code if r["direction"] == "slower"]
    faster = [r for r in code if r["direction"] == "faster"]
    if slower and faster:
        return "mixed"
    if any(r["status"] in CONFIRMED_SLOWER for r in slower):
        return "regression"
    if slower:
        return "pending"
    if faster:
        return "improvement"
    if any(r["direction"] == "diverged" for r in code):
        return "divergent_change"
    return "benchmark_changed" if "benchmark_version_change" in sts else "environment_changed"


def group_events(findings: Sequence) -> list[dict]:
    """One event per commit pair that moved something.

    Every step-like finding (regression, improvement, drift, pending, version
    or environment change) joins the event of its ``(commit_before,
    commit_after)`` pair; ``divergent_change`` findings join on their pair as
    the worse machine's series. Returns events ordered by the number of series
    slowed, then by the worst slowdown, each as in ``docs/analysis.md``
    (``id``, ``commit_range``, ``status``, ``series``, ``machines``,
    ``annotations``, ``n_slower``, ``n_faster``, ``max_magnitude``).
    """
    groups: dict[tuple, list[tuple[int, object]]] = {}
    for i, f in enumerate(findings):
        st = f.status.value
        if f.key is None or f.commit_after is None:
            continue
        if st in STEP_STATUSES or st == "divergent_change":
            groups.setdefault((f.commit_before, f.commit_after), []).append((i, f))
    events = []
    for (before, after), members in groups.items():
        rows, anns, seen_ann = [], [], set()
        for i, f in members:
            st = f.status.value
            if st == "divergent_change":
                cw = f.extra.get("change_worse_machine")
                change = cw if isinstance(cw, (int, float)) else f.change
            else:
                change = f.change
            direction = "slower" if (change or 0) > 0 else "faster"
            if st == "divergent_change" and f.extra.get("worse_machine_moved") is False:
                direction = "diverged"  # only the other machine moved: not a slowdown here
            ratio = f.ratio
            if st == "divergent_change" and isinstance(change, (int, float)):
                ratio = 1.0 + change
            rows.append(
                {
                    "key": f.key.as_dict(),
                    "status": st,
                    "magnitude": _mag(ratio, change),
                    "direction": direction,
                    "timing": f.key.timing,
                    "finding_index": i,
                }
            )
            for a in getattr(f, "annotations", []):
                t = (a.get("kind"), a.get("text"))
                if t not in seen_ann:
                    seen_ann.add(t)
                    anns.append(a)
            ann_kind = f.extra.get("annotation")
            if ann_kind in ("version", "env"):
                kind = "version_change" if ann_kind == "version" else "environment_change"
                text = f.reason.split(" at a ", 1)[-1].split("; not attributed", 1)[0]
                if (kind, text) not in seen_ann:
                    seen_ann.add((kind, text))
                    anns.append({"kind": kind, "text": text, "evidence": {"series": f.key.as_dict()}})
        kinds = {a["kind"] for a in anns}
        slow = [r for r in rows if r["direction"] == "slower"]
        worst = max((1.0 + (r["magnitude"]["change"] or 0.0) for r in slow), default=None)
        events.append(
            {
                "id": f"ev-{(after or '')[:12]}",
                "commit_range": [before, after],
                "status": _event_status(rows, kinds),
                "series": rows,
                "machines": sorted({r["key"]["machine"] for r in rows}),
                "annotations": anns,
                "n_slower": len(slow),
                "n_faster": sum(1 for r in rows if r["direction"] == "faster"),
                "max_magnitude": worst,
            }
        )
    events.sort(key=lambda e: (-e["n_slower"], -(e["max_magnitude"] or 0.0), e["id"]))
    # a pair across a failure gap can share its head with another pair: the
    # base then joins the id, so ids stay unique
    heads: dict[str, int] = {}
    for e in events:
        heads[e["id"]] = heads.get(e["id"], 0) + 1
    for e in events:
        if heads[e["id"]] > 1 and e["commit_range"][0]:
            e["id"] += f"-{e['commit_range'][0][:8]}"
    return events


def _mag(ratio, change) -> dict:
    def clean(v):
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    return {"ratio": clean(ratio), "change": clean(change)}


def health(analyses: Sequence, findings: Sequence, too_noisy_rel: float) -> dict:
    """Run health: ``insufficient_history`` (keys, each with the ``reason``
    "not enough history: N points, need M"), ``too_noisy`` (keys whose noise is at least
    ``too_noisy_rel``: a change of ``min_effect`` cannot be
    told from noise there), ``failing`` (key, since, back_at, failed per latest
    stretch), ``missing`` (key, since, last_seen) and ``excursions`` (levels
    that moved and came back within a few commits: :func:`excursion_rows`)."""
    out = {"insufficient_history": [], "too_noisy": [], "failing": [], "missing": [], "excursions": []}
    for a in analyses:
        out["excursions"].extend(excursion_rows(a))
        if a.insufficient:
            out["insufficient_history"].append(dict(a.series.key.as_dict(), reason=a.insufficient))
        elif a.noise is not None and a.noise >= too_noisy_rel:
            out["too_noisy"].append(a.series.key.as_dict())
    for f in findings:
        if f.status.value == "failing":
            out["failing"].append(
                {
                    "key": f.key.as_dict(),
                    "since": f.commit_before,
                    "back_at": f.commit_after,
                    "failed": f.extra.get("failed"),
                    "stretches": len(f.extra.get("stretches", [])),
                }
            )
        elif f.status.value == "missing":
            out["missing"].append({"key": f.key.as_dict(), "since": f.commit_after, "last_seen": f.commit_before})
    return out


def excursion_rows(a) -> list[dict]:
    """One series' excursions (:attr:`SeriesAnalysis.excursions`) as report rows:
    ``key``, ``commit_range`` (the last commit before and the first of the
    excursion), ``back_at`` (first commit back at the old level), ``length``
    (points away), ``ratio`` (the excursion's level against the one before, in
    the metric's unit), ``net_change`` (relative move from before to after, bad
    direction positive), ``direction`` (``slower`` / ``faster``: worse / better)
    and ``machine_event`` (filled by :func:`machine_events`)."""
    rows = []
    sgn = -1.0 if a.series.direction.value == "higher_is_better" else 1.0
    for first, back, d, d_net in a.excursions:
        rows.append(
            {
                "key": a.series.key.as_dict(),
                "commit_range": [a.valid_commits[first - 1], a.valid_commits[first]],
                "back_at": a.valid_commits[back],
                "length": back - first,
                "ratio": math.exp(sgn * d),
                "net_change": math.expm1(d_net),
                "direction": "slower" if d > 0 else "faster",
                "machine_event": None,
            }
        )
    return rows
