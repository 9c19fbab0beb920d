"""The newcomer trial's page findings on wording (issue 25), one test each, each
with a negative control: the same page on input without the problem.

- the latest-results tables printed plain values for series the overview
  calls too noisy or measured under contention;
- a kernelwatch run's own matrix blamed "foreign asv results" for having no sol;
- the machine page said "No calibration stored" when one was stored and refused;
- the roofline caption ("Hollow points (N)") showed with no chart, and a foreign
  machine's page said to run ``kernelwatch calibrate`` here;
- "1 points", "over 0 hypotheses", "Events: analysis.";
- commit pages said "(no subject known)" without saying why.
"""

from __future__ import annotations

import re
import subprocess

from test_read_guards import cal_for
from test_site_data import sha, write_results
from test_site_trial import BENCH, _publish, _results

from harness.report import fmt as F
from harness.report import model as M
from harness.report import render, site

NOISY = [4, 1.5, 4, 1.2, 4.4, 1, 3.8, 1.6, 4, 1.1, 4, 1.5]
STEADY = [4.0, 4.01, 3.99, 4.0, 4.02, 3.98, 4.0, 4.01, 3.99, 4.0, 4.0, 4.01]


def _value_cells(html: str) -> list[str]:
    """The value cells (``<td class="num">``) of the latest-results tables of a page."""
    out = []
    for table in re.findall(r'<table class="results[^"]*"[^>]*>(.*?)</table>', html, re.S):
        out += re.findall(r'<td class="num">([^<]*ms(?:\s*<span class="badge[^"]*"[^>]*>[^<]*</span>)*)</td>', table)
    return out


def test_latest_tables_carry_the_noisy_and_contended_labels(tmp_path):
    out, _ = _publish(tmp_path / "noisy", gbps=NOISY, contended_at=set(), cal=None)
    index = (out / "index.html").read_text()
    assert "too noisy to judge: <b>1" in index  # the overview calls it so ...
    pages = {
        "index": index,
        "machine": next((out / "machine").glob("*.html")).read_text(),
        "benchmark": next((out / "bench").glob("*.html")).read_text(),
    }
    for name, html in pages.items():
        cells = _value_cells(html)
        assert cells and all("noisy series" in c for c in cells), (name, cells)  # ... and so does its value
    # the newest point contended: its value carries "under contention" too
    out, _ = _publish(tmp_path / "cont", gbps=STEADY, contended_at={11}, cal=None)
    cells = _value_cells((out / "index.html").read_text())
    assert cells and all("under contention" in c for c in cells)
    # Control: a steady, uncontended series shows a plain value.
    out, _ = _publish(tmp_path / "steady", gbps=STEADY, contended_at=set(), cal=None)
    cells = _value_cells((out / "index.html").read_text())
    assert cells and not any("badge" in c for c in cells)


def test_no_sol_on_our_own_run_gives_the_records_reason_not_foreign_results(tmp_path):
    out, _ = _publish(tmp_path / "own", gbps=STEADY[:5], contended_at=set(), cal=None)
    matrix = (out / "matrix.html").read_text()
    why = re.search(r'<ul class="muted" id="no-sol-why">(.*?)</ul>', matrix, re.S).group(1)
    assert "foreign" not in matrix
    assert "1 cell: no peaks known for this device" in why  # what the record says
    # Control: asv results with no kernelwatch record are foreign, and it says so.
    commits = [sha(i) for i in range(1, 6)]
    root = write_results(
        tmp_path / "foreign" / "results", {"f-cpu": {"cpu": "Other"}}, commits, BENCH, lambda m, i, b, c: 1e-3
    )
    site.publish(root, tmp_path / "foreign" / "site")
    matrix = (tmp_path / "foreign" / "site" / "matrix.html").read_text()
    assert "a foreign result (no kernelwatch record)" in matrix


def _contended_cal() -> dict:
    cal = cal_for(gbps=4.0)
    why = (
        "could not calibrate: contended (all 2 runs; the CPU was busy); the figures that need this ceiling are withheld"
    )
    cal["copy"].update(status="contended", gbps=None, reason=why)
    cal["matmul"]["fp32"].update(status="contended", tflops=None, reason=why)
    return cal


