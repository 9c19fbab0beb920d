"""scripts/gpu_run.sh: the one-shot GPU run (docs/gpu.md).

On a machine without a CUDA device it must say so and exit 3 without
measuring anything; its plan mode must list every phase with the exact
commands and write nothing; ``--allow-cpu`` must drive the whole pipeline
(correctness, calibrate, self-check, three commits benchmarked, site) end to end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import _backends

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_run.sh"
# Results first (issue 18): calibrate, selfcheck, bench-head and bench-range
# (issue 26: two commits stored) before the tests.
PHASES = [
    "detect",
    "environment",
    "deps",
    "providers",
    "calibrate",
    "selfcheck",
    "bench-head",
    "bench-range",
    "correctness",
    "tests",
]

needs_no_gpu = pytest.mark.skipif(
    _backends.cuda_available(), reason="a CUDA device is visible: the script would run the real GPU phases"
)


def _env(**extra) -> dict:
    # No probes by default (each is a fresh interpreter running a case); the
    # test of the probed plan turns them on.
    env = dict(os.environ, PYTHON=sys.executable, KERNELWATCH_PLAN_PROBE="0")
    for key in ("OUT", "KERNELWATCH_GPU_RUN_PLAN", "KERNELWATCH_WHEELS", "KERNELWATCH_GPU_BUDGET_S"):
        env.pop(key, None)
    env.update(extra)
    return env


def _run(*args, cwd=ROOT, script=SCRIPT, timeout=300, **env):
    return subprocess.run(
        ["bash", str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env(**env)
    )


@needs_no_gpu
def test_no_cuda_device_is_reported_and_exits_3(tmp_path):
    out = tmp_path / "out"
    proc = _run(str(out))
    text = proc.stdout + proc.stderr
    assert proc.returncode == 3, text
    assert "no CUDA device" in text
    assert "torch.cuda.is_available() is False" in text
    log = (out / "gpu_run.log").read_text()
    assert "no CUDA device" in log and "Nothing was measured" in log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "none: no CUDA device"
    assert [p["phase"] for p in summary["phases"]] == ["detect"]
    assert summary["phases"][0]["status"] == "no-cuda"
    # Nothing measured, nothing pretended.
    assert not (out / "results").exists() and not (out / "calibration.json").exists()


def _tree_without_git(dst: Path) -> Path:
    """The working tree's tracked files, as the device tool may deliver them: no .git."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for f in filter(None, files):
        src = ROOT / f.decode()
        if src.is_file():
            out = dst / f.decode()
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(src.read_bytes())
            out.chmod(src.stat().st_mode)
    return dst


@needs_no_gpu
def test_git_is_checked_first_and_a_bundle_restores_the_history(tmp_path):
    tree = _tree_without_git(tmp_path / "tree")
    script = tree / "scripts" / "gpu_run.sh"
    # No .git and no bundle: said in the first lines, before anything is measured.
    proc = _run(str(tmp_path / "o1"), cwd=tree, script=script)
    assert proc.returncode == 3
    log = (tmp_path / "o1" / "gpu_run.log").read_text().splitlines()
    assert log[1].startswith("[git] PROBLEM: no .git at") and "--bundle" in log[1]
    # With a bundle of HEAD the history is restored and the files are left as they are.
    bundle = tmp_path / "history.bundle"
    subprocess.run(["git", "bundle", "create", str(bundle), "HEAD"], cwd=ROOT, check=True, capture_output=True)
    before = (tree / "README.md").read_bytes()
    proc = _run("--bundle", str(bundle), str(tmp_path / "o2"), cwd=tree, script=script)
    assert proc.returncode == 3
    log = (tmp_path / "o2" / "gpu_run.log").read_text().splitlines()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert log[1].startswith("[git] git version") and f"restored from the bundle {bundle} at {head[:12]}" in log[1]
    got = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip()
    assert got == head and (tree / "README.md").read_bytes() == before


