"""The generated site in a real headless Chromium (Debian's ``/usr/bin/chromium``
driven through Playwright's Python API; no browser download).

Every page must load from ``file://`` without a script error or a console
error, every chart must draw (a non-blank canvas and series with data), the
hostile commit subject must stay text inside a chart tooltip, and the metric
and case switches must redraw. The morning-page behaviours (issue 15) each have
a test: events before divergences and health on the overview, the findings
filters and their counts, the matrix's neutral cells and full row labels, the
roofline's point labels, non-overlapping ceiling labels, tick style and
distance table, the benchmark page's line breaks, unit names and findings per
case. A screenshot of every page checked goes to
``test-artifacts/screenshots/`` (gitignored; CI keeps it as an artifact).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from test_site import BENCH, FAIL_AT, HOSTILE_AT, OPENBLAS, build
from test_site_data import write_calibration

from harness.report import site

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("KERNELWATCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
SHOTS = ARTIFACTS / "screenshots"

if not CHROMIUM.exists():
    pytest.skip(f"Chromium not installed at {CHROMIUM} (Debian package 'chromium')", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-kw-chart]')].every(
    el => el.getAttribute('data-kw-rendered') === '1')"""
CHART_STATE = """() => [...document.querySelectorAll('[data-kw-chart]')].map(el => {
    const inst = echarts.getInstanceByDom(el);
    const series = inst ? inst.getOption().series : [];
    const points = series.reduce((n, s) => n + ((s.data || []).length), 0);
    let inked = 0;
    for (const c of el.querySelectorAll('canvas')) {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < d.length; i += 4 * 13) if (d[i] > 0) inked++;
    }
    return {kind: el.getAttribute('data-kw-chart'), points, inked};
})"""


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    repo, results, shas = build(tmp)
    out = tmp / "site"
    site.publish(results, out, repo=repo)
    return out, shas


class Page:
    """A tab that records script errors, console errors and dialogs."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.problems: list[str] = []
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on(
            "console",
            lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))

    def open(self, path: Path):
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")
        self.page.wait_for_function(CHARTS_DRAWN, timeout=15_000)
        return self.page

    def charts(self) -> list[dict]:
        return self.page.evaluate(CHART_STATE)

    def close(self):
        self.page.close()


def shot(page, site_name: str, path: Path, root: Path) -> Path:
    """A full-page screenshot named after the site and the page's path in it."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    rel = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(path.relative_to(root)))
    dest = SHOTS / f"{site_name}--{rel}.png"
    page.screenshot(path=str(dest), full_page=True)
    return dest


def _check_page(browser, path: Path, site_name: str | None = None, root: Path | None = None) -> list[dict]:
    tab = Page(browser)
    try:
        tab.open(path)
        charts = tab.charts()
        if site_name:
            shot(tab.page, site_name, path, root)
        for c in charts:
            assert c["points"] > 0 and c["inked"] > 50, (path.name, c)
        assert tab.problems == [], (path.name, tab.problems)
        assert tab.page.evaluate("() => window.__xss") is None
        return charts
    finally:
        tab.close()


def test_every_page_loads_and_draws(browser, fixture_site):
    out, shas = fixture_site
    pages = [
        out / "index.html",
        out / "findings.html",
        out / "matrix.html",
        out / "commit" / f"{shas[HOSTILE_AT]}.html",
        out / "commit" / f"{shas[-1]}.html",
    ]
    pages += sorted((out / "bench").glob("*.html")) + sorted((out / "machine").glob("*.html"))
    pages += sorted((out / "roofline").glob("*.html"))
    kinds = []
    for p in pages:
        kinds += [c["kind"] for c in _check_page(browser, p, "fixture", out)]
    assert sorted(set(kinds)) == ["history", "roofline", "sol-heatmap", "speedup-heatmap"]
    assert len(list(SHOTS.glob("fixture--*.png"))) >= len(pages)


