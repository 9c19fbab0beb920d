"""The run: every series analysed, Benjamini-Hochberg across all tests,
labels ("not the code"), events, health, the false-alarm budget, cross-machine rules."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from harness.analysis.cross import CaseCost, DevicePeaks, divergent_changes, efficiency_gaps, generation_speedups
from harness.analysis.events import (
    STEP_STATUSES,
    TIME_METRICS,
    benchmark_family,
    commit_annotations,
    group_events,
    health,
    workload_annotations,
)
from harness.analysis.findings import _candidate_finding, _one_per_change, at_newest, mark_undone
from harness.analysis.machine import detect as detect_machine_events
from harness.analysis.machine import label as label_machine_events
from harness.analysis.model import (
    ALERT_STATUSES,
    AnalysisConfig,
    Candidate,
    Direction,
    Finding,
    Report,
    Series,
    SeriesAnalysis,
    Status,
)
from harness.analysis.series import _usable, analyze_series
from harness.analysis.stats import _norm_sf2, _z_for, benjamini_hochberg
from harness.core.model import IMPOSSIBLE, direction_assumed, point_commits, point_values


def analyze(
    series_list: Iterable[Series],
    config: AnalysisConfig = AnalysisConfig(),
    *,
    machine_commits: Mapping[str, Sequence[str]] | None = None,
    commit_order: Sequence[str] | None = None,
    costs: Mapping[tuple, "CaseCost"] | None = None,
    devices: Mapping[str, "DevicePeaks"] | None = None,
    aux_series: Sequence[Series] = (),
    commit_notes: Mapping[str, Sequence[Mapping]] | None = None,
) -> Report:
    """Analyse every series of a run.

    Parameters
    ----------
    series_list : iterable of Series
    config : AnalysisConfig
    machine_commits : mapping machine -> ordered commits with any result there
        (for "missing since"); defaults to the commits seen in its series.
    commit_order : global commit order (oldest first) used to line machines up
        for cross-machine rules; defaults to first-seen order.
    costs : mapping ``(benchmark, params)`` -> :class:`CaseCost`, for the
        generation-speedup rule.
    devices : mapping machine -> :class:`DevicePeaks`, for the cross-GPU rules.
    aux_series : series used only by the cross-GPU rules (``sol`` series for
        :func:`efficiency_gaps`), not tested for changes (they mirror the time
        series and would double the tests).
    commit_notes : mapping commit -> list of ``{kind, text, evidence}``
        (``benchmark_changed`` from the git diff, built by the CLI); a step whose
        new level starts at that commit is labelled with it, and keeps its status.

    Returns
    -------
    Report
        Findings (status enum, series, commit range, ratio with CI, reason), the
        false-alarm budget and a per-series noise table.
    """
    series_list = [_within_float_range(s) for s in series_list]
    aux_series = [_within_float_range(s) for s in aux_series]
    if machine_commits is None:
        machine_commits = _machine_commits(series_list, commit_order)
    machine_evs, corrected = detect_machine_events(series_list, machine_commits, config)
    analyses = [analyze_series(s, config, machine_commits.get(s.key.machine)) for s in corrected]
    findings, families, n_flat = _accept(analyses, config)
    stopped = {f.key for f in findings if f.status is Status.MISSING and f.key is not None}
    findings, stopped_pending = _set_aside_stopped_pendings(findings, stopped)
    _flag_removed_benchmarks(series_list, findings)
    budget, series_rows = _budget(analyses, config, families, n_flat)
    divergent, aside = _set_aside_stopped_pendings(
        divergent_changes(analyses, config, commit_order=commit_order, devices=devices),
        stopped,
        {a.series.key: a.valid_commits for a in analyses},
        config.confirm_after,
    )
    findings.extend(divergent)
    stopped_pending.extend(aside)
    if devices:
        findings.extend(efficiency_gaps(list(series_list) + list(aux_series), devices, config))
        if costs:
            findings.extend(generation_speedups(series_list, devices, costs, config))
    # "not the code" labels, then one event per commit pair
    workload_annotations(
        [
            f
            for f in findings
            if f.status.value in STEP_STATUSES
            and f.other_key is None
            and (f.extra.get("metric") or "time") in TIME_METRICS
        ],
        _workload_moves(analyses, config),
    )
    commit_annotations(findings, commit_notes or {})
    run_health = health(analyses, findings, too_noisy_rel=config.min_effect)
    run_health["stopped_pending"] = stopped_pending
    label_machine_events(machine_evs, run_health["excursions"], findings, machine_commits)
    events = group_events(findings)
    summary = _summary(series_list, analyses, findings, events, run_health, config)
    summary["excursions"] = len(run_health["excursions"])
    summary["machine_events"] = len(machine_evs)
    return Report(
        config=config,
        findings=findings,
        series=series_rows,
        budget=budget,
        summary=summary,
        events=events,
        health=run_health,
        machine_events=machine_evs,
    )


def _machine_commits(series_list: Sequence[Series], commit_order: Sequence[str] | None) -> dict[str, list[str]]:
    """Each machine's commits with any result, in ``commit_order`` (else first seen)."""
    mc: dict[str, list[str]] = {}
    for s in series_list:
        lst = mc.setdefault(s.key.machine, [])
        seen = set(lst)
        for c in point_commits(s.points):
            if c not in seen:
                lst.append(c)
                seen.add(c)
    if commit_order is not None:
        rank = {c: i for i, c in enumerate(commit_order)}
        for k in mc:
            mc[k].sort(key=lambda c: rank.get(c, len(rank)))
    return mc