@needs_no_gpu
def test_sigterm_to_the_script_stops_the_phase_gracefully_and_archives(tmp_path):
    # An outer `timeout` sends SIGTERM: the running phase (here the tests
    # phase's pytest) is stopped the way its limit would (SIGINT: the junit xml
    # is written), the summary written and the output archived.
    import signal
    import tarfile
    import time

    out, archive = tmp_path / "out", tmp_path / "ret" / "gpu-run.tar.gz"
    skip = "deps,providers,calibrate,selfcheck,bench-head,bench-range,correctness"
    args = ["--allow-cpu", "--skip", skip, "--bench", "x", "-k", "layout", "--archive", str(archive), str(out)]
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "logs" / "tests.log").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[0]
        # pytest is importing or collecting (it takes 5-10 s here to collect the
        # suite); 8 s was too long on an idle machine, where the phase was over
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, text
    rows = [line.split("\t") for line in (out / "phases.tsv").read_text().splitlines()[1:]]
    status = {r[0]: r[1] for r in rows}
    assert status["tests"] == "interrupted" and status["interrupted"] == "failed", rows
    assert "got SIGTERM" in (out / "gpu_run.log").read_text()
    assert (out / "summary.txt").is_file()
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "out/summary.txt" in names and "out/phases.tsv" in names
    assert (archive.parent / "summary.txt").is_file() and (archive.parent / "gpu_run.log").is_file()


