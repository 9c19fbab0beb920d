"""``index.html``: the overview, in the order a kernel engineer asks.

1. the commits that made something slower (events of the analysis, grouped by
   commit, :func:`harness.report.attention.events`), the other changes folded
   below them;
2. machine events (many series of one machine moved together and came back:
   the host, not the code), then divergences between GPUs;
3. health: per machine a line (series, failing, regressions, newest commit),
   then the series not to trust (too noisy, failing a value guard, measured
   under contention, not enough history, failing now), then the bookkeeping
   count (:mod:`harness.report.bookkeeping`: stopped series, version and
   environment changes, pending changes of series that stopped long ago,
   excursions that reverted) with every item one click away;
4. the latest results of the series still reporting;

then the false-alarm budget, the benchmarks and the input problems. Every line
links to its evidence (commit page, benchmark page).
"""

from __future__ import annotations

from typing import Iterator

from harness.core.model import CONFIRMED_REGRESSIONS, EventStatus, RowStatus, Status
from harness.report import attention, benchmark, bookkeeping
from harness.report import fmt as F
from harness.report.model import DIVERGENCE_STATUSES, SiteModel, peaks_text
from harness.report.render import Page

#: Findings shown per list on the overview (all are on ``findings.html``).
OVERVIEW_FINDINGS = 25
#: Latest-result rows per machine shown on the overview (the rest on the machine page);
#: bounded so the index stays small with hundreds of series.
INDEX_LATEST_ROWS = 40
#: Series listed per health list on the overview (the count is of all).
HEALTH_ROWS = 10
#: Input problems listed on the overview (the command prints all).
ERRORS_SHOWN = 200


def guard_health(counts: dict) -> dict:
    """The read-time guards' figure for one machine (``ResultSet.health``):
    ``guarded`` (points excluded: invalid, timing_bug, above_ceiling, contended),
    ``guard_badges`` (one badge per status with its count) and ``checked``."""
    bad = {k: v for k, v in sorted(counts.items()) if k != "ok" and v}
    return {
        "guarded": sum(bad.values()),
        "checked": sum(counts.values()),
        "guard_badges": [
            F.badge(
                f"{k} {v}",
                f"{v} point(s) with status {k}: "
                + (
                    "time kept, utilisation figures withheld (the measured ceiling is under-measured)"
                    if k == "above_ceiling"
                    else "excluded from statistics"
                )
                + ", shown with the reason on their chart",
            )
            for k, v in bad.items()
        ],
    }


def health(model: SiteModel) -> list[dict]:
    """One line per machine: device, series, failing, regressions, newest commit,
    calibrated (a calibration with no :func:`harness.report.ceilings.doubts`) or
    the calibration's doubts as badges (``cal_badges``)."""
    out = []
    for m in model.machines:
        p = model.parts[m]
        infos = model.series_of(m)
        info = p["info"]
        gpu = str(info.get("gpu") or "")
        newest = model.commits[int(model.maps[m][-1])] if len(model.maps[m]) else None
        out.append(
            {
                "name": m,
                "slug": model.mslug[m],
                "device": gpu if gpu and gpu != "none" else str(info.get("cpu") or ""),
                "series": len(infos),
                Status.FAILING: sum(1 for s in infos if (s.latest or {}).get("failed")),
                "regressions": sum(
                    1 for f in model.findings if f["machine"] == m and f["status"] in CONFIRMED_REGRESSIONS
                ),
                "newest": newest,
                # "calibrated" only for a calibration with nothing to doubt; otherwise its doubts, as badges
                "calibrated": p["calibration"] is not None and not model.cal_doubts[m],
                "cal_badges": [F.badge(st, why, css="warn") for st, why in model.cal_doubts[m]],
                **guard_health(p.get("health") or {}),
            }
        )
    return out


def latest(model: SiteModel, current: set) -> list[dict]:
    """Per machine the first :data:`INDEX_LATEST_ROWS` latest-result rows of the
    series still reporting (``current``), how many there are and how many
    stopped reporting (on the machine page and the findings page)."""
    out = []
    for m in model.machines:
        infos = model.series_of(m)
        live = [s for s in infos if s.key in current]
        out.append(
            {
                "name": m,
                "slug": model.mslug[m],
                "total": len(live),
                "stale": len(infos) - len(live),
                "peaks": peaks_text(model.kinds[m], model.parts[m]["calibration"]),
                "rows": [model.latest_row(s, "") for s in live[:INDEX_LATEST_ROWS]],
            }
        )
    return out