def _accept(analyses: Sequence[SeriesAnalysis], config: AnalysisConfig) -> tuple[list[Finding], dict, int]:
    """Benjamini-Hochberg over every step/drift test of the run, then findings.

    Three families, each with its own BH step (Benjamini & Hochberg 1995, per
    family of hypotheses): changes in a series' history that would be blamed
    on the code; changes at its newest commits, not yet confirmed (the
    ``pending`` ones, :func:`harness.analysis.findings.at_newest`); and changes
    at version or environment boundaries (labels). Each tested series counts
    one hypothesis in each of the first two (a change in its history, a change
    at its newest commits). Mixing families would let many real changes of one
    kind raise the threshold of the other: many real version-change steps that
    of code alerts, and many real steps in the history that of a one-commit
    move at the newest commit, where one noisy point is the whole evidence
    (measured: ``docs/analysis.md``, "Pending changes in a family of their
    own"). A change is reported when it is significant in its family, its CI
    reaches ``min_effect`` (a significant step whose whole CI lies below
    ``min_effect`` is not) and its estimate is at least ``min_estimate_share``
    of ``min_effect``. Returns the findings (steps, drifts, gaps), the two code
    families' ``{"history": (threshold, hypotheses), "newest": (...)}``, and
    the number of code tests.
    """
    zq = _z_for(config.ci_level)
    code = [(a, c) for a in analyses for c in a.candidates if c.annotation in (None, "gap")]
    newest = [(a, c) for a, c in code if at_newest(a, c, config)]
    history = [(a, c) for a, c in code if not at_newest(a, c, config)]
    flat_ann = [(a, c) for a in analyses for c in a.candidates if c.annotation not in (None, "gap")]
    n_tested = sum(1 for a in analyses if a.n_positions > 0)
    families: dict = {}
    flat: list = []
    qv: list = []
    for name, fam in (("history", history), ("newest", newest)):
        m = max(n_tested, len(fam))
        q_fam, thr = benjamini_hochberg([c.p_value for _, c in fam], config.fdr_q, m)
        families[name] = (thr, m)
        flat += fam
        qv += list(q_fam)
    qv_ann, _thr_ann = benjamini_hochberg([c.p_value for _, c in flat_ann], config.fdr_q)
    theta = math.log1p(config.min_effect)
    accepted: dict[int, list[tuple[Candidate, float]]] = {}
    for (a, c), q in list(zip(flat, qv)) + list(zip(flat_ann, qv_ann)):
        if abs(c.d) + zq * c.se < theta or q > config.fdr_q or abs(c.d) < config.min_estimate_share * theta:
            continue
        accepted.setdefault(id(a), []).append((c, float(q)))
    findings: list[Finding] = []
    for a in analyses:
        kept = _one_per_change(a, accepted.get(id(a), []), config)
        mine = [_candidate_finding(a, c, q, zq, config) for c, q in kept]
        for f in mine:
            f.extra["metric"] = a.series.metric or "time"
        mark_undone(a, kept, mine)
        findings.extend(mine)
        findings.extend(a.gap_findings)
    return findings, families, len(flat)


