"""The gate against a hostile pull request (issue 29, part B).

- Each side's suite comes from its own commit: a head that deletes a benchmark
  from ``benchmarks/suite.py`` cannot delete it from base's list, so it is BROKEN
  unless a ``Perf-Benchmark-Removed`` trailer acknowledges the removal.
- A base whose op cannot import (head fixes it) is named in the NEW rows.
- Every phase has a time limit, names itself and its case when it stops, and
  leaves no process behind (the slow end-to-end cases at the bottom).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _repo import assert_passed_or_control_unstable, git, mini_suite_repo

from harness.core import procs
from harness.gate import asvrun, suites
from harness.gate import decide as gate
from harness.gate.probe import DELETED_ON_HEAD, missing_on_head
from harness.gate.settings import REMOVAL_TRAILER, read_acknowledgements

ROOT = Path(__file__).resolve().parent.parent
NAME = "suite.vector_add.track_time"
PARAMS = (("provider", "torch"),)


def _repo(tmp_path: Path) -> Path:
    """base: a suite with two modules and two ops; then commits made by each test."""
    return mini_suite_repo(tmp_path / "repo", "import kernels\nOPS = ['vector_add', 'softmax']\n")


def _conf(r: Path, work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "asv.conf.json"
    conf.write_text(json.dumps({"benchmark_dir": str(r / "benchmarks"), "repo": str(r)}))
    return conf


# ----------------------------------------------------------------------------- each side's own suite


def test_each_side_lists_the_suite_of_its_own_commit(tmp_path):
    r = _repo(tmp_path)
    base = git(r, "rev-parse", "HEAD")
    (r / "benchmarks" / "suite.py").write_text("import kernels\nOPS = ['softmax']  # vector_add dropped\n")
    git(r, "commit", "-q", "-am", "drop vector_add from the suite")
    head = git(r, "rev-parse", "HEAD")
    work = tmp_path / "work"
    conf = _conf(r, work)
    for sha, tag, want in ((base, "base", "'vector_add'"), (head, "head", "dropped")):
        path, problem = asvrun.suite_conf(r, conf, sha, work, tag)
        assert problem is None
        bdir = Path(json.loads(path.read_text())["benchmark_dir"])
        assert bdir.name == "benchmarks" and bdir.is_relative_to(work)
        assert want in (bdir / "suite.py").read_text()
    # the working tree (head, as CI checks it out) is not what base's list is read from
    assert "'vector_add'" not in (r / "benchmarks" / "suite.py").read_text()


def test_a_commit_without_the_benchmark_folder_is_a_problem_naming_it(tmp_path):
    r = _repo(tmp_path)
    git(r, "rm", "-q", "-r", "benchmarks")
    git(r, "commit", "-q", "-m", "no suite")
    sha = git(r, "rev-parse", "HEAD")
    (r / "benchmarks").mkdir()  # the working tree still has one: it must not be used instead
    conf = _conf(r, tmp_path / "work")
    path, problem = asvrun.suite_conf(r, conf, sha, tmp_path / "work", "head")
    assert path == conf
    assert problem and sha[:12] in problem and "'benchmarks'" in problem


def test_a_configuration_without_benchmark_dir_exports_asvs_default_folder(tmp_path):
    """asv's ``benchmark_dir`` defaults to ``benchmarks``: a configuration without it
    exports the commit's ``benchmarks/`` (mutation: ``root / "benchmarks"`` as
    ``root & "benchmarks"``, a TypeError)."""
    r = _repo(tmp_path)
    sha = git(r, "rev-parse", "HEAD")
    work = tmp_path / "work"
    work.mkdir()
    conf = work / "asv.conf.json"
    conf.write_text(json.dumps({"repo": str(r)}))
    path, problem = asvrun.suite_conf(r, conf, sha, work, "head")
    assert problem is None
    bdir = Path(json.loads(path.read_text())["benchmark_dir"])
    assert bdir == work / "suite-head" / "benchmarks"
    assert "OPS = ['vector_add', 'softmax']" in (bdir / "suite.py").read_text()


def _broken(reason: str) -> gate.Verdict:
    return gate.Verdict(NAME, PARAMS, gate.Status.BROKEN, reason)


def test_a_dropped_benchmark_blocks_unless_a_removal_trailer_names_it(tmp_path):
    reason = missing_on_head({NAME: [], "suite.softmax.track_time": []}, {"suite.softmax.track_time": []}, None)[NAME]
    assert reason.startswith(DELETED_ON_HEAD) and REMOVAL_TRAILER in reason
    # no trailer, or one naming another benchmark: still BROKEN, exit 2
    for removals in ([], [gate.Acknowledgement("suite.softmax.*", "retired", "c" * 40)]):
        vs = [_broken(reason)]
        assert suites.acknowledge_removals(vs, removals) == []
        assert vs[0].status is gate.Status.BROKEN and gate.exit_code(vs) == gate.EXIT_BROKEN
    # a matching trailer: REMOVED, acknowledged, not blocking
    ack = gate.Acknowledgement("suite.vector_add.*", "retired, see #12", "d" * 40)
    vs = [_broken(reason)]
    warnings = suites.acknowledge_removals(vs, [ack])
    assert vs[0].status is gate.Status.REMOVED and vs[0].acknowledged == ack
    assert "retired, see #12" in vs[0].reason and "dddddddddddd" in vs[0].reason
    assert len(warnings) == 1 and gate.exit_code(vs) == gate.EXIT_OK


def test_a_removal_trailer_never_excuses_an_import_error_or_a_failure():
    ack = gate.Acknowledgement("*", "retired", "d" * 40)
    probe = {"modules": {}, "ops": {"vector_add": "ImportError: boom (at kernels/vector_add.py:1)"}, "problem": None}
    import_error = missing_on_head({NAME: []}, {}, probe)[NAME]
    vs = [_broken(import_error), _broken("WrongResult: not close"), gate.Verdict(NAME, PARAMS, gate.Status.SLOWER, "x")]
    assert suites.acknowledge_removals(vs, [ack]) == []
    assert [v.status for v in vs] == [gate.Status.BROKEN, gate.Status.BROKEN, gate.Status.SLOWER]


def test_removal_trailers_are_read_from_base_to_head(tmp_path):
    r = _repo(tmp_path)
    base = git(r, "rev-parse", "HEAD")
    git(r, "commit", "-q", "--allow-empty", "-m", f"retire\n\n{REMOVAL_TRAILER}: suite.vector_add.* reason=retired\n")
    git(r, "commit", "-q", "--allow-empty", "-m", f"bad\n\n{REMOVAL_TRAILER}: suite.softmax.*\n")
    git(
        r,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "slow\n\nPerf-Regression-Acknowledged: suite.x* reason=not a removal\n",
    )
    head = git(r, "rev-parse", "HEAD")
    removals, problems = read_acknowledgements(r, base, head, REMOVAL_TRAILER)
    assert [(a.pattern, a.reason) for a in removals] == [("suite.vector_add.*", "retired")]
    assert len(problems) == 1 and REMOVAL_TRAILER in problems[0] and "reason=" in problems[0]
    acks, _ = read_acknowledgements(r, base, head)
    assert [a.pattern for a in acks] == ["suite.x*"]  # a slowdown acknowledgement is not a removal


@pytest.mark.parametrize("trailer", [REMOVAL_TRAILER, gate.ACK_TRAILER])
def test_a_trailer_that_acknowledges_everything_is_refused(tmp_path, trailer):
    # issue 29: ``Perf-Benchmark-Removed: *`` (or ``Perf-Regression-Acknowledged: *``)
    # acknowledged every benchmark; a wildcards-only pattern is now refused with a warning.
    r = _repo(tmp_path)
    base = git(r, "rev-parse", "HEAD")
    for pattern in ("*", "*.*", "?*", "[a-z]*"):
        git(r, "commit", "-q", "--allow-empty", "-m", f"all\n\n{trailer}: {pattern} reason=everything\n")
    git(r, "commit", "-q", "--allow-empty", "-m", f"one\n\n{trailer}: suite.vector_add.* reason=retired\n")
    head = git(r, "rev-parse", "HEAD")
    acks, problems = read_acknowledgements(r, base, head, trailer)
    assert [a.pattern for a in acks] == ["suite.vector_add.*"]
    assert len(problems) == 4 and all("would acknowledge every one" in p for p in problems), problems


def test_a_pattern_matching_every_benchmark_of_the_suite_is_too_broad():
    names = ["suite.vector_add.time_add", "suite.softmax.time_softmax"]
    assert gate.matches_everything("suite.*", names)  # every benchmark of this suite
    assert not gate.matches_everything("suite.vector_add.*", names)
    assert not gate.matches_everything("suite.*", names[:1])  # one benchmark: naming it is fine


def test_a_base_that_cannot_import_is_named_when_head_fixes_it(tmp_path):
    r = _repo(tmp_path)
    (r / "kernels" / "vector_add.py").write_text("raise ImportError('vector_add broken on base')\n")
    git(r, "commit", "-q", "-am", "break vector_add")
    base = git(r, "rev-parse", "HEAD")
    new = gate.Verdict(NAME, PARAMS, gate.Status.NEW, "no baseline: not run on base")
    other = gate.Verdict("suite.softmax.track_time", PARAMS, gate.Status.NEW, "no baseline: not run on base")
    base_meta = {"suite.softmax.track_time": []}  # base's suite lacks vector_add; softmax is new for another reason
    warnings = suites.name_base_import_errors(r, base, tmp_path / "work", base_meta, [new, other], quick=True)
    assert "ImportError: vector_add broken on base" in new.reason and "kernels/vector_add.py:1" in new.reason
    assert other.reason == "no baseline: not run on base"
    assert len(warnings) == 1 and base[:12] in warnings[0] and "head fixes it" in warnings[0]
    # negative control: a base that imports has nothing to name
    git(r, "revert", "--no-edit", "HEAD")
    fixed = git(r, "rev-parse", "HEAD")
    new.reason = "no baseline: not run on base"
    assert suites.name_base_import_errors(r, fixed, tmp_path / "work", base_meta, [new], quick=True) == []
    assert new.reason == "no baseline: not run on base"


@pytest.mark.parametrize(
    ("probe", "lead"),
    [
        ({"modules": {"suite": "SyntaxError: bad (at benchmarks/suite.py:3)"}, "ops": {}}, "benchmark module 'suite'"),
        ({"modules": {}, "ops": {"*": "import kernels: ImportError: no torch"}}, "benchmark module 'suite'"),
    ],
    ids=["module-only", "kernels-only"],
)
def test_a_base_import_error_is_named_from_whichever_part_failed(tmp_path, monkeypatch, probe, lead):
    """Base's suite lacks a NEW benchmark because its benchmark module fails to import,
    or ``import kernels`` fails, with no error for the op itself: the reason names that
    error (mutation: ``modules.get(mod) or ops.get("*")`` as ``... and ...``, which
    needed both to fail)."""
    why = next(iter({**probe["modules"], **probe["ops"]}.values()))
    monkeypatch.setattr(suites, "probe_suite", lambda *a, **k: {**probe, "problem": None})
    new = gate.Verdict(NAME, PARAMS, gate.Status.NEW, "no baseline: not run on base")
    warnings = suites.name_base_import_errors(tmp_path, "ab" * 20, tmp_path / "work", {}, [new], quick=True)
    assert new.reason == f"no baseline: not run on base; base's suite lacks it: {lead} fails to import on base: {why}"
    assert warnings == [f"on base {'ab' * 6}, {lead} fails to import (head fixes it): {why}"]


# ----------------------------------------------------------------------------- bounded phases (item 4)


def _procs_mentioning(marker: str) -> list[str]:
    """Command lines of live processes whose command line or environment holds ``marker``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            blobs = [Path(f"/proc/{name}/cmdline").read_bytes()]
            try:
                blobs.append(Path(f"/proc/{name}/environ").read_bytes())
            except OSError:
                pass
        except (OSError, IndexError):
            continue
        if any(marker.encode() in b for b in blobs):
            out.append(blobs[0].replace(b"\0", b" ").decode(errors="replace"))
    return out