def divergences(model: SiteModel) -> list[dict]:
    """The divergence findings, one row per kind, commit range and case: the
    pairs of machines of one case that diverged at the same commits are one
    row (the largest first, the others named, ``n`` the findings it stands for),
    so a divergence is listed once per commit."""
    divs = sorted(
        (f for f in model.findings if f["status"] in DIVERGENCE_STATUSES),
        key=lambda f: (DIVERGENCE_STATUSES.index(f["status"]), -f["order"], -f["abs_change"]),
    )
    groups: dict[tuple, list[dict]] = {}
    for f in divs:
        groups.setdefault((f["status"], f["c0"], f["c1"], f["benchmark"], f["params"]), []).append(f)
    rows = []
    for members in groups.values():
        head = members[0]
        if len(members) == 1:
            rows.append(dict(head, n=1))
            continue
        pairs = "; ".join(
            f["change"]  # "m1 +0.4% slower, m2 -11.7% faster: 13.7% apart" names both machines
            if f["status"] == Status.DIVERGENT_CHANGE and f["change"].endswith(" apart")
            else f"{f['machine']} {f['change']}"  # "+13.7% against <other>" names the other machine
            if f["status"] == Status.DIVERGENT_CHANGE and f["change"] != "n/a"
            else f"{f['machine']} vs {f['other_machine']} {f['change']}"
            for f in members
        )
        rows.append(
            dict(
                head,
                n=len(members),
                other_machine="",
                tags=list({str(t): t for f in members for t in f["tags"]}.values()),
                series=f"{head['benchmark']}({head['params']}): {pairs}",
            )
        )
    return rows


def trust_lists(hl: dict) -> list[tuple[str, str, list[dict]]]:
    """The health lists of :func:`harness.report.attention.health` as
    ``(title, slug, rows)``: the overview shows the first :data:`HEALTH_ROWS`
    of each and links the rest to ``findings.html#trust-<slug>``, which lists all."""
    return [
        ("too noisy to judge", "too-noisy", hl["too_noisy"]),
        ("newest values failing a guard (the Health table counts every point)", "guard", hl["guard"]),
        # series, where the Health table counts points (newcomer trial: "1 of 160 points" beside "29")
        ("series measured under contention at their newest commit", "contention", hl["contention"]),
        ("not enough history", "short-history", hl[RowStatus.INSUFFICIENT_HISTORY]),
        ("series failing at their newest commit", Status.FAILING, hl[Status.FAILING]),
    ]


#: What ``kernelwatch triage``'s exit code says (``docs/triage.md``).
TRIAGE_SAYS = {0: "nothing slower", 1: "a kernel got slower", 2: "could not triage"}


def attach_triage(model: SiteModel, evs: list[dict]) -> None:
    """Give each event the stored triage of its commit pair, when there is one
    (:func:`harness.report.profiles.attach` links findings to triages of the same
    base and head): ``triage`` (its page) and ``triage_says`` (its verdict), so the
    overview says what triage found beside the change it triaged."""
    says = {
        e.get("href"): TRIAGE_SAYS.get((e.get("report") or {}).get("exit_code"), "triaged")
        for e in getattr(model, "profile_runs", [])
    }
    pair = {(f["c0"], f["c1"]): f["triage"] for f in model.findings if f.get("triage")}
    for e in evs:
        href = pair.get((e["c0"], e["c1"]))
        e["triage"], e["triage_says"] = href, says.get(href, "") if href else ""


def pending_faster_only(e: dict) -> bool:
    """Whether event row ``e`` (:func:`harness.report.attention.events`) is pending
    with only faster series: nothing got slower, so it is not listed under
    "What got slower" (it is with the other changes, still pending)."""
    return e["status"] == EventStatus.PENDING and not e["n_slower"] and not e["n_pending"]


def pages(model: SiteModel) -> Iterator[Page]:
    evs = attention.events(model)
    attach_triage(model, evs)
    divs = divergences(model)
    summary = (model.report or {}).get("summary") or {}
    # "what got slower": an event of pending speed-ups only made nothing slower: listed below, folded
    lead = [e for e in evs if e["status"] in attention.LEAD_EVENTS and not pending_faster_only(e)]
    # an event made only of bookkeeping series is no event: its findings are in the health count
    other = [
        e
        for e in evs
        if (e["status"] not in attention.LEAD_EVENTS + (bookkeeping.HEALTH_EVENT,)) or pending_faster_only(e)
    ]
    hl = attention.health(model)
    hfind = bookkeeping.health_findings(model)
    yield Page(
        "index.html",
        "index.html",
        "",
        dict(
            title="kernelwatch",
            device_noun=model.device_noun,
            results_dir=str(model.results_dir),
            health=health(model),
            n_commits=len(model.commits),
            n_series=len(model.series),
            newest=model.commits[-1] if model.commits else None,
            has_report=model.report is not None,
            analysis=model.amsg,
            budget=model.budget(),
            events=lead[:OVERVIEW_FINDINGS],
            n_events=len(lead),
            other_events=other[:OVERVIEW_FINDINGS],
            n_other_events=len(other),
            events_source=evs[0]["source"] if evs else "",
            divergences=divs[:OVERVIEW_FINDINGS],
            n_divergences=len(divs),
            trust=trust_lists(hl),
            failing=attention.failing_counts(model),
            health_source=hl["source"],
            trust_shown=HEALTH_ROWS,
            machine_events=bookkeeping.machine_events(model),
            bookkeeping=attention.health_groups(model),
            health_count=bookkeeping.counts(model, hfind),
            n_lead=len(model.findings) - len(hfind),
            excursions=bookkeeping.excursions(model),
            n_findings=len(model.findings),
            n_contended_missing=len(model.contended_missing),
            summary_points=summary.get("points"),
            benches=benchmark.summary(model),
            errors=model.errors[:ERRORS_SHOWN],
            n_errors=len(model.errors),
            latest=latest(model, attention.current_keys(model)),
        ),
    )
