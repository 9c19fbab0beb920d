"""Unit tests of ``kernelwatch profile`` / ``triage``: the pure parts (kernel table,
change classification, diff, finding lookup, ncu parsing) and the Triton
compile-fact extraction against stand-ins for Triton's compiled kernels.
The end-to-end runs are in tests/test_triage_e2e.py."""

from __future__ import annotations

import json
from collections import namedtuple
from types import ModuleType, SimpleNamespace

import pytest

from harness import cli
from harness.gate import triage as T
from harness.measure import compile_facts as CF
from harness.measure import profile as P

Ev = namedtuple("Ev", "key count self_cpu_time_total self_device_time_total device_type")


def test_kernel_table_cpu_shares_order_and_marker():
    events = [
        Ev(P.ITERATION_MARK, 10, 50.0, 0.0, "DeviceType.CPU"),
        Ev("aten::add", 40, 300.0, 0.0, "DeviceType.CPU"),
        Ev("aten::mul", 10, 100.0, 0.0, "DeviceType.CPU"),
    ]
    rows = P.kernel_table(events, 10, "cpu")
    assert [r["name"] for r in rows] == ["aten::add", "aten::mul"]
    add = rows[0]
    assert add["calls_per_iter"] == 4 and add["self_us_per_iter"] == 30.0 and add["self_us_mean"] == 7.5
    assert add["share"] == 0.75 and sum(r["share"] for r in rows) == pytest.approx(1.0)


def test_kernel_table_cuda_counts_device_kernels_once():
    # the launching runtime call carries the kernel's device time too: not a second row
    events = [
        Ev("aten::softmax", 5, 40.0, 0.0, "DeviceType.CPU"),
        Ev("cuLaunchKernel", 5, 20.0, 25.0, "DeviceType.CPU"),
        Ev("triton_softmax_kernel", 5, 0.0, 25.0, "DeviceType.CUDA"),
        Ev("void at::native::copy_kernel", 5, 0.0, 5.0, "DeviceType.CUDA"),
    ]
    rows = P.kernel_table(events, 5, "cuda")
    assert [r["name"] for r in rows] == ["triton_softmax_kernel", "void at::native::copy_kernel"]
    assert rows[0]["self_us_per_iter"] == 5.0 and rows[0]["share"] == pytest.approx(25 / 30, abs=1e-4)


@pytest.mark.parametrize("iters,kind", [(0, "cpu"), (3, "tpu")])
def test_kernel_table_rejects_bad_arguments(iters, kind):
    with pytest.raises(ValueError):
        P.kernel_table([], iters, kind)


def test_classify_change():
    base, head = [10, 11, 10.5, 9.8, 10.2], [40, 42, 41, 39, 40.5]
    assert T.classify_change(base, head, 0.1, 100) == "slower"
    assert T.classify_change(head, base, 0.1, 100) == "faster"
    # one inverted pair of rounds still counts at alpha 0.01 (p = 2/252), two do not
    assert T.classify_change(base, [40, 42, 41, 39, 10.6], 0.1, 100) == "slower"  # 10.6 < 11 only
    assert T.classify_change(base, [40, 42, 41, 39, 10.4], 0.1, 100) == "same"  # 10.4 < 10.5 and 11
    # 3 rounds a side cannot reach p <= 0.01 (smallest p = 1/20): never named
    assert T.classify_change(base[:3], head[:3], 0.1, 100) == "same"
    assert T.smallest_p(3, 3) == pytest.approx(0.05)
    # beyond the threshold in the median, but the rounds overlap: not named
    assert T.classify_change([10, 30, 10, 12, 28], [15, 9, 16, 11, 29], 0.1, 100) == "same"
    # separated and 2x, but moves under 1% of the case: noise-sized, not named
    assert T.classify_change([0.2, 0.21, 0.2, 0.22, 0.2], [0.4, 0.41, 0.4, 0.42, 0.4], 0.1, 1000) == "same"
    assert T.classify_change(base, [b * 1.05 for b in base], 0.1, 100) == "same"
    with pytest.raises(ValueError):
        T.classify_change([1.0], [1.0], 0.1, None, alpha=0)
    with pytest.raises(ValueError):
        T.classify_change([], [1.0], 0.1, None)
    with pytest.raises(ValueError):
        T.classify_change([1.0], [1.0], 0, None)