def _grandchild_started(marker: str, within_s: float = 60.0) -> bool:
    """Whether the hanging grandchild of :func:`_hanging` runs (its command line is the
    only one holding ``marker`` without the code that starts it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if any("subprocess" not in c for c in _procs_mentioning(marker)):
            return True
        time.sleep(0.1)
    return False


def _gone(marker: str, within_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        left = _procs_mentioning(marker)
        if not left:
            return []
        time.sleep(0.1)
    return _procs_mentioning(marker)


def _hanging(marker: str, own_group: bool = True) -> list[str]:
    """A command that starts a grandchild (in a process group of its own, as asv does
    with its children) and both hang; the grandchild's command line holds ``marker``."""
    pre = ", preexec_fn=lambda: os.setpgid(0, 0)" if own_group else ""
    code = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)  # {marker}']{pre})\n"
        "print('· Discovering benchmarks', flush=True)\n"
        "time.sleep(300)\n"
    )
    return [sys.executable, "-c", code]


pytestmark_linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytestmark_linux
def test_a_phase_past_its_limit_is_named_with_its_case_and_leaves_nothing(tmp_path):
    marker = f"KWTEST-{uuid.uuid4().hex}"
    t0 = time.monotonic()
    with pytest.raises(procs.PhaseTimeout) as info:
        procs.run_bounded(_hanging(marker), phase="check: measure", kind="measure", limit_s=2, describe=asvrun.asv_case)
    assert time.monotonic() - t0 < 30
    e = info.value
    assert e.phase == "check: measure" and e.case == "Discovering benchmarks" and e.limit_s == 2
    assert "'check: measure'" in str(e) and "Discovering benchmarks" in str(e) and "2 s" in str(e)
    assert _gone(marker) == []


