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