#: A series whose usable values span more than this factor (log units) is no
#: measurement: every ratio of it would leave the float range (exp(709) overflows;
#: a ratio of two changes of such series doubles the exponent). 1e100.
MAX_LOG_SPAN = math.log(1e100)
#: A point further than this factor (log units) from its series' median is no
#: measurement of that series' quantity: half of :data:`MAX_LOG_SPAN` (1e50), so the
#: points kept span at most 1e100 and no ratio overflows. A timer's whole range
#: (nanoseconds to days) is 1e14, so 1e50 only catches values such as 1e-300 among
#: 1e-3 that no timer or counter produces.
MAX_LOG_FROM_MEDIAN = MAX_LOG_SPAN / 2


def _within_float_range(s: Series) -> Series:
    """``s``, or, when some of its usable values are more than
    :data:`MAX_LOG_FROM_MEDIAN` (1e50 in ratio) from the median of the series'
    usable values (median of their logs), a copy where those points are failures
    with a reason naming the value, the median and the limit; the other points
    are analysed as usual. One 1e-300 among values near 1e-3 loses only its own
    point; 1e-300 next to 1e300 in equal numbers loses every point (the median
    lies between them), so the series is reported failing."""
    logs = [math.log(v) for v in point_values(s.points) if _usable(v)]
    if not logs or max(logs) - min(logs) <= MAX_LOG_SPAN:
        return s
    mid = statistics.median(logs)
    med = math.exp(mid)

    def far(p) -> bool:
        return _usable(p.value) and abs(math.log(p.value) - mid) > MAX_LOG_FROM_MEDIAN

    pts = [
        replace(
            p,
            value=None,
            reason=(
                f"{IMPOSSIBLE} {p.value:.3g}: more than 50 orders of magnitude (MAX_LOG_FROM_MEDIAN, 1e50) "
                f"from the series' median {med:.3g}: not the quantity the series measures"
            ),
        )
        if far(p)
        else p
        for p in s.points
    ]
    return replace(s, points=pts)


def _set_aside_stopped_pendings(
    findings: list[Finding], stopped: set, commits_of=None, confirm_after: int = 0
) -> tuple[list[Finding], list[dict]]:
    """A pending change in a series that stopped (its machine's later results
    no longer name it: a ``missing`` finding) can never be confirmed: it is set
    aside as health (``key``, ``commit_range``, ``change``, ``reason``) instead
    of a finding (``stopped``: the keys with a ``missing`` finding). On OpenBLAS's real history 12 of 16 pending claims were of a
    benchmark suite that was replaced one or two commits later. With
    ``commits_of`` (key -> valid commits) a divergent change of a stopped series
    with fewer than ``confirm_after`` points after it is set aside the same way."""
    keep, aside = [], []
    for f in findings:
        unconfirmable = f.status is Status.PENDING
        if commits_of is not None and f.status is Status.DIVERGENT_CHANGE:
            cs = commits_of.get(f.key) or []
            unconfirmable = f.commit_after in cs and len(cs) - cs.index(f.commit_after) < confirm_after
        if unconfirmable and f.key in stopped:
            aside.append(
                {
                    "key": f.key.as_dict(),
                    "commit_range": [f.commit_before, f.commit_after],
                    "change": f.change,
                    "reason": f.reason + "; the series stopped after it, so it cannot be confirmed",
                }
            )
        else:
            keep.append(f)
    return keep, aside


def _flag_removed_benchmarks(series_list: Sequence[Series], findings: list[Finding]) -> None:
    """A whole benchmark whose every case stops at one commit was removed or renamed."""
    per_bench: dict[tuple, int] = {}
    for s in series_list:
        per_bench[(s.key.machine, s.key.benchmark)] = per_bench.get((s.key.machine, s.key.benchmark), 0) + 1
    stopped: dict[tuple, list[Finding]] = {}
    for f in findings:
        if f.status is Status.MISSING and f.key is not None:
            stopped.setdefault((f.key.machine, f.key.benchmark, f.commit_before), []).append(f)
    for (machine, bench, _c), group in stopped.items():
        if len(group) == per_bench.get((machine, bench)) and len(group) > 1:
            for f in group:
                f.reason += f"; all {len(group)} cases of {bench} stopped there (benchmark removed or renamed?)"