def test_a_refused_calibration_is_named_refused_with_why(tmp_path):
    out, _ = _publish(tmp_path / "refused", gbps=STEADY[:5], contended_at=set(), cal=_contended_cal())
    page = next((out / "machine").glob("*.html")).read_text()
    assert "No calibration stored" not in page
    assert "Calibration refused (2026-12-01" in page and "could not calibrate: contended" in page
    assert "copy: could not calibrate: contended" in page
    # Control: nothing stored says nothing is stored.
    out, _ = _publish(tmp_path / "none", gbps=STEADY[:5], contended_at=set(), cal=None)
    page = next((out / "machine").glob("*.html")).read_text()
    assert "No calibration stored for this machine" in page and "refused" not in page


def test_roofline_caption_only_with_its_chart_and_a_foreign_machine_is_not_told_to_calibrate(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWATCH_HOST", "elsewhere")  # h-cpu is not this machine
    out, _ = _publish(tmp_path / "foreign", gbps=STEADY[:5], contended_at=set(), cal=None)
    roof = next((out / "roofline").glob("*.html")).read_text()
    assert 'data-kw-chart="roofline"' not in roof and "Arrows:" not in roof and "Hollow" not in roof
    assert "run <code>kernelwatch calibrate</code>" not in roof
    assert "The machine that builds this site cannot supply them: a machine's ceilings come from its own runner" in roof
    assert "5 points have no roof" not in roof and "1 point has no roof to plot against" in roof
    # Control: this machine, no ceilings: calibrate here.
    monkeypatch.setenv("KERNELWATCH_HOST", "h")
    out, _ = _publish(tmp_path / "local", gbps=STEADY[:5], contended_at=set(), cal=None)
    roof = next((out / "roofline").glob("*.html")).read_text()
    assert "No ceilings for this machine: run <code>kernelwatch calibrate</code>" in roof and "Arrows:" not in roof
    # Control: with ceilings the chart and its caption are there.
    out, _ = _publish(tmp_path / "cal", gbps=STEADY[:5], contended_at=set(), cal=cal_for(gbps=40.0, tflops=0.5))
    roof = next((out / "roofline").glob("*.html")).read_text()
    assert 'data-kw-chart="roofline"' in roof and 'id="chart-caption"' in roof and "Arrows:" in roof


def test_counts_read_in_the_singular_and_no_test_says_so():
    assert F.plural(1, "point") == "1 point" and F.plural(2, "point") == "2 points"
    assert F.plural(0, "hypothesis", "hypotheses") == "0 hypotheses"
    env = render.environment()
    assert env.from_string("{{ 1|plural('point') }}, {{ 3|plural('point') }}").render() == "1 point, 3 points"
    none = M.budget_plain({"expected_false_alerts": 0.0, "hypotheses": 0, "fdr_q": 0.05, "min_effect": 0.05})
    assert none.startswith("No test was made") and "0 tests" not in none
    one = M.budget_plain({"expected_false_alerts": 0.01, "hypotheses": 1, "fdr_q": 0.05, "min_effect": 0.05})
    assert "over its 1 test:" in one  # control: a test made reads as before, in the singular
    for page in ("index.html", "findings.html"):
        src = (render.SITE_ROOT / "templates" / page).read_text()
        assert "{{ budget.hypotheses }} hypotheses" not in src and "No test was made" in src
        assert "}} points" not in src


def test_a_commit_page_says_why_it_has_no_subject(tmp_path):
    out, commits = _publish(tmp_path / "norepo", gbps=STEADY[:5], contended_at=set(), cal=None)
    page = (out / "commit" / f"{commits[0]}.html").read_text()
    assert "(no subject known)" in page and "published without --repo" in page
    # a repository that lacks these commits
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "unrelated"], check=True)
    root, commits = _results(tmp_path / "withrepo", gbps=STEADY[:5], contended_at=set(), cal=None)
    site.publish(root, tmp_path / "withrepo" / "site", repo=repo)
    page = (tmp_path / "withrepo" / "site" / "commit" / f"{commits[0]}.html").read_text()
    assert "(no subject known)" in page and f"not in the history of {repo}" in page
    assert M.no_subject_why(3, repo) == "its subject is empty in git"  # in the history, empty subject
    assert M.no_subject_why(-2, repo) == f"the commit is not in the history of {repo}'s HEAD"  # parked


def test_the_matrix_gives_a_cut_row_label_its_full_name_as_a_title():
    # Drawn on a canvas (no DOM per label): the chart's title attribute carries the
    # hovered label (the browser test checks it in Chromium: test_site_browser).
    js = (render.SITE_ROOT / "static" / "matrix.js").read_text()
    assert 'el.setAttribute("title", p.value)' in js and 'el.removeAttribute("title")' in js
