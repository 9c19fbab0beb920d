"""``findings.html``: every finding of the analysis run, with counts per kind and
the false-alarm budget."""

from __future__ import annotations

from typing import Iterator

from harness.report.model import SiteModel
from harness.report.render import Page

#: Most findings listed on ``findings.html`` (the JSON report has all).
FINDINGS_PAGE_MAX = 5000


def pages(model: SiteModel) -> Iterator[Page]:
    counts: dict[str, int] = {}
    for f in model.findings:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    yield Page("findings.html", "findings.html", "", dict(
        title="findings - kernelwatch", findings=model.findings[:FINDINGS_PAGE_MAX], total=len(model.findings),
        counts=sorted(counts.items()), analysis=model.amsg, has_report=model.report is not None,
        budget=model.budget()))
