"""Trust consistency (s16 item 2): a finding, an event series, a commit-page
move or a matrix speed-up of a series listed under Health as too noisy to
judge (or measured under contention) carries that tag; a finding whose commit
range holds an environment change (or that the analysis annotated) shows it."""

from __future__ import annotations

import json
import re

import test_site_attention as A
from test_site_data import write_results

from harness.report import site


def _build(tmp_path, noisy_m1: bool):
    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    # m1's torch changes at the step commit: an environment change inside the regression's range
    for i, h in enumerate(A.SHAS):
        for f in (results / "m1").glob(f"{h[:8]}-*.json"):
            doc = json.loads(f.read_text())
            doc["params"]["torch"] = "2.14.0" if i >= A.STEP_AT else "2.13.0"
            f.write_text(json.dumps(doc))
    rep = A.report()
    rep["findings"][1]["annotations"] = [{"kind": "harness_version", "text": "harness 0.3 -> 0.4"}]
    if noisy_m1:
        rep["health"]["too_noisy"].append(A.key("m1", "keep.time_z"))
    p = tmp_path / "report.json"
    p.write_text(json.dumps(rep))
    out = tmp_path / "site"
    site.publish(results, out, analysis=p)
    return out


def _finding_row(html: str, status: str, series: str) -> str:
    rows = re.findall(r'<tr class="st-[a-z]+"[^>]*data-status="%s".*?</tr>' % status, html, re.S)
    (row,) = [r for r in rows if series in r]
    return row


def test_noisy_series_findings_moves_and_speedups_carry_the_tag(tmp_path):
    out = _build(tmp_path, noisy_m1=True)
    findings = (out / "findings.html").read_text()
    row = _finding_row(findings, "regression", "m1 / keep.time_z(n=1)")
    assert re.search(r'<span class="badge warn" title="noisy series: too noisy to judge[^"]*">noisy series</span>', row)
    index = (out / "index.html").read_text()
    ev = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert ">noisy series</span>" in ev and ">1 of 1 noisy or contended</span>" in ev
    commit = (out / "commit" / f"{A.SHAS[A.STEP_AT]}.html").read_text()
    moves = commit.split('class="results moves"', 1)[1].split("</table>", 1)[0]
    assert re.search(r"m1 / keep\.time_z|keep\.time_z\(n=1\)", moves) and ">noisy series</span>" in moves
    data = json.loads(re.search(r'id="kw-data">(.*?)</script>', (out / "matrix.html").read_text(), re.S).group(1))
    (case,) = [c for c in data["cases"] if c["label"] == "keep.time_z(n=1)"]
    assert case["doubt"][data["machines"].index("m1")].startswith("noisy series")


def test_environment_change_and_annotations_are_shown_with_the_finding(tmp_path):
    out = _build(tmp_path, noisy_m1=False)
    findings = (out / "findings.html").read_text()
    row = _finding_row(findings, "regression", "m1 / keep.time_z(n=1)")
    assert '<span class="badge note">environment_change</span>' in row and "torch 2.13.0 -&gt; 2.14.0" in row
    # negative control: m1 is not listed as too noisy here, so no tag on its regression
    assert "noisy series" not in row
    other = _finding_row(findings, "benchmark_version_change", "m2 / keep.time_z(n=1)")
    assert "harness 0.3 -&gt; 0.4" in other and ">noisy series</span>" in other  # m2 is too noisy in the report
    index = (out / "index.html").read_text()
    ev = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert "torch 2.13.0 -&gt; 2.14.0" in ev and "noisy series" not in ev


# ----------------------------------------------------------------- one convention for a change (s16 item 3)


def test_one_convention_for_a_change():
    import math

    from harness.analysis.findings import _size_text
    from harness.analysis.model import Direction
    from harness.report import fmt as F

    assert F.change_text(0.268) == "+26.8% slower" and F.change_text(-0.105) == "-10.5% faster"
    assert F.change_text(4.74) == "x5.74 slower" and F.change_text(-0.826) == "-82.6% faster"
    assert F.change_text(0.1, higher=True) == "+10.0% worse" and F.change_text(None) == "n/a"
    # the analysis' reasons say the same thing the same way as the site's change column
    for ch in (0.268, -0.105, 4.74, -0.826):
        assert _size_text(math.log1p(ch)) == F.change_text(ch)
    assert _size_text(math.log(1.1), Direction.HIGHER_IS_BETTER) == F.change_text(0.1, higher=True)