def _workload_moves(analyses: Sequence[SeriesAnalysis], config: AnalysisConfig) -> dict[tuple, list[dict]]:
    """Significant steps (before the run-wide FDR: a label, not an alert) of
    the non-time tracks (memory bytes, iteration counts, ...), keyed
    ``(machine, benchmark family, params, (before, after))``."""
    theta = math.log1p(config.min_effect)
    moved: dict[tuple, list[dict]] = {}
    for a in analyses:
        if (a.series.metric or "time") in TIME_METRICS or a.series.metric == "sol":
            continue
        k = a.series.key
        for c in a.candidates:
            if c.kind == "step" and abs(c.d) >= theta and c.p_value <= config.fdr_q:
                ratio = math.exp(c.d if a.series.direction is Direction.LOWER_IS_BETTER else -c.d)
                moved.setdefault(
                    (
                        k.machine,
                        benchmark_family(k.benchmark),
                        k.params,
                        (a.valid_commits[c.index - 1], a.valid_commits[c.index]),
                    ),
                    [],
                ).append({"benchmark": k.benchmark, "ratio": ratio})
    return moved


def _claims_slowdown(f: Finding, config: AnalysisConfig) -> bool:
    """An alert: a regression or drift regression, or a divergent change whose
    worse machine really got slower (by ``min_effect`` or more); a divergent
    change where both machines improved, unequally, is not a slowdown."""
    if f.status is Status.DIVERGENT_CHANGE:
        return (f.extra.get("change_worse_machine") or 0.0) >= config.min_effect
    return f.status in ALERT_STATUSES


def _assumed_units(series_list) -> dict[str, int]:
    """Series count per unit whose direction is asv's lower-is-better by default
    only (:func:`harness.core.model.direction_assumed`), sorted by unit."""
    out: dict[str, int] = {}
    for s in series_list:
        if s.direction is Direction.LOWER_IS_BETTER and direction_assumed(s.metric, s.unit):
            out[s.unit] = out.get(s.unit, 0) + 1
    return dict(sorted(out.items()))


def _summary(series_list, analyses, findings, events, run_health, config) -> dict:
    """Counts per status (findings and events), alerts, and how many series had
    not enough history for change detection (said in words, never ``None``)."""
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.status.value] = counts.get(f.status.value, 0) + 1
    ev_counts: dict[str, int] = {}
    for e in events:
        ev_counts[e["status"]] = ev_counts.get(e["status"], 0) + 1
    n_tested = sum(1 for a in analyses if a.n_positions > 0)
    n_short = len(run_health["insufficient_history"])
    return {
        "series": len(series_list),
        "series_tested": n_tested,
        "machines": sorted({s.key.machine for s in series_list}),
        "points": sum(a.n_points for a in analyses),
        "failed_points": sum(a.n_failed for a in analyses),
        # of those, values no benchmark can measure (zero, negative, 1e300 among 1e-3): issue 29 S5
        "impossible_points": sum(
            n for a in analyses for r, n in (a.failure_reasons or {}).items() if r.startswith(IMPOSSIBLE)
        ),
        "series_all_failed": sum(1 for a in analyses if a.n_valid == 0 and a.n_points),
        # units that do not say which way is better, read as lower-is-better (asv's convention)
        "direction_assumed": _assumed_units(series_list),
        "findings_by_status": dict(sorted(counts.items())),
        "alerts": sum(1 for f in findings if _claims_slowdown(f, config)),
        "events": len(events),
        "events_by_status": dict(sorted(ev_counts.items())),
        "not_enough_history": n_short,
        "change_detection": (
            f"{n_tested} of {len(series_list)} series tested; not enough history for {n_short} "
            f"(need {config.min_points} points)"
        )
        if n_short
        else f"all {n_tested} series tested",
    }