@pytestmark_linux
def test_a_finished_phase_takes_its_stragglers_with_it():
    marker = f"KWTEST-{uuid.uuid4().hex}"
    code = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)  # {marker}'],"
        " preexec_fn=lambda: os.setpgid(0, 0))\n"
        "print('done'); sys.exit(3)\n"
    )
    done = procs.run_bounded([sys.executable, "-c", code], phase="p", kind="git")
    assert done.returncode == 3 and done.stdout.strip() == "done"
    assert _gone(marker) == []


@pytestmark_linux
def test_kill_9_of_kernelwatch_leaves_no_process_behind(tmp_path):
    marker = f"KWTEST-{uuid.uuid4().hex}"
    parent = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from harness.core import procs\n"
        f"procs.run_bounded({_hanging(marker)!r}, phase='p', kind='measure')\n"
    )
    p = subprocess.Popen([sys.executable, "-c", parent])
    assert _grandchild_started(marker), "the grandchild never started"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert _gone(marker, within_s=10) == []
    # negative control: a grandchild started outside run_bounded outlives its killed parent
    q = subprocess.Popen(_hanging(marker + "-control"))
    assert _grandchild_started(marker + "-control")
    os.kill(q.pid, signal.SIGKILL)
    q.wait()
    time.sleep(0.5)
    left = _procs_mentioning(marker + "-control")
    assert left, "the control grandchild should have survived its parent"
    for name in os.listdir("/proc"):  # clean up the control
        if name.isdigit():
            try:
                if (marker + "-control").encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "0", "abc", "1e9"])
