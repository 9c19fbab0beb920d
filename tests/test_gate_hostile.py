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
from pathlib import Path

from _repo import git

from harness.gate import asvrun, suites
from harness.gate import decide as gate
from harness.gate.probe import DELETED_ON_HEAD, missing_on_head
from harness.gate.settings import REMOVAL_TRAILER, read_acknowledgements

NAME = "suite.vector_add.track_time"
PARAMS = (("provider", "torch"),)


def _repo(tmp_path: Path) -> Path:
    """base: a suite with two modules and two ops; then commits made by each test."""
    r = tmp_path / "repo"
    (r / "benchmarks").mkdir(parents=True)
    (r / "kernels").mkdir()
    (r / "asv.conf.json").write_text(json.dumps({"benchmark_dir": "benchmarks"}))
    (r / "benchmarks" / "__init__.py").write_text("")
    (r / "benchmarks" / "suite.py").write_text("import kernels\nOPS = ['vector_add', 'softmax']\n")
    (r / "kernels" / "__init__.py").write_text(
        "import importlib\n\ndef get_op(name):\n    return importlib.import_module('kernels.' + name)\n"
    )
    (r / "kernels" / "vector_add.py").write_text("OK = 1\n")
    (r / "kernels" / "softmax.py").write_text("OK = 1\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    return r


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
    git(r, "commit", "-q", "--allow-empty", "-m", "slow\n\nPerf-Regression-Acknowledged: * reason=not a removal\n")
    head = git(r, "rev-parse", "HEAD")
    removals, problems = read_acknowledgements(r, base, head, REMOVAL_TRAILER)
    assert [(a.pattern, a.reason) for a in removals] == [("suite.vector_add.*", "retired")]
    assert len(problems) == 1 and REMOVAL_TRAILER in problems[0] and "reason=" in problems[0]
    acks, _ = read_acknowledgements(r, base, head)
    assert [a.pattern for a in acks] == ["*"]  # a slowdown acknowledgement is not a removal


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
