"""The paths of ``harness.gate.asvrun`` that the gate's other fast tests do not run:
exporting a commit's suite, where an asv command was, streaming a command,
``--append-samples``, error lines with bare parameters, discovery, reading a
scratch results folder (failures, rates as reciprocals, round splits, code
identity), asv selecting nothing, head's benchmark list, and pooling two sides.

Written against the lines the mutation samples of the gate package could not
reach (``scripts/mutation_sample.py --package harness/gate``, docs/mutation.md):
each asserts the exact value a one-line bug there would change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.gate import asvrun
from harness.gate.asvrun import AsvRun
from harness.gate.decide import Side

BASE = "b" * 40
HEAD = "a" * 40


def _git_repo(path: Path) -> Path:
    env = {
        "GIT_AUTHOR_NAME": "kw",
        "GIT_AUTHOR_EMAIL": "kw@example.invalid",
        "GIT_COMMITTER_NAME": "kw",
        "GIT_COMMITTER_EMAIL": "kw@example.invalid",
        "PATH": "/usr/bin:/bin",
    }
    (path / "benchmarks").mkdir(parents=True)
    (path / "benchmarks" / "suite.py").write_text("def time_x():\n    pass\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "c0"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, env=env)
    return path


def _conf(path: Path, **extra) -> Path:
    conf = path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, **extra}))
    return conf


def measure(tmp_path: Path, bench: list[str], *, base_meta: dict | None = None, rounds: int = 2, **kw):
    """``asvrun.measure_pair`` of BASE and HEAD as the check calls it (tag ``measure``,
    quick, spawn, work in ``tmp_path / "work"``); ``kw`` adds e.g. ``progress``."""
    return asvrun.measure_pair(
        {"base": BASE, "head": HEAD},
        bench,
        rounds=rounds,
        tag="measure",
        base_meta=base_meta or {},
        user_bench=None,
        root=tmp_path,
        conf=_conf(tmp_path),
        machine="m",
        quick=True,
        launch="spawn",
        work=tmp_path / "work",
        log=lambda m: None,
        **kw,
    )


def test_an_asv_run_as_a_dict_is_its_fields():
    run = AsvRun("measure", [HEAD], 3, ["x"], 0, 1.5, "/l", "/r")
    assert run.as_dict() == {
        "purpose": "measure",
        "commits": [HEAD],
        "rounds": 3,
        "bench": ["x"],
        "returncode": 0,
        "seconds": 1.5,
        "log_path": "/l",
        "results_dir": "/r",
    }


def test_a_commits_suite_is_exported_into_its_own_folder_replacing_an_old_one(tmp_path):
    root = _git_repo(tmp_path / "repo")
    conf = _conf(tmp_path, benchmark_dir=str(root / "benchmarks"))
    work = tmp_path / "work"
    (work / "suite-base" / "stale").mkdir(parents=True)
    out, problem = asvrun.suite_conf(root, conf, "main", work, "base")
    assert problem is None and out == work / "asv-suite-base.conf.json"
    assert json.loads(out.read_text())["benchmark_dir"] == str(work / "suite-base" / "benchmarks")
    assert (work / "suite-base" / "benchmarks" / "suite.py").read_text().startswith("def time_x")
    assert not (work / "suite-base" / "stale").exists()


def test_a_benchmark_dir_outside_the_repository_is_not_exported(tmp_path):
    root = _git_repo(tmp_path / "repo")
    conf = _conf(tmp_path, benchmark_dir=str(tmp_path / "elsewhere"))
    out, problem = asvrun.suite_conf(root, conf, "main", tmp_path / "work", "head")
    assert out == conf
    assert (
        problem == f"asv's benchmark_dir {tmp_path / 'elsewhere'} is outside the repository: head's suite not exported"
    )


def test_where_asv_was_names_the_last_line_and_the_commit():
    lines = [
        "· For kernelwatch commit 0123456789abcdef (round 1/2):",
        "[ 50.00%] ··· suite.vector_add.track_time",
        "",
    ]
    assert asvrun.asv_case(lines) == "suite.vector_add.track_time (commit 0123456789ab)"
    assert asvrun.asv_case(["· For kernelwatch commit 0123456789abcdef"]) == ("For kernelwatch commit 0123456789abcdef")
    assert asvrun.asv_case([]) == "no output yet"


def test_a_streamed_command_gives_its_exit_status_and_both_streams_line_by_line(tmp_path):
    seen = []
    code = "import sys; print('one'); print('two'); print('err', file=sys.stderr); sys.exit(3)"
    rc, out, err = asvrun._stream(
        [sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, tmp_path, seen.append, phase="p", kind="git"
    )
    assert (rc, out, err.strip()) == (3, "one\ntwo\n", "err")
    assert [s.rstrip("\n") for s in seen] == ["one", "two"]


def test_an_appending_run_asks_asv_to_append_samples(tmp_path, monkeypatch):
    seen = {}

    def stream(cmd, env, cwd, on_line=None, **k):
        seen["cmd"] = cmd
        return 0, "", ""

    monkeypatch.setattr(asvrun, "_stream", stream)
    kw = dict(rounds=1, bench=[], results=tmp_path / "r", quick=False, launch="spawn", purpose="m")
    asvrun.run_asv(tmp_path, _conf(tmp_path), "m", [HEAD], log_path=tmp_path / "w" / "a.log", append=True, **kw)
    assert "--append-samples" in seen["cmd"] and "--interleave-rounds" not in seen["cmd"]
    asvrun.run_asv(tmp_path, _conf(tmp_path), "m", [HEAD], log_path=tmp_path / "w" / "b.log", **kw)
    assert "--append-samples" not in seen["cmd"]


def test_error_lines_with_bare_parameters_and_asv_notes_are_kept():
    log = "\n".join(
        [
            "· For kernelwatch commit 0123456789abcdef:",
            "[ 10.00%] ··· suite.vector_add.track_time                failed",
            "[ 10.00%] ··· For parameters: torch, float16",
            "               RuntimeError: bad shape",
            "[ 20.00%] ··· suite.softmax.track_time                   failed",
            "               asv: benchmark timed out (timeout 60s)",
        ]
    )
    out = asvrun.parse_errors(log)
    assert out == {
        ("01234567", "suite.vector_add.track_time", ("torch", "float16")): "RuntimeError: bad shape",
        ("01234567", "suite.softmax.track_time", None): "benchmark timed out (timeout 60s)",
    }


def _bjson(path: Path, entries: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 2, **entries}))
    return path


def _meta(name: str, params=(), names=(), unit="seconds") -> dict:
    return {
        "name": name,
        "type": "track",
        "unit": unit,
        "param_names": list(names),
        "params": [list(p) for p in params],
        "version": "1",
    }


def test_the_grid_keeps_only_the_cases_the_bench_expression_selects(tmp_path):
    path = _bjson(
        tmp_path / "benchmarks.json",
        {
            "suite.a.track_time": _meta("suite.a.track_time", [["'torch'", "'triton'"]], ["provider"]),
            "suite.b.track_time": _meta("suite.b.track_time"),
        },
    )
    meta, grid = asvrun.grid_from_benchmarks_json(path, r"a\.track_time\('triton'")
    assert set(meta) == {"suite.a.track_time", "suite.b.track_time"}
    assert grid == {("suite.a.track_time", (("provider", "triton"),))}


def _fake_discovery(benchmarks: dict | None, rc: int = 0):
    def run_asv(root, conf, machine, commits, *, results, log_path, purpose, rounds, bench, **k):
        if benchmarks is not None:
            _bjson(results / "benchmarks.json", benchmarks)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        return AsvRun(purpose, list(commits), rounds, list(bench), rc, 0.1, str(log_path), str(results))

    return run_asv


def test_discovery_lists_the_suite_and_names_a_bad_entry(tmp_path, monkeypatch):
    entries = {
        "suite.a.track_time": _meta("suite.a.track_time"),
        "suite.bad.track_time": {"name": "suite.bad.track_time", "params": "12"},
        "suite.worse.track_time": {"name": "suite.worse.track_time", "params": "13"},
    }
    monkeypatch.setattr(asvrun, "run_asv", _fake_discovery(entries))
    kw = dict(work=tmp_path, launch="spawn", tag="base", bench=None, quick=True)
    meta, grid, problem = asvrun.discover(tmp_path, _conf(tmp_path), "m", BASE, **kw)
    assert meta == {"suite.a.track_time": []} and grid == {("suite.a.track_time", ())}
    where = str(tmp_path / "discover-base" / "benchmarks.json")
    first, second = problem.split("; " + where)
    assert first.startswith(where + ": benchmark suite.bad.track_time") and second.startswith(": benchmark suite.worse")


def test_a_discovery_that_listed_nothing_says_whose_suite_and_asvs_exit(tmp_path, monkeypatch):
    monkeypatch.setattr(asvrun, "run_asv", _fake_discovery(None, rc=1))
    kw = dict(work=tmp_path, launch="spawn", tag="head", bench=None, quick=True)
    meta, grid, problem = asvrun.discover(tmp_path, _conf(tmp_path), "m", HEAD, **kw)
    assert (meta, grid) == ({}, set())
    assert problem.startswith("could not list head's benchmarks (asv exit 1: ") and "benchmarks.json" in problem


# --------------------------------------------------------------------------- collect


def _results(res: Path, rows: dict, files: dict[str, dict] | None = None) -> Path:
    """A scratch results folder: machine ``m``, one file per commit; ``rows`` maps
    ``(commit, benchmark)`` to ``(value, samples)``; ``files`` adds raw files."""
    m = res / "m"
    m.mkdir(parents=True, exist_ok=True)
    (m / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    names = sorted({b for _, b in rows})
    units = {"suite.copy.track_gbps": "GB/s"}
    _bjson(res / "benchmarks.json", {n: _meta(n, unit=units.get(n, "seconds")) for n in names})
    for i, sha in enumerate(sorted({c for c, _ in rows})):
        results = {}
        for (c, b), (value, samples) in rows.items():
            if c == sha:
                results[b] = [[value], [], "1", 1_700_000_000_000, 1.0, [samples]]
        (m / f"{sha[:8]}-py.json").write_text(
            json.dumps(
                {
                    "version": 2,
                    "commit_hash": sha,
                    "date": 1_700_000_000_000 + i,
                    "env_name": "py",
                    "python": "3.11",
                    "requirements": {},
                    "params": {"machine": "m"},
                    "result_columns": ["result", "params", "version", "started_at", "duration", "samples"],
                    "results": results,
                }
            )
        )
    for name, data in (files or {}).items():
        (m / name).write_text(json.dumps(data))
    return res


def test_collect_reads_both_sides_a_failure_with_its_error_and_rates_as_reciprocals(tmp_path, monkeypatch):
    from harness.store import results as R

    rows = {
        (BASE, "suite.x.track_time"): (2.0, [1.0, 2.0, 3.0]),
        (HEAD, "suite.x.track_time"): (None, None),
        (BASE, "suite.copy.track_gbps"): (4.0, [4.0, 5.0]),
        (HEAD, "suite.copy.track_gbps"): (2.0, [2.0, 0.0]),
    }
    res = _results(tmp_path / "measure-results", rows)
    key_rounds = ("m", BASE, "suite.copy.track_gbps", ())
    monkeypatch.setattr(
        R, "record_rounds", lambda d, p: {key_rounds: [[4.0], [5.0]], ("m", BASE, "suite.x.track_time", ()): [[1.0]]}
    )
    monkeypatch.setattr(
        R,
        "record_code",
        lambda d, p: {key_rounds: [{"h": 1}, {"h": 1}], ("m", HEAD, "suite.copy.track_gbps", ()): [{"h": 1}, {"h": 2}]},
    )
    errors = {(HEAD[:8], "suite.x.track_time", None): "RuntimeError: boom"}
    table, problems, failures = asvrun.collect(res, {"base": BASE, "head": HEAD}, errors)
    assert failures == []
    assert problems == ["suite.copy.track_gbps: unit 'GB/s' is a rate (higher is better): compared as 1/value"]
    x = table[("suite.x.track_time", ())]
    assert x["base"].samples == [1.0, 2.0, 3.0] and x["base"].rounds is None  # 1 recorded sample, 3 stored
    assert x["head"].present and x["head"].failed and x["head"].error == "RuntimeError: boom"
    copy = table[("suite.copy.track_gbps", ())]
    assert copy["base"].samples == [0.25, 0.2] and copy["base"].rounds == [[0.25], [0.2]]
    assert copy["base"].code == {"h": 1}
    assert copy["head"].samples == [0.5, float("inf")] and copy["head"].code is None  # two codes: none


def test_collect_marks_a_side_without_results_absent_and_names_an_unreadable_file(tmp_path):
    rows = {(BASE, "suite.x.track_time"): (2.0, [2.0])}
    res = _results(tmp_path / "measure-results", rows, files={"cccccccc-py.json": {"version": 2, "results": 3}})
    table, problems, failures = asvrun.collect(res, {"base": BASE, "head": HEAD}, {})
    assert not table[("suite.x.track_time", ())]["head"].present
    assert len(failures) == 1 and failures[0].startswith(f"results: {res / 'm' / 'cccccccc-py.json'}")
    assert problems == []


def test_a_zero_rate_is_an_infinite_time_per_unit():
    assert asvrun._reciprocal([2.0, 0.0, 0.5]) == [0.5, float("inf"), 2.0]


# --------------------------------------------------------------------------- measure_pair


def _pair(tmp_path, monkeypatch, log_text: str, base_meta: dict, head_bjson: str | None, have=frozenset()):
    def run_asv(root, conf, machine, commits, *, results, log_path, purpose, rounds, bench, **k):
        results.mkdir(parents=True, exist_ok=True)
        if head_bjson is not None:
            (results / "benchmarks.json").write_text(head_bjson)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log_text)
        return AsvRun(purpose, list(commits), rounds, list(bench), 0, 0.1, str(log_path), str(results))

    monkeypatch.setattr(asvrun, "run_asv", run_asv)
    monkeypatch.setattr(asvrun, "commits_with_results", lambda results: set(have))
    sides = {"base": Side(present=True, samples=[1.0]), "head": Side(present=True, samples=[1.0])}
    monkeypatch.setattr(asvrun, "collect", lambda *a, **k: ({("suite.x.track_time", ()): sides}, [], []))
    return measure(tmp_path, ["suite.x"], base_meta=base_meta)


def test_asv_selecting_nothing_of_heads_suite_is_a_warning_not_a_problem(tmp_path, monkeypatch):
    table, misaligned, runs, problems, warnings = _pair(tmp_path, monkeypatch, "· No benchmarks selected\n", {}, None)
    assert problems == [] and warnings == ["measure: asv selected no benchmark of head's suite for suite.x"]


def test_an_unreadable_head_benchmark_list_is_a_warning_and_no_grid_is_compared(tmp_path, monkeypatch):
    table, misaligned, runs, problems, warnings = _pair(
        tmp_path, monkeypatch, "ok\n", {"suite.x.track_time": [["1"]]}, "{not json", have={BASE, HEAD}
    )
    assert problems == [] and misaligned == set()
    (w,) = [w for w in warnings if "head's benchmark list" in w]
    assert w.startswith("could not read head's benchmark list (") and w.endswith("); parameter grids not compared")


def test_heads_entries_are_not_applied_when_either_list_is_not_an_object(tmp_path):
    target, source = tmp_path / "r", tmp_path / "h"
    _bjson(source / "benchmarks.json", {"suite.x.track_time": _meta("suite.x.track_time")})
    target.mkdir()
    (target / "benchmarks.json").write_text("[1, 2]")
    assert asvrun.keep_heads_entries(target, source) == [
        f"head's parameter names not applied: {target / 'benchmarks.json'} or {source / 'benchmarks.json'} "
        "is not a JSON object"
    ]
    assert (target / "benchmarks.json").read_text() == "[1, 2]"


def test_pooling_keeps_a_failure_from_either_side_and_a_lone_measurement():
    ok = Side(present=True, samples=[1.0], rounds=[[1.0]], code={"h": 1})
    failed = Side(present=True, failed=True, error="boom")
    gone = Side.absent()
    assert asvrun.pool(failed, ok) is failed and asvrun.pool(ok, failed) is failed
    assert asvrun.pool(gone, ok) is ok and asvrun.pool(ok, gone) is ok
    both = asvrun.pool(ok, Side(present=True, samples=[2.0], rounds=[[2.0]], code={"h": 1}))
    assert both.samples == [1.0, 2.0] and both.rounds == [[1.0], [2.0]] and both.code == {"h": 1}
    mixed = asvrun.pool(ok, Side(present=True, samples=[2.0], rounds=None, code={"h": 2}))
    assert mixed.samples == [1.0, 2.0] and mixed.rounds is None and mixed.code is None


@pytest.mark.parametrize("params", [(), (("provider", "torch"), ("n", "1024"))])
def test_a_series_regex_selects_exactly_its_case(params):
    import re

    rx = re.compile(asvrun.series_regex("suite.vector_add.track_time", params))
    if params:
        assert rx.search("suite.vector_add.track_time('torch', 1024)")
        assert not rx.search("suite.vector_add.track_time('torch', 10240)")
    else:
        assert rx.search("suite.vector_add.track_time") and not rx.search("suite.vector_add.track_time_x")


def test_a_benchmark_without_parameter_names_gets_param1_param2(tmp_path):
    entry = _meta("suite.a.track_time", [["'torch'"], ["1024", "2048"]])
    del entry["param_names"]
    path = _bjson(tmp_path / "benchmarks.json", {"suite.a.track_time": entry})
    _, grid = asvrun.grid_from_benchmarks_json(path)
    assert grid == {
        ("suite.a.track_time", (("param1", "torch"), ("param2", "1024"))),
        ("suite.a.track_time", (("param1", "torch"), ("param2", "2048"))),
    }


def test_benchmarks_whose_grids_differ_are_measured_alternating_head_first(tmp_path, monkeypatch):
    """base's suite has other parameters for suite.x: after the interleaved run it is
    measured commit by commit, head, base, base, head (each commit first in turn),
    appending from the second round on."""
    calls = []
    name = "suite.x.track_time"

    def run_asv(root, conf, machine, commits, *, results, log_path, purpose, rounds, bench, append=False, **k):
        calls.append((purpose, list(commits), append, list(bench)))
        results.mkdir(parents=True, exist_ok=True)
        _bjson(results / "benchmarks.json", {name: _meta(name, [["'torch'", "'triton'"]], ["provider"])})
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("ok\n")
        return AsvRun(purpose, list(commits), rounds, list(bench), 0, 0.1, str(log_path), str(results))

    sides = {"base": Side(present=True, samples=[1.0]), "head": Side(present=True, samples=[1.0])}
    monkeypatch.setattr(asvrun, "run_asv", run_asv)
    monkeypatch.setattr(asvrun, "commits_with_results", lambda results: {BASE, HEAD})
    monkeypatch.setattr(asvrun, "collect", lambda *a, **k: ({(name, (("provider", "torch"),)): sides}, [], []))
    table, misaligned, runs, problems, warnings = measure(tmp_path, [], base_meta={name: [["'torch'"]]})
    assert misaligned == {name} and problems == []
    assert calls[0][:3] == ("measure", [HEAD, BASE], False)
    alt = [(c[1][0], c[2]) for c in calls[1:]]
    assert alt == [(HEAD, False), (BASE, False), (BASE, True), (HEAD, True)]
    assert all(c[0] == "measure alternating" and c[3] == [r"^suite\.x\.track_time(\(|$)"] for c in calls[1:])
    assert list(table) == [(name, (("provider", "torch"),))] and len(runs) == 5