def test_pending_is_not_counted_slower_and_divergences_once_per_commit(tmp_path):
    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    rep = A.report()
    rep["findings"][0]["status"] = "pending"
    ev = rep["events"][0]
    ev["status"], ev["series"][0]["status"] = "pending", "pending"
    k1, k2 = A.key("m1", "keep.time_z"), A.key("m2", "keep.time_z")
    for a, b in ((k1, k2), (k2, k1)):  # the same divergence seen from both machines
        d = A.finding("divergent_change", a, A.STEP_AT - 1, A.STEP_AT, 1.4, "changes differ")
        d["other_key"] = b
        rep["findings"].append(d)
    for k in (k1, k2):  # the event lists the divergence once per pair in the report
        ev["series"].append(
            {
                "key": k,
                "status": "divergent_change",
                "magnitude": {"ratio": 1.4, "change": 0.4},
                "direction": "slower",
                "timing": None,
            }
        )
    p = tmp_path / "report.json"
    p.write_text(json.dumps(rep))
    out = tmp_path / "site"
    site.publish(results, out, analysis=p)
    index = (out / "index.html").read_text()
    evs = re.search(r'<ol class="events" id="events">(.*?)</ol>', index, re.S).group(1)
    assert "<b>0 slower</b>, 1 pending slower (not confirmed)" in evs and "+40.0% slower" in evs
    assert "-40.0%" not in evs and "+40.0%<" not in evs
    assert evs.count(">divergent_change</span>") == 1 and "x2 pairs" in evs  # once per commit
    div = re.search(r'<table class="findings" id="divergences">(.*?)</table>', index, re.S).group(1)
    assert div.count("<tr class=") == 1 and ">x2</span>" in div
    assert "m1 +40.0% against m2; m2 +40.0% against m1" in div


def test_a_divergence_names_each_machines_own_move(tmp_path):
    # OpenBLAS: "+13.7% against gha-aws-skylake" in red read as graviton 13.7% slower, where
    # graviton moved +0.4% and skylake -11.7%; with the moves stored, the cell says both
    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    rep = A.report()
    k1, k2 = A.key("m1", "keep.time_z"), A.key("m2", "keep.time_z")
    d = A.finding("divergent_change", k1, A.STEP_AT - 1, A.STEP_AT, 1.137, "changes differ")
    d["other_key"] = k2
    d["extra"] = {"change_worse_machine": 0.004, "change_other_machine": -0.117}
    rep["findings"].append(d)
    p = tmp_path / "report.json"
    p.write_text(json.dumps(rep))
    site.publish(results, tmp_path / "site", analysis=p)
    index = (tmp_path / "site" / "index.html").read_text()
    div = re.search(r'<table class="findings" id="divergences">(.*?)</table>', index, re.S).group(1)
    assert "m1 +0.4% slower, m2 -11.7% faster: 13.7% apart" in div, div
    assert "against m2" not in div  # control below: the old wording only without the moves


# ----------------------------------------------------------------------------- machine page (s16 item 6)


def test_machine_page_versions_seen_and_stale_series_last(tmp_path):
    out = _build(tmp_path, noisy_m1=False)
    page = next((out / "machine").glob("m1-*.html")).read_text()
    assert "<b>torch</b> 2.13.0, 2.14.0 (2 versions seen, newest last)" in page
    body = page.split('id="results"', 1)[1]
    rows = re.findall(r"<tr class=\"([^\"]*)\">\s*<td><a [^>]*>([^<]+)</a>", body)
    stale = [b for cls, b in rows if "stale" in cls]
    live = [b for cls, b in rows if "stale" not in cls]
    assert stale and set(stale) == {"old.time_x"} and "new.time_y" in live and "keep.time_z" in live
    assert [b for _, b in rows] == live + stale  # stopped series after the current ones
    assert body.count(">stale</span>") == len(stale)
    m2 = next((out / "machine").glob("m2-*.html")).read_text()
    assert "versions seen" not in m2  # negative control: m2's environment never changed


def test_readme_demo_reads_the_example_in_the_repository():
    """The README's OpenBLAS demo reads results a clone has, and no path outside it."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert "--results examples/openblas/results --repo ''" in readme
    assert (root / "examples" / "openblas" / "results" / "benchmarks.json").is_file()
    assert "../shared" not in readme
