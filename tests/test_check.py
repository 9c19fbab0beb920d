"""``kernelwatch check`` end to end on the CPU, in a temporary copy of this repository.

Branches off one base commit:

- ``slow``: torch vector_add computes the sum four times (at least 2x the time; a margin
  so a noisy 2-core runner cannot turn it UNCERTAIN)  -> exit 1, names it
- ``acked``: ``slow`` plus a commit with a Perf-Regression-Acknowledged trailer -> exit 0, warning
- ``docs``: only a documentation file changes (same code as base)        -> exit 0
- ``wrong``: torch vector_add returns a wrong sum                         -> exit 2, BROKEN (WrongResult)
- ``raises``: torch vector_add raises                                     -> exit 2, BROKEN (RuntimeError)
- ``renamed``: the torch provider is renamed torch2                       -> exit 0, REMOVED + NEW
- ``importfail``: kernels/vector_add.py raises at import                  -> exit 2, BROKEN with the error

Every check is restricted to ``--bench vector_add`` with ``--quick`` (one small
shape, short sampling). The 256-broken-benchmarks case is a unit test of the
pure decision function (tests/test_check_gate.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _repo import assert_passed_or_control_unstable, copy_tracked, git

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

TORCH_ADD = "def torch_vector_add(x, y):\n    return torch.add(x, y)"
SERIES = "suite.vector_add.track_time"


def branch_with(repo: Path, name: str, new_body: str | None, message: str, extra: dict | None = None) -> str:
    """A branch off ``main`` whose torch vector_add is ``new_body``; returns its head."""
    git(repo, "checkout", "-q", "-b", name, "main")
    va = repo / "kernels" / "vector_add.py"
    if new_body is not None:
        text = va.read_text()
        if TORCH_ADD not in text:
            pytest.fail("kernels/vector_add.py changed shape: update tests/test_check.py")
        va.write_text(text.replace(TORCH_ADD, new_body))
    for rel, content in (extra or {}).items():
        (repo / rel).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return sha


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = copy_tracked(tmp_path_factory.mktemp("kwcheck"))
    branch_with(
        r,
        "slow",
        "def torch_vector_add(x, y):\n    torch.add(x, y)  # deliberate slowdown (4x work)\n    torch.add(x, y)\n    torch.add(x, y)\n    return torch.add(x, y)",
        "vector_add: compute twice",
    )
    git(r, "checkout", "-q", "-b", "acked", "slow")
    git(
        r,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "acknowledge the vector_add slowdown\n\nPerf-Regression-Acknowledged: suite.vector_add.* "
        "reason=accuracy fix <b>needs</b> it\n",
    )
    git(r, "checkout", "-q", "main")
    branch_with(r, "docs", None, "docs only", extra={"NOTES.md": "documentation only\n"})
    branch_with(
        r,
        "wrong",
        "def torch_vector_add(x, y):\n    return torch.add(x, x)  # deliberate wrong result",
        "vector_add: wrong operand",
    )
    va = (r / "kernels" / "vector_add.py").read_text()
    provider = '"torch": Provider("torch", "torch", torch_vector_add, "torch.add (eager)"),'
    if provider not in va:
        pytest.fail("vector_add's torch provider entry changed shape: update tests/test_check.py")
    branch_with(
        r,
        "renamed",
        None,
        "vector_add: rename the torch provider",
        extra={
            "kernels/vector_add.py": va.replace(
                provider, provider.replace('"torch": Provider("torch"', '"torch2": Provider("torch2"')
            )
        },
    )
    branch_with(
        r,
        "raises",
        "def torch_vector_add(x, y):\n    raise RuntimeError('deliberate failure in torch_vector_add')",
        "vector_add: raise",
    )
    branch_with(
        r,
        "importfail",
        None,
        "vector_add: fails at import",
        extra={"kernels/vector_add.py": va + "\nraise ImportError('deliberate import failure in vector_add')\n"},
    )
    return r


def check(repo: Path, head: str, tmp_path: Path, *extra: str, env_extra: dict | None = None):
    out = tmp_path / f"{head}.json"
    summary = tmp_path / f"{head}.md"
    # One thread: a multi-threaded CPU op waits for its slowest thread, so any other
    # process on a 2-core CI machine would make its time jump tenfold.
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.update(env_extra or {})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "check",
            "--base",
            "main",
            "--head",
            head,
            "--bench",
            "vector_add",
            "--quick",
            "--json",
            str(out),
            "--summary",
            str(summary),
            *extra,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report, (summary.read_text() if summary.exists() else "")


def torch_row(report) -> dict:
    rows = [s for s in report["series"] if s["benchmark"] == SERIES and s["params"]["provider"] == "torch"]
    assert len(rows) == 1, report["series"]
    return rows[0]


def test_slower_head_blocks_and_names_the_kernel(repo, tmp_path):
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    proc, report, md = check(repo, "slow", tmp_path, env_extra={"GITHUB_STEP_SUMMARY": str(step)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = torch_row(report)
    assert row["status"] == "SLOWER" and row["blocking"]
    assert row["stats"]["ratio"] > 1.3
    assert report["blocking"] == [row["label"]]
    assert "vector_add" in md and "SLOWER" in md and "BLOCKED" in md
    assert report["device"]["name"] in md
    assert step.read_text().startswith("earlier step\n") and "vector_add" in step.read_text()


def test_acknowledgement_trailer_turns_block_into_warning(repo, tmp_path):
    proc, report, md = check(repo, "acked", tmp_path, "--rounds", "1")
    assert_passed_or_control_unstable(proc, report)
    row = torch_row(report)
    assert row["status"] == "SLOWER" and not row["blocking"]
    assert row["acknowledged"]["pattern"] == "suite.vector_add.*"
    assert row["acknowledged"]["reason"] == "accuracy fix <b>needs</b> it"
    assert [a["pattern"] for a in report["acknowledgements"]] == ["suite.vector_add.*"]
    assert any("acknowledged" in w for w in report["warnings"])
    assert "SLOWER (acknowledged)" in md
    assert "<b>" not in md  # the trailer's text is escaped in the summary


def test_unchanged_code_passes(repo, tmp_path):
    # A loose threshold: this test checks the plumbing of the passing path; the
    # false-alarm rate at the default 5% is measured by experiments/cpu-noise/gate_power.py.
    proc, report, md = check(repo, "docs", tmp_path, "--threshold", "0.5", "--rounds", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert torch_row(report)["status"] in ("SAME", "FASTER", "UNCERTAIN")
    assert report["exit_code"] == 0 and "passed" in md
    # base's suite is listed with the measurement's grid (--quick): no false "grids differ",
    # no commit-by-commit re-measurement, no phantom REMOVED rows (issue 14)
    assert not any("parameter grids differ" in w for w in report["warnings"]), report["warnings"]
    assert not any(s["status"] == "REMOVED" for s in report["series"])
    assert not any("alternating" in r["purpose"] for r in report["runs"]), report["runs"]
    # one line per phase off a terminal, with the time taken
    # head's suite first, under the discover limit (issue 29 S2), then base's, then the measurement
    lines = [line.strip() for line in proc.stderr.splitlines()]
    phases = [line.split("] ", 1)[1].split(":")[0] for line in lines if line[:1] == "[" and "] " in line]
    assert phases[:3] == ["discover head's suite", "discover base's suite", "measure"], proc.stderr


def test_wrong_result_on_head_is_broken(repo, tmp_path):
    proc, report, md = check(repo, "wrong", tmp_path, "--rounds", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    row = torch_row(report)
    assert row["status"] == "BROKEN"
    assert "WrongResult" in row["reason"] and "vector_add" in row["reason"]
    assert "BROKEN" in md


def test_raising_benchmark_on_head_is_broken(repo, tmp_path):
    proc, report, md = check(repo, "raises", tmp_path, "--rounds", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    row = torch_row(report)
    assert row["status"] == "BROKEN"
    assert "RuntimeError: deliberate failure in torch_vector_add" in row["reason"]


def test_bad_ref_is_a_clear_error(repo, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", "--base", "main", "--head", "no-such-branch"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(repo)),
    )
    assert proc.returncode == 2
    assert "no-such-branch" in proc.stderr and "Traceback" not in proc.stderr


def test_renamed_provider_is_removed_and_new(repo, tmp_path):
    proc, report, md = check(repo, "renamed", tmp_path, "--rounds", "1")
    assert_passed_or_control_unstable(proc, report)
    by_provider = {s["params"]["provider"]: s for s in report["series"] if s["benchmark"] == SERIES}
    assert by_provider["torch"]["status"] == "REMOVED"
    assert by_provider["torch2"]["status"] == "NEW"
    assert "REMOVED" in md and "NEW" in md


def test_kernel_failing_at_import_on_head_is_broken(repo, tmp_path):
    # The op's module raising at import drops its benchmark from head's suite; the
    # gate used to call it REMOVED and pass (issue 14). It must fail closed.
    proc, report, md = check(repo, "importfail", tmp_path, "--rounds", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert report["exit_code"] == 2
    row = torch_row(report)
    assert row["status"] == "BROKEN"
    assert "ImportError: deliberate import failure in vector_add" in row["reason"]
    assert "kernels/vector_add.py" in row["reason"]
    assert "deliberate import failure" in md and "BROKEN" in md
    assert not any(s["status"] == "REMOVED" for s in report["series"])
