"""Trust consistency (s16 item 2): a finding, an event series, a commit-page
move or a matrix speed-up of a series listed under Health as too noisy to
judge (or measured under contention) carries that tag; a finding whose commit
range holds an environment change (or that the analysis annotated) shows it."""

from __future__ import annotations

import json
import re

import test_site_attention as A
from harness.report import site
from test_site_data import write_results


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
    assert re.search(r'm1 / keep\.time_z|keep\.time_z\(n=1\)', moves) and ">noisy series</span>" in moves
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
