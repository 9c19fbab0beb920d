"""Fast unit tests of the gate's pure decision logic (harness/gate.py) and of the
pure helpers of harness/check.py (configuration, asv log parsing, selection regex)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.gate import decide as gate
from harness.gate.check import CheckError, parse_errors, parse_settings, series_regex
from harness.gate.decide import Acknowledgement, GateConfig, SeriesInput, Side, Status

PARAMS = (("provider", "torch"), ("shape", "1048576"), ("dtype", "fp32"), ("timing", "cpu"))
NAME = "suite.vector_add.track_time"


def samples(median_s: float, n: int = 30, rel_sd: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median_s * (1 + rel_sd * rng.standard_normal(n)))


def series(base=None, head=None, name=NAME, params=PARAMS) -> SeriesInput:
    def side(x):
        if isinstance(x, Side):
            return x
        return Side(present=True, samples=x) if x is not None else Side.absent()

    return SeriesInput(name, params, side(base), side(head))


# ------------------------------------------------------------------ statistics


def test_sample_stats_ratio_ci_and_determinism():
    b, h = samples(1e-3, seed=1), samples(2e-3, seed=2)
    st = gate.sample_stats(b, h)
    assert st.ratio == pytest.approx(2.0, rel=0.02)
    assert st.ci_low < st.ratio < st.ci_high
    assert st.p_value < 1e-6
    assert gate.sample_stats(b, h) == st  # fixed seed: same input, same output


def test_sample_stats_drops_invalid_and_rejects_empty():
    st = gate.sample_stats([1.0, float("nan"), 0.0, -1.0, 1.0], [1.0, float("inf"), 1.0])
    assert (st.n_base, st.n_head) == (2, 2)
    with pytest.raises(ValueError):
        gate.sample_stats([float("nan")], [1.0])


def test_identical_constant_samples_are_same():
    v = gate.classify(series([1e-3] * 10, [1e-3] * 10))
    assert v.status is Status.SAME and v.stats.p_value == 1.0


# ------------------------------------------------------------------ classification


def test_twice_as_slow_is_slower_and_clear_cut():
    v = gate.classify(series(samples(1e-3, seed=1), samples(2e-3, seed=2)))
    assert v.status is Status.SLOWER and v.blocking
    assert not v.borderline and not gate.needs_remeasure(v)
    assert "+100" in v.reason or "+9" in v.reason or "+10" in v.reason


def test_just_over_threshold_is_borderline_slower():
    v = gate.classify(series(samples(1e-3, n=60, rel_sd=0.002, seed=1), samples(1.065e-3, n=60, rel_sd=0.002, seed=2)))
    assert v.status is Status.SLOWER
    assert v.borderline and gate.needs_remeasure(v)


def test_significant_but_small_change_is_same():
    v = gate.classify(series(samples(1e-3, n=60, rel_sd=0.002, seed=1), samples(1.03e-3, n=60, rel_sd=0.002, seed=2)))
    assert v.status is Status.SAME
    assert v.stats.p_value < 0.01 and "significant" in v.reason


def test_large_but_noisy_change_is_uncertain_and_shown():
    rng = np.random.default_rng(3)
    base = list(1e-3 * rng.lognormal(0, 0.8, 8))
    head = list(1.3e-3 * rng.lognormal(0, 0.8, 8))
    v = gate.classify(series(base, head))
    assert v.stats.ratio > 1.05 and v.stats.p_value >= 0.01
    assert v.status is Status.UNCERTAIN and not v.blocking
    assert v.borderline  # an uncertain slowdown is re-measured before being reported
    assert "not significant" in v.reason


def test_faster():
    v = gate.classify(series(samples(2e-3, seed=1), samples(1e-3, seed=2)))
    assert v.status is Status.FASTER and not v.blocking


def test_too_few_samples():
    v = gate.classify(series([1e-3, 1.01e-3, 0.99e-3], [2e-3, 2.02e-3, 1.98e-3]))
    assert v.status is Status.UNCERTAIN and "too few samples" in v.reason
    v = gate.classify(series([1e-3] * 3, [1.001e-3] * 3))
    assert v.status is Status.SAME


def test_broken_new_removed():
    failed = Side(present=True, failed=True, error="WrongResult: vector_add[1823, fp32]: not close")
    v = gate.classify(series(samples(1e-3), failed))
    assert v.status is Status.BROKEN and "WrongResult" in v.reason
    v = gate.classify(series(failed, failed))
    assert v.status is Status.BROKEN and "fails on base too" in v.reason
    v = gate.classify(series(samples(1e-3), None))
    assert v.status is Status.REMOVED
    v = gate.classify(series(None, samples(1e-3)))
    assert v.status is Status.NEW and "not run on base" in v.reason
    v = gate.classify(series(failed, samples(1e-3)))
    assert v.status is Status.NEW and "fails on base" in v.reason
    assert gate.classify(series(None, None)) is None
    v = gate.classify(series(samples(1e-3), Side(present=True, failed=True)))
    assert v.status is Status.BROKEN and "no error message" in v.reason


def test_per_benchmark_threshold_override():
    cfg = GateConfig(thresholds=(("suite.matmul.*", 0.5), ("*provider=torch*", 0.2)))
    assert cfg.threshold_for("suite.matmul.track_time", "x") == (0.5, "override 'suite.matmul.*'")
    assert cfg.threshold_for(NAME, gate.series_label(NAME, PARAMS))[0] == 0.2
    assert cfg.threshold_for("suite.softmax.track_time", "suite.softmax.track_time(provider=triton)") == (
        0.05,
        "default",
    )
    v = gate.classify(series(samples(1e-3, seed=1), samples(1.12e-3, seed=2)), cfg)
    assert v.status is Status.SAME and v.threshold == 0.2
    assert gate.classify(series(samples(1e-3, seed=1), samples(1.12e-3, seed=2))).status is Status.SLOWER


@pytest.mark.parametrize(
    "kw",
    [
        dict(threshold=0),
        dict(threshold=-0.1),
        dict(alpha=0.7),
        dict(min_samples=1),
        dict(borderline_factor=0.5),
        dict(confidence=1.0),
        dict(bootstrap=10),
        dict(thresholds=(("x", "0.1"),)),
        dict(thresholds=(("", 0.1),)),
    ],
)
def test_gate_config_validates(kw):
    with pytest.raises(ValueError):
        GateConfig(**kw)


# ------------------------------------------------------------------ re-measurement


def test_confirm_requires_the_remeasurement_to_be_slower():
    first_in = series(samples(1e-3, n=60, rel_sd=0.002, seed=1), samples(1.065e-3, n=60, rel_sd=0.002, seed=2))
    first = gate.classify(first_in)
    assert first.status is Status.SLOWER and first.borderline
    # the slowdown does not reproduce: pooled may still look slower, but it never blocks
    again = series(samples(1e-3, n=60, rel_sd=0.002, seed=3), samples(1.0e-3, n=60, rel_sd=0.002, seed=4))
    pooled = series(first_in.base.samples + again.base.samples, first_in.head.samples + again.head.samples)
    final = gate.confirm(first, again, pooled)
    assert final.status in (Status.UNCERTAIN, Status.SAME) and not final.blocking
    assert final.first == first.stats and final.remeasured is not None
    # it reproduces: SLOWER, with both measurements recorded
    again = series(samples(1e-3, n=60, rel_sd=0.002, seed=5), samples(1.07e-3, n=60, rel_sd=0.002, seed=6))
    pooled = series(first_in.base.samples + again.base.samples, first_in.head.samples + again.head.samples)
    final = gate.confirm(first, again, pooled)
    assert final.status is Status.SLOWER and final.blocking and "re-measured" in final.reason
    # a failure during the re-measurement is BROKEN
    again = series(samples(1e-3), Side(present=True, failed=True, error="RuntimeError: boom"))
    final = gate.confirm(first, again, again)
    assert final.status is Status.BROKEN and "re-measurement" in final.reason


# ------------------------------------------------------------------ exit codes


def _verdict(status: Status, **kw) -> gate.Verdict:
    return gate.Verdict(
        benchmark=kw.pop("benchmark", NAME),
        params=kw.pop("params", PARAMS),
        status=status,
        reason=kw.pop("reason", "synthetic"),
        **kw,
    )


def test_exit_codes():
    assert gate.exit_code([]) == 2  # nothing measured: could not decide
    assert gate.exit_code([_verdict(Status.SAME)]) == 0
    assert (
        gate.exit_code(
            [_verdict(Status.UNCERTAIN), _verdict(Status.NEW), _verdict(Status.REMOVED), _verdict(Status.FASTER)]
        )
        == 0
    )
    assert gate.exit_code([_verdict(Status.SAME), _verdict(Status.SLOWER)]) == 1
    assert gate.exit_code([_verdict(Status.SLOWER), _verdict(Status.BROKEN)]) == 2
    ack = Acknowledgement(pattern="*", reason="known", commit="a" * 40)
    assert gate.exit_code([_verdict(Status.SLOWER, acknowledged=ack)]) == 0


def test_256_broken_benchmarks_still_exit_2():
    # an exit code that counted failures would wrap 256 to 0 in a shell
    verdicts = [_verdict(Status.BROKEN, benchmark=f"suite.op{i}.track_time") for i in range(256)]
    assert gate.exit_code(verdicts) == 2
    verdicts = [_verdict(Status.SLOWER, benchmark=f"suite.op{i}.track_time") for i in range(256)]
    assert gate.exit_code(verdicts) == 1


# ------------------------------------------------------------------ acknowledgements


def test_parse_acknowledgement():
    a = gate.parse_acknowledgement("suite.vector_add.* reason=accuracy fix needs fp64 accumulation", "c" * 40, "kw")
    assert a.pattern == "suite.vector_add.*" and a.reason == "accuracy fix needs fp64 accumulation"
    assert a.matches(NAME, gate.series_label(NAME, PARAMS))
    assert not a.matches("suite.softmax.track_time", "suite.softmax.track_time()")
    for bad in ("suite.vector_add.*", "reason=only a reason", "pattern reason=", "pattern reason=   "):
        with pytest.raises(ValueError):
            gate.parse_acknowledgement(bad, "c" * 40)


def test_acknowledgement_turns_block_into_warning_only_for_slower():
    ack = Acknowledgement(pattern="*vector_add*provider=torch*", reason="known", commit="d" * 40)
    vs = [
        _verdict(Status.SLOWER),
        _verdict(Status.BROKEN),
        _verdict(Status.SLOWER, benchmark="suite.softmax.track_time"),
    ]
    out = gate.apply_acknowledgements(vs, [ack])
    assert out[0].acknowledged == ack and not out[0].blocking
    assert out[1].acknowledged is None  # a broken kernel is not a trade-off
    assert out[2].blocking
    assert gate.exit_code(out) == 2
    assert gate.exit_code([out[0], out[2]]) == 1
    assert gate.exit_code([out[0]]) == 0


# ------------------------------------------------------------------ summary


def _report(verdicts, **kw):
    r = {
        "base": "b" * 40,
        "head": "h" * 40,
        "machine": "host-nvidia-h100-80gb-hbm3",
        "device": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"},
        "config": {"threshold": 0.05, "alpha": 0.01, "rounds": 2, "thresholds": []},
        "exit_code": gate.exit_code(verdicts),
        "counts": gate.counts(verdicts),
        "remeasured": 0,
        "problems": [],
        "warnings": [],
        "acknowledgements": [],
        "series": [v.as_dict() for v in gate.sort_worst_first(verdicts)],
    }
    r.update(kw)
    return r


def test_summary_worst_first_names_device_and_escapes():
    st = gate.sample_stats(samples(1e-3, seed=1), samples(2e-3, seed=2))
    vs = [
        _verdict(Status.SAME, benchmark="suite.a.track_time"),
        _verdict(Status.SLOWER, benchmark="suite.b.track_time", stats=st),
        _verdict(Status.BROKEN, benchmark="suite.c.track_time", reason="RuntimeError: <script>alert(1)</script>"),
        _verdict(Status.UNCERTAIN, benchmark="suite.d.track_time"),
    ]
    md = gate.render_markdown(_report(vs))
    assert "NVIDIA H100 80GB HBM3" in md
    assert (
        md.index("suite.c.track_time")
        < md.index("suite.b.track_time")
        < md.index("suite.d.track_time")
        < md.index("suite.a.track_time")
    )
    assert "<script>" not in md
    assert "+100" in md or "+9" in md or "+10" in md
    assert "BROKEN or undecided" in md


def test_summary_truncated_under_limit_with_note():
    vs = [_verdict(Status.BROKEN, benchmark=f"suite.op{i}.track_time", reason="x" * 300) for i in range(5000)]
    limit = 64 * 1024
    md = gate.render_markdown(_report(vs), limit_bytes=limit)
    assert len(md.encode()) <= limit
    assert "Truncated" in md and "more rows omitted" in md
    full = gate.render_markdown(_report(vs))
    assert len(full.encode()) <= gate.SUMMARY_LIMIT_BYTES
    n = int(re.search(r"(\d+) more rows omitted", full).group(1))
    assert 0 < n < 5000


def test_summary_acknowledged_row():
    ack = Acknowledgement(pattern="suite.*", reason="trade-off for accuracy", commit="e" * 40)
    vs = gate.apply_acknowledgements([_verdict(Status.SLOWER)], [ack])
    md = gate.render_markdown(_report(vs, acknowledgements=[ack.as_dict()]))
    assert "SLOWER (acknowledged)" in md and "trade-off for accuracy" in md and "passed" in md


# ------------------------------------------------------------------ check.py pure helpers


ASV_LOG = """\
[ 0.00%] · For kernelwatch commit 3cdc56d8 <broken>:
[ 0.00%] ·· Benchmarking kernelwatch-py3.11
[50.00%] ··· suite.softmax.track_time                                1/2 failed
[50.00%] ··· =============== ========================
             --               shape / dtype / timing
             =============== ========================
                  torch               failed
             =============== ========================
             For parameters: 'torch', '1024x1024', 'fp32', 'cpu'
             Traceback (most recent call last):
               File "/x/kernels/softmax.py", line 45, in torch_softmax
                 raise RuntimeError('deliberate failure in torch_softmax')
             RuntimeError: deliberate failure in torch_softmax

