"""``kernelwatch bisect`` end to end on the CPU: five commits in a temporary copy of
this repository, the third making torch vector_add about 4x slower; bisect must
name that commit and confirm it against its parent."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    repo = copy_tracked(tmp_path_factory.mktemp("kwbisect"), "c0 fast")
    shas = [git(repo, "rev-parse", "HEAD")]
    for i in range(1, 5):
        if i == 2:
            va = repo / "kernels" / "vector_add.py"
            text = va.read_text()
            if TORCH_ADD not in text:
                pytest.fail("kernels/vector_add.py changed shape: update tests/test_bisect.py")
            va.write_text(
                text.replace(
                    TORCH_ADD,
                    "def torch_vector_add(x, y):\n"
                    "    for _ in range(3):  # deliberate 4x\n"
                    "        torch.add(x, y)\n"
                    "    return torch.add(x, y)",
                )
            )
        else:
            (repo / f"NOTES{i}.md").write_text(f"unrelated change {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


def run(repo, *args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "bisect", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"),
    )


def test_bisect_finds_and_confirms_the_slow_commit(history, tmp_path):
    repo, shas = history
    out = tmp_path / "bisect.json"
    proc = run(
        repo,
        "--good",
        shas[0],
        "--bad",
        shas[-1],
        "--benchmark",
        "vector_add",
        "--quick",
        "--rounds",
        "1",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert res["found"] == shas[2], (res["reason"], res["measured"])
    assert res["confirmed"]
    assert any(v["status"] == "SLOWER" for v in res["confirmation"])
    assert shas[2][:12] in proc.stdout
    # asv find measured the ends of the range and fewer than all commits
    assert shas[0] in res["measured"] and shas[-1] in res["measured"]
    assert len(res["measured"]) < len(shas) or len(shas) <= 4


def test_bisect_rejects_reversed_range(history):
    repo, shas = history
    proc = run(repo, "--good", shas[-1], "--bad", shas[0], "--benchmark", "vector_add", timeout=120)
    assert proc.returncode == 2
    assert "not an ancestor" in proc.stderr and "Traceback" not in proc.stderr