def test_benchmark_page_switches_hover_and_screenshots(browser, fixture_site):
    out, shas = fixture_site
    page_path = next((out / "bench").glob(f"{BENCH}*.html"))
    tab = Page(browser)
    try:
        page = tab.open(page_path)
        # tooltip at the commit with the hostile subject: text, never markup
        page.evaluate(
            """(x) => {
            const inst = echarts.getInstanceByDom(document.getElementById('chart'));
            const series = inst.getOption().series;
            const k = series.findIndex(s => s.id === 'line-gpu-a');
            const i = series[k].data.findIndex(d => d[0] === x);
            inst.dispatchAction({type: 'showTip', seriesIndex: k, dataIndex: i});
        }""",
            HOSTILE_AT,
        )
        page.wait_for_timeout(300)
        tip = page.evaluate("""() => [...document.querySelectorAll('#chart div')]
            .map(d => d.textContent).filter(t => t.includes('onerror='))""")
        assert tip, "the tooltip does not show the commit subject as text"
        assert page.evaluate("() => document.querySelectorAll('#chart img, #chart script').length") == 0
        assert page.evaluate("() => window.__xss") is None
        assert any(
            "clocks: SM 1980 MHz" in t
            for t in page.evaluate("() => [...document.querySelectorAll('#chart div')].map(d => d.textContent)")
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "fixture-benchmark.png"))
        # metric switch: tflops comes from the records
        page.select_option("#metric", "tflops")
        page.wait_for_function("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().yAxis[0].name === 'tflops (TFLOP/s)'""")
        assert page.evaluate("() => document.querySelector('#metric option[value=sol]').disabled") is False
        # case switch loads the other case's series files (cases are in numeric order of their
        # parameters, so the first is 4096, the one with failures, found again by its label)
        first = page.evaluate("() => document.querySelector('#case').value")
        page.select_option("#case", page.evaluate("() => document.querySelector('#case').options[1].value"))
        page.wait_for_function(CHARTS_DRAWN)
        other = page.evaluate(
            """(first) => [...document.querySelector('#case').options]
            .find(o => o.text.includes('4096') && !o.text.includes('1048576')).value""",
            first,
        )
        assert other == first  # 4096 before 1048576: numeric, not lexicographic
        page.select_option("#case", other)
        page.wait_for_function(f"() => location.hash === '#{other}'")
        page.wait_for_function(CHARTS_DRAWN)
        charts = tab.charts()
        assert charts[0]["points"] > 0 and charts[0]["inked"] > 50
        # failed results are markers on their own axis, with their reason
        fails = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().series.filter(s => s.id.startsWith('fail-')).map(s => s.data.length)""")
        assert fails == [1, 1]
        assert tab.problems == []
        page.goto((out / "index.html").as_uri())
        page.screenshot(path=str(ARTIFACTS / "fixture-overview.png"), full_page=True)
    finally:
        tab.close()


def test_openblas_site_in_the_browser(browser, tmp_path):
    out = tmp_path / "openblas"
    site.publish(OPENBLAS, out)  # with the analysis: the findings page and the overview's events are real
    _check_page(browser, out / "index.html", "openblas", out)
    _check_page(browser, out / "matrix.html", "openblas", out)
    _check_page(browser, out / "findings.html", "openblas", out)
    for p in sorted((out / "roofline").glob("*.html")) + sorted((out / "machine").glob("*.html")):
        _check_page(browser, p, "openblas", out)
    dgemm = next(p for p in (out / "bench").glob("*.html") if "Dgemm" in p.name or "gemm" in p.name)
    charts = _check_page(browser, dgemm, "openblas", out)
    assert charts[0]["points"] > 20
    tab = Page(browser)
    try:
        page = tab.open(dgemm)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "openblas-benchmark.png"))
        page.goto((out / "index.html").as_uri())
        page.screenshot(path=str(ARTIFACTS / "openblas-overview.png"))
        assert tab.problems == []
    finally:
        tab.close()


# --------------------------------------------------------------------------- the morning page (issue 15)


@pytest.fixture(scope="module")
def morning_site(tmp_path_factory):
    from test_site_attention import build as build_morning

    return build_morning(tmp_path_factory.mktemp("morning"))[1]


def test_morning_site_every_page(browser, morning_site):
    out = morning_site
    pages = [out / "index.html", out / "findings.html", out / "matrix.html"]
    pages += sorted((out / "bench").glob("*.html")) + sorted((out / "machine").glob("*.html"))
    pages += sorted((out / "roofline").glob("*.html"))[:1] if any((out / "roofline").glob("*.html")) else []
    pages += sorted((out / "commit").glob("*.html"))[-2:]
    for p in pages:
        tab = Page(browser)
        try:
            tab.page.goto(p.as_uri())
            tab.page.wait_for_load_state("load")
            tab.page.wait_for_function(CHARTS_DRAWN, timeout=15_000)
            shot(tab.page, "morning", p, out)
            assert tab.problems == [], (p.name, tab.problems)
        finally:
            tab.close()


def test_overview_events_come_first_and_link_to_evidence(browser, morning_site):
    tab = Page(browser)
    try:
        page = tab.open(morning_site / "index.html")
        ys = page.evaluate("""() => ['#events', '#divergences, h2 + p.muted', '#health', '#trust']
            .map(s => document.querySelector(s)).map(e => e ? e.getBoundingClientRect().top : null)""")
        assert None not in ys and ys == sorted(ys), ys
        first = page.locator("#events li.event").first
        assert first.get_attribute("data-status") == "regression" and first.is_visible()
        first.locator("a").first.click()
        page.wait_for_load_state("load")
        assert "/commit/" in page.url and page.locator("h1").inner_text().startswith("Commit")
        assert tab.problems == []
    finally:
        tab.close()


def _visible_counts(page, table: str = "#all-findings") -> tuple[int, int, str]:
    return page.evaluate(
        """(sel) => {
        const rows = [...document.querySelectorAll(sel + ' tbody tr')].filter(r => !r.hidden);
        return [rows.length, rows.reduce((n, r) => n + parseInt(r.dataset.n, 10), 0),
                document.getElementById('f-count').textContent];
    }""",
        table,
    )


def test_findings_filters_and_counts_add_up(browser, morning_site):
    tab = Page(browser)
    try:
        page = tab.open(morning_site / "findings.html")
        total, lead, bookkeeping = (int(x) for x in page.locator("#lead-count b").all_inner_texts()[:3])
        assert total == lead + bookkeeping
        rows, n, text = _visible_counts(page)
        assert n == lead and text == f"{rows} row(s), {n} finding(s)"
        assert _visible_counts(page, "#health table.findings")[1] == bookkeeping
        assert not page.locator("#health").evaluate("d => d.open")  # folded: one click away
        page.select_option("#f-machine", "m1")
        rows, n, text = _visible_counts(page)
        assert 0 < n <= lead and text.startswith(f"{rows} row(s), {n} finding(s) match the filters")
        assert page.evaluate("""() => [...document.querySelectorAll('#all-findings tbody tr')]
            .filter(r => !r.hidden).every(r => r.dataset.machine === 'm1')""")
        page.select_option("#f-kind", "renamed_or_replaced")  # bookkeeping only: the health list opens
        assert _visible_counts(page)[:2] == [0, 0]
        assert _visible_counts(page, "#health table.findings")[:2] == [1, 2]
        assert "under Health: 1 row(s), 2 finding(s)" in _visible_counts(page)[2]
        assert page.locator("#health").evaluate("d => d.open")
        page.select_option("#f-machine", "")
        page.select_option("#f-kind", "")
        page.fill("#f-bench", "new.time")  # a renamed row matches the benchmarks that started too
        rows, n, _ = _visible_counts(page, "#health table.findings")
        assert rows == 2 and n == 4
        page.fill("#f-bench", "no-such-benchmark")
        assert _visible_counts(page)[:2] == [0, 0]
        assert tab.problems == []
    finally:
        tab.close()


def test_matrix_neutral_cells_and_full_row_labels(browser, morning_site):
    tab = Page(browser)
    try:
        page = tab.open(morning_site / "matrix.html")
        cells = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('speedup'))
            .getOption().series[0].data.map(d => Array.isArray(d) ? {v: d, neutral: false}
                                                    : {v: d.value, neutral: true, color: d.itemStyle.color})""")
        changed = [c for c in cells if not c["neutral"]]
        neutral = [c for c in cells if c["neutral"]]
        assert len(changed) == 1 and changed[0]["v"][3] < 0.75  # keep.time_z on m1: 40% slower
        assert neutral and all(c["v"][2] == 0 and c["color"] == "#eceef2" for c in neutral)
        # a row label, hovered, shows the whole case name
        pos = page.evaluate("""() => {
            const el = document.getElementById('speedup'), inst = echarts.getInstanceByDom(el);
            const y = inst.convertToPixel({yAxisIndex: 0}, 0), r = el.getBoundingClientRect();
            return [r.left + 410, r.top + y, inst.getOption().yAxis[0].data[0]];
        }""")
        page.mouse.move(pos[0] - 30, pos[1])
        page.wait_for_timeout(200)
        tip = page.locator(".label-tip[data-for=speedup]")
        assert tip.is_visible() and tip.inner_text() == pos[2]
        assert page.get_attribute("#speedup", "title") == pos[2]  # the browser's own tooltip too (issue 25)
        assert tab.problems == []
    finally:
        tab.close()


