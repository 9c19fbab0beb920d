"""``kernelwatch profile``: run benchmark cases once under ``torch.profiler`` at a commit.

For every case of the suite whose asv name (``suite.softmax.track_time('torch',
'1024x1024', 'fp32', 'cpu')``) matches a pattern, this module

- checks the commit out the way ``kernelwatch run`` does (asv's own git
  checkout, :func:`checkout`), or uses the working tree as it is;
- in a fresh interpreter (:func:`worker_main`, in :mod:`harness.measure.profile_worker`
  with the case selection and the kernel table), imports the *commit's*
  ``kernels`` and ``benchmarks`` and this kernelwatch's profiler, so base and head
  of a triage are measured by the same instrument and only the code under test
  differs (commits older than this module can be profiled too);
- builds the case with :func:`harness.measure.bench.prepare` (correctness is checked
  first, as in every benchmark), calls it a few times to warm up (Triton
  compiles, caches fill), then records ``iters`` calls with ``torch.profiler``
  (CPU activity, and CUDA activity on a GPU);
- writes a Chrome/Perfetto trace (``.json.gz``, open it in https://ui.perfetto.dev
  or ``chrome://tracing``) and a per-kernel table (:func:`kernel_table`: kernel
  name, launches, total and mean self time, share of the case) as JSON and markdown;
- records the compile facts of the Triton kernels the case launched
  (:func:`compile_facts`: chosen autotune config, ``num_warps``, ``num_stages``,
  registers, spills, shared memory), "not available under the interpreter"
  without a GPU;
- with ``--ncu``, on CUDA with Nsight Compute on ``PATH``, adds speed-of-light
  metrics per kernel (:data:`NCU_METRICS`); otherwise it says why not and goes on.

Times in the tables are the profiler's *self* times (microseconds): device time
of each kernel on CUDA, CPU time of each ATen op on the CPU. Profiling adds
overhead (a few microseconds per op); compare profiles with profiles, never
with ``kernelwatch run``'s timings. On the CPU the profile runs torch with one
thread (:data:`DEFAULT_CPU_THREADS`, recorded as ``torch_threads``): on a shared
machine a multi-threaded op's time is mostly waiting for a descheduled thread.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# What runs inside the profiling process lives in harness.measure.profile_worker;
# its public names are this module's too.
from harness.core import procs
from harness.core.workspace import Workspace, WorkspaceError
from harness.measure.profile_worker import (
    DEFAULT_CPU_THREADS,
    DEFAULT_ITERS,
    DEFAULT_WARMUP,  # noqa: F401
    ITERATION_MARK,  # noqa: F401
    ROUND_DONE,
    CaseSpec,  # noqa: F401
    iteration_times,  # noqa: F401
    kernel_table,  # noqa: F401
    profile_one,  # noqa: F401
    select_cases,  # noqa: F401
    suite_cases,  # noqa: F401
    worker_main,  # noqa: F401
)

PROFILE_SCHEMA = "kernelwatch-profile/1"

#: Nsight Compute metrics collected with ``--ncu`` (names from ``ncu --query-metrics``;
#: "speed of light" as the SpeedOfLight section reports it).
NCU_METRICS = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    # Local-memory traffic is where register spills go (or local arrays).
    "smsp__sass_inst_executed_op_local_ld.sum": "local_load_instructions",
    "smsp__sass_inst_executed_op_local_st.sum": "local_store_instructions",
}


class ProfileError(RuntimeError):
    """Profiling cannot start (bad ref, no case matches, the checkout failed)."""


# ----------------------------------------------------------------------------- ncu


def parse_ncu_csv(text: str) -> list[dict]:
    """Rows of ``ncu --csv --page raw`` output: one dict per profiled kernel launch
    with ``name`` and the :data:`NCU_METRICS` fields (floats, ``None`` if absent).
    Lines before the CSV header (``==PROF==`` messages, the program's output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    out = []
    for row in reader:
        if not (row.get("ID") or "").strip().isdigit():
            continue  # the units row
        rec = {"name": row.get("Kernel Name")}
        for metric, field_name in NCU_METRICS.items():
            raw = (row.get(metric) or "").replace(",", "").strip()
            try:
                rec[field_name] = float(raw)
            except ValueError:
                rec[field_name] = None
        out.append(rec)
    return out


def ncu_unavailable_reason(device_kind: str) -> str | None:
    """Why ``--ncu`` cannot run here, or ``None`` when it can."""
    if device_kind != "cuda":
        return "--ncu needs a CUDA device; this machine profiles on the CPU"
    if shutil.which("ncu") is None:
        return "--ncu needs Nsight Compute: 'ncu' is not on PATH"
    return None


# ----------------------------------------------------------------------------- orchestration


def _tool_root() -> Path:
    """The folder holding this kernelwatch's ``harness`` package (this file is
    ``harness/measure/profile.py``)."""
    return Path(__file__).resolve().parents[2]


def checkout(root: Path, sha: str, dest: Path) -> Path:
    """``sha`` of the repository at ``root`` checked out into ``dest`` with asv's git
    checkout (``git clone --shared``, then ``checkout -f`` + ``clean -fdx`` on reuse),
    the same one ``kernelwatch run`` benchmarks from (``harness.asv_env``).

    Raises
    ------
    ProfileError
        If asv cannot check the commit out.
    """
    from asv import util
    from asv.plugins.git import Git

    try:
        Git(str(root), str(root)).checkout(str(dest), sha)
    except (util.ProcessError, util.UserError, OSError) as exc:
        raise ProfileError(f"cannot check {sha[:12]} out into {dest}: {exc}") from None
    return dest


class WorkerProcess:
    """One commit's profiling process (:func:`_main`), kept alive across rounds.

    ``round(r)`` asks for one round and returns its result; a process that dies,
    stalls past ``timeout_s`` or writes no result gives a result with a
    ``problems`` entry naming its log, never an exception.
    """

    def __init__(self, spec: dict, work: Path, *, ncu_cmd: list[str] | None = None, timeout_s: float | None = None):
        work.mkdir(parents=True, exist_ok=True)
        self.spec = spec
        # The "profile" phase limit (issue 29): default, $KERNELWATCH_PHASE_LIMIT_S, or timeout_s.
        self.timeout_s, self.limit_source = procs.phase_limit("profile", timeout_s)
        tag = f"{(spec.get('commit') or 'worktree')[:12]}-{spec.get('mode', 'profile')}-{spec.get('role', 'x')}"
        self.prefix = work / f"result-{tag}"
        spec_path = work / f"spec-{tag}.json"
        spec_path.write_text(json.dumps({**spec, "result_prefix": str(self.prefix)}, indent=1))
        self.log_path = work / f"log-{tag}.txt"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(_tool_root()) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.cmd = list(ncu_cmd or []) + [
            sys.executable,
            "-m",
            "harness.measure.profile_worker",
            "--worker",
            str(spec_path),
        ]
        self._log = open(self.log_path, "w")
        self._log.write("$ " + " ".join(self.cmd) + "\n")
        self._log.flush()
        self.stdout_lines: list[str] = []
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=_tool_root(),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            start_new_session=True,  # its own session: a stalled round ends with every process it started
        )
        self.dead: str | None = None
        self._ready = False

    def wait_ready(self) -> None:
        """Wait until the process has imported its suite (start several, then wait)."""
        if not self._ready:
            self._ready = True
            self.dead = self._wait_for("ready")

    def _wait_for(self, token: str) -> str | None:
        """Read stdout until ``ROUND_DONE token``; ``None`` when seen, else why not."""
        import threading

        fired = threading.Event()

        def stop():
            fired.set()
            procs.kill_session(self.proc.pid, leader=self.proc)

        timer = threading.Timer(self.timeout_s, stop)
        timer.start()
        try:
            for line in self.proc.stdout:
                if line.strip() == f"{ROUND_DONE} {token}":
                    return None
                self.stdout_lines.append(line)
        finally:
            timer.cancel()
        rc = self.proc.wait()
        if fired.is_set():
            phase = f"triage: profile {self.spec.get('role', '')} {(self.spec.get('commit') or 'worktree')[:12]}"
            return (
                f"{procs.PhaseTimeout(phase, f'round {token}: ' + procs.last_line(self.stdout_lines), self.timeout_s, self.limit_source)}"
                f"; see {self.log_path}"
            )
        return f"profiler process ended (exit {rc}) before round {token}; see {self.log_path}"

    def round(self, r: int) -> dict:
        base = {"commit": self.spec.get("commit"), "round": r, "cases": [], "log": str(self.log_path)}
        self.wait_ready()
        if self.dead:
            return {**base, "problems": [self.dead]}
        try:
            self.proc.stdin.write(f"{r}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        why = self._wait_for(str(r))
        if why:
            self.dead = why
            return {**base, "problems": [why]}
        try:
            res = json.loads(Path(f"{self.prefix}-r{r}.json").read_text())
        except (OSError, ValueError) as exc:
            return {**base, "problems": [f"round {r} wrote no readable result ({exc}); see {self.log_path}"]}
        res["log"] = str(self.log_path)
        return res

    def close(self) -> str:
        """End the process; returns its stdout (ncu writes its CSV there)."""
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            rest = self.proc.stdout.read()
            self.stdout_lines.append(rest)
            self.proc.wait(timeout=self.timeout_s)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        procs.kill_session(self.proc.pid, grace_s=0, leader=self.proc)  # nothing of it left behind
        self._log.close()
        return "".join(self.stdout_lines)


def run_worker(spec: dict, work: Path, *, ncu_cmd: list[str] | None = None, timeout_s: float | None = None) -> dict:
    """One round of :class:`WorkerProcess` for ``spec`` (a fresh interpreter);
    the result carries the process's ``stdout`` when run under ``ncu_cmd``."""
    w = WorkerProcess(spec, work, ncu_cmd=ncu_cmd, timeout_s=timeout_s)
    res = w.round(0)
    out = w.close()
    res["stdout"] = out if ncu_cmd else None
    return res


@dataclass
class ProfileOutcome:
    exit_code: int
    report: dict
    markdown: str
    json_path: Path | None = None
    md_path: Path | None = None
    notes: list[str] = field(default_factory=list)


def prepare_source(root: Path, ref: str | None, work: Path) -> tuple[str | None, Path, bool]:
    """``(full sha or None, folder to import the code from, dirty)`` for ``ref``;
    ``None`` means the working tree as it is (uncommitted edits included)."""
    import git

    repo = git.Repo(root)
    if ref is None:
        try:
            sha = repo.head.commit.hexsha
        except ValueError:
            sha = None
        return sha, root, repo.is_dirty(untracked_files=False)
    try:
        sha = repo.commit(ref).hexsha
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        raise ProfileError(f"cannot resolve {ref!r} to a commit: {str(exc).strip().splitlines()[-1]}") from None
    return sha, checkout(root, sha, work / "checkouts" / sha[:12]), False


def run_profile(
    pattern: str,
    *,
    commit: str | None = None,
    out: str | os.PathLike | None = None,
    ncu: bool = False,
    quick: bool = False,
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    cpu_threads: int | None = DEFAULT_CPU_THREADS,
    results: str | os.PathLike | None = None,
    repo: str | os.PathLike = ".",
    log=lambda m: print(m, file=sys.stderr),
) -> ProfileOutcome:
    """``kernelwatch profile``: profile every case matching ``pattern`` at ``commit``.

    Writes ``profile.json`` (schema :data:`PROFILE_SCHEMA`), ``profile.md`` and
    ``traces/<case>.r0.trace.json.gz`` into ``out`` (default
    ``.kernelwatch/profile/<sha12>/``); with ``results``, also a copy into that
    results directory (:func:`store_in_results`) for the site. Exit code 0: every matching case was
    profiled (or skipped here with a reason); 2: no case matched, a case failed,
    or the profiler process died.

    Raises
    ------
    ProfileError
        Not a repository, a ref that does not resolve, a failed checkout, a bad pattern.
    """

    try:
        re.compile(pattern)
    except re.error as exc:
        raise ProfileError(f"bad benchmark pattern {pattern!r}: {exc}") from None
    if not isinstance(iters, int) or iters < 1 or not isinstance(warmup, int) or warmup < 0:
        raise ProfileError(f"--iters must be >= 1 and --warmup >= 0, got {iters} and {warmup}")
    try:
        ws = Workspace.open(repo, "profile")
    except WorkspaceError as exc:
        raise ProfileError(str(exc)) from None
    root, state = ws.root, ws.state
    sha, src, dirty = prepare_source(root, commit, state)
    out_dir = (
        Path(out).resolve() if out else state / "profile" / ((sha or "worktree")[:12] + ("-dirty" if dirty else ""))
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"kernelwatch profile: {pattern!r} at {(sha or 'the working tree')[:12]}"
        + (" (working tree with uncommitted changes)" if dirty else "")
        + f", {iters} profiled calls per case"
    )
    spec = {
        "checkout": str(src),
        "commit": sha,
        "pattern": pattern,
        "out_dir": str(out_dir),
        "iters": iters,
        "warmup": warmup,
        "quick": quick,
        "cpu_threads": cpu_threads,
    }
    res = run_worker(spec, out_dir / "work")
    notes: list[str] = []
    ncu_report = _ncu_pass(res, spec, out_dir, notes) if ncu else None
    for c in res.get("cases", []):
        if c.get("trace"):
            c["trace"] = os.path.relpath(c["trace"], out_dir)
    report = {
        "schema": PROFILE_SCHEMA,
        "commit": sha,
        "dirty": dirty,
        "pattern": pattern,
        "machine": res.get("machine"),
        "environment": res.get("environment"),
        "iters": iters,
        "warmup": warmup,
        "quick": quick,
        "cases": res.get("cases", []),
        "problems": list(res.get("problems", [])),
        "notes": notes,
        "ncu": ncu_report,
        "log": res.get("log"),
    }
    if not res.get("problems") and not report["cases"]:
        report["problems"].append(f"no benchmark case matches {pattern!r} at {(sha or 'the working tree')[:12]}")
    failed = [c for c in report["cases"] if c.get("status") == "failed"]
    report["problems"] += [f"{c['label']}: {c['reason']}" for c in failed]
    code = 2 if report["problems"] else 0
    report["exit_code"] = code
    md = render_profile_markdown(report)
    json_path, md_path = out_dir / "profile.json", out_dir / "profile.md"
    json_path.write_text(json.dumps(report, indent=1, allow_nan=False, default=str))
    md_path.write_text(md)
    if results and report["cases"]:
        name = f"profile-{(sha or 'worktree')[:12]}-{hashlib.sha1(pattern.encode()).hexdigest()[:8]}"
        stored = store_in_results(out_dir, results, name, report, md, "profile")
        notes.append(f"stored in {stored} (kernelwatch publish links it from the benchmark page)")
    return ProfileOutcome(exit_code=code, report=report, markdown=md, json_path=json_path, md_path=md_path, notes=notes)


def _ncu_pass(res: dict, spec: dict, out_dir: Path, notes: list[str]) -> dict:
    """``--ncu``: each profiled case once more under Nsight Compute, one process per
    case (its rows go into the case as ``ncu``); the report's ``ncu`` entry, with
    the reason when ncu cannot run here (a note, never a failure)."""
    kind = (res.get("environment") or {}).get("device_kind") or "cpu"
    why = ncu_unavailable_reason(kind)
    if why:
        notes.append(f"{why}: no speed-of-light metrics; the profile is complete without them")
        return {"status": "unavailable", "reason": why}
    ncu_report = {"status": "ok", "cases": {}}
    for c in res.get("cases", []):
        if c.get("status") != "ok":
            continue
        sub = run_worker(
            {**spec, "pattern": None, "exact": [{"benchmark": c["benchmark"], "params": c["params"]}], "mode": "ncu"},
            out_dir / "work" / "ncu",
            ncu_cmd=[
                "ncu",
                "--csv",
                "--page",
                "raw",
                "--profile-from-start",
                "off",
                "--target-processes",
                "all",
                "--metrics",
                ",".join(NCU_METRICS),
            ],
        )
        rows = parse_ncu_csv(sub.get("stdout") or "")
        c["ncu"] = rows
        ncu_report["cases"][c["label"]] = len(rows)
        if not rows:
            notes.append(
                f"{c['label']}: ncu reported no kernel ({'; '.join(sub.get('problems') or [])}; log {sub.get('log')})"
            )
    return ncu_report


# ----------------------------------------------------------------------------- markdown


def _us(v) -> str:
    if v is None:
        return "-"
    return f"{v / 1000:.3f} ms" if abs(v) >= 1000 else f"{v:.1f} us"


def facts_summary(facts: dict | None) -> str:
    """One line for a record's compile facts (:func:`harness.core.records.compile_facts_text`)."""
    from harness.core import records

    return records.compile_facts_text(facts)


def store_in_results(
    out_dir: Path, results_dir: str | os.PathLike, name: str, report: dict, markdown: str, kind: str
) -> Path:
    """Copy a profile or triage into ``<results>/kernelwatch-profiles/<name>/`` so
    ``kernelwatch publish`` links it (from the finding, on the benchmark page):
    ``<kind>.json.gz`` (the report; gzip keeps asv's result walker, which reads
    every ``*.json``, away from it), ``<kind>.md`` and the traces.

    Raises
    ------
    OSError
        If the folder cannot be written.
    """
    import gzip

    from harness.core import records

    dest = Path(results_dir) / records.PROFILES_SUBDIR / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with gzip.open(dest / f"{kind}.json.gz", "wt", encoding="utf-8") as fh:
        json.dump({**report, "kind": kind}, fh, indent=1, allow_nan=False, default=str)
    (dest / f"{kind}.md").write_text(markdown)
    for trace in Path(out_dir).rglob("*.trace.json.gz"):
        rel = trace.relative_to(out_dir)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(trace, dest / rel)
    return dest


def render_profile_markdown(report: dict, max_rows: int = 15) -> str:
    """Markdown of a ``kernelwatch profile`` report: one kernel table per case."""
    env = report.get("environment") or {}
    lines = [
        f"### kernelwatch profile at `{(report.get('commit') or 'working tree')[:12]}`"
        + (" (uncommitted changes)" if report.get("dirty") else "")
        + f" on {report.get('machine') or '?'}",
        "",
        f"Pattern `{report.get('pattern')}`; {report.get('iters')} profiled calls per case after "
        f"{report.get('warmup')} warm-up calls. torch {env.get('torch')}, Triton {env.get('triton')}, "
        f"CUDA {env.get('cuda')}, device {env.get('device')}, torch threads {env.get('torch_threads')}. Self times per call of the case "
        f"({'device time of each kernel' if env.get('device_kind') == 'cuda' else 'CPU time of each ATen op'}).",
        "",
    ]
    for p in report.get("problems") or []:
        lines.append(f"- **problem**: {p}")
    for n in report.get("notes") or []:
        lines.append(f"- note: {n}")
    for c in report.get("cases") or []:
        lines += ["", f"#### `{c['label']}`", ""]
        if c.get("status") != "ok":
            lines.append(f"{c.get('status')}: {c.get('reason')}")
            continue
        lines.append(
            f"{_us(c.get('wall_us_per_iter'))} per call (wall, under the profiler); trace: "
            f"`{c.get('trace')}`; compile facts: {facts_summary(c.get('compile_facts'))}"
        )
        lines += [
            "",
            "| kernel | launches per call | self time per call | mean per launch | share |",
            "|---|---:|---:|---:|---:|",
        ]
        for k in c.get("kernels", [])[:max_rows]:
            lines.append(
                f"| `{k['name']}` | {k['calls_per_iter']:g} | {_us(k['self_us_per_iter'])} | "
                f"{_us(k['self_us_mean'])} | {100 * (k['share'] or 0):.1f}% |"
            )
        extra = len(c.get("kernels", [])) - max_rows
        if extra > 0:
            lines.append(f"| ({extra} more in profile.json) | | | | |")
        if c.get("ncu"):
            lines += [
                "",
                "| kernel (ncu) | DRAM % | SM % | occupancy % | registers | local ld/st |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for r in c["ncu"]:
                lines.append(
                    f"| `{r['name']}` | {r['dram_throughput_pct']} | {r['sm_throughput_pct']} | "
                    f"{r['achieved_occupancy_pct']} | {r['registers_per_thread']} | "
                    f"{r['local_load_instructions']}/{r['local_store_instructions']} |"
                )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # the worker's former entry point: python -m harness.measure.profile --worker
    from harness.measure.profile_worker import _main

    sys.exit(_main(sys.argv))