def _row(us_add, calls_add, extra=None, wall=None):
    ks = [
        {"name": "aten::add", "self_us_per_iter": us_add, "calls_per_iter": calls_add},
        {"name": "aten::fill_", "self_us_per_iter": 3.0, "calls_per_iter": 1},
    ]
    ks += extra or []
    return {
        "status": "ok",
        "wall_us_per_iter": wall or (us_add + 10),
        "kernels": ks,
        "trace": "t.json.gz",
        "launch_config": {},
        "compile_facts": {"status": "not_applicable"},
    }


def test_diff_case_names_the_slowed_op_first():
    base = [_row(100 + i, 1, [{"name": "aten::empty", "self_us_per_iter": 5.0, "calls_per_iter": 1}]) for i in range(5)]
    head = [
        _row(400 + i, 4, [{"name": "aten::copy_", "self_us_per_iter": 50.0, "calls_per_iter": 1}]) for i in range(5)
    ]
    d = T.diff_case("case", base, head, 0.1)
    assert d["status"] == "slower" and d["first"] == "aten::add"
    by = {k["name"]: k for k in d["kernels"]}
    assert d["kernels"][0]["name"] == "aten::add"
    assert (
        by["aten::add"]["launches_changed"]
        and by["aten::add"]["base_calls"] == 1
        and by["aten::add"]["head_calls"] == 4
    )
    assert by["aten::copy_"]["status"] == "appeared" and by["aten::empty"]["status"] == "disappeared"
    assert by["aten::fill_"]["status"] == "same" and not by["aten::fill_"]["launches_changed"]
    assert T.exit_code_for([d], []) == T.EXIT_SLOWER
    md = T.render_markdown(
        {
            "base": "a" * 40,
            "head": "b" * 40,
            "config": {"rounds": 5, "iters": 20, "threshold": 0.1},
            "exit_code": 1,
            "cases": [d],
            "environment": {},
        }
    )
    assert "Most of the difference: `aten::add`" in md and "1 -> 4" in md


def test_diff_case_unchanged_code_names_nothing():
    base = [_row(100 + i, 1) for i in range(5)]
    head = [_row(102 - i, 1) for i in range(5)]
    d = T.diff_case("case", base, head, 0.1)
    assert d["first"] is None and d["status"] == "same"
    assert T.exit_code_for([d], []) == T.EXIT_OK
    assert T.exit_code_for([d], ["head: profiler died"]) == T.EXIT_BROKEN


def test_diff_facts_reports_autotune_and_compiler_changes():
    base = {
        "status": "ok",
        "triton": "3.3.0",
        "autotune_config": {"BLOCK_SIZE_M": 128, "num_warps": 8},
        "kernels": [
            {
                "name": "matmul_kernel",
                "num_warps": 8,
                "num_stages": 3,
                "registers": 128,
                "spills": 0,
                "shared_bytes": 65536,
            }
        ],
    }
    head = {
        "status": "ok",
        "triton": "3.4.0",
        "autotune_config": {"BLOCK_SIZE_M": 64, "num_warps": 8},
        "kernels": [
            {
                "name": "matmul_kernel",
                "num_warps": 8,
                "num_stages": 3,
                "registers": 168,
                "spills": 12,
                "shared_bytes": 65536,
            }
        ],
    }
    ch = {c["field"]: (c["base"], c["head"]) for c in T.diff_facts(base, head)}
    assert ch == {
        "triton": ("3.3.0", "3.4.0"),
        "autotune_config.BLOCK_SIZE_M": (128, 64),
        "matmul_kernel.registers": (128, 168),
        "matmul_kernel.spills": (0, 12),
    }
    assert T.diff_facts(base, json.loads(json.dumps(base))) == []


def test_diff_environment():
    a = {"torch": "2.13.0", "triton": "3.9.0", "cuda": None, "device": "x"}
    assert T.diff_environment(a, dict(a)) == []
    assert T.diff_environment(a, {**a, "triton": "3.8.0"}) == [{"key": "triton", "base": "3.9.0", "head": "3.8.0"}]


def _analysis(tmp_path):
    key = {
        "machine": "m",
        "benchmark": "suite.vector_add.track_time",
        "params": {"provider": "torch", "shape": "1048576", "dtype": "fp32", "timing": "cpu"},
    }
    pairs = {**key, "params": [[k, v] for k, v in key["params"].items()]}  # as the analysis report writes it
    rep = {
        "findings": [
            {"status": "regression", "series": "s", "key": pairs, "commit_range": ["a" * 40, "b" * 40]},
            {"status": "regression", "series": "t", "key": key, "commit_range": [None, "b" * 40]},
        ],
        "events": [
            {
                "id": "ev-bbbbbbbb",
                "status": "regression",
                "commit_range": ["c" * 40, "d" * 40],
                "series": [{"key": key, "status": "regression"}],
            }
        ],
    }
    p = tmp_path / "analysis.json"
    p.write_text(json.dumps(rep))
    return p