[100.00%] ··· suite.vector_add.track_time                                 failed
[100.00%] ··· ========== ======================
              For parameters: 'torch', '1048576', 'fp32', 'cpu'
              Traceback (most recent call last):
                File "/x/kernels/_check.py", line 52, in compare
                  raise WrongResult(f"{label}: {exc}") from None
              kernels._check.WrongResult: vector_add[1823, fp32]: Tensor-likes are not close!

              Mismatched elements: 1823 / 1823 (100.0%)
[100.00%] · For kernelwatch commit 00e9022a <main>:
[100.00%] ··· suite.vector_add.track_time                                     ok
"""


def test_parse_errors_from_asv_output():
    errs = parse_errors(ASV_LOG)
    assert (
        errs[("3cdc56d8", "suite.softmax.track_time", ("torch", "1024x1024", "fp32", "cpu"))]
        == "RuntimeError: deliberate failure in torch_softmax"
    )
    assert errs[("3cdc56d8", "suite.vector_add.track_time", ("torch", "1048576", "fp32", "cpu"))].startswith(
        "WrongResult: vector_add[1823, fp32]"
    )
    assert not any(k[0] == "00e9022a" for k in errs)


def test_series_regex_selects_one_combination():
    rx = re.compile(series_regex(NAME, PARAMS))
    assert rx.search("suite.vector_add.track_time('torch', '1048576', 'fp32', 'cpu')")
    assert not rx.search("suite.vector_add.track_time('torch', '16777216', 'fp32', 'cpu')")
    assert not rx.search("suite.vector_add.track_time('triton', '1048576', 'fp32', 'cpu')")


def test_parse_settings():
    s = parse_settings({"threshold": 0.1, "alpha": 0.05, "rounds": 4, "thresholds": {"suite.matmul.*": 0.2}}, "t")
    assert (s.gate.threshold, s.gate.alpha, s.rounds) == (0.1, 0.05, 4)
    assert s.gate.thresholds == (("suite.matmul.*", 0.2),)
    assert parse_settings({"threshold": 0.1}, "t", threshold=0.3).gate.threshold == 0.3
    for bad in (
        {"treshold": 0.1},
        {"threshold": "5%"},
        {"rounds": 0},
        {"rounds": 1.5},
        {"thresholds": [1]},
        {"thresholds": {"x": -1}},
        {"remeasure": "yes"},
    ):
        with pytest.raises(CheckError):
            parse_settings(bad, "kernelwatch.toml")


def test_first_bad_binary_search():
    from harness.gate.bisect import first_bad

    for n in range(2, 40):
        for k in range(1, n):
            calls = []

            def is_bad(i, k=k, calls=calls):
                calls.append(i)
                return i >= k

            assert first_bad(n, is_bad) == k
            assert len(calls) <= n.bit_length() + 1
    with pytest.raises(ValueError):
        first_bad(5, lambda i: False)
    with pytest.raises(ValueError):
        first_bad(1, lambda i: True)


def test_round_aware_interval_does_not_trust_one_process():
    # Two rounds (processes) per side; the rounds differ far more than the samples
    # within a round, as on a shared CPU. Pooled samples make the test "certain";
    # the two-stage bootstrap over rounds does not.
    br = [samples(1.0e-3, n=40, rel_sd=0.002, seed=1), samples(1.4e-3, n=40, rel_sd=0.002, seed=2)]
    hr = [samples(1.3e-3, n=40, rel_sd=0.002, seed=3), samples(1.5e-3, n=40, rel_sd=0.002, seed=4)]
    flat = series(br[0] + br[1], hr[0] + hr[1])
    assert gate.classify(flat).stats.p_value < 1e-6  # Mann-Whitney alone: "certain"
    rounds = series(Side(True, samples=br[0] + br[1], rounds=br), Side(True, samples=hr[0] + hr[1], rounds=hr))
    v = gate.classify(rounds)
    assert v.status is Status.UNCERTAIN and v.stats.ci_low < 1 and v.stats.p_value < 0.01
    assert (v.stats.rounds_base, v.stats.rounds_head) == (2, 2)
    assert "rounds includes no change" in v.reason
    # consistent rounds: a real 2x slowdown stays SLOWER
    hr2 = [samples(2.0e-3, n=40, rel_sd=0.002, seed=5), samples(2.2e-3, n=40, rel_sd=0.002, seed=6)]
    v = gate.classify(
        series(Side(True, samples=br[0] + br[1], rounds=br), Side(True, samples=hr2[0] + hr2[1], rounds=hr2))
    )
    assert v.status is Status.SLOWER and v.stats.ci_low > 1.2


def test_bootstrap_with_unequal_rounds_is_deterministic():
    br = [samples(1e-3, n=5, seed=1), samples(1e-3, n=50, seed=2), [1e-3]]
    hr = [samples(1.1e-3, n=17, seed=3)]
    a = gate.sample_stats(br[0] + br[1] + br[2], hr[0], base_rounds=br, head_rounds=hr)
    assert a == gate.sample_stats(br[0] + br[1] + br[2], hr[0], base_rounds=br, head_rounds=hr)
    assert a.ci_low < a.ratio < a.ci_high and a.rounds_base == 3


# ------------------------------------------------------------------ run_check's problems path


def _two_commit_repo(path):
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {
        "GIT_AUTHOR_NAME": "kw",
        "GIT_AUTHOR_EMAIL": "kw@example.invalid",
        "GIT_COMMITTER_NAME": "kw",
        "GIT_COMMITTER_EMAIL": "kw@example.invalid",
        "PATH": "/usr/bin:/bin",
    }
    path.mkdir(parents=True)
    shutil.copy2(root / "asv.conf.json", path / "asv.conf.json")
    (path / "benchmarks").mkdir()  # each side's suite is exported from its commit
    (path / "benchmarks" / "__init__.py").write_text("")

    def git(*args):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    (path / "NOTES.md").write_text("head\n")
    git("add", "-A")
    git("commit", "-q", "-m", "head")
    return path


@pytest.mark.parametrize("measured", ["problem", "nothing"])
def test_run_check_exits_2_when_it_could_not_measure(tmp_path, monkeypatch, measured):
    """The gate fails closed: a measurement problem (asv stored no result) or an
    empty measurement is BROKEN, exit 2, never a pass."""
    from harness.gate import check

    repo = _two_commit_repo(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path))  # write_machine_entry writes ~/.asv-machine.json
    monkeypatch.setattr(check, "discover", lambda *a, **k: ({}, set(), None))
    problems = ["asv stored no result for head 0123456789ab (exit 1): see the log"] if measured == "problem" else []
    monkeypatch.setattr(check, "measure_pair", lambda *a, **k: ({}, set(), [], list(problems), []))
    out = check.run_check("main~1", "main", repo=repo, json_out=tmp_path / "report.json", log=lambda m: None)
    assert out.exit_code == 2 and out.report["exit_code"] == 2
    assert out.verdicts == []
    if measured == "problem":
        assert out.report["problems"] == problems
    else:
        assert out.report["problems"] == ["no series was measured: nothing to compare (check --bench and the suite)"]


def test_bisect_stops_naming_the_commit_when_a_step_could_not_measure(tmp_path, monkeypatch):
    """bisect fails closed like the gate: asv find names the good commit itself, so the
    range is bisected with interleaved comparisons; the first one stores no result for
    the commit under test, and the outcome is exit 2 naming that commit and asv's
    problem, never "not slower" (mutations: the ``_Undecided`` handler of the
    interleaved bisection replaced; the message joined with ``>>``, a TypeError)."""
    from harness.gate import bisect, check

    repo = _two_commit_repo(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path))  # the machine entry is written under ~
    good, bad = check.resolve(repo, "main~1"), check.resolve(repo, "main")

    def fake_find(range_spec, benchmark, commits, **kw):
        out = bisect.BisectOutcome(gate.EXIT_BROKEN, None, False, "", commits)
        return out, commits[0][:12]  # the good commit: nothing for asv find to confirm

    problem = f"asv stored no result for head {bad[:12]} (exit 1): ImportError"
    monkeypatch.setattr(bisect, "_asv_find", fake_find)
    monkeypatch.setattr(check, "discover", lambda *a, **k: ({}, set(), None))
    monkeypatch.setattr(check, "measure_pair", lambda *a, **k: ({}, set(), [], [problem], []))
    out = bisect.run_bisect("main~1", "main", NAME, repo=repo, log=lambda m: None)
    assert out.exit_code == gate.EXIT_BROKEN and out.found is None and not out.confirmed
    assert out.reason == (
        f"asv find named the good commit {good[:12]} itself; interleaved bisection stopped: "
        f"{bad[:12]} vs {good[:12]}: {problem}"
    )


@pytest.mark.parametrize("head_lists", [True, False], ids=["head-lists-it", "head-lacks-it"])
def test_run_check_reads_heads_benchmark_list_before_probing_its_suite(tmp_path, monkeypatch, head_lists):
    """A benchmark of base's suite that head's measured ``benchmarks.json`` lists needs
    no probe of head's suite and compares as usual (exit 0); one head lacks is probed
    and BROKEN with the import error (exit 2) (mutation: the path
    ``measure-results / "benchmarks.json"`` built with ``%``, a TypeError)."""
    import json

    from harness.gate import check

    repo = _two_commit_repo(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path))
    params = (("provider", "torch"),)
    entry = {"name": NAME, "type": "track", "unit": "seconds", "param_names": ["provider"], "params": [["'torch'"]]}
    monkeypatch.setattr(check, "discover", lambda *a, **k: ({NAME: entry["params"]}, {(NAME, params)}, None))
    samples = [1e-3 * (1 + 0.001 * i) for i in range(15)]

    def fake_measure_pair(roles, bench, *, work, **kw):
        listed = {NAME: entry} if head_lists else {}
        (work / "measure-results").mkdir(parents=True, exist_ok=True)
        (work / "measure-results" / "benchmarks.json").write_text(json.dumps({"version": 2, **listed}))
        sides = {"base": Side(True, samples=samples), "head": Side(True, samples=samples)}
        return (
            ({(NAME, params): sides} if head_lists else {(NAME, params): {**sides, "head": Side(False)}}),
            set(),
            [],
            [],
            [],
        )

    probed = []

    def fake_probe(root, commit, work, ops, *, quick):
        probed.append(ops)
        return {"modules": {}, "ops": {"vector_add": "ImportError: broken on head"}, "problem": None}

    monkeypatch.setattr(check, "measure_pair", fake_measure_pair)
    monkeypatch.setattr(check, "probe_suite", fake_probe)
    out = check.run_check("main~1", "main", repo=repo, json_out=tmp_path / "report.json", log=lambda m: None)
    (v,) = out.verdicts
    if head_lists:
        assert out.exit_code == 0 and v.status is Status.SAME and probed == []
    else:
        assert out.exit_code == 2 and v.status is Status.BROKEN and probed == [["vector_add"]]
        assert "op 'vector_add' fails to import on head: ImportError: broken on head" in v.reason
