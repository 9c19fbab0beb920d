"""Bad input and faults (issue 14): every case is a small input built here; each
asserts that the message names the file, row or ref, and that the rest was processed.

The gate's end-to-end case (a head whose kernel fails at import -> exit 2) is in
tests/test_check.py (slow); the pieces it is made of are tested here, fast.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _repo import git, mini_suite_repo

from harness.gate import asvrun, check, progress
from harness.gate import decide as gate
from harness.gate import probe as gate_probe
from harness.measure import runner
from harness.store import results as R

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tiny_repo(tmp_path):
    """A git repository with two commits and no benchmarks."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    for i in range(2):
        (r / "f.txt").write_text(str(i))
        git(r, "add", "-A")
        git(r, "commit", "-q", "-m", f"c{i}")
    return r


# ----------------------------------------------------------------------------- refs and ranges (item 8)


def test_run_range_names_the_ref_that_does_not_exist(tiny_repo):
    with pytest.raises(runner.RunError) as e:
        runner.resolve_commits(tiny_repo, "nonexistent..HEAD")
    msg = str(e.value)
    assert "'nonexistent' is not a commit" in msg and "usage" not in msg.lower()
    with pytest.raises(runner.RunError) as e:
        runner.resolve_commits(tiny_repo, "HEAD~1..nope-branch")
    assert "'nope-branch'" in str(e.value) and "HEAD~1" not in str(e.value).split(":", 1)[1]
    with pytest.raises(runner.RunError, match="'no-such-ref' is not a commit"):
        runner.resolve_commits(tiny_repo, "no-such-ref")
    with pytest.raises(runner.RunError, match="empty.*reversed"):
        runner.resolve_commits(tiny_repo, "HEAD..HEAD~1")
    with pytest.raises(runner.RunError, match="symmetric"):
        runner.resolve_commits(tiny_repo, "HEAD~1...HEAD")
    # the rest works: a good range gives its commits, oldest first
    assert len(runner.resolve_commits(tiny_repo, "HEAD~1..HEAD")) == 1
    assert len(runner.resolve_commits(tiny_repo, None)) == 2


def test_check_ref_error_names_the_ref(tiny_repo):
    with pytest.raises(check.CheckError, match="'no-such-branch' is not a commit"):
        check.resolve(tiny_repo, "no-such-branch")
    with pytest.raises(check.CheckError, match="empty ref"):
        check.resolve(tiny_repo, "")
    assert len(check.resolve(tiny_repo, "HEAD")) == 40


def test_cli_run_bad_range_is_one_line_exit_2(tiny_repo):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "nonexistent..HEAD"],
        cwd=tiny_repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.returncode == 2, proc.stderr
    assert "'nonexistent' is not a commit" in proc.stderr and "Traceback" not in proc.stderr
    assert "usage: git" not in proc.stderr


# ----------------------------------------------------------------------------- missing benchmarks.json (item 8)


def _v2_file(
    commit: str,
    *,
    date: int = 1_700_000_000_000,
    env: str = "py3.11",
    value=1.0,
    params=None,
    bench: str = "suite.x.time_x",
) -> dict:
    params = params if params is not None else [["1", "2"]]
    n = 1
    for axis in params:
        n *= len(axis)
    return {
        "version": 2,
        "commit_hash": commit,
        "date": date,
        "env_name": env,
        "python": "3.11",
        "requirements": {},
        "params": {"machine": "m"},
        "result_columns": ["result", "params", "version", "started_at", "duration"],
        "results": {bench: [[value] * n, params, "v1", date, 1.0]},
    }


def _machine(root: Path, name: str, files: dict[str, dict], machine_json: dict | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "machine.json").write_text(json.dumps(machine_json or {"machine": name, "version": 1}))
    for fname, data in files.items():
        (d / fname).write_text(json.dumps(data))
    return d


def test_missing_benchmarks_json_is_a_warning_that_says_what_degrades(tmp_path):
    res = tmp_path / "results"
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if "benchmarks.json" in e]
    assert len(msgs) == 1 and str(res / "benchmarks.json") in msgs[0]
    assert "units" in msgs[0] and "param1" in msgs[0]
    assert rs.usable() and len(rs.series) == 2  # the rest processed
    s = next(iter(rs.series.values()))
    assert s.unit == "seconds" and s.key.params[0][0] == "param1"


# ----------------------------------------------------------------------------- atomic runs (item 7)


def test_a_bad_file_not_named_for_a_commit_names_no_commit(tmp_path):
    """Round 4 split: ``zz.json`` was said to make "commit zz" be measured again."""
    res = tmp_path / "results"
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    (d / "zz.json").write_text("{")
    (d / "notes-py.json").write_text("{")
    warnings = runner.quarantine_bad_results(res, "m", log=lambda m: None)
    assert len(warnings) == 2
    assert not any("commit zz" in w or "commit notes" in w for w in warnings), warnings
    assert all("no commit is measured again" in w for w in warnings), warnings


