"""What a newcomer's trial found the pages getting wrong (issue 25 item 7), one test each.

- a calibration the suite beat, or taken under contention, carried a
  "calibrated" badge and its figures read as plain numbers;
- a point measured under contention at the newest commit was called "failing",
  "Started failing" and "missing";
- utilisations above 100% were numbers (in a badge, and in a suite's mean);
- "N more" lists were not links; the matrix left cells blank and coloured a
  pending change; a pending step whose samples do not differ read as a slowdown;
- the commit page of the last commit before a change listed that change.

Each has a negative control: the same page on input without the problem.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from test_read_guards import CPU_REC, cal_for, plain_percentages_above_100, rec
from test_site_data import sha, write_results

from harness.core.model import Status
from harness.report import ceilings, matrix, site

MIB12 = 12 * 2**20
BENCH = {"suite.vector_add.track_time": {"param_names": ["shape", "timing"], "params": [["'1048576'"], ["'cpu'"]]}}


def _results(tmp_path, gbps: list[float], contended_at: set[int], cal: dict | None):
    """One CPU machine, one vector_add case over ``len(gbps)`` commits at the
    given GB/s; the points in ``contended_at`` measured under CPU contention."""
    commits = [sha(i) for i in range(1, len(gbps) + 1)]
    times = [MIB12 / g / 1e9 for g in gbps]
    root = write_results(
        tmp_path / "results", {"h-cpu": {"gpu": "none", "cpu": "Test CPU"}}, commits, BENCH, lambda m, i, b, c: times[i]
    )
    d = root / "h-cpu" / "kernelwatch"
    d.mkdir(parents=True, exist_ok=True)
    for i, (h, t) in enumerate(zip(commits, times)):
        r = rec(
            CPU_REC,
            commit=h,
            params={"shape": "1048576", "timing": "cpu"},
            cost={"flops": 1 << 20, "bytes_read": 8 << 20, "bytes_written": 4 << 20},
        )
        r["timing"]["p50_s"] = t
        r["device"]["l2_bytes"] = 1 << 20
        if i in contended_at:
            r["timing"]["extra"]["cpu"] = {"contended": True, "contended_samples": 60, "n_samples": 60}
        (d / f"{h}.jsonl").write_text(json.dumps(r) + "\n")
    if cal is not None:
        (d / "calibration.jsonl").write_text(json.dumps(cal) + "\n")
    return root, commits


def _publish(tmp_path, **kw):
    root, commits = _results(tmp_path, **kw)
    out = tmp_path / "site"
    site.publish(root, out)
    return out, commits


def _machine_page(out):
    return next((out / "machine").glob("*.html")).read_text()


def contended_cal(**kw) -> dict:
    """A calibration whose copy was taken from a contended run and whose runs did not agree."""
    cal = cal_for(gbps=4.0, **kw)
    cal["copy"].update(
        repeats=[{"contended": True}, {"contended": True}],
        chosen_run=1,
        stable=False,
        stability="5 runs taken; 0 clean (converged, uncontended) run(s)",
    )
    return cal


# ----------------------------------------------------------------------------- the calibration's doubts


def test_a_contended_calibration_is_never_calibrated_and_its_figures_say_so(tmp_path):
    out, _ = _publish(tmp_path, gbps=[3.0] * 5, contended_at=set(), cal=contended_cal())
    index = (out / "index.html").read_text()
    assert "calibrated</span>" not in index
    assert re.search(r'<span class="badge warn" title="copy: taken from a contended run[^"]*">contended</span>', index)
    # no two clean runs: not "did not agree" (a newcomer's runs were 0.7% apart, neither converged)
    assert re.search(
        r'title="copy: not shown stable: 0 of its runs converged uncontended, so no two could be compared '
        r'\(5 runs taken; 0 clean[^"]*">unstable</span>',
        index,
    )
    assert "copy: its best runs did not agree" not in index
    # 3 GB/s against the 4 GB/s contended copy: 75.0% only on hover, the cell says why not to read it
    latest = index.split("<h2>Latest results</h2>", 1)[1]
    # the cell's own figure is below 100%: its ceiling is doubtful, not the kernel above it (newcomer trial)
    assert re.search(r'title="75\.0% against a doubtful ceiling: contended: [^"]*">doubtful ceiling</span>', latest)
    assert ">above ceiling</span>" not in latest
    assert ">75.0%<" not in index
    machine = _machine_page(out)
    assert re.search(r'<span class="ceiling">copy 4 GB/s <span class="badge warn"[^>]*>contended</span>', machine)
    assert ">75.0%<" not in machine
    # the matrix: the sol cell carries the doubt, and the suite's mean leaves it out, saying why
    m = (out / "matrix.html").read_text()
    (case,) = json.loads(re.search(r'id="kw-data">(.*?)</script>', m, re.S).group(1))["cases"]
    assert case["sol_status"] == ["doubtful ceiling"] and "75.0% against a doubtful ceiling" in case["sol_reason"][0]
    assert "contended" in case["sol_reason"][0]
    assert "1 doubtful ceiling left out" in m.split('id="geomean"', 1)[1]
    # the roofline's distance to a roof measured under contention carries the same badge
    roof = next((out / "roofline").glob("*.html")).read_text().split('id="roof-table"', 1)[1]
    assert re.search(
        r'<td class="num">1\.33x <span class="badge warn" title="contended: [^"]*">doubtful ceiling</span></td>', roof
    )
    assert "above ceiling" not in roof.split("</table>", 1)[0]


def _latest_cells(index: str) -> dict[str, str]:
    """The overview's latest-results row of the one case, by column header."""
    table = index.split("<h2>Latest results</h2>", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    row = table.split("<tbody>", 1)[1]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    return {h.split(" (")[0]: c for h, c in zip(heads, cells)}


def test_a_figure_is_doubtful_only_for_the_ceiling_it_was_computed_against(tmp_path):
    # the copy is contended and unstable, the fp32 matmul clean: the memory-bound kernel's mfu
    # (against the matmul) is a number, its bw_util and sol (against the copy) are not (newcomer trial)
    out, _ = _publish(tmp_path / "copy", gbps=[3.0] * 5, contended_at=set(), cal=contended_cal())
    cells = _latest_cells((out / "index.html").read_text())
    assert cells["mfu"] == "0.5%", cells
    assert ">doubtful ceiling<" in cells["bw_util"] and ">doubtful ceiling<" in cells["sol"], cells
    assert "matmul" not in cells["bw_util"]  # the reason names the copy's doubts only
    # Control: the matmul unstable, the copy clean: now the mfu carries the doubt, bw_util does not
    cal = cal_for(gbps=4.0)
    cal["matmul"]["fp32"].update(stable=False, stability="3 runs 9% apart")
    out, _ = _publish(tmp_path / "mm", gbps=[3.0] * 5, contended_at=set(), cal=cal)
    cells = _latest_cells((out / "index.html").read_text())
    assert ">doubtful ceiling<" in cells["mfu"] and "matmul fp32: its best runs did not agree" in cells["mfu"]
    assert cells["bw_util"] == "75.0%" and cells["sol"] == "75.0%", cells
    # the roofline's line is doubtful when a ceiling it is drawn from is: not for an unused bf16 figure
    data = json.loads(
        re.search(r'id="kw-data">(.*?)</script>', next((out / "roofline").glob("*.html")).read_text(), re.S).group(1)
    )
    (measured,) = [c for c in data["ceilings"] if c["kind"] == "measured"]
    assert measured["line_doubt"] == {"fp32 matmul": True}
    cal = cal_for(gbps=4.0)
    cal["matmul"]["bf16"] = dict(cal["matmul"]["fp32"], stable=False, stability="3 runs 9% apart")
    out, _ = _publish(tmp_path / "bf16", gbps=[3.0] * 5, contended_at=set(), cal=cal)
    page = next((out / "roofline").glob("*.html")).read_text()
    (measured,) = [
        c
        for c in json.loads(re.search(r'id="kw-data">(.*?)</script>', page, re.S).group(1))["ceilings"]
        if c["kind"] == "measured"
    ]
    assert measured["doubt_text"] == "unstable" and measured["line_doubt"] == {"fp32 matmul": False}
    assert _latest_cells((out / "index.html").read_text())["mfu"] == "0.5%"
    # a doubt of the whole calibration (the suite beat it) still reaches every figure
    assert ceilings.doubts_for(cal_for(gbps=4.0, under_measured_points=1), ["copy"])[0][0] == "above ceiling"
    assert ceilings.used_figures(cal, {"bound": "compute", "dtype": "bf16", "uses_tensor_cores": True}, "sol") == [
        "matmul bf16"
    ]


def test_a_clean_calibration_is_calibrated_and_its_figures_are_numbers(tmp_path):
    out, _ = _publish(tmp_path, gbps=[3.0] * 5, contended_at=set(), cal=cal_for(gbps=4.0))
    index = (out / "index.html").read_text()
    assert "calibrated</span>" in index and ">75.0%<" in index
    (case,) = json.loads(re.search(r'id="kw-data">(.*?)</script>', (out / "matrix.html").read_text(), re.S).group(1))[
        "cases"
    ]
    assert case["sol_status"] == [None] and case["sol"][0] == 0.75
    roof = next((out / "roofline").glob("*.html")).read_text().split('id="roof-table"', 1)[1]
    assert re.search(r'<td class="num">1\.33x</td>', roof)  # a plain distance under a clean ceiling
    assert ">unstable<" not in index and ">above ceiling<" not in index
    assert ceilings.doubts(cal_for(gbps=4.0)) == []


def test_a_ceiling_the_suite_beats_is_above_ceiling_on_every_page(tmp_path):
    # the newest point moves 6 GB/s against a 4 GB/s copy: the ceiling is too low
    out, _ = _publish(tmp_path, gbps=[3.0, 3.0, 3.0, 3.0, 6.0], contended_at=set(), cal=cal_for(gbps=4.0))
    index = (out / "index.html").read_text()
    assert "calibrated</span>" not in index
    assert re.search(r'title="1 point\(s\) of the suite ran above these ceilings[^"]*">above ceiling</span>', index)
    machine = _machine_page(out)
    assert ">above ceiling</span>" in machine.split('id="calibration"', 1)[1].split("</p>", 1)[0]
    roof = next((out / "roofline").glob("*.html")).read_text()
    assert ">above ceiling</span>" in roof.split('class="ceilings"', 1)[1].split("</ul>", 1)[0]


def test_calibration_doubts_read_the_record_not_guesses():
    assert ceilings.doubts(None) == []
    withheld = cal_for(gbps=4.0)
    withheld["matmul"]["fp32"].update(tflops=None, status="invalid", reason="time is NaN")
    assert ceilings.doubts(withheld) == [(ceilings.WITHHELD, "matmul fp32: time is NaN")]
    own = cal_for(gbps=4.0, status="withheld", reason="could not calibrate under contention")
    assert ceilings.doubts(own)[0] == ("withheld", "could not calibrate under contention")


# ----------------------------------------------------------------------------- contended points


def test_a_contended_newest_point_is_neither_failing_nor_missing(tmp_path):
    out, commits = _publish(tmp_path, gbps=[3.0] * 6, contended_at={5}, cal=cal_for(gbps=4.0))
    index = (out / "index.html").read_text()
    health = index.split('id="health"', 1)[1].split("</table>", 1)[0]
    assert re.search(r"<td class=\"num\">0</td>\s*<td class=\"num\">(0|n/a)</td>", health)  # failing at newest: 0
    contention = index.split('id="trust-contention"', 1)[1].split("</dd>", 1)[0]
    assert "<b>1</b>" in contention and "measured under CPU contention" in contention
    assert "stopped reporting" not in index and ">missing<" not in index
    # the analysis knows the series ran there (Series.last_seen): no "missing" to explain
    assert 'id="contended-missing"' not in index
    latest = index.split("<h2>Latest results</h2>", 1)[1]
    assert ">contended</span>" in latest and ">failed</span>" not in latest
    newest = (out / "commit" / f"{commits[-1]}.html").read_text()
    assert "Measured under CPU contention" in newest and "Started failing" not in newest
    findings = (out / "findings.html").read_text()
    assert ">missing</span>" not in findings and 'id="contended-missing"' not in findings
    # nor does its chart draw a "missing" mark at the contended commit
    (data,) = [p.read_text() for p in (out / "data" / "s").glob("*.js")]
    assert '"status":"missing"' not in data and '"contended":[[5,' in data


def test_a_saved_report_calling_a_contended_tail_missing_is_explained(tmp_path):
    """A report saved before the analysis knew (``--analysis report.json`` of an
    older kernelwatch) calls such a series "missing": the site says why instead."""
    import json

    from harness import analysis as A
    from harness.store.dataset import build_inputs, load_input

    root, commits = _results(tmp_path, gbps=[3.0] * 6, contended_at={5}, cal=cal_for(gbps=4.0))
    inputs = build_inputs(load_input(root))
    inputs.series = [replace(x, last_seen=None) for x in inputs.series]  # the old rule
    _, report = A.analyze_inputs(inputs, A.AnalysisConfig())
    assert [f for f in report["findings"] if f["status"] == "missing"]
    (tmp_path / "report.json").write_text(json.dumps(report, default=str))
    site.publish(root, tmp_path / "site", analysis=tmp_path / "report.json")
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'id="contended-missing"' in index and ">missing<" not in index


def test_a_series_that_stopped_keeps_its_missing_mark(tmp_path):
    from test_site_attention import build

    out = build(tmp_path)[1]  # old.time_x stops: a real "missing"
    assert any('"status":"missing"' in p.read_text() for p in (out / "data" / "s").glob("*.js"))


def test_a_failed_newest_point_is_still_failing(tmp_path):
    # negative control: an impossible time at the newest commit is a failure, named as one
    out, commits = _publish(tmp_path, gbps=[3.0] * 5 + [1e9], contended_at=set(), cal=cal_for(gbps=4.0))
    newest = (out / "commit" / f"{commits[-1]}.html").read_text()
    assert "Started failing" in newest and "Measured under CPU contention" not in newest
    index = (out / "index.html").read_text()
    assert re.search(r'class="badge bad">1</span>', index.split('id="health"', 1)[1].split("</table>", 1)[0])


# ----------------------------------------------------------------------------- matrix, links, commit pages


def test_matrix_cells_are_never_blank_and_a_pending_change_is_not_coloured():
    model = SimpleNamespace(cidx={"a": 0, "b": 1, "c": 2}, order=["a", "b", "c"])
    s = SimpleNamespace(key="k", latest={"value_commit": "c"})
    base = (1.0, "a")
    assert matrix.changed(model, s, base, {"k": [(2, Status.PENDING)]}) == Status.PENDING
    assert matrix.changed(model, s, base, {"k": [(2, Status.REGRESSION)]}) == matrix.CHANGED
    assert matrix.changed(model, s, base, {"k": [(2, Status.PENDING), (1, Status.IMPROVEMENT)]}) == matrix.CHANGED
    assert matrix.changed(model, s, base, {}) is None
    assert matrix.sol_status({"has_record": False}, None)[0] == "n/a"
    assert matrix.sol_status({}, 0.5) is None and matrix.sol_status({}, 1.02)[0] == "above ceiling"


def test_foreign_matrix_cells_read_n_a_with_why(tmp_path):
    from test_site import OPENBLAS

    out = tmp_path / "ob"
    site.publish(OPENBLAS, out, analysis="off")
    data = json.loads(re.search(r'id="kw-data">(.*?)</script>', (out / "matrix.html").read_text(), re.S).group(1))
    for c in data["cases"]:
        assert all(st == "n/a" for st in c["sol_status"]), c["sol_status"]
        assert all(isinstance(w, str) and w for w in c["sol_reason"] + c["na"])
    js = (out / "static" / "matrix.js").read_text()
    assert 'NA = "n/a"' in js and "neutral(x, y, null, null, NA" in js


def test_more_lists_are_links(tmp_path):
    from test_site_attention import build

    out = build(tmp_path)[1]
    index = (out / "index.html").read_text()
    plain_more = re.findall(r'<li class="muted">\d+ more</li>', index)
    assert plain_more == []
    findings = (out / "findings.html").read_text()
    assert 'id="trust-too-noisy"' in findings  # where the overview's "N more" of that list goes


def test_the_last_commit_before_a_change_links_to_it_and_does_not_list_it(tmp_path):
    from test_site_attention import SHAS, STEP_AT, build

    out = build(tmp_path)[1]
    before = (out / "commit" / f"{SHAS[STEP_AT - 1]}.html").read_text()
    at = (out / "commit" / f"{SHAS[STEP_AT]}.html").read_text()
    assert "keep.time_z" in at.split("<h2>Findings at this commit</h2>", 1)[1].split("<section", 1)[0]
    head = before.split("<h2>Findings at this commit</h2>", 1)[1].split("<section", 1)[0]
    assert ">regression<" not in head and f'href="{SHAS[STEP_AT]}.html"' in head and "the last commit before" in head


def test_above_100_is_left_out_of_the_suite_mean_and_never_a_number(tmp_path):
    out, _ = _publish(tmp_path, gbps=[3.0] * 4 + [4.1], contended_at=set(), cal=cal_for(gbps=4.0))
    m = (out / "matrix.html").read_text()
    assert "1 above ceiling left out" in m and plain_percentages_above_100(m) == []


def _pending_site(tmp_path, p_samples: float):
    """The morning fixture with its step reported as pending, its samples test at ``p_samples``."""
    import test_site_attention as A

    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    rep = A.report()
    rep["findings"][0].update(status="pending", extra={"p_samples": p_samples})
    rep["events"][0]["status"] = "pending"
    rep["events"][0]["series"][0]["status"] = "pending"
    rep["config"]["sample_alpha"] = 0.01
    (tmp_path / "report.json").write_text(json.dumps(rep))
    out = tmp_path / "site"
    site.publish(results, out, analysis=tmp_path / "report.json")
    return out


def test_a_pending_step_whose_samples_do_not_differ_says_so(tmp_path):
    out = _pending_site(tmp_path / "a", 0.3)
    tag = re.compile(r'title="samples do not differ: [^"]*p=0\.3 &gt; 0\.01[^"]*">samples do not differ</span>')
    assert tag.search((out / "index.html").read_text().split('id="events"', 1)[1])
    assert tag.search((out / "findings.html").read_text())
    out = _pending_site(tmp_path / "b", 0.001)  # negative control: the samples differ
    assert ">samples do not differ<" not in (out / "index.html").read_text()
    assert ">samples do not differ<" not in (out / "findings.html").read_text()


def test_an_event_of_pendings_only_is_pending_and_counts_both_ways(tmp_path):
    import test_site_attention as A

    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    rep = A.report()
    rep["findings"][0]["status"] = "pending"
    ev = rep["events"][0]
    ev["status"] = "mixed"  # what the analysis said of a pending slower and a pending faster
    ev["series"] = [
        dict(ev["series"][0], status="pending"),
        dict(
            ev["series"][0],
            key=A.key("m2", "keep.time_z"),
            status="pending",
            direction="faster",
            magnitude={"ratio": 0.9, "change": -0.1},
        ),
    ]
    (tmp_path / "report.json").write_text(json.dumps(rep))
    out = tmp_path / "site"
    site.publish(results, out, analysis=tmp_path / "report.json")
    row = (out / "index.html").read_text().split('id="events"', 1)[1].split("</li>\n</ol>", 1)[0]
    assert 'data-status="pending"' in row and '<span class="badge warn">pending</span>' in row
    assert "<b>0 slower</b>, 1 pending slower (not confirmed), 0 faster, 1 pending faster (not confirmed)" in row


def test_an_event_of_pending_speed_ups_is_not_listed_as_slower(tmp_path):
    import test_site_attention as A

    results = write_results(tmp_path / "results", A.M, A.SHAS, A.BENCH, A._value)
    rep = A.report()
    rep["findings"][0].update(status="pending", magnitude={"ratio": 0.8, "change": -0.2, "ci": [0.78, 0.82]})
    ev = rep["events"][0]
    ev["status"] = "pending"
    ev["series"] = [
        dict(ev["series"][0], status="pending", direction="faster", magnitude={"ratio": 0.8, "change": -0.2})
    ]
    (tmp_path / "report.json").write_text(json.dumps(rep))
    out = tmp_path / "site"
    site.publish(results, out, analysis=tmp_path / "report.json")
    index = (out / "index.html").read_text()
    slower = index.split("What got slower, by commit", 1)[1].split('id="other-events"', 1)[0]
    assert 'li class="event' not in slower  # nothing got slower
    other = index.split('id="other-events"', 1)[1].split("</details>", 1)[0]
    assert "1 pending faster (not confirmed)" in other and 'data-status="pending"' in other


# ----------------------------------------------------------------------------- one word for one status

#: Labels pages once gave a figure above its ceiling (issue 25 item 8.3): never a label again.
OLD_ABOVE_LABELS = ("above 100%", "under-measured", "above_ceiling")


def _labels(out) -> list[str]:
    """Every badge text, status cell and matrix cell status of a published site."""
    found = []
    for page in out.rglob("*.html"):
        text = page.read_text()
        found += re.findall(r'<span class="badge[^"]*"[^>]*>([^<]*)</span>', text)
        data = re.search(r'id="kw-data">(.*?)</script>', text, re.S)
        if data and page.name == "matrix.html":
            for case in json.loads(data.group(1))["cases"]:
                found += [st for st in case["sol_status"] if st]
    return found


def test_every_page_names_a_figure_above_its_ceiling_with_one_word(tmp_path):
    from harness.core.model import ABOVE_CEILING_LABEL

    # newest 4.1 GB/s against a 4 GB/s copy: within the guard margin (a utilisation above 100%);
    # newest 6 GB/s: beyond it (the point's above_ceiling status and the calibration the suite beat)
    labels = []
    for newest in (4.1, 6.0):
        out, _ = _publish(tmp_path / str(newest), gbps=[3.0] * 4 + [newest], contended_at=set(), cal=cal_for(gbps=4.0))
        got = _labels(out)
        assert ABOVE_CEILING_LABEL in got, (newest, sorted(set(got)))
        labels += got
    assert [x for x in labels if x in OLD_ABOVE_LABELS] == []
    # the charts' own labels (drawn by the scripts) say the same word
    for js in (out / "static").glob("*.js"):
        words = re.findall(r'"\[?(above [^"\]]*)', js.read_text())
        assert all(w.startswith(ABOVE_CEILING_LABEL) for w in words), (js.name, words)
    # negative control: a site with nothing above its ceiling has no such label
    out, _ = _publish(tmp_path / "clean", gbps=[3.0] * 5, contended_at=set(), cal=cal_for(gbps=4.0))
    assert ABOVE_CEILING_LABEL not in _labels(out)


# ----------------------------------------------------------------------------- a robust default baseline


def _speedup(out) -> tuple[dict, float]:
    m = (out / "matrix.html").read_text()
    data = json.loads(re.search(r'id="kw-data">(.*?)</script>', m, re.S).group(1))
    (case,) = data["cases"]
    options = re.findall(r'<option value="([0-9a-f]+)">[0-9a-f]+ \(([^)]*)\)</option>', m)
    return {why: case["speedup"][h][0] for h, why in options if h in case["speedup"]}, m


def test_an_outlier_commit_does_not_set_the_matrix_baseline(tmp_path):
    # issue 25 item 8.1: the level is 3 GB/s throughout but the newest-but-one commit read 6 GB/s
    # (one commit off-level); its speed-up is 1.0x, not 0.5x, at every baseline the page offers
    out, _ = _publish(tmp_path / "o", gbps=[3.0] * 8 + [6.0, 3.0], contended_at=set(), cal=cal_for(gbps=8.0))
    sp, m = _speedup(out)
    assert "1 commit before the newest" in sp and "oldest commit of the current series" in sp, sp
    assert all(abs(x - 1.0) < 1e-9 for x in sp.values()), sp
    assert "median of its result there and up to 2 valid results either side" in m.split('id="baseline-rule"')[1]
    # the first commit an outlier, which the default (oldest commit of the current series) is
    out, _ = _publish(tmp_path / "f", gbps=[1.0] + [3.0] * 9, contended_at=set(), cal=cal_for(gbps=8.0))
    sp, _ = _speedup(out)
    assert abs(sp["oldest commit of the current series"] - 1.0) < 1e-9, sp
    # negative control: a real step is kept (3 -> 6 GB/s at the fifth commit: 2x since the start)
    out, _ = _publish(tmp_path / "s", gbps=[3.0] * 5 + [6.0] * 5, contended_at=set(), cal=cal_for(gbps=8.0))
    sp, _ = _speedup(out)
    assert (
        abs(sp["oldest commit of the current series"] - 2.0) < 1e-9
        and abs(sp["1 commit before the newest"] - 1.0) < 1e-9
    ), sp


def test_baseline_level_takes_an_odd_window_and_never_the_newest():
    from harness.report.model import baseline_level

    v = np.array([1.0, 2.0, 3.0, 100.0, 5.0, 6.0, 7.0])
    assert baseline_level(v, 3) == 5.0  # 2, 3, 100, 5, 6
    assert baseline_level(v, 0) == 2.0  # 1, 2, 3
    assert baseline_level(v, 1) == 2.0  # 1, 2, 3 (the fourth dropped: an odd count)
    assert baseline_level(v, 5) == 6.0  # 100, 5, 6 (the newest, 7, left out)
    assert baseline_level(v, 6) == 6.0  # the newest itself: 5, 6, 7
    with pytest.raises(IndexError, match="outside a series of 7"):
        baseline_level(v, 7)
