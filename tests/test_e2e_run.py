"""End to end on the CPU: a temporary copy of this repository with three commits,
the middle one making torch vector_add deliberately slower (it computes the sum
four times: 4x the work). ``kernelwatch run`` over the three commits must show the
slowdown at that commit, write records, and build a site whose benchmark page
lists all three.

Robust on a busy 2-core machine: the ops run single-threaded (``OMP_NUM_THREADS=1``;
a multi-threaded op waits for its slowest thread, so one neighbour process can
make it 10x slower), and the slowdown is decided with the gate's statistics
(ratio of medians and its bootstrap interval) against half the injected work:
``kernelwatch run`` measures commits one after another, not interleaved, so the
margin has to absorb a neighbour that comes or goes between two commits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _git(cwd, *args):
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="kw",
        GIT_AUTHOR_EMAIL="kw@example.invalid",
        GIT_COMMITTER_NAME="kw",
        GIT_COMMITTER_EMAIL="kw@example.invalid",
    )
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def copy_project(dst: Path) -> Path:
    """Copy the working tree's tracked files (as they are now) into ``dst``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        rel = f.decode()
        src = ROOT / rel
        if not src.is_file():
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)
    _git(dst, "init", "-q", "-b", "main")
    return dst


def kernelwatch(cwd, *args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(cwd), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def three_commit_repo(tmp_path_factory):
    repo = copy_project(tmp_path_factory.mktemp("kwrepo"))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "baseline")
    va = repo / "kernels" / "vector_add.py"
    text = va.read_text()
    slow = text.replace(
        "def torch_vector_add(x, y):\n    return torch.add(x, y)",
        "def torch_vector_add(x, y):\n    torch.add(x, y)  # deliberate slowdown: the sum computed four times\n"
        "    torch.add(x, y)\n    torch.add(x, y)\n    return torch.add(x, y)",
    )
    assert slow != text, "vector_add's torch provider changed shape; update this test"
    va.write_text(slow)
    _git(repo, "commit", "-q", "-am", "vector_add: compute four times <b>&'quoted'</b>")
    (repo / "NOTES.txt").write_text("an unrelated change\n")
    _git(repo, "add", "NOTES.txt")
    _git(repo, "commit", "-q", "-m", "unrelated change")
    shas = _git(repo, "rev-list", "--reverse", "HEAD").split()
    results = repo / "kw-results"
    site = repo / "kw-site"
    proc = kernelwatch(repo, "run", "--quick", "--bench", "vector_add", "--results", str(results), "--out", str(site))
    return repo, shas, results, site, proc


def test_run_measures_every_commit(three_commit_repo):
    repo, shas, results, site, proc = three_commit_repo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    machines = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(machines) == 1
    # measured in scratch folders, moved into place: none is left behind
    assert not list((results / ".kernelwatch").glob("scratch-*"))
    stored = {json.loads(p.read_text())["commit_hash"] for p in machines[0].glob("*.json") if p.name != "machine.json"}
    assert stored == set(shas)


def _method() -> str:
    """The timing method this machine's suite uses: ``cpu``, or ``cold`` (the
    first CUDA method) on a CUDA machine, so the test passes on both."""
    from kernels import _backends

    return "cpu" if _backends.benchmark_device() == "cpu" else "cold"


def _torch_vector_add_times(results: Path, shas):
    from harness.store import results as R

    rs = R.load(results)
    found = [
        s
        for s in rs.series.values()
        if s.key.benchmark == "suite.vector_add.track_time"
        and s.key.param_dict()["provider"] == "torch"
        and s.key.param_dict().get("timing", _method()) == _method()
        and s.key.param_dict().get("dtype", "fp32") == "fp32"
    ]
    if _method() == "cpu":
        [series] = found
    else:  # the CUDA grid has several shapes: the first
        series = sorted(found, key=lambda s: str(s.key))[0]
    by_commit = {p.commit: p for p in series.points}
    return [by_commit[s] for s in shas]


def test_slowdown_shows_at_the_slow_commit(three_commit_repo):
    repo, shas, results, site, proc = three_commit_repo
    from harness.gate import decide as gate

    base, slow, after = _torch_vector_add_times(results, shas)
    assert base.value and slow.value and after.value
    # samples were recorded for the gate's statistics
    assert base.samples and len(base.samples) >= 5
    for later in (slow, after):
        stats = gate.sample_stats(base.samples, later.samples)
        # 4x the work: the ratio of medians clears 1.5x and the gate's Mann-Whitney
        # test calls it significant. Not the bootstrap interval: the samples of one
        # process under contention are not independent, and with a busy neighbour
        # it spread to [0.74, 18] around a ratio of 2.4 (p = 4e-4).
        assert stats.ratio > 1.5 and stats.p_value < 0.01, stats.as_dict()