@pytest.fixture(scope="module")
def roof_site(tmp_path_factory):
    """The fixture site with gpu-a calibrated close to its datasheet: two ceiling
    labels near each other, which must not overlap."""
    tmp = tmp_path_factory.mktemp("roof")
    repo, results, shas = build(tmp)
    write_calibration(results, "gpu-a", gbps=3000.0, tflops=60.0)
    out = tmp / "site"
    site.publish(results, out, repo=repo, analysis="off")
    return out


def test_roofline_labels_ticks_and_distance_table(browser, roof_site):
    path = next((roof_site / "roofline").glob("gpu-a*.html"))
    tab = Page(browser)
    try:
        page = tab.open(path)
        state = page.evaluate("""() => {
            const inst = echarts.getInstanceByDom(document.getElementById('chart')), o = inst.getOption();
            const sc = o.series.find(s => s.name === 'kernels (newest)');
            const g = o.graphic[0].elements.filter(e => e.type === 'text').map(e => [e.y, e.style.text]);
            const fmt = o.yAxis[0].axisLabel.formatter;
            return {labels: sc.label.show, texts: g,
                    ticks: [0.001, 0.01, 0.1, 1, 10, 100, 1000, 1e5].map(v => fmt(v))};
        }""")
        assert state["labels"] is True
        ys = sorted(y for y, _ in state["texts"])
        assert len(ys) >= 2 and all(b - a >= 12 for a, b in zip(ys, ys[1:])), state["texts"]
        assert {"fp32 vector", "measured fp32 matmul"} <= {t for _, t in state["texts"]}
        assert state["ticks"] == ["0.001", "0.01", "0.1", "1", "10", "100", "1000", "1e5"]
        labels = page.evaluate("""() => {
            const inst = echarts.getInstanceByDom(document.getElementById('chart'));
            const sc = inst.getOption().series.find(s => s.name === 'kernels (newest)');
            return sc.data.map(d => sc.label.formatter({value: d.value}));
        }""")
        assert sorted(labels) == ["vector_add 1048576", "vector_add 4096"]
        sols = page.evaluate("""() => [...document.querySelectorAll('#roof-table tbody tr')]
            .map(r => parseFloat(r.children[5].textContent))""")
        assert len(sols) == 2 and sols == sorted(sols)
        page.locator("#roof-table tbody tr").first.click()
        picked = page.evaluate("""() => {
            const inst = echarts.getInstanceByDom(document.getElementById('chart'));
            const sc = inst.getOption().series.find(s => s.name === 'kernels (newest)');
            return sc.data.map(d => d.symbolSize || null);
        }""")
        idx = int(page.locator("#roof-table tbody tr").first.get_attribute("data-index"))
        assert picked[idx] == 16 and picked.count(16) == 1
        assert "picked" in page.locator("#roof-table tbody tr").first.get_attribute("class")
        # after the redraw both ceiling labels are still drawn, apart
        drawn = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart')).getZr().storage
            .getDisplayList().filter(e => e.style && /^(measured )?fp32 (vector|matmul)$/.test(e.style.text || ''))
            .map(e => [e.style.text, e.parent ? e.parent.y : e.y])""")
        assert sorted(t for t, _ in drawn) == ["fp32 vector", "measured fp32 matmul"], drawn
        assert abs(drawn[0][1] - drawn[1][1]) >= 12
        shot(page, "roof", path, roof_site)
        assert tab.problems == []
    finally:
        tab.close()


def _line(page, sid: str) -> list:
    return page.evaluate(f"""() => echarts.getInstanceByDom(document.getElementById('chart'))
        .getOption().series.find(s => s.id === '{sid}').data""")


def test_benchmark_line_breaks_units_and_findings_per_case(browser, fixture_site, morning_site):
    out, shas = fixture_site
    path = next((out / "bench").glob(f"{BENCH}*.html"))
    tab = Page(browser)
    try:
        page = tab.open(path)
        y_name = page.evaluate(
            "() => echarts.getInstanceByDom(document.getElementById('chart')).getOption().yAxis[0].name"
        )
        assert y_name.startswith("time (")  # one unit: the menu names the axis' (issue 25)
        assert page.locator("#metric option[value=time]").inner_text() == y_name
        assert page.locator("#metric option[value=gbps]").inner_text() == "gbps (GB/s)"
        other = page.evaluate(
            "() => [...document.querySelector('#case').options].find(o => o.text.includes('4096')).value"
        )
        page.select_option("#case", other)
        page.wait_for_function(f"() => location.hash === '#{other}'")
        page.wait_for_function(CHARTS_DRAWN)
        line = _line(page, "line-gpu-a")
        gaps = [p[0] for p in line if p[1] == "-"]
        assert gaps == [FAIL_AT] and [FAIL_AT - 1, line[FAIL_AT - 1][1]] == line[FAIL_AT - 1]
        # findings of the case shown only, every case on request
        vis = page.evaluate("""() => [...document.querySelectorAll('#bench-findings tbody tr')]
            .map(r => [r.dataset.case, !r.hidden])""")
        assert vis and all(shown == (c == other) for c, shown in vis) and any(s for _, s in vis)
        page.check("#findings-all")
        assert page.evaluate("() => [...document.querySelectorAll('#bench-findings tbody tr')].every(r => !r.hidden)")
        assert tab.problems == []
        # a commit the machine measured without this case breaks the line too
        page.goto(next((morning_site / "bench").glob("keep.time_z-*.html")).as_uri())
        page.wait_for_function(CHARTS_DRAWN, timeout=15_000)
        m2 = _line(page, "line-m2")
        assert any(p[1] == "-" for p in m2) and sum(1 for p in m2 if p[1] != "-") == 7
        assert all(p[1] != "-" for p in _line(page, "line-m1"))  # negative control: no gap, no break
        assert tab.problems == []
    finally:
        tab.close()


def test_benchmark_axis_names_the_unit_shown_and_changes_are_markers(browser, tmp_path):
    """s16 item 4: the y axis reads "time (ms)" above ticks in ms (not "time (s)"),
    version and environment changes are unlabelled markers whose text is in the
    tooltip of their commit."""
    import test_site_attention as A
    from test_site_trust import _build

    out = _build(tmp_path, noisy_m1=False)  # m1's torch changes at STEP_AT; values about 1 ms
    tab = Page(browser)
    try:
        page = tab.open(next((out / "bench").glob("keep.time_z-*.html")))
        st = page.evaluate(
            """() => { const o = echarts.getInstanceByDom(document.querySelector('[data-kw-chart]')).getOption();
            const m1 = o.series.find(s => s.id === 'line-m1');
            const env = m1.markLine.data.filter(d => d.lineStyle && d.lineStyle.type === 'dotted');
            return {name: o.yAxis[0].name, tick: o.yAxis[0].axisLabel.formatter(0.0012),
                    env: env.map(d => [d.xAxis, d.label && d.label.show]),
                    tip: o.tooltip[0].formatter([{value: [%d, 0.001], axisValue: %d}]),
                    tip0: o.tooltip[0].formatter([{value: [1, 0.001], axisValue: 1}])}; }"""
            % (A.STEP_AT, A.STEP_AT)
        )
        assert st["name"] == "time (ms)" and st["tick"] == "1.2"
        assert st["env"] == [[A.STEP_AT, False]]
        assert "m1: environment torch 2.13.0 -&gt; 2.14.0" in st["tip"]
        assert "environment" not in st["tip0"]  # negative control: no change at commit 1
        assert tab.problems == []
    finally:
        tab.close()


@pytest.fixture(scope="module")
def bookkeeping_site(tmp_path_factory):
    from test_site_bookkeeping import publish

    return publish(tmp_path_factory.mktemp("bookkeeping"))


def test_bookkeeping_is_counted_and_one_click_away(browser, bookkeeping_site):
    """Issue 23 item 7: the overview and the findings page show the health count
    with its list folded, one click opens it; a machine event shows its evidence."""
    from test_site_bookkeeping import ME_ID

    tab = Page(browser)
    try:
        page = tab.open(bookkeeping_site / "index.html")
        assert page.locator("#trust-bookkeeping b").inner_text() == "9"
        items = page.locator("#bookkeeping h4")
        assert not items.first.is_visible()  # folded
        page.locator("#bookkeeping > summary").click()
        assert items.first.is_visible() and "2 series that stopped reporting" in items.first.inner_text()
        me = page.locator(f"li.mevent#{ME_ID}")
        assert me.is_visible() and "2 of 3 series moved together" in me.inner_text()
        assert "median x1.29 (slower)" in me.inner_text()
        # the findings page: a link to a health kind opens the folded list at it
        page = tab.open(bookkeeping_site / "findings.html")
        assert "Health: 9" in page.locator("#health > summary").inner_text()
        assert not page.locator("#health-missing").is_visible()
        page.locator("#health > summary").click()
        assert page.locator("#health-missing").is_visible()
        page.goto((bookkeeping_site / "findings.html").as_uri() + "#health-excursions")
        page.wait_for_load_state("load")
        assert page.locator("#health-excursions").is_visible()
        assert tab.problems == []
    finally:
        tab.close()


# --------------------------------------------------------------------------- a newcomer's trial (issue 25)


def test_trial_chart_marks_above_100_and_contended_points(browser, tmp_path):
    """One CPU case: 102.5% of its ceiling at commit 3 (within the guard margin),
    measured under contention at the newest commit."""
    from test_read_guards import cal_for
    from test_site_trial import _results

    root, _ = _results(tmp_path, gbps=[3.0, 3.0, 3.0, 4.1, 3.0, 3.0], contended_at={5}, cal=cal_for(gbps=4.0))
    out = tmp_path / "site"
    site.publish(root, out)
    tab = Page(browser)
    try:
        page = tab.open(next((out / "bench").glob("suite.vector_add*.html")))
        page.select_option("#metric", "bw_util")
        page.wait_for_function("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().yAxis[0].name.startsWith('bw_util')""")
        line = _line(page, "line-h-cpu")
        assert all(p[1] == "-" or p[1] <= 1 for p in line) and sum(1 for p in line if p[1] != "-") == 4
        assert _line(page, "above-h-cpu") == [[3, 1, 3]]  # at 100%, not at 102.5%
        assert [p[0] for p in _line(page, "contended-h-cpu")] == [5]
        status = page.locator("#status").inner_text()
        assert "1 above ceiling" in status and "1 measured under contention" in status and "0 failed" in status
        tip = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().tooltip[0].formatter([{value: [3, 1], axisValue: 3}])""")
        assert "<b>above ceiling</b>" in tip and "102.5% measured" in tip
        tip5 = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().tooltip[0].formatter([{value: [5, 0.04], axisValue: 5}])""")
        assert "contended</b> (no value, not a failure)" in tip5 and ">failed<" not in tip5
        tip2 = page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().tooltip[0].formatter([{value: [2, 0.75], axisValue: 2}])""")
        assert "75.0%" in tip2 and "above ceiling" not in tip2  # negative control: a plain point
        assert "doubtful calibration" not in tip2
        assert (
            page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().series.find(s => s.id === 'line-h-cpu').lineStyle.type""")
            == "solid"
        )
        shot(page, "trial", next((out / "bench").glob("suite.vector_add*.html")), out)
        # against a contended calibration the utilisation line is dashed and says so
        from test_site_trial import contended_cal

        root2, _ = _results(tmp_path / "b", gbps=[3.0] * 4, contended_at=set(), cal=contended_cal())
        site.publish(root2, tmp_path / "site2")
        page = tab.open(next((tmp_path / "site2" / "bench").glob("suite.vector_add*.html")))
        page.select_option("#metric", "bw_util")
        page.wait_for_function("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().yAxis[0].name.startsWith('bw_util')""")
        assert (
            page.evaluate("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().series.find(s => s.id === 'line-h-cpu').lineStyle.type""")
            == "dashed"
        )
        assert "against a doubtful calibration (contended, unstable)" in page.locator("#status").inner_text()
        assert tab.problems == []
    finally:
        tab.close()


