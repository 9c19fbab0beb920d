"""``kernelwatch bisect``: find the first commit that made a benchmark slower, on this device.

1. ``asv find`` over ``good..bad`` (good included), through the ``kernelwatch``
   environment plugin: asv's adaptive bisection measures the benchmark at the
   ends and the middle of the range and follows the larger step, so about
   ``log2(n) + 2`` commits are measured for ``n`` commits. It assumes the change
   is mostly monotonic, as any bisection does.
2. The commit asv names is then *confirmed* against its first parent with the
   gate's interleaved measurement and statistics (:mod:`harness.gate.check`,
   :mod:`harness.gate`): asv's search compares single medians without a test, so
   on a noisy device its pick is checked before it is reported as the culprit.
3. If it does not confirm, the range is bisected again with the gate itself:
   each step is an interleaved, tested comparison of one commit against
   ``good`` ("SLOWER than good" is the bad side), about ``log2(n) + 1``
   comparisons. Slower, but it does not follow a single noisy median.

Exit codes: 0 a first slow commit was found and confirmed; 2 nothing could be
decided (asv failed, the benchmark pattern matched nothing or several
benchmarks, or ``bad`` is not SLOWER than ``good`` here).

Fails closed like the gate (issue 14): a comparison in which asv stored no
result for a commit, or the benchmark is BROKEN (raises, wrong result, fails to
import) at the commit under test, is not read as "not slower": the bisection
stops, exit 2, naming the commit and the error. Discovery uses the same grid as
the measurement (``--quick`` or not).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import procs
from harness.core.model import GateStatus
from harness.core.workspace import LockBusy, Workspace, WorkspaceError, repo_root
from harness.gate import check
from harness.gate import decide as gate
from harness.gate.asvrun import asv_case

_FOUND = re.compile(r"Greatest regression found: (?P<sha>[0-9a-f]{7,40})")


class BisectError(RuntimeError):
    """Bisect cannot start: bad refs, good not an ancestor of bad, empty range."""


class _Undecided(Exception):
    """A comparison step measured nothing usable (the message names the commit and why)."""


@dataclass
class BisectOutcome:
    exit_code: int
    found: str | None
    confirmed: bool
    reason: str
    commits: list[str]
    measured: dict[str, dict] = field(default_factory=dict)  # commit -> {series label: p50 seconds or None}
    confirmation: list[dict] = field(default_factory=list)  # gate verdicts that confirm ``found``
    log_path: str | None = None
    asv_find_pick: str | None = None  # set when asv find's pick did not confirm
    steps: list[dict] = field(default_factory=list)  # fallback bisection steps

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=procs.PHASE_LIMITS_S["git"])


def run_bisect(
    good: str,
    bad: str,
    benchmark: str,
    *,
    repo: str | os.PathLike = ".",
    log=check._log_default,
    lock_wait_s: float | None = None,
    **kw,
) -> BisectOutcome:
    """:func:`_run_bisect` (see there) holding the lock of its work folder
    (``.kernelwatch/bisect/locks/<good>-<bad>/``): a second bisect of the same
    range waits for the first, saying which process holds it.

    Raises
    ------
    BisectError
        As :func:`_run_bisect`, when the lock is still held after ``lock_wait_s``, and
        when a phase (asv find, a confirming or bisecting comparison) runs past its
        time limit (:mod:`harness.core.procs`; its processes are killed first).
    """
    try:  # asv find would run the set-up first, then fail with an re.error read as "undecided"
        re.compile(benchmark)
    except re.error as exc:  # (hostile trial round 6, S-i; the same check as `check --bench`)
        raise BisectError(f"--benchmark {benchmark!r} is not a regular expression: {exc}") from None
    try:
        ws = Workspace.open(repo, "bisect")
        pair = f"{check.resolve(ws.root, good)[:12]}-{check.resolve(ws.root, bad)[:12]}"
        procs.phase_limit("find")  # a bad $KERNELWATCH_PHASE_LIMIT_S fails now
    except (WorkspaceError, check.CheckError, procs.LimitError) as exc:
        raise BisectError(str(exc)) from None
    try:
        with ws.lock(pair, wait_s=lock_wait_s, log=log):
            return _run_bisect(good, bad, benchmark, repo=repo, log=log, **kw)
    except LockBusy as exc:
        raise BisectError(str(exc)) from None
    except procs.PhaseTimeout as exc:  # every process of the phase is gone; nothing was decided
        raise BisectError(f"bisect {pair}: {exc}; logs in {ws.state / 'bisect' / pair}") from None


def _run_bisect(
    good: str,
    bad: str,
    benchmark: str,
    *,
    quick: bool = False,
    rounds: int | None = None,
    repo: str | os.PathLike = ".",
    confirm: bool = True,
    log=check._log_default,
) -> BisectOutcome:
    """Find the first commit in ``good..bad`` where ``benchmark`` got slower.

    Parameters
    ----------
    good, bad : str
        Git refs; ``good`` must be an ancestor of ``bad``.
    benchmark : str
        asv benchmark regular expression; it must select exactly one benchmark
        (``asv find``'s rule), optionally restricted to parameter combinations,
        e.g. ``suite.vector_add.track_time\\('torch'``.
    quick : bool
        ``KERNELWATCH_QUICK=1`` (small shapes, short sampling).
    rounds : int, optional
        Interleaved rounds of the confirmation (default: the check's configuration).
    confirm : bool
        Confirm asv's pick against its parent with the gate's statistics.

    Raises
    ------
    BisectError
        For refs that do not resolve, ``good`` not an ancestor of ``bad``, or an empty range.
    """
    root, good_sha, bad_sha, commits, range_spec = _range(good, bad, repo)
    ctx = _workspace(root, good_sha, bad_sha)
    log(
        f"kernelwatch bisect: {len(commits)} commits from {good_sha[:12]} (good) to {bad_sha[:12]} (bad), "
        f"benchmark {benchmark!r}, on {ctx['machine']}"
    )
    out, found = _asv_find(range_spec, benchmark, commits, quick=quick, log=log, **ctx)
    if found is None:
        return out
    found = check.resolve(root, found)
    out.found = found
    if not confirm:
        out.exit_code = gate.EXIT_OK if found != good_sha else gate.EXIT_BROKEN
        out.reason = f"asv find: greatest regression at {found[:12]} (not confirmed: --no-confirm)"
        return out

    settings = check.load_settings(root, good_sha, rounds=rounds)
    cmp_ctx = dict(pattern=benchmark, settings=settings, quick=quick, **ctx)
    if found == good_sha:
        why = f"asv find named the good commit {good_sha[:12]} itself"
    else:
        why = _confirm_pick(out, found, settings, cmp_ctx, log)
        if why is None:
            return out
    # asv find compares single medians; on a noisy device it can follow noise.
    # Fall back to a bisection whose every step is the gate's interleaved,
    # tested comparison against the good commit.
    log(f"  {why}; bisecting with interleaved comparisons against {good_sha[:12]}")
    out.asv_find_pick = found
    return _bisect_interleaved(out, why, good_sha, bad_sha, commits, cmp_ctx, log)


def _range(good: str, bad: str, repo) -> tuple[Path, str, str, list[str], str]:
    """``(root, good_sha, bad_sha, commits good..bad with good first, asv find's range)``.

    Raises
    ------
    BisectError
        For refs that do not resolve, ``good`` not an ancestor of ``bad``, or an empty range.
    """
    try:
        root = repo_root(repo)
        good_sha, bad_sha = check.resolve(root, good), check.resolve(root, bad)
    except (WorkspaceError, check.CheckError) as exc:
        raise BisectError(str(exc)) from None
    if _git(root, "merge-base", "--is-ancestor", good_sha, bad_sha).returncode != 0:
        raise BisectError(f"--good {good} ({good_sha[:12]}) is not an ancestor of --bad {bad} ({bad_sha[:12]})")
    commits = _git(root, "rev-list", "--first-parent", "--reverse", f"{good_sha}..{bad_sha}").stdout.split()
    if not commits:
        raise BisectError(f"no commits between --good {good} and --bad {bad}")
    commits = [good_sha] + commits
    has_parent = _git(root, "rev-parse", "--verify", "--quiet", f"{good_sha}^").returncode == 0
    # asv find searches `git rev-list --first-parent RANGE`; good itself must be in it
    # (as the known-fast end), so the range starts at good's parent.
    range_spec = f"{good_sha}^..{bad_sha}" if has_parent else bad_sha
    return root, good_sha, bad_sha, commits, range_spec


def _workspace(root: Path, good_sha: str, bad_sha: str) -> dict:
    """This device's machine entry and a fresh work folder with its asv configuration:
    ``{root, conf, machine, launch, work}``."""
    ws = Workspace(root, "bisect")
    ws.identify()
    work = ws.fresh(f"{good_sha[:12]}-{bad_sha[:12]}")
    conf = check.write_conf(root, work, work / "results")
    return dict(root=root, conf=conf, machine=ws.machine, launch=ws.launch, work=work)


def _asv_find(
    range_spec: str,
    benchmark: str,
    commits: list[str],
    *,
    root: Path,
    conf: Path,
    machine: str,
    launch: str,
    work: Path,
    quick: bool,
    log,
) -> tuple[BisectOutcome, str | None]:
    """Run ``asv find``; the outcome so far (exit 2 until decided) and the commit it
    names (``None``, with the reason in the outcome, when it names none)."""
    results = work / "results"
    cmd = [
        sys.executable,
        "-m",
        "asv",
        "find",
        "--config",
        str(conf),
        "--machine",
        machine,
        "--launch-method",
        launch,
        "--show-stderr",
        range_spec,
        benchmark,
    ]
    env = dict(os.environ)
    env.update(
        {
            "KERNELWATCH_RESULTS_DIR": str(results),
            "KERNELWATCH_MACHINE": machine,
            "KERNELWATCH_QUICK": "1" if quick else "0",
        }
    )
    t0 = time.monotonic()
    log_path = work / "asv-find.log"
    try:
        proc = procs.run_bounded(cmd, phase="bisect: asv find", kind="find", env=env, cwd=root, describe=asv_case)
    except procs.PhaseTimeout as exc:
        log_path.write_text("$ " + " ".join(cmd) + "\n" + exc.output + f"\n--- stopped ---\n{exc}\n")
        raise
    log_path.write_text("$ " + " ".join(cmd) + "\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    log(f"  asv find took {time.monotonic() - t0:.0f} s (exit {proc.returncode}); log: {log_path}")
    out = BisectOutcome(
        exit_code=gate.EXIT_BROKEN, found=None, confirmed=False, reason="", commits=commits, log_path=str(log_path)
    )
    out.measured = _measured(results, commits)
    m = _FOUND.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not m:
        tail = [ln.strip() for ln in (proc.stdout + proc.stderr).strip().splitlines()[-3:]]
        out.reason = f"asv find did not name a commit (exit {proc.returncode}): " + " | ".join(tail)
        return out, None
    return out, m["sha"]


def _confirm_pick(out: BisectOutcome, found: str, settings, cmp_ctx: dict, log) -> str | None:
    """Confirm asv find's pick against its first parent with the gate. ``None`` when
    ``out`` is final (confirmed, or the confirmation could not measure); else why
    the pick did not confirm."""
    parent = check.resolve(cmp_ctx["root"], f"{found}^")
    log(f"  confirming {found[:12]} against its parent {parent[:12]} ({settings.rounds} interleaved rounds)")
    try:
        verdicts = _compare(parent, found, tag="confirm", **cmp_ctx)
    except _Undecided as exc:
        out.reason = f"asv find named {found[:12]}, but the confirmation could not measure it: {exc}"
        return None
    out.confirmation = [v.as_dict() for v in verdicts]
    slower = [v for v in verdicts if v.status is gate.Status.SLOWER]
    if slower:
        out.exit_code, out.confirmed = gate.EXIT_OK, True
        out.reason = f"first slow commit {found[:12]}: " + "; ".join(f"{v.label} {v.reason}" for v in slower[:3])
        return None
    worst = verdicts[0] if verdicts else None
    return f"asv find named {found[:12]}, but it is not SLOWER than its parent {parent[:12]} here" + (
        f" ({worst.label}: {worst.status.value})" if worst else " (nothing measured)"
    )


def _bisect_interleaved(
    out: BisectOutcome, why: str, good_sha: str, bad_sha: str, commits: list[str], cmp_ctx: dict, log
) -> BisectOutcome:
    """Bisect ``commits`` with the gate's interleaved comparison against ``good_sha``
    at each step (:func:`first_bad`); fills and returns ``out``."""
    steps: list[dict] = []

    def slower_than_good(i: int) -> bool:
        vs = _compare(good_sha, commits[i], tag=f"step{len(steps)}", **cmp_ctx)
        hit = any(v.status is gate.Status.SLOWER for v in vs)
        steps.append({"commit": commits[i], "slower_than_good": hit, "verdicts": [v.as_dict() for v in vs]})
        log(f"  {commits[i][:12]}: {'SLOWER than good' if hit else 'not slower than good'}")
        return hit

    try:
        if not slower_than_good(len(commits) - 1):
            out.found, out.steps = None, steps
            out.reason = why + f"; and --bad {bad_sha[:12]} is not SLOWER than --good {good_sha[:12]} here"
            return out
        hi = first_bad(len(commits), slower_than_good, known_bad_last=True)
    except _Undecided as exc:
        out.found, out.steps = None, steps
        out.reason = why + f"; interleaved bisection stopped: {exc}"
        return out
    out.found, out.steps = commits[hi], steps
    out.exit_code, out.confirmed = gate.EXIT_OK, True
    last = next(s for s in reversed(steps) if s["commit"] == commits[hi])
    slow = [v for v in last["verdicts"] if v["status"] == GateStatus.SLOWER]
    out.reason = (
        why
        + f"; interleaved bisection: first slow commit {commits[hi][:12]}: "
        + "; ".join(f"{v['label']} {v['reason']}" for v in slow[:3])
    )
    out.confirmation = last["verdicts"]
    return out


def first_bad(n: int, is_bad, *, known_bad_last: bool = False) -> int:
    """Binary search for the first index in ``1..n-1`` with ``is_bad(i)`` true, given that
    index 0 is good and ``is_bad`` is monotone (good ... good bad ... bad). Calls
    ``is_bad`` about ``log2(n)`` times (not for index ``n - 1`` when ``known_bad_last``).

    Raises
    ------
    ValueError
        If ``n < 2``, or the last index is not bad.
    """
    if n < 2:
        raise ValueError(f"need a good and a bad index, got n={n}")
    if not known_bad_last and not is_bad(n - 1):
        raise ValueError("the last index is not bad: nothing to find")
    lo, hi = 0, n - 1  # lo good, hi bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if is_bad(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _compare(
    a: str,
    b: str,
    *,
    tag: str,
    root: Path,
    conf: Path,
    machine: str,
    pattern: str,
    settings,
    quick: bool,
    launch: str,
    work: Path,
) -> list:
    """Gate verdicts of ``b`` against ``a`` for the benchmarks matching ``pattern``,
    measured as ``kernelwatch check`` measures (interleaved; benchmarks whose
    parameters differ between the two commits commit by commit).

    Raises
    ------
    _Undecided
        When asv stored no result for a commit, nothing was measured, or a
        series is BROKEN on ``b`` (the message names ``b`` and the error).
    """
    step = work / tag
    step.mkdir(parents=True, exist_ok=True)
    base_meta, _, _ = check.discover(
        root, conf, machine, a, work=step, launch=launch, tag="base", bench=pattern, quick=quick
    )
    table, _, _, problems, _ = check.measure_pair(
        {"base": a, "head": b},
        [pattern],
        rounds=settings.rounds,
        tag="measure",
        base_meta=base_meta,
        user_bench=pattern,
        root=root,
        conf=conf,
        machine=machine,
        quick=quick,
        launch=launch,
        work=step,
        log=lambda m: None,
    )
    if problems:
        raise _Undecided(f"{b[:12]} vs {a[:12]}: " + "; ".join(problems))
    verdicts = [
        v
        for v in (
            gate.classify(gate.SeriesInput(k[0], k[1], s["base"], s["head"]), settings.gate)
            for k, s in sorted(table.items())
        )
        if v is not None
    ]
    if not verdicts:
        raise _Undecided(f"{b[:12]} vs {a[:12]}: no series matching {pattern!r} was measured")
    broken = [v for v in verdicts if v.status is gate.Status.BROKEN]
    if broken:
        raise _Undecided(
            f"{broken[0].label} is BROKEN at {b[:12]}: {broken[0].reason}"
            + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else "")
        )
    return gate.sort_worst_first(verdicts)


def _measured(results: Path, commits: list[str]) -> dict[str, dict]:
    """Median per series for each commit asv find measured (``None`` = failed)."""
    from harness.store import results as R

    if not results.is_dir():
        return {}
    rs = R.load(results, with_records=False)
    order = {c: i for i, c in enumerate(commits)}
    out: dict[str, dict] = {}
    for key, series in rs.series.items():
        for p in series.points:
            out.setdefault(p.commit, {})[key.case_label()] = p.value
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))
