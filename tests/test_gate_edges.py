"""The gate's less-travelled paths: a phase that times out, asv storing no result,
quoted parameter values, a head whose suite cannot be listed, the borderline
re-measurement's log line, and the summary's commit names.

Each test here kills a mutant of ``scripts/mutation_sample.py --package harness/gate``
(seed 1 at ``914ccd5``, docs/mutation.md) that the rest of the suite let live.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_asvrun_paths import BASE, HEAD, _conf, measure
from test_bisect_paths import compare, compare_table

from harness.core import procs
from harness.gate import asvrun, bisect, check, probe, suites, summary
from harness.gate.asvrun import AsvRun
from harness.gate.decide import GateConfig, SeriesInput, Side, Status, Verdict, _describe, classify, confirm
from harness.gate.progress import PhaseProgress
from harness.gate.settings import CheckSettings


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
    table, misaligned, runs, problems, warnings = measure(tmp_path, [])
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


# ----------------------------------------------------------------- gate package, seed 2 (d1ecd03)


def test_a_timed_out_asv_find_writes_its_log_and_raises_the_timeout(tmp_path, monkeypatch):
    def timeout(*a, **k):
        raise procs.PhaseTimeout("bisect: asv find", "suite.x", 3, "test", output="find output")

    monkeypatch.setattr(bisect.procs, "run_bounded", timeout)
    with pytest.raises(procs.PhaseTimeout):
        bisect._asv_find(
            "b..a",
            "suite.x",
            [BASE, HEAD],
            root=tmp_path,
            conf=_conf(tmp_path),
            machine="m",
            launch="spawn",
            work=tmp_path,
            quick=True,
            log=lambda m: None,
        )
    text = (tmp_path / "asv-find.log").read_text()
    assert text.startswith("$ ") and "\nfind output\n--- stopped ---\nphase 'bisect: asv find'" in text


@pytest.mark.parametrize("n_broken", [1, 3])
def test_a_broken_series_between_two_bisect_commits_is_undecided_and_counts_the_others(tmp_path, monkeypatch, n_broken):
    failed = {"base": Side(present=True, samples=[1e-3] * 6), "head": Side(present=True, failed=True, error="boom")}
    compare_table(monkeypatch, {(f"suite.op{i}.track_time", ()): failed for i in range(n_broken)})
    with pytest.raises(bisect._Undecided) as info:
        compare(tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"suite.op0.track_time is BROKEN at {HEAD[:12]}: ")
    assert msg.endswith(f" (and {n_broken - 1} more)") is (n_broken > 1)
    assert "boom" in msg


def test_a_confirmed_slowdown_says_what_the_remeasurement_alone_measured():
    rng = np.random.default_rng(4)

    def side(median, n=40):
        return Side(present=True, samples=list(median * np.exp(0.002 * rng.standard_normal(n))))

    first_in = SeriesInput("suite.x", (), side(1e-3), side(1.065e-3))
    first = classify(first_in)
    again = SeriesInput("suite.x", (), side(1e-3), side(1.07e-3))
    pooled = SeriesInput(
        "suite.x",
        (),
        Side(present=True, samples=first_in.base.samples + again.base.samples),
        Side(present=True, samples=first_in.head.samples + again.head.samples),
    )
    final = confirm(first, again, pooled)
    assert final.status is Status.SLOWER and final.reason.startswith("re-measured: pooled ")
    alone = classify(again)
    assert final.reason.endswith("; re-measurement alone " + _describe(alone.stats))


def test_a_budget_too_small_to_spend_leaves_the_later_looks_without_a_boundary():
    """Pocock spending of alpha = 1e-40 over 3 looks: the first look's boundary is
    z = 13.37; at the later looks even z = 12 would cross more often than the
    budget's increment allows, so they get no boundary (inf: never stop there)
    instead of a root search over an interval with no sign change."""
    from harness.gate import sequential

    b = sequential.boundaries(1e-40, 3, "pocock")
    assert b[0] == pytest.approx(13.37, abs=0.01) and b[1:] == (float("inf"), float("inf"))


def test_a_case_head_lists_but_did_not_measure_is_asvs_skip():
    key = ("suite.vector_add.track_time", (("n", "1"),))
    status, reason = suites.unmeasured_on_head(key, {key}, set())
    assert status is Status.BROKEN
    assert reason == (
        suites.SKIPPED_ON_HEAD
        + ": asv stored no value for head (NaN: a setup raising NotImplementedError, asv's skip)"
        + suites._BLOCKS
    )


def test_a_combination_gone_while_others_of_its_benchmark_run_is_removed_not_broken():
    gone = ("suite.vector_add.track_time", (("provider", "cupy"),))
    kept = ("suite.vector_add.track_time", (("provider", "torch"),))
    other = ("suite.softmax.track_time", (("provider", "cupy"),))
    assert suites.unmeasured_on_head(gone, {kept}, {kept})[0] is Status.REMOVED
    status, reason = suites.unmeasured_on_head(gone, {other}, {other})
    assert status is Status.BROKEN and reason == suites.EMPTIED_ON_HEAD + suites._BLOCKS


class _Recorder:
    def __init__(self):
        self.ends = []

    def start(self, *a, **k):
        pass

    def line(self, *a, **k):
        pass

    def segment(self, *a, **k):
        pass

    def estimate(self, cases):
        return None

    def end(self, detail="", **k):
        self.ends.append(k)
        return 0.0


def test_the_measurement_phase_reports_cases_times_commits_times_rounds_as_its_work(tmp_path, monkeypatch):
    def run_asv(root, conf, machine, commits, *, log_path, results, rounds, bench, purpose, **k):
        results.mkdir(parents=True)
        log_path.write_text("ok\n")
        return AsvRun(purpose, list(commits), rounds, list(bench), 0, 0.1, str(log_path), str(results))

    table = {
        (f"suite.op{i}.track_time", ()): {"base": Side(present=True, samples=[1.0]), "head": Side(present=True)}
        for i in range(3)
    }
    monkeypatch.setattr(asvrun, "run_asv", run_asv)
    monkeypatch.setattr(asvrun, "commits_with_results", lambda results: {BASE, HEAD})
    monkeypatch.setattr(asvrun, "collect", lambda *a, **k: (table, [], []))
    rec = _Recorder()
    measure(tmp_path, [], rounds=4, progress=rec)
    assert rec.ends[0]["work"] == 3 * 2 * 4


@pytest.mark.parametrize(
    "ratio, ci, beyond",
    [
        (1.6, (1.3, 1.9), True),  # ratio and whole interval past 1.25
        (1.6, (1.2, 1.9), False),  # the interval reaches back inside
        (1.1, (1.3, 1.9), False),  # the ratio itself is inside (an interval that misses it)
        (0.6, (0.5, 0.7), True),  # faster: below 1 / 1.25 = 0.8
        (0.6, (0.5, 0.85), False),
        (0.9, (0.5, 0.7), False),
        (1.6, (None, None), True),  # no interval: the ratio alone
        (1.2, (None, None), False),
    ],
)
def test_beyond_needs_the_ratio_and_its_whole_interval_past_the_limit(ratio, ci, beyond):
    from harness.gate.decide import Stats, _beyond

    st = Stats(10, 10, 1e-3, ratio * 1e-3, ratio, ci[0], ci[1], 0.01)
    assert _beyond(st, ratio, 0.25) is beyond
