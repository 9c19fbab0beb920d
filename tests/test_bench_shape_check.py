"""Correctness at the bench shape (issue 18): the check runs the provider once
on the bench inputs against the reference on the same device; inputs can be
generated on the device. Exercised here on CPU tensors (the function is
device-agnostic); on a CUDA machine ``bench.prepare`` runs it for every case."""

from __future__ import annotations

import pytest
import torch

import kernels
from harness.measure import bench
from kernels import _base
from kernels._check import WrongResult


def test_a_correct_provider_passes_at_the_bench_shape():
    op = kernels.get_op("vector_add")
    ins = op.make_inputs((1 << 16,), "fp32", "cpu", seed=0)
    r = bench.check_at_bench_shape(op, op.providers["torch"].fn, ins, "fp32", "vector_add/torch")
    assert r["checked"] is True and r["max_abs_err"] <= r["atol"] + 1e-6


def test_a_provider_wrong_only_at_large_shapes_is_caught():
    # Negative control: right on small inputs, wrong beyond 4096 elements (the
    # failure mode of a tile config that only large shapes select).
    op = kernels.get_op("vector_add")
    good = op.providers["torch"].fn

    def wrong_when_big(x, y):
        out = good(x, y)
        if out.numel() > 4096:
            out = out.clone()
            out[-1] += 1.0
        return out

    ins = op.make_inputs((1 << 16,), "fp32", "cpu", seed=0)
    with pytest.raises(WrongResult, match=r"1 of 65536 elements beyond .* at the bench shape"):
        bench.check_at_bench_shape(op, wrong_when_big, ins, "fp32", "vector_add/wrong")
    with pytest.raises(WrongResult, match="shape"):
        bench.check_at_bench_shape(op, lambda x, y: good(x, y)[:-1], ins, "fp32", "vector_add/short")


def test_nan_where_the_reference_has_none_fails_and_matching_nans_pass():
    op = kernels.get_op("vector_add")
    ins = op.make_inputs((1024,), "fp32", "cpu", seed=0)
    good = op.providers["torch"].fn
    with pytest.raises(WrongResult):
        bench.check_at_bench_shape(op, lambda x, y: good(x, y) * float("nan"), ins, "fp32", "nan")
    x, y = ins
    x = x.clone()
    x[3] = float("nan")
    assert bench.check_at_bench_shape(op, good, (x, y), "fp32", "nan-in")["checked"] is True


def test_reference_out_of_memory_is_recorded_not_raised(monkeypatch):
    op = kernels.get_op("vector_add")
    ins = op.make_inputs((1024,), "fp32", "cpu", seed=0)

    def oom(*a):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 17.00 GiB")

    import dataclasses

    r = bench.check_at_bench_shape(dataclasses.replace(op, reference=oom), op.providers["torch"].fn, ins, "fp32", "oom")
    assert r["checked"] is False and "does not fit" in r["reason"]


def test_cpu_prepare_records_that_the_bench_shape_was_not_checked():
    from kernels import _backends

    if _backends.cuda_available():
        pytest.skip("on CUDA prepare checks the bench shape")
    case = bench.prepare("vector_add", "torch", (4096,), "fp32", "cpu")
    assert case.bench_check["checked"] is False and "CPU" in case.bench_check["reason"]


def test_inputs_on_sets_and_restores_the_default_device():
    before = torch.get_default_device()
    with _base.inputs_on("cpu"):
        assert _base._INPUT_DEVICE == "cpu"
        assert _base.generator(1).device.type == "cpu"
    assert _base._INPUT_DEVICE is None and torch.get_default_device() == before
    with pytest.raises(RuntimeError):
        with _base.inputs_on("cpu"):
            raise RuntimeError("boom")
    assert _base._INPUT_DEVICE is None and torch.get_default_device() == before
    # Same seed, same values as the CPU-then-move path on the CPU.
    op = kernels.get_op("matmul")
    a = op.make_inputs((33, 17, 9), "fp32", "cpu", seed=3)
    with _base.inputs_on("cpu"):
        b = op.make_inputs((33, 17, 9), "fp32", "cpu", seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_cuda_case_is_checked_once_at_the_bench_shape_only(monkeypatch):
    # Issue 26: checking at the test shape too compiled (and autotuned) a second
    # Triton specialisation. On CPU tensors: the check is device-agnostic.
    op = kernels.get_op("vector_add")
    good = op.providers["torch"].fn
    ins = op.make_inputs((1 << 12,), "fp32", "cpu", seed=0)
    calls = []
    monkeypatch.setattr(bench, "check_provider", lambda *a, **k: calls.append(a[2]))
    monkeypatch.setattr(bench, "_CHECKED", {})
    key = ("vector_add", "torch", (1 << 12,), "fp32")
    r = bench.check_cuda_case(op, good, ins, "fp32", key, "va")
    assert r["checked"] is True and calls == []  # no test-shape compile
    assert bench.check_cuda_case(op, good, ins, "fp32", key, "va") is r  # once per process
    # Control: when the bench-shape reference does not fit, the test shape is checked instead.
    monkeypatch.setattr(bench, "check_at_bench_shape", lambda *a: {"checked": False, "reason": "oom"})
    key2 = key[:3] + ("bf16",)
    r2 = bench.check_cuda_case(op, good, ins, "fp32", key2, "va")
    assert calls == [op.test_shapes[-1]] and r2["test_shape_checked"] is True
    # A wrong provider at the bench shape still raises.
    monkeypatch.undo()
    monkeypatch.setattr(bench, "_CHECKED", {})
    with pytest.raises(WrongResult):
        bench.check_cuda_case(op, lambda x, y: good(x, y) + 1.0, ins, "fp32", key, "va")
