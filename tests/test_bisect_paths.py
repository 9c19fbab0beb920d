"""``kernelwatch bisect``'s paths without asv: the exit codes and reasons of
:func:`harness.gate.bisect.run_bisect` (bad pattern, refs and ranges, a busy lock,
a timed-out phase, asv find naming nothing, ``--no-confirm``, a confirmed or
unconfirmed pick), the interleaved bisection that follows an unconfirmed pick,
the verdicts of one comparison step, and the medians asv find measured.

asv find and each comparison are faked over a real five-commit repository. Each
test here kills mutants of ``scripts/mutation_sample.py``'s gate package samples
(``harness/gate/bisect.py``, docs/mutation.md) that the rest of the suite let live.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from _repo import git

from harness.core import procs
from harness.core.model import SeriesKey
from harness.core.workspace import Workspace
from harness.gate import bisect
from harness.gate import decide as gate
from harness.gate.decide import GateConfig, Side, Status, Verdict
from harness.gate.settings import CheckSettings

ROOT = Path(__file__).resolve().parent.parent
BENCH = "suite.vector_add.track_time"
BASE = "b" * 40
HEAD = "a" * 40


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A repository of five commits ``c0`` (root) .. ``c4`` on ``main``; their full hashes."""
    repo = tmp_path_factory.mktemp("kwbisect-paths") / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    shutil.copy2(ROOT / "asv.conf.json", repo / "asv.conf.json")
    (repo / "benchmarks" / "__init__.py").write_text("")
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(5):
        (repo / f"NOTES{i}.md").write_text(f"change {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


@pytest.fixture
def repo(history, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the machine entry is written under ~
    monkeypatch.delenv(procs.LIMIT_ENV, raising=False)
    return history


def verdict(status: Status, reason: str, op: str = "vector_add", provider: str = "torch") -> Verdict:
    return Verdict(f"suite.{op}.track_time", (("provider", provider),), status, reason)


def fake_find(monkeypatch, pick: str | None, reason: str = ""):
    """asv find names ``pick`` (``None``: nothing, with ``reason``); records its arguments."""
    seen = {}

    def _asv_find(range_spec, benchmark, commits, **kw):
        seen.update(range_spec=range_spec, benchmark=benchmark, commits=list(commits), **kw)
        out = bisect.BisectOutcome(gate.EXIT_BROKEN, None, False, reason, commits, log_path="find.log")
        return out, pick

    monkeypatch.setattr(bisect, "_asv_find", _asv_find)
    return seen


def fake_compare(monkeypatch, answers: dict):
    """Each comparison of ``b`` against ``a`` returns ``answers[b]`` (verdicts, or an
    exception to raise); the calls are recorded as ``(a, b, tag)``."""
    calls: list[tuple] = []
    calls_ctx: list[dict] = []

    def _compare(a, b, *, tag, **ctx):
        calls.append((a, b, tag))
        calls_ctx.append(ctx)
        answer = answers[b]
        if isinstance(answer, Exception):
            raise answer
        return list(answer)

    monkeypatch.setattr(bisect, "_compare", _compare)
    return calls, calls_ctx


def bisect_main(repo_dir, good="main~4", bad="main", **kw):
    logs: list[str] = []
    out = bisect.run_bisect(good, bad, BENCH, repo=repo_dir, log=logs.append, **kw)
    return out, logs


# ----------------------------------------------------------------------------- before any measurement


def test_a_benchmark_pattern_that_is_not_a_regex_is_refused_before_the_repository_is_opened(tmp_path):
    with pytest.raises(bisect.BisectError) as info:
        bisect.run_bisect("main~1", "main", "suite(", repo=tmp_path / "not-a-repo", log=lambda m: None)
    assert str(info.value) == (
        "--benchmark 'suite(' is not a regular expression: missing ), unterminated subpattern at position 5"
    )


def test_a_folder_outside_git_is_a_bisect_error_naming_it(tmp_path):
    with pytest.raises(bisect.BisectError) as info:
        bisect.run_bisect("main~1", "main", BENCH, repo=tmp_path, log=lambda m: None)
    assert str(info.value) == f"{tmp_path.resolve()} is not inside a git repository"


def test_an_unknown_ref_is_a_bisect_error_naming_the_ref(repo):
    repo_dir, _ = repo
    with pytest.raises(bisect.BisectError) as info:
        bisect.run_bisect("nope", "main", BENCH, repo=repo_dir, log=lambda m: None)
    assert str(info.value).startswith(f"'nope' is not a commit, branch or tag in {repo_dir}")


def test_a_bad_phase_limit_is_a_bisect_error_before_asv_runs(repo, monkeypatch):
    repo_dir, _ = repo
    monkeypatch.setenv(procs.LIMIT_ENV, "soon")
    monkeypatch.setattr(bisect, "_run_bisect", lambda *a, **k: pytest.fail("bisect ran with a bad limit"))
    with pytest.raises(bisect.BisectError) as info:
        bisect.run_bisect("main~1", "main", BENCH, repo=repo_dir, log=lambda m: None)
    assert str(info.value) == "KERNELWATCH_PHASE_LIMIT_S='soon' is not a number of seconds (accepted: 1 to 604800)"


def test_a_held_lock_of_the_same_range_is_a_bisect_error_naming_its_holder(repo, monkeypatch):
    repo_dir, shas = repo
    pair = f"{shas[3][:12]}-{shas[4][:12]}"
    monkeypatch.setattr(bisect, "_run_bisect", lambda *a, **k: pytest.fail("bisect ran without its lock"))
    ws = Workspace.open(repo_dir, "bisect")
    with ws.lock(pair, wait_s=0, log=lambda m: None):
        with pytest.raises(bisect.BisectError) as info:
            bisect.run_bisect("main~1", "main", BENCH, repo=repo_dir, log=lambda m: None, lock_wait_s=0)
    folder = repo_dir / ".kernelwatch" / "bisect" / "locks" / pair
    msg = str(info.value)
    assert msg.startswith(f"{folder} is in use by pid {os.getpid()} on ")
    assert msg.endswith(f"; kernelwatch bisect {pair} gave up after 0 s (lock file {folder / '.kernelwatch' / 'lock'})")


def test_a_phase_past_its_limit_is_a_bisect_error_naming_the_pair_and_its_logs(repo, monkeypatch):
    repo_dir, shas = repo
    pair = f"{shas[0][:12]}-{shas[4][:12]}"
    seen = {}

    def timed_out(good, bad, benchmark, **kw):
        seen.update(good=good, bad=bad, benchmark=benchmark, **kw)
        raise procs.PhaseTimeout("bisect: asv find", BENCH, 7, "test")

    monkeypatch.setattr(bisect, "_run_bisect", timed_out)
    with pytest.raises(bisect.BisectError) as info:
        bisect.run_bisect("main~4", "main", BENCH, repo=repo_dir, log=lambda m: None, quick=True, rounds=2)
    stop = procs.PhaseTimeout("bisect: asv find", BENCH, 7, "test")
    assert str(info.value) == f"bisect {pair}: {stop}; logs in {repo_dir / '.kernelwatch' / 'bisect' / pair}"
    assert (seen["good"], seen["bad"], seen["benchmark"], seen["quick"], seen["rounds"]) == (
        "main~4",
        "main",
        BENCH,
        True,
        2,
    )


def test_the_range_rejects_bad_refs_a_folder_outside_git_reversed_refs_and_an_empty_range(repo, tmp_path):
    repo_dir, shas = repo
    with pytest.raises(bisect.BisectError, match=r"^'nope' is not a commit, branch or tag in "):
        bisect._range("main~1", "nope", repo_dir)
    with pytest.raises(bisect.BisectError) as info:
        bisect._range("main~1", "main", tmp_path / "nowhere")
    assert str(info.value) == f"{(tmp_path / 'nowhere').resolve()} is not inside a git repository"
    with pytest.raises(bisect.BisectError) as info:
        bisect._range("main", "main~3", repo_dir)
    assert str(info.value) == (f"--good main ({shas[4][:12]}) is not an ancestor of --bad main~3 ({shas[1][:12]})")
    with pytest.raises(bisect.BisectError) as info:
        bisect._range("main~2", shas[2], repo_dir)
    assert str(info.value) == f"no commits between --good main~2 and --bad {shas[2]}"


def test_the_range_starts_at_good_and_asv_find_searches_from_goods_parent(repo):
    repo_dir, shas = repo
    root, good, bad, commits, spec = bisect._range("main~3", "main", repo_dir)
    assert (root, good, bad, commits, spec) == (repo_dir, shas[1], shas[4], shas[1:], f"{shas[1]}^..{shas[4]}")
    *_, commits, spec = bisect._range("main~4", "main~2", repo_dir)
    assert (commits, spec) == (shas[0:3], shas[2])  # the root commit has no parent: asv find takes bad's history


def test_a_reversed_range_through_run_bisect_exits_with_the_ancestor_error(repo, monkeypatch):
    repo_dir, shas = repo
    monkeypatch.setattr(bisect, "_asv_find", lambda *a, **k: pytest.fail("asv find ran on a reversed range"))
    with pytest.raises(bisect.BisectError) as info:
        bisect_main(repo_dir, good="main", bad="main~4")
    assert str(info.value) == f"--good main ({shas[4][:12]}) is not an ancestor of --bad main~4 ({shas[0][:12]})"


# ----------------------------------------------------------------------------- asv find's pick


def test_asv_find_naming_nothing_is_the_outcome_as_it_returned_it(repo, monkeypatch):
    repo_dir, shas = repo
    seen = fake_find(monkeypatch, None, reason="asv find did not name a commit (exit 1): boom")
    fake_compare(monkeypatch, {})
    out, logs = bisect_main(repo_dir, quick=True)
    assert out.exit_code == gate.EXIT_BROKEN and out.found is None and not out.confirmed
    assert out.reason == "asv find did not name a commit (exit 1): boom"
    assert (seen["range_spec"], seen["benchmark"], seen["commits"], seen["quick"]) == (shas[4], BENCH, shas, True)
    assert logs == [
        f"kernelwatch bisect: 5 commits from {shas[0][:12]} (good) to {shas[4][:12]} (bad), "
        f"benchmark {BENCH!r}, on {seen['machine']}"
    ]


@pytest.mark.parametrize("pick", [2, 0], ids=["a-later-commit", "the-good-commit"])
def test_no_confirm_takes_asv_finds_pick_and_exits_0_unless_it_is_the_good_commit(repo, monkeypatch, pick):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[pick][:7])
    fake_compare(monkeypatch, {})
    out, _ = bisect_main(repo_dir, confirm=False)
    assert out.found == shas[pick]  # the short hash asv printed, resolved
    assert out.exit_code == (gate.EXIT_OK if pick else gate.EXIT_BROKEN) and not out.confirmed
    assert out.reason == f"asv find: greatest regression at {shas[pick][:12]} (not confirmed: --no-confirm)"


def test_a_pick_slower_than_its_parent_is_confirmed_with_its_first_three_slow_series(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[2][:9])
    found = [
        verdict(Status.SLOWER, "2.00x slower", provider="torch"),
        verdict(Status.SAME, "same", op="softmax"),
        verdict(Status.SLOWER, "1.50x slower", provider="triton"),
        verdict(Status.SLOWER, "1.40x slower", provider="cupy"),
        verdict(Status.SLOWER, "1.30x slower", provider="numpy"),
    ]
    calls, ctxs = fake_compare(monkeypatch, {shas[2]: found})
    out, logs = bisect_main(repo_dir, rounds=3, quick=True)
    assert calls == [(shas[1], shas[2], "confirm")]
    assert ctxs[0]["pattern"] == BENCH and ctxs[0]["quick"] is True and ctxs[0]["settings"].rounds == 3
    assert out.exit_code == gate.EXIT_OK and out.confirmed and out.found == shas[2]
    assert out.reason == (
        f"first slow commit {shas[2][:12]}: suite.vector_add.track_time(provider=torch) 2.00x slower; "
        "suite.vector_add.track_time(provider=triton) 1.50x slower; "
        "suite.vector_add.track_time(provider=cupy) 1.40x slower"
    )
    assert out.confirmation == [v.as_dict() for v in found]
    assert out.asv_find_pick is None and out.steps == []
    assert logs[1] == f"  confirming {shas[2][:12]} against its parent {shas[1][:12]} (3 interleaved rounds)"


def test_a_pick_whose_confirmation_cannot_measure_exits_2_naming_it_and_why(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[3][:12])
    calls, _ = fake_compare(monkeypatch, {shas[3]: bisect._Undecided("asv stored no result")})
    out, _ = bisect_main(repo_dir)
    assert calls == [(shas[2], shas[3], "confirm")]  # no fallback bisection after an unmeasured confirmation
    assert out.exit_code == gate.EXIT_BROKEN and not out.confirmed and out.found == shas[3]
    assert out.reason == (
        f"asv find named {shas[3][:12]}, but the confirmation could not measure it: asv stored no result"
    )
    assert out.confirmation == [] and out.asv_find_pick is None


# ----------------------------------------------------------------------------- the interleaved bisection


def slow_from(shas, first: int, extra=()) -> dict:
    """Answers of a history whose commits from ``first`` on are SLOWER than good."""
    answers = {}
    for i, c in enumerate(shas):
        if i >= first:
            answers[c] = [
                verdict(Status.SLOWER, f"slower at c{i}", provider="torch"),
                verdict(Status.SAME, f"same at c{i}", op="softmax"),
                *extra,
            ]
        else:
            answers[c] = [verdict(Status.SAME, f"same at c{i}")]
    return answers


def test_an_unconfirmed_pick_is_bisected_against_good_to_the_first_slower_commit(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[3][:12])
    answers = slow_from(shas, 2)
    answers[shas[3]] = [verdict(Status.UNCERTAIN, "maybe"), verdict(Status.SAME, "same", op="softmax")]
    extra = [verdict(Status.SLOWER, f"slower {p}", provider=p) for p in ("triton", "cupy", "numpy")]
    answers[shas[2]] = [verdict(Status.SLOWER, "slower at c2"), verdict(Status.SAME, "same", op="softmax"), *extra]
    calls, _ = fake_compare(monkeypatch, answers)
    out, logs = bisect_main(repo_dir)
    # confirm c3 against c2 (not slower), then good against bad, the middle (c2), then c1
    assert calls == [
        (shas[2], shas[3], "confirm"),
        (shas[0], shas[4], "step0"),
        (shas[0], shas[2], "step1"),
        (shas[0], shas[1], "step2"),
    ]
    why = (
        f"asv find named {shas[3][:12]}, but it is not SLOWER than its parent {shas[2][:12]} here "
        "(suite.vector_add.track_time(provider=torch): UNCERTAIN)"
    )
    assert out.exit_code == gate.EXIT_OK and out.confirmed and out.found == shas[2]
    assert out.asv_find_pick == shas[3]
    assert out.reason == (
        why + f"; interleaved bisection: first slow commit {shas[2][:12]}: "
        "suite.vector_add.track_time(provider=torch) slower at c2; "
        "suite.vector_add.track_time(provider=triton) slower triton; "
        "suite.vector_add.track_time(provider=cupy) slower cupy"
    )
    assert [(s["commit"], s["slower_than_good"]) for s in out.steps] == [
        (shas[4], True),
        (shas[2], True),
        (shas[1], False),
    ]
    assert out.steps[1]["verdicts"] == [v.as_dict() for v in answers[shas[2]]]
    assert out.confirmation == out.steps[1]["verdicts"]
    assert logs[2:] == [
        f"  {why}; bisecting with interleaved comparisons against {shas[0][:12]}",
        f"  {shas[4][:12]}: SLOWER than good",
        f"  {shas[2][:12]}: SLOWER than good",
        f"  {shas[1][:12]}: not slower than good",
    ]


def test_the_good_commit_named_by_asv_find_is_bisected_to_the_last_commit(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[0][:8])
    calls, _ = fake_compare(monkeypatch, slow_from(shas, 4))
    out, _ = bisect_main(repo_dir)
    assert [b for _, b, _ in calls] == [shas[4], shas[2], shas[3]]
    assert out.exit_code == gate.EXIT_OK and out.found == shas[4] and out.asv_find_pick == shas[0]
    assert out.reason == (
        f"asv find named the good commit {shas[0][:12]} itself; interleaved bisection: first slow commit "
        f"{shas[4][:12]}: suite.vector_add.track_time(provider=torch) slower at c4"
    )
    assert out.confirmation == out.steps[0]["verdicts"]  # bad's own step, the only one naming it


def test_a_bad_commit_not_slower_than_good_exits_2_after_one_step(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[2][:12])
    calls, _ = fake_compare(monkeypatch, {**slow_from(shas, 5), shas[2]: []})
    out, _ = bisect_main(repo_dir)
    assert calls == [(shas[1], shas[2], "confirm"), (shas[0], shas[4], "step0")]
    assert out.exit_code == gate.EXIT_BROKEN and not out.confirmed and out.found is None
    assert out.asv_find_pick == shas[2]
    assert out.reason == (
        f"asv find named {shas[2][:12]}, but it is not SLOWER than its parent {shas[1][:12]} here "
        f"(nothing measured); and --bad {shas[4][:12]} is not SLOWER than --good {shas[0][:12]} here"
    )
    assert [(s["commit"], s["slower_than_good"]) for s in out.steps] == [(shas[4], False)]


def test_a_step_that_cannot_measure_stops_the_bisection_keeping_the_steps_before_it(repo, monkeypatch):
    repo_dir, shas = repo
    fake_find(monkeypatch, shas[0][:12])
    answers = slow_from(shas, 1)
    answers[shas[2]] = bisect._Undecided("c2 vs c0: no result")
    calls, _ = fake_compare(monkeypatch, answers)
    out, _ = bisect_main(repo_dir)
    assert [b for _, b, _ in calls] == [shas[4], shas[2]]
    assert out.exit_code == gate.EXIT_BROKEN and not out.confirmed and out.found is None
    assert out.reason == (
        f"asv find named the good commit {shas[0][:12]} itself; interleaved bisection stopped: c2 vs c0: no result"
    )
    assert [(s["commit"], s["slower_than_good"]) for s in out.steps] == [(shas[4], True)]


def test_the_outcome_as_a_dict_is_a_copy_of_its_fields():
    out = bisect.BisectOutcome(0, "f" * 40, True, "why", ["c"], steps=[{"commit": "c"}])
    d = out.as_dict()
    assert d == {
        "exit_code": 0,
        "found": "f" * 40,
        "confirmed": True,
        "reason": "why",
        "commits": ["c"],
        "measured": {},
        "confirmation": [],
        "log_path": None,
        "asv_find_pick": None,
        "steps": [{"commit": "c"}],
    }
    d["found"] = None
    assert out.found == "f" * 40
    assert json.loads(json.dumps(d))["steps"] == [{"commit": "c"}]


# ----------------------------------------------------------------------------- asv find's output


def find_with(monkeypatch, tmp_path, returncode: int, stdout: str, stderr: str = ""):
    monkeypatch.setattr(bisect.procs, "run_bounded", lambda cmd, **k: procs.Finished(returncode, stdout, stderr, 0.1))
    monkeypatch.setattr(bisect, "_measured", lambda results, commits: {"measured": results == tmp_path / "results"})
    conf = tmp_path / "asv.conf.json"
    conf.write_text("{}")
    return bisect._asv_find(
        "b..a",
        BENCH,
        [BASE, HEAD],
        root=tmp_path,
        conf=conf,
        machine="m",
        launch="spawn",
        work=tmp_path,
        quick=True,
        log=lambda m: None,
    )


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_asv_find_names_the_hash_after_greatest_regression_found(tmp_path, monkeypatch, stream):
    text = "measuring\nGreatest regression found: 0123abc\n"
    out, sha = find_with(monkeypatch, tmp_path, 0, *((text, "") if stream == "stdout" else ("", text)))
    assert sha == "0123abc"
    assert out.exit_code == gate.EXIT_BROKEN and out.found is None and out.reason == ""
    assert out.commits == [BASE, HEAD] and out.log_path == str(tmp_path / "asv-find.log")
    assert out.measured == {"measured": True}


def test_asv_find_failing_after_naming_a_hash_names_none_with_its_last_three_lines(tmp_path, monkeypatch):
    out, sha = find_with(monkeypatch, tmp_path, 1, "one\ntwo\nGreatest regression found: 0123abc\n", "  four \nfive\n")
    assert sha is None
    assert out.reason == "asv find did not name a commit (exit 1): Greatest regression found: 0123abc | four | five"


def test_a_six_digit_hash_is_not_a_pick(tmp_path, monkeypatch):
    _, sha = find_with(monkeypatch, tmp_path, 0, "Greatest regression found: 0123ab\n")
    assert sha is None


# ----------------------------------------------------------------------------- one comparison step


def compare_table(monkeypatch, table: dict):
    seen = {}

    def discover(root, conf, machine, commit, **kw):
        seen["discover"] = dict(commit=commit, **kw)
        return {"meta": commit}, None, None

    def measure_pair(roles, bench, **kw):
        seen["measure"] = dict(roles=roles, bench=bench, **kw)
        return table, set(), [], [], []

    monkeypatch.setattr(bisect.check, "discover", discover)
    monkeypatch.setattr(bisect.check, "measure_pair", measure_pair)
    return seen


def compare(tmp_path):
    return bisect._compare(
        BASE,
        HEAD,
        tag="step3",
        root=tmp_path,
        conf=tmp_path / "asv.conf.json",
        machine="m",
        pattern="suite",
        settings=CheckSettings(GateConfig(), rounds=4),
        quick=False,
        launch="spawn",
        work=tmp_path,
    )


def side(median: float, n: int = 20) -> Side:
    return Side(present=True, samples=[median * (1 + 0.001 * (i % 5)) for i in range(n)])


def test_a_step_returns_its_verdicts_worst_first_measured_as_check_measures(tmp_path, monkeypatch):
    table = {
        ("suite.a.track_time", ()): {"base": side(1e-3), "head": side(1e-3)},
        ("suite.b.track_time", ()): {"base": side(1e-3), "head": side(0.5e-3)},
        ("suite.c.track_time", ()): {"base": side(1e-3), "head": side(2e-3)},
    }
    seen = compare_table(monkeypatch, table)
    vs = compare(tmp_path)
    assert [(v.benchmark, v.status) for v in vs] == [
        ("suite.c.track_time", Status.SLOWER),
        ("suite.b.track_time", Status.FASTER),
        ("suite.a.track_time", Status.SAME),
    ]
    step = tmp_path / "step3"
    assert step.is_dir()
    assert seen["discover"] == dict(commit=BASE, work=step, launch="spawn", tag="base", bench="suite", quick=False)
    m = seen["measure"]
    assert (m["roles"], m["bench"], m["rounds"], m["tag"], m["base_meta"], m["user_bench"], m["work"]) == (
        {"base": BASE, "head": HEAD},
        ["suite"],
        4,
        "measure",
        {"meta": BASE},
        "suite",
        step,
    )


@pytest.mark.parametrize("table", ["empty", "run-on-neither-side"])
def test_a_step_that_measured_no_series_is_undecided_naming_both_commits_and_the_pattern(tmp_path, monkeypatch, table):
    rows = {} if table == "empty" else {("suite.a.track_time", ()): {"base": Side.absent(), "head": Side.absent()}}
    compare_table(monkeypatch, rows)
    with pytest.raises(bisect._Undecided) as info:
        compare(tmp_path)
    assert str(info.value) == f"{HEAD[:12]} vs {BASE[:12]}: no series matching 'suite' was measured"


# ----------------------------------------------------------------------------- what asv find measured


def fake_results(monkeypatch, series: dict):
    seen = {}

    def load(results_dir, with_records=True, **kw):
        seen.update(results_dir=results_dir, with_records=with_records)
        return SimpleNamespace(
            series={
                key: SimpleNamespace(points=[SimpleNamespace(commit=c, value=v) for c, v in points])
                for key, points in series.items()
            }
        )

    monkeypatch.setattr("harness.store.results.load", load)
    return seen


def test_no_results_folder_means_nothing_measured(tmp_path, monkeypatch):
    fake_results(monkeypatch, {})
    monkeypatch.setattr("harness.store.results.load", lambda *a, **k: pytest.fail("loaded a missing folder"))
    assert bisect._measured(tmp_path / "results", [BASE, HEAD]) == {}


def test_the_medians_are_per_commit_in_range_order_with_other_commits_last(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    torch = SeriesKey("m", BENCH, (("provider", "'torch'"),), "cpu")
    softmax = SeriesKey("m", "suite.softmax.track_time", (), "cpu")
    other, mid = "c" * 40, "d" * 40
    seen = fake_results(
        monkeypatch,
        {
            torch: [(other, 5e-3), (HEAD, 2e-3), (mid, None), (BASE, 1e-3)],
            softmax: [(BASE, 3e-3), (HEAD, 4e-3)],
        },
    )
    out = bisect._measured(tmp_path / "results", [BASE, mid, HEAD])
    assert seen == {"results_dir": tmp_path / "results", "with_records": False}
    assert list(out) == [BASE, mid, HEAD, other]
    label = torch.case_label()
    assert out == {
        BASE: {label: 1e-3, "suite.softmax.track_time": 3e-3},
        mid: {label: None},
        HEAD: {label: 2e-3, "suite.softmax.track_time": 4e-3},
        other: {label: 5e-3},
    }
