"""The morning page (issue 15): events first, triage of the findings, the
matrix's default baseline and neutral cells, the roofline table, the metric
menu, the CLI's version and help.

Reports are hand-made after the analysis/site contract (``events[]``,
``health``), so the site is tested on what the analysis will emit; the
fallback (no ``events``) groups the findings by commit range.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from test_site_data import sha, write_results

from harness import cli
from harness.report import attention, benchmark, roofline, site

N = 8
RENAME_AT = 4  # old.time_x stops after commit 3; new.time_y starts at commit 4
STEP_AT = 6  # keep.time_z on m1 gets 40% slower here
GAP_AT = 2  # keep.time_z on m2 has no result here (m2 measured the commit)
M = {"m1": {"gpu": "none", "cpu": "cpu one"}, "m2": {"gpu": "none", "cpu": "cpu two"}}
BENCH = {
    "keep.time_z": {"param_names": ["n"], "params": [["'1'"]]},
    "old.time_x": {"param_names": ["n"], "params": [["'1'", "'2'"]]},
    "new.time_y": {"param_names": ["n"], "params": [["'1'", "'2'", "'3'"]]},
}
SHAS = [sha(i) for i in range(N)]


def _value(m, i, bench, combo):
    if bench == "old.time_x":
        return 1e-3 if i < RENAME_AT else math.nan
    if bench == "new.time_y":
        return 2e-3 * (1 + 0.001 * (i % 2)) if i >= RENAME_AT else math.nan
    if m == "m2" and i == GAP_AT:
        return math.nan
    return 1e-3 * (1.4 if (m == "m1" and i >= STEP_AT) else 1.0) * (1 + 0.001 * (i % 3))


def key(m, b, n="1"):
    return {"machine": m, "benchmark": b, "params": [["n", n]], "timing": None}


def finding(status, k, c0, c1, ratio=None, reason=""):
    return {
        "status": status,
        "series": f"{k['machine']} / {k['benchmark']}(n={k['params'][0][1]})",
        "key": k,
        "other_key": None,
        "commit_range": [SHAS[c0], SHAS[c1]],
        "magnitude": {
            "ratio": ratio,
            "ci": [ratio * 0.98, ratio * 1.02] if ratio else None,
            "change": ratio - 1 if ratio else None,
        },
        "reason": reason,
    }


def report(with_events: bool = True) -> dict:
    f = [
        finding("regression", key("m1", "keep.time_z"), STEP_AT - 1, STEP_AT, 1.4, "step: 40% worse"),
        finding("benchmark_version_change", key("m2", "keep.time_z"), 2, 3, 1.01, "version 1 -> 2"),
    ]
    for m in M:
        for n in ("1", "2"):
            f.append(
                finding(
                    "missing",
                    key(m, "old.time_x", n),
                    RENAME_AT - 1,
                    N - 1,
                    None,
                    "missing since commit: no value in the 4 later commits",
                )
            )
    rep = {
        "schema": "kernelwatch-analysis",
        "version": 3,
        "findings": f,
        "summary": {"points": 100, "findings_by_status": {"regression": 1}},
        "config": {"min_effect": 0.05, "min_points": 6},
    }
    if with_events:
        rep["events"] = [
            {
                "id": f"ev-{SHAS[STEP_AT][:8]}",
                "commit_range": [SHAS[STEP_AT - 1], SHAS[STEP_AT]],
                "status": "regression",
                "series": [
                    {
                        "key": key("m1", "keep.time_z"),
                        "status": "regression",
                        "magnitude": {"ratio": 1.4, "change": 0.4},
                        "direction": "slower",
                        "timing": None,
                        "finding_index": 0,
                    }
                ],
                "machines": ["m1"],
                "n_slower": 1,
                "n_faster": 0,
                "max_magnitude": 1.4,
                "annotations": [{"kind": "autotune_changed", "text": "BLOCK_SIZE_M 64 -> 128", "evidence": None}],
            },
            {
                "id": f"ev-{SHAS[3][:8]}",
                "commit_range": [SHAS[2], SHAS[3]],
                "status": "benchmark_changed",
                "series": [
                    {
                        "key": key("m2", "keep.time_z"),
                        "status": "benchmark_version_change",
                        "magnitude": {"ratio": 1.01},
                        "direction": "slower",
                        "finding_index": 1,
                    }
                ],
                "machines": ["m2"],
                "n_slower": 0,
                "n_faster": 0,
                "max_magnitude": None,
                "annotations": [{"kind": "benchmark_changed", "text": "version 1 -> 2", "evidence": None}],
            },
        ]
        rep["health"] = {
            "too_noisy": [key("m2", "keep.time_z")],
            "insufficient_history": [dict(key("m1", "new.time_y", "3"), reason="not enough history: 4 points, need 6")],
            "failing": [],
            "missing": [],
        }
    return rep


def build(tmp: Path, with_events: bool = True) -> tuple[Path, Path]:
    results = write_results(tmp / "results", M, SHAS, BENCH, _value)
    rep = tmp / "report.json"
    rep.write_text(json.dumps(report(with_events)))
    out = tmp / "site"
    site.publish(results, out, analysis=rep)
    return results, out


@pytest.fixture(scope="module")
def morning_site(tmp_path_factory):
    return build(tmp_path_factory.mktemp("morning"))[1]


def test_overview_leads_with_events_then_divergences_health_latest(morning_site):
    index = (morning_site / "index.html").read_text()
    order = [
        index.index(s)
        for s in (
            'id="events"',
            "<h2>Divergences between devices",
            'id="health"',
            'id="trust"',
            "<h2>Latest results</h2>",
        )
    ]
    assert order == sorted(order)
    ev = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert ev.count('<li class="event') == 1  # the benchmark change is bookkeeping, counted under Health
    assert f'href="commit/{SHAS[STEP_AT]}.html"' in ev and f'href="commit/{SHAS[STEP_AT - 1]}.html"' in ev
    assert (
        "<b>1 slower</b>" in ev
        and "worst +40.0% slower on m1; machines: m1" in ev
        and "BLOCK_SIZE_M 64 -&gt; 128" in ev
    )
    link = re.search(r'href="(bench/keep\.time_z-[0-9a-f]+\.html)#(c[0-9a-f]+)">m1 / keep\.time_z\(n=1\)', ev)
    assert link and (morning_site / link.group(1)).is_file()
    assert '<details id="other-events">' not in index  # nothing but the version change was left
    bk = re.search(r'<details class="health-list" id="bookkeeping">(.*?)</details>', index, re.S).group(1)
    assert "benchmark_version_change" in bk and f"commit/{SHAS[3]}.html" in bk
    assert "Events as the analysis report grouped them." in index and "Events: analysis." not in index


def test_health_lists_name_the_series_not_to_trust(morning_site):
    index = (morning_site / "index.html").read_text()
    trust = re.search(r'<dl class="trust" id="trust">(.*?)</dl>', index, re.S).group(1)
    noisy = re.search(r"too noisy to judge: <b>(\d+)</b></dt>\s*<dd>(.*?)</dd>", trust, re.S)
    assert noisy.group(1) == "1" and "m2 / keep.time_z(n=1)" in noisy.group(2) and 'href="bench/' in noisy.group(2)
    short = re.search(r"not enough history: <b>(\d+)</b></dt>\s*<dd>(.*?)</dd>", trust, re.S)
    assert short.group(1) == "1" and "not enough history: 4 points, need 6" in short.group(2)
    stopped = re.search(
        r'<h4 id="bk-missing">(\d+) series that stopped reporting <span class="muted">in (\d+) row', trust
    )
    assert stopped.groups() == ("4", "2")  # 2 cases x 2 machines, one renamed-or-replaced row per machine
    # the latest results show only the series still reporting
    latest = index[index.index("<h2>Latest results</h2>") :]
    assert "old.time_x" not in latest.split("<h2>Benchmarks</h2>")[0]
    assert "(4 series that stopped reporting not shown)" not in latest
    assert latest.count("(2 series that stopped reporting not shown)") == 2


def test_findings_page_triage_rows_and_counts_add_up(morning_site):
    page = (morning_site / "findings.html").read_text()
    rows = re.findall(
        r'<tr class="st-\w+" data-machine="([^"]*)" data-status="([^"]*)" data-benchmark="([^"]*)" '
        r'data-n="(\d+)"',
        page,
    )
    lead = page[page.index('id="all-findings"') :]
    assert re.search(r'data-status="([^"]*)"', lead).group(1) == "regression"  # real regressions first
    renamed = [r for r in rows if r[1] == "renamed_or_replaced"]
    assert [(r[0], r[3]) for r in renamed] == [("m1", "2"), ("m2", "2")]
    assert all("old.time_x" in r[2] and "new.time_y" in r[2] for r in renamed)
    total = len(report()["findings"])
    assert sum(int(r[3]) for r in rows) == total
    assert f"<b>{total}</b> finding(s) =" in page and "missing: 4" in page
    assert "m1: 2 series of 1 benchmark(s) stopped, 3 series of 1 benchmark(s) started at" in page
    assert 'id="f-machine"' in page and 'id="f-kind"' in page and 'id="f-bench"' in page


def test_stopped_without_a_successor_is_missing_per_benchmark(tmp_path):
    """Series that stop with nothing starting at that commit stay ``missing``, one row per benchmark."""
    results = write_results(
        tmp_path / "r",
        {"m1": M["m1"]},
        SHAS,
        {"old.time_x": BENCH["old.time_x"], "keep.time_z": BENCH["keep.time_z"]},
        _value,
    )
    rep = {
        "schema": "kernelwatch-analysis",
        "findings": [finding("missing", key("m1", "old.time_x", n), RENAME_AT - 1, N - 1) for n in ("1", "2")],
    }
    (tmp_path / "a.json").write_text(json.dumps(rep))
    site.publish(results, tmp_path / "s", analysis=tmp_path / "a.json")
    page = (tmp_path / "s" / "findings.html").read_text()
    assert "renamed_or_replaced" not in page.split('id="all-findings"')[1]
    assert 'data-status="missing" data-benchmark="old.time_x " data-n="2"' in page
    assert "m1 / old.time_x (2 cases)" in page


def test_fallback_events_group_findings_by_commit_range():
    rep = report(with_events=False)
    rep["findings"].append(finding("regression", key("m2", "keep.time_z"), STEP_AT - 1, STEP_AT, 1.2))
    rep["findings"].append(finding("improvement", key("m2", "new.time_y"), STEP_AT - 1, STEP_AT, 0.8))
    evs = {tuple(e["commit_range"]): e for e in attention.fallback_events(rep)}
    ev = evs[(SHAS[STEP_AT - 1], SHAS[STEP_AT])]
    assert ev["status"] == "mixed" and ev["n_slower"] == 2 and ev["n_faster"] == 1
    assert ev["machines"] == ["m1", "m2"] and ev["max_magnitude"] == pytest.approx(1.4)
    assert evs[(SHAS[2], SHAS[3])]["status"] == "benchmark_changed"
    assert all(
        tuple(e["commit_range"]) != (SHAS[RENAME_AT - 1], SHAS[N - 1]) for e in evs.values()
    )  # missing is no event
    assert attention.fallback_events({"findings": [{"status": "regression", "commit_range": None}, "junk"]}) == []


def test_fallback_events_on_the_overview(tmp_path):
    _, out = build(tmp_path, with_events=False)
    index = (out / "index.html").read_text()
    assert "Events grouped from the findings." in index
    ev = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert ev.count('<li class="event') == 1 and f"commit/{SHAS[STEP_AT]}.html" in ev
    # no health block in the report: too noisy / not enough history come from its series table (none here)
    assert "too noisy to judge: <b>0</b>" in index


def _matrix_data(out: Path) -> dict:
    text = (out / "matrix.html").read_text()
    return json.loads(re.search(r'<script type="application/json" id="kw-data">(.*?)</script>', text, re.S).group(1))


def test_matrix_default_baseline_and_neutral_cells(morning_site):
    text = (morning_site / "matrix.html").read_text()
    first = re.search(r'<select id="baseline"><option value="([0-9a-f]+)">[0-9a-f]+ \(([^)]*)\)', text)
    # the oldest commit at which the current series (keep, new) have results: where new.time_y starts
    assert first.groups() == (SHAS[RENAME_AT], "oldest commit of the current series")
    d = _matrix_data(morning_site)
    labels = [c["label"] for c in d["cases"]]
    assert not any(lb.startswith("old.time_x") for lb in labels)  # stopped: not in the matrix
    keep = d["cases"][labels.index("keep.time_z(n=1)")]
    m1, m2 = d["machines"].index("m1"), d["machines"].index("m2")
    h = SHAS[RENAME_AT]
    assert keep["speedup"][h][m1] == pytest.approx(1 / 1.4, rel=0.01) and keep["changed"][h][m1] == "changed"
    assert keep["changed"][h][m2] is None  # no tested change in the interval: neutral
    new = d["cases"][labels.index("new.time_y(n=1)")]
    assert new["changed"][h] == [None, None]
    assert "A cell marked <b>[?]</b> belongs to a series" in text  # the doubt marker is explained


def test_matrix_without_a_report_judges_by_the_ci(tmp_path):
    results = write_results(tmp_path / "r", M, SHAS, BENCH, _value)
    site.publish(results, tmp_path / "s", analysis="off")
    d = _matrix_data(tmp_path / "s")
    keep = next(c for c in d["cases"] if c["label"] == "keep.time_z(n=1)")
    h = next(iter(keep["speedup"]))
    m1, m2 = d["machines"].index("m1"), d["machines"].index("m2")
    assert keep["changed"][h][m1] == "changed" and keep["changed"][h][m2] is None  # 40% vs 0.1% against a 1% CI


def test_metric_menu_names_the_unit():
    # the chart names the time unit it picks (s, ms, us, ns) on the axis and in the menu (issue 25)
    assert benchmark.metric_menu("seconds")[0] == ("time", "time")
    assert benchmark.metric_menu("bytes")[0] == ("time", "value (bytes)")
    labels = dict(benchmark.metric_menu("seconds"))
    assert labels["tflops"] == "tflops (TFLOP/s)" and labels["gbps"] == "gbps (GB/s)" and "%" in labels["sol"]


def test_benchmark_page_menu_and_findings_per_case(morning_site):
    page = next((morning_site / "bench").glob("keep.time_z-*.html")).read_text()
    assert '<option value="time" data-label="time">time</option>' in page
    assert "time (s)" not in page  # never a fixed unit the axis may contradict
    assert re.search(r'<table class="findings" id="bench-findings">.*data-case="c[0-9a-f]+"', page, re.S)


def test_roofline_labels_and_distance_table_sorted():
    assert (
        roofline.short_label(
            "suite.vector_add.track_time", (("provider", "triton"), ("shape", "'4096'"), ("timing", "cold"))
        )
        == "vector_add triton 4096"
    )
    assert roofline.short_label("benchmarks.Dgemm.time_dgemm", (("param1", "100"),)) == "Dgemm 100"
    pts = [
        {"label": f"k{i}", "short": f"k{i}", "href": "x", "ai": 1.0, "tflops": 1.0, "sol": s, "bound": "memory"}
        for i, s in enumerate([0.5, None, 0.01, 1.3])
    ]
    rows = roofline.distances(pts)
    assert [r["label"] for r in rows] == ["k2", "k0", "k3", "k1"]  # furthest from the roof first, n/a last
    assert rows[0]["below"] == "100x" and rows[0]["roof"] == "100" and rows[2]["doubt"] and rows[3]["roof"] == "n/a"


def test_roofline_page_has_the_table(tmp_path):
    from test_site import build as build_fixture

    repo, results, shas = build_fixture(tmp_path)
    site.publish(results, tmp_path / "s", repo=repo, analysis="off")
    page = next((tmp_path / "s" / "roofline").glob("gpu-a*.html")).read_text()
    table = re.search(r'<table class="results" id="roof-table">(.*?)</table>', page, re.S).group(1)
    sols = [float(x) for x in re.findall(r'<td class="num">([\d.]+)%</td><td class="num">[\d.]+x</td>', table)]
    assert len(sols) == 2 and sols == sorted(sols)


def test_cli_version_and_plain_help(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"kernelwatch \d+\.\d+\.\d+\S*\n", out)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text and "Exit codes: 0 fine" in text


def test_cli_tables_are_not_wrapped_off_a_terminal(tmp_path):
    import io

    from rich.table import Table

    buf = io.StringIO()
    t = Table()
    t.add_column("reason")
    t.add_row("x" * 150)
    cli.console(file=buf).print(t)
    assert any(len(line) > 150 for line in buf.getvalue().splitlines())
    # a negative control: rich's own default off a terminal wraps at 80 columns
    from rich.console import Console

    buf2 = io.StringIO()
    Console(file=buf2).print(t)
    assert max(len(line) for line in buf2.getvalue().splitlines()) <= 80


def test_health_names_values_above_a_peak_and_contention(tmp_path):
    """A latest value at 209% MFU is listed as failing a guard; a throttled one
    as measured under contention; the other machine (plain values) in neither."""
    from test_site_data import write_record

    results = write_results(tmp_path / "r", M, SHAS, {"keep.time_z": BENCH["keep.time_z"]}, _value)
    t = _value("m1", N - 1, "keep.time_z", ("'1'",))
    # 140 TFLOP/s of fp32 without tensor cores: 209% of the H100 SXM datasheet's 67 (read guards
    # derive the figures again against the record's device).
    write_record(
        results,
        "m1",
        SHAS[-1],
        "keep.time_z",
        {"n": "1"},
        t,
        flops=int(140e12 * t),
        nbytes=8,
        peak_tflops=67.0,
        peak_gbps=3350.0,
        device={"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"},
        clocks={"available": True, "throttle_reasons": ["cpu_contention"]},
    )
    site.publish(results, tmp_path / "s", analysis="off")
    index = (tmp_path / "s" / "index.html").read_text()
    guard = re.search(
        r"values failing a guard \(the Health table counts every point\): <b>(\d+)</b></dt>\s*<dd>(.*?)</dd>",
        index,
        re.S,
    )
    assert guard.group(1) == "1" and "m1 / keep.time_z(n=1)" in guard.group(2)
    assert "timing_bug" in guard.group(2) and "exceeds the datasheet peak 67 TFLOP/s" in guard.group(2)
    busy = re.search(
        r"measured under contention at their newest commit: <b>(\d+)</b>(.*?)</dt>\s*<dd>(.*?)</dd>", index, re.S
    )
    assert busy.group(1) == "1" and "throttled: cpu_contention" in busy.group(3) and "m2" not in busy.group(3)
    # a throttled run keeps a value (its clean samples): the count says so (newcomer trial)
    assert "0 without a value; 1 with their throttled samples dropped" in busy.group(2)
    # its value is kept and drawn as a plain point: its tag is not the charts' "under contention"
    latest = index.split("<h2>Latest results</h2>", 1)[1]
    assert ">throttled samples dropped</span>" in latest and ">under contention</span>" not in latest
    # without a report the analysis-only lists say so instead of reading 0
    assert 'too noisy to judge: <b>0</b> <span class="muted">(n/a: analysis not run' in index


def test_guard_list_names_only_values_beyond_the_margin():
    """A new user saw matmul's mfu 102.0% as a 'within the margin: noise' badge on the
    table and, on the same page, under 'values failing a guard'. Within the 5% margin
    it passed the guards; beyond it, it is listed."""
    from types import SimpleNamespace

    from harness.report import attention

    def sv(name, mfu):
        return SimpleNamespace(
            machine="m",
            label=name,
            href=f"{name}.html",
            key=(name,),
            latest={"status": "ok", "metrics": {"mfu": mfu, "sol": mfu}},
        )

    model = SimpleNamespace(series=[sv("within", 1.02), sv("beyond", 1.2), sv("fine", 0.5)])
    rows = attention.guard_failures(model)
    assert [r["label"] for r in rows] == ["m / beyond"]
    assert "mfu 120.0%" in rows[0]["why"]
