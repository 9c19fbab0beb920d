"""Findings a person reads (issue 23 item 7): the pages lead with the changes
that matter and count the bookkeeping under Health, one click away.

Rules, each with a unit test on :mod:`harness.report.bookkeeping` and an HTML
assertion on the published pages: which findings are bookkeeping, the exact
counts, "stopped long ago" at its boundary (a series stopping exactly the
confirm window before its machine's newest commit is live, one commit earlier
is not), the report's ``health.excursions`` and ``machine_events`` rendered
when present and tolerated when absent. Negative control: a regression is
never moved into the health count, not even on a series that stopped long ago.

The report is hand-made here (the analysis does not emit excursions or machine
events yet).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_site_data import sha, write_results

from harness.report import bookkeeping as B
from harness.report import site

N = 12
WINDOW = 4  # the report's confirm_after
NEWEST = N - 1
EDGE_LAST = NEWEST - WINDOW  # edge.time_a's last point: exactly the window before the newest: live
GONE_LAST = NEWEST - WINDOW - 1  # gone.time_b's last point: one commit past the window: stopped long ago
STEP_AT = 8  # keep.time_z on m1 gets 40% slower here
SHAS = [sha(100 + i) for i in range(N)]
M = {"m1": {"gpu": "none", "cpu": "cpu one"}, "m2": {"gpu": "none", "cpu": "cpu two"}}
ONE = {"param_names": ["n"], "params": [["'1'"]]}
BENCH = {b: ONE for b in ("keep.time_z", "edge.time_a", "gone.time_b", "old.time_x", "new.time_y")}
STOP = {"edge.time_a": EDGE_LAST, "gone.time_b": GONE_LAST, "old.time_x": 5}


def _value(m, i, bench, combo):
    if bench in STOP and i > STOP[bench]:
        return math.nan
    if bench == "new.time_y" and i <= STOP["old.time_x"]:
        return math.nan
    return 1e-3 * (1.4 if (bench == "keep.time_z" and m == "m1" and i >= STEP_AT) else 1.0) * (1 + 0.001 * (i % 3))


def key(m, b):
    return {"machine": m, "benchmark": b, "params": [["n", "1"]], "timing": None}


def finding(status, m, b, c0, c1, ratio=None, reason=""):
    return {
        "status": status,
        "series": f"{m} / {b}(n=1)",
        "key": key(m, b),
        "other_key": None,
        "commit_range": [SHAS[c0], SHAS[c1]],
        "magnitude": {"ratio": ratio, "ci": [ratio * 0.98, ratio * 1.02] if ratio else None,
                      "change": ratio - 1 if ratio else None},
        "reason": reason or status,
    }  # fmt: skip


#: (status, machine, benchmark, c0, c1, ratio, lead?) of the report's findings.
FINDINGS = [
    ("regression", "m1", "keep.time_z", STEP_AT - 1, STEP_AT, 1.4, True),
    ("pending", "m1", "edge.time_a", EDGE_LAST - 1, EDGE_LAST, 1.2, True),  # at the limit: live
    ("pending", "m1", "gone.time_b", GONE_LAST - 1, GONE_LAST, 1.2, False),  # one past: stopped long ago
    ("regression", "m2", "gone.time_b", 2, 3, 1.3, True),  # negative control: a regression stays
    ("missing", "m1", "old.time_x", 5, NEWEST, None, False),
    ("missing", "m2", "old.time_x", 5, NEWEST, None, False),
    ("benchmark_version_change", "m2", "keep.time_z", 2, 3, 1.01, False),
    ("environment_change", "m2", "keep.time_z", 6, 7, 1.0, False),
    ("excursion", "m2", "edge.time_a", 3, 4, 1.3, False),
    ("machine_event", "m2", "keep.time_z", 4, 5, 1.3, False),
    ("improvement", "m2", "new.time_y", 8, 9, 0.8, True),
]
ME_ID = f"me-m2-{SHAS[5][:12]}"


def report(parts: bool = True) -> dict:
    rep = {
        "schema": "kernelwatch-analysis",
        "version": 3,
        "findings": [finding(*f[:6]) for f in FINDINGS],
        "summary": {"points": 100},
        "config": {"min_effect": 0.05, "min_points": 3, "confirm_after": WINDOW},
        "health": {"too_noisy": [], "insufficient_history": [], "failing": [], "missing": []},
    }
    if parts:
        rep["health"]["excursions"] = [
            {"key": key("m2", "keep.time_z"), "commit_range": [SHAS[4], SHAS[5]], "back_at": SHAS[7],
             "length": 2, "ratio": 1.31, "direction": "slower", "machine_event": ME_ID},
            {"key": key("m1", "new.time_y"), "commit_range": [SHAS[8], SHAS[9]], "back_at": SHAS[10],
             "length": 1, "ratio": 0.7, "direction": "faster", "machine_event": None},
        ]  # fmt: skip
        rep["machine_events"] = [
            {"id": ME_ID, "machine": "m2", "commit_range": [SHAS[4], SHAS[5]], "back_at": SHAS[7],
             "n_series": 2, "n_tested": 3, "median_ratio": 1.29, "direction": "slower",
             "keys": [key("m2", "keep.time_z"), key("m2", "new.time_y")],
             "reason": "2 of 3 series of m2 moved together and came back: the host, not the code"},
        ]  # fmt: skip
    return rep


def publish(tmp: Path, parts: bool = True) -> Path:
    results = write_results(tmp / "results", M, SHAS, BENCH, _value)
    (tmp / "report.json").write_text(json.dumps(report(parts)))
    site.publish(results, tmp / "site", analysis=tmp / "report.json")
    return tmp / "site"


@pytest.fixture(scope="module")
def bk_site(tmp_path_factory):
    return publish(tmp_path_factory.mktemp("bookkeeping"))


# --------------------------------------------------------------------------- the rules, on the model


def _model(last: dict[str, int], n: int = N, rep: dict | None = None):
    """A model with one machine of ``n`` commits and one series per benchmark ending at ``last[b]``."""
    by_key = {("m", b, (), None): SimpleNamespace(machine="m", gx=np.arange(x + 1)) for b, x in last.items()}
    return SimpleNamespace(by_key=by_key, maps={"m": np.arange(n)}, report=rep, findings=[])


def test_stopped_long_ago_at_its_boundary():
    mdl = _model({"live": N - 1, "edge": N - 1 - WINDOW, "gone": N - 2 - WINDOW})
    k = {b: ("m", b, (), None) for b in ("live", "edge", "gone")}
    assert [B.commits_behind(mdl, k[b]) for b in ("live", "edge", "gone")] == [0, WINDOW, WINDOW + 1]
    assert not B.stopped_long_ago(mdl, k["edge"], WINDOW)  # exactly at the limit: still live
    assert B.stopped_long_ago(mdl, k["gone"], WINDOW)  # one commit past it
    assert B.health_kind(mdl, "pending", k["edge"], WINDOW) is None
    assert B.health_kind(mdl, "pending", k["gone"], WINDOW) == B.STOPPED_PENDING
    assert B.commits_behind(mdl, ("m", "unknown", (), None)) is None
    assert not B.stopped_long_ago(mdl, ("m", "unknown", (), None), WINDOW)  # unknown: kept in the lead


def test_which_findings_are_bookkeeping_and_a_regression_never_is():
    mdl = _model({"gone": N - 2 - WINDOW})
    gone = ("m", "gone", (), None)
    for st in ("missing", "benchmark_version_change", "environment_change", "excursion", "machine_event"):
        assert B.health_kind(mdl, st, gone, WINDOW) == st
    # negative control: the changes that matter stay in the lead, even on a series that stopped long ago
    for st in ("regression", "drift_regression", "improvement", "drift_improvement", "divergent_change", "failing"):
        assert B.health_kind(mdl, st, gone, WINDOW) is None


def test_every_health_kind_has_its_line_and_an_unknown_one_is_still_listed():
    assert {k for k, _ in B.HEALTH_KINDS} == B.BOOKKEEPING_STATUSES | {B.STOPPED_PENDING, B.SAME_CODE}
    assert B.kinds_of({"missing": 1, "new_kind": 2}, WINDOW) == [
        ("missing", "series that stopped reporting"),
        ("new_kind", "new_kind"),
    ]


def test_confirm_window_comes_from_the_report():
    assert B.confirm_window({"config": {"confirm_after": 7}}) == 7
    assert B.confirm_window(None) == B.confirm_window({"config": {"confirm_after": "x"}}) == B.CONFIRM_AFTER


def site_model(results: Path, rep: dict, scratch: Path):
    """The :class:`SiteModel` ``publish`` draws from, qualified (bookkeeping classified)."""
    from harness.report import attention
    from harness.report.model import SiteModel, finding_rows, marks
    from harness.report.series import machine_dirs, worker

    rows = finding_rows(rep)
    for sub in ("data/s", "data/m"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    parts, errors, _ = worker((str(results), None, machine_dirs(results), str(scratch), marks(rows), False))
    mdl = SiteModel(parts, rows, rep, "hand-made", results, errors, None)
    attention.qualify(mdl)
    return mdl


def test_counts_are_exact_and_every_finding_is_in_one_list(bk_site, tmp_path):
    from harness.report import attention

    mdl = site_model(bk_site.parent / "results", report(), tmp_path)
    lead, health = B.lead_findings(mdl), B.health_findings(mdl)
    assert len(lead) + len(health) == len(FINDINGS)
    assert sorted((f["status"], f["machine"], f["benchmark"]) for f in lead) == sorted(
        (f[0], f[1], f[2]) for f in FINDINGS if f[6]
    )
    c = B.counts(mdl, health)
    assert c["findings"] == 7 and c["excursions"] == 2 and c["total"] == 9 and c["window"] == WINDOW
    assert [(k, n) for k, _, n in c["kinds"]] == [
        ("missing", 2),
        (B.STOPPED_PENDING, 1),
        ("benchmark_version_change", 1),
        ("environment_change", 1),
        ("excursion", 1),
        ("machine_event", 1),
    ]
    assert sum(g["n"] for g in attention.health_groups(mdl)) == len(health)
    assert sum(r["n"] for g in attention.health_groups(mdl) for r in g["rows"]) == len(health)


# --------------------------------------------------------------------------- the pages


def _health_text(html: str, anchor: str) -> str:
    return re.search(rf'<details class="health-list" id="{anchor}">(.*?)</details>', html, re.S).group(1)


def test_overview_leads_with_changes_and_counts_bookkeeping(bk_site):
    index = (bk_site / "index.html").read_text()
    assert re.search(r'id="lead-count">.*?<b>11</b> finding\(s\): <b>4</b> changes', index, re.S)
    # the counts add up (11 = 4 + 7): excursions are beside them, not in them (newcomer: "661 bookkeeping" of 655)
    assert (
        '<b>7</b> bookkeeping, counted under <a href="#trust-bookkeeping">Health</a> beside <b>2</b> excursion(s) '
        "that reverted (not findings)" in index
    )
    ev = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert "edge.time_a" in ev and "gone.time_b" in ev  # the live pending and the regression of m2
    # the pending of the stopped series is no event (nor a series of one), and names no machine of one
    assert f'id="ev-{SHAS[GONE_LAST][:8]}"' not in ev and "m1 / gone.time_b" not in ev
    assert (
        "1 pending slower (not confirmed), 0 faster, worst +20.0% slower on m1; machines: m1 " in ev
    )  # m2's env change: Health
    assert "(1 series more at this commit counted under" in ev
    dt = re.search(r'<dt id="trust-bookkeeping">bookkeeping: <b>(\d+)</b>', index).group(1)
    assert dt == "9"
    bk = _health_text(index, "bookkeeping")  # folded: a <details> one click away
    assert "2 series that stopped reporting" in bk and "more than 4 of their machine" in bk
    assert "1 pending change(s) at the end of series that stopped" in bk
    assert "m1 / gone.time_b(n=1)" in bk and "m1 / edge.time_a(n=1)" not in bk
    assert "2 excursion(s) that reverted" in bk and f'href="index.html#{ME_ID}"' in bk
    # a regression never moves into the health count
    assert 'class="badge bad">regression' not in bk
    # the benchmarks table counts the same way: gone.time_b's regression, its pending under Health
    row = re.search(r'<a href="bench/gone\.time_b-[0-9a-f]+\.html">gone\.time_b</a>(.*?)</tr>', index).group(1)
    assert row.endswith('<td class="num">1 <span class="muted">+ 1 bookkeeping</span></td>')


def test_machine_event_renders_with_its_evidence(bk_site):
    index = (bk_site / "index.html").read_text()
    li = re.search(rf'<li class="mevent" id="{ME_ID}">(.*?)</li>', index, re.S).group(1)
    assert re.search(r'<a href="machine/m2-[0-9a-f]+\.html">m2</a>', li) and "<b>2 of 3 series</b> moved together" in li
    assert "median x1.29 (slower)" in li and li.startswith('<span class="badge warn">machine event</span>')
    for i in (4, 5, 7):  # before, first commit, back at
        assert f'href="commit/{SHAS[i]}.html"' in li
    assert "the host, not the code" in li and "m2 / keep.time_z(n=1)" in li
    # not counted as a regression: the machine table's regressions of m2 are the one real one
    row = re.search(r"<td><b>m2</b></td>(.*?)</tr>", index, re.S).group(1)
    assert re.findall(r'<td class="num">(?:<span class="badge bad">)?(\d+)', row)[2] == "1"
    page = next((bk_site / "machine").glob("m2-*.html")).read_text()
    assert f'<li class="mevent" id="{ME_ID}">' in page and 'href="../commit/' in page
    assert '<li class="mevent"' not in next((bk_site / "machine").glob("m1-*.html")).read_text()


def test_findings_page_leads_and_folds_the_health_list(bk_site):
    page = (bk_site / "findings.html").read_text()
    assert (
        "<b>11</b> finding(s): <b>4</b> listed below" in page
        and "<b>7</b> bookkeeping (and 2 excursion(s) that reverted, not findings), counted under" in page
    )
    lead = re.search(r'<table class="findings" id="all-findings">(.*?)</table>', page, re.S).group(1)
    assert sorted(re.findall(r'data-status="(\w+)"', lead)) == ["improvement", "pending", "regression", "regression"]
    health = re.search(r'<details class="health-list" id="health">(.*?)</details>', page, re.S).group(1)
    assert "<b>Health: 9</b>" in health
    for kind in ("missing", B.STOPPED_PENDING, "benchmark_version_change", "environment_change", "excursion"):
        assert f'id="health-{kind}"' in health
    assert 'id="health-excursions">2 excursion(s) that reverted' in health
    assert sum(int(n) for n in re.findall(r'data-n="(\d+)"', health)) == 7  # every bookkeeping finding listed
    assert sum(int(n) for n in re.findall(r'data-n="(\d+)"', page)) == len(FINDINGS)
    assert page.index('id="health"') < page.index('id="all-findings"')  # the count is seen first


def test_older_report_without_the_new_parts(tmp_path):
    out = publish(tmp_path, parts=False)
    index, page = (out / "index.html").read_text(), (out / "findings.html").read_text()
    assert 'class="mevent"' not in index and "excursion(s) that reverted" not in index
    assert "<b>7</b> bookkeeping, counted under" in index and "<b>Health: 7</b>" in page
    assert "excursion(s) that reverted" not in page.split('id="lead-count"', 1)[1].split("</p>", 1)[0]


def test_an_excursion_is_marked_as_such_on_its_chart(bk_site):
    data = {p.name: p.read_text() for p in (bk_site / "data" / "s").glob("*.js")}
    marked = [t for t in data.values() if '"status":"excursion"' in t.replace(" ", "")]
    assert len(marked) >= 2  # the two excursions of health.excursions (and the excursion finding)
    assert any("that reverted: not a regression" in t for t in marked)


def test_no_bookkeeping_no_dangling_health_link(tmp_path):
    results = write_results(tmp_path / "results", M, SHAS, BENCH, _value)
    rep = dict(report(parts=False), findings=[finding(*FINDINGS[0][:6])])
    (tmp_path / "report.json").write_text(json.dumps(rep))
    site.publish(results, tmp_path / "site", analysis=tmp_path / "report.json")
    page = (tmp_path / "site" / "findings.html").read_text()
    assert "<b>0</b> bookkeeping." in page and 'href="#health"' not in page and 'id="health"' not in page
    assert "<b>0</b> bookkeeping, counted under" in (tmp_path / "site" / "index.html").read_text()


def test_an_event_keeps_what_is_not_bookkeeping(bk_site, tmp_path):
    """An analysis event of the stopped series' pending and a divergence: the
    pending is counted under Health, the event stays as the divergence it is;
    an event of the pending alone is no event."""
    from harness.report import attention

    def series(status, m, b, direction):
        return {"key": key(m, b), "status": status, "magnitude": {"ratio": 1.2}, "direction": direction}

    rep = report()
    rng = [SHAS[GONE_LAST - 1], SHAS[GONE_LAST]]
    rep["events"] = [
        {"id": "ev-both", "commit_range": rng, "status": "pending", "machines": ["m1", "m2"],
         "series": [series("pending", "m1", "gone.time_b", "slower"),
                    series("divergent_change", "m2", "keep.time_z", "slower")]},
        {"id": "ev-alone", "commit_range": rng, "status": "pending", "machines": ["m1"],
         "series": [series("pending", "m1", "gone.time_b", "slower")]},
    ]  # fmt: skip
    evs = {e["id"]: e for e in attention.events(site_model(bk_site.parent / "results", rep, tmp_path))}
    assert evs["ev-both"]["status"] == "divergent_change" and evs["ev-both"]["n_health"] == 1
    assert evs["ev-both"]["machines"] == "m2" and evs["ev-both"]["n_series"] == 1
    assert evs["ev-alone"]["status"] == B.HEALTH_EVENT and evs["ev-alone"]["n_series"] == 0


def test_a_pending_the_analysis_set_aside_is_counted_under_health(tmp_path):
    """health.stopped_pending (the analysis set a pending aside: its series has a
    'missing' finding) is a bookkeeping row, even when the series stopped only
    one commit before the newest; negative control: without it, no such row."""
    from harness.report.model import finding_rows

    rep = report()
    rep["health"]["stopped_pending"] = [
        {"key": key("m1", "keep.time_a"), "commit_range": [SHAS[NEWEST - 2], SHAS[NEWEST - 1]], "change": 0.2,
         "reason": "+20.0% slower at the newest 1 commit(s); the series stopped after it, so it cannot be confirmed"},
    ]  # fmt: skip
    rows = finding_rows(rep)
    aside = [r for r in rows if r["stopped"]]
    assert len(aside) == 1 and aside[0]["status"] == "pending" and aside[0]["change_num"] == 0.2
    assert not any(r["stopped"] for r in finding_rows(report()))
    (tmp_path / "report.json").write_text(json.dumps(rep))
    results = write_results(tmp_path / "results", M, SHAS, BENCH, _value)
    site.publish(results, tmp_path / "site", analysis=tmp_path / "report.json")
    page = (tmp_path / "site" / "findings.html").read_text()
    assert "cannot be confirmed" in page and "2 pending change(s) at the end of series that stopped" in page


def test_a_step_between_the_same_compiled_code_is_bookkeeping():
    """Newcomer trial: two steps at HEAD whose commits ran the same compiled code
    (the analysis' same_compiled_code annotation) led the overview under "What got
    slower". They are the machine's: counted under Health. Control: the same
    finding without the annotation leads."""
    from types import SimpleNamespace

    from harness.report import bookkeeping

    ann = [{"kind": "same_compiled_code", "text": "same compiled code: fingerprint f, ..."}]
    rows = [
        {"status": "regression", "skey": None, "annotations": ann},
        {"status": "regression", "skey": None, "annotations": []},
    ]
    model = SimpleNamespace(report={"config": {"confirm_after": 4}}, findings=rows)
    bookkeeping.classify(model)
    assert [r["health"] for r in rows] == [bookkeeping.SAME_CODE, ""]
    assert bookkeeping.lead_findings(model) == [rows[1]]
    # the overview's events use the same rule: such a series is counted under Health there too
    assert bookkeeping.is_health_series(model, "regression", None, ann)
    assert not bookkeeping.is_health_series(model, "regression", None, [])


def test_the_overview_says_nothing_got_slower_but_names_same_code_moves(tmp_path):
    """Newcomer trial (2026-12-03): the overview said "No commit made anything
    slower" while the newest commit's page listed two pending slowdowns between
    commits that ran the same compiled code. The sentence now counts them, with a
    link. Control: with no such move the sentence is as before."""
    rep = report(parts=False)
    same = finding("pending", "m1", "keep.time_z", NEWEST - 1, NEWEST, 1.5)
    same["annotations"] = [{"kind": "same_compiled_code", "text": "same compiled code: fingerprint f"}]
    for findings, expect in (
        ([same], "other than 1 move(s) between commits that ran the same compiled code"),
        ([], None),
    ):
        rep["findings"] = findings
        (tmp_path / "report.json").write_text(json.dumps(rep))
        results = write_results(tmp_path / "results", M, SHAS, BENCH, _value)
        site.publish(results, tmp_path / "site", analysis=tmp_path / "report.json")
        index = (tmp_path / "site" / "index.html").read_text()
        line = index.split('id="events"', 1)[1].split("</p>", 1)[0]
        assert "No commit made anything slower" in line, line
        # the heading says so too, not "(0 of 0)" (a newcomer's trial, 2026-12-07)
        assert "What got slower, by commit: nothing</h2>" in index and "(0 of 0)" not in index
        assert (expect in line) if expect else ("same compiled code" not in line), line


def test_a_step_the_newest_commits_may_undo_says_so_where_it_is_listed(tmp_path):
    """Newcomer trial (2026-12-03): OpenBLAS's noble axpy read "regression +5.4%" on
    the overview while only the findings page said its newest two commits were back
    at the old level (a pending move). The regression's reason now says so on both
    pages. Control: a pending that does not return to that level adds nothing."""
    for back, expect in ((True, True), (False, False)):
        rep = report(parts=False)
        reason = "-28.6% faster at the newest 1 commit(s)" + (
            f"; back to the level before the +40.0% slower step at {SHAS[STEP_AT][:12]}, 3 commit(s) earlier"
            if back
            else ""
        )
        rep["findings"] = [
            finding("regression", "m1", "keep.time_z", STEP_AT - 1, STEP_AT, 1.4),
            finding("pending", "m1", "keep.time_z", NEWEST - 1, NEWEST, 0.714, reason),
        ]
        (tmp_path / "report.json").write_text(json.dumps(rep))
        results = write_results(tmp_path / "results", M, SHAS, BENCH, _value)
        site.publish(results, tmp_path / "site", analysis=tmp_path / "report.json")
        for page in ("index.html", "findings.html"):
            text = (tmp_path / "site" / page).read_text()
            assert ("the newest commits may undo it" in text) is expect, (page, back)
