"""``kernelwatch publish``: pages, hostile input, determinism, lazy data, analysis
wiring, baselines, matrix and roofline figures, commit pages, the scale script.

The browser checks (script errors, charts drawn, screenshots) are in
``test_site_browser.py``; the input builders in ``test_site_data.py``.
"""

from __future__ import annotations

import base64
import filecmp
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from test_site_data import HOSTILE, git_repo, write_calibration, write_record, write_results

from harness import cli
from harness.report import site

ROOT = Path(__file__).resolve().parent.parent
OPENBLAS = ROOT / "examples" / "openblas" / "results"  # real results, in the repository

N = 24
STEP_AT = 16  # gpu-a gets 30% slower here, cpu-b does not
FAIL_AT = 10  # one case fails at this commit only
HOSTILE_AT = 5
BENCH = "suite.vector_add.track_time"
ODD = "suite.x<script>window.__xss=3</script>.track_time"
MACHINES = {"gpu-a": {"gpu": "NVIDIA H100 80GB HBM3", "cpu": "x"}, "cpu-b": {"gpu": "none", "cpu": "Test CPU"}}
PEAKS = {"gpu-a": (67.0, 3350.0), "cpu-b": (0.5, 20.0)}  # (fp32 TFLOP/s, GB/s): H100 SXM datasheet; cpu-b's calibration


def _value(m, i, bench, combo):
    base = {"gpu-a": 1e-4, "cpu-b": 4e-3}[m] * (1 + 0.004 * ((i * 7) % 5 - 2))  # +-0.8% deterministic wiggle
    if bench == ODD:
        return 2e-3 if i % 2 else 2.02e-3
    n = combo[0].strip("'")
    if n == "1048576" and m == "gpu-a" and i >= STEP_AT:
        base *= 1.3
    if n == "4096" and i == FAIL_AT:
        return None
    if n == "4096":
        base /= 100
    return base


def _version(bench, i):
    return "2" if (bench == ODD and i >= 12) else "1"


def build(tmp: Path) -> tuple[Path, Path, list[str]]:
    """A git repository with N commits (one with a hostile subject) and results
    for two machines, kernelwatch records with metrics and clocks, a calibration."""
    subjects = [f"commit {i}" if i != HOSTILE_AT else HOSTILE for i in range(N)]
    repo = tmp / "repo"
    shas = git_repo(repo, subjects)
    bench = {
        BENCH: {"param_names": ["shape", "timing"], "params": [["'1048576'", "'4096'"], ["'cold'"]]},
        ODD: {"param_names": ["n"], "params": [["'<i>1</i>'", '"it\'s"']]},
    }
    results = write_results(tmp / "results", MACHINES, shas, bench, _value, _version)
    for m, (tf, gb) in PEAKS.items():
        for i, h in enumerate(shas):
            for n in ("1048576", "4096"):
                t = _value(m, i, BENCH, (f"'{n}'",))
                if t is None:
                    continue
                clocks = (
                    {
                        "available": True,
                        "sm_clock_mhz": {"p50": 1980.0},
                        "mem_clock_mhz": {"p50": 2619.0},
                        "temperature_c": {"p50": 61.0},
                        "power_w": {"p50": 412.0},
                        "throttle_reasons": [],
                    }
                    if m == "gpu-a"
                    else None
                )
                device = (
                    {"kind": "cuda", "name": MACHINES[m]["gpu"]}
                    if m == "gpu-a"
                    else {"kind": "cpu", "name": "Test CPU"}
                )
                write_record(
                    results,
                    m,
                    h,
                    BENCH,
                    {"shape": n, "timing": "cold"},
                    t,
                    flops=int(n),
                    nbytes=12 * int(n),
                    peak_tflops=tf,
                    peak_gbps=gb,
                    clocks=clocks,
                    device=device,
                )
    write_calibration(results, "cpu-b", gbps=20.0, tflops=0.5)
    return repo, results, shas


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    repo, results, shas = build(tmp)
    out = tmp / "site"
    rep = site.publish(results, out, repo=repo)
    return repo, results, shas, out, rep


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _series_files(out: Path) -> dict[str, dict]:
    data = {}
    for p in (out / "data" / "s").glob("*.js"):
        text = p.read_text()
        m = re.fullmatch(r'KW\.put\("(s/[0-9a-f]+)",(.*)\);\n', text, re.S)
        assert m, p
        data[m.group(1)] = json.loads(m.group(2))
    return data


