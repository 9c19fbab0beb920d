"""The GPU lease plan (issue 18): bench-head's headline cut from per-case costs
(scripts/lease_plan.py), the wheel install that works on an externally managed
Python (PEP 668) and reaches asv's benchmark processes (harness/measure/asv_env.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lease_plan():
    spec = importlib.util.spec_from_file_location("lease_plan", ROOT / "scripts" / "lease_plan.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def lp(monkeypatch):
    mod = _lease_plan()
    monkeypatch.setattr(mod, "start_seconds", lambda: 2.0)  # no subprocess in unit tests
    return mod


def _results_with_durations(tmp_path: Path, cases: list[dict], seconds: float) -> Path:
    mdir = tmp_path / "results" / "lent-cuda-nvidia_h200"
    mdir.mkdir(parents=True)
    (mdir / "machine.json").write_text(
        json.dumps({"machine": "lent", "gpu": "NVIDIA H200", "kernelwatch_device_kind": "cuda", "version": 1})
    )
    cols = ["result", "params", "version", "started_at", "duration"]
    results = {}
    for c in cases:
        bench = f"suite.{c['op']}.track_time"
        params = [[f"'{c['provider']}'"], [f"'{c['shape']}'"], [f"'{c['dtype']}'"], [f"'{c['timing']}'"]]
        results[bench] = [[1e-3], params, "v", 0, seconds]  # one case per benchmark here
    (mdir / ("a" * 8 + "-kernelwatch-py3.12.json")).write_text(
        json.dumps({"commit_hash": "a" * 40, "date": 1, "version": 2, "result_columns": cols, "results": results})
    )
    return tmp_path / "results"


def test_plan_keeps_cases_within_the_budget_and_the_regex_matches_exactly_them(lp):
    p = lp.plan(100.0, "cuda")
    assert p["kept"] and p["cut"] and p["total_s"] <= 100.0
    rx = re.compile(p["regex"])
    for c in p["kept"]:
        assert rx.search(c["name"]), c["name"]
    for c in p["cut"]:
        assert not rx.search(c["name"]), c["name"]
    # Every op's first provider comes before any op's second: a cut drops variants, not ops.
    firsts = [c for c in p["kept"] + p["cut"] if c["rank"] == 0]
    assert all(c in p["kept"] for c in firsts)
    assert all(c["source"] in ("estimated", "skip") for c in p["kept"])
    # A provider that does not support the dtype costs only the process start.
    skip = [c for c in p["kept"] + p["cut"] if not c["supported"]]
    assert skip and all(c["source"] == "skip" for c in skip)


def test_measured_asv_durations_replace_the_estimate(lp, tmp_path):
    cases = lp.headline_cases("cuda")
    results = _results_with_durations(tmp_path, cases[:3], seconds=1.5)
    p = lp.plan(1000.0, "cuda", results=results)
    measured = [c for c in p["kept"] if c["source"] == "measured"]
    assert {c["name"] for c in measured} == {c["name"] for c in cases[:3]}
    assert all(c["seconds"] == pytest.approx(1.5) for c in measured)
    # A CPU machine's durations are not used for a GPU plan.
    mj = next(results.glob("*/machine.json"))
    mj.write_text(json.dumps({"machine": "x", "cpu": "Intel", "kernelwatch_device_kind": "cpu"}))
    assert lp.plan(1000.0, "cuda", results=results)["measured"] == 0


def _grid_results(tmp_path: Path, bench: str, combos: list[tuple], values: list, duration: float) -> Path:
    """One asv v2 results file whose benchmark ``bench`` has a grid over ``combos``' axes."""
    mdir = tmp_path / "results" / "lent-cuda-nvidia_h200"
    mdir.mkdir(parents=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": "lent", "kernelwatch_device_kind": "cuda"}))
    axes = [sorted({c[i] for c in combos}, key=[c[i] for c in combos].index) for i in range(len(combos[0]))]
    cols = ["result", "params", "version", "started_at", "duration"]
    (mdir / "aaaaaaaa-kernelwatch-py3.12.json").write_text(
        json.dumps(
            {
                "commit_hash": "a" * 40,
                "date": 1,
                "version": 2,
                "result_columns": cols,
                "results": {bench: [values, axes, "v", 0, duration]},
            }
        )
    )
    return tmp_path / "results"


def test_asv_duration_is_divided_by_the_cases_that_ran_not_the_grid(lp, tmp_path):
    # A 2 x 2 grid where --bench selected two combinations: asv stores NaN for the
    # other two, and its 30 s duration is what the two that ran took.
    combos = [("'torch'", "'1'"), ("'torch'", "'2'"), ("'triton'", "'1'"), ("'triton'", "'2'")]
    nan = float("nan")
    results = _grid_results(tmp_path, "suite.x.track_time", combos, [1e-3, nan, None, nan], 30.0)
    got = lp.measured_durations(results, "cuda")
    # the one that failed (None) ran too; the NaN ones did not and get no figure
    assert got == {"suite.x.track_time('torch', '1')": 15.0, "suite.x.track_time('triton', '1')": 15.0}
    # Control: all four ran: a quarter each.
    shutil.rmtree(results)
    results = _grid_results(tmp_path, "suite.x.track_time", combos, [1e-3] * 4, 30.0)
    assert set(lp.measured_durations(results, "cuda").values()) == {7.5}


def _probes(torch_s=6.0, triton_s=40.0, compiles=8, triton_name=None):
    return {
        "torch": {
            "name": "t",
            "ok": True,
            "seconds": torch_s,
            "compiles": 0,
            "phases": {"prepare_s": 1.0, "time_s": 2.0},
        },
        "triton": {"name": triton_name, "ok": True, "seconds": triton_s, "compiles": compiles, "phases": {}},
        "per_compile_s": (triton_s - torch_s) / compiles,
    }


def test_probed_costs_fill_at_most_70_percent_of_the_budget(lp):
    cases = lp.headline_cases("cuda")
    mm = next(c for c in cases if c["op"] == "matmul" and c["backend"] == "triton" and c["supported"])
    p = lp.plan(200.0, "cuda", probes=_probes(triton_name=mm["name"]))
    assert p["total_s"] <= 0.7 * 200.0 + 1e-9 and p["limit_s"] == 140.0
    assert p["probed"] > 0 and {c["source"] for c in p["kept"]} <= {"probed", "skip"}
    by = {c["name"]: c for c in p["kept"] + p["cut"]}
    assert by[mm["name"]]["seconds"] == pytest.approx(40.0 + lp.ASV_OVERHEAD_S)  # its own probe
    torch_case = next(c for c in cases if c["backend"] == "torch" and c["supported"])
    assert by[torch_case["name"]]["seconds"] == pytest.approx(6.0 + lp.ASV_OVERHEAD_S)
    # A failed probe falls back to the estimate.
    bad = _probes()
    bad["torch"]["ok"] = False
    assert all(c["source"] != "probed" or c["backend"] == "triton" for c in lp.plan(200.0, "cuda", probes=bad)["kept"])


def test_bench_range_is_planned_from_the_time_left_or_says_it_cannot(lp, tmp_path):
    cases = [dict(c, seconds=5.0, source="probed") for c in lp.headline_cases("cuda")[:4]]
    results = _results_with_durations(tmp_path, cases, seconds=10.0)  # bench-head measured 10 s a case
    within = {"device": "cuda", "kept": cases}
    # bench-head took 60 s for 40 s of cases: 20 s of overhead a commit.
    p = lp.plan_range(within, results, budget_s=200.0, commits=2, head_wall_s=60.0)
    assert p["commits"] == 2 and p["overhead_s"] == 20.0
    assert p["per_commit_s"] == pytest.approx(0.7 * 200 / 2 - 20)  # 50 s: 5 cases would fit, 4 exist
    assert len(p["kept"]) == 4 and all(c["source"] == "measured" for c in p["kept"])
    p = lp.plan_range(within, results, budget_s=70.0, commits=2, head_wall_s=60.0)
    assert p["commits"] == 1 and len(p["kept"]) == 2  # 0.7 * 70 - 20 = 29 s: two 10 s cases
    p = lp.plan_range(within, results, budget_s=30.0, commits=2, head_wall_s=60.0)
    assert p["commits"] == 0 and p["regex"] is None and "cannot fit one commit" in p["why"]


def test_a_probe_that_fails_says_why(lp):
    case = {
        "name": "suite.nope.track_time",
        "op": "no_such_op",
        "provider": "torch",
        "shape": "8",
        "dtype": "fp32",
        "timing": "cpu",
    }
    got = lp.probe_case(case, timeout_s=120)
    assert got["ok"] is False and got["error"].startswith("exit 1:") and "no_such_op" in got["error"]


def test_plan_cli_writes_regex_and_k(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "lease_plan.py"),
            "--budget-s",
            "30",
            "--device",
            "cpu",
            "--quick",
            "--regex-out",
            str(tmp_path / "r"),
            "--k-out",
            str(tmp_path / "k"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("bench-head plan (cpu):")
    assert "'cpu')" in proc.stdout and (tmp_path / "r").read_text().strip()
    assert "(vector_add and fp32)" in (tmp_path / "k").read_text()


# --------------------------------------------------------------------- wheels on an externally managed Python


def test_site_dirs_reach_asv_pythonpath_after_the_checkout(tmp_path):
    from harness.measure.asv_env import asv_pythonpath

    site = tmp_path / "deps"
    site.mkdir()
    env = {"KERNELWATCH_SITE_DIRS": os.pathsep.join([str(site), str(tmp_path / "missing")])}
    assert asv_pythonpath("/build/checkout", env) == os.pathsep.join(["/build/checkout", str(site)])
    assert asv_pythonpath("/build/checkout", {}) == "/build/checkout"


def _tiny_wheel(folder: Path) -> Path:
    """A pure-Python wheel built by hand (no network, no build backend)."""
    whl = folder / "kwprobe-1.0-py3-none-any.whl"
    files = {
        "kwprobe/__init__.py": "VALUE = 42\n",
        "kwprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: kwprobe\nVersion: 1.0\n",
        "kwprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + "kwprobe-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(whl, "w") as z:
        for n, t in files.items():
            z.writestr(n, t)
        z.writestr("kwprobe-1.0.dist-info/RECORD", record)
    return whl


def _externally_managed_python() -> str | None:
    py = shutil.which("python3", path="/usr/bin")
    if not py:
        return None
    probe = subprocess.run(
        [
            py,
            "-c",
            "import sysconfig, os, pip; print(os.path.isfile(os.path.join("
            "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))",
        ],
        capture_output=True,
        text=True,
    )
    return py if probe.stdout.strip() == "True" else None


@pytest.mark.skipif(
    _externally_managed_python() is None, reason="no externally managed /usr/bin/python3 with pip on this machine"
)
def test_wheel_install_with_target_works_on_an_externally_managed_python(tmp_path):
    py = _externally_managed_python()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _tiny_wheel(wheels)
    base = [py, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--find-links", str(wheels)]
    # Negative control: into the interpreter's environment, PEP 668 refuses.
    plain = subprocess.run(base + ["--dry-run", "kwprobe"], capture_output=True, text=True)
    assert plain.returncode != 0 and "externally-managed-environment" in (plain.stdout + plain.stderr)
    # What gpu_run.sh does: --target into a private folder.
    deps = tmp_path / "deps"
    proc = subprocess.run(base + ["--target", str(deps), "kwprobe"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # A benchmark process gets PYTHONPATH = ASV_PYTHONPATH (checkout, then the site dirs).
    from harness.measure.asv_env import asv_pythonpath

    path = asv_pythonpath(str(tmp_path / "checkout"), {"KERNELWATCH_SITE_DIRS": str(deps)})
    got = subprocess.run(
        [py, "-c", "import kwprobe; print(kwprobe.VALUE)"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": path},
    )
    assert got.stdout.strip() == "42", got.stderr


def test_start_seconds_from_the_environment_replaces_the_measurement(monkeypatch, capsys):
    mod = _lease_plan()
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: pytest.fail("measured although given"))
    monkeypatch.setenv(mod.START_S_ENV, "5")
    assert mod.start_seconds() == 5.0
    for bad in ("x", "-1", "nan", "inf"):
        monkeypatch.setenv(mod.START_S_ENV, bad)
        with pytest.raises(SystemExit) as exc:
            mod.start_seconds()
        assert exc.value.code == 2 and mod.START_S_ENV in capsys.readouterr().err