def _budget(analyses: list[SeriesAnalysis], config: AnalysisConfig, families: dict, n_tests: int):
    """Expected false alerts per run from each series' noise.

    "If no code had changed": then no real change would lift either code
    family's BH threshold (``families``, from :func:`_accept`) above its first
    rung ``q / m``, so a series' alert needs (a) its history test or its
    newest-commits test to pass its family's first rung, probability at most
    ``q / m_history + q / m_newest``, and (b) an estimated step of at least
    ``min_effect``: with the typical window standard error ``se``, at most
    ``n_positions * P(|N(0, se)| >= log(1 + min_effect))`` (union bound over
    positions). A series contributes ``min(a, b)``; their sum is the expected
    number of false alerts. (The run's own thresholds, the largest p that
    passed in each family, are higher when real changes passed: they bound
    how many of *this* run's alerts are false, not what noise alone raises;
    they are published beside it.) The same sum with a fixed per-series level
    of 0.01 (alerting on each series alone, without FDR control) is published
    for comparison.
    """
    (thr, m_hist), (thr_new, m_new) = families["history"], families["newest"]
    m = m_hist + m_new
    null_rungs = config.fdr_q / max(m_hist, 1) + config.fdr_q / max(m_new, 1)
    theta = math.log1p(config.min_effect)
    zpow = 0.8416  # one-sided normal quantile for 80% power
    total = 0.0
    naive = 0.0
    rows = []
    for a in analyses:
        row = {
            "series": a.series.key.label(),
            "key": a.series.key.as_dict(),
            "points": a.n_points,
            "valid": a.n_valid,
            "failed": a.n_failed,
            "noise_rel": a.noise,
            "direction": a.series.direction.value,
            "status": "insufficient_history" if a.insufficient else "tested",
        }
        if a.insufficient:
            row["reason"] = a.insufficient
        if a.spikes:
            row["spikes"] = a.spikes
        if a.se_typical and a.n_positions:
            pe = min(1.0, a.n_positions * _norm_sf2(theta / a.se_typical))
            fa = min(null_rungs, pe)
            total += fa
            naive += min(0.01, pe)
            from statistics import NormalDist

            a_pos = min(max(thr / max(a.n_positions, 1), 1e-15), 0.5)
            z_thr = NormalDist().inv_cdf(1.0 - a_pos / 2.0)
            row["false_alarm_p"] = fa
            row["min_detectable_change"] = math.expm1((z_thr + zpow) * a.se_typical)
        rows.append(row)
    budget = {
        "fdr_q": config.fdr_q,
        "min_effect": config.min_effect,
        "hypotheses": m,
        "tests": n_tests,
        "bh_threshold_p": thr,
        "hypotheses_newest": m_new,
        "bh_threshold_p_newest": thr_new,
        "expected_false_alerts": total,
        "expected_false_alerts_without_fdr": naive,
        "method": "Benjamini-Hochberg in two families with a hypothesis each per tested series: a change in "
        "its history (regression, improvement, drift) and a change at its newest commits (pending); each "
        "threshold is the largest p-value that passed in its family. Expected false alerts if no code had "
        "changed: the sum over series of the smaller of (a) the two families' first BH rungs, q/m each, "
        "summed, and (b) the chance that noise alone moves the series' estimate by min_effect at one of its "
        "positions; without FDR: the same with (a) at 1% a series",
        "noisiest_series": [
            r["series"] for r in sorted((r for r in rows if r.get("noise_rel")), key=lambda r: -r["noise_rel"])[:5]
        ],
    }
    return budget, rows


def analyze_inputs(
    inputs, config: AnalysisConfig = AnalysisConfig(), *, commit_notes: Mapping[str, Sequence[Mapping]] | None = None
) -> tuple[Report, dict]:
    """The analysis of a dataset: the :class:`Report` and its dict form
    (``Report.as_dict()``) with the ``autotune_changed`` annotations added: the
    one call that ``kernelwatch analyze`` and ``kernelwatch publish`` both make.

    ``inputs`` is a :class:`harness.store.dataset.Inputs` (read by attribute:
    ``series``, ``aux_series``, ``machine_commits``, ``commit_order``, ``costs``,
    ``devices``, ``compile_facts``; this stage imports nothing of the store).
    ``commit_notes`` as for :func:`analyze` ("benchmark changed" notes per commit).
    """
    from harness.analysis import autotune

    report = analyze(
        inputs.series,
        config,
        machine_commits=inputs.machine_commits,
        commit_order=inputs.commit_order,
        costs=inputs.costs,
        devices=inputs.devices,
        aux_series=inputs.aux_series,
        commit_notes=commit_notes,
    )
    out = report.as_dict()
    autotune.annotate(out, inputs.compile_facts)
    return report, out
