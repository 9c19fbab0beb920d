"""Issue 12's rules on small synthetic series: at once (pending), not enough
history, the right commit, version change only at its own commit, failure gaps,
workload and benchmark-changed labels, events grouped by commit, and the
autotune / compiled-kernel annotations."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness import analysis as A
from harness.analysis import autotune


def H(i: int) -> str:
    return f"{i:040x}"


def mk(
    values,
    name="suite.Collide.time_step",
    machine="gpu1",
    metric=None,
    unit="seconds",
    versions=None,
    ci=None,
    commits=None,
    params=(("n", "1"),),
):
    commits = commits or [H(i) for i in range(len(values))]
    pts = [
        A.Point(
            commit=commits[i],
            value=None if v is None else float(v),
            reason="failed" if v is None else None,
            version=versions[i] if versions else "v1",
            ci=(float(v) * (1 - ci), float(v) * (1 + ci)) if (ci and v is not None) else None,
        )
        for i, v in enumerate(values)
    ]
    return A.Series(A.SeriesKey(machine, name, params), pts, unit=unit, metric=metric)


def noisy(levels, noise, seed):
    rng = np.random.default_rng(seed)
    levels = np.asarray(levels, dtype=float)
    return levels * np.exp(noise * rng.standard_normal(levels.size))


def idx(c: str) -> int:
    return int(c, 16)


# --------------------------------------------------------------------------- at once


def test_default_five_commit_run_with_10x_step_at_head_is_pending():
    # `kernelwatch run` measures 5 commits; a 10x slowdown at HEAD with a tight CI
    v = [1.0, 1.002, 0.998, 1.001, 10.0]
    r = A.analyze([mk(v, ci=0.002)])
    (f,) = r.findings
    assert f.status is A.Status.PENDING
    assert (idx(f.commit_before), idx(f.commit_after)) == (3, 4)
    assert 9.5 < f.ratio < 10.5 and f.ci[0] > 5
    assert "newest 1 commit" in f.reason and "confirmed when 3 more commit(s)" in f.reason
    assert r.summary["not_enough_history"] == 0 and "None" not in json.dumps(r.summary)
    assert r.events[0]["status"] == "pending" and r.events[0]["n_slower"] == 1


def test_five_commits_without_change_report_nothing():
    for seed in range(10):
        r = A.analyze([mk(noisy(np.ones(5), 0.01, seed), ci=0.01)])
        assert not r.findings, [f.reason for f in r.findings]


def test_two_commit_step_at_head_is_pending_and_a_returned_one_is_not():
    base = list(noisy(np.ones(30), 0.01, 3))
    r = A.analyze([mk(base + [1.3, 1.31])])
    (f,) = r.findings
    assert f.status is A.Status.PENDING and idx(f.commit_after) == 30 and f.extra["n_after"] == 2
    # the newest commit is back at the old level: an excursion, not a step
    r = A.analyze([mk(base + [1.3, 1.0])])
    assert [f for f in r.findings if f.status is A.Status.PENDING and f.change > 0 and idx(f.commit_after) == 30] == []


def test_one_point_of_history_reads_in_the_singular():
    # issue 25, newcomer trial: "not enough history: 1 points"
    r = A.analyze([mk([1.0])])
    (row,) = r.series
    assert row["reason"] == "not enough history: 1 point, need 3"


def test_not_enough_history_is_said_per_series_and_in_the_summary():
    r = A.analyze([mk([1.0, 1.1]), mk(noisy(np.ones(20), 0.01, 1), name="suite.Collide.time_other")])
    rows = {row["key"]["benchmark"]: row for row in r.series}
    short = rows["suite.Collide.time_step"]
    assert short["status"] == "insufficient_history"
    assert short["reason"] == "not enough history: 2 points, need 3"
    assert rows["suite.Collide.time_other"]["status"] == "tested"
    assert r.summary["not_enough_history"] == 1
    assert "not enough history for 1" in r.summary["change_detection"]
    assert r.health["insufficient_history"] == [
        dict(
            A.SeriesKey("gpu1", "suite.Collide.time_step", (("n", "1"),)).as_dict(),
            reason="not enough history: 2 points, need 3",
        )
    ]


def test_the_summary_counts_the_series_tested_apart_from_the_short_ones():
    """Two series with history and one of two points: "2 of 3 series tested"
    (mutation: the tested count ``n_positions > 0`` as ``== 0``, which counts
    the short one, and reads the same when one of each is run)."""
    quiet = [mk(noisy(np.ones(20), 0.01, s), name=f"suite.Collide.time_{s}") for s in (1, 2)]
    r = A.analyze([mk([1.0, 1.1]), *quiet])
    assert r.summary["series_tested"] == 2 and r.summary["not_enough_history"] == 1
    assert r.summary["change_detection"] == "2 of 3 series tested; not enough history for 1 (need 3 points)"
    assert A.analyze(quiet).summary["change_detection"] == "all 2 series tested"


# --------------------------------------------------------------------------- right commit


def test_step_names_the_adjacent_pair_where_the_jump_is():
    hits = 0
    for seed in range(20):
        v = noisy(np.r_[np.ones(40), 3.0 * np.ones(30)], 0.03, seed)
        r = A.analyze([mk(v)])
        (f,) = [f for f in r.findings if f.status is A.Status.REGRESSION]
        assert (idx(f.commit_before), idx(f.commit_after)) == (39, 40)
        # the move at the named pair carries at least half of the reported change
        assert math.log(f.extra["jump_ratio"]) >= 0.5 * math.log(f.ratio)
        hits += 2.7 < f.ratio < 3.3
    assert hits == 20


def test_3x_slowdown_among_failures_and_version_changes_is_found():
    # a collision kernel: nulls scattered through the history, a version change
    # early on, and a real 3x slowdown later
    v = list(noisy(np.r_[np.ones(40), 3.0 * np.ones(20)], 0.05, 7))
    for i in (3, 11, 17, 50):
        v[i] = None
    versions = ["a"] * 10 + ["b"] * 50
    r = A.analyze([mk(v, versions=versions)])
    regs = [f for f in r.findings if f.status is A.Status.REGRESSION]
    assert len(regs) == 1 and idx(regs[0].commit_after) == 40 and 2.5 < regs[0].ratio < 3.5


# --------------------------------------------------------------------------- version change


def test_step_one_commit_after_a_version_change_is_a_code_change():
    v = noisy(np.r_[np.ones(30), 27.0 * np.ones(30)], 0.02, 5)
    versions = ["a" * 64] * 29 + ["b" * 64] * 31  # version changes at 29, the step is at 30
    r = A.analyze([mk(v, versions=versions)])
    steps = [f for f in r.findings if f.status in (A.Status.REGRESSION, A.Status.VERSION_CHANGE)]
    assert [f.status for f in steps] == [A.Status.REGRESSION]
    assert idx(steps[0].commit_after) == 30
    assert "one commit before this step" in steps[0].reason and "code change" in steps[0].reason
    assert r.summary["alerts"] == 1


def test_step_one_commit_before_a_version_change_is_a_code_change():
    v = noisy(np.r_[np.ones(30), 27.0 * np.ones(30)], 0.02, 6)
    versions = ["a" * 64] * 31 + ["b" * 64] * 29  # step at 30, version changes at 31
    r = A.analyze([mk(v, versions=versions)])
    (f,) = [f for f in r.findings if f.status in (A.Status.REGRESSION, A.Status.VERSION_CHANGE)]
    assert f.status is A.Status.REGRESSION and idx(f.commit_after) == 30
    assert "one commit after this step" in f.reason


def test_step_at_the_version_change_is_labelled_not_hidden():
    v = noisy(np.r_[np.ones(30), 27.0 * np.ones(30)], 0.02, 6)
    versions = ["a" * 64] * 30 + ["b" * 64] * 30
    r = A.analyze([mk(v, versions=versions)])
    (f,) = r.findings
    assert f.status is A.Status.VERSION_CHANGE and idx(f.commit_after) == 30 and 25 < f.ratio < 29
    (ev,) = r.events
    assert ev["status"] == "benchmark_changed"
    assert ev["annotations"][0]["kind"] == "version_change"


# --------------------------------------------------------------------------- failure gaps


def test_jump_across_a_failure_gap_is_reported_as_such_and_never_joined():
    # two jumps with 24 failed commits between them (the input scene changed):
    # 1 -> 2.4 just before the gap, then 2.4 -> 5.9 across it. Neither may be
    # joined with the other into a creeping drift.
    v = (
        list(noisy(np.ones(30), 0.02, 8))
        + list(noisy(2.4 * np.ones(10), 0.02, 9))
        + [None] * 24
        + list(noisy(5.9 * np.ones(15), 0.02, 10))
    )
    r = A.analyze([mk(v)])
    st = [f for f in r.findings if f.status not in (A.Status.FAILING,)]
    assert not [f for f in st if f.status in (A.Status.DRIFT_REGRESSION, A.Status.DRIFT_IMPROVEMENT)]
    regs = sorted((f for f in st if f.status is A.Status.REGRESSION), key=lambda f: idx(f.commit_after))
    assert [(idx(f.commit_before), idx(f.commit_after)) for f in regs] == [(29, 30), (39, 64)]
    assert 2.2 < regs[0].ratio < 2.6 and 2.2 < regs[1].ratio < 2.7
    assert "jump across a failure gap: 24 failed commit(s)" in regs[1].reason
    assert "failure gap" not in regs[0].reason
    (fail,) = [f for f in r.findings if f.status is A.Status.FAILING]
    assert f"failing since {H(40)[:12]}, back at {H(64)[:12]}" in fail.reason
    assert r.health["failing"][0]["since"] == H(40) and r.health["failing"][0]["back_at"] == H(64)


def test_no_step_across_a_gap_without_a_jump():
    v = list(noisy(np.ones(30), 0.02, 11)) + [None] * 5 + list(noisy(np.ones(30), 0.02, 12))
    r = A.analyze([mk(v)])
    assert [f.status for f in r.findings] == [A.Status.FAILING]


def test_failing_reason_counts_each_cause():
    """The failing finding names each cause with how many commits it hit, the
    most frequent first (mutation: the per-reason count ``+ 1`` as ``>> 1``)."""
    pts = [A.Point(H(i), 1.0 + 0.001 * (i % 3), version="v1") for i in range(12)]
    for i in (3, 6, 9):
        pts[i] = A.Point(H(i), None, reason="timeout", version="v1")
    pts[10] = A.Point(H(10), 0.0, version="v1")
    s = A.Series(A.SeriesKey("gpu1", "suite.Collide.time_step", ()), pts, unit="seconds")
    assert A.analyze_series(s).failure_reasons == {"timeout": 3, "unusable value 0.0": 1}
    (fail,) = [f for f in A.analyze([s]).findings if f.status is A.Status.FAILING]
    assert fail.reason.startswith("4 of 12 results failed")
    assert fail.reason.endswith("(timeout x3; unusable value 0.0 x1)")


def test_a_benchmark_whose_every_case_stops_at_one_commit_is_called_removed():
    """Every case of a benchmark missing from the same commit on: each missing
    finding says the benchmark was removed or renamed. Negative controls: a
    benchmark with two of its three cases gone, and a benchmark of a single case,
    are not (mutation: the per-benchmark case count ``+ 1`` as ``| 1``)."""
    commits = [H(i) for i in range(12)]

    def case(name, n, upto=10):
        return mk(noisy(np.ones(upto), 0.01, n), name=name, commits=commits[:upto], params=(("n", str(n)),))

    gone = [case("suite.Gone.time_x", n) for n in (1, 2, 3)]
    partly = [case("suite.Partly.time_x", 1), case("suite.Partly.time_x", 2), case("suite.Partly.time_x", 3, upto=12)]
    single = [case("suite.Single.time_x", 1)]
    r = A.analyze(gone + partly + single, machine_commits={"gpu1": commits})
    missing = {(f.key.benchmark, f.key.params): f.reason for f in r.findings if f.status is A.Status.MISSING}
    assert len(missing) == 6
    for n in ("1", "2", "3"):
        reason = missing[("suite.Gone.time_x", (("n", n),))]
        assert reason.endswith("; all 3 cases of suite.Gone.time_x stopped there (benchmark removed or renamed?)")
    assert not [r for (b, _p), r in missing.items() if b == "suite.Partly.time_x" and "stopped there" in r]
    assert "stopped there" not in missing[("suite.Single.time_x", (("n", "1"),))]


# --------------------------------------------------------------------------- workload / benchmark changed


def test_workload_changed_when_non_time_tracks_jump_at_the_same_commit():
    t = mk(noisy(np.r_[np.ones(30), 5.9 * np.ones(20)], 0.02, 13))
    iters = mk(
        np.r_[100 * np.ones(30), 590 * np.ones(20)],
        name="suite.Collide.track_iterations",
        unit="unit",
        metric="iterations",
    )
    mem = mk(
        np.r_[1e6 * np.ones(30), 1e6 * np.ones(20)],
        name="suite.Collide.track_memory_bytes",
        unit="bytes",
        metric="memory",
    )
    r = A.analyze([t, iters, mem])
    (f,) = [f for f in r.findings if f.key.benchmark == "suite.Collide.time_step"]
    assert f.status is A.Status.REGRESSION  # the step stays a finding, labelled
    (ann,) = f.annotations
    assert ann["kind"] == "workload_changed" and "track_iterations" in ann["text"]
    assert ann["evidence"]["tracks"][0]["benchmark"] == "suite.Collide.track_iterations"
    assert "workload changed?" in f.reason
    ev = next(e for e in r.events if e["commit_range"] == [H(29), H(30)])
    assert any(a["kind"] == "workload_changed" for a in ev["annotations"])
    # a time step alone carries no such label
    r = A.analyze([t, mem])
    (f,) = [f for f in r.findings if f.key.benchmark == "suite.Collide.time_step"]
    assert f.annotations == []


def test_benchmark_changed_from_the_git_diff(tmp_path):
    git = pytest.importorskip("git")
    from harness.store.suite import benchmark_change_notes, suite_paths

    repo = git.Repo.init(tmp_path / "repo")
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir()
    (root / "src.py").write_text("x = 1\n")
    (root / "benchmarks" / "b.py").write_text("def time_x(): pass\n")
    (root / "asv.conf.json").write_text('{"version": 1, // comment\n "benchmark_dir": "benchmarks"}\n')
    repo.index.add(["src.py", "benchmarks/b.py", "asv.conf.json"])
    shas = [repo.index.commit("c0").hexsha]
    for i in range(1, 40):
        if i == 20:
            (root / "benchmarks" / "b.py").write_text("def time_x(): return 2\n")  # the input scene changes
            repo.index.add(["benchmarks/b.py"])
        else:
            (root / "src.py").write_text(f"x = {i}\n")
            repo.index.add(["src.py"])
        shas.append(repo.index.commit(f"c{i}").hexsha)
    paths = suite_paths(tmp_path / "results", root)
    assert paths == ["benchmarks", "asv.conf.json"]
    notes, err = benchmark_change_notes(root, shas, paths)
    assert err is None and set(notes) == {shas[0], shas[20]}
    assert notes[shas[20]][0]["evidence"]["files"] == ["benchmarks/b.py"]
    v = noisy(np.r_[np.ones(20), 5.9 * np.ones(20)], 0.02, 14)
    r = A.analyze([mk(v, commits=shas)], commit_notes=notes)
    (f,) = r.findings
    assert f.status is A.Status.REGRESSION and f.commit_after == shas[20]
    assert f.annotations[0]["kind"] == "benchmark_changed" and "benchmarks/b.py" in f.reason
    assert r.events[0]["status"] == "benchmark_changed"
    # a path that is not a repository: a clear message, no labels, no crash
    notes, err = benchmark_change_notes(tmp_path / "nothing", shas, paths)
    assert notes == {} and "could not read the git history" in err


# --------------------------------------------------------------------------- events


def test_one_event_per_commit_across_series_and_machines():
    commits = [H(i) for i in range(50)]
    series = []
    for m in ("a100", "h100"):
        for k in range(30):
            lv = np.r_[np.ones(30), (1.5 if k % 3 else 0.7) * np.ones(20)]
            series.append(
                mk(noisy(lv, 0.01, 100 + k + (m == "h100") * 50), machine=m, commits=commits, params=(("k", str(k)),))
            )
    series.append(mk(noisy(np.ones(50), 0.01, 999), name="suite.Other.time_x", commits=commits))
    r = A.analyze(series)
    steps = [f for f in r.findings if f.status in (A.Status.REGRESSION, A.Status.IMPROVEMENT)]
    assert len(steps) == 60  # one finding per series stays
    (ev,) = [e for e in r.events if e["commit_range"] == [H(29), H(30)]]
    assert ev["id"] == "ev-" + H(30)[:12]
    assert ev["status"] == "mixed" and ev["machines"] == ["a100", "h100"]
    assert ev["n_slower"] == 40 and ev["n_faster"] == 20 and 1.4 < ev["max_magnitude"] < 1.6
    row = ev["series"][0]
    assert set(row) == {"key", "status", "magnitude", "direction", "timing", "finding_index"}
    assert r.findings[row["finding_index"]].key.as_dict() == row["key"]
    assert r.summary["events"] == len(r.events)
    d = r.as_dict()
    assert d["events"] == r.events and d["health"] == r.health
    json.dumps(d, allow_nan=False)


def test_two_commits_with_samples_are_a_real_test():
    rng = np.random.default_rng(21)
    base = tuple(1.0 * np.exp(0.01 * rng.standard_normal(10)))
    slow = tuple(1.3 * np.exp(0.01 * rng.standard_normal(10)))
    same = tuple(1.0 * np.exp(0.01 * rng.standard_normal(10)))

    def two(samples_b):
        pts = [
            A.Point(H(0), float(np.median(base)), samples=base),
            A.Point(H(1), float(np.median(samples_b)), samples=samples_b),
        ]
        return A.Series(A.SeriesKey("gpu1", "suite.Collide.time_step", ()), pts, unit="seconds")

    r = A.analyze([two(slow)])
    (f,) = r.findings
    assert f.status is A.Status.PENDING and 1.25 < f.ratio < 1.35 and f.extra["p_samples"] < 1e-3
    assert "samples of the two commits differ" in f.reason
    assert r.summary["not_enough_history"] == 0
    assert A.analyze([two(same)]).findings == []
    # without samples two commits are not enough history
    pts = [A.Point(H(0), 1.0), A.Point(H(1), 1.3)]
    r = A.analyze([A.Series(A.SeriesKey("gpu1", "suite.Collide.time_step", ()), pts, unit="seconds")])
    assert r.findings == [] and r.summary["not_enough_history"] == 1


@pytest.mark.parametrize("factor,worse", [(1 / 1.3, True), (1.3, False)], ids=["gbps-down", "gbps-up"])
def test_two_commits_with_samples_of_a_throughput_are_oriented(factor, worse):
    """Two commits with samples of a higher-is-better metric: a 30% drop of GB/s
    is a slowdown (change > 0), a 30% rise a speed-up, the ratio in GB/s terms
    (mutation: the sign ``-1.0`` as ``not 1.0``, which zeroes the change)."""
    rng = np.random.default_rng(22)
    base = tuple(100.0 * np.exp(0.01 * rng.standard_normal(10)))
    moved = tuple(100.0 * factor * np.exp(0.01 * rng.standard_normal(10)))
    pts = [A.Point(H(i), float(np.median(x)), samples=x) for i, x in enumerate((base, moved))]
    s = A.Series(A.SeriesKey("gpu1", "suite.Copy.track_bw", ()), pts, unit="GB/s", metric="gbps")
    (f,) = A.analyze([s]).findings
    assert f.status is A.Status.PENDING and f.extra["p_samples"] < 1e-3
    assert f.ratio == pytest.approx(factor, rel=0.03)
    assert (f.change > 0) is worse
    assert f.change == pytest.approx(1 / factor - 1, rel=0.1)


def test_divergent_change_is_an_alert_only_when_a_machine_got_slower():
    commits = [H(i) for i in range(60)]
    a100 = A.DevicePeaks("A100 SXM4 80GB", 2039.0, {"fp32": 19.5})
    h100 = A.DevicePeaks("H100 SXM5 80GB", 3350.0, {"fp32": 67.0})
    devices = {"ampere": a100, "hopper": h100}
    fast = mk(noisy(np.r_[np.ones(30), 0.60 * np.ones(30)], 0.01, 31), machine="ampere", commits=commits)
    less = mk(noisy(np.r_[np.ones(30), 0.85 * np.ones(30)], 0.01, 32), machine="hopper", commits=commits)
    r = A.analyze([fast, less], devices=devices, commit_order=commits)
    div = [f for f in r.findings if f.status is A.Status.DIVERGENT_CHANGE]
    assert div and all(f.extra["change_worse_machine"] < 0 for f in div)  # both got faster, unequally
    assert r.summary["alerts"] == 0
    ev = next(e for e in r.events if e["commit_range"] == [H(29), H(30)])
    assert ev["status"] == "improvement" and ev["n_slower"] == 0
    slow = mk(noisy(np.r_[np.ones(30), 1.20 * np.ones(30)], 0.01, 33), machine="hopper", commits=commits)
    r = A.analyze([fast, slow], devices=devices, commit_order=commits)
    assert r.summary["alerts"] == 2  # the hopper regression and the divergent change it makes


def _asv_history(root, values, touch_suite_at):
    """A git repository of ``len(values)`` commits (the one at ``touch_suite_at``
    edits benchmarks/) and asv v2 results of one time benchmark on one machine."""
    git = pytest.importorskip("git")
    repo = git.Repo.init(root / "repo")
    (root / "repo" / "benchmarks").mkdir()
    (root / "repo" / "benchmarks" / "b.py").write_text("def time_step(): pass\n")
    (root / "repo" / "src.py").write_text("x = 0\n")
    repo.index.add(["benchmarks/b.py", "src.py"])
    shas = [repo.index.commit("c0").hexsha]
    for i in range(1, len(values)):
        f = "benchmarks/b.py" if i == touch_suite_at else "src.py"
        (root / "repo" / f).write_text(f"# {i}\n")
        repo.index.add([f])
        shas.append(repo.index.commit(f"c{i}").hexsha)
    res = root / "results"
    (res / "m1").mkdir(parents=True)
    (res / "benchmarks.json").write_text(
        json.dumps(
            {
                "version": 2,
                "suite.Collide.time_step": {
                    "name": "suite.Collide.time_step",
                    "type": "time",
                    "unit": "seconds",
                    "params": [],
                    "param_names": [],
                    "version": "1",
                },
            }
        )
    )
    (res / "m1" / "machine.json").write_text(json.dumps({"machine": "m1", "version": 1}))
    for i, (sha, v) in enumerate(zip(shas, values)):
        doc = {
            "commit_hash": sha,
            "env_name": "existing-py",
            "date": 1_700_000_000_000 + 3_600_000 * i,
            "params": {"machine": "m1"},
            "python": "3.11",
            "requirements": {},
            "env_vars": {},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": {"suite.Collide.time_step": [[v], [], "1", 0, 1.0]},
            "durations": {},
            "version": 2,
        }
        (res / "m1" / f"{sha[:8]}-existing-py.json").write_text(json.dumps(doc))
    return root / "repo", res, shas


def test_analyze_with_repo_labels_a_commit_that_changed_the_suite(tmp_path):
    import io

    from rich.console import Console

    from harness.cli.analyze import run_analyze

    values = list(noisy(np.r_[np.ones(15), 5.9 * np.ones(15)], 0.02, 41))
    repo, res, shas = _asv_history(tmp_path, values, touch_suite_at=15)
    out = tmp_path / "r.json"
    assert run_analyze(res, repo, out, console=Console(file=io.StringIO(), width=200)) == 0
    rep = json.loads(out.read_text())
    (f,) = [f for f in rep["findings"] if f["status"] == "regression"]
    assert f["commit_range"] == [shas[14], shas[15]]
    assert f["annotations"][0]["kind"] == "benchmark_changed"
    assert f["annotations"][0]["evidence"]["files"] == ["benchmarks/b.py"]
    (ev,) = [e for e in rep["events"] if e["commit_range"] == [shas[14], shas[15]]]
    assert ev["status"] == "benchmark_changed" and ev["n_slower"] == 1
    # without --repo the same step is a plain regression event
    assert run_analyze(res, None, out, console=Console(file=io.StringIO(), width=200)) == 0
    rep = json.loads(out.read_text())
    (ev,) = [e for e in rep["events"] if e["commit_range"] == [shas[14], shas[15]]]
    assert ev["status"] == "regression" and ev["annotations"] == []


def test_a_two_point_level_at_the_start_is_blamed_at_its_own_commit():
    """OpenBLAS ``DSyrk(100, d)`` on noble: 0.948, 0.955, then 1.00 for 30
    commits. Refinement kept three points before the first split, so the
    step was named one commit late, at a +0.4% commit (docs/analysis.md)."""
    for seed in range(10):
        v = noisy(np.r_[0.95, 0.95, np.ones(30)], 0.005, seed)
        r = A.analyze([mk(v)])
        (f,) = [f for f in r.findings if f.status is A.Status.REGRESSION]
        assert (idx(f.commit_before), idx(f.commit_after)) == (1, 2), seed


def test_one_low_first_point_is_no_level_of_its_own():
    """The control: ``gbmv`` on skylake starts 0.92, then 0.99 for 25 commits;
    one low point is no level, so no slowdown is claimed at its second commit."""
    for seed in range(10):
        v = noisy(np.r_[0.92, np.ones(25)], 0.005, seed)
        r = A.analyze([mk(v)])
        claimed = [
            (idx(f.commit_before), idx(f.commit_after))
            for f in r.findings
            if f.status in (A.Status.REGRESSION, A.Status.PENDING)
        ]
        assert (1, 2) not in claimed, (seed, claimed)


# --------------------------------------------------------------------------- autotune / compiled kernel


def _kernel(name, **facts):
    base = {"name": name, "num_warps": 4, "num_stages": 3, "registers": 96, "spills": 0, "shared_bytes": 32768}
    return {**base, **facts}


def _facts(*kernels):
    rec = {
        "launch_config": {"BLOCK_SIZE_M": 128},
        "compile_facts": {"status": "ok", "triton": "3.3.0", "kernels": list(kernels)},
    }
    return autotune.facts_from_record(rec)


def test_a_kernel_compiled_differently_is_named_with_each_moved_field():
    """A kernel launched at both commits whose registers and spills moved: one
    ``autotune_changed`` annotation naming the kernel and each field, old ->
    new, in the fields' order (mutation: the text's ``+`` as ``/``)."""
    before = _facts(_kernel("matmul_kernel"))
    after = _facts(_kernel("matmul_kernel", registers=168, spills=24))
    (a,) = autotune.changes(before, after)
    assert a["kind"] == "autotune_changed"
    assert a["text"] == "matmul_kernel compiled differently: registers 96 -> 168, spills 0 -> 24"
    assert a["evidence"] == {
        "what": "compiled_kernel",
        "kernel": "matmul_kernel",
        "before": {"registers": 96, "spills": 0},
        "after": {"registers": 168, "spills": 24},
    }


def test_a_kernel_launched_only_after_the_step_does_not_hide_the_next_one():
    """A kernel new at the later commit has nothing to compare with and is
    skipped; the kernels listed after it are still compared (mutation: the
    ``continue`` past the new kernel as ``break``)."""
    before = _facts(_kernel("matmul_kernel"))
    after = _facts(_kernel("prologue_kernel"), _kernel("matmul_kernel", num_warps=8))
    found = autotune.changes(before, after)
    assert [a["text"] for a in found] == ["matmul_kernel compiled differently: num_warps 4 -> 8"]
    assert autotune.changes(before, _facts(_kernel("prologue_kernel"))) == []  # nothing launched on both sides


def test_a_benchmark_named_without_a_dot_names_its_own_track_as_the_workload():
    """A top-level benchmark (no class, no dot) is its own family: its
    iteration-count track of the same name jumping at the step labels it, the
    track named whole (mutation: the name's last part ``[-1]`` as ``[1]``,
    which has no second part to take)."""
    t = mk(noisy(np.r_[np.ones(30), 5.9 * np.ones(20)], 0.02, 13), name="collide")
    iters = mk(np.r_[100 * np.ones(30), 590 * np.ones(20)], name="collide", unit="unit", metric="iterations")
    r = A.analyze([t, iters])
    (f,) = [f for f in r.findings if f.extra.get("metric") == "time"]
    assert f.status is A.Status.REGRESSION and (idx(f.commit_before), idx(f.commit_after)) == (29, 30)
    (ann,) = f.annotations
    assert ann["text"] == "workload changed? other tracks of this benchmark jumped at the same commit (collide x5.9)"
    assert f.reason.endswith("; workload changed? collide x5.9 at the same commit")


def test_health_lists_as_failing_only_the_series_that_fail():
    """A step at a benchmark version change is no failure: health's ``failing``
    holds the one series whose newest results failed, nothing else (mutation:
    ``status == "failing"`` as ``<=``, which also takes every status that sorts
    before it: version and environment changes, drifts, divergent changes)."""
    versions = ["a" * 64] * 30 + ["b" * 64] * 30
    changed = mk(noisy(np.r_[np.ones(30), 1.3 * np.ones(30)], 0.02, 6), versions=versions)
    failing = mk(list(noisy(np.ones(55), 0.02, 7)) + [None] * 5, name="suite.Collide.time_other")
    r = A.analyze([changed, failing])
    assert sorted(f.status.value for f in r.findings) == ["benchmark_version_change", "failing"]
    (row,) = r.health["failing"]
    assert row["key"]["benchmark"] == "suite.Collide.time_other"
    assert (row["since"], row["back_at"], row["failed"]) == (H(55), None, 5)
