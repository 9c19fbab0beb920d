"""``bench/<benchmark>.html``: one benchmark, every case on every machine.

A case selector (parameters x timing method), the history of the case shown on
every machine in one chart (its data loaded lazily from ``data/s/<id>.js``), the
analysis findings of the benchmark, and the newest commits as a table.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from harness.report import fmt as F
from harness.report import profiles
from harness.report.model import SiteModel
from harness.report.render import Page

#: Newest commits listed (as a table, without script) on a benchmark page.
BENCH_COMMITS = 50
#: Findings listed on a benchmark page (the findings page has all).
BENCH_FINDINGS = 500


def by_benchmark(model: SiteModel) -> dict[str, list]:
    """Series grouped by benchmark name, in page order."""
    out: dict[str, list] = {}
    for s in model.series:
        out.setdefault(s.benchmark, []).append(s)
    return out


def pages(model: SiteModel) -> Iterator[Page]:
    f_by_bench: dict[str, list] = {}
    # the changes that matter first, the bookkeeping (counted under Health on the overview) after
    for f in sorted(model.findings, key=lambda f: bool(f.get("health"))):
        f_by_bench.setdefault(f["benchmark"], []).append(f)
    groups = by_benchmark(model)
    for bname in sorted(groups):
        yield page(model, bname, groups[bname], f_by_bench.get(bname, []))


def cases(model: SiteModel, infos: list) -> list[dict]:
    """The cases of one benchmark: label, timing, series id per machine, latest rows."""
    out: dict[str, dict] = {}
    for s in infos:
        cs = out.setdefault(
            s.cid,
            {
                "id": s.cid,
                "label": F.params_text(s.params) or "(no parameters)",
                "timing": s.timing or "",
                "series": {},
                "rows": [],
                "profiles": profiles.links_for(model, s.benchmark, s.params),
            },
        )
        cs["series"][s.machine] = s.sid
        cs["rows"].append(model.latest_row(s, "../"))
    return sorted(out.values(), key=lambda c: (F.natural_key(c["label"]), c["timing"]))


#: The metric menu: value and label (with its unit); ``time`` is the benchmark's own value.
METRIC_LABELS = (
    ("tflops", "tflops (TFLOP/s)"),
    ("gbps", "gbps (GB/s)"),
    ("mfu", "mfu (% of peak FLOP/s)"),
    ("bw_util", "bw_util (% of peak bandwidth)"),
    ("sol", "sol (% of speed of light)"),
)


def metric_menu(unit: str | None) -> list[tuple[str, str]]:
    """The metric options of a benchmark page, each naming its unit: the
    benchmark's own value first (``time`` for seconds: the chart picks s, ms,
    us or ns for its axis and the menu then names that one, so the two never
    disagree; ``value (bytes)`` for a track in bytes), then the figures derived
    from a cost model."""
    own = "time" if unit == "seconds" else f"value ({unit})" if unit else "value (no unit recorded)"
    return [("time", own)] + list(METRIC_LABELS)


def page(model: SiteModel, bname: str, infos: list, findings: list[dict]) -> Page:
    case_list = cases(model, infos)
    ms = sorted({s.machine for s in infos})
    unit = infos[0].unit
    page_data = {
        "benchmark": bname,
        "unit": unit,
        "machines": ms,
        "mslug": {m: model.mslug[m] for m in ms},
        "cases": [{"id": c["id"], "label": c["label"], "series": c["series"]} for c in case_list],
        "env": {m: model.env_changes.get(m, []) for m in ms},
        # per machine, its calibration's doubts: its mfu, bw_util and sol lines are drawn dashed and say so
        "cal_doubts": {
            m: ", ".join(st for st, _ in model.cal_doubts.get(m, [])) for m in ms if model.cal_doubts.get(m)
        },
    }
    mask = np.zeros(len(model.order), dtype=bool)
    for s in infos:
        mask[s.gx] = True
    used = np.flatnonzero(mask)
    recent = [model.commits[i] for i in used[::-1][:BENCH_COMMITS].tolist()]
    return Page(
        f"bench/{F.bench_slug(bname)}.html",
        "benchmark.html",
        "../",
        dict(
            title=f"{bname} - kernelwatch",
            benchmark=bname,
            unit=unit or "",
            cases=case_list,
            findings=[dict(f, case=(f["href"] or "#").split("#", 1)[1]) for f in findings[:BENCH_FINDINGS]],
            n_findings=len(findings),
            page_data=page_data,
            metrics=metric_menu(unit),
            recent=recent,
            n_used=int(used.size),
        ),
    )


def summary(model: SiteModel) -> list[dict]:
    """One line per benchmark for the overview: slug, cases, machines, findings
    (the changes that matter) and bookkeeping (the findings counted under Health)."""
    n_find: dict[str, int] = {}
    n_book: dict[str, int] = {}
    for f in model.findings:
        d = n_book if f.get("health") else n_find
        d[f["benchmark"]] = d.get(f["benchmark"], 0) + 1
    out = []
    for bname, infos in sorted(by_benchmark(model).items()):
        out.append(
            {
                "name": bname,
                "slug": F.bench_slug(bname),
                "cases": len({s.cid for s in infos}),
                "machines": len({s.machine for s in infos}),
                "findings": n_find.get(bname, 0),
                "bookkeeping": n_book.get(bname, 0),
            }
        )
    return out