def test_the_phase_limit_variable_is_validated_with_its_range(monkeypatch, raw):
    monkeypatch.setenv(procs.LIMIT_ENV, raw)
    with pytest.raises(procs.LimitError) as info:
        procs.phase_limit("measure")
    assert procs.LIMIT_ENV in str(info.value) and "1 to" in str(info.value)


def test_the_phase_limit_default_variable_and_caller(monkeypatch):
    monkeypatch.delenv(procs.LIMIT_ENV, raising=False)
    assert procs.phase_limit("discover") == (procs.PHASE_LIMITS_S["discover"], procs.phase_limit("discover")[1])
    assert "default" in procs.phase_limit("discover")[1]
    monkeypatch.setenv(procs.LIMIT_ENV, "30")
    assert procs.phase_limit("measure") == (30.0, f"${procs.LIMIT_ENV}")
    assert procs.phase_limit("measure", 5)[0] == 5.0
    with pytest.raises(procs.LimitError):
        procs.phase_limit("measure", float("nan"))
    with pytest.raises(KeyError):
        procs.phase_limit("no such phase")


@pytestmark_linux
def test_a_stalled_triage_worker_names_its_phase_and_leaves_nothing(tmp_path):
    from harness.measure import profile as P

    marker = f"KWTEST-{uuid.uuid4().hex}"
    # ncu_cmd is the prefix of the worker's command: here a command that hangs with a grandchild
    w = P.WorkerProcess({"commit": "a" * 40, "role": "head"}, tmp_path / "work", ncu_cmd=_hanging(marker), timeout_s=2)
    res = w.round(0)
    w.close()
    (problem,) = res["problems"]
    assert "'triage: profile head aaaaaaaaaaaa'" in problem and "time limit of 2 s" in problem
    assert "round ready" in problem
    assert _gone(marker) == []


# ----------------------------------------------------------------------------- end to end (slow)