def test_records_carry_roofline_metrics(three_commit_repo):
    repo, shas, results, site, proc = three_commit_repo
    base, slow, _ = _torch_vector_add_times(results, shas)
    for p in (base, slow):
        rec = p.record
        assert rec is not None, "no kernelwatch record beside the asv result"
        m = rec["metrics"]
        assert m["status"] == "ok"
        for k in ("tflops", "gbps", "mfu"):
            assert m[k] is not None and m[k] > 0, k
        # A working set that fits in the last-level cache is cache-resident: its gbps is
        # cache bandwidth, so no DRAM-bandwidth utilisation and no DRAM-roof sol (issue 13).
        assert m["cache_resident"] == rec["working_set_in_cache"]
        for k in ("bw_util", "sol"):
            if m["cache_resident"]:
                assert m[k] is None and "cache-resident" in m["cache_note"], k
            else:
                assert m[k] is not None and m[k] > 0, k
        assert rec["timing"]["method"] == _method()
        assert rec["harness_version"]
        assert rec["cost"]["bytes_read"] == 2 * rec["cost"]["bytes_written"]
    # slower time at the same cost -> lower bandwidth
    assert slow.record["metrics"]["gbps"] < base.record["metrics"]["gbps"]


def test_site_lists_all_three_commits(three_commit_repo):
    repo, shas, results, site, proc = three_commit_repo
    index = (site / "index.html").read_text()
    assert "suite.vector_add.track_time" in index
    # the overview's latest-results table carries the roofline figures
    assert "<th>mfu (%)</th>" in index and "<th>bw_util (%)</th>" in index
    assert "provider=torch, shape=1048576" in index
    pages = [p for p in (site / "bench").glob("*.html") if "vector_add" in p.name]
    assert pages, sorted(p.name for p in (site / "bench").iterdir())
    text = pages[0].read_text()
    for sha in shas:
        assert sha[:8] in text
    # the hostile commit subject is escaped, never raw markup
    assert "<b>&" not in text


def test_second_run_only_republishes(three_commit_repo):
    repo, shas, results, site, proc = three_commit_repo
    before = sorted(p.name for p in results.rglob("*.json"))
    again = kernelwatch(repo, "run", "--quick", "--bench", "vector_add", "--results", str(results), "--out", str(site))
    assert again.returncode == 0, again.stderr
    assert "3 of 3 commits already measured" in again.stderr
    assert sorted(p.name for p in results.rglob("*.json")) == before


def test_truncated_results_file_is_quarantined_and_measured_again(three_commit_repo):
    # asv used to write its file in place: an interrupted run left half a file and
    # every later run failed until someone deleted it (issue 14).
    repo, shas, results, site, proc = three_commit_repo
    [mdir] = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    victim = next(p for p in mdir.glob(f"{shas[1][:8]}-*.json"))
    text = victim.read_text()
    victim.write_text(text[: len(text) // 3])
    again = kernelwatch(repo, "run", "--quick", "--bench", "vector_add", "--results", str(results), "--out", str(site))
    assert again.returncode == 0, again.stderr
    assert str(victim) in again.stderr and "quarantine" in again.stderr
    assert "2 of 3 commits already measured" in again.stderr  # only the damaged commit ran again
    assert json.loads(victim.read_text())["commit_hash"] == shas[1]
    assert len(list((results / ".kernelwatch" / "quarantine").rglob("*.quarantined"))) == 1


def test_rounds_pool_the_processes_of_every_case(tmp_path):
    """``kernelwatch run --rounds 2``: every case runs in two processes (two records
    each), and asv's stored samples are both processes' samples together."""
    repo = copy_project(tmp_path / "repo")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one commit")
    results = repo / "kw-results"
    proc = kernelwatch(
        repo,
        "run",
        "HEAD",
        "--quick",
        "--rounds",
        "2",
        "--bench",
        "vector_add",
        "--results",
        str(results),
        "--out",
        str(repo / "kw-site"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (machine,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    sha = _git(repo, "rev-parse", "HEAD")
    records = [
        json.loads(line) for line in (machine / "kernelwatch" / f"{sha}.jsonl").read_text().splitlines() if line.strip()
    ]
    per_case: dict = {}
    for rec in records:
        per_case.setdefault(json.dumps(rec["params"], sort_keys=True), []).append(len(rec["timing"]["samples_s"]))
    assert per_case and all(len(v) == 2 for v in per_case.values()), per_case
    (result_file,) = [p for p in machine.glob("*.json") if p.name != "machine.json"]
    data = json.loads(result_file.read_text())
    cols = data["result_columns"]
    row = data["results"]["suite.vector_add.track_time"]
    samples = row[cols.index("samples")]
    stored = sorted(len(s) for s in samples if s)
    assert stored == sorted(sum(v) for v in per_case.values()), (stored, per_case)


def test_rounds_must_be_positive(tmp_path):
    proc = kernelwatch(ROOT, "run", "HEAD", "--rounds", "0", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2 and "must be at least 1" in proc.stderr, proc.stderr
    from harness.measure import runner

    with pytest.raises(runner.RunError, match="rounds must be a positive integer"):
        runner.run_commits("HEAD", rounds=0, results_dir=tmp_path / "r2", repo=ROOT)
    assert runner.asv_run_options("vector_add", 3) == ["--bench", "vector_add", "-a", "rounds=3"]
    assert runner.asv_run_options(None, 1) == []


def test_a_bench_filter_that_is_not_a_regex_is_refused_up_front(tmp_path):
    proc = kernelwatch(ROOT, "run", "HEAD", "--bench", "[", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2 and "not a regular expression" in proc.stderr, proc.stderr
    assert "calibrating" not in proc.stderr  # refused before any measuring