def test_truncated_results_file_is_quarantined_and_its_commit_measured_again(tmp_path):
    res = tmp_path / "results"
    good = _v2_file("a" * 40)
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": good})
    whole = json.dumps(_v2_file("b" * 40))
    (d / "bbbbbbbb-py3.11.json").write_text(whole[: len(whole) // 2])  # an interrupted write
    (d / "cccccccc-py3.11.json").write_text(json.dumps({"results": {}}))  # no commit_hash
    assert runner.measured_commits(res, "m") == {"a" * 40}
    logged = []
    warnings = runner.quarantine_bad_results(res, "m", log=logged.append)
    assert len(warnings) == 2 and len(logged) == 2
    assert any("bbbbbbbb-py3.11.json" in w and "truncated" in w and "measured again" in w for w in warnings)
    assert any("cccccccc-py3.11.json" in w and "commit_hash" in w for w in warnings)
    assert any("commit bbbbbbbb will be measured again" in w for w in warnings)
    # moved out of asv's and our walkers' way, kept for a post-mortem
    assert sorted(p.name for p in d.glob("*.json")) == ["aaaaaaaa-py3.11.json", "machine.json"]
    kept = list((res / runner.RESULTS_STATE_DIR / "quarantine" / "m").iterdir())
    assert len(kept) == 2 and all(p.name.endswith(".quarantined") for p in kept)
    # the rest is untouched and still loads
    rs = R.load(res, with_records=False)
    assert list(rs.commits) == ["a" * 40] and not any("quarantine" in e for e in rs.errors)


def test_promote_scratch_moves_only_whole_files(tmp_path):
    res = tmp_path / "results"
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    scratch = runner.new_scratch(res, "m", "test")
    assert scratch.parent == res / runner.RESULTS_STATE_DIR
    sd = _machine(scratch, "m", {"bbbbbbbb-py3.11.json": _v2_file("b" * 40)})
    (sd / "cccccccc-py3.11.json").write_text('{"commit_hash": "' + "c" * 40 + '", "resul')
    (sd / "kernelwatch").mkdir()
    (sd / "kernelwatch" / ("b" * 40 + ".jsonl")).write_text('{"schema": 1}\n')
    (scratch / "benchmarks.json").write_text(json.dumps({"version": 2}))
    moved, problems = runner.promote_scratch(scratch, res)
    assert [p.name for p in moved] == ["bbbbbbbb-py3.11.json"]
    assert len(problems) == 1 and "cccccccc-py3.11.json" in problems[0] and "not moved" in problems[0]
    assert (res / "m" / "bbbbbbbb-py3.11.json").exists() and not (res / "m" / "cccccccc-py3.11.json").exists()
    assert (res / "m" / "kernelwatch" / ("b" * 40 + ".jsonl")).exists()
    assert (res / "benchmarks.json").exists()
    assert runner.measured_commits(res, "m") == {"a" * 40, "b" * 40}


def test_new_scratch_carries_the_calibration(tmp_path):
    res = tmp_path / "results"
    (res / "m" / "kernelwatch").mkdir(parents=True)
    (res / "m" / "kernelwatch" / "calibration.jsonl").write_text('{"x": 1}\n')
    scratch = runner.new_scratch(res, "m", "t")
    assert (scratch / "m" / "kernelwatch" / "calibration.jsonl").read_text() == '{"x": 1}\n'
    runner.promote_scratch(scratch, res)  # not moved back or duplicated
    assert (res / "m" / "kernelwatch" / "calibration.jsonl").read_text() == '{"x": 1}\n'


_HOLDER = textwrap.dedent("""
    import sys, time
    from harness.measure import runner
    with runner.results_lock(sys.argv[1], what="kernelwatch run HOLDER", wait_s=0):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _hold(folder: Path, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert p.stdout.readline().strip() == "locked"
    return p


def test_second_run_on_a_results_folder_says_who_holds_it(tmp_path):
    res = tmp_path / "results"
    holder = _hold(res, 30)
    try:
        logged = []
        with pytest.raises(runner.LockBusy) as e:
            with runner.results_lock(res, wait_s=0.3, log=logged.append, poll_s=0.05):
                pass
        msg = str(e.value)
        assert f"pid {holder.pid}" in msg and "kernelwatch run HOLDER" in msg and str(res) in msg
        assert logged and f"pid {holder.pid}" in logged[0] and "waits" in logged[0]
        # another results folder is not affected
        with runner.results_lock(tmp_path / "other", wait_s=0):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_second_run_waits_for_the_lock(tmp_path):
    res = tmp_path / "results"
    holder = _hold(res, 1.0)
    try:
        logged = []
        t0 = time.monotonic()
        with runner.results_lock(res, wait_s=60, log=logged.append, poll_s=0.05):
            waited = time.monotonic() - t0
        assert waited > 0.3 and len(logged) == 1 and f"pid {holder.pid}" in logged[0]
    finally:
        holder.kill()
        holder.wait()
    # a crashed holder (killed) never leaves a stale lock: flock dies with its process
    holder = _hold(res, 30)
    holder.kill()
    holder.wait()
    with runner.results_lock(res, wait_s=0):
        pass


# ----------------------------------------------------------------------------- gate fails closed (item 1)


def _suite_repo(tmp_path: Path, vector_add_body: str) -> tuple[Path, str, str]:
    """A repository with a miniature suite layout (benchmarks/, kernels/ with get_op)
    whose head's vector_add module is ``vector_add_body``."""
    r = mini_suite_repo(tmp_path / "suite-repo")
    base = git(r, "rev-parse", "HEAD")
    (r / "kernels" / "vector_add.py").write_text(vector_add_body)
    git(r, "commit", "-q", "-am", "head")
    return r, base, git(r, "rev-parse", "HEAD")


def test_op_failing_at_import_on_head_is_broken_with_its_error(tmp_path):
    r, base, head = _suite_repo(tmp_path, "x = 1\nraise ImportError('deliberate import failure in vector_add')\n")
    probe = gate_probe.probe_suite(r, head, tmp_path / "work", ["vector_add", "softmax"], quick=True)
    assert probe["problem"] is None, probe
    assert "deliberate import failure" in probe["ops"]["vector_add"]
    assert "kernels/vector_add.py:2" in probe["ops"]["vector_add"]  # the file and line, relative to the export
    assert "softmax" not in probe["ops"]  # the rest of head's suite is fine
    base_meta = {"suite.vector_add.track_time": [["'torch'"]], "suite.softmax.track_time": [["'torch'"]]}
    head_meta = {"suite.softmax.track_time": [["'torch'"]]}
    missing = gate_probe.missing_on_head(base_meta, head_meta, probe)
    assert list(missing) == ["suite.vector_add.track_time"]
    assert "ImportError: deliberate import failure in vector_add" in missing["suite.vector_add.track_time"]
    # at base the op imports: nothing to report
    assert gate_probe.probe_suite(r, base, tmp_path / "work", ["vector_add"], quick=True)["ops"] == {}


def test_head_suite_failing_to_import_is_named(tmp_path):
    r, base, head = _suite_repo(tmp_path, "OK = 2\n")
    (r / "benchmarks" / "suite.py").write_text("import kernels\nraise SyntaxError('suite broken on head')\n")
    git(r, "commit", "-q", "-am", "break the suite")
    head = git(r, "rev-parse", "HEAD")
    probe = gate_probe.probe_suite(r, head, tmp_path / "work", ["vector_add"], quick=False)
    assert "suite broken on head" in probe["modules"]["suite"] and "benchmarks/suite.py:2" in probe["modules"]["suite"]
    missing = gate_probe.missing_on_head({"suite.vector_add.track_time": []}, None, probe)
    assert "benchmark module 'suite' fails to import on head" in missing["suite.vector_add.track_time"]


def test_benchmark_deleted_on_head_is_broken_not_removed():
    missing = gate_probe.missing_on_head(
        {"suite.a.track_time": [], "suite.b.track_time": []},
        {"suite.a.track_time": []},
        {"modules": {}, "ops": {}, "problem": None},
    )
    assert list(missing) == ["suite.b.track_time"] and "missing from head's" in missing["suite.b.track_time"]
    v = gate.Verdict("suite.b.track_time", (), gate.Status.BROKEN, missing["suite.b.track_time"])
    assert gate.exit_code([v]) == gate.EXIT_BROKEN


def test_discovery_uses_the_measurement_grid(monkeypatch, tmp_path):
    seen = []

    def fake_run_asv(*a, **kw):
        seen.append(kw["quick"])
        raise OSError("stop here")

    monkeypatch.setattr(asvrun, "run_asv", fake_run_asv)  # discover lives in harness.gate.asvrun
    for quick in (False, True):
        with pytest.raises(OSError):
            check.discover(
                tmp_path,
                tmp_path / "c.json",
                "m",
                "a" * 40,
                work=tmp_path,
                launch="spawn",
                tag="base",
                bench=None,
                quick=quick,
            )
    assert seen == [False, True]


def test_progress_off_a_terminal_is_one_line_per_phase_with_time_left():
    lines = []
    p = progress.PhaseProgress(lines.append, tty=False)
    p.start("discover base's suite")
    p.line("[ 50.00%] ··· suite.x.track_time  ok")  # ignored off a terminal
    p.end("(4 cases)", next_name="measure")
    p.start("measure")
    time.sleep(0.05)
    p.end("(10 series)", work=40, next_name="remeasure", next_cases=8)
    p.close()
    assert len(lines) == 2
    assert lines[0].startswith("  [1] discover base's suite:") and "next: measure" in lines[0]
    assert lines[1].startswith("  [2] measure:") and "s left" in lines[1]
    left = float(lines[1].split("about ")[1].split(" s left")[0])
    assert 0 <= left < 5  # 8/40 of the measure phase's time


def test_progress_on_a_terminal_follows_asv_percentages():
    import io

    from rich.console import Console

    p = progress.PhaseProgress(lambda m: None, tty=True, console=Console(file=io.StringIO()))
    p.start("measure")
    p.line("[ 25.00%] ··· suite.x.track_time  ok")
    assert p._rich.tasks[0].completed == pytest.approx(25.0)
    p.segment(1, 2)
    p.line("[ 50.00%] ··· suite.x.track_time  ok")
    assert p._rich.tasks[0].completed == pytest.approx(75.0)
    p.end("done")
    p.close()


# ----------------------------------------------------------------------------- schema: wrong types (item 2)

OPENBLAS = ROOT / "examples" / "openblas" / "results"  # real results, in the repository


def _benchmarks(res: Path, entries: dict) -> None:
    res.mkdir(parents=True, exist_ok=True)
    (res / "benchmarks.json").write_text(json.dumps({"version": 2, **entries}))


def _two_commit_machine(res: Path, second: dict | None = None) -> Path:
    """Machine ``m`` with one benchmark (``suite.x.time_x``) and two commits' files:
    ``a...`` at 1.7e12 ms and ``second`` (default ``b...`` 100 s later) as ``bbbbbbbb-py3.11.json``."""
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    second = _v2_file("b" * 40, date=1_700_000_100_000) if second is None else second
    return _machine(
        res,
        "m",
        {"aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_000), "bbbbbbbb-py3.11.json": second},
    )


def _meta(name, **kw) -> dict:
    return {
        "name": name,
        "type": "time",
        "unit": "seconds",
        "param_names": ["size"],
        "params": [["1", "2"]],
        "version": "1",
        **kw,
    }


def test_benchmarks_json_wrong_types_skip_that_entry(tmp_path):
    res = tmp_path / "results"
    _benchmarks(
        res,
        {
            "suite.a.time_a": _meta("suite.a.time_a", unit=5),  # unit a number
            "suite.b.time_b": _meta("suite.b.time_b", param_names="size"),  # a string, not a list
            "suite.c.time_c": _meta("suite.c.time_c", params="12"),
            "suite.d.time_d": [1, 2],
            "suite.ok.time_ok": _meta("suite.ok.time_ok"),
        },
    )
    files = {
        f"{c * 8}-py3.11.json": _v2_file(c * 40, bench=b)
        for c, b in (("a", "suite.a.time_a"), ("b", "suite.b.time_b"), ("c", "suite.ok.time_ok"))
    }
    _machine(res, "m", files)
    rs = R.load(res, with_records=False)
    bj = str(res / "benchmarks.json")
    for bench, field in (
        ("suite.a.time_a", "'unit'"),
        ("suite.b.time_b", "'param_names'"),
        ("suite.c.time_c", "'params'"),
        ("suite.d.time_d", "not an object"),
    ):
        assert any(bj in e and bench in e and field in e for e in rs.errors), (bench, rs.errors)
    # the rest processed: the good entry keeps its names; a skipped one falls back, never 'size=s'
    ok = [s for s in rs.series.values() if s.key.benchmark == "suite.ok.time_ok"]
    assert sorted(s.key.params for s in ok) == [(("size", "1"),), (("size", "2"),)]
    b = [s for s in rs.series.values() if s.key.benchmark == "suite.b.time_b"]
    assert sorted(s.key.params for s in b) == [(("param1", "1"),), (("param1", "2"),)]
    a = [s for s in rs.series.values() if s.key.benchmark == "suite.a.time_a"]
    assert a and all(s.unit == "seconds" for s in a)  # from asv's naming rule, not the number 5


@pytest.mark.parametrize("data,field", [({"version": 99}, "'version' 99"), ([1], "expected a JSON object")])
def test_benchmarks_json_unknown_version_is_ignored_with_a_message(tmp_path, data, field):
    res = tmp_path / "results"
    res.mkdir()
    (res / "benchmarks.json").write_text(json.dumps(data))
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    rs = R.load(res, with_records=False)
    assert any(str(res / "benchmarks.json") in e and field in e for e in rs.errors), rs.errors
    assert rs.usable()


def test_results_file_and_row_wrong_types(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    f_ok = _v2_file("a" * 40)
    f_rowparams = _v2_file("b" * 40)
    f_rowparams["results"]["suite.y.time_y"] = [[1.0], "size", "v1", 0, 1.0]  # params as a string
    f_rowparams["results"]["suite.z.time_z"] = {"result": 1}  # a row that is not a list
    f_rowparams["results"]["suite.w.time_w"] = [["fast"], [["1"]], "v1", 0, 1.0]  # a string result
    f_version = dict(_v2_file("c" * 40), version=3)
    f_envname = dict(_v2_file("d" * 40), env_name=["py3.11"])
    f_date = dict(_v2_file("e" * 40), date="yesterday")
    f_params = dict(_v2_file("f" * 40), params=["machine"])
    f_missing = _v2_file("1" * 40)
    del f_missing["results"]
    d = _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": f_ok,
            "bbbbbbbb-py3.11.json": f_rowparams,
            "cccccccc-py3.11.json": f_version,
            "dddddddd-py3.11.json": f_envname,
            "eeeeeeee-py3.11.json": f_date,
            "ffffffff-py3.11.json": f_params,
            "11111111-py3.11.json": f_missing,
        },
    )
    rs = R.load(res, with_records=False)

    def msg(fname, *words):
        hits = [e for e in rs.errors if str(d / fname) in e and all(w in e for w in words)]
        assert hits, (fname, words, rs.errors)

    msg("bbbbbbbb-py3.11.json", "suite.y.time_y", "'params'", "row skipped")
    msg("bbbbbbbb-py3.11.json", "suite.z.time_z", "not a list")
    msg("bbbbbbbb-py3.11.json", "suite.w.time_w", "'result'")
    msg("cccccccc-py3.11.json", "'version' 3", "file skipped")
    msg("dddddddd-py3.11.json", "'env_name'")
    msg("eeeeeeee-py3.11.json", "'date'")
    msg("ffffffff-py3.11.json", "'params'")
    msg("11111111-py3.11.json", "missing field 'results'")
    # the rest processed: both good files' rows, the good row of the mixed file, and
    # the file whose date is "yesterday" (only its date is lost, issue 29)
    assert set(rs.commits) == {"a" * 40, "b" * 40, "e" * 40}
    x = [s for s in rs.series.values() if s.key.benchmark == "suite.x.time_x"]
    assert len(x) == 2 and all(len(s.points) == 3 for s in x)
    assert not any(s.key.benchmark in ("suite.y.time_y", "suite.z.time_z") for s in rs.series.values())
    # a value that is no number loses its own point only: it counts as failed, named
    msg("bbbbbbbb-py3.11.json", "suite.w.time_w", "not numbers", "count as failed")
    (w,) = [s for s in rs.series.values() if s.key.benchmark == "suite.w.time_w"]
    assert [p.value for p in w.points] == [None]


def test_record_wrong_types_skip_that_record(tmp_path):
    from harness.core import records

    rec = {
        "schema": 1,
        "machine": "m",
        "commit": "a" * 40,
        "benchmark": "suite.x.track_time",
        "params": {"provider": "torch"},
        "timing": {"method": "cpu", "samples_s": [1e-3]},
        "metrics": {"status": "ok", "gbps": 1.0},
    }
    path = tmp_path / "m" / "kernelwatch" / ("a" * 40 + ".jsonl")
    path.parent.mkdir(parents=True)
    lines = [
        dict(rec, metrics=[1, 2]),
        dict(rec, params=["torch"]),
        dict(rec, timing={"samples_s": "fast"}),
        dict(rec, benchmark=7),
        dict(rec, params={"provider": "triton"}),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    errors = []
    got = records.load_records(tmp_path, errors)
    assert len(got) == 1 and next(iter(got.values()))["params"] == {"provider": "triton"}
    for line, field in ((1, "'metrics'"), (2, "'params'"), (3, "'timing.samples_s'"), (4, "'benchmark'")):
        assert any(f"{path}:{line}:" in e and field in e for e in errors), (line, errors)


def _bad_results_dir(res: Path) -> Path:
    """One good file and one of each wrong type, records included."""
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x"), "suite.u.time_u": _meta("suite.u.time_u", unit=3)})
    d = _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_000),
            "bbbbbbbb-py3.11.json": _v2_file("b" * 40, date=1_700_000_100_000),
            "cccccccc-py3.11.json": dict(_v2_file("c" * 40), results=[1]),
        },
    )
    rec_dir = d / "kernelwatch"
    rec_dir.mkdir()
    (rec_dir / ("a" * 40 + ".jsonl")).write_text(
        json.dumps(
            {
                "schema": 1,
                "machine": "m",
                "commit": "a" * 40,
                "benchmark": "suite.x.time_x",
                "params": ["size"],
                "metrics": [],
                "timing": {},
            }
        )
        + "\n"
    )
    return d


def test_analyze_and_publish_survive_wrong_types(tmp_path):
    res = tmp_path / "results"
    d = _bad_results_dir(res)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000")  # rich must not wrap the paths
    for cmd in (
        ["analyze", "--results", str(res)],
        ["publish", "--results", str(res), "--repo", "", "--out", str(tmp_path / "site")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", *cmd],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        text = proc.stdout + proc.stderr
        assert proc.returncode == 0, (cmd, text)
        assert "AttributeError" not in text and "Traceback" not in text
        assert str(d / "cccccccc-py3.11.json") in text and "'results'" in text, text  # the bad file named
        assert f"{d / 'kernelwatch' / ('a' * 40 + '.jsonl')}:1" in text  # the bad record named
        assert "suite.u.time_u" in text and "'unit'" in text  # the bad benchmarks.json entry named
    assert (tmp_path / "site" / "index.html").exists()  # the rest was published


def test_nothing_usable_left_is_exit_2(tmp_path):
    res = tmp_path / "results"
    _machine(res, "m", {"aaaaaaaa-py3.11.json": dict(_v2_file("a" * 40), version=7)})
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", "--results", str(res)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000"),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert str(res / "m" / "aaaaaaaa-py3.11.json") in text and "'version' 7" in text


# ----------------------------------------------------------------------------- every machine accounted for (item 3)


def test_every_machine_folder_is_accounted_for(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "good", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    nomj = res / "no-machine-json"
    nomj.mkdir()
    (nomj / "bbbbbbbb-py3.11.json").write_text(json.dumps(_v2_file("b" * 40)))
    dang = res / "dangling-machine-json"
    dang.mkdir()
    (dang / "machine.json").symlink_to(tmp_path / "nowhere.json")
    (res / "a-file").write_text("not a folder")
    (res / "dangling-folder").symlink_to(tmp_path / "no-such-folder")
    unread = res / "unreadable-machine-json"
    (unread / "machine.json").mkdir(parents=True)  # a folder where the file should be: cannot be read
    badmj = _machine(res, "bad-machine-json", {}, machine_json={"machine": 42})
    (res / ".kernelwatch").mkdir()  # ours: lock, scratch, quarantine; never a machine, no warning
    rs = R.load(res, with_records=False)
    expect = {
        nomj: "no machine.json",
        dang / "machine.json": "dangling symlink",
        res / "a-file": "a file where",
        res / "dangling-folder": "dangling symlink",
        unread / "machine.json": "cannot read",
        badmj / "machine.json": "'machine'",
    }
    for path, words in expect.items():
        assert any(e.startswith(str(path)) and words in e for e in rs.errors), (path, rs.errors)
    assert "1 .json file" in next(e for e in rs.errors if e.startswith(str(nomj)))
    assert not any(".kernelwatch" in e for e in rs.errors)
    # an unusable machine.json no longer loses its folder: loaded under the folder's name (h29a)
    assert sorted(rs.machines) == ["bad-machine-json", "good", "unreadable-machine-json"] and rs.usable()
    assert all("loaded as machine" in e for e in rs.errors if e.startswith((str(unread), str(badmj))))


def test_two_folders_naming_one_machine_are_kept_apart(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(
        res,
        "gpu-box",
        {"aaaaaaaa-py3.11.json": _v2_file("a" * 40, value=1.0)},
        machine_json={"machine": "gpu-box", "version": 1},
    )
    _machine(
        res,
        "gpu-box-copy",
        {"aaaaaaaa-py3.11.json": _v2_file("a" * 40, value=3.0)},
        machine_json={"machine": "gpu-box", "version": 1},
    )
    rs = R.load(res, with_records=False)
    assert sorted(rs.machines) == ["gpu-box", "gpu-box (gpu-box-copy)"]
    msg = next(e for e in rs.errors if "kept apart" in e)
    assert str(res / "gpu-box-copy") in msg and str(res / "gpu-box") in msg
    by_machine = {}
    for s in rs.series.values():
        by_machine.setdefault(s.key.machine, set()).update(p.value for p in s.points)
    assert by_machine == {"gpu-box": {1.0}, "gpu-box (gpu-box-copy)": {3.0}}  # never merged or dropped


def test_two_folders_naming_one_machine_keep_their_own_records(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    for folder, value in (("gpu-box", 1.0), ("gpu-box-copy", 3.0)):
        d = _machine(
            res,
            folder,
            {"aaaaaaaa-py3.11.json": _v2_file("a" * 40, value=value)},
            machine_json={"machine": "gpu-box", "version": 1},
        )
        (d / "kernelwatch").mkdir()
        (d / "kernelwatch" / ("a" * 40 + ".jsonl")).write_text(
            "".join(
                json.dumps(
                    {
                        "schema": 1,
                        "machine": "gpu-box",
                        "commit": "a" * 40,
                        "benchmark": "suite.x.time_x",
                        "params": {"size": n},
                        "metrics": {"status": "ok"},
                        "note": folder,
                    }
                )
                + "\n"
                for n in ("1", "2")
            )
        )
    rs = R.load(res)
    for s in rs.series.values():
        want = "gpu-box" if s.key.machine == "gpu-box" else "gpu-box-copy"
        assert [p.record["note"] for p in s.points] == [want], s.key  # never the other folder's


# ----------------------------------------------------------------------------- environments (item 4)


def test_same_commit_in_two_environments_keeps_both_series(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    files = {}
    for i, c in enumerate("abc"):
        files[f"{c * 8}-py3.11.json"] = _v2_file(c * 40, date=1_700_000_000_000 + i, env="py3.11", value=1.0)
    files["cccccccc-py3.12.json"] = _v2_file("c" * 40, date=1_700_000_000_002, env="py3.12", value=2.0)
    _machine(res, "m", files)
    rs = R.load(res, with_records=False)
    msg = next(e for e in rs.errors if "environment" in e)
    assert str(res / "m") in msg and "py3.11" in msg and "py3.12" in msg and "c" * 12 in msg
    envs = {}
    for s in rs.series.values():
        envs.setdefault(s.key.env, []).append(s)
        assert dict(s.key.params)["asv_env"] == s.key.env
    assert sorted(envs) == ["py3.11", "py3.12"]
    assert all(len(s.points) == 3 for s in envs["py3.11"]) and all(len(s.points) == 1 for s in envs["py3.12"])
    # through the analysis input: no series dropped, no duplicate-commit error
    from harness.store.dataset import load_input

    rs2 = load_input(res)
    assert len(rs2.series) == 4


def test_environments_that_follow_each_other_stay_one_series(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.7.json": _v2_file("a" * 40, env="py3.7", date=1_700_000_000_000),
            "bbbbbbbb-py3.8.json": _v2_file("b" * 40, env="py3.8", date=1_700_000_000_001),
        },
    )
    rs = R.load(res, with_records=False)
    assert not rs.errors and len(rs.series) == 2
    assert all(s.key.env is None and len(s.points) == 2 for s in rs.series.values())


def test_openblas_with_one_file_in_a_second_environment_loses_no_series(tmp_path):
    import shutil

    dst = tmp_path / "results"
    shutil.copytree(OPENBLAS, dst)
    before = R.load(OPENBLAS, with_records=False)
    mdir = dst / "gha-aws-skylake"
    victim = sorted(p for p in mdir.glob("*.json") if p.name != "machine.json")[-1]
    data = json.loads(victim.read_text())
    data["env_name"] = data["env_name"] + "-copy"
    (mdir / victim.name.replace(".json", "-copy.json")).write_text(json.dumps(data))
    after = R.load(dst, with_records=False)
    assert any(str(mdir) in e and "environment" in e for e in after.errors)
    base_keys = {(k.machine, k.benchmark, k.params) for k in before.series}
    kept = {(k.machine, k.benchmark, tuple(p for p in k.params if p[0] != "asv_env")) for k in after.series}
    assert base_keys <= kept and len(after.series) > len(before.series)


# ----------------------------------------------------------------------------- commits not in the repository (item 5)


def test_commit_not_in_repository_is_parked_never_newest(tiny_repo, tmp_path):
    shas = git(tiny_repo, "rev-list", "--reverse", "HEAD").split()
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    foreign = "f" * 40
    d = _machine(
        res,
        "m",
        {
            f"{shas[0][:8]}-py3.11.json": _v2_file(shas[0], date=1_600_000_000_000),
            f"{shas[1][:8]}-py3.11.json": _v2_file(shas[1], date=1_600_000_100_000),
            "ffffffff-py3.11.json": _v2_file(foreign, date=1_900_000_000_000),
        },
    )  # newest date
    rs = R.load(res, repo=tiny_repo, with_records=False)
    msg = next(e for e in rs.errors if "parked" in e)
    assert str(d / "ffffffff-py3.11.json") in msg and foreign[:12] in msg and str(tiny_repo) in msg
    order = rs.commit_order()
    assert order == [foreign, shas[0], shas[1]]  # apart from the history, never the newest
    assert rs.commits[foreign].parked and not rs.commits[shas[1]].parked
    s = next(iter(rs.series.values()))
    assert s.points[-1].commit == shas[1]  # the latest result is the repository's newest commit


def test_repository_unrelated_to_the_results_is_one_warning(tiny_repo, tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_002),
            "bbbbbbbb-py3.11.json": _v2_file("b" * 40, date=1_700_000_000_001),
        },
    )
    rs = R.load(res, repo=tiny_repo, with_records=False)
    assert [e for e in rs.errors if str(tiny_repo) in e] == [
        next(e for e in rs.errors if "none of the 2 results commits" in e)
    ]
    assert rs.commit_order() == ["b" * 40, "a" * 40] and not any(c.parked for c in rs.commits.values())


# ----------------------------------------------------------------------------- Liger CSVs row by row (item 6)

LIGER_HEADER = (
    "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
    "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version"
)


def _liger_row(x, p50, p20=None, p80=None, provider="liger", metric="speed", unit="ms") -> str:
    cfg = '"{""M"": 2048, ""dtype"": ""torch.bfloat16"", ""eps"": 1e-06}"'
    p20 = p50 if p20 is None else p20
    p80 = p50 if p80 is None else p80
    return (
        f"rms_norm,{provider},forward,{metric},{unit},H,hidden size,{x},{p50},{p20},{p80},{cfg},"
        f"NVIDIA H100 NVL,2025-01-25 23:43:11,0.5.2"
    )


def test_liger_bad_rows_are_skipped_by_line_and_the_rest_kept(tmp_path):
    from harness.store import importers

    f = tmp_path / "liger.csv"
    rows = [
        LIGER_HEADER,
        _liger_row(1024, 0.05),  # 2 good
        _liger_row(2048, "abc"),  # 3 not a number
        "rms_norm,liger,forward,speed,ms,H",  # 4 too few fields
        _liger_row(4096, 0.1).replace("NVIDIA H100 NVL", ""),  # 5 empty gpu
        _liger_row("inf", 0.1),  # 6 x not finite
        _liger_row(8192, 0.1).replace('"{""M', '"[""M').replace('06}"', '06]"'),  # 7 config not an object
        _liger_row(16384, 0.2).replace("rms_norm", "", 1),  # 8 empty kernel
        _liger_row(32768, 0.3, provider=""),  # 9 empty provider
        _liger_row(65536, 0.4),
    ]  # 10 good
    f.write_text("\n".join(rows) + "\n")
    rs = importers.load_liger_csvs([f])
    for line in range(3, 10):
        assert any(e.startswith(f"{f}:{line}:") and "row skipped" in e for e in rs.errors), (line, rs.errors)
    assert len([e for e in rs.errors if "row skipped" in e]) == 7  # every bad row named, not only the last
    xs = sorted(dict(s.key.params)["H"] for s in rs.series.values())
    assert xs == ["1024", "65536"]  # the rest of the file kept


def test_liger_impossible_times_are_invalid_with_a_reason_never_numbers(tmp_path):
    from harness.store import importers

    f = tmp_path / "liger.csv"
    rows = [
        LIGER_HEADER,
        _liger_row(1024, 0.05),
        _liger_row(2048, 0),
        _liger_row(4096, -0.1),
        _liger_row(8192, "nan"),
        _liger_row(16384, 1e-9),
        _liger_row(32768, 0.2, p20=0.3, p80=0.25),
        _liger_row(65536, 0.1, unit="fortnights"),
    ]
    f.write_text("\n".join(rows) + "\n")
    rs = importers.load_liger_csvs([f])
    want = {
        3: "zero",
        4: "negative",
        5: "not finite",
        6: "physically impossible",
        7: "out of order",
        8: "unknown time unit",
    }
    for line, why in want.items():
        assert any(e.startswith(f"{f}:{line}:") and why in e and "invalid point" in e for e in rs.errors), (
            line,
            rs.errors,
        )
    pts = {dict(s.key.params)["H"]: s.points[0] for s in rs.series.values()}
    assert pts["1024"].value == 0.05
    for x in ("2048", "4096", "8192", "16384", "32768", "65536"):
        assert pts[x].value is None and pts[x].reason.startswith("invalid: "), x
    # the analysis never divides by them (was ZeroDivisionError) nor shows 860580103% of peak
    import io

    from rich.console import Console

    from harness.cli.analyze import run_analyze

    out = tmp_path / "r.json"
    assert run_analyze(f, json_path=out, console=Console(file=io.StringIO(), width=200)) == 0
    rep = json.loads(out.read_text())
    assert rep["throughput"], "the good row's throughput is reported"
    assert {t["params"][-1][1] for t in rep["throughput"]} == {"1024"}  # only the valid row became a rate
    # the rate is the case's bytes over its time, in GB/s (10^9 bytes a second)
    from harness.core.costs import cost_of

    (tp,) = rep["throughput"]
    cost, _ = cost_of(tp["benchmark"], [tuple(p) for p in tp["params"]], pts["1024"].record)
    assert cost is not None and cost.bytes_total and math.isclose(tp["time_s"], 0.05e-3)  # 0.05 ms
    assert math.isclose(tp["gbps"], cost.bytes_total / 0.05e-3 / 1e9, rel_tol=1e-9), (tp, cost)
    assert math.isclose(tp["gflops"], cost.flops / 0.05e-3 / 1e9, rel_tol=1e-9), (tp, cost)


def test_liger_conflict_markers_name_every_marker_line_and_other_files_import(tmp_path):
    from harness.store import importers

    good = tmp_path / "good.csv"
    good.write_text("\n".join([LIGER_HEADER, _liger_row(1024, 0.05)]) + "\n")
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "\n".join(
            [
                LIGER_HEADER,
                _liger_row(2048, 0.02),
                "<<<<<<< Updated upstream",
                _liger_row(2048, 0.03),
                "=======",
                _liger_row(2048, 0.04),
                ">>>>>>> Stashed",
            ]
        )
        + "\n"
    )
    rs = importers.load_liger_csvs([bad, good])
    (msg,) = [e for e in rs.errors if "bad.csv" in e]
    assert msg.startswith(f"{bad}:3: git merge-conflict marker") and "2 more, up to line 7" in msg
    assert len(rs.series) == 1


def test_gate_fails_closed_on_a_results_file_it_cannot_read(tmp_path):
    # A series missing because head's results file (or row) was skipped must not read as REMOVED.
    res = tmp_path / "measure-results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    head = _v2_file("b" * 40)
    head["results"]["suite.x.time_x"][1] = "size"  # a row whose params are a string
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40), "bbbbbbbb-py3.11.json": head})
    table, warnings, failures = check.collect(res, {"base": "a" * 40, "head": "b" * 40}, {})
    assert len(failures) == 1 and str(d / "bbbbbbbb-py3.11.json") in failures[0] and "'params'" in failures[0]
    assert all(not s["head"].present for s in table.values()) and len(table) == 2  # base's rows still read


