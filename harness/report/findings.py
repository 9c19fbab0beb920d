"""``findings.html``: the findings of the analysis run, for triage.

The changes that matter first, real regressions first, newest first
(:func:`harness.report.attention.triage_rows`), then the bookkeeping
(:mod:`harness.report.bookkeeping`) as counts per kind with its rows folded
under "Health", one click away, and the machine events and excursions of the report;
benchmarks that stopped reporting while others started at the same commits
collapse into one "renamed or replaced" row; filters by machine, kind and
benchmark (``static/findings.js``); the counts per kind and the rows shown add
up to the findings of the report (each row says how many it stands for).
"""

from __future__ import annotations

from typing import Iterator

from harness.core.model import Status
from harness.report import attention, bookkeeping, overview
from harness.report.model import SiteModel
from harness.report.render import Page

#: Most rows listed on ``findings.html`` (the JSON report has every finding).
FINDINGS_PAGE_MAX = 5000


def pages(model: SiteModel) -> Iterator[Page]:
    counts: dict[str, int] = {}
    for f in model.findings:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    rows = attention.triage_rows(model, bookkeeping.lead_findings(model))
    shown = rows[:FINDINGS_PAGE_MAX]
    hfind = bookkeeping.health_findings(model)
    groups = attention.health_groups(model)
    for g in groups:
        g["rows"] = g["rows"][:FINDINGS_PAGE_MAX]
    rank = {s: i for i, s in enumerate(attention.TRIAGE_ORDER)}
    every = rows + [r for g in groups for r in g["rows"]]  # the filters apply to the health tables too
    kinds = sorted({r["status"] for r in every}, key=lambda s: (rank.get(s, len(rank)), s))
    fc = attention.failing_counts(model)
    # what a count counts where another page counts the same word differently (the overview's failing)
    notes = {
        Status.FAILING: f"series with a failed result anywhere in their history: {fc['still']} still failing at "
        f"their newest commit (the count on the overview), {fc['fixed']} "
        f"valid again since"
    }
    yield Page(
        "findings.html",
        "findings.html",
        "",
        dict(
            title="findings - kernelwatch",
            findings=shown,
            total=len(model.findings),
            n_contended_missing=len(model.contended_missing),
            n_lead=len(model.findings) - len(hfind),
            health_count=bookkeeping.counts(model, hfind),
            bookkeeping=groups,
            excursions=bookkeeping.excursions(model),
            machine_events=bookkeeping.machine_events(model),
            n_rows=len(rows),
            n_shown=sum(r["n"] for r in shown),
            counts=sorted(counts.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])),
            count_notes=notes,
            kinds=kinds,
            machines=sorted({r["machine"] for r in every if r["machine"]}),
            analysis=model.amsg,
            has_report=model.report is not None,
            budget=model.budget(),
            # every series of each health list (the overview shows the first few and links here)
            trust=[(t, slug, rows) for t, slug, rows in overview.trust_lists(attention.health(model)) if rows],
        ),
    )