@pytest.fixture(scope="module")
def gate_repo(tmp_path_factory):
    """A copy of this repository with branches off main: ``dropped`` removes vector_add
    from benchmarks/suite.py, ``dropped_ack`` adds a removal trailer, ``skipped`` makes
    its ``setup`` raise NotImplementedError (asv's skip), ``skipped_ack`` adds a removal
    trailer to it, ``hangs`` makes
    kernels/vector_add.py sleep at import."""
    from _repo import copy_tracked

    r = copy_tracked(tmp_path_factory.mktemp("kwhostile") / "repo")
    suite = r / "benchmarks" / "suite.py"
    loop = 'for _name in (*kernels.OP_MODULES, "control_copy", "control_matmul"):\n'
    if loop not in suite.read_text():
        pytest.fail("benchmarks/suite.py changed shape: update tests/test_gate_hostile.py")
    git(r, "checkout", "-q", "-b", "dropped", "main")
    dropped = (
        'for _name in (*[n for n in kernels.OP_MODULES if n != "vector_add"], "control_copy", "control_matmul"):\n'
    )
    suite.write_text(suite.read_text().replace(loop, dropped))
    git(r, "commit", "-q", "-am", "suite: drop vector_add")
    git(r, "checkout", "-q", "-b", "dropped_ack", "dropped")
    git(
        r,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"retire\n\n{REMOVAL_TRAILER}: suite.vector_add.* reason=retired, see #12\n",
    )
    git(r, "checkout", "-q", "-b", "skipped", "main")
    setup = "    def setup(self, provider, shape, dtype, timing):\n"
    if setup not in suite.read_text():
        pytest.fail("benchmarks/suite.py changed shape: update tests/test_gate_hostile.py")
    skip = (
        setup + '        if self.op_name == "vector_add":\n            raise NotImplementedError("skipped by head")\n'
    )
    suite.write_text(suite.read_text().replace(setup, skip))
    git(r, "commit", "-q", "-am", "suite: head skips vector_add")
    git(r, "checkout", "-q", "-b", "skipped_ack", "skipped")
    git(
        r,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"skip\n\n{REMOVAL_TRAILER}: suite.vector_add.* reason=skipped, see #13\n",
    )
    git(r, "checkout", "-q", "-b", "hangs", "main")
    va = r / "kernels" / "vector_add.py"
    va.write_text(va.read_text() + "\nimport time\n\ntime.sleep(3600)  # deliberate hang at import\n")
    git(r, "commit", "-q", "-am", "vector_add hangs at import")
    git(r, "checkout", "-q", "dropped")  # CI checks head out: the working tree is head's suite
    return r


