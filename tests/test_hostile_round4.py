"""Reproductions from round 4 of the hostile trial of issue 29 (docs/hostile-trial.md,
"Round 4 (h29t3)"), fixed since: each test states what the trial expected (it failed
on the trial's commit, as a strict xfail), with a passing control beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_bad_input import _benchmarks, _machine, _meta, _v2_file
from test_hostile_h29t import _history

ROOT = Path(__file__).resolve().parent.parent


def _analyze(res: Path, *extra: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    env.pop("KERNELWATCH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", "--results", str(res), "--repo", "", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env=env,
    )


def _step_history(res: Path, bench: str) -> None:
    """24 commits of ``bench`` on machine ``m``, 1.0 s then 2.0 s from the 13th: a step
    that analyze reports in its findings table, with the benchmark's name in it."""
    _benchmarks(res, {bench: _meta(bench)})
    files = {}
    for i in range(24):
        c = f"{i + 1:02x}" * 20
        value = (1.0 if i < 12 else 2.0) * (1 + 0.002 * (i % 3))
        files[f"{c[:8]}-py3.11.json"] = _v2_file(c, date=1_700_000_000_000 + i * 1000, value=value, bench=bench)
    _machine(res, "m", files)


def test_analyze_json_onto_an_input_results_file_is_refused_and_the_input_kept(tmp_path):
    res = tmp_path / "results"
    victim = _history(res)
    before = victim.read_bytes()
    proc = _analyze(res, "--json", str(victim))
    assert victim.read_bytes() == before, "the measured results file was overwritten by the report"
    assert proc.returncode == 2, proc.stdout + proc.stderr


