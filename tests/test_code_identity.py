"""Compiled-code identity (harness.measure.fingerprint) and its use in the gate:
same code never blocks; same code measured far apart is an unstable machine."""

from __future__ import annotations

import dataclasses
import types

import pytest

from harness.core.records import CODE_SCHEME, same_code
from harness.gate import decide as gate
from harness.gate.decide import SeriesInput, Side, Status
from harness.measure import bench, fingerprint


@pytest.fixture(scope="module")
def torch_case():
    return bench.prepare("vector_add", "torch", (4096,), "fp32", "cpu")


def test_torch_fingerprint_is_stable_and_sees_extra_work(torch_case):
    a, b = fingerprint.code_identity(torch_case), fingerprint.code_identity(torch_case)
    assert a["scheme"] == CODE_SCHEME and a["fingerprint"] == b["fingerprint"]
    assert a["coverage"] == {"python": "ok", "torch": "ok", "dispatched": "ok"}
    assert a["parts"]["dispatched"]["ops"] == {"aten.add.Tensor": 1}
    assert a["parts"]["python"]["kernels.vector_add"] is not None
    assert same_code(a, b)
    # negative control: the same provider doing the sum four times is other code
    x, y = torch_case.inputs
    fn = torch_case.provider.fn

    def four():
        fn(x, y), fn(x, y), fn(x, y)
        return fn(x, y)

    slow = dataclasses.replace(torch_case, call=four)
    c = fingerprint.code_identity(slow)
    assert c["parts"]["dispatched"]["ops"] == {"aten.add.Tensor": 4}
    assert not same_code(a, c)


def test_a_failed_part_or_missing_identity_is_never_same(torch_case):
    a = fingerprint.code_identity(torch_case)
    broken = {**a, "coverage": {**a["coverage"], "dispatched": "error"}}
    assert not same_code(broken, broken)
    assert not same_code(None, a) and not same_code(a, {})
    assert not same_code({**a, "scheme": "other/1"}, {**a, "scheme": "other/1"})


def test_triton_under_the_interpreter_is_identified_by_version_config_and_source():
    from kernels import vector_add

    prov = next(p for p in vector_add.OP.providers.values() if p.backend == "triton")
    case = types.SimpleNamespace(provider=prov, op=vector_add.OP, call=lambda: None, device="cpu")
    facts = {"status": "unavailable", "triton": "3.x", "autotune_config": {"BLOCK_SIZE": 1024}}
    ci = fingerprint.code_identity(case, facts)
    assert ci["parts"]["triton"] == {
        "version": "3.x",
        "config": {"BLOCK_SIZE": 1024},
        "compiled": None,
        "status": "unavailable",
    }
    assert ci["coverage"]["triton"].startswith("source only")
    other = fingerprint.code_identity(case, {**facts, "autotune_config": {"BLOCK_SIZE": 512}})
    assert not same_code(ci, other)  # another chosen config is other code


def _series(ratio: float, code_b, code_h):
    base = [[1.0e-3 * (1 + 0.001 * i) for i in range(10)] for _ in range(6)]
    head = [[x * ratio for x in r] for r in base]
    flat = lambda rs: [x for r in rs for x in r]  # noqa: E731
    return SeriesInput(
        "suite.vector_add.track_time",
        (("provider", "torch"),),
        Side(True, samples=flat(base), rounds=base, code=code_b),
        Side(True, samples=flat(head), rounds=head, code=code_h),
    )


CODE = {"scheme": CODE_SCHEME, "fingerprint": "0123456789abcdef", "coverage": {"python": "ok"}}


def test_same_code_never_blocks_and_far_apart_is_an_unstable_machine():
    cfg = gate.GateConfig(bootstrap=200)
    si = _series(1.10, CODE, CODE)
    v = gate.classify(si, cfg)
    assert v.status is Status.SLOWER  # the plain rule would block
    out, problem = gate.same_code_verdict(v, si)
    assert out.status is Status.SAME and out.same_code and problem is None
    assert "same compiled code as base" in out.reason and not out.blocking
    # 4x apart with the same code: the machine, exit 2
    si = _series(4.0, CODE, CODE)
    out, problem = gate.same_code_verdict(gate.classify(si, cfg), si)
    assert out.status is Status.UNCERTAIN and "unstable machine" in problem
    # negative control: other code keeps the block
    si = _series(1.10, CODE, {**CODE, "fingerprint": "fedcba9876543210"})
    out, problem = gate.same_code_verdict(gate.classify(si, cfg), si)
    assert out.status is Status.SLOWER and out.blocking and not out.same_code and problem is None
    assert gate.exit_code([out]) == gate.EXIT_SLOWER


def test_analysis_labels_a_step_between_identical_code_and_environment():
    from harness.analysis import autotune

    dev = {"name": "cpu-x", "versions": {"torch": "2.9"}}
    rec = {"code_identity": CODE, "device": dev}
    key = {"machine": "m", "benchmark": "suite.vector_add.track_time", "params": {"provider": "torch"}}
    facts = {
        autotune.facts_key("m", key["benchmark"], key["params"], "c0"): autotune.facts_from_record(rec),
        autotune.facts_key("m", key["benchmark"], key["params"], "c1"): autotune.facts_from_record(rec),
        # negative controls: other code at c2, same code in another environment at c3
        autotune.facts_key("m", key["benchmark"], key["params"], "c2"): autotune.facts_from_record(
            {"code_identity": {**CODE, "fingerprint": "ffff"}, "device": dev}
        ),
        autotune.facts_key("m", key["benchmark"], key["params"], "c3"): autotune.facts_from_record(
            {"code_identity": CODE, "device": {**dev, "versions": {"torch": "2.10"}}}
        ),
    }
    report = {"findings": [{"key": key, "commit_range": [a, b]} for a, b in (("c0", "c1"), ("c1", "c2"), ("c1", "c3"))]}
    assert autotune.annotate(report, facts) == 1
    first, other, env = report["findings"]
    assert [a["kind"] for a in first["annotations"]] == [autotune.SAME_CODE_KIND]
    assert "same compiled code" in first["annotations"][0]["text"]
    assert "annotations" not in other and "annotations" not in env


def test_same_code_apart_by_more_than_the_limit_only_if_the_whole_interval_is():
    # Measured on the loaded VM: same code 1.35x apart with an interval down to 1.12x.
    wide = gate.Stats(60, 60, 1e-3, 1.35e-3, 1.35, 1.12, 1.66, 1e-40)
    v = gate.Verdict("suite.control_copy.track_time", (), Status.SLOWER, "measured", threshold=0.05, stats=wide)
    si = _series(1.35, CODE, CODE)
    out, problem = gate.same_code_verdict(v, si)
    assert out.status is Status.SAME and problem is None and "same compiled code" in out.reason
    # the same ratio with its interval beyond 1.25: the machine is unstable, exit 2
    tight = gate.Stats(60, 60, 1e-3, 1.35e-3, 1.35, 1.30, 1.40, 1e-40)
    v = gate.Verdict("suite.control_copy.track_time", (), Status.SLOWER, "measured", threshold=0.05, stats=tight)
    out, problem = gate.same_code_verdict(v, si)
    assert out.status is Status.UNCERTAIN and "unstable machine" in problem
    # and faster the same way
    fast = gate.Stats(60, 60, 1e-3, 0.7e-3, 0.70, 0.66, 0.74, 1e-40)
    v = gate.Verdict("suite.control_copy.track_time", (), Status.FASTER, "measured", threshold=0.05, stats=fast)
    assert gate.same_code_verdict(v, si)[1] is not None