def test_gate_grid_skips_a_wrong_typed_benchmarks_json_entry(tmp_path):
    path = tmp_path / "benchmarks.json"
    path.write_text(
        json.dumps(
            {
                "version": 2,
                "suite.a.track_time": _meta("suite.a.track_time", params="12"),
                "suite.b.track_time": _meta("suite.b.track_time"),
            }
        )
    )
    problems = []
    meta, grid = check.grid_from_benchmarks_json(path, None, problems)
    assert list(meta) == ["suite.b.track_time"] and len(grid) == 2  # the rest processed
    assert len(problems) == 1 and str(path) in problems[0] and "suite.a.track_time" in problems[0]
    path.write_text(json.dumps({"version": 5}))
    with pytest.raises(ValueError, match="'version' 5"):
        check.grid_from_benchmarks_json(path)


def test_run_range_follows_first_parents_over_a_merge(tmp_path):
    """A merge on the branch is one commit of the range; the merged branch's own commits are not measured."""
    import git

    repo = git.Repo.init(tmp_path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t").set_value("user", "email", "t@example.invalid")

    def commit(name):
        (tmp_path / name).write_text(name)
        repo.index.add([name])
        return repo.index.commit(name).hexsha

    base = commit("a")
    repo.git.checkout("-b", "side")
    side = [commit("s1"), commit("s2"), commit("s3")]
    repo.git.checkout("main")
    commit("b")
    repo.git.merge("--no-ff", "side", "-m", "merge side")
    merge = repo.head.commit.hexsha
    shas = runner.resolve_commits(tmp_path, f"{base}..HEAD")
    assert len(shas) == 2 and shas[-1] == merge
    assert not set(side) & set(shas)
    last = runner.resolve_commits(tmp_path, None, count=3)
    assert last[0] == base and last[-1] == merge and not set(side) & set(last)


# ----------------------------------------------------------------------------- hostile tester (h2)


def _cli(tmp_path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000")
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )


def test_records_file_of_binary_bytes_is_skipped_by_name_asv_data_kept(tmp_path):
    res = tmp_path / "results"
    d = _two_commit_machine(res)
    bad = d / "kernelwatch" / ("a" * 40 + ".jsonl")
    bad.parent.mkdir()
    bad.write_bytes(bytes(range(128, 256)) * 20 + b"\n\xff\xfe\n")
    rs = R.load(res)
    assert any(str(bad) in e and "UTF-8" in e for e in rs.errors), rs.errors
    assert len(rs.series) == 2 and all(len(s.points) == 2 for s in rs.series.values())
    proc = _cli(tmp_path, "analyze", "--results", str(res))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in text, text
    assert str(bad) in text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_fifos_named_like_inputs_are_skipped_never_opened_blocking(tmp_path):
    from harness.core import records

    res = tmp_path / "results"
    d = _two_commit_machine(res)
    (d / "kernelwatch").mkdir()
    fifos = [
        d / "cccccccc-py3.11.json",
        d / "kernelwatch" / ("a" * 40 + ".jsonl"),
        d / "kernelwatch" / records.CALIBRATION_FILE,
    ]
    m2 = res / "m2"
    m2.mkdir()
    fifos.append(m2 / "machine.json")
    for f in fifos:
        os.mkfifo(f)
    proc = _cli(tmp_path, "analyze", "--results", str(res))  # hangs (timeout) without the check
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in text, text
    assert str(fifos[0]) in text
    errors = R.load(res).errors
    for f in fifos:
        assert any(str(f) in e and "FIFO" in e for e in errors), (f, errors)
    assert all(len(s.points) == 2 for s in R.load(res).series.values())


def _rec(commit: str, machine: str = "m", **kw) -> dict:
    rec = {
        "schema": 1,
        "machine": machine,
        "commit": commit,
        "benchmark": "suite.x.time_x",
        "params": {"param1": "1"},
        "dtype": "fp32",
        "timing": {"method": "cpu", "samples_s": [1e-3], "p50_s": 1e-3},
        "metrics": {"status": "ok", "time_s": 1e-3},
        "cost": {"flops": 10**6, "bytes_read": 8, "bytes_written": 8},
    }
    rec.update(kw)
    return rec


def _results_with_records(res: Path, lines_a: list) -> tuple[Path, Path]:
    d = _two_commit_machine(res)
    rdir = d / "kernelwatch"
    rdir.mkdir()
    path = rdir / ("a" * 40 + ".jsonl")
    path.write_text("".join(x if isinstance(x, str) else json.dumps(x) + "\n" for x in lines_a))
    (rdir / ("b" * 40 + ".jsonl")).write_text(json.dumps(_rec("b" * 40)) + "\n")
    return d, path


def test_record_cost_beyond_float_range_is_invalid_by_line_and_analyze_runs(tmp_path):
    from harness.core import records

    res = tmp_path / "results"
    d, path = _results_with_records(res, [_rec("a" * 40, cost={"flops": 10**400, "bytes_read": 8})])
    errors = []
    got = records.load_records(res, errors)
    assert [k[1] for k in got] == ["b" * 40]  # the other record kept
    assert any(f"{path}:1:" in e and "'cost.flops'" in e for e in errors), errors
    proc = _cli(tmp_path, "analyze", "--results", str(res))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "OverflowError" not in text and "Traceback" not in text, text
    assert f"{path}:1" in text and "cost.flops" in text


def test_record_string_or_nan_numbers_and_misplaced_records_are_named_by_line(tmp_path):
    from harness.core import records

    res = tmp_path / "results"
    a = "a" * 40
    lines = [
        _rec(a, metrics={"status": "ok", "time_s": "fast"}),
        _rec(a, timing={"method": "cpu", "p50_s": "fast"}),
        '{"schema": 1, "machine": "m", "commit": "' + a + '", "benchmark": "suite.x.time_x", '
        '"timing": {"p50_s": NaN}}\n',
        _rec(a, metrics={"status": "ok", "gbps": float("inf")}),
        _rec("c" * 40),  # another commit's record in a's file
        _rec(a, machine="other-machine"),  # another machine's record in m's folder
        _rec(a, params={"param1": "2"}),
    ]  # the good one
    d, path = _results_with_records(res, lines)
    errors = []
    got = records.load_records(res, errors, machine_of={"m": "m"})
    assert sorted((k[0], k[1][:1]) for k in got) == [("m", "a"), ("m", "b")], got.keys()
    for line, words in (
        (1, ["'metrics.time_s'", "'fast'"]),
        (2, ["'timing.p50_s'"]),
        (3, ["'timing.p50_s'"]),
        (4, ["'metrics.gbps'"]),
        (5, ["cccccccccccc", "aaaaaaaaaaaa"]),
        (6, ["'other-machine'", "'m'"]),
    ):
        assert any(e.startswith(f"{path}:{line}:") and all(w in e for w in words) for e in errors), (line, errors)
    assert not any(k[0] == "other-machine" for k in got)
    # through the loader: the asv points of both commits are all kept
    rs = R.load(res)
    assert len(rs.series) == 2 and all(len(s.points) == 2 for s in rs.series.values())
    assert sum(1 for e in rs.errors if str(path) in e) == 6


def test_same_commit_in_two_files_of_one_environment_keeps_one_value_names_both(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x"), "suite.y.time_y": _meta("suite.y.time_y")})
    older = _v2_file("b" * 40, date=1_700_000_100_000, value=5.0)
    older["results"]["suite.y.time_y"] = [[7.0, 7.0], [["1", "2"]], "v1", 1_700_000_100_000, 1.0]
    newer = _v2_file("b" * 40, date=1_700_000_100_000, value=2.0)
    newer["results"]["suite.x.time_x"][3] = 1_700_000_900_000  # ran later
    d = _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_000),
            "bbbbbbbb-py3.11.json": older,
            "bbbbbbbb-copy.json": newer,
            "cccccccc-py3.11.json": _v2_file("c" * 40, date=1_700_000_200_000),
        },
    )
    rs = R.load(res, with_records=False)
    msg = [e for e in rs.errors if "b" * 12 in e]
    assert len(msg) == 1 and str(d / "bbbbbbbb-py3.11.json") in msg[0] and str(d / "bbbbbbbb-copy.json") in msg[0]
    xs = [s for s in rs.series.values() if s.key.benchmark == "suite.x.time_x"]
    ys = [s for s in rs.series.values() if s.key.benchmark == "suite.y.time_y"]
    assert len(xs) == 2 and all([p.commit[0] for p in s.points] == ["a", "b", "c"] for s in xs)
    assert all(next(p for p in s.points if p.commit[0] == "b").value == 2.0 for s in xs)  # the newer run wins
    assert len(ys) == 2 and all(len(s.points) == 1 and s.points[0].value == 7.0 for s in ys)  # merged, kept
    proc = _cli(tmp_path, "analyze", "--results", str(res))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and str(d / "bbbbbbbb-copy.json") in text, text
    assert "appears twice" not in text


