"""Bad input and faults (issue 14): every case is a small input built here; each
asserts that the message names the file, row or ref, and that the rest was processed.

The gate's end-to-end case (a head whose kernel fails at import -> exit 2) is in
tests/test_check.py (slow); the pieces it is made of are tested here, fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import check, gate, runner
from harness import results as R

ROOT = Path(__file__).resolve().parent.parent


def git(cwd, *args) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="kw", GIT_AUTHOR_EMAIL="kw@example.invalid",
               GIT_COMMITTER_NAME="kw", GIT_COMMITTER_EMAIL="kw@example.invalid")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


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
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "nonexistent..HEAD"], cwd=tiny_repo,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr
    assert "'nonexistent' is not a commit" in proc.stderr and "Traceback" not in proc.stderr
    assert "usage: git" not in proc.stderr


# ----------------------------------------------------------------------------- missing benchmarks.json (item 8)


def _v2_file(commit: str, *, date: int = 1_700_000_000_000, env: str = "py3.11", value=1.0,
             params=None, bench: str = "suite.x.time_x") -> dict:
    params = params if params is not None else [["1", "2"]]
    n = 1
    for axis in params:
        n *= len(axis)
    return {"version": 2, "commit_hash": commit, "date": date, "env_name": env, "python": "3.11",
            "requirements": {}, "params": {"machine": "m"},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": {bench: [[value] * n, params, "v1", date, 1.0]}}


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
    from harness import runner
    with runner.results_lock(sys.argv[1], what="kernelwatch run HOLDER", wait_s=0):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _hold(folder: Path, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(folder), str(seconds)], stdout=subprocess.PIPE,
                         text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
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
    r = tmp_path / "suite-repo"
    (r / "benchmarks").mkdir(parents=True)
    (r / "kernels").mkdir()
    (r / "asv.conf.json").write_text(json.dumps({"benchmark_dir": "benchmarks"}))
    (r / "benchmarks" / "__init__.py").write_text("")
    (r / "benchmarks" / "suite.py").write_text("import kernels\n")
    (r / "kernels" / "__init__.py").write_text(
        "import importlib\n\ndef get_op(name):\n    return importlib.import_module('kernels.' + name)\n")
    (r / "kernels" / "vector_add.py").write_text("OK = 1\n")
    (r / "kernels" / "softmax.py").write_text("OK = 1\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    base = git(r, "rev-parse", "HEAD")
    (r / "kernels" / "vector_add.py").write_text(vector_add_body)
    git(r, "commit", "-q", "-am", "head")
    return r, base, git(r, "rev-parse", "HEAD")


def test_op_failing_at_import_on_head_is_broken_with_its_error(tmp_path):
    r, base, head = _suite_repo(tmp_path, "x = 1\nraise ImportError('deliberate import failure in vector_add')\n")
    probe = check.probe_suite(r, head, tmp_path / "work", ["vector_add", "softmax"], quick=True)
    assert probe["problem"] is None, probe
    assert "deliberate import failure" in probe["ops"]["vector_add"]
    assert "kernels/vector_add.py:2" in probe["ops"]["vector_add"]  # the file and line, relative to the export
    assert "softmax" not in probe["ops"]  # the rest of head's suite is fine
    base_meta = {"suite.vector_add.track_time": [["'torch'"]], "suite.softmax.track_time": [["'torch'"]]}
    head_meta = {"suite.softmax.track_time": [["'torch'"]]}
    missing = check.missing_on_head(base_meta, head_meta, probe)
    assert list(missing) == ["suite.vector_add.track_time"]
    assert "ImportError: deliberate import failure in vector_add" in missing["suite.vector_add.track_time"]
    # at base the op imports: nothing to report
    assert check.probe_suite(r, base, tmp_path / "work", ["vector_add"], quick=True)["ops"] == {}


def test_head_suite_failing_to_import_is_named(tmp_path):
    r, base, head = _suite_repo(tmp_path, "OK = 2\n")
    (r / "benchmarks" / "suite.py").write_text("import kernels\nraise SyntaxError('suite broken on head')\n")
    git(r, "commit", "-q", "-am", "break the suite")
    head = git(r, "rev-parse", "HEAD")
    probe = check.probe_suite(r, head, tmp_path / "work", ["vector_add"], quick=False)
    assert "suite broken on head" in probe["modules"]["suite"] and "benchmarks/suite.py:2" in probe["modules"]["suite"]
    missing = check.missing_on_head({"suite.vector_add.track_time": []}, None, probe)
    assert "benchmark module 'suite' fails to import on head" in missing["suite.vector_add.track_time"]


def test_benchmark_deleted_on_head_is_broken_not_removed():
    missing = check.missing_on_head({"suite.a.track_time": [], "suite.b.track_time": []},
                                    {"suite.a.track_time": []}, {"modules": {}, "ops": {}, "problem": None})
    assert list(missing) == ["suite.b.track_time"] and "missing from head's" in missing["suite.b.track_time"]
    v = gate.Verdict("suite.b.track_time", (), gate.Status.BROKEN, missing["suite.b.track_time"])
    assert gate.exit_code([v]) == gate.EXIT_BROKEN


def test_discovery_uses_the_measurement_grid(monkeypatch, tmp_path):
    seen = []

    def fake_run_asv(*a, **kw):
        seen.append(kw["quick"])
        raise OSError("stop here")

    monkeypatch.setattr(check, "run_asv", fake_run_asv)
    for quick in (False, True):
        with pytest.raises(OSError):
            check.discover(tmp_path, tmp_path / "c.json", "m", "a" * 40, work=tmp_path, launch="spawn", tag="base",
                           bench=None, quick=quick)
    assert seen == [False, True]


def test_progress_off_a_terminal_is_one_line_per_phase_with_time_left():
    lines = []
    p = check.PhaseProgress(lines.append, tty=False)
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

    p = check.PhaseProgress(lambda m: None, tty=True, console=Console(file=io.StringIO()))
    p.start("measure")
    p.line("[ 25.00%] ··· suite.x.track_time  ok")
    assert p._rich.tasks[0].completed == pytest.approx(25.0)
    p.segment(1, 2)
    p.line("[ 50.00%] ··· suite.x.track_time  ok")
    assert p._rich.tasks[0].completed == pytest.approx(75.0)
    p.end("done")
    p.close()