def _check(repo: Path, head: str, tmp_path: Path, env_extra: dict | None = None):
    out = tmp_path / f"{head}.json"
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **(env_extra or {}))
    env.pop("GITHUB_STEP_SUMMARY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", "--base", "main", "--head", head, "--bench", "vector_add"]
        + ["--quick", "--rounds", "1", "--json", str(out)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    return proc, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.slow
def test_a_head_that_drops_its_benchmark_is_broken(gate_repo, tmp_path):
    proc, report = _check(gate_repo, "dropped", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    rows = [s for s in report["series"] if s["benchmark"] == NAME]
    assert rows and all(s["status"] == "BROKEN" for s in rows), report["series"]
    assert all(s["reason"].startswith(DELETED_ON_HEAD) for s in rows)
    assert report["removals"] == []


@pytest.mark.slow
def test_a_head_that_skips_its_own_benchmark_is_broken(gate_repo, tmp_path):
    # hostile trial h29t F4: both commits are measured with head's suite, so asv records
    # NaN on both sides; this was REMOVED, exit 0, no trailer needed
    from harness.gate.suites import SKIPPED_ON_HEAD

    proc, report = _check(gate_repo, "skipped", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    rows = [s for s in report["series"] if s["benchmark"] == NAME]
    assert rows and all(s["status"] == "BROKEN" and s["reason"].startswith(SKIPPED_ON_HEAD) for s in rows), rows


@pytest.mark.slow
def test_a_removal_trailer_acknowledges_a_skip(gate_repo, tmp_path):
    # the trailers are read when a skip (not only a deletion) blocks
    proc, report = _check(gate_repo, "skipped_ack", tmp_path)
    assert_passed_or_control_unstable(proc, report)
    rows = [s for s in report["series"] if s["benchmark"] == NAME]
    assert rows and all(s["status"] == "REMOVED" and "skipped, see #13" in s["reason"] for s in rows), rows
    assert [a["pattern"] for a in report["removals"]] == ["suite.vector_add.*"]


@pytest.mark.slow
def test_a_removal_trailer_makes_it_removed(gate_repo, tmp_path):
    proc, report = _check(gate_repo, "dropped_ack", tmp_path)
    assert_passed_or_control_unstable(proc, report)
    rows = [s for s in report["series"] if s["benchmark"] == NAME]
    assert rows and all(s["status"] == "REMOVED" and "retired, see #12" in s["reason"] for s in rows)
    assert [a["pattern"] for a in report["removals"]] == ["suite.vector_add.*"]
    assert not any("slower but acknowledged" in w for w in report["warnings"])


@pytest.mark.slow
@pytestmark_linux
def test_a_head_hanging_at_import_stops_at_the_limit_and_leaves_nothing(gate_repo, tmp_path):
    t0 = time.monotonic()
    proc, report = _check(gate_repo, "hangs", tmp_path, {procs.LIMIT_ENV: "45"})
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "phase 'discover head' stopped at its time limit of 45 s" in proc.stderr, proc.stderr
    assert "Discovering benchmarks" in proc.stderr and "Traceback" not in proc.stderr
    assert took < 300
    assert _gone(str(gate_repo), within_s=10) == []


def test_a_bad_phase_limit_stops_each_command_before_it_starts(monkeypatch, tmp_path):
    from harness.gate import bisect, check, triage
    from harness.measure import runner

    r = _repo(tmp_path)
    monkeypatch.setenv(procs.LIMIT_ENV, "nan")
    calls = (
        (check.CheckError, lambda: check.run_check("main", "main", repo=r, log=lambda m: None)),
        (bisect.BisectError, lambda: bisect.run_bisect("main", "main", "x", repo=r, log=lambda m: None)),
        (runner.RunError, lambda: runner.run_commits("main", repo=r, results_dir=tmp_path / "res", log=lambda m: None)),
        (triage.TriageError, lambda: triage.run_triage("main", "main", benchmark="x", repo=r, log=lambda m: None)),
    )
    for error, call in calls:
        with pytest.raises(error) as info:
            call()
        assert procs.LIMIT_ENV in str(info.value) and "1 to" in str(info.value), (error, info.value)


def test_check_refuses_a_bench_pattern_that_is_no_regex(tmp_path):
    """Hostile trial: ``check --bench '(['`` ran the set-up and pasted two asv
    tracebacks into the summary; it is refused before any work, as ``run`` does.
    Control: a valid pattern gets past this check (and fails later on the path)."""
    from harness.gate import check

    with pytest.raises(check.CheckError, match="is not a regular expression"):
        check.run_check("HEAD", "HEAD", bench="([", repo=tmp_path, log=lambda m: None)
    with pytest.raises(check.CheckError, match="not inside a git repository"):
        check.run_check("HEAD", "HEAD", bench="vector_add", repo=tmp_path, log=lambda m: None)


def test_check_lists_heads_suite_under_the_discover_limit_before_measuring(monkeypatch, tmp_path):
    """S2: head's discovery ran inside the measure phase (6 h default), so a head hanging
    at import stalled CI for 6 h. The first asv call of a check is now head's discovery,
    as a ``discover`` phase (30 min); base's follows. Control: a same-commit check too."""
    from harness.gate import check

    r = _repo(tmp_path)
    (r / "kernels" / "softmax.py").write_text("OK = 2\n")
    git(r, "commit", "-q", "-am", "head")
    head = git(r, "rev-parse", "HEAD").strip()
    calls = []

    def fake_run_asv(root, conf, machine, commits, **kw):
        calls.append((kw.get("kind", "measure"), kw["purpose"], list(commits)))
        raise OSError("stop after the first asv call")

    monkeypatch.setattr(asvrun, "run_asv", fake_run_asv)
    for base in ("main~1", "main"):
        calls.clear()
        with pytest.raises(OSError, match="stop after"):
            check.run_check(base, "main", repo=r, log=lambda m: None, tty=False)
        assert calls == [("discover", "discover head", [head])], calls
    assert procs.PHASE_LIMITS_S["discover"] < procs.PHASE_LIMITS_S["measure"]
