"""The gate's less-travelled paths: a phase that times out, asv storing no result,
quoted parameter values, a head whose suite cannot be listed, the borderline
re-measurement's log line, and the summary's commit names.

Each test here kills a mutant of ``scripts/mutation_sample.py --package harness/gate``
(seed 1 at ``914ccd5``, docs/mutation.md) that the rest of the suite let live.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core import procs
from harness.gate import asvrun, bisect, check, probe, suites, summary
from harness.gate.asvrun import AsvRun
from harness.gate.decide import GateConfig, Status, Verdict
from harness.gate.progress import PhaseProgress
from harness.gate.settings import CheckSettings

BASE = "b" * 40
HEAD = "a" * 40


def _conf(tmp_path: Path) -> Path:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "results_dir": "results"}))
    return conf


def test_a_timed_out_asv_run_writes_its_log_and_raises_the_timeout(tmp_path, monkeypatch):
    def timeout(*a, **k):
        raise procs.PhaseTimeout("check: measure", "suite.vector_add.track_time", 5, "test", output="partial output")

    monkeypatch.setattr(asvrun, "_stream", timeout)
    log = tmp_path / "work" / "asv-measure.log"
    with pytest.raises(procs.PhaseTimeout):
        asvrun.run_asv(
            tmp_path,
            _conf(tmp_path),
            "m",
            [HEAD, BASE],
            rounds=2,
            bench=[],
            results=tmp_path / "results",
            quick=True,
            launch="spawn",
            log_path=log,
            purpose="measure",
        )
    text = log.read_text()
    assert text.startswith("$ ") and "asv run" in text.replace("-m asv run", "asv run")
    assert "partial output\n--- stopped ---\n" in text and "time limit of 5 s" in text


def _fake_run(log_text: str):
    def run_asv(root, conf, machine, commits, *, log_path, purpose, results, rounds, bench, **k):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log_text)
        return AsvRun(purpose, list(commits), rounds, list(bench), 1, 0.1, str(log_path), str(results))

    return run_asv


def test_asv_storing_no_result_names_each_side_with_the_logs_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(asvrun, "run_asv", _fake_run("setting up\nbuild failed\nfatal: no such commit\n"))
    table, misaligned, runs, problems, warnings = asvrun.measure_pair(
        {"base": BASE, "head": HEAD},
        [],
        rounds=2,
        tag="measure",
        base_meta={},
        user_bench=None,
        root=tmp_path,
        conf=_conf(tmp_path),
        machine="m",
        quick=True,
        launch="spawn",
        work=tmp_path / "work",
        log=lambda m: None,
    )
    assert table == {} and misaligned == set() and len(runs) == 1
    assert len(problems) == 2
    assert problems[0].startswith(f"asv stored no result for base {BASE[:12]} (exit 1): ")
    assert problems[1].startswith(f"asv stored no result for head {HEAD[:12]} (exit 1): ")
    assert problems[0].endswith("setting up | build failed | fatal: no such commit")


def test_quoted_parameter_values_lose_their_quotes_in_the_grid(tmp_path):
    path = tmp_path / "benchmarks.json"
    path.write_text(
        json.dumps(
            {
                "version": 2,
                "suite.vector_add.track_time": {
                    "name": "suite.vector_add.track_time",
                    "params": [["'torch'", '"triton"'], ["'float16'"], ["1024", "'x'"]],
                    "param_names": ["provider", "dtype", "n"],
                    "type": "track",
                    "unit": "ms",
                    "version": "1",
                },
            }
        )
    )
    _, grid = asvrun.grid_from_benchmarks_json(path)
    values = {tuple(v for _, v in params) for _, params in grid}
    assert ("torch", "float16", "1024") in values and ("triton", "float16", "x") in values
    assert all("'" not in v and '"' not in v for combo in values for v in combo)


def _bisect_run(monkeypatch, tmp_path, quick: bool, stdout: str):
    seen = {}

    def run_bounded(cmd, *, env, **k):
        seen["env"] = env
        return procs.Finished(0, stdout, "asv warning line", 0.1)

    monkeypatch.setattr(bisect.procs, "run_bounded", run_bounded)
    work = tmp_path / f"work-{quick}"
    work.mkdir()
    out, sha = bisect._asv_find(
        "b..a",
        "suite.vector_add.track_time",
        [BASE, HEAD],
        root=tmp_path,
        conf=_conf(tmp_path),
        machine="m",
        launch="spawn",
        work=work,
        quick=quick,
        log=lambda m: None,
    )
    return seen["env"], work / "asv-find.log", out, sha


@pytest.mark.parametrize("quick", [True, False])
def test_asv_find_passes_quick_mode_and_writes_both_streams_to_its_log(tmp_path, monkeypatch, quick):
    env, log, out, sha = _bisect_run(monkeypatch, tmp_path, quick, "nothing found\n")
    assert env["KERNELWATCH_QUICK"] == ("1" if quick else "0")
    text = log.read_text()
    assert text.startswith("$ ") and "nothing found\n\n--- stderr ---\nasv warning line" in text
    assert sha is None and "asv find did not name a commit (exit 0)" in out.reason


def test_a_head_whose_suite_cannot_be_listed_breaks_each_base_benchmark_with_why():
    base_meta = {"suite.vector_add.track_time": [], "suite.softmax.track_time": []}
    out = probe.missing_on_head(base_meta, None, {"modules": {}, "ops": {}, "problem": "probe timed out"})
    assert set(out) == set(base_meta)
    assert all(r == "in base's suite; head's suite could not be listed (probe timed out)" for r in out.values())
    bare = probe.missing_on_head(base_meta, None, None)
    assert all(r == "in base's suite; head's suite could not be listed" for r in bare.values())


def test_a_case_of_an_unlistable_head_suite_is_broken_and_says_it_blocks():
    status, reason = suites.unmeasured_on_head(("suite.vector_add.track_time", ()), None, set())
    assert status is Status.BROKEN
    assert reason == suites.SKIPPED_ON_HEAD + ": head's suite could not be listed" + suites._BLOCKS


def test_a_percentage_line_after_a_phase_ended_changes_nothing():
    from io import StringIO

    from rich.console import Console

    console = Console(file=StringIO(), force_terminal=True, width=100)
    bar = PhaseProgress(lambda m: None, tty=True, console=console)
    bar.start("measure")
    bar.line("[ 50.00%] ··· suite.vector_add.track_time")
    bar.end("done")
    bar.line("[ 75.00%] ··· suite.vector_add.track_time")  # between phases: no bar to move
    bar.start("remeasure")
    bar.line("[ 10.00%] ··· suite.vector_add.track_time")
    bar.end("done")
    bar._rich.stop()
    assert [p["phase"] for p in bar.phases] == ["measure", "remeasure"]


def test_the_remeasurement_logs_what_it_remeasures_and_keeps_what_did_not_rerun(tmp_path, monkeypatch):
    keys = [(f"suite.op{i}.track_time", (("n", "1"),)) for i in range(7)]
    by_key = {k: Verdict(k[0], k[1], Status.SLOWER, "slower", borderline=True) for k in keys}
    monkeypatch.setattr(check, "measure_pair", lambda *a, **k: ({}, set(), [], [], []))
    lines = []
    progress = PhaseProgress(lines.append, tty=False)
    progress.rate_s = 0.5
    ctx = dict(
        root=tmp_path,
        conf=tmp_path / "asv.conf.json",
        machine="m",
        quick=True,
        launch="spawn",
        work=tmp_path,
        log=lines.append,
        progress=progress,
    )
    found = check._Found()
    check._remeasure(
        keys, by_key, {}, {"base": BASE, "head": HEAD}, {}, CheckSettings(GateConfig(), rounds=3), found, ctx
    )
    assert found.remeasured == 7
    labels = ", ".join(by_key[k].label for k in keys[:5])
    assert lines == [f"  re-measuring 7 borderline series (about 21 s): {labels} ..."]
    assert all(
        not v.borderline and v.reason.endswith("did not run it (kept the first result)") for v in by_key.values()
    )


def test_the_summary_names_base_and_head_by_twelve_characters():
    report = {"exit_code": 0, "base": "0123456789abcdef" * 2, "head": "fedcba9876543210" * 2, "config": {"rounds": 6}}
    text = summary.render_markdown(report)
    assert "**Base** `0123456789ab` vs **head** `fedcba987654`, 6 interleaved rounds per commit" in text


def test_run_asv_is_a_real_asv_command_line(tmp_path, monkeypatch):
    """The command ``run_asv`` hands to ``_stream`` (checked here so the timeout test's
    log assertion rests on the real command, not on an empty list)."""
    seen = {}

    def stream(cmd, env, cwd, on_line=None, **k):
        seen["cmd"] = cmd
        return 0, "out", "err"

    monkeypatch.setattr(asvrun, "_stream", stream)
    asvrun.run_asv(
        tmp_path,
        _conf(tmp_path),
        "m",
        [HEAD, BASE],
        rounds=2,
        bench=["x"],
        results=tmp_path / "results",
        quick=True,
        launch="spawn",
        log_path=tmp_path / "w" / "asv.log",
        purpose="measure",
    )
    assert seen["cmd"][1:4] == ["-m", "asv", "run"] and "--interleave-rounds" in seen["cmd"]
    assert (tmp_path / "w" / "asv.log").read_text().endswith("out\n--- stderr ---\nerr")
