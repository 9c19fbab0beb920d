"""Profiles and triages stored in a results directory reach the site, and the
analysis annotates a step where the autotuner's choice changed.

One machine, one Triton case, 14 commits; at commit 6 the time grows 50% and
the records say the autotuner chose BLOCK_SIZE_M=64 instead of 128 (and the
kernel spills). A triage of commits 5..6 and a profile of the newest commit are
stored with :func:`harness.measure.profile.store_in_results`.
"""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser

import pytest
from test_site_data import git_repo, write_record, write_results

from harness import cli
from harness.measure import profile as P
from harness.report import site

BENCH = "suite.matmul.track_time"
STEP = 6
N = 14


def _value(m, i, bench, combo):
    return (1e-3 if i < STEP else 1.5e-3) * (1 + 0.002 * ((i * 7) % 5 - 2))


def _facts(i):
    block = 128 if i < STEP else 64
    return {
        "launch_config": {"BLOCK_SIZE_M": block, "num_warps": 8},
        "compile_facts": {
            "status": "ok",
            "triton": "3.4.0",
            "autotune_config": {"BLOCK_SIZE_M": block},
            "kernels": [
                {
                    "name": "matmul_kernel",
                    "num_warps": 8,
                    "num_stages": 3,
                    "registers": 128 if i < STEP else 255,
                    "spills": 0 if i < STEP else 24,
                    "shared_bytes": 65536,
                }
            ],
        },
    }


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v:
                self.refs.append(v)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site-profiles")
    shas = git_repo(tmp / "repo", [f"commit {i}" for i in range(N)])
    bench = {BENCH: {"param_names": ["provider", "timing"], "params": [["'triton'"], ["'cold'"]]}}
    results = write_results(tmp / "results", {"gpu-a": {"gpu": "NVIDIA H100 80GB HBM3"}}, shas, bench, _value)
    for i, h in enumerate(shas):
        write_record(
            results,
            "gpu-a",
            h,
            BENCH,
            {"provider": "triton", "timing": "cold"},
            _value("gpu-a", i, BENCH, ()),
            flops=2 * 4096**3,
            nbytes=3 * 2 * 4096**2,
            peak_tflops=989.0,
            peak_gbps=3350.0,
        )
        path = results / "gpu-a" / "kernelwatch" / f"{h}.jsonl"
        rec = json.loads(path.read_text())
        path.write_text(json.dumps({**rec, **_facts(i)}) + "\n")
    case = {
        "benchmark": BENCH,
        "op": "matmul",
        "label": f"{BENCH}('triton', 'cold')",
        "params": {"provider": "triton", "timing": "cold"},
    }
    out_t = tmp / "triage-out"
    (out_t / "base" / "traces").mkdir(parents=True)
    (out_t / "base" / "traces" / "mm.r0.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    triage = {
        "schema": "kernelwatch-triage/1",
        "base": shas[STEP - 1],
        "head": shas[STEP],
        "machine": "gpu-a",
        "exit_code": 1,
        "problems": [],
        "notes": [],
        "environment": {"diff": []},
        "cases": [
            {
                **case,
                "status": "slower",
                "ratio": 1.5,
                "first": "matmul_kernel",
                "kernels": [
                    {
                        "name": "matmul_kernel",
                        "status": "slower",
                        "base_us": 1000.0,
                        "head_us": 1500.0,
                        "base_calls": 1,
                        "head_calls": 1,
                    }
                ],
                "facts_changed": [{"field": "autotune_config.BLOCK_SIZE_M", "base": 128, "head": 64}],
                "head_facts": _facts(STEP)["compile_facts"],
                "base_traces": ["base/traces/mm.r0.trace.json.gz"],
                "head_traces": [],
            }
        ],
    }
    P.store_in_results(out_t, results, f"triage-{shas[STEP - 1][:12]}-{shas[STEP][:12]}", triage, "# t\n", "triage")
    prof = {
        "schema": "kernelwatch-profile/1",
        "commit": shas[-1],
        "machine": "gpu-a",
        "exit_code": 0,
        "problems": [],
        "notes": [],
        "environment": {"device": "H100"},
        "cases": [
            {
                **case,
                "status": "ok",
                "kernels": [{"name": "matmul_kernel", "calls_per_iter": 1, "self_us_per_iter": 1500.0, "share": 1.0}],
                "trace": "traces/x.r0.trace.json.gz",
                "compile_facts": _facts(N - 1)["compile_facts"],
            }
        ],
    }
    P.store_in_results(tmp / "nothing", results, f"profile-{shas[-1][:12]}-abcd", prof, "# p\n", "profile")
    (results / "kernelwatch-profiles" / "broken").mkdir()
    (results / "kernelwatch-profiles" / "broken" / "triage.json.gz").write_bytes(b"not gzip")
    out = tmp / "site"
    rep = site.publish(results, out, repo=tmp / "repo")
    return tmp, results, shas, out, rep


def test_finding_links_its_triage_and_benchmark_page_shows_facts(built):
    tmp, results, shas, out, rep = built
    assert any("broken/triage.json.gz" in e for e in rep.errors)  # named, the rest still loads
    findings = (out / "findings.html").read_text()
    links = re.findall(r'href="(profiles/[^"]+)">triage<', findings)
    assert links and (out / links[0]).is_file()
    # the overview's event of the same pair says what the triage found (issue 25: it did not)
    index = (out / "index.html").read_text()
    assert f'<a class="triage" href="{links[0]}">triage: a kernel got slower</a>' in index
    assert index.count('class="triage"') == 1  # only the triaged pair
    page = (out / links[0]).read_text()
    assert "Most of the difference: <code>matmul_kernel</code>" in page
    assert "autotune_config.BLOCK_SIZE_M: 128 -&gt; 64" in page
    assert (out / links[0]).parent.joinpath("base/traces/mm.r0.trace.json.gz").is_file()
    (bench,) = list((out / "bench").glob("*.html"))
    text = bench.read_text()
    assert "Triton 3.4.0: matmul_kernel: num_warps=8, num_stages=3, registers=255, spills=24" in text
    assert "triage " + shas[STEP - 1][:8] in text and "profile at " + shas[-1][:8] in text
    for html in [bench, out / "findings.html", out / links[0]]:
        parser = _Links()
        parser.feed(html.read_text())
        for ref in parser.refs:
            target = ref.split("#")[0]
            assert not ref.startswith(("http:", "https:")) and (
                not target or (html.parent / target).resolve().is_file()
            ), ref


def test_analysis_annotates_the_autotune_change(built, tmp_path):
    tmp, results, shas, out, rep = built
    assert (
        cli.main(
            ["analyze", "--results", str(results), "--repo", str(tmp / "repo"), "--json", str(tmp_path / "a.json")]
        )
        == 0
    )
    report = json.loads((tmp_path / "a.json").read_text())
    stepped = [f for f in report["findings"] if f["commit_range"] == [shas[STEP - 1], shas[STEP]]]
    assert stepped, [f["commit_range"] for f in report["findings"]]
    texts = [a["text"] for f in stepped for a in f.get("annotations", []) if a["kind"] == "autotune_changed"]
    assert "autotune chose BLOCK_SIZE_M=64 instead of 128 here" in texts
    assert any("spills 0 -> 24" in t for t in texts)
    others = [f for f in report["findings"] if f["commit_range"] != [shas[STEP - 1], shas[STEP]]]
    assert not any(a["kind"] == "autotune_changed" for f in others for a in f.get("annotations", []))