def test_openblas_with_a_commit_copied_into_a_second_file_loses_no_series(tmp_path):
    import shutil

    dst = tmp_path / "results"
    shutil.copytree(OPENBLAS, dst)
    mdir = dst / "gha-aws-skylake"
    first = sorted(p for p in mdir.glob("*.json") if p.name != "machine.json")[0]
    shutil.copy(first, mdir / first.name.replace(".json", "-copy.json"))
    from harness.store.dataset import build_inputs, load_input

    before = build_inputs(load_input(OPENBLAS))
    rs = load_input(dst)
    after = build_inputs(rs)
    assert len(after.series) == len(before.series)
    assert sum(len(s.points) for s in after.series) == sum(len(s.points) for s in before.series)
    assert sum(1 for e in rs.errors if str(first) in e and "copy" in e) == 1


def test_asv_nan_result_is_counted_as_skipped_in_the_analysis_input(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_000),
            "bbbbbbbb-py3.11.json": _v2_file("b" * 40, date=1_700_000_100_000, value=float("nan")),
            "cccccccc-py3.11.json": _v2_file("c" * 40, date=1_700_000_200_000),
        },
    )
    rs = R.load(res, with_records=False)
    assert rs.skipped_points == 2 and all(len(s.points) == 2 for s in rs.series.values())
    proc = _cli(tmp_path, "analyze", "--results", str(res), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["input"]["skipped_points"] == 2
    assert "2 skipped" in proc.stderr


def test_time_beyond_float32_is_a_gap_with_a_status_never_inf(tmp_path):
    import base64
    import warnings

    import numpy as np

    from harness.report import fmt as F
    from harness.report import series as report_series

    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(
        res,
        "m",
        {
            "aaaaaaaa-py3.11.json": _v2_file("a" * 40, date=1_700_000_000_000),
            "bbbbbbbb-py3.11.json": _v2_file("b" * 40, date=1_700_000_100_000, value=1e308),
            "cccccccc-py3.11.json": _v2_file("c" * 40, date=1_700_000_200_000),
        },
    )
    _rs, cols = R.load_columns(res, with_records=False)
    c = next(iter(cols.values()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in cast" fails the test
        data, _summary = report_series._series_data(c, np.arange(len(c), dtype=np.int32), [], False)
    v = np.frombuffer(base64.b64decode(data["v"]), dtype="<f4")
    assert not np.isinf(v).any() and np.isnan(v[1]) and v[0] == v[2] == 1.0
    assert any(i == 1 and "float32" in why and "1e+308" in why for i, why in data["fail"]), data["fail"]
    assert F.b64(np.array([1.0]), "<f4") == base64.b64encode(np.float32(1.0).tobytes()).decode()
    proc = _cli(tmp_path, "publish", "--results", str(res), "--repo", "", "--out", str(tmp_path / "site"))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "RuntimeWarning" not in text and "overflow" not in text, text
    assert (tmp_path / "site" / "index.html").exists()


def _step_results(res: Path, machine: str, lead: str) -> None:
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    files = {}
    for i in range(12):
        commit = lead + f"{i:x}" * (40 - len(lead))
        files[f"{commit[:8]}-py3.11.json"] = _v2_file(
            commit, date=1_700_000_000_000 + i * 1000, value=1.0 if i < 6 else 2.0
        )
    _machine(res, machine, files)


def test_publish_with_the_analysis_of_another_results_folder_says_so(tmp_path):
    other = tmp_path / "other"
    _step_results(other, "m", "")
    rep = tmp_path / "other.json"
    proc = _cli(tmp_path, "analyze", "--results", str(other), "--json", str(rep))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(rep.read_text())["findings"]  # the step is found
    # same machine name, other commits: published, with one warning naming the report
    here = tmp_path / "here"
    _step_results(here, "m", "c0ffee")
    proc = _cli(
        tmp_path,
        "publish",
        "--results",
        str(here),
        "--repo",
        "",
        "--analysis",
        str(rep),
        "--out",
        str(tmp_path / "site"),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert any(str(rep) in ln and "does not match" in ln and "commit" in ln for ln in text.splitlines()), text
    # no machine in common: exit 2 naming the report and its machines
    third = tmp_path / "third"
    _step_results(third, "elsewhere", "")
    proc = _cli(
        tmp_path,
        "publish",
        "--results",
        str(third),
        "--repo",
        "",
        "--analysis",
        str(rep),
        "--out",
        str(tmp_path / "site3"),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and str(rep) in text and "'m'" not in text and "machines (m)" in text, text
    # the matching report: no such warning
    proc = _cli(
        tmp_path,
        "publish",
        "--results",
        str(other),
        "--repo",
        "",
        "--analysis",
        str(rep),
        "--out",
        str(tmp_path / "site4"),
    )
    assert proc.returncode == 0 and "does not match" not in proc.stdout + proc.stderr


def test_liger_unknown_gpu_is_named_once_with_what_it_costs(tmp_path):
    from harness.store import importers

    f = tmp_path / "liger.csv"
    rows = [
        LIGER_HEADER,
        _liger_row(1024, 0.05),
        _liger_row(2048, 0.1),
        _liger_row(1024, 0.07).replace("NVIDIA H100 NVL", "NVIDIA Imaginary X9000"),
        _liger_row(2048, 0.12).replace("NVIDIA H100 NVL", "NVIDIA Imaginary X9000"),
    ]
    f.write_text("\n".join(rows) + "\n")
    rs = importers.load_liger_csvs([f])
    msgs = [e for e in rs.errors if "unknown GPU" in e]
    assert len(msgs) == 1 and msgs[0].startswith(f"{f}:4:") and "'NVIDIA Imaginary X9000'" in msgs[0], rs.errors
    assert "gpu_specs.csv" in msgs[0] and "no MFU, no cross-GPU prediction" in msgs[0]
    assert len(rs.series) == 4 and all(len(s.points) == 1 for s in rs.series.values())  # both GPUs imported


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_unreadable_csv_in_a_liger_folder_is_reported_not_dropped(tmp_path):
    from harness.store import dataset

    folder = tmp_path / "liger"
    folder.mkdir()
    (folder / "good.csv").write_text("\n".join([LIGER_HEADER, _liger_row(1024, 0.05)]) + "\n")
    (folder / "other.csv").write_text("a,b\n1,2\n")  # not Liger's: left out, correctly
    fifo = folder / "stuck.csv"
    os.mkfifo(fifo)
    (folder / "latin1.csv").write_bytes(b"kernel_name,\xff\xfe\n")
    rs = dataset.load_input(folder)  # never blocks on the FIFO
    assert any(str(fifo) in e and "FIFO" in e for e in rs.errors), rs.errors
    assert any(str(folder / "latin1.csv") in e for e in rs.errors), rs.errors
    assert not any("other.csv" in e for e in rs.errors), rs.errors
    assert [dict(s.key.params)["H"] for s in rs.series.values()] == ["1024"]  # the good file still imports


def test_a_value_that_is_no_number_loses_only_its_own_point(tmp_path):
    """A bool among a benchmark's parameter values: that point fails, named;
    the other parameter combinations of the row are kept (a hostile-input
    trial lost 58 valid values of two sibling parameters this way)."""
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    f = _v2_file("a" * 40)
    f["results"]["suite.v.time_v"] = [[1.0, True, 2.0], [["1", "2", "3"]], "v1", 0, 1.0]
    _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    rs = R.load(res, with_records=False)
    v = {s.key.params: [p.value for p in s.points] for s in rs.series.values() if s.key.benchmark == "suite.v.time_v"}
    assert sorted(x for pts in v.values() for x in pts if x is not None) == [1.0, 2.0]
    assert sum(1 for pts in v.values() for x in pts if x is None) == 1
    assert any("suite.v.time_v" in e and "1 value(s)" in e and "bool True" in e for e in rs.errors), rs.errors


# ----------------------------------------------------------------------------- issue 29 part A: bounded reading (items 1, 5, 6)

DEEP = "[" * 5000 + "]" * 5000  # 10 KB of nesting: json recursed into RecursionError naming no file


def test_deeply_nested_json_in_any_input_names_the_file_and_the_rest_loads(tmp_path):
    from harness.core import records

    res = tmp_path / "results"
    d = _two_commit_machine(res)
    deep_results = d / "cccccccc-py3.11.json"
    deep_results.write_text(DEEP)
    rdir = d / "kernelwatch"
    rdir.mkdir()
    deep_records = rdir / ("a" * 40 + ".jsonl")
    deep_records.write_text(json.dumps(_rec("a" * 40)) + "\n" + DEEP + "\n")
    deep_cal = rdir / records.CALIBRATION_FILE
    deep_cal.write_text(DEEP + "\n")
    m2 = res / "m2"
    m2.mkdir()
    (m2 / "machine.json").write_text(DEEP)
    rs = R.load(res)
    for f in (deep_results, m2 / "machine.json", deep_cal):
        assert any(str(f) in e and "MAX_JSON_DEPTH" in e for e in rs.errors), (f, rs.errors)
    assert any(f"{deep_records}:2:" in e and "MAX_JSON_DEPTH" in e for e in rs.errors), rs.errors
    assert len(rs.series) == 2 and all(len(s.points) == 2 for s in rs.series.values())  # the rest loaded
    (res / "benchmarks.json").write_text(DEEP)
    proc = _cli(tmp_path, "analyze", "--results", str(res))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in text and "RecursionError" not in text, text
    assert str(res / "benchmarks.json") in text and "MAX_JSON_DEPTH" in text


def test_depth_check_counts_nesting_not_brackets_in_strings():
    from harness.core import files

    assert files.parse_json(json.dumps({"name": "[" * 500 + '\\"{' * 100, "v": [[[1]]]}))["v"] == [[[1]]]
    ok = "[" * files.MAX_JSON_DEPTH + "]" * files.MAX_JSON_DEPTH
    assert files.json_depth_problem(ok) is None  # negative control: at the limit parses
    assert "MAX_JSON_DEPTH" in files.json_depth_problem("[" + ok + "]")
    assert "MAX_JSON_DEPTH" in files.json_depth_problem("[" * 70)  # truncated: unpaired levels count too
    with pytest.raises(ValueError):  # truncated but shallow: json's own error, not ours
        files.parse_json('{"a": [1, 2')


def test_json_over_the_size_limit_is_refused_by_name_before_reading(tmp_path, monkeypatch):
    from harness.core import files

    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    big = d / "bbbbbbbb-py3.11.json"
    big.write_text(json.dumps(_v2_file("b" * 40)) + " " * 5000)
    monkeypatch.setattr(files, "MAX_JSON_BYTES", 4000)
    rs = R.load(res, with_records=False)
    assert any(str(big) in e and "MAX_JSON_BYTES=4,000" in e for e in rs.errors), rs.errors
    assert set(rs.commits) == {"a" * 40}
    monkeypatch.setattr(files, "MAX_JSON_BYTES", 64 * 2**20)  # negative control: under the limit it loads
    assert set(R.load(res, with_records=False).commits) == {"a" * 40, "b" * 40}


def test_record_line_over_the_line_limit_is_skipped_by_line(tmp_path, monkeypatch):
    from harness.core import files, records

    path = tmp_path / "r.jsonl"
    long = dict(_rec("a" * 40), note="x" * 5000)
    path.write_text(json.dumps(_rec("a" * 40)) + "\n" + json.dumps(long) + "\n" + json.dumps(_rec("a" * 40)) + "\n")
    monkeypatch.setattr(files, "MAX_JSONL_LINE_BYTES", 2000)
    errors: list[str] = []
    assert len(list(records.read_jsonl(path, errors))) == 2
    assert len(errors) == 1 and errors[0].startswith(f"{path}:2:") and "MAX_JSONL_LINE_BYTES" in errors[0]
    monkeypatch.setattr(files, "MAX_JSONL_BYTES", 100)
    errors = []
    assert list(records.read_jsonl(path, errors)) == [] and "MAX_JSONL_BYTES" in errors[0]


def test_liger_field_over_the_field_limit_loses_its_row_only(tmp_path):
    from harness.store import dataset

    folder = tmp_path / "liger"
    folder.mkdir()
    (folder / "good.csv").write_text("\n".join([LIGER_HEADER, _liger_row(1024, 0.05)]) + "\n")
    rows = [LIGER_HEADER, _liger_row(1024, 0.05), _liger_row(2048, 0.1), _liger_row(4096, 0.2)]
    rows[2] = rows[2].replace("hidden size", "h" * 200_000)  # one field of 200 KB
    (folder / "big.csv").write_text("\n".join(rows) + "\n")
    rs = dataset.load_input(folder)
    assert any(f"{folder / 'big.csv'}:3:" in e and "MAX_CSV_FIELD_CHARS" in e for e in rs.errors), rs.errors
    h = sorted(dict(s.key.params)["H"] for s in rs.series.values())
    assert h == ["1024", "4096"], h  # rows before and after the long one kept, the other file too


def test_liger_csv_rows_past_the_row_limit_are_skipped_by_name_others_kept(tmp_path, monkeypatch):
    # issue 29, S5: a huge Liger CSV had no row cap (only a byte cap): rows past
    # MAX_CSV_ROWS are skipped with one line naming the file, the first rows and the
    # other files kept. The limit is lowered here so the test needs no huge file.
    from harness.core import files
    from harness.store import dataset

    monkeypatch.setattr(files, "MAX_CSV_ROWS", 3)
    folder = tmp_path / "liger"
    folder.mkdir()
    (folder / "good.csv").write_text("\n".join([LIGER_HEADER, _liger_row(8, 0.05)]) + "\n")
    rows = [LIGER_HEADER] + [_liger_row(x, 0.05) for x in (1024, 2048, 4096, 16384, 32768)]
    (folder / "big.csv").write_text("\n".join(rows) + "\n")
    rs = dataset.load_input(folder)
    msgs = [e for e in rs.errors if "MAX_CSV_ROWS" in e]
    assert len(msgs) == 1 and msgs[0].startswith(f"{folder / 'big.csv'}:5:"), rs.errors
    h = sorted(int(dict(s.key.params)["H"]) for s in rs.series.values())
    assert h == [8, 1024, 2048, 4096], h


def test_liger_config_nested_too_deep_is_a_row_error(tmp_path):
    from harness.store import importers

    f = tmp_path / "liger.csv"
    deep = '"' + "[" * 3000 + "]" * 3000 + '"'
    row = _liger_row(2048, 0.1)
    row = row.replace('"{""M"": 2048, ""dtype"": ""torch.bfloat16"", ""eps"": 1e-06}"', deep)
    f.write_text("\n".join([LIGER_HEADER, _liger_row(1024, 0.05), row]) + "\n")
    rs = importers.load_liger_csvs([f])
    assert any(f"{f}:3:" in e and "MAX_JSON_DEPTH" in e for e in rs.errors), rs.errors
    assert len(rs.series) == 1


def test_null_result_with_a_huge_declared_grid_is_refused_by_the_grid_limit(tmp_path):
    res = tmp_path / "results"
    huge = [[str(i) for i in range(10)]] * 9  # 10^9 combinations in under 900 bytes
    _benchmarks(
        res,
        {
            "suite.x.time_x": _meta("suite.x.time_x"),
            "suite.g.time_g": _meta("suite.g.time_g", params=huge, param_names=[f"p{i}" for i in range(9)]),
        },
    )
    f = _v2_file("a" * 40)
    f["results"]["suite.g.time_g"] = [None, huge, "v1", 0, 1.0]
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    t0 = time.perf_counter()
    rs = R.load(res, with_records=False)
    assert time.perf_counter() - t0 < 30  # refused by counting; expanding it ran out of memory
    grid = [e for e in rs.errors if "MAX_GRID_POINTS" in e]
    assert any(str(d / "aaaaaaaa-py3.11.json") in e and "suite.g.time_g" in e for e in grid), rs.errors
    assert any(str(res / "benchmarks.json") in e and "suite.g.time_g" in e for e in grid), rs.errors
    assert {s.key.benchmark for s in rs.series.values()} == {"suite.x.time_x"}
    # negative control: a grid at the limit's scale but within it is kept
    f["results"]["suite.g.time_g"] = [None, [["1", "2", "3"]] * 2, "v1", 0, 1.0]
    _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    assert len([s for s in R.load(res, with_records=False).series.values() if s.key.benchmark == "suite.g.time_g"]) == 9


@pytest.mark.parametrize("bad", ["1e999", "abcd", "abcdef"])
def test_a_commit_hash_shorter_than_git_abbreviates_skips_its_file(tmp_path, bad):
    # h29t S7: "1e999" and a 4-hex prefix were accepted as commits nobody can find
    res = tmp_path / "results"
    d = _two_commit_machine(res, dict(_v2_file("b" * 40), commit_hash=bad))
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if str(d / "bbbbbbbb-py3.11.json") in e and "'commit_hash'" in e]
    assert len(msgs) == 1 and "7 to 64" in msgs[0] and "file skipped" in msgs[0], rs.errors
    assert set(rs.commits) == {"a" * 40} and all(len(s.points) == 1 for s in rs.series.values())


def test_a_date_that_is_no_number_loses_only_the_date(tmp_path):
    res = tmp_path / "results"
    d = _two_commit_machine(res, dict(_v2_file("b" * 40), date="yesterday"))
    rs = R.load(res, with_records=False)
    assert any(str(d / "bbbbbbbb-py3.11.json") in e and "'date'" in e and "yesterday" in e for e in rs.errors)
    assert set(rs.commits) == {"a" * 40, "b" * 40}
    assert all(len(s.points) == 2 for s in rs.series.values())


@pytest.mark.parametrize("bad", [-1, 1e308, float("nan"), float("inf"), 5_000_000_000_000, 0, 3.5, 10**400])
def test_an_impossible_date_loses_only_the_date(tmp_path, bad):
    # issue 29, S7: ``date: -1``, ``1e308``, NaN were taken as commit dates (a date
    # outside 1970..2100 is impossible): now a warning names the file, only the date is lost.
    # h29t S7: 0 and 3.5 ms passed; a commit date before 1990 is a placeholder too.
    res = tmp_path / "results"
    d = _two_commit_machine(res, dict(_v2_file("b" * 40), date=bad))
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if str(d / "bbbbbbbb-py3.11.json") in e and "'date'" in e]
    assert len(msgs) == 1 and "1990..2100" in msgs[0], rs.errors
    assert set(rs.commits) == {"a" * 40, "b" * 40}
    assert rs.commits["b" * 40].date_ms is None and rs.commits["a" * 40].date_ms == 1_700_000_000_000
    assert all(len(s.points) == 2 for s in rs.series.values())


@pytest.mark.parametrize("bad", [-1, 1e308, float("nan")])
def test_an_impossible_started_at_loses_only_its_row(tmp_path, bad):
    # issue 29, S7, per row: a row whose ``started_at`` is no possible date is skipped
    # by name (file and benchmark); the file's other rows are kept.
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x"), "suite.x.time_y": _meta("suite.x.time_y")})
    f = _v2_file("a" * 40)
    f["results"]["suite.x.time_y"] = [[1.0, 1.0], [["1", "2"]], "v1", bad, 1.0]
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if str(d / "aaaaaaaa-py3.11.json") in e and "started_at" in e]
    assert len(msgs) == 1 and "time_y" in msgs[0] and "1970..2100" in msgs[0], rs.errors
    assert {s.key.benchmark for s in rs.series.values()} == {"suite.x.time_x"}


def test_a_folder_over_the_folder_wide_grid_total_skips_the_later_files_by_name(tmp_path, monkeypatch):
    # issue 29: the per-file grid limit alone let a folder of many files, each just
    # under it, exhaust memory; MAX_FOLDER_GRID_POINTS bounds the folder (lowered here
    # to 5: each file declares 2 combinations, so the third file and the next machine's are skipped).
    from harness.core import files

    monkeypatch.setattr(files, "MAX_FOLDER_GRID_POINTS", 5)
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    d = _machine(res, "m", {f"{c * 8}-py3.11.json": _v2_file(c * 40) for c in "abc"})
    d2 = _machine(res, "n", {"dddddddd-py3.11.json": _v2_file("d" * 40)})
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if "MAX_FOLDER_GRID_POINTS" in e]
    assert [m.split(": ", 1)[0] for m in msgs] == [str(d / "cccccccc-py3.11.json"), str(d2 / "dddddddd-py3.11.json")]
    assert sorted(len(s.points) for s in rs.series.values()) == [2, 2], rs.errors
    monkeypatch.setattr(files, "MAX_FOLDER_GRID_POINTS", 8)  # negative control: all fit
    assert sorted(len(s.points) for s in R.load(res, with_records=False).series.values()) == [1, 1, 3, 3]


def test_run_reads_its_own_results_folder_with_the_bounded_reader(tmp_path, monkeypatch):
    """``kernelwatch run``'s own reads (commits already measured, quarantine of
    unusable files): a link to /dev/zero and a FIFO are refused at once, a file
    over the size limit is quarantined by name, never read whole."""
    from harness.core import files

    res = tmp_path / "results"
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    (d / "bbbbbbbb-py3.11.json").symlink_to("/dev/zero")
    big = d / "cccccccc-py3.11.json"
    big.write_text(json.dumps(_v2_file("c" * 40)) + " " * 5000)
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "dddddddd-py3.11.json")
    monkeypatch.setattr(files, "MAX_JSON_BYTES", 4000)
    assert runner.measured_commits(res, "m") == {"a" * 40}
    msgs = runner.quarantine_bad_results(res, "m", log=lambda m: None)
    assert any(str(big) in m and "MAX_JSON_BYTES" in m for m in msgs), msgs
    assert any("bbbbbbbb" in m and "character device" in m for m in msgs), msgs
    assert sorted(p.name for p in d.glob("*.json")) == ["aaaaaaaa-py3.11.json", "machine.json"]


