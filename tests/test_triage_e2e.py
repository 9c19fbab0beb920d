"""``kernelwatch profile`` and ``kernelwatch triage`` end to end on the CPU.

A temporary copy of this repository with two commits: ``base`` (as is) and
``slow``, where torch vector_add computes the sum four times (a deliberate
slowdown: ``aten::add`` 4x the time, 1 -> 4 launches per call). Triage must
exit 1 and name ``aten::add`` first; the profile's trace must be present and
loadable; the same commits reached through a finding id of an analysis report
give the same answer; an unchanged pair exits 0.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _repo import copy_tracked, git

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

TORCH_ADD = "def torch_vector_add(x, y):\n    return torch.add(x, y)"
SLOW_ADD = (
    "def torch_vector_add(x, y):\n    torch.add(x, y)  # deliberate slowdown (4x work)\n"
    "    torch.add(x, y)\n    torch.add(x, y)\n    return torch.add(x, y)"
)
PATTERN = r"vector_add.*'torch'"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    dst = copy_tracked(tmp_path_factory.mktemp("triage-repo"))
    va = dst / "kernels" / "vector_add.py"
    text = va.read_text()
    if TORCH_ADD not in text:
        pytest.fail("kernels/vector_add.py changed shape: update tests/test_triage_e2e.py")
    va.write_text(text.replace(TORCH_ADD, SLOW_ADD))
    git(dst, "commit", "-q", "-am", "slow vector_add")
    return dst


def kw(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=600,
    )


def test_triage_names_the_slowed_op_first(repo, tmp_path):
    proc = kw(
        repo,
        "triage",
        "--base",
        "main~1",
        "--head",
        "main",
        "--benchmark",
        PATTERN,
        "--quick",
        "--rounds",
        "5",
        "--iters",
        "20",
        "--out",
        str(tmp_path / "t"),
        "--results",
        str(tmp_path / "res"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rep = json.loads((tmp_path / "t" / "triage.json").read_text())
    (case,) = rep["cases"]
    assert case["label"] == "suite.vector_add.track_time('torch', '1048576', 'fp32', 'cpu')"
    assert case["status"] == "slower" and case["first"] == "aten::add"
    top = case["kernels"][0]
    assert top["name"] == "aten::add" and top["status"] == "slower"
    assert (top["base_calls"], top["head_calls"]) == (1, 4) and top["launches_changed"]
    assert top["head_us"] > 2 * top["base_us"]
    assert rep["environment"]["diff"] == []
    assert "Most of the difference: `aten::add`" in proc.stdout
    for rel in case["base_traces"] + case["head_traces"]:
        assert (tmp_path / "t" / rel).is_file()
    # --results: stored for the site (report gzipped: asv reads every *.json), no record to compare
    (stored,) = (tmp_path / "res" / "kernelwatch-profiles").iterdir()
    assert json.loads(gzip.open(stored / "triage.json.gz").read())["cases"][0]["first"] == "aten::add"
    assert (stored / case["head_traces"][0]).is_file() and not list(stored.rglob("*.json"))
    assert "No stored record of base and head" in proc.stdout


def test_profile_writes_a_loadable_trace_and_table(repo, tmp_path):
    proc = kw(
        repo, "profile", PATTERN, "--commit", "main", "--quick", "--iters", "5", "--ncu", "--out", str(tmp_path / "p")
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--ncu needs a CUDA device" in proc.stderr  # said so, and went on
    rep = json.loads((tmp_path / "p" / "profile.json").read_text())
    (case,) = rep["cases"]
    assert case["kernels"][0]["name"] == "aten::add" and case["kernels"][0]["calls_per_iter"] == 4
    assert case["compile_facts"]["status"] == "not_applicable"
    trace = json.loads(gzip.open(tmp_path / "p" / case["trace"]).read())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"aten::add", "kernelwatch.iteration"} <= names
    assert (tmp_path / "p" / "profile.md").read_text().count("`aten::add`") == 1


def test_triage_from_a_finding_and_an_unchanged_pair(repo, tmp_path):
    base, head = git(repo, "rev-parse", "main~1"), git(repo, "rev-parse", "main")
    key = {
        "machine": "any",
        "benchmark": "suite.vector_add.track_time",
        "params": {"provider": "torch", "shape": "1048576", "dtype": "fp32", "timing": "cpu"},
    }
    (tmp_path / "a.json").write_text(
        json.dumps(
            {
                "findings": [],
                "events": [
                    {
                        "id": f"ev-{head[:8]}",
                        "status": "regression",
                        "commit_range": [base, head],
                        "series": [{"key": key}],
                    }
                ],
            }
        )
    )
    proc = kw(
        repo,
        "triage",
        "--finding",
        f"ev-{head[:8]}",
        "--analysis",
        str(tmp_path / "a.json"),
        "--quick",
        "--rounds",
        "5",
        "--iters",
        "20",
        "--out",
        str(tmp_path / "f"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rep = json.loads((tmp_path / "f" / "triage.json").read_text())
    assert rep["cases"][0]["first"] == "aten::add" and rep["finding"].startswith(f"event ev-{head[:8]}")
    # negative control: base against itself names nothing
    proc = kw(
        repo,
        "triage",
        "--base",
        "main~1",
        "--head",
        "main~1",
        "--benchmark",
        PATTERN,
        "--quick",
        "--rounds",
        "5",
        "--iters",
        "20",
        "--out",
        str(tmp_path / "same"),
    )
    rep = json.loads((tmp_path / "same" / "triage.json").read_text())
    assert rep["cases"][0]["first"] is None, proc.stdout
    assert rep["cases"][0]["status"] != "slower"
    assert proc.returncode == 0, proc.stdout + proc.stderr
