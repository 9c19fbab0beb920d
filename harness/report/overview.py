"""``index.html``: the overview.

Per machine a health line (series, failing, regressions, newest commit) and its
latest results; the newest regressions and cross-GPU divergences from
:mod:`harness.analysis` with links to their evidence; the false-alarm budget of
that analysis; the benchmarks; the input problems.
"""

from __future__ import annotations

from typing import Iterator

from harness.report import benchmark
from harness.report import fmt as F
from harness.report.model import DIVERGENCE_STATUSES, REGRESSION_STATUSES, SiteModel
from harness.report.render import Page

#: Findings shown per list on the overview (all are on ``findings.html``).
OVERVIEW_FINDINGS = 25
#: Latest-result rows per machine shown on the overview (the rest on the machine page);
#: bounded so the index stays small with hundreds of series.
INDEX_LATEST_ROWS = 40
#: Input problems listed on the overview (the command prints all).
ERRORS_SHOWN = 200


def group_missing(findings) -> list[dict]:
    """``missing`` findings of one machine and benchmark over the same commits
    merged into one row naming how many cases stopped."""
    out, groups = [], {}
    for f in findings:
        if f["status"] != "missing":
            out.append(f)
            continue
        k = (f["machine"], f["benchmark"], f["c0"], f["c1"])
        if k in groups:
            groups[k]["n"] += 1
            continue
        g = groups[k] = dict(f, n=1)
        out.append(g)
    for g in groups.values():
        if g["n"] > 1:
            g["series"] = f"{g['machine']} / {g['benchmark']} ({g['n']} cases)"
    return out


def guard_health(counts: dict) -> dict:
    """The read-time guards' figure for one machine (``ResultSet.health``):
    ``guarded`` (points excluded: invalid, timing_bug, above_ceiling, contended),
    ``guard_badges`` (one badge per status with its count) and ``checked``."""
    bad = {k: v for k, v in sorted(counts.items()) if k != "ok" and v}
    return {"guarded": sum(bad.values()), "checked": sum(counts.values()),
            "guard_badges": [F.badge(f"{k} {v}", f"{v} point(s) with status {k}: excluded from statistics, "
                                     f"shown with the reason on their chart") for k, v in bad.items()]}


def health(model: SiteModel) -> list[dict]:
    """One line per machine: device, series, failing, regressions, newest commit, calibrated."""
    out = []
    for m in model.machines:
        p = model.parts[m]
        infos = model.series_of(m)
        info = p["info"]
        gpu = str(info.get("gpu") or "")
        newest = model.commits[int(model.maps[m][-1])] if len(model.maps[m]) else None
        out.append({
            "name": m, "slug": model.mslug[m], "device": gpu if gpu and gpu != "none" else str(info.get("cpu") or ""),
            "series": len(infos), "failing": sum(1 for s in infos if (s.latest or {}).get("failed")),
            "regressions": sum(1 for f in model.findings
                               if f["machine"] == m and f["status"] in ("regression", "drift_regression")),
            "newest": newest, "calibrated": p["calibration"] is not None,
            **guard_health(p.get("health") or {}),
        })
    return out


def latest(model: SiteModel) -> list[dict]:
    """Per machine the first :data:`INDEX_LATEST_ROWS` latest-result rows and the total."""
    out = []
    for m in model.machines:
        infos = model.series_of(m)
        out.append({"name": m, "slug": model.mslug[m], "total": len(infos),
                    "rows": [model.latest_row(s, "") for s in infos[:INDEX_LATEST_ROWS]]})
    return out


def pages(model: SiteModel) -> Iterator[Page]:
    # Most serious kind first, then newest, then largest. A benchmark that
    # stopped reporting is one line, not one per case.
    regs = sorted(group_missing(f for f in model.findings if f["status"] in REGRESSION_STATUSES),
                  key=lambda f: (REGRESSION_STATUSES.index(f["status"]), -f["order"], -f["abs_change"]))
    divs = sorted((f for f in model.findings if f["status"] in DIVERGENCE_STATUSES),
                  key=lambda f: (DIVERGENCE_STATUSES.index(f["status"]), -f["order"], -f["abs_change"]))
    summary = (model.report or {}).get("summary") or {}
    yield Page("index.html", "index.html", "", dict(
        title="kernelwatch", results_dir=str(model.results_dir), health=health(model), n_commits=len(model.commits),
        n_series=len(model.series), newest=model.commits[-1] if model.commits else None,
        has_report=model.report is not None, analysis=model.amsg, budget=model.budget(),
        regressions=regs[:OVERVIEW_FINDINGS], n_regressions=len(regs),
        divergences=divs[:OVERVIEW_FINDINGS], n_divergences=len(divs),
        n_findings=len(model.findings), summary_points=summary.get("points"),
        benches=benchmark.summary(model), errors=model.errors[:ERRORS_SHOWN], n_errors=len(model.errors),
        latest=latest(model)))
