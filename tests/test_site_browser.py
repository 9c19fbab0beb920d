"""The generated site in a real headless Chromium (Debian's ``/usr/bin/chromium``
driven through Playwright's Python API; no browser download).

Every page must load from ``file://`` without a script error or a console
error, every chart must draw (a non-blank canvas and series with data), the
hostile commit subject must stay text inside a chart tooltip, and the metric
and case switches must redraw. Screenshots of an overview and a benchmark page
go to ``test-artifacts/`` (gitignored).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.report import site
from test_site import BENCH, HOSTILE_AT, OPENBLAS, build

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("KERNELWATCH_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

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
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
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


def _check_page(browser, path: Path) -> list[dict]:
    tab = Page(browser)
    try:
        tab.open(path)
        charts = tab.charts()
        for c in charts:
            assert c["points"] > 0 and c["inked"] > 50, (path.name, c)
        assert tab.problems == [], (path.name, tab.problems)
        assert tab.page.evaluate("() => window.__xss") is None
        return charts
    finally:
        tab.close()


def test_every_page_loads_and_draws(browser, fixture_site):
    out, shas = fixture_site
    pages = [out / "index.html", out / "findings.html", out / "matrix.html",
             out / "commit" / f"{shas[HOSTILE_AT]}.html", out / "commit" / f"{shas[-1]}.html"]
    pages += sorted((out / "bench").glob("*.html")) + sorted((out / "machine").glob("*.html"))
    pages += sorted((out / "roofline").glob("*.html"))
    kinds = []
    for p in pages:
        kinds += [c["kind"] for c in _check_page(browser, p)]
    assert sorted(set(kinds)) == ["history", "roofline", "sol-heatmap", "speedup-heatmap"]


def test_benchmark_page_switches_hover_and_screenshots(browser, fixture_site):
    out, shas = fixture_site
    page_path = next((out / "bench").glob(f"{BENCH}*.html"))
    tab = Page(browser)
    try:
        page = tab.open(page_path)
        # tooltip at the commit with the hostile subject: text, never markup
        page.evaluate("""(x) => {
            const inst = echarts.getInstanceByDom(document.getElementById('chart'));
            const series = inst.getOption().series;
            const k = series.findIndex(s => s.id === 'line-gpu-a');
            const i = series[k].data.findIndex(d => d[0] === x);
            inst.dispatchAction({type: 'showTip', seriesIndex: k, dataIndex: i});
        }""", HOSTILE_AT)
        page.wait_for_timeout(300)
        tip = page.evaluate("""() => [...document.querySelectorAll('#chart div')]
            .map(d => d.textContent).filter(t => t.includes('onerror='))""")
        assert tip, "the tooltip does not show the commit subject as text"
        assert page.evaluate("() => document.querySelectorAll('#chart img, #chart script').length") == 0
        assert page.evaluate("() => window.__xss") is None
        assert any("clocks: SM 1980 MHz" in t for t in page.evaluate(
            "() => [...document.querySelectorAll('#chart div')].map(d => d.textContent)"))
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "fixture-benchmark.png"))
        # metric switch: tflops comes from the records
        page.select_option("#metric", "tflops")
        page.wait_for_function("""() => echarts.getInstanceByDom(document.getElementById('chart'))
            .getOption().yAxis[0].name === 'tflops'""")
        assert page.evaluate("() => document.querySelector('#metric option[value=sol]').disabled") is False
        # case switch loads the other case's series files (cases are in numeric order of their
        # parameters, so the first is 4096, the one with failures, found again by its label)
        first = page.evaluate("() => document.querySelector('#case').value")
        page.select_option("#case", page.evaluate("() => document.querySelector('#case').options[1].value"))
        page.wait_for_function(CHARTS_DRAWN)
        other = page.evaluate("""(first) => [...document.querySelector('#case').options]
            .find(o => o.text.includes('4096') && !o.text.includes('1048576')).value""", first)
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


@pytest.mark.skipif(not OPENBLAS.is_dir(), reason="../shared/data/asv-openblas not present")
def test_openblas_site_in_the_browser(browser, tmp_path):
    out = tmp_path / "openblas"
    site.publish(OPENBLAS, out, analysis="off")
    _check_page(browser, out / "index.html")
    _check_page(browser, out / "matrix.html")
    dgemm = next(p for p in (out / "bench").glob("*.html") if "Dgemm" in p.name or "gemm" in p.name)
    charts = _check_page(browser, dgemm)
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
