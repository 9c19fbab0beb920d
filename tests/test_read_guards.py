"""Guards when read: hand-made records and calibrations (issue 13).

Every record and calibration is validated when loaded, not only when written:
an edited, absurd or contended figure gets a status and a reason and no number.
"""

from __future__ import annotations

import copy
import json
import math
import re

import pytest

from harness.core import devices, guards, metrics
from harness.measure import calibrate

# A CPU record of a 64 MiB vector add (not cache-resident on a 32 MiB LLC): 1 thread, cpu timing.
N = 8 << 20
CPU_REC = {
    "schema": 1,
    "machine": "h-cpu",
    "commit": "a" * 40,
    "benchmark": "suite.vector_add.track_time",
    "op": "vector_add",
    "dtype": "fp32",
    "uses_tensor_cores": False,
    "device": {"kind": "cpu", "name": "Test CPU", "cores": 2, "l2_bytes": 32 << 20},
    "cost": {"flops": N, "bytes_read": 8 * N, "bytes_written": 4 * N},
    "timing": {
        "method": "cpu",
        "p50_s": 12 * N / 4e9,
        "config": {"threads": 1},
        "extra": {"cpu": {"contended": False}},
    },
    # Frozen at write time against an old, under-measured calibration: must not be shown.
    "metrics": {"status": "ok", "reason": None, "mfu": 2.09, "bw_util": 6.88, "tflops": 670.0},
}
# An H200 bf16 matmul, cold timing.
M = 8192
GPU_REC = {
    "schema": 1,
    "machine": "h-h200",
    "commit": "b" * 40,
    "benchmark": "suite.matmul.track_time",
    "op": "matmul",
    "dtype": "bf16",
    "uses_tensor_cores": True,
    "device": {"kind": "cuda", "name": "NVIDIA H200", "l2_bytes": 60 << 20},
    "cost": {"flops": 2 * M**3, "bytes_read": 2 * M * M * 2, "bytes_written": M * M * 2},
    "timing": {"method": "cold", "p50_s": 2 * M**3 / 700e12, "config": {}},
    "metrics": {"status": "ok", "reason": None},
}