# ----------------------------------------------------------------------------- issue 29 part A: data is never markup (item 8)


def test_markup_in_names_and_paths_is_printed_as_text(tmp_path):
    bench = "suite.x.time_[link=https://evil.example]y[/link][/b]"
    res = tmp_path / "r[" / "b][link=mailto:a]x[" / "link]"  # the path holds "r[/b][link=mailto:a]x[/link]"
    _benchmarks(res, {bench: _meta(bench)})
    files = {
        f"{i:08x}-py3.11.json": _v2_file(f"{i:040x}", date=1_700_000_000_000 + i * 10**6, value=v, bench=bench)
        for i, v in enumerate([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01] + [2.0, 2.02, 1.98, 2.0, 2.01, 1.99, 2.0])
    }
    _machine(res, "m", files, machine_json={"machine": "[/b]gpu[link=https://x.example]m[/link]", "version": 1})
    (res / "m2").mkdir()  # no machine.json: its path is named in a warning
    proc = _cli(tmp_path, "analyze", "--results", str(res), "--rows", "50")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "MarkupError" not in text and "Traceback" not in text, text
    assert f"{res / 'm2'}: no machine.json" in text  # a path, as written
    assert "time_[link=https://evil.example]y[/link][/b]" in text.replace("\n", "")  # a benchmark name
    assert "[/b]gpu[link=https://x.example]m[/link]" in text.replace("\n", "")  # a machine name