def _f32(b64: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), dtype="<f4")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v:
                self.refs.append(v)


def test_every_page_exists(built):
    repo, results, shas, out, rep = built
    assert rep.usable and rep.machines == ["cpu-b", "gpu-a"] and rep.series == 8
    for p in (
        "index.html",
        "matrix.html",
        "findings.html",
        "data/commits.js",
        "static/kw.js",
        "static/vendor/echarts/echarts.min.js",
        "static/vendor/echarts/LICENSE",
    ):
        assert (out / p).is_file(), p
    assert len(list((out / "bench").glob("*.html"))) == 2
    assert len(list((out / "machine").glob("*.html"))) == 2 and len(list((out / "roofline").glob("*.html"))) == 2
    assert sorted(p.stem for p in (out / "commit").glob("*.html")) == sorted(shas)
    assert len(_series_files(out)) == 8 and len(list((out / "data" / "m").glob("*.js"))) == 2


def test_no_cdn_and_every_internal_link_resolves(built):
    out = built[3]
    pages = sorted(out.rglob("*.html"))
    for page in pages:
        text = page.read_text()
        # No remote resource in any form (a CDN script, stylesheet or font): the
        # only absolute URLs a page may carry are its datasheet citations as text.
        for url in re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"'<>)]*", text):
            assert not re.search(r"cdn|jsdelivr|unpkg|googleapis|cloudflare", url, re.I), (page, url)
        assert not re.search(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=[\"'](?:https?:)?//", text, re.I), page
        parser = _Links()
        parser.feed(text)
        for ref in parser.refs:
            assert not ref.startswith(("http:", "https:", "//")), (page, ref)
            target = ref.split("#")[0].split("?")[0]
            if target:
                assert (page.parent / target).resolve().is_file(), (page, ref)


def test_hostile_names_and_subjects_render_inert(built):
    out = built[3]
    for page in out.rglob("*.html"):
        text = page.read_text()
        assert "<script>window.__xss" not in text, page
        assert "<img src=x" not in text and "<i>1</i>" not in text, page
    commit_page = (out / "commit" / f"{built[2][HOSTILE_AT]}.html").read_text()
    assert "&lt;img src=x onerror=" in commit_page and "&lt;script&gt;window.__xss=2" in commit_page
    bench_page = next((out / "bench").glob("suite.x_script*.html")).read_text()
    assert "suite.x&lt;script&gt;window.__xss=3&lt;/script&gt;.track_time" in bench_page
    # inline JSON is escaped for HTML too; the lazily loaded data is plain JSON
    assert "\\u003cscript\\u003e" in bench_page
    table = json.loads((out / "data" / "commits.js").read_text()[len('KW.put("commits",') : -3])
    assert table["subject"][HOSTILE_AT] == HOSTILE


def test_same_input_gives_the_same_bytes(built, tmp_path):
    repo, results, shas, out, _ = built
    again = tmp_path / "again"
    site.publish(results, again, repo=repo)
    a, b = _files(out), _files(again)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    # without the analysis, one worker or two: the same site
    one, two = tmp_path / "one", tmp_path / "two"
    site.publish(results, one, repo=repo, analysis="off", jobs=1)
    site.publish(results, two, repo=repo, analysis="off", jobs=2)
    cmp = filecmp.dircmp(one, two)
    assert _files(one) == _files(two), cmp.diff_files


def test_failed_results_are_markers_never_zero(built):
    out = built[3]
    data = _series_files(out)
    failing = [d for d in data.values() if d["fail"]]
    assert len(failing) == 2  # shape=4096 on both machines, at commit FAIL_AT
    for d in failing:
        ((pos, reason),) = d["fail"]
        assert reason == "failed"
        v = _f32(d["v"])
        assert np.isnan(v[pos]) and np.all(v[~np.isnan(v)] > 0)
        assert np.frombuffer(base64.b64decode(d["x"]), dtype="<i4")[pos] == FAIL_AT


def test_index_is_small_and_history_is_lazy(built):
    out = built[3]
    index = (out / "index.html").read_text()
    assert len(index.encode()) < 60_000 and "KW.put" not in index
    page = next((out / "bench").glob("suite.vector_add*.html")).read_text()
    assert "KW.put" not in page and '"v":' not in page  # values come from data/s/*.js
    d = next(iter(_series_files(out).values()))
    assert {"x", "v", "lo", "hi", "fail", "ver", "marks"} <= d.keys()


def test_overview_health_findings_and_budget(built):
    repo, results, shas, out, rep = built
    index = (out / "index.html").read_text()
    assert "analysis run by kernelwatch publish" in rep.analysis
    for m in ("gpu-a", "cpu-b"):
        assert f"<b>{m}</b>" in index
    assert "False alarms:" in index
    # the 30% step on gpu-a leads the page as an event at its commit, linked to its chart and its commits
    events = re.findall(
        r'<li class="event st-bad" id="ev-[0-9a-f]+" data-status="regression">(.*?)</ul>\n</li>', index, re.S
    )
    reg = [r for r in events if "gpu-a" in r and "1048576" in r]
    assert reg, index
    assert (
        index.index('id="events"')
        < index.index('id="divergences"')
        < index.index('id="health"')
        < index.index("<h2>Latest results</h2>")
    )
    assert f"commit/{shas[STEP_AT]}.html" in reg[0] and f"commit/{shas[STEP_AT - 1]}.html" in reg[0]
    href = re.search(r'href="(bench/[^"#]+\.html)#(c[0-9a-f]+)"', reg[0])
    assert href and (out / href.group(1)).is_file()
    # the finding is drawn on the chart: a mark in that series' data, at machine-local commit indices
    marks = [mk for d in _series_files(out).values() for mk in d["marks"] if mk["status"] == "regression"]
    assert any(mk["x1"] == STEP_AT and mk["x0"] == STEP_AT - 1 for mk in marks)
    # newest commit per machine, with its subject
    assert f"commit/{shas[-1]}.html" in index
    # a subject is quoted as the commit's message: "commit 5: 1 slower" read as the tool's verdict
    quoted = '<q class="subject" title="the commit\'s message">commit {}</q>'
    assert quoted.format(STEP_AT) + ":" in reg[0]
    assert quoted.format(N - 1) in index
    assert '<span class="subject">commit' not in index  # control: no unquoted subject left on the overview


def test_analysis_off_unavailable_and_from_a_report(built, tmp_path, monkeypatch):
    repo, results, shas, out, _ = built
    off = tmp_path / "off"
    site.publish(results, off, repo=repo, analysis="off")
    text = (off / "index.html").read_text()
    assert "analysis not run (publish --analysis off)" in text and "False alarms" not in text

    monkeypatch.setattr(site, "run_analysis", lambda rs: (None, "analysis not available: test says so"))
    na = tmp_path / "na"
    site.publish(results, na, repo=repo)
    assert "analysis not available: test says so" in (na / "index.html").read_text()
    monkeypatch.undo()

    from rich.console import Console

    from harness.cli.analyze import run_analyze

    report = tmp_path / "report.json"
    assert run_analyze(results, repo, report, console=Console(file=open("/dev/null", "w"))) == 0
    fromfile = tmp_path / "fromfile"
    rep = site.publish(results, fromfile, repo=repo, analysis=report)
    assert rep.analysis.startswith("analysis report read from")
    a = re.findall(r'<ol class="events" id="events">.*?</ol>', (fromfile / "index.html").read_text(), re.S)
    b = re.findall(r'<ol class="events" id="events">.*?</ol>', (out / "index.html").read_text(), re.S)
    assert a == b and a

    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(site.PublishError, match="not a kernelwatch analysis report"):
        site.publish(results, tmp_path / "x", repo=repo, analysis=bad)


def test_baseline_option_and_matrix_speedup(built, tmp_path, capsys):
    repo, results, shas, out, _ = built
    dest = tmp_path / "b"
    code = cli.main(
        [
            "publish",
            "--results",
            str(results),
            "--repo",
            str(repo),
            "--out",
            str(dest),
            "--analysis",
            "off",
            "--baseline",
            shas[3][:10],
        ]
    )
    assert code == 0
    matrix = (dest / "matrix.html").read_text()
    first = re.search(r'<select id="baseline"><option value="([0-9a-f]{40})">([^<]*)</option>', matrix)
    assert first.group(1) == shas[3] and "chosen with --baseline" in first.group(2)
    data = json.loads(re.search(r'<script type="application/json" id="kw-data">(.*?)</script>', matrix, re.S).group(1))
    case = next(c for c in data["cases"] if c["label"].startswith(BENCH) and "1048576" in c["label"])
    sp = dict(zip(data["machines"], case["speedup"][shas[3]]))
    # the baseline's level: the median of results 1..5 around it (harness.report.model.BASELINE_RULE)
    base = float(np.median([_value("gpu-a", i, BENCH, ("'1048576'",)) for i in range(1, 6)]))
    now = _value("gpu-a", N - 1, BENCH, ("'1048576'",))
    assert sp["gpu-a"] == pytest.approx(base / now, rel=1e-6) and sp["gpu-a"] < 0.8  # slower since the baseline
    sol = dict(zip(data["machines"], case["sol"]))
    assert sol["gpu-a"] == pytest.approx(12 * 1048576 / 3350e9 / now, rel=1e-6)  # memory-bound: bytes/peak_bw/time
    # per-suite geometric means are listed for every machine
    assert re.search(r"<td>suite.vector_add</td><td>sol \(%\)</td>", matrix)

    code = cli.main(
        [
            "publish",
            "--results",
            str(results),
            "--repo",
            "",
            "--out",
            str(tmp_path / "c"),
            "--analysis",
            "off",
            "--baseline",
            "deadbeefdeadbeef",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "deadbeefdeadbeef" in err[0]


def test_roofline_ceilings_points_and_arrows(built):
    out = built[3]
    for m, kind in (("gpu-a", "datasheet H100 SXM5 80GB"), ("cpu-b", "measured 2024-01-01")):
        page = (out / "roofline" / f"{site.machine_slug(m)}.html").read_text()
        data = json.loads(re.search(r'id="kw-data">(.*?)</script>', page, re.S).group(1))
        assert [c["label"] for c in data["ceilings"]] == [kind]
        assert len(data["points"]) == 2
        p = next(p for p in data["points"] if "1048576" in p["label"])
        assert p["ai"] == pytest.approx(1 / 12)
        oldest = built[2][0]
        assert oldest in p["base"]  # arrow from the oldest commit to now


def test_commit_page_lists_what_changed(built):
    repo, results, shas, out, _ = built
    step = (out / "commit" / f"{shas[STEP_AT]}.html").read_text()
    assert "Largest moves" in step and "+30.0%" in step
    assert ">regression<" in step
    failed = (out / "commit" / f"{shas[FAIL_AT]}.html").read_text()
    assert "Started failing" in failed and "shape=4096" in failed
    fixed = (out / "commit" / f"{shas[FAIL_AT + 1]}.html").read_text()
    assert "Fixed (valid again)" in fixed
    ver = (out / "commit" / f"{shas[12]}.html").read_text()
    assert "version 1 -&gt; 2" in ver


def test_machine_page_lists_latest_metrics(built):
    out = built[3]
    page = (out / "machine" / f"{site.machine_slug('cpu-b')}.html").read_text()
    assert "measured ceilings" in page and "copy 20 GB/s" in page
    assert page.count('<tr class="">') + page.count('<tr class="failed">') == 4


def test_openblas_real_results(tmp_path):
    rep = site.publish(OPENBLAS, tmp_path / "s", analysis="off")
    assert rep.usable and len(rep.machines) == 3 and not rep.errors
    index = (tmp_path / "s" / "index.html").read_text()
    for m in ("gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"):
        assert f"<b>{m}</b>" in index
    assert any("gemm" in p.name for p in (tmp_path / "s" / "bench").glob("*.html"))


def test_bench_publish_script_small(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## Someone else's section\n\nkept\n")
    cmd = [
        sys.executable,
        str(ROOT / "experiments" / "scale" / "bench_publish.py"),
        "--commits",
        "30",
        "--series",
        "20",
        "--machines",
        "2",
        "--data",
        str(tmp_path / "d"),
        "--write-doc",
        str(doc),
        "--publish-arg=--analysis",
        "--publish-arg=off",
    ]
    for _ in range(2):  # the second run reuses the data and replaces its own section only
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"publish: [\d.]+ s wall", proc.stdout) and "index.html:" in proc.stdout
    text = doc.read_text()
    assert (
        "kept" in text
        and text.count("<!-- BEGIN dashboard-scale") == 1
        and text.count("<!-- END dashboard-scale -->") == 1
    )
    assert re.search(r"30 commits x\s+20 series x\s+2 machines", text)


def test_the_false_alarm_budget_is_said_in_plain_words(built):
    # issue 25 item 8.6: "FDR q=0.05, BH threshold p=..., hypotheses" was not understood by a newcomer
    out = built[3]
    for page in ("index.html", "findings.html"):
        text = (out / page).read_text()
        plain = re.search(r'<span class="budget-plain">([^<]*)</span>', text)
        assert plain, page
        words = plain.group(1)
        assert re.match(
            r"If no code had changed, this analysis would still raise false alerts from noise alone over its \d+ tests",
            words,
        ), words
        assert "change of at least 5%" in words and "at most 5% of all alerts may be false" in words, words
        assert re.search(
            r"one false alert in about \d+ analyses|fewer than one false alert in 1,000|about [\d.]+ in every analysis|: none\.",
            words,
        ), words
        for jargon in ("FDR", "BH", "Benjamini", "hypothes", "q=", "p="):
            assert jargon not in words, (page, jargon)


def test_budget_plain_names_the_numbers_and_the_odds():
    from types import SimpleNamespace

    from harness.report.model import SiteModel, budget_plain

    # the threshold reads at the reasons' two digits: p=0.00066 passed, never shown against 0.000658
    thr = SiteModel.budget(SimpleNamespace(report={"false_alarm_budget": {"bh_threshold_p": 0.000658, "fdr_q": 0.05}}))
    assert thr["threshold"] == "0.00066", thr

    b = {"expected_false_alerts": 0.02, "expected_false_alerts_without_fdr": 1.5, "fdr_q": 0.05}
    words = budget_plain({**b, "min_effect": 0.05, "hypotheses": 40})
    assert "over its 40 tests: about 0.02, that is one false alert in about 50 analyses" in words
    assert "at least 5%" in words and "would expect 1.5 false alerts instead" in words
    # the rule as the analysis applies it: the CI reaches 5% (a +4.9% estimate can pass; newcomer trial)
    assert "a change whose confidence interval reaches 5%" in words
    # the 1%-a-series figure says it needs the same change too (not tests x 1%), and it is per series
    assert "(at 1% a series, still needing a change of at least 5%) would expect 1.5" in words
    assert "(at 1% a series) would expect 1.5" in budget_plain(b)  # no min_effect known: not invented
    # the hypotheses are two a tested series, said so when the report counts the newest family
    two = budget_plain({**b, "min_effect": 0.05, "hypotheses": 40, "hypotheses_newest": 20})
    assert "over its 40 tests (two for each series it tested: a change in its history, and one at" in two
    assert "(two for each" not in words  # control: a report without the count says nothing of it
    assert "about 3 in every analysis" in budget_plain({**b, "expected_false_alerts": 3.0})
    # no seven-digit odds (newcomer trial: "one in about 4428892 analyses")
    tiny = budget_plain({**b, "expected_false_alerts": 2.3e-07})
    assert "fewer than one false alert in 1,000 analyses" in tiny and "4347826" not in tiny
    assert "noise alone: none." in budget_plain({**b, "expected_false_alerts": 0.0})
    assert "noise alone: n/a." in budget_plain({})


class _RecordingPool:
    """A stand-in for multiprocessing's Pool that records how it was shut down."""

    def __init__(self, calls, fail):
        self.calls, self.fail = calls, fail

    def map(self, fn, work, chunksize=1):
        if self.fail:
            raise RuntimeError("a worker failed")
        return [fn(w) for w in work]

    def close(self):
        self.calls.append("close")

    def terminate(self):
        self.calls.append("terminate")

    def join(self):
        self.calls.append("join")


@pytest.mark.parametrize("fail", [False, True])
def test_machine_workers_are_closed_not_terminated_after_a_map(fail):
    """After a successful map the per-machine pool is closed and joined, never
    terminated: terminating a ``maxtasksperchild`` pool while its handler forks
    a replacement worker can hang publish for ever (seen on this machine). A
    map that raised is terminated, and its error is not swallowed."""
    from harness.report import site

    calls: list[str] = []

    class Ctx:
        def Pool(self, processes, maxtasksperchild):
            assert maxtasksperchild == 1
            return _RecordingPool(calls, fail)

    if fail:
        with pytest.raises(RuntimeError, match="a worker failed"):
            site._map_fresh_processes(Ctx(), 2, lambda w: w * 2, [1, 2, 3])
        assert calls == ["terminate", "join"]
    else:
        assert site._map_fresh_processes(Ctx(), 2, lambda w: w * 2, [1, 2, 3]) == [2, 4, 6]
        assert calls == ["close", "join"]