def test_from_finding_event_and_index(tmp_path):
    p = _analysis(tmp_path)
    base, head, exact, what = T.from_finding(p, "ev-bbbbbbbb")
    assert (base, head) == ("c" * 40, "d" * 40) and "event" in what
    assert exact == [
        {
            "benchmark": "suite.vector_add.track_time",
            "params": {"provider": "torch", "shape": "1048576", "dtype": "fp32", "timing": "cpu"},
        }
    ]
    assert T.from_finding(p, "f0")[:3] == ("a" * 40, "b" * 40, exact)
    with pytest.raises(T.TriageError, match="no event or finding"):
        T.from_finding(p, "ev-nothere")
    with pytest.raises(T.TriageError, match="no commit range"):
        T.from_finding(p, "f1")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(T.TriageError, match="bad.json"):
        T.from_finding(tmp_path / "bad.json", "f0")


def test_select_cases_pattern_and_exact():
    cases = [
        P.CaseSpec(
            "suite.vector_add.track_time",
            "vector_add",
            (("provider", p), ("shape", "1048576"), ("dtype", "fp32"), ("timing", "cpu")),
        )
        for p in ("torch", "triton")
    ]
    assert cases[0].label == "suite.vector_add.track_time('torch', '1048576', 'fp32', 'cpu')"
    assert P.select_cases(cases, r"vector_add.*'torch'") == cases[:1]
    assert P.select_cases(cases, "softmax") == []
    assert (
        P.select_cases(
            cases,
            None,
            [{"benchmark": "suite.vector_add.track_time", "params": {"provider": "triton", "machine": "ignored"}}],
        )
        == cases[1:]
    )
    assert cases[0].slug != cases[1].slug
    with pytest.raises(ValueError, match="bad benchmark pattern"):
        P.select_cases(cases, "(")


def test_parse_ncu_csv():
    header = '"ID","Process ID","Kernel Name",' + ",".join(f'"{m}"' for m in P.NCU_METRICS)
    units = '"","","",' + ",".join('"%"' for _ in P.NCU_METRICS)
    row = '"0","123","softmax_kernel",' + ",".join(f'"{v}"' for v in ("81.5", "40.1", "77.0", "32", "0", "1,024"))
    rows = P.parse_ncu_csv("==PROF== Connected\nprogram output\n" + "\n".join([header, units, row]))
    assert rows == [
        {
            "name": "softmax_kernel",
            "dram_throughput_pct": 81.5,
            "sm_throughput_pct": 40.1,
            "achieved_occupancy_pct": 77.0,
            "registers_per_thread": 32.0,
            "local_load_instructions": 0.0,
            "local_store_instructions": 1024.0,
        }
    ]
    assert P.parse_ncu_csv("==PROF== no kernels were profiled") == []


def test_ncu_unavailable_reasons(monkeypatch):
    assert "CUDA" in P.ncu_unavailable_reason("cpu")
    monkeypatch.setattr(P.shutil, "which", lambda name: None)
    assert "not on PATH" in P.ncu_unavailable_reason("cuda")
    monkeypatch.setattr(P.shutil, "which", lambda name: "/usr/bin/ncu")
    assert P.ncu_unavailable_reason("cuda") is None


Meta = namedtuple("Meta", "name num_warps num_stages num_ctas shared")


class FakeCompiled:
    def __init__(self, name, function, regs, spills, warps=4, stages=3, shared=1024):
        self.name, self.function, self.n_regs, self.n_spills, self.hash = name, function, regs, spills, f"h{function}"
        self.metadata = Meta(name, warps, stages, 1, shared)


def test_facts_from_compiled():
    f = CF.facts_from_compiled(FakeCompiled("k", 7, 40, 2, warps=8, stages=4, shared=49152))
    assert f == {
        "name": "k",
        "num_warps": 8,
        "num_stages": 4,
        "num_ctas": 1,
        "registers": 40,
        "spills": 2,
        "shared_bytes": 49152,
        "hash": "h7",
    }


