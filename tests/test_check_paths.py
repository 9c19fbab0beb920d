"""``kernelwatch check``'s orchestration paths that the gate's other fast tests do not
run: base and head the same commit, a suite that cannot be exported, parameter
grids that differ, the fixed-round re-measurement, ``--summary`` and
``$GITHUB_STEP_SUMMARY``, a phase past its limit, a trailer that names every
benchmark, and head's benchmark module failing to import.

asv is replaced by fakes of ``discover`` and ``measure_pair``; each test asserts
the exact report, warning or exit code a one-line bug in ``harness/gate/check.py``
would change (the lines the gate package's mutation samples could not reach,
docs/mutation.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_check_gate import NAME, _two_commit_repo

from harness.core import procs
from harness.gate import check
from harness.gate.decide import Side, Status

PARAMS = (("provider", "torch"),)


def _samples(median: float, seed: int, n: int = 20, sd: float = 0.002) -> list[float]:
    return list(median * np.exp(sd * np.random.default_rng(seed).standard_normal(n)))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the asv machine entry is written under ~
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return _two_commit_repo(tmp_path / "repo")


def _fakes(monkeypatch, table, *, misaligned=frozenset(), base_meta=None, grid=None):
    meta = {NAME: [["'torch'"]]} if base_meta is None else base_meta
    grid = {(NAME, PARAMS)} if grid is None else grid
    monkeypatch.setattr(check, "discover", lambda *a, **k: (meta, set(grid), None))
    calls = []

    def measure_pair(roles, bench, *, tag, **kw):
        calls.append(tag)
        t = table(tag) if callable(table) else table
        return t, set(misaligned), [], [], []

    monkeypatch.setattr(check, "measure_pair", measure_pair)
    return calls


def _run(repo, tmp_path, base="main~1", head="main", **kw):
    return check.run_check(base, head, repo=repo, json_out=tmp_path / "report.json", log=lambda m: None, **kw)


def test_base_and_head_the_same_commit_measure_once_and_compare_nothing(repo, tmp_path, monkeypatch):
    failed = Side(present=True, failed=True, error="RuntimeError: boom")
    table = {
        (NAME, PARAMS): {"base": Side(True, samples=_samples(1e-3, 1)), "head": Side(True, samples=_samples(1e-3, 1))},
        (NAME, (("provider", "triton"),)): {"base": failed, "head": failed},
        (NAME, (("provider", "cupy"),)): {"base": Side.absent(), "head": Side.absent()},
    }
    _fakes(monkeypatch, table)
    out = _run(repo, tmp_path, base="main", head="main")
    assert "base and head are the same commit: measured once; nothing can be slower" in out.report["warnings"]
    got = sorted((v.label, v.status, v.reason) for v in out.verdicts)
    assert len(got) == 2
    same = next(v for v in out.verdicts if v.status is Status.SAME)
    assert same.params == PARAMS and same.reason == "base and head are the same commit"
    assert same.threshold == out.report["config"]["threshold"]
    broken = next(v for v in out.verdicts if v.status is Status.BROKEN)
    assert "boom" in broken.reason and out.exit_code == 2


def test_a_head_suite_that_cannot_be_exported_is_a_problem_and_a_base_one_a_warning(repo, tmp_path, monkeypatch):
    def suite_conf(root, conf, commit, work, tag):
        return conf, f"{tag} {commit[:12]} has no benchmark folder 'benchmarks'"

    monkeypatch.setattr(check, "suite_conf", suite_conf)
    table = {
        (NAME, PARAMS): {"base": Side(True, samples=_samples(1e-3, 1)), "head": Side(True, samples=_samples(1e-3, 2))}
    }
    _fakes(monkeypatch, table)
    out = _run(repo, tmp_path)
    head_sha, base_sha = out.report["head"], out.report["base"]
    assert out.exit_code == 2
    assert f"head {head_sha[:12]} has no benchmark folder 'benchmarks'" in out.report["problems"]
    assert (
        f"base {base_sha[:12]} has no benchmark folder 'benchmarks'; base's suite listed from the working tree's "
        "benchmark folder"
    ) in out.report["warnings"]


def test_benchmarks_whose_grids_differ_are_named_in_a_warning(repo, tmp_path, monkeypatch):
    table = {
        (NAME, PARAMS): {"base": Side(True, samples=_samples(1e-3, 1)), "head": Side(True, samples=_samples(1e-3, 2))}
    }
    _fakes(monkeypatch, table, misaligned={"suite.b.track_time", "suite.a.track_time"})
    out = _run(repo, tmp_path)
    assert (
        "parameter grids differ between base and head for suite.a.track_time, suite.b.track_time: measured "
        "commit by commit (alternating) instead of in one interleaved asv run"
    ) in out.report["warnings"]


def _borderline_table(tag):
    seeds = {"measure": (1, 2), "remeasure": (3, 4)}[tag]
    return {
        (NAME, PARAMS): {
            "base": Side(True, samples=_samples(1e-3, seeds[0], n=60)),
            "head": Side(True, samples=_samples(1.065e-3, seeds[1], n=60)),
        }
    }


@pytest.fixture
def fixed_rounds(monkeypatch):
    """The fixed-round gate (no sequential looks), as a base without configuration gets."""
    real = check.load_settings

    def load(*a, **k):
        s = real(*a, **k)
        s.sequential = None
        return s

    monkeypatch.setattr(check, "load_settings", load)


def test_a_borderline_slowdown_is_remeasured_and_confirmed_with_both_measurements(
    repo, tmp_path, monkeypatch, fixed_rounds
):
    calls = _fakes(monkeypatch, _borderline_table)
    out = _run(repo, tmp_path)
    assert calls == ["measure", "remeasure"]
    (v,) = out.verdicts
    assert v.status is Status.SLOWER and out.exit_code == 1
    assert v.reason.startswith("re-measured: pooled ") and "; re-measurement alone " in v.reason
    assert v.first is not None and v.remeasured is not None and out.report["remeasured"] == 1


def test_no_remeasurement_when_it_is_switched_off(repo, tmp_path, monkeypatch, fixed_rounds):
    calls = _fakes(monkeypatch, _borderline_table)
    out = _run(repo, tmp_path, remeasure=False)
    assert calls == ["measure"] and out.report["remeasured"] == 0
    (v,) = out.verdicts
    assert v.first is None and v.remeasured is None


def test_the_summary_goes_to_summary_and_is_appended_to_the_step_summary(repo, tmp_path, monkeypatch):
    table = {
        (NAME, PARAMS): {"base": Side(True, samples=_samples(1e-3, 1)), "head": Side(True, samples=_samples(1e-3, 2))}
    }
    _fakes(monkeypatch, table)
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    out = _run(repo, tmp_path, summary=tmp_path / "deep" / "summary.md")
    assert (tmp_path / "deep" / "summary.md").read_text() == out.markdown
    assert step.read_text() == "earlier step\n" + out.markdown
    assert out.markdown.startswith("## kernelwatch check: passed")


def test_a_phase_past_its_limit_ends_the_check_with_where_its_logs_are(repo, tmp_path, monkeypatch):
    def timeout(*a, **k):
        raise procs.PhaseTimeout("check: measure", "suite.x", 5, "test")

    monkeypatch.setattr(check, "discover", lambda *a, **k: ({}, set(), None))
    monkeypatch.setattr(check, "measure_pair", timeout)
    with pytest.raises(check.CheckError) as info:
        _run(repo, tmp_path)
    pair = f"{check.resolve(repo, 'main~1')[:12]}-{check.resolve(repo, 'main')[:12]}"
    msg = str(info.value)
    assert msg.startswith(f"check {pair}: phase 'check: measure' stopped at its time limit of 5 s")
    assert "; logs in " in msg and msg.endswith(f"check/{pair}")


def test_a_trailer_pattern_that_matches_every_benchmark_is_refused_with_a_warning():
    from harness.gate.decide import Acknowledgement

    found = check._Found()
    broad = Acknowledgement(pattern=".*", reason="all of it", commit="c" * 40)
    narrow = Acknowledgement(pattern="suite.a", reason="this one", commit="d" * 40)
    names = {"suite.a.track_time", "suite.b.track_time"}
    kept = check._refuse_broad([broad, narrow], names, "Perf-Ack", found)
    assert kept == [narrow]
    assert found.warnings == [
        f"ignored Perf-Ack trailer in {'c' * 12}: pattern '.*' matches every benchmark of the suite (2); "
        "name the benchmarks it is for"
    ]


def test_head_benchmark_module_failing_to_import_is_a_problem(tmp_path, monkeypatch):
    found = check._Found()
    monkeypatch.setattr(
        check,
        "probe_suite",
        lambda root, sha, work, ops, quick: {"modules": {"suite": "SyntaxError: bad"}, "ops": {}, "problem": None},
    )
    out = check._missing_on_head(tmp_path, "a" * 40, tmp_path, {NAME: []}, {(NAME, ())}, True, found)
    assert found.problems == ["head's benchmark module 'suite' fails to import: SyntaxError: bad"]
    assert out == {
        NAME: "in base's suite, missing from head's: benchmark module 'suite' fails to import on head: SyntaxError: bad"
    }


def test_a_benchmark_head_removed_on_purpose_is_removed_acknowledged_and_passes(repo, tmp_path, monkeypatch):
    """Head's suite drops softmax and a commit says so in a removal trailer: the
    series is REMOVED, acknowledged by that trailer, and the check passes; it is
    not reported as "slower but acknowledged" (only a SLOWER verdict is). Without
    the trailer the same head is BROKEN (exit 2)."""
    import json

    from harness.gate.decide import Acknowledgement

    gone = "suite.softmax.track_time"
    meta = {NAME: [["'torch'"]], gone: [["'torch'"]]}
    entry = {"name": NAME, "type": "track", "unit": "seconds", "param_names": ["provider"], "params": [["'torch'"]]}
    monkeypatch.setattr(check, "discover", lambda *a, **k: (meta, {(NAME, PARAMS), (gone, PARAMS)}, None))

    def measure_pair(roles, bench, *, work, **kw):
        (work / "measure-results").mkdir(parents=True, exist_ok=True)
        (work / "measure-results" / "benchmarks.json").write_text(json.dumps({"version": 2, NAME: entry}))
        sides = {"base": Side(True, samples=_samples(1e-3, 1)), "head": Side(True, samples=_samples(1e-3, 2))}
        return {(NAME, PARAMS): sides}, set(), [], [], []

    monkeypatch.setattr(check, "measure_pair", measure_pair)
    monkeypatch.setattr(check, "probe_suite", lambda *a, **k: {"modules": {}, "ops": {}, "problem": None})
    removal = Acknowledgement(pattern="suite.softmax.*", reason="merged into vector_add", commit="e" * 40)
    for with_trailer in (True, False):
        monkeypatch.setattr(
            check,
            "read_acknowledgements",
            lambda root, base, head, trailer=check.gate.ACK_TRAILER, w=with_trailer: (
                ([removal] if w and trailer == check.REMOVAL_TRAILER else []),
                [],
            ),
        )
        out = _run(repo, tmp_path)
        v = next(v for v in out.verdicts if v.benchmark == gone)
        if with_trailer:
            assert out.exit_code == 0 and v.status is Status.REMOVED and v.acknowledged == removal
            assert not [w for w in out.report["warnings"] if "slower but acknowledged" in w]
            assert [w for w in out.report["warnings"] if w.startswith(f"{v.label}: ")]
        else:
            assert out.exit_code == 2 and v.status is Status.BROKEN and v.acknowledged is None