def test_trial_matrix_has_no_blank_cell(browser, fixture_site):
    out, _ = fixture_site
    tab = Page(browser)
    try:
        page = tab.open(out / "matrix.html")
        cells = page.evaluate("""() => ['sol', 'speedup'].map(id => {
            const inst = echarts.getInstanceByDom(document.getElementById(id)), o = inst.getOption();
            const fmt = o.series[0].label.formatter;
            return {n: o.series[0].data.length, rows: o.yAxis[0].data.length, cols: o.xAxis[0].data.length,
                    labels: o.series[0].data.map(d => fmt({value: Array.isArray(d) ? d : d.value}))};
        })""")
        for c in cells:
            assert c["n"] == c["rows"] * c["cols"], c  # every case x machine has a cell
            assert all(lb and lb.strip() for lb in c["labels"]), c["labels"]
            assert not any(re.fullmatch(r"1\d\d\.\d%|[2-9]\d\d\.\d%", lb) for lb in c["labels"])
        assert any(lb == "n/a" for c in cells for lb in c["labels"])  # the fixture has cells without a figure
        assert tab.problems == []
    finally:
        tab.close()


TABLES_SPILL = """() => [...document.querySelectorAll('table')].filter(t => {
    const box = t.closest('.table-box');
    const edge = (box || t.parentElement).getBoundingClientRect().right;
    return !box || edge > document.documentElement.clientWidth + 1;
}).map(t => t.id || t.className)"""


@pytest.mark.parametrize("width", [1400, 800])
def test_tables_scroll_in_their_box_never_over_the_page(browser, fixture_site, width, tmp_path):
    # issue 25 item 8.2: the latest-results, findings and machine tables spilled over the page
    # (example site at 800 px: document 927-1184 px wide); now each scrolls inside its own box
    out, _ = fixture_site
    tab = Page(browser)
    try:
        tab.page.set_viewport_size({"width": width, "height": 900})
        for path in (
            [out / "index.html", out / "findings.html", out / "matrix.html"]
            + sorted((out / "machine").glob("*.html"))
            + sorted((out / "bench").glob("*.html"))[:3]
        ):
            page = tab.open(path)
            assert page.evaluate("() => document.querySelectorAll('table').length") > 0 or "matrix" in path.name
            assert page.evaluate(TABLES_SPILL) == [], (width, path.name)
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width, (width, path.name)
            shot(page, f"w{width}", path, out)
    finally:
        tab.close()