def test_markup_in_a_finding_table_cell_is_text():
    """Negative control at the unit level: a recording console shows the cells as written."""
    from rich.console import Console

    from harness.cli.analyze import print_report

    out = {
        "version": 1,
        "summary": {"series": 1, "machines": ["m"], "points": 2, "failed_points": 0, "series_all_failed": 0},
        "false_alarm_budget": {
            "expected_false_alerts": 0.0,
            "fdr_q": 0.05,
            "bh_threshold_p": 0.0,
            "hypotheses": 1,
            "expected_false_alerts_without_fdr": 0.0,
        },
        "findings": [
            {
                "status": "regression",
                "series": "m/[link=https://e.example]b[/link][/i]",
                "commit_range": ["a" * 40, "b" * 40],
                "magnitude": {"ratio": 2.0, "ci": [1.9, 2.1], "change": 1.0},
                "reason": "[bold]why[/bold]",
            }
        ],
    }
    con = Console(record=True, width=300)
    print_report(out, con)
    shown = con.export_text()
    assert "m/[link=https://e.example]b[/link][/i]" in shown and "[bold]why[/bold]" in shown, shown


# ----------------------------------------------------------------------------- issue 29 part A: environment variables (item 9)


@pytest.mark.parametrize("value", ["0", "false", "No", " off ", ""])
def test_debug_flag_off_values_mean_off(value):
    from harness.core import env

    assert env.flag("KERNELWATCH_DEBUG", {"KERNELWATCH_DEBUG": value}) is False


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_debug_flag_on_values_mean_on(value):
    from harness.core import env

    assert env.flag("KERNELWATCH_DEBUG", {"KERNELWATCH_DEBUG": value}) is True


def test_debug_flag_other_value_names_the_accepted_values():
    from harness.core import env

    with pytest.raises(env.EnvError, match=r"KERNELWATCH_DEBUG='maybe'.*1/true/yes/on.*0/false/no/off"):
        env.flag("KERNELWATCH_DEBUG", {"KERNELWATCH_DEBUG": "maybe"})