def test_launched_kernels_reports_only_what_the_call_launched():
    from triton import knobs

    used, other = FakeCompiled("k_used", 11, 40, 0), FakeCompiled("k_other_shape", 12, 64, 3)
    jit = SimpleNamespace(device_caches={0: ({"key1": used, "key2": other}, None, None, None, None)})
    autotuner = SimpleNamespace(fn=jit)  # @triton.autotune keeps the JITFunction in .fn
    mod = ModuleType("fake_kernels")
    mod.kernel = autotuner

    def call():  # what Triton's launcher does around a launch of ``used``
        knobs.runtime.launch_enter_hook(SimpleNamespace(data={"name": "k_used", "function": 11, "stream": 0}))

    assert CF.launched_kernels(call, mod) == [used]
    n_hooks = len(knobs.runtime.launch_enter_hook.calls)
    CF.launched_kernels(call, mod)
    assert len(knobs.runtime.launch_enter_hook.calls) == n_hooks  # the hook is removed again


def test_compile_facts_under_the_interpreter_and_for_torch():
    import kernels

    op = kernels.get_op("softmax")
    inputs = op.make_inputs((19, 19), "fp32", "cpu")
    for name, status in (("triton", "unavailable"), ("torch", "not_applicable")):
        prov = op.providers[name]
        case = SimpleNamespace(provider=prov, inputs=inputs, call=lambda p=prov: p.fn(*inputs), device="cpu")
        facts = CF.compile_facts(case)
        assert facts["status"] == status
    assert facts["reason"] == "torch provider: no Triton kernel"
    prov = op.providers["triton"]
    facts = CF.compile_facts(SimpleNamespace(provider=prov, inputs=inputs, call=None, device="cpu"))
    assert facts["reason"] == CF.INTERPRETER_REASON and facts["autotune_config"] == {"BLOCK_SIZE": 32, "num_warps": 4}
    assert "interpreter" in P.facts_summary(facts)
    broken = SimpleNamespace(
        provider=SimpleNamespace(backend="triton", config=None, fn=None), inputs=(), call=None, device="cpu"
    )
    assert CF.safe_compile_facts(SimpleNamespace())["status"] == "error"
    assert CF.compile_facts(broken)["status"] in ("unavailable", "error")


def test_cli_errors_are_one_line_and_exit_2(capsys, tmp_path):
    assert cli.main(["triage", "--benchmark", "x"]) == 2
    assert "give --base and --head" in capsys.readouterr().err
    assert cli.main(["triage", "--finding", "f0"]) == 2
    assert "--analysis" in capsys.readouterr().err
    assert cli.main(["triage", "--base", "HEAD", "--head", "HEAD", "--benchmark", "("]) == 2
    assert "bad benchmark pattern" in capsys.readouterr().err
    assert cli.main(["profile", "(", "--out", str(tmp_path)]) == 2
    assert "bad benchmark pattern" in capsys.readouterr().err
    assert cli.main(["profile", "x", "--commit", "no-such-ref", "--out", str(tmp_path)]) == 2
    assert "cannot resolve 'no-such-ref'" in capsys.readouterr().err


def test_record_carries_compile_facts(monkeypatch):
    from harness.core import devices
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", "1")
    case = bench.prepare("vector_add", "torch", (1023,), "fp32", "cpu")
    rec = bench.build_record(
        case, bench.measure(case), "suite.vector_add.track_time", "c" * 40, "m", devices.identify("cpu"), None
    )
    assert rec["compile_facts"] == {"status": "not_applicable", "reason": "torch provider: no Triton kernel"}
    json.dumps(rec, allow_nan=False)


def test_autotune_annotation_names_the_changed_config_compiler_and_kernel():
    from harness.analysis import autotune as AA

    def rec(block, triton, regs):
        return {
            "launch_config": {"BLOCK_SIZE_M": block, "num_warps": 8},
            "compile_facts": {
                "status": "ok",
                "triton": triton,
                "autotune_config": {},
                "kernels": [
                    {
                        "name": "matmul_kernel",
                        "num_warps": 8,
                        "num_stages": 3,
                        "registers": regs,
                        "spills": 0,
                        "shared_bytes": 65536,
                    }
                ],
            },
            "device": {"versions": {"triton": triton}},
        }

    b, a = AA.facts_from_record(rec(128, "3.3.0", 128)), AA.facts_from_record(rec(64, "3.4.0", 168))
    found = AA.changes(b, a)
    assert [x["evidence"]["what"] for x in found] == ["config", "compiler", "compiled_kernel"]
    assert found[0]["kind"] == "autotune_changed"
    assert found[0]["text"] == "autotune chose BLOCK_SIZE_M=64 instead of 128 here"
    assert "registers 128 -> 168" in found[2]["text"]
    assert AA.changes(b, AA.facts_from_record(rec(128, "3.3.0", 128))) == []  # negative control
    assert AA.changes(b, None) == [] and AA.facts_from_record({"launch_config": {}}) is None

    params = [["provider", "triton"], ["shape", "4096x4096x4096"]]
    facts = {
        AA.facts_key("m", "suite.matmul.track_time", dict(params), "c1"): b,
        AA.facts_key("m", "suite.matmul.track_time", dict(params), "c2"): a,
    }
    key = {"machine": "m", "benchmark": "suite.matmul.track_time", "params": params, "timing": "cold"}
    report = {
        "findings": [{"key": key, "commit_range": ["c1", "c2"]}, {"key": key, "commit_range": ["c0", "c1"]}],
        "events": [{"id": "ev-c2", "commit_range": ["c1", "c2"], "series": [{"key": key}]}],
    }
    assert AA.annotate(report, facts) == 6
    assert [x["kind"] for x in report["findings"][0]["annotations"]] == ["autotune_changed"] * 3
    assert "annotations" not in report["findings"][1]  # no facts for c0: nothing claimed
    assert len(report["events"][0]["annotations"]) == 3
    assert AA.annotate(report, facts) == 0  # idempotent