def _pos(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def cal_for(machine="h-cpu", kind="cpu", name="Test CPU", gbps=4.0, tflops=0.05, cores=2, **extra):
    copy_bytes = 2 << 28
    n = 1024
    return {
        "schema": 1,
        "machine": machine,
        "date": "2026-12-01T07:00:00+00:00",
        "device": {"kind": kind, "name": name, "cores": cores},
        "cpu_threads": 1 if kind == "cpu" else None,
        "copy": {
            "bytes": copy_bytes,
            "p50_s": copy_bytes / gbps / 1e9 if _pos(gbps) else 1.0,
            "gbps": gbps,
            "status": "ok",
        },
        "matmul": {
            "fp32": {
                "shape": [n, n, n],
                "p50_s": 2 * n**3 / tflops / 1e12 if _pos(tflops) else 1.0,
                "tflops": tflops,
                "status": "ok",
            }
        },
        **extra,
    }


def rec(base, **changes):
    r = copy.deepcopy(base)
    for path, v in changes.items():
        d = r
        keys = path.split("__")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = v
    return r


# --------------------------------------------------------------------- records


def test_a_sound_record_is_derived_again_against_todays_ceilings():
    cal, _ = guards.validate_calibration(cal_for(gbps=4.0))
    m = guards.guard_record(CPU_REC, calibration=cal)
    assert m.status == "ok" and m.cache_resident is False
    assert m.gbps == pytest.approx(4.0) and m.bw_util == pytest.approx(1.0)  # not the frozen 6.88
    recal, _ = guards.validate_calibration(cal_for(gbps=8.0))
    assert guards.guard_record(CPU_REC, calibration=recal).bw_util == pytest.approx(0.5)  # recalibrated


@pytest.mark.parametrize(
    "t, why",
    [
        (-1e-3, "not positive"),
        (0.0, "not positive"),
        (float("nan"), "NaN"),
        (None, "no time"),
        ("fast", "not a number"),
    ],
)
def test_negative_zero_nan_or_missing_times_are_invalid(t, why):
    m = guards.guard_record(rec(CPU_REC, timing__p50_s=t))  # as stored in the record
    assert m.status == "invalid" and why in m.reason
    if t is not None:
        m = guards.guard_record(CPU_REC, time_s=t)  # as the series value
        assert m.status == "invalid" and why in m.reason
    assert m.time_s is None and m.tflops is None and m.mfu is None


def test_gpu_record_above_the_datasheet_is_a_timing_bug():
    fine = guards.guard_record(GPU_REC)
    assert fine.status == "ok" and fine.mfu == pytest.approx(700 / 989.4, rel=0.01)
    tenfold = guards.guard_record(GPU_REC, time_s=2 * M**3 / 9894e12)  # 10x the datasheet
    assert tenfold.status == "timing_bug" and "datasheet" in tenfold.reason
    assert tenfold.tflops is None and tenfold.mfu is None


def test_cpu_record_above_physical_sanity_is_a_timing_bug():
    b = devices.cpu_sanity_peaks(2, "fp32", threads=1)
    assert b == pytest.approx((6.0e9 * 64 / 1e12, 6.0e9 * 256 / 1e9))  # one core: the timing used one thread
    impossible = guards.guard_record(CPU_REC, time_s=12 * N / 1e13)  # 10 TB/s from one core
    assert impossible.status == "timing_bug" and "physically impossible" in impossible.reason
    assert "1 CPU core" in impossible.reason and impossible.gbps is None


def test_above_the_measured_ceiling_is_flagged_not_shown():
    cal, _ = guards.validate_calibration(cal_for(gbps=2.0))  # calibrated under load
    m = guards.guard_record(CPU_REC, calibration=cal)  # achieves 4 GB/s
    assert m.status == "above_ceiling" and "under-measured" in m.reason and "4 GB/s" in m.reason
    assert m.bw_util is None and m.bw_util_measured is None and m.gbps is None
    just = guards.guard_record(CPU_REC, calibration=guards.validate_calibration(cal_for(gbps=3.9))[0])
    assert just.status == "ok"  # within the 5% margin


def test_cache_resident_record_may_beat_the_copy_ceiling():
    small = rec(CPU_REC, cost={"flops": 1 << 18, "bytes_read": 2 << 20, "bytes_written": 1 << 20})
    cal, _ = guards.validate_calibration(cal_for(gbps=4.0))
    m = guards.guard_record(small, time_s=3 * 2**20 / 30e9, calibration=cal)  # 30 GB/s from cache
    assert m.status == "ok" and m.cache_resident and m.bw_util is None and m.bw_util_measured is None
    assert "cache-resident" in m.cache_note


def test_contended_record_carries_its_status():
    r = rec(CPU_REC, timing__extra__cpu={"contended": True, "contended_batches": 9, "batches_total": 10})
    m = guards.guard_record(r)
    assert m.status == "contended" and "9 of 10 stretches" in m.reason and m.time_s is None


def test_status_from_write_time_is_kept_and_bad_cost_is_named():
    r = rec(CPU_REC, metrics={"status": "timing_bug", "reason": "below the roofline floor"})
    m = guards.guard_record(r)
    assert m.status == "timing_bug" and m.reason == "below the roofline floor"
    for cost, field in (
        ({"flops": -1, "bytes_read": 1, "bytes_written": 1}, "cost.flops"),
        ({"flops": 1, "bytes_read": float("inf"), "bytes_written": 1}, "cost.bytes_read"),
        ({"flops": 1}, "cost.bytes_total"),
        (None, "not an object"),
    ):
        m = guards.guard_record(rec(CPU_REC, cost=cost))
        # The time stands; nothing is derived from the broken cost, and the reason says why.
        assert m.status == "ok" and field in m.reason and m.reason.startswith("no figures")
        assert m.time_s == CPU_REC["timing"]["p50_s"] and m.tflops is None and m.gbps is None and m.mfu is None
        assert guards.guard_record(rec(CPU_REC, cost=cost), time_s=-1.0).status == "invalid"


def test_read_metrics_with_no_flops_gives_no_mfu():
    copy_only = guards.Work(0, 1 << 26, 1 << 26)
    m = guards.read_metrics(copy_only, 0.1, measured=metrics.Peaks(0.05, 4.0, "m"))
    assert m.status == "ok" and m.tflops == 0.0 and m.mfu is None


# --------------------------------------------------------------------- calibrations


def test_sound_calibration_passes_unchanged():
    c = cal_for()
    out, problems = guards.validate_calibration(c, "f.jsonl")
    assert problems == [] and out == c and out is not c


@pytest.mark.parametrize(
    "gbps, why",
    [
        (-4.0, "not positive"),
        (0.0, "not positive"),
        (float("nan"), "nan"),
        ("4", "not a number"),
        (4e12, "exceeds what any CPU"),
    ],
)
def test_absurd_copy_ceiling_is_rejected_with_its_file(gbps, why):
    c = cal_for(gbps=gbps)  # consistent with its own time where it is a number: just absurd
    out, problems = guards.validate_calibration(c, "results/h-cpu/kernelwatch/calibration.jsonl (calibration 2)")
    assert out is not None and out["copy"]["gbps"] is None and out["copy"]["status"] in ("invalid", "timing_bug")
    assert why in out["copy"]["reason"]
    assert any(
        p.startswith("results/h-cpu/kernelwatch/calibration.jsonl (calibration 2)") and why in p for p in problems
    )
    assert calibrate.measured_peaks(out, "fp32", False).gbps is None  # never a ceiling
    assert out["matmul"]["fp32"]["tflops"] == 0.05  # the rest is still used


def test_gpu_calibration_far_above_the_datasheet_is_rejected():
    c = cal_for(machine="h-h200", kind="cuda", name="NVIDIA H200", gbps=4.3e15, tflops=790.0)
    c["matmul"] = {"bf16": dict(c["matmul"]["fp32"], tflops=790.0, p50_s=2 * 1024**3 / 790e12)}
    out, problems = guards.validate_calibration(c, "cal.jsonl")
    assert out["copy"]["status"] == "timing_bug" and "datasheet" in out["copy"]["reason"]
    assert out["matmul"]["bf16"]["status"] == "ok"
    assert len(problems) == 1 and "cal.jsonl" in problems[0]


def test_edited_ceiling_that_disagrees_with_its_own_time_is_rejected():
    c = cal_for(gbps=4.0)
    c["copy"]["gbps"] = 40.0  # edited; bytes / p50_s still says 4
    out, problems = guards.validate_calibration(c, "cal.jsonl")
    assert out["copy"]["gbps"] is None and "disagrees" in problems[0]


def test_calibration_without_any_usable_ceiling_is_rejected_whole():
    c = cal_for(gbps=0.0, tflops=-1.0)
    out, problems = guards.validate_calibration(c, "cal.jsonl")
    assert out is None and problems[-1].endswith("rejected: no usable ceiling")
    assert guards.validate_calibration([1, 2], "x.jsonl") == (
        None,
        ["x.jsonl: calibration is list, not an object: rejected"],
    )


def test_load_latest_skips_an_absurd_newest_calibration_and_says_so(tmp_path):
    good = cal_for(date="2026-11-30T00:00:00+00:00")
    absurd = cal_for(gbps=0.0, tflops=0.0)
    path = tmp_path / "h-cpu" / "kernelwatch" / "calibration.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(good) + "\n" + json.dumps(absurd) + "\n")
    errors: list[str] = []
    got = calibrate.load_latest(tmp_path, "h-cpu", errors)
    assert got["date"] == good["date"]  # the run reuses the sound one, never the zero one
    assert errors and all(str(path) in e for e in errors) and "rejected" in errors[-1]
    path.write_text(json.dumps(absurd) + "\n")
    assert calibrate.load_latest(tmp_path, "h-cpu", []) is None  # so `kernelwatch run` calibrates again


# --------------------------------------------------------------------- when a results directory is read


def _results_with(tmp_path, times, cal, contended=(3,)):
    """One CPU machine, one case over len(times) commits; each commit's record
    has the same cost (12 MiB moved per call) and ``times[i]`` as its time; the
    records at ``contended`` say they were measured under CPU contention."""
    from test_site_data import sha, write_results

    commits = [sha(i) for i in range(1, len(times) + 1)]
    bench = {"suite.vector_add.track_time": {"param_names": ["shape", "timing"], "params": [["'1048576'"], ["'cpu'"]]}}
    root = write_results(
        tmp_path / "results", {"h-cpu": {"gpu": "none", "cpu": "Test CPU"}}, commits, bench, lambda m, i, b, c: times[i]
    )
    d = root / "h-cpu" / "kernelwatch"
    d.mkdir(parents=True, exist_ok=True)
    for i, (h, t) in enumerate(zip(commits, times)):
        r = rec(
            CPU_REC,
            commit=h,
            params={"shape": "1048576", "timing": "cpu"},
            cost={"flops": 1 << 20, "bytes_read": 8 << 20, "bytes_written": 4 << 20},
        )
        r["timing"]["p50_s"] = t
        r["device"]["l2_bytes"] = 1 << 20  # the 12 MiB working set does not fit
        if i in contended:
            r["timing"]["extra"]["cpu"] = {"contended": True, "contended_batches": 5, "batches_total": 5}
        (d / f"{h}.jsonl").write_text(json.dumps(r) + "\n")
    if cal is not None:
        (d / "calibration.jsonl").write_text("\n".join(json.dumps(c) for c in cal) + "\n")
    return root, commits


def test_points_are_guarded_when_a_results_directory_is_read(tmp_path):
    from harness.store import results

    mib12 = 12 * 2**20
    # 3 GB/s fine; 1e9 GB/s impossible; 6 GB/s above the 4 GB/s ceiling; 3 GB/s contended; 3 GB/s fine
    times = [mib12 / 3e9, mib12 / 1e18, mib12 / 6e9, mib12 / 3e9, mib12 / 3.1e9]
    root, commits = _results_with(tmp_path, times, [cal_for(gbps=4.0), cal_for(gbps=-1.0, tflops=0.0)])
    rs = results.load(root)
    (s,) = rs.series.values()
    st = [((p.record or {}).get("metrics") or {}).get("status") for p in s.points]
    assert st == ["ok", "timing_bug", "above_ceiling", "contended", "ok"]
    vals = [p.value for p in s.points]
    assert vals[1] is vals[3] is None  # an impossible or contended time: excluded from every statistic
    # Above the *measured* ceiling the time is sound and the ceiling is under-measured: the time
    # stays in the series (a fresh run must not call the series failing); only its figures go.
    assert vals[2] == pytest.approx(times[2])
    m2 = s.points[2].record["metrics"]
    assert m2["status"] == "above_ceiling" and "under-measured" in m2["reason"] and m2.get("bw_util") is None
    assert s.points[1].reason.startswith("timing_bug: ") and "physically impossible" in s.points[1].reason
    assert s.points[3].reason.startswith("contended: ")
    ok = s.points[0].record["metrics"]
    assert ok["bw_util"] == pytest.approx(0.75) and ok["gbps"] == pytest.approx(3.0)  # derived again, not frozen
    assert rs.health["h-cpu"] == {"ok": 2, "timing_bug": 1, "above_ceiling": 1, "contended": 1}
    cal_file = str(root / "h-cpu" / "kernelwatch" / "calibration.jsonl")
    # The absurd newest calibration is named with its file and rejected; the older one is used...
    assert any(e.startswith(cal_file) and "rejected: no usable ceiling" in e for e in rs.errors)
    assert rs.calibrations["h-cpu"]["copy"]["gbps"] == 4.0
    # ...and flagged as under-measured, since a kernel beat it.
    under = [e for e in rs.errors if "under-measured" in e]
    assert len(under) == 1 and under[0].startswith(cal_file) and "1 point(s)" in under[0]


PLAIN_PCT = re.compile(r"(<[^<>]+>)\s*(\d+(?:\.\d+)?)%\s*<")


def plain_percentages_above_100(html: str) -> list[str]:
    """Percentages printed as bare element text (not a badge) above 100%."""
    return [
        m.group(2) for m in PLAIN_PCT.finditer(html) if float(m.group(2)) > 100.0 and 'class="badge' not in m.group(1)
    ]


def test_the_site_shows_guard_statuses_as_badges_and_counts_them(tmp_path):
    from harness.report import site

    mib12 = 12 * 2**20
    # newest point 4.1 GB/s against a 4 GB/s ceiling: 102.5%, within the margin
    times = [mib12 / 3e9, mib12 / 1e18, mib12 / 6e9, mib12 / 3e9, mib12 / 4.1e9]
    root, commits = _results_with(tmp_path, times, [cal_for(gbps=4.0)])
    out = tmp_path / "site"
    site.publish(root, out, analysis="off")
    index = (out / "index.html").read_text()
    # the health line counts the guarded points, one badge per status, with the total checked
    assert re.search(r'class="badge bad"[^>]*>above_ceiling 1</span>', index)
    assert re.search(r'class="badge bad"[^>]*>timing_bug 1</span>', index)
    assert re.search(r'class="badge bad"[^>]*>contended 1</span>', index) and "of 5" in index
    # 102.5% is against a ceiling a kernel beat (the 6 GB/s point): the badge says the ceiling
    # is under-measured, the figure is only in its title, never a plain number
    assert re.search(
        r'<span class="badge warn" title="102\.5% \(above ceiling\) against a doubtful ceiling: above ceiling[^"]*">'
        r"above ceiling</span>",
        index,
    )
    assert ">102.5%<" not in index and "calibrated</span>" not in index
    assert plain_percentages_above_100(index) == []
    assert "GFLOP/s" in index or "MFLOP/s" in index  # not 0.0003 TFLOP/s
    machine = next((out / "machine").glob("*.html")).read_text()
    assert "under-measured" in machine and plain_percentages_above_100(machine) == []
    assert "calibration.jsonl" in index and "under-measured" in index  # the input problems name the file


def test_plain_percentage_detector_has_teeth():
    assert plain_percentages_above_100('<td class="num">209.0%</td>') == ["209.0"]
    assert plain_percentages_above_100('<td class="num"><span class="badge warn" title="x">102.5%</span></td>') == []
    assert plain_percentages_above_100('<td class="num">99.0%</td>') == []


def test_the_guards_old_names_in_metrics_still_resolve():
    """The read guards moved to harness.core.guards; harness.core.metrics still
    answers their old names (lazily), and only those."""
    from harness.core.metrics import guard_record

    assert guard_record is guards.guard_record
    assert metrics.validate_calibration is guards.validate_calibration
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = metrics.no_such_name


def test_absurd_read_ceiling_is_rejected_and_the_copy_still_counts():
    c = cal_for(gbps=4.0)
    read_bytes = 1 << 28
    c["read"] = {"bytes": read_bytes, "p50_s": read_bytes / 4e12 / 1e9, "gbps": 4e12, "status": "ok"}
    out, problems = guards.validate_calibration(c, "cal.jsonl")
    assert out["read"]["gbps"] is None and "exceeds what any CPU" in out["read"]["reason"]
    assert any("read bandwidth" in p and "cal.jsonl" in p for p in problems)
    assert calibrate.measured_peaks(out, "fp32", False).gbps == 4.0  # the copy, never the absurd read
    c["read"] = {"bytes": read_bytes, "p50_s": read_bytes / 6.0 / 1e9, "gbps": 6.0, "status": "ok"}
    out, problems = guards.validate_calibration(c, "cal.jsonl")
    assert problems == [] and calibrate.measured_peaks(out, "fp32", False).gbps == 6.0


def test_a_contended_point_is_not_a_failure_of_the_series(tmp_path):
    """A new user saw 'failing: 4' on the findings page for points measured under CPU
    contention: discarded measurements, not failures of the kernel."""
    import subprocess
    import sys

    mib12 = 12 * 2**20
    times = [mib12 / 3e9, mib12 / 3.05e9, mib12 / 2.95e9, mib12 / 3e9, mib12 / 3.02e9]  # point 3 is contended
    root, _ = _results_with(tmp_path, times, [cal_for(gbps=4.0)])
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", "--results", str(root), "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=__import__("pathlib").Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    findings = json.loads(out.read_text())["findings"]
    assert not [f for f in findings if f["status"] == "failing"], findings
    # the contended point is still counted where the guards are reported
    from harness.store import results

    assert results.load(root).health["h-cpu"].get("contended") == 1


def test_a_contended_newest_point_does_not_make_the_series_missing(tmp_path):
    """A hostile helper (2026-12-07): a series whose newest points were all measured
    under contention was "missing since ...: the machine's later result files do not
    name this series", although every file named it."""
    from dataclasses import replace

    from harness import analysis as A
    from harness.store.dataset import build_inputs, load_input

    mib12 = 12 * 2**20
    times = [mib12 / (3e9 * (1 + 0.01 * (i % 3))) for i in range(12)]
    root, commits = _results_with(tmp_path, times, [cal_for(gbps=4.0)], contended=(9, 10, 11))
    inputs = build_inputs(load_input(root))
    (s,) = [x for x in inputs.series if x.metric == "time"]
    assert s.last_seen == commits[-1] and s.points[-1].commit == commits[8]
    _, out = A.analyze_inputs(inputs, A.AnalysisConfig())
    assert not [f for f in out["findings"] if f["status"] in ("missing", "failing")], out["findings"]
    # Negative control: without last_seen the same series reads as missing.
    inputs.series = [replace(x, last_seen=None) for x in inputs.series]
    _, out = A.analyze_inputs(inputs, A.AnalysisConfig())
    assert [f for f in out["findings"] if f["status"] == "missing"]
