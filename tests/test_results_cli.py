"""Loading asv results (ours and foreign, v1 and v2, broken), records, the spec
table, and the CLI's list/publish behaviour on good and bad input."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from _repo import git
from conftest import OPENBLAS_EXAMPLE, SHARED_DATA
from test_bad_input import _benchmarks, _machine, _meta, _v2_file

from harness import cli
from harness.core import devices, records
from harness.store import dataset
from harness.store import results as R

OPENBLAS = OPENBLAS_EXAMPLE / "results"  # real results, in the repository
# asv v1 results whose licence lets nobody copy them: read from beside the checkout.
GT4PY = SHARED_DATA / "asv-gt4py-v1" / "results"
needs_gt4py = pytest.mark.skipif(
    not GT4PY.is_dir(), reason=f"gt4py's v1 results may not be copied into the repository; not found at {GT4PY}"
)


# ------------------------------------------------------------------ spec table


def test_spec_lookup_exact_names():
    h200 = devices.lookup_spec("NVIDIA H200")
    assert h200.sku.startswith("H200") and h200.peak_gbps == pytest.approx(4800)
    assert h200.peak_tflops["bf16"] == pytest.approx(989.4)
    nvl = devices.lookup_spec("NVIDIA H100 NVL")
    sxm = devices.lookup_spec("NVIDIA H100 80GB HBM3")
    assert nvl.sku != sxm.sku and nvl.peak_gbps != sxm.peak_gbps


def test_unknown_gpu_gets_no_numbers_and_a_warning():
    with pytest.warns(devices.UnknownDeviceWarning, match="no datasheet peaks"):
        assert devices.lookup_spec("NVIDIA H100") is None  # ambiguous: never guess a SKU


def test_every_spec_row_has_a_source_and_dense_figures():
    for spec in devices.spec_table():
        assert spec.source.strip(), spec.sku
        assert spec.peak_gbps > 0
        assert all(v > 0 for v in spec.peak_tflops.values())
    # dense, not sparse: H100 SXM bf16 is 989.4, not 1979
    assert devices.lookup_spec("NVIDIA H100 80GB HBM3").peak_tflops["bf16"] < 1000


def test_peak_for_vector_vs_tensor_ops():
    spec = devices.lookup_spec("NVIDIA A100-SXM4-80GB")
    assert spec.peak_for("bf16", uses_tensor_cores=True) == pytest.approx(312)
    assert spec.peak_for("bf16", uses_tensor_cores=False) == pytest.approx(19.5)
    assert spec.peak_for("fp8", uses_tensor_cores=True) is None  # A100 has no fp8


def test_machine_names_separate_gpus():
    a = devices.machine_name_for("runner1", "cuda", "NVIDIA H100 80GB HBM3")
    b = devices.machine_name_for("runner1", "cuda", "NVIDIA A100-SXM4-80GB")
    c = devices.machine_name_for("runner1", "cpu", "Intel Xeon")
    assert len({a, b, c}) == 3 and c == "runner1-cpu"


# ------------------------------------------------------------------ records


def test_records_roundtrip_and_bad_lines(tmp_path):
    rec = {
        "machine": "m",
        "commit": "a" * 40,
        "benchmark": "suite.x.track_time",
        "params": {"provider": "torch"},
        "timing": {"method": "cpu"},
        "metrics": {"gbps": 1.0},
    }
    path = records.write_record(tmp_path, rec)
    with open(path, "a") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({**rec, "schema": 99}) + "\n")
    errors = []
    got = records.load_records(tmp_path, errors)
    assert len(got) == 1
    assert any(":2: not JSON" in e for e in errors)
    assert any("schema 99 is newer" in e for e in errors)


def test_records_reject_nan(tmp_path):
    with pytest.raises(ValueError):
        records.write_record(
            tmp_path, {"machine": "m", "commit": "c", "benchmark": "b", "metrics": {"x": float("nan")}}
        )


# ------------------------------------------------------------------ results loading


def test_openblas_v2_three_machines():
    rs = R.load(OPENBLAS)
    assert sorted(rs.machines) == ["gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"]
    assert len(rs.commits) == 30 and not rs.errors
    order = rs.commit_order()
    dates = [rs.commits[c].date_ms for c in order]
    assert dates == sorted(dates)  # no repository: ordered by stored commit date
    s = next(s for s in rs.series.values() if s.key.benchmark.endswith("time_gemm"))
    assert s.unit == "seconds" and s.points and s.points[0].ci is not None


@needs_gt4py
def test_gt4py_v1_mostly_null_loads():
    rs = R.load(GT4PY)
    points = [p for s in rs.series.values() for p in s.points]
    failed = [p for p in points if p.value is None]
    # its benchmarks.json (written for the newest suite) lists neither of its two
    # older benchmarks: one warning says so (hostile trial round 6, S-e); nothing else
    assert len(rs.commits) == 76 and len(rs.errors) == 1, rs.errors
    assert "does not list 2 benchmark(s) that have results" in rs.errors[0]
    assert len(failed) > 0.9 * len(points)
    assert all(p.reason == "failed" for p in failed)


def test_bad_files_are_named_and_the_rest_loads(tmp_path):
    dst = tmp_path / "results"
    shutil.copytree(OPENBLAS / "gha-aws-skylake", dst / "gha-aws-skylake")
    shutil.copy(OPENBLAS / "benchmarks.json", dst / "benchmarks.json")
    victims = sorted((dst / "gha-aws-skylake").glob("*.json"))[1:4]
    victims[0].write_text("{ this is not json")
    victims[1].write_text("[1, 2, 3]")
    victims[2].write_text(json.dumps({"version": 1}))  # old format, missing keys
    (dst / "broken-machine").mkdir()
    (dst / "broken-machine" / "machine.json").write_text("nope")
    rs = R.load(dst)
    for v in victims:
        assert any(str(v) in e for e in rs.errors), (v, rs.errors)
    assert any("broken-machine" in e for e in rs.errors)
    assert rs.files_loaded == 30 - len(victims) and rs.usable()


def test_missing_results_dir_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        R.load(tmp_path / "nope")


# ------------------------------------------------------------------ CLI


def test_list_json(capsys):
    assert cli.main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ops = {r["op"] for r in rows}
    assert {"vector_add", "softmax", "matmul"} <= ops
    for r in rows:
        assert {"op", "provider", "available", "reason"} <= set(r)
        assert isinstance(r["reason"], str) and r["reason"]
    torch_rows = [r for r in rows if r["backend"] == "torch"]
    assert torch_rows and all(r["available"] for r in torch_rows)
    from kernels import _backends

    if not _backends.cuda_available():
        tri = [r for r in rows if r["backend"] == "triton"]
        assert tri and all(not r["available"] and r["correctness_only"] for r in tri)
        assert all("TRITON_INTERPRET" in r["reason"] for r in tri)
        cu = [r for r in rows if r["backend"] == "cupy"]
        assert all(not r["available"] and "no CUDA device" in r["reason"] for r in cu)


def test_publish_missing_dir_exits_2_with_one_line(tmp_path, capsys):
    code = cli.main(["publish", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "site"), "--repo", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "missing" in err[0]


def test_publish_nothing_usable_exits_2(tmp_path, capsys):
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    (d / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    (d / "deadbeef-env.json").write_text("garbage")
    code = cli.main(["publish", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "site"), "--repo", ""])
    err = capsys.readouterr().err
    assert code == 2
    assert "deadbeef-env.json" in err and "no usable results" in err


def test_publish_openblas_shows_na_without_cost_model(tmp_path, capsys):
    code = cli.main(["publish", "--results", str(OPENBLAS), "--out", str(tmp_path / "site"), "--repo", ""])
    assert code == 0
    html = (tmp_path / "site" / "index.html").read_text()
    for m in ("gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"):
        assert m in html
    assert "n/a" in html


def test_commit_hash_that_is_a_path_is_skipped(tmp_path, capsys):
    """A results file whose commit hash is a path must never name an output file."""
    d = tmp_path / "results" / "m"
    d.mkdir(parents=True)
    (d / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    row = [[1e-3], None, "v1", None, None, None, None, None, None, None, None, None, None]
    good = {
        "commit_hash": "a" * 40,
        "env_name": "e",
        "date": 1719072902000,
        "params": {"machine": "m"},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": [
            "result",
            "params",
            "version",
            "started_at",
            "duration",
            "stats_ci_99_a",
            "stats_ci_99_b",
            "stats_q_25",
            "stats_q_75",
            "stats_number",
            "stats_repeat",
            "samples",
            "profile",
        ],
        "results": {"suite.x.time_x": row},
        "durations": {},
        "version": 2,
    }
    (d / "aaaaaaaa-e.json").write_text(json.dumps(good))
    bad = dict(good, commit_hash="../../../escaped")
    (d / "bbbbbbbb-e.json").write_text(json.dumps(bad))
    out = tmp_path / "site"
    assert cli.main(["publish", "--results", str(tmp_path / "results"), "--out", str(out), "--repo", ""]) == 0
    err = capsys.readouterr().err
    assert "bbbbbbbb-e.json" in err and "not a hex string" in err
    assert not (tmp_path / "escaped.html").exists()
    assert all(out in p.parents for p in out.rglob("*.html"))


# ------------------------------------------------------------------ small inputs built here


def test_a_v1_results_file_is_migrated_and_read(tmp_path):
    """asv's format 1 (a dict per benchmark) is read through asv's own migration."""
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    v1 = {
        "version": 1,
        "commit_hash": "a" * 40,
        "date": 1_700_000_000_000,
        "env_name": "py3.11",
        "python": "3.11",
        "requirements": {},
        "params": {"machine": "m"},
        "results": {"suite.x.time_x": {"result": [1.0, 2.0], "params": [["1", "2"]], "stats": None}},
        "started_at": {"suite.x.time_x": 1_700_000_000_000},
    }
    _machine(res, "m", {"aaaaaaaa-py3.11.json": v1})
    rs = R.load(res, with_records=False)
    assert not rs.errors and rs.files_loaded == 1
    got = {dict(s.key.params)["size"]: [p.value for p in s.points] for s in rs.series.values()}
    assert got == {"1": [1.0], "2": [2.0]}


def _rec(commit: str, samples) -> dict:
    return {
        "schema": 1,
        "machine": "m",
        "commit": commit,
        "benchmark": "suite.x.time_x",
        "params": {"size": "1"},
        "timing": {"samples_s": samples},
    }


def test_a_bad_record_loses_only_its_own_round(tmp_path):
    """A record that fails the schema gives no round split; the rounds after it in
    the same file still do."""
    commit = "a" * 40
    d = tmp_path / "results" / "m" / records.RECORDS_SUBDIR
    d.mkdir(parents=True)
    lines = [_rec(commit, [1e-3, 2e-3]), _rec(commit, ["slow"]), _rec(commit, [3e-3])]
    (d / f"{commit}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    problems: list[str] = []
    rounds = R.record_rounds(tmp_path / "results", problems)
    assert rounds == {("m", commit, "suite.x.time_x", (("size", "1"),)): [[1e-3, 2e-3], [3e-3]]}
    assert len(problems) == 1 and f"{commit}.jsonl:2" in problems[0] and "samples_s" in problems[0]


def test_a_commit_without_a_stored_date_takes_its_git_commit_date(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f.txt").write_text("0")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c0")
    sha, seconds = git(repo, "log", "-1", "--format=%H %ct").split()
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    _machine(res, "m", {f"{sha[:8]}-py3.11.json": dict(_v2_file(sha), date=None)})
    rs = R.load(res, repo=repo, with_records=False)
    assert rs.commits[sha].date_ms == int(seconds) * 1000  # epoch ms, as every stored date
    assert rs.commits[sha].subject == "c0"


@pytest.mark.parametrize(
    "typ, unit, metric",
    [
        ("track", "seconds", "time"),  # our suite's track_time benchmarks
        ("time", None, "time"),
        ("memory", None, "memory"),
        (None, "count", "count"),  # neither a time nor a memory: named by its unit
        (None, None, "value"),
    ],
)
def test_the_metric_of_a_series_follows_its_type_and_unit(tmp_path, typ, unit, metric):
    res = tmp_path / "results"
    _benchmarks(res, {"suite.x.run_x": _meta("suite.x.run_x", type=typ, unit=unit)})
    _machine(res, "m", {"aaaaaaaa-py3.11.json": _v2_file("a" * 40, bench="suite.x.run_x")})
    inp = dataset.build_inputs(R.load(res, with_records=False))
    assert [s.metric for s in inp.series] == [metric, metric]


def _gemm_results(tmp_path, seconds: float):
    """One OpenBLAS dgemm case of n = 100: 2e6 flops, 3 x 100^2 x 8 bytes."""
    res = tmp_path / "results"
    meta = _meta("benchmarks.gemm.time_gemm", param_names=["variant", "size"], params=[["'d'"], ["100"]])
    _benchmarks(res, {"benchmarks.gemm.time_gemm": meta})
    f = _v2_file("a" * 40, bench="benchmarks.gemm.time_gemm", params=[["'d'"], ["100"]], value=seconds)
    _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    return res


def test_throughput_of_a_foreign_case_is_its_cost_per_second(tmp_path):
    inp = dataset.build_inputs(R.load(_gemm_results(tmp_path, 1e-3), with_records=False))
    (tp,) = inp.throughput
    assert tp["time_s"] == pytest.approx(1e-3)
    assert tp["gflops"] == pytest.approx(2e6 / 1e-3 / 1e9)  # 2 GFLOP/s
    assert tp["gbps"] == pytest.approx(240_000 / 1e-3 / 1e9)  # 0.24 GB/s


def test_foreign_metrics_derive_each_measured_point_and_leave_failed_ones_out():
    params = (("variant", "d"), ("size", "100"))
    out = dataset.foreign_metrics("benchmarks.gemm.time_gemm", params, "seconds", np.array([1e-3, math.nan, 2e-3]))
    assert out["tflops"][[0, 2]].tolist() == pytest.approx([2e-3, 1e-3])
    assert out["gbps"][[0, 2]].tolist() == pytest.approx([0.24, 0.12])
    assert all(math.isnan(out[k][1]) for k in out)  # a failed point has no figure