def test_build_report_fails_closed_and_notes_one_sided_cases(tmp_path):
    ok = {
        "label": "a",
        "benchmark": "b",
        "params": {},
        "status": "ok",
        "wall_us_per_iter": 10.0,
        "trace": None,
        "kernels": [{"name": "k", "self_us_per_iter": 9.0, "calls_per_iter": 1}],
    }
    wrong = {"label": "a", "status": "failed", "reason": "WrongResult: max abs error 3.0"}
    new = {"label": "n", "status": "ok", "wall_us_per_iter": 1.0, "trace": None, "kernels": []}
    gone = {"label": "n", "status": "skipped", "reason": "op n has no provider 'torch' at this commit"}

    def side(*cases):
        return [{"cases": [dict(c) for c in cases], "environment": {"torch": "2.13.0"}} for _ in range(5)]

    kw = dict(
        threshold=0.1,
        rounds=5,
        iters=20,
        warmup=3,
        quick=True,
        pattern="x",
        exact=None,
        described=None,
        out_dir=tmp_path,
    )
    rep = T.build_report("a" * 40, "b" * 40, {"base": side(ok, gone), "head": side(wrong, new)}, **kw)
    assert rep["exit_code"] == T.EXIT_BROKEN and "WrongResult" in rep["problems"][0]
    assert any("only in head" in n for n in rep["notes"])
    rep = T.build_report(
        "a" * 40, "b" * 40, {"base": [{"cases": [], "problems": ["profiler process ended"]}], "head": side(ok)}, **kw
    )
    assert rep["exit_code"] == T.EXIT_BROKEN and rep["problems"][0].startswith("base: profiler process ended")
    rep = T.build_report("a" * 40, "b" * 40, {"base": side(), "head": side()}, **kw)
    assert rep["exit_code"] == T.EXIT_BROKEN and "no benchmark case matched" in rep["problems"][0]
    rep = T.build_report("a" * 40, "b" * 40, {"base": side(ok), "head": side(ok)}, **{**kw, "rounds": 3})
    assert any("no change can be named" in n for n in rep["notes"])


def _fe(name, parent=None, start=0, self_cpu=0.0, dev="DeviceType.CPU", kernels=()):
    return SimpleNamespace(
        name=name,
        cpu_parent=parent,
        time_range=SimpleNamespace(start=start),
        self_cpu_time_total=self_cpu,
        device_type=dev,
        kernels=list(kernels),
    )


def test_iteration_times_attributes_each_op_and_kernel_to_its_call():
    K = namedtuple("K", "name device duration")
    m0, m1 = _fe(P.ITERATION_MARK, start=0), _fe(P.ITERATION_MARK, start=10)
    add0 = _fe("aten::add", m0, 1, 5.0)
    launch0 = _fe("cudaLaunchKernel", add0, 2, 1.0, kernels=[K("add_kernel", 0, 7.0)])
    add1 = _fe("aten::add", m1, 11, 6.0)
    launch1 = _fe("cudaLaunchKernel", add1, 12, 1.0, kernels=[K("add_kernel", 0, 8.0), K("add_kernel", 0, 1.0)])
    outside = _fe("aten::empty", None, 20, 100.0)  # outside any profiled call: not counted
    events = [m1, add1, launch1, m0, add0, launch0, outside]
    assert P.iteration_times(events, "cpu") == (2, {"aten::add": [5.0, 6.0], "cudaLaunchKernel": [1.0, 1.0]})
    assert P.iteration_times(events, "cuda") == (2, {"add_kernel": [7.0, 9.0]})