@pytest.mark.parametrize("debug, traceback_shown", [("0", False), ("false", False), ("1", True)])
def test_a_crash_exits_2_with_or_without_debug(monkeypatch, capsys, debug, traceback_shown):
    import harness.cli as cli

    def crash(**kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_list", crash)
    monkeypatch.setenv("KERNELWATCH_DEBUG", debug)
    assert cli.main(["list"]) == cli.EXIT_BROKEN  # 1 would read as "regression found"
    err = capsys.readouterr().err
    assert "list failed: RuntimeError: boom" in err
    assert ("Traceback" in err) is traceback_shown, err


def test_a_bad_debug_value_is_exit_2_before_running(monkeypatch, capsys):
    import harness.cli as cli

    ran = []
    monkeypatch.setattr(cli, "cmd_list", lambda **kw: ran.append(1) or 0)
    monkeypatch.setenv("KERNELWATCH_DEBUG", "maybe")
    assert cli.main(["list"]) == cli.EXIT_BROKEN and not ran
    assert "KERNELWATCH_DEBUG='maybe'" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e9", "soon"])
def test_lock_wait_outside_its_range_is_refused_with_the_range(monkeypatch, value):
    from harness.core import workspace

    monkeypatch.setenv("KERNELWATCH_LOCK_WAIT_S", value)
    with pytest.raises(workspace.WorkspaceError, match=r"KERNELWATCH_LOCK_WAIT_S=.*from 0 to 86400 seconds"):
        workspace.lock_wait_default()


def test_lock_wait_in_range_is_used(monkeypatch):
    from harness.core import workspace

    monkeypatch.setenv("KERNELWATCH_LOCK_WAIT_S", "2.5")
    assert workspace.lock_wait_default() == 2.5
    monkeypatch.setenv("KERNELWATCH_LOCK_WAIT_S", "0")
    assert workspace.lock_wait_default() == 0.0
    monkeypatch.delenv("KERNELWATCH_LOCK_WAIT_S")
    assert workspace.lock_wait_default() == workspace.DEFAULT_LOCK_WAIT_S


@pytest.mark.parametrize("value", ["999999", "0", "-2", "1.5"])
def test_cpu_threads_outside_its_range_is_refused_with_the_range(monkeypatch, value):
    from harness.core import devices

    monkeypatch.setenv(devices.CPU_THREADS_ENV, value)
    with pytest.raises(ValueError, match=r"KERNELWATCH_CPU_THREADS=.*from 1 to 1024 or 'torch'"):
        devices.cpu_timing_threads()


def test_cpu_threads_in_range_is_used(monkeypatch):
    from harness.core import devices

    monkeypatch.setenv(devices.CPU_THREADS_ENV, "1024")
    assert devices.cpu_timing_threads() == 1024
    monkeypatch.setenv(devices.CPU_THREADS_ENV, "torch")
    assert devices.cpu_timing_threads() is None


@pytest.mark.parametrize("value", ["-x", ".hidden", "a/b", "a b", "x" * 64, "[b]gpu"])
def test_host_that_is_no_host_name_is_refused_before_any_machine_name(monkeypatch, value):
    from harness.core import devices

    devices.identify.cache_clear()
    monkeypatch.setenv("KERNELWATCH_HOST", value)
    try:
        with pytest.raises(ValueError, match=r"KERNELWATCH_HOST=.*starting with a letter or digit"):
            devices.identify("cpu")
    finally:
        devices.identify.cache_clear()


def test_host_that_is_a_host_name_names_the_machine(monkeypatch):
    from harness.core import devices

    devices.identify.cache_clear()
    monkeypatch.setenv("KERNELWATCH_HOST", "ci-pool_1.a")
    try:
        assert devices.identify("cpu").machine_name() == "ci-pool_1.a-cpu"
    finally:
        devices.identify.cache_clear()


# ----------------------------------------------------------------------------- issue 29 part A: arguments and output paths (item 10)


def test_calibrate_out_that_cannot_be_written_fails_before_measuring(tmp_path, monkeypatch, capsys):
    import harness.cli as cli
    from harness.measure import calibrate

    measured = []
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: measured.append(1) or {})
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0\n")
    rc = cli.main(["calibrate", "--results", str(tmp_path / "res"), "--out", str(passwd / "x")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_BROKEN and not measured, err
    assert str(passwd / "x") in err and "not a folder" in err
    rc = cli.main(["calibrate", "--results", str(passwd / "res"), "--out", str(tmp_path / "c.json")])
    assert rc == cli.EXIT_BROKEN and not measured  # the results folder is checked too


def test_output_file_check_allows_what_can_be_written(tmp_path):
    from harness.core import files

    assert files.check_output_file(tmp_path / "a.json") == tmp_path / "a.json"
    assert files.check_output_file(tmp_path / "new" / "deeper" / "a.json", make_folders=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        files.check_output_file(tmp_path / "new" / "a.json")
    with pytest.raises(IsADirectoryError):
        files.check_output_file(tmp_path)
    assert not (tmp_path / "new").exists()  # checking creates nothing
    files.write_text_atomic(tmp_path / "new" / "deeper" / "a.json", "{}")  # writing may create folders
    assert (tmp_path / "new" / "deeper" / "a.json").read_text() == "{}"


def test_analyze_json_output_may_create_its_folders_results_input_must_exist(tmp_path):
    # One rule for the CLI (issue 29, S3): an output may create its folders, as
    # ``calibrate --out`` and ``--results`` do; an input must exist, and the error names it.
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    target = tmp_path / "new" / "dir" / "x.json"
    proc = _cli(tmp_path, "analyze", "--results", str(res), "--json", str(target))
    assert proc.returncode == 0 and target.is_file(), proc.stdout + proc.stderr
    blocked = tmp_path / "x.json" / "sub" / "y.json"  # a folder that can never be made: refused before the analysis
    (tmp_path / "x.json").write_text("{}")
    proc = _cli(tmp_path, "analyze", "--results", str(res), "--json", str(blocked))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and str(blocked) in text and "is a file, not a folder" in text, text
    missing = tmp_path / "no-such-results"
    proc = _cli(tmp_path, "analyze", "--results", str(missing))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and str(missing) in text and "does not exist" in text, text
    assert not missing.exists()  # an input is never created


def _analyze_here(res, **kw):
    from rich.console import Console

    from harness.cli.analyze import run_analyze

    con = Console(record=True, width=1000)
    rc = run_analyze(res, console=con, **kw)
    return rc, con.export_text()


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder", "missing"])
@pytest.mark.parametrize("option", ["liger_csvs", "compare_asv"])
def test_analyze_refuses_an_input_file_that_is_not_a_regular_file(tmp_path, kind, option):
    # issue 29, S4: ``--compare-asv /dev/zero`` and ``--liger /dev/zero`` (a FIFO, a
    # folder) exited 0; each is refused with the path named and exit 2, before any analysis.
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    if kind == "dev-zero":
        bad = Path("/dev/zero")
    elif kind == "fifo":
        bad = tmp_path / "r.csv"
        os.mkfifo(bad)
    elif kind == "folder":
        bad = tmp_path / "d.csv"
        bad.mkdir()
    else:
        bad = tmp_path / "none.csv"
    value = [bad] if option == "liger_csvs" else bad
    rc, text = _analyze_here(res, **{option: value})
    flag = "--liger" if option == "liger_csvs" else "--compare-asv"
    assert rc == 2 and f"{flag} {bad}" in text, text
    assert ("does not exist" if kind == "missing" else "not a regular file") in text, text
    rc, _ = _analyze_here(res)  # negative control: the same results without the bad input
    assert rc == 0


def test_analyze_compare_asv_that_is_not_asv_json_is_bad_input(tmp_path):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    bad = tmp_path / "regressions.json"
    bad.write_text("[1, 2")
    rc, text = _analyze_here(res, compare_asv=bad)
    assert rc == 2 and f"--compare-asv {bad}" in text and "regressions.json" in text, text
    bad.write_text(json.dumps({"regressions": []}))
    assert _analyze_here(res, compare_asv=bad)[0] == 0


@pytest.mark.parametrize(
    "argv, option",
    [
        (["publish", "--jobs", "-3"], "--jobs"),
        (["publish", "--jobs", "0"], "--jobs"),
        (["analyze", "--results", "r", "--rows", "-5"], "--rows"),
        (["check", "--base", "a", "--head", "b", "--rounds", "0"], "--rounds"),
        (["triage", "--base", "a", "--head", "b", "--warmup", "-1"], "--warmup"),
    ],
)
def test_negative_counts_are_usage_errors(argv, option, capsys):
    import harness.cli as cli

    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}" in err and "must be" in err, err


def test_counts_in_range_are_accepted():
    import harness.cli as cli

    p = cli.build_parser()
    assert p.parse_args(["publish", "--jobs", "3"]).jobs == 3
    assert p.parse_args(["analyze", "--results", "r", "--rows", "0"]).rows == 0


def test_tag_only_side_commit_is_parked_never_latest(tiny_repo, tmp_path):
    """A commit reachable only from a tag (a side branch deleted after tagging)
    is not in HEAD's history: parked like a foreign commit, never the newest."""
    main = git(tiny_repo, "rev-list", "--reverse", "HEAD").split()
    git(tiny_repo, "checkout", "-q", "-b", "side", main[0])
    (tiny_repo / "g.txt").write_text("side")
    git(tiny_repo, "add", "-A")
    git(tiny_repo, "commit", "-q", "-m", "side")
    side = git(tiny_repo, "rev-parse", "HEAD").strip()
    git(tiny_repo, "tag", "v-side")
    git(tiny_repo, "checkout", "-q", "main")
    git(tiny_repo, "branch", "-q", "-D", "side")
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    d = _machine(
        res,
        "m",
        {
            f"{main[0][:8]}-py3.11.json": _v2_file(main[0], date=1_600_000_000_000),
            f"{main[1][:8]}-py3.11.json": _v2_file(main[1], date=1_600_000_100_000),
            f"{side[:8]}-py3.11.json": _v2_file(side, date=1_900_000_000_000, value=5.0),
        },
    )
    rs = R.load(res, repo=tiny_repo, with_records=False)
    msg = next(e for e in rs.errors if side[:12] in e)
    assert str(d / f"{side[:8]}-py3.11.json") in msg and "tag or branch" in msg and "parked" in msg, msg
    assert rs.commit_order()[-1] == main[1] and rs.commits[side].parked
    assert all(s.points[-1].commit == main[1] for s in rs.series.values())


def test_stored_profile_nested_or_inflating_too_far_is_named_and_skipped(tmp_path, monkeypatch):
    import gzip

    from harness.core import files, records
    from harness.report import profiles

    base = tmp_path / "results" / records.PROFILES_SUBDIR
    deep, bomb, good = base / "a-deep", base / "b-bomb", base / "c-good"
    for d in (deep, bomb, good):
        d.mkdir(parents=True)
    with gzip.open(deep / "profile.json.gz", "wt") as fh:
        fh.write(DEEP)
    with gzip.open(bomb / "profile.json.gz", "wt") as fh:
        fh.write(json.dumps({"cases": [], "pad": " " * 100_000}))  # 100 KB from a few hundred bytes
    with gzip.open(good / "profile.json.gz", "wt") as fh:
        fh.write(json.dumps({"cases": []}))
    monkeypatch.setattr(files, "MAX_JSON_BYTES", 50_000)
    entries, errors = profiles.load(tmp_path / "results")
    assert [e["name"] for e in entries] == ["c-good"], errors
    assert any(str(deep / "profile.json.gz") in e and "MAX_JSON_DEPTH" in e for e in errors), errors
    assert any(str(bomb / "profile.json.gz") in e and "uncompressed" in e for e in errors), errors


def test_lock_file_nested_too_deep_reads_as_no_holder(tmp_path):
    from harness.core import workspace

    lock = tmp_path / "lock"
    lock.write_text(DEEP)
    assert workspace._lock_holder(lock) == "another process (no holder recorded)"  # was RecursionError
    lock.write_text(json.dumps({"pid": 7, "host": "h", "command": "run", "since": "t"}))
    assert workspace._lock_holder(lock).startswith("pid 7 on h")


def test_publish_refuses_a_deeply_nested_analysis_report(tmp_path):
    """``publish --analysis`` reads the saved report through the bounded reader:
    a 10 KB report of nested brackets is a PublishError naming the file, not a
    RecursionError (issue 29 item 1). Control: a well-formed report loads."""
    from harness.report import site

    bad = tmp_path / "deep.json"
    bad.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(site.PublishError, match="deep.json: cannot read the analysis report"):
        site.load_analysis(bad)
    good = tmp_path / "ok.json"
    good.write_text('{"schema": "kernelwatch-analysis", "findings": []}')
    assert site.load_analysis(good)["findings"] == []


# ----------------------------------------------------------------------------- issue 29 part F: hostile trial fixes (F1, F5, F7, F9)


def test_declared_grids_are_bounded_per_file_not_only_per_row(tmp_path, monkeypatch):
    from harness.core import files

    # the real limits: a file may hold one row at the per-row limit, never 10 of them
    assert files.MAX_GRID_POINTS <= files.MAX_FILE_GRID_POINTS < 10 * files.MAX_GRID_POINTS
    monkeypatch.setattr(files, "MAX_FILE_GRID_POINTS", 100)  # small, so the test loads few series
    grid = [[str(i) for i in range(8)]] * 2  # 64 points: within the per-row limit
    names = [f"suite.g{b}.time_g" for b in range(3)]
    entries = {"suite.x.time_x": _meta("suite.x.time_x")}
    entries.update({n: _meta(n, params=grid, param_names=["a", "b"]) for n in names})
    res = tmp_path / "results"
    _benchmarks(res, entries)
    f = _v2_file("a" * 40)  # its own row declares 2 points
    for n in names:
        f["results"][n] = [None, grid, "v1", 0, 1.0]
    d = _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    _machine(res, "n", {"bbbbbbbb-py3.11.json": _v2_file("b" * 40)})
    rs = R.load(res, with_records=False)
    over = [e for e in rs.errors if "MAX_FILE_GRID_POINTS=100" in e]
    assert any(str(d / "aaaaaaaa-py3.11.json") in e and names[1] in e for e in over), rs.errors
    assert any(str(res / "benchmarks.json") in e and names[1] in e for e in over), rs.errors
    kept = {(s.key.machine, s.key.benchmark) for s in rs.series.values()}
    # the rows within the total and the rest of the folder are processed
    assert ("m", "suite.x.time_x") in kept and ("m", names[0]) in kept and ("n", "suite.x.time_x") in kept
    assert ("m", names[1]) not in kept and ("m", names[2]) not in kept
    # negative control: the same file within a larger total loses nothing
    monkeypatch.setattr(files, "MAX_FILE_GRID_POINTS", 1000)
    rs = R.load(res, with_records=False)
    assert not [e for e in rs.errors if "GRID_POINTS" in e], rs.errors
    assert {n for (_, n) in ((s.key.machine, s.key.benchmark) for s in rs.series.values())} >= set(names)


def test_one_absurd_value_loses_its_point_not_the_series_regression():
    import math

    import numpy as np
    from test_analysis import mk, noisy

    import harness.analysis as A

    vals = list(noisy(np.r_[np.ones(15), 2 * np.ones(15)], 0.01, 3) * 1e-3)  # a real 2x regression
    vals[5] = 1e-300  # one results file's value
    r = A.analyze([mk(vals, name="x")])
    assert A.Status.REGRESSION in [f.status for f in r.findings], [(f.status, f.reason) for f in r.findings]
    s = A.run._within_float_range(mk(vals, name="x"))
    bad = [p for p in s.points if p.value is None]
    assert len(bad) == 1 and bad[0].commit == f"{5:040x}" and "1e-300" in bad[0].reason and "median" in bad[0].reason
    assert all(math.isfinite(f.change) for f in r.findings if f.change is not None)
    # negative control: with two equal halves 1e-300 and 1e300 nothing is kept, nothing overflows
    r2 = A.analyze([mk([1e-300] * 15 + [1e300] * 15, name="y")])
    assert [f.status for f in r2.findings] == [A.Status.FAILING]


def test_a_liger_csv_with_a_utf8_byte_order_mark_is_read(tmp_path):
    from harness.store import importers

    text = "\n".join([LIGER_HEADER, _liger_row(1024, 0.05), _liger_row(2048, 0.06)]) + "\n"
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # Excel's "CSV UTF-8"
    assert importers.find_liger_csvs(tmp_path) == [f]
    rs = importers.load_liger_csvs([f])
    assert not rs.errors, rs.errors
    assert sorted(dict(s.key.params)["H"] for s in rs.series.values()) == ["1024", "2048"]
    # negative control: a BOM is dropped only at the start; one inside the header still fails by name
    g = tmp_path / "mid.csv"
    g.write_bytes(text.replace("kernel_provider", "\ufeffkernel_provider", 1).encode("utf-8"))
    rs = importers.load_liger_csvs([g])
    assert any(str(g) in e and "kernel_provider" in e for e in rs.errors) and not rs.series, rs.errors


def test_publish_refuses_an_out_that_overlaps_the_results_folder(tmp_path, capsys, monkeypatch):
    import harness.cli as cli
    from harness.report import site

    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    (tmp_path / "link").symlink_to(res)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    built = []
    real_build = site._build
    monkeypatch.setattr(site, "_build", lambda *a, **k: built.append(1) or real_build(*a, **k))
    outs = [res, res / "m", res / "new" / "site", tmp_path, tmp_path / "link", tmp_path / "link" / "m"]
    for out in outs:
        rc = cli.main(["publish", "--results", str(res), "--repo", "", "--analysis", "off", "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == cli.EXIT_BROKEN and str(out) in err and str(res) in err, (out, rc, err)
    assert not built  # refused before any work
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
    # negative control: a folder beside the results is published
    out = tmp_path / "site"
    rc = cli.main(["publish", "--results", str(res), "--repo", "", "--analysis", "off", "--out", str(out)])
    assert rc == cli.EXIT_OK and built and (out / "index.html").is_file(), capsys.readouterr().err


# ----------------------------------------------------------------------------- issue 29 round 3: F2, F4, S1/S2


def _cli_file_limit(tmp_path, limit: int, *args) -> subprocess.CompletedProcess:
    """The CLI with writes past ``limit`` bytes failing (``RLIMIT_FSIZE``, EFBIG):
    an injected write failure that stands for a full disk, for any way of writing."""
    import resource
    import signal

    def limit_writes():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="1000")
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        preexec_fn=limit_writes,
    )


def test_analyze_json_failing_mid_write_keeps_the_previous_report(tmp_path):
    """F2: a write that fails part-way (full disk) leaves the previous report whole
    (was: truncated to invalid JSON) or no file (was: a 0-byte file), and the error
    names the path, exit 2. Control: without the limit the report is replaced."""
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    report = tmp_path / "R.json"
    previous = json.dumps({"previous": "x" * 10}) + "\n"
    report.write_text(previous)
    proc = _cli_file_limit(tmp_path, 1000, "analyze", "--results", str(res), "--json", str(report))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and str(report) in text and "cannot write" in text, text
    assert report.read_text() == previous
    fresh = tmp_path / "new.json"
    proc = _cli_file_limit(tmp_path, 1000, "analyze", "--results", str(res), "--json", str(fresh))
    assert proc.returncode == 2 and not fresh.exists(), proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.json", "results"]  # no temporary file left
    ok = _cli(tmp_path, "analyze", "--results", str(res), "--json", str(report))
    assert ok.returncode == 0 and json.loads(report.read_text())["input"]["files_loaded"] == 1, ok.stderr


def test_atomic_write_failure_names_the_path_and_keeps_the_file(tmp_path, monkeypatch):
    """The shared helper: an injected failure at the flush keeps the old bytes."""
    import errno

    from harness.core import files

    target = tmp_path / "out.md"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError, match="No space left") as e:
        files.write_text_atomic(target, "new" * 1000)
    assert e.value.filename == str(target) and target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]
    monkeypatch.undo()
    files.write_text_atomic(target, "new")
    assert target.read_text() == "new" and oct(target.stat().st_mode & 0o777) != "0o600"