def test_analyze_json_beside_the_results_writes_the_report_control(tmp_path):
    res = tmp_path / "results"
    victim = _history(res)
    before = victim.read_bytes()
    out = tmp_path / "report.json"
    proc = _analyze(res, "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["schema"] == "kernelwatch-analysis"
    assert victim.read_bytes() == before


def test_analyze_on_an_ascii_terminal_prints_a_non_ascii_name_escaped(tmp_path):
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_\U0001f680_\u00e9")
    proc = _analyze(res, env_extra={"PYTHONIOENCODING": "ascii"})
    assert "Traceback" not in proc.stderr
    assert "UnicodeEncodeError" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_analyze_on_a_utf8_terminal_prints_a_non_ascii_name_control(tmp_path):
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_\U0001f680_\u00e9")
    proc = _analyze(res, env_extra={"PYTHONIOENCODING": "utf-8"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time_\U0001f680_\u00e9" in proc.stdout  # the name is in the findings table
    assert "Traceback" not in proc.stderr


def test_a_megabyte_benchmark_name_loses_its_row_and_is_shown_cut(tmp_path):
    """A 1 MB benchmark name was printed whole in every warning and table row
    (round 4, split). It now loses its own row and metadata with a warning that shows
    its first 60 characters; the step of the benchmark beside it is still found."""
    res = tmp_path / "results"
    long = "suite.x.time_" + "y" * 1_000_000
    _step_history(res, "suite.x.time_x")
    meta = json.loads((res / "benchmarks.json").read_text())
    meta[long] = _meta(long)
    (res / "benchmarks.json").write_text(json.dumps(meta))
    for f in (res / "m").glob("*-py3.11.json"):
        d = json.loads(f.read_text())
        d["results"][long] = d["results"]["suite.x.time_x"]
        f.write_text(json.dumps(d))
    out = tmp_path / "report.json"
    proc = _analyze(res, "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert len(text) < 200_000, len(text)
    assert "MAX_NAME_CHARS" in text
    rep = json.loads(out.read_text())
    names = {f["key"]["benchmark"] for f in rep["findings"] if f.get("key")}
    assert "suite.x.time_x" in names and long not in names


def test_a_long_but_legal_benchmark_name_is_kept_control(tmp_path):
    res = tmp_path / "results"
    name = "suite.x.time_" + "y" * 1000  # 1,013 characters: under MAX_NAME_CHARS
    _step_history(res, name)
    out = tmp_path / "report.json"
    proc = _analyze(res, "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MAX_NAME_CHARS" not in proc.stdout + proc.stderr
    assert name in {f["key"]["benchmark"] for f in json.loads(out.read_text())["findings"] if f.get("key")}


def test_analyze_json_to_a_closed_stdout_says_so(tmp_path):
    """``--json -`` with fd 1 closed: Python's ``sys.stdout`` is ``None``, and the
    write failed as "AttributeError: 'NoneType' object has no attribute 'write'"."""
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_x")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KERNELWATCH_DEBUG", None)
    cmd = [sys.executable, "-m", "harness.cli", "analyze", "--results", str(res), "--repo", "", "--json", "-"]
    closed = subprocess.run(
        cmd,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,
        preexec_fn=lambda: os.close(1),
    )
    assert closed.returncode == 2
    assert "standard output is closed" in closed.stderr and "AttributeError" not in closed.stderr, closed.stderr
    # the control: an open stdout gets the report
    ok = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0 and json.loads(ok.stdout)["schema"] == "kernelwatch-analysis"


def test_a_liger_name_column_over_the_limit_loses_its_row_only(tmp_path):
    from test_bad_input import LIGER_HEADER, _liger_row

    from harness.store import importers

    f = tmp_path / "liger.csv"
    long = "k" * 100_000  # under the CSV field limit, over MAX_NAME_CHARS
    ok = "p" * 1000  # a long provider name under the limit: kept (the control)
    f.write_text(
        "\n".join([LIGER_HEADER, _liger_row(1024, 0.05, provider=ok), _liger_row(2048, 0.05, provider=long)]) + "\n"
    )
    rs = importers.load_liger_csvs([f])
    bad = [e for e in rs.errors if e.startswith(f"{f}:3:")]
    assert bad and "MAX_NAME_CHARS" in bad[0] and len(bad[0]) < 1000, rs.errors
    assert [dict(s.key.params)["H"] for s in rs.series.values()] == ["1024"]


def test_analyze_into_a_pipe_closed_early_exits_2_and_says_so(tmp_path):
    """Round 5: ``kernelwatch analyze | head -c 20`` exited 1 with no message (rich's
    broken-pipe handler), which reads as "regression found"."""
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_x")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KERNELWATCH_DEBUG", None)
    cmd = [sys.executable, "-m", "harness.cli", "analyze", "--results", str(res), "--repo", ""]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.read(20)
    p.stdout.close()  # the reader goes away, like head
    err = p.stderr.read().decode(errors="replace")
    assert p.wait(timeout=300) == 2, err
    assert "broken pipe" in err, err
    # the control: a reader that reads everything gets exit 0
    ok = subprocess.run(cmd, cwd=ROOT, capture_output=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_an_environment_variable_out_of_range_is_bad_input_not_a_crash(tmp_path):
    """Round 5: ``KERNELWATCH_CPU_THREADS=999999 kernelwatch calibrate`` was refused with
    its range and exit 2, but worded as a crash ("calibrate failed: EnvError: ...")."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), KERNELWATCH_CPU_THREADS="999999")
    env.pop("KERNELWATCH_DEBUG", None)
    cmd = [sys.executable, "-m", "harness.cli", "calibrate", "--quick", "--results", str(tmp_path / "r")]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2, p.stderr
    assert "KERNELWATCH_CPU_THREADS" in p.stderr and "1 to 1024" in p.stderr, p.stderr
    assert "failed: EnvError" not in p.stderr, p.stderr


def test_analyze_errors_go_to_stderr_like_every_subcommand(tmp_path):
    """Round 5 split: ``analyze`` printed "error: ..." on standard output beside its
    table, so ``analyze > report.txt`` hid the reason for exit 2 (``publish`` says
    ``kernelwatch: error:`` on stderr). Each refusal is now on stderr, stdout empty."""
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_x")
    cases = {
        "--json into the results": ("--json", str(res / "r.json")),
        "--json a non-regular file": ("--json", "/proc/version"),
        "--liger missing": ("--liger", str(tmp_path / "nope.csv")),
    }
    for label, extra in cases.items():
        proc = _analyze(res, *extra)
        assert proc.returncode == 2, (label, proc.stdout, proc.stderr)
        assert "kernelwatch: error:" in proc.stderr, (label, proc.stderr)
        assert "error" not in proc.stdout, (label, proc.stdout)
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _analyze(empty)
    assert proc.returncode == 2 and "no benchmark series found" in proc.stderr and not proc.stdout.strip()
    # the control: a usable history prints its table on stdout and no error anywhere
    ok = _analyze(res)
    assert ok.returncode == 0 and "kernelwatch analysis" in ok.stdout and "error" not in ok.stderr, ok.stderr


def test_analyze_summary_counts_the_input_problems_it_printed(tmp_path):
    """Round 5 noticed: the summary's "0 skipped" counted only asv NaN points while
    other skipped rows were printed above it; it now also counts input problems."""
    res = tmp_path / "results"
    _step_history(res, "suite.x.time_x")
    ok = _analyze(res)
    assert ok.returncode == 0 and "0 input problems" in ok.stdout, ok.stdout[:600]
    (res / "m" / ("ff" * 20 + "-py.json")).write_text("{not json")
    bad = _analyze(res)
    assert bad.returncode == 0, bad.stderr
    assert "kernelwatch: warning:" in bad.stderr and "1 input problems" in bad.stdout, (
        bad.stdout[:600],
        bad.stderr[-600:],
    )


_LIGER_HEADER = (
    "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
    "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version"
)
_LIGER_CFG = '"{""M"": 2048, ""dtype"": ""torch.bfloat16""}"'


def _liger_row(x, unit: str, value: float, day: int, version: str) -> str:
    return (
        f"rms_norm,liger,forward,speed,{unit},H,hidden size,{x},{value},{value},{value},{_LIGER_CFG},"
        f"NVIDIA H100 NVL,2025-02-{day:02d} 10:00:00,{version}"
    )


def test_liger_header_naming_a_column_twice_is_refused_naming_the_file(tmp_path):
    """Round 6 FL1: a second ``y_value_50`` column was read silently (the later
    cell won). The file is refused with its first line named; another file loads."""
    dup = tmp_path / "dup.csv"
    dup.write_text(_LIGER_HEADER + ",y_value_50\n" + _liger_row(1024, "ms", 0.02, 1, "0.5.2") + ",0.025\n")
    good = tmp_path / "good.csv"
    good.write_text(_LIGER_HEADER + "\n" + "\n".join(_liger_row(1024, "ms", 0.02, d, f"0.6.{d}") for d in range(1, 5)))
    out = tmp_path / "r.json"
    proc = _analyze(dup, "--liger", str(good), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"{dup}:1: the header names column(s) ['y_value_50'] more than once" in proc.stderr, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["input"]["files_loaded"] == 1 and rep["summary"]["points"] == 4  # the control file, whole


def test_liger_case_in_two_time_units_is_converted_and_said(tmp_path):
    """Round 6 FL2: one case in ms in one version and s in the next was read
    as a 1000x change. The later rows are converted to the case's unit, named."""
    csv = tmp_path / "mix.csv"
    rows = [_liger_row(1024, "ms", 0.05, 1, "0.5.2")] + [_liger_row(1024, "s", 5e-05, d, f"0.6.{d}") for d in (2, 3, 4)]
    csv.write_text(_LIGER_HEADER + "\n" + "\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    proc = _analyze(csv, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "3 row(s) in 's' where their case's first row is in 'ms' (rows 3, 4, 5): converted to 'ms'" in proc.stderr
    rep = json.loads(out.read_text())
    assert not [f for f in rep["findings"] if f["status"] in ("regression", "improvement", "pending")], rep["findings"]
    (tp,) = rep["throughput"]
    assert abs(tp["time_s"] - 5e-05) < 1e-12, tp
    # the control: a unit that is not a time cannot be converted, and that row alone is skipped
    csv.write_text(_LIGER_HEADER + "\n" + "\n".join(rows[:3] + [_liger_row(1024, "GB", 5e-05, 4, "0.6.4")]) + "\n")
    proc = _analyze(csv, "--json", str(out))
    assert "5: unit 'GB', but this case's earlier rows are in 'ms'; not convertible, row skipped" in proc.stderr
    assert json.loads(out.read_text())["summary"]["points"] == 3


def test_liger_x_values_from_2_to_the_53_are_refused_not_merged(tmp_path):
    """Round 6 FL3: x = 2^53 and 2^53 + 1 are one float64, so two cases became
    one point (the median of 0.05 and 0.5). Such rows are refused, each named."""
    csv = tmp_path / "bigx.csv"
    rows = [_liger_row(2**53, "ms", 0.05, 1, "0.5.2"), _liger_row(2**53 + 1, "ms", 0.5, 2, "0.5.2")]
    rows += [_liger_row(2**53 - 1, "ms", 0.01, d, f"0.6.{d}") for d in (1, 2, 3)]
    csv.write_text(_LIGER_HEADER + "\n" + "\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    proc = _analyze(csv, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    for line in (2, 3):
        assert f"{csv}:{line}: column x_value" in proc.stderr and "beyond 2^53" in proc.stderr, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["summary"]["points"] == 3  # the control: 2^53 - 1 is exact and kept