def _plan_commands(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        m = re.match(r"\s+\d+\. (\S+)\s+cap\s+\S+\s+(.*)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_plan_lists_every_phase_with_its_command_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    # The process start as measured on an idle 2-core machine (5 s): measured
    # under load it grows 3-4x and the plan would cut headline torch cases.
    proc = _run("--dry-run", str(out), KERNELWATCH_PLAN_START_S="5")
    assert proc.returncode == 0, proc.stderr
    rows = _plan_commands(proc.stdout)
    assert list(rows) == PHASES
    o = str(out)
    assert f"calibrate --results {o}/results --out {o}/calibration.json" in rows["calibrate"]
    assert f"selfcheck --out {o}/selfcheck.json" in rows["selfcheck"]
    assert f"run HEAD --results {o}/results --out {o}/site" in rows["bench-head"]
    # bench-range: the first-parent commits of HEAD~3..HEAD except HEAD, one run each
    # (a plain `rev-list HEAD~3..HEAD` also lists every commit of a merged branch).
    fp = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", "HEAD~3..HEAD~1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert (
        f"scripts/run_commits.sh {sys.executable} {' '.join(c[:12] for c in fp)} -- --results {o}/results --out {o}/site"
        in rows["bench-range"]
    )
    assert (
        "tests/test_kernels.py" in rows["correctness"]
        and f"--junitxml={o}/junit-correctness.xml" in rows["correctness"]
    )
    assert " -x" not in rows["correctness"]
    assert "--ignore=tests/test_gpu_run.py" in rows["tests"]
    assert "--no-index" in rows["deps"] and "--target" in rows["deps"]  # never into the interpreter's env
    assert not out.exists(), "the plan must not write anything"
    # Results stored before the long test runs.
    assert list(rows).index("bench-head") < list(rows).index("bench-range") < list(rows).index("correctness")
    assert list(rows).index("correctness") < list(rows).index("tests")
    # calibrate is capped below its phase's limit; bench phases never calibrate (issue 26 finding 4).
    assert "--time-cap 28" in rows["calibrate"]
    assert "--no-calibrate" in rows["bench-head"] and "--no-calibrate" in rows["bench-range"]

    # The headline selection, cut to bench-head's limit by the per-case plan:
    # each op's largest CUDA shape, bf16 where the op benchmarks bf16, every
    # provider listed, kept or cut; the regex matches exactly the kept ones.
    bench = shlex.split(rows["bench-head"])
    regex = re.compile(bench[bench.index("--bench") + 1])
    import kernels
    from kernels._base import shape_label

    plan = {m.group(2): m.group(1) for m in re.finditer(r"^\s+(keep|CUT)\s.*?(suite\.\S+\(.*?\))", proc.stdout, re.M)}
    m = re.search(r"bench-head plan \(cuda\): (\d+) of (\d+) headline cases in (\d+)s of (\d+)s", proc.stdout)
    assert m, proc.stdout
    assert int(m.group(3)) <= int(m.group(4)) and int(m.group(1)) == sum(v == "keep" for v in plan.values())
    n = 0
    for name in kernels.OP_MODULES:
        op = kernels.get_op(name)
        shapes = list(op.bench_shapes["cuda"])
        largest = max(shapes, key=lambda s: __import__("math").prod(s))
        dtypes = list(op.bench_dtypes["cuda"])
        dtype = "bf16" if "bf16" in dtypes else dtypes[0]
        assert plan[f"suite.{name}.track_time('torch', '{shape_label(largest)}', '{dtype}', 'cold')"] == "keep"
        for prov in op.providers:
            case = f"suite.{name}.track_time('{prov}', '{shape_label(largest)}', '{dtype}', 'cold')"
            assert bool(regex.search(case)) == (plan[case] == "keep"), case
            n += 1
        other = next((d for d in dtypes if d != dtype), None)
        if other:
            assert not regex.search(f"suite.{name}.track_time('torch', '{shape_label(largest)}', '{other}', 'cold')")
        for s in shapes:
            if s != largest:
                assert not regex.search(f"suite.{name}.track_time('torch', '{shape_label(s)}', '{dtype}', 'cold')")
    assert n == int(m.group(2)) == len(plan)
    # Correctness after bench-head at the headline dtypes only.
    assert "(matmul and bf16)" in rows["correctness"] and "(histogram and fp32)" in rows["correctness"]


def test_plan_from_environment_with_allow_cpu_uses_quick_and_no_headline(tmp_path):
    proc = _run("--allow-cpu", "--skip", "tests", "-k", "vector_add", str(tmp_path / "o"), KERNELWATCH_GPU_RUN_PLAN="1")
    assert proc.returncode == 0, proc.stderr
    rows = _plan_commands(proc.stdout)
    assert list(rows) == PHASES
    assert rows["calibrate"].endswith("--quick") and "--quick" in rows["bench-head"]
    # The CPU plan: the quick CPU grid (torch providers), sized like the GPU one.
    assert "bench-head plan (cpu)" in proc.stdout
    assert "--bench" in rows["bench-head"] and ".cpu." in rows["bench-head"]
    assert "-k '(vector_add) and (" in rows["correctness"]
    assert "[skipped: --skip]" in rows["tests"]
    assert not (tmp_path / "o").exists()


@needs_no_gpu
def test_dry_run_plan_costs_come_from_a_probe_on_this_machine_and_leave_30_percent(tmp_path):
    proc = _run("--allow-cpu", "--dry-run", str(tmp_path / "o"), KERNELWATCH_PLAN_PROBE="1")
    assert proc.returncode == 0, proc.stderr
    probe = re.search(r"probe \(torch\): (.+?): ([\d.]+)s, 0 Triton compiles", proc.stdout)
    assert probe, proc.stdout
    m = re.search(
        r"bench-head plan \(cpu\): (\d+) of \d+ headline cases in (\d+)s of (\d+)s \(70% of (\d+)s\)", proc.stdout
    )
    assert m, proc.stdout
    kept, total, limit, budget = (int(x) for x in m.groups())
    assert kept >= 1 and total <= limit <= round(0.7 * budget) + 1
    rows = re.findall(r"^\s+keep\s+([\d.]+)s\s+[\d.]+s\s+(\w+)", proc.stdout, re.M)
    assert rows and all(src == "probed" for _, src in rows)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--bogus", "o"], "unknown option --bogus"),
        (["--budget", "ten", "o"], "--budget must be a whole number"),
        (["--budget", "30", "o"], "--budget must be a whole number of seconds >= 60"),
        (["--skip", "nonsense", "o"], "unknown phase 'nonsense'"),
        (["--full", "--bench", "x", "o"], "--full and --bench exclude each other"),
        ([], "no output folder"),
        (["a", "b"], "more than one output folder"),
    ],
)
def test_bad_usage_exits_2_with_one_line(args, message, tmp_path):
    proc = _run(*args, cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr


def _git(cwd, *args):
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="kw",
        GIT_AUTHOR_EMAIL="kw@example.invalid",
        GIT_COMMITTER_NAME="kw",
        GIT_COMMITTER_EMAIL="kw@example.invalid",
    )
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.mark.slow
@needs_no_gpu
def test_allow_cpu_runs_the_whole_pipeline(tmp_path):
    """A copy of the project with four commits, vector_add only, tests phase skipped:
    every other phase must run and three commits must be benchmarked and published."""
    repo = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for f in filter(None, files):
        if f.startswith(b"results"):  # other runs' results folders are not the project
            continue
        src = ROOT / f.decode()
        if src.is_file():
            dst = repo / f.decode()
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
            dst.chmod(src.stat().st_mode)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    for msg in ("two", "three", "four"):
        _git(repo, "commit", "-q", "--allow-empty", "-m", msg)
    shas = _git(repo, "rev-list", "--max-count=3", "HEAD").split()

    out = tmp_path / "out"
    home = tmp_path / "home"  # the runner writes ~/.asv-machine.json
    home.mkdir()
    proc = _run(
        "--allow-cpu",
        "-k",
        "vector_add",
        "--bench",
        r"suite\.vector_add\.",
        "--skip",
        "tests",
        "--budget",
        "400",
        str(out),
        cwd=repo,
        script=repo / "scripts" / "gpu_run.sh",
        timeout=600,
        HOME=str(home),
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    summary = json.loads((out / "summary.json").read_text())
    status = {p["phase"]: p["status"] for p in summary["phases"]}
    assert status == {
        "detect": "ok",
        "environment": "ok",
        "deps": "ok",
        "providers": "ok",
        "correctness": "ok",
        "calibrate": "ok",
        "selfcheck": "skipped",
        "bench-head": "ok",
        "bench-range": "ok",
        "tests": "skipped",
    }, text
    assert summary["mode"].startswith("CPU") and "THESE ARE CPU NUMBERS" in (out / "summary.txt").read_text()
    junit = summary["tests"]["junit-correctness"]
    assert junit["tests"] > 0 and junit["failures"] == 0 and junit["errors"] == 0
    ((machine, res),) = summary["results"].items()
    assert sorted(c["commit"] for c in res["asv_commits"]) == sorted(shas)
    assert all(c["cases_with_values"] >= 1 for c in res["asv_commits"])
    assert json.loads((out / "calibration.json").read_text())["machine"] == machine
    assert (out / "site" / "index.html").is_file()
    assert any(p.name.startswith("asv-") for p in (out / "logs").iterdir())
    providers = json.loads((out / "providers.json").read_text())
    assert any(r["op"] == "vector_add" and r["provider"] == "torch" for r in providers)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 5_000_000, f"output is {size} bytes: should stay small"


def test_run_commits_runs_each_commit_and_continues_past_a_failure(tmp_path):
    fake = tmp_path / "py"
    log = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n[ "$4" = bad ] && exit 3\nexit 0\n')
    fake.chmod(0o755)
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "run_commits.sh"),
            str(fake),
            "aaa",
            "bad",
            "ccc",
            "--",
            "--results",
            "R",
            "--bench",
            "x|y",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "bad failed" in proc.stdout
    assert log.read_text().splitlines() == [
        f"-m harness.cli run {c} --results R --bench x|y" for c in ("aaa", "bad", "ccc")
    ]
    ok = subprocess.run(["bash", str(ROOT / "scripts" / "run_commits.sh"), str(fake), "aaa", "--"], capture_output=True)
    assert ok.returncode == 0
    assert (
        subprocess.run(["bash", str(ROOT / "scripts" / "run_commits.sh"), str(fake)], capture_output=True).returncode
        == 2
    )