_EVIL_BENCH = "suite.x.time_\x1b[31mred\x1b]8;;http://e\x07\x00"
_EVIL_MACHINE = "m\x1b[2J"


def test_analyze_shows_control_characters_in_names_as_escapes(tmp_path):
    """F4: an ESC sequence, BEL or NUL in a benchmark or machine name reached the
    terminal raw (colour, clear screen, OSC 8 hyperlink). Now each is shown as
    ``\\x1b``-style text, and the names are still there to read."""
    res = tmp_path / "results"
    _benchmarks(res, {_EVIL_BENCH: _meta(_EVIL_BENCH)})
    files = {
        f"{i:08x}-py3.11.json": _v2_file(
            f"{i:040x}", date=1_700_000_000_000 + i * 100_000, value=1.0 if i < 8 else 2.0, bench=_EVIL_BENCH
        )
        for i in range(1, 17)
    }
    _machine(res, _EVIL_MACHINE, files)
    proc = _cli(tmp_path, "analyze", "--results", str(res))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    raw = [c for c in text if c not in "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F)]
    assert raw == [], raw
    assert "time_\\x1b[31mred\\x1b]8;;http://e\\x07\\x00" in text and "m\\x1b[2J" in text, text


def test_printable_escapes_c0_c1_and_del_only():
    from harness.core.model import printable

    assert printable("a\x1b[2Jb\x7f\x9b\x00") == "a\\x1b[2Jb\\x7f\\x9b\\x00"
    assert printable("x\ny\tz") == "x\\x0ay\\x09z"
    assert printable("x\ny\tz\x07", keep_layout=True) == "x\ny\tz\\x07"
    assert printable("naïve [b] é 中") == "naïve [b] é 中"  # control: printable text is untouched


def test_check_progress_lines_show_control_characters_as_escapes():
    lines = []
    pp = progress.PhaseProgress(log=lines.append, tty=False)
    pp.start(f"measure {_EVIL_MACHINE}")
    pp.end(f"case {_EVIL_BENCH}")
    assert lines and "\x1b" not in "".join(lines) and "\\x1b[31m" in lines[-1], lines


def test_check_default_log_shows_control_characters_as_escapes(capsys):
    check._log_default(f"measure on {_EVIL_MACHINE}\nnext line")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "m\\x1b[2J\nnext line" in err, repr(err)


def test_publish_copy_errors_on_a_full_disk_are_one_line(tmp_path, monkeypatch, capsys):
    """S1: copytree onto a full disk raises ``shutil.Error`` with one tuple per file;
    the message was a 2.8 KB dump of them. Now: the staging folder, the first error
    and a count, on one line; the previous site is left as it was."""
    import errno
    import shutil

    from test_site_data import sha, write_results

    from harness import cli
    from harness.report import site

    bench = {"suite.vector_add.track_time": {"param_names": ["shape"], "params": [["'1024'"]]}}
    res = write_results(tmp_path / "res", {"m1": {"cpu": "x"}}, [sha(i) for i in range(3)], bench, lambda *a: 1e-4)
    out = tmp_path / "site"
    site.publish(res, out, analysis="off", jobs=1)
    before = (out / "index.html").read_bytes()

    def full(src, dst, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)

    real = shutil.copytree

    def copytree(src, dst, *args, **kw):  # its recursion passes copy_function on positionally
        return real(src, dst, *args, **kw) if args else real(src, dst, **{**kw, "copy_function": full})

    monkeypatch.setattr(shutil, "copytree", copytree)
    code = cli.main(["publish", "--results", str(res), "--out", str(out), "--repo", "", "--analysis", "off"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and len(err) < 600, err
    assert f"{tmp_path}/.site" in err and "first error:" in err and "No space left on device" in err, err
    assert "more file(s) failed" in err and "left as it was" in err, err
    assert (out / "index.html").read_bytes() == before


def test_unreadable_asv_config_leaves_the_default_suite_paths(tmp_path):
    """An ``asv.conf.json`` that is not JSON does not stop the analysis: the
    suite is taken to be asv's default ``benchmarks`` folder; a readable one's
    ``benchmark_dir`` is used (mutation: ``except Exception`` narrowed)."""
    from harness.store.suite import suite_paths

    (tmp_path / "asv.conf.json").write_text('{"benchmark_dir": "perf/",')  # cut short
    assert suite_paths(tmp_path / "results", tmp_path / "repo") == ["benchmarks", "asv.conf.json"]
    (tmp_path / "asv.conf.json").write_text('{"benchmark_dir": "perf/"}')  # control
    assert suite_paths(tmp_path / "results", tmp_path / "repo") == ["perf", "asv.conf.json"]


def test_files_over_the_folder_wide_total_past_the_first_three_are_one_line(tmp_path, monkeypatch):
    # At 10,000 commits x 4 machines the folder limit skipped 36,000 files, one
    # warning line each: the first MAX_OVER_NAMED are named, the rest counted in one line.
    from harness.core import files

    monkeypatch.setattr(files, "MAX_FOLDER_GRID_POINTS", 3)  # one file of 2 combinations fits
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    d = _machine(res, "m", {f"{c * 8}-py3.11.json": _v2_file(c * 40) for c in "abcdef"})
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if "MAX_FOLDER_GRID_POINTS" in e]
    assert [m.split(": ", 1)[0] for m in msgs[:3]] == [str(d / f"{c * 8}-py3.11.json") for c in "bcd"], msgs
    assert len(msgs) == 4, msgs
    assert "2 more results files (4 parameter combinations" in msgs[3] and str(d / "ffffffff-py3.11.json") in msgs[3]
    assert sorted(len(s.points) for s in rs.series.values()) == [1, 1]
    # A machine redone in memory (a commit in two files) names the same first three, once.
    (d / "copy.json").write_text((d / "aaaaaaaa-py3.11.json").read_text())
    monkeypatch.setattr(files, "MAX_FOLDER_GRID_POINTS", 5)
    msgs = [e for e in R.load(res, with_records=False).errors if "MAX_FOLDER_GRID_POINTS" in e]
    assert len(msgs) == 4 and len({m.split(": ", 1)[0] for m in msgs[:3]}) == 3, msgs
    # Negative control: with room for every file nothing is skipped.
    monkeypatch.setattr(files, "MAX_FOLDER_GRID_POINTS", 100)
    assert not [e for e in R.load(res, with_records=False).errors if "MAX_FOLDER_GRID_POINTS" in e]


def test_rows_past_the_folder_series_limit_are_skipped_by_name(tmp_path, monkeypatch):
    # A one-point series costs ~2.4 KB loaded: a folder of distinct benchmarks, each a
    # new series, is bounded by MAX_FOLDER_SERIES (lowered here to 5; each file's
    # benchmark adds 2 series, so files c.. are refused, 3 named and the rest counted).
    from harness.core import files

    monkeypatch.setattr(files, "MAX_FOLDER_SERIES", 5)
    res = tmp_path / "results"
    d = _machine(res, "m", {f"{c * 8}-py3.11.json": _v2_file(c * 40, bench=f"suite.{c}.time_x") for c in "abcdef"})
    rs = R.load(res, with_records=False)
    msgs = [e for e in rs.errors if "MAX_FOLDER_SERIES" in e]
    assert [m.split(": ", 1)[0] for m in msgs[:3]] == [str(d / f"{c * 8}-py3.11.json") for c in "cde"], msgs
    assert "benchmark suite.c.time_x: its 2 new series" in msgs[0]
    assert len(msgs) == 4 and "1 more rows (2 series" in msgs[3] and "suite.f.time_x" in msgs[3], msgs
    assert sorted(s.key.benchmark for s in rs.series.values()) == ["suite.a.time_x"] * 2 + ["suite.b.time_x"] * 2
    # A commit of the folder's known series still loads: only new series count.
    (d / "abababab-py3.11.json").write_text(json.dumps(_v2_file("ab" * 20, bench="suite.a.time_x")))
    rs = R.load(res, with_records=False)
    assert sorted(len(s.points) for s in rs.series.values() if s.key.benchmark == "suite.a.time_x") == [2, 2]
    # Negative control: with room for every series nothing is skipped.
    monkeypatch.setattr(files, "MAX_FOLDER_SERIES", 100)
    rs = R.load(res, with_records=False)
    assert not [e for e in rs.errors if "MAX_FOLDER_SERIES" in e] and len(rs.series) == 12


def _deny(monkeypatch, names: set[str]):
    """Path.exists / is_symlink raise PermissionError for these file names, as
    they do inside a folder that cannot be searched (root bypasses permissions,
    so the tests inject the error)."""
    import pathlib

    real_exists, real_link = pathlib.Path.exists, pathlib.Path.is_symlink

    def exists(self, *a, **k):
        if self.name in names:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *a, **k)

    def is_symlink(self):
        if self.name in names:
            raise PermissionError(13, "Permission denied", str(self))
        return real_link(self)

    monkeypatch.setattr(pathlib.Path, "exists", exists)
    monkeypatch.setattr(pathlib.Path, "is_symlink", is_symlink)


def test_unsearchable_parts_of_a_results_folder_are_warnings_naming_them(tmp_path, monkeypatch):
    # A hostile helper (2026-12-07): an unreadable kernelwatch/ or machine folder, or
    # results folder, failed the whole publish as "cannot write the site".
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    (res / "m" / "kernelwatch").mkdir()
    _machine(res, "n", {"bbbbbbbb-py3.11.json": _v2_file("b" * 40)})
    _deny(monkeypatch, {"calibration.jsonl", "benchmarks.json"})
    rs = R.load(res)
    assert any("calibration.jsonl: cannot read (Permission denied); calibration unknown" in e for e in rs.errors)
    assert any("benchmarks.json: cannot read (Permission denied)" in e for e in rs.errors), rs.errors
    assert {s.key.machine for s in rs.series.values()} == {"m", "n"}
    monkeypatch.undo()
    real_link = __import__("pathlib").Path.is_symlink

    def is_symlink(self):
        if self.name == "machine.json" and self.parent.name == "n":
            raise PermissionError(13, "Permission denied", str(self))
        return real_link(self)

    monkeypatch.setattr(__import__("pathlib").Path, "is_symlink", is_symlink)
    rs = R.load(res)
    assert any(e.startswith(f"{res / 'n'}: cannot read the machine folder (Permission denied)") for e in rs.errors)
    assert {s.key.machine for s in rs.series.values()} == {"m"}
    # Negative control: nothing denied, nothing said.
    monkeypatch.undo()
    rs = R.load(res)
    assert not [e for e in rs.errors if "Permission denied" in e]


def test_publish_of_a_results_folder_that_cannot_be_listed_names_it(tmp_path, monkeypatch):
    from harness.report import site
    from harness.report.model import PublishError

    res = tmp_path / "results"
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40)})
    real = os.scandir

    def scandir(p="."):
        if str(p) == str(res):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(PublishError, match=r"results: cannot read the results folder \(Permission denied\)"):
        site.publish(res, tmp_path / "out")
    assert not (tmp_path / "out").exists()
