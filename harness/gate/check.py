"""``kernelwatch check``: the pull-request gate.

Measures ``base`` and ``head`` on this device with asv, interleaved, and decides
with :mod:`harness.gate`:

1. One ``asv run --interleave-rounds -a rounds=N`` over both commits (through
   the ``kernelwatch`` environment plugin, so no environment is built): asv runs
   round 1 for base and head, round 2 in the opposite order, and so on
   (base, head, head, base, ...), appending every round's samples. Drift of the
   machine (clocks, temperature, a neighbour's load) therefore hits both sides,
   and both are measured by the same suite on the same device. Results go to a
   scratch folder (``.kernelwatch/check/<base>-<head>/``), never to ``results/``.
   Each side's suite is its own commit's ``benchmarks/`` (exported with ``git
   archive``, :func:`harness.gate.asvrun.suite_conf`; never the working tree, which
   CI checks out at head): head's measures both, base's lists base (issue 29).
   Head's suite is listed first on its own (``--bench just-discover``, under the
   30-min ``discover`` limit, not the measurement's 6 h: a head hanging at import
   stops there; issue 29 S2). asv discovers the suite on head (listed first) and
   runs base by parameter index, so base's suite is listed next: it gives
   REMOVED, and a benchmark whose parameters differ between the commits is
   measured again commit by commit, alternating (:func:`harness.gate.asvrun.measure_pair`).
2. Every series is classified (:func:`harness.gate.classify`). Correctness is
   part of the run: the suite's ``setup`` checks each provider against the
   reference first, so a wrong kernel fails on head and becomes BROKEN.
3. Borderline series are measured again, once, interleaved in the same way and
   restricted to those series (asv's ``--bench`` with one regular expression
   per parameter combination), and :func:`harness.gate.confirm` decides.
4. ``Perf-Regression-Acknowledged`` trailers of the commits in ``base..head``
   (``git interpret-trailers --parse`` through GitPython) turn matching blocks
   into warnings.
5. A JSON report and a markdown summary (also appended to
   ``$GITHUB_STEP_SUMMARY`` when set) are written.

The gate fails closed (issue 14): whatever it cannot measure on head is BROKEN,
exit 2, with the error text in the summary:

- a benchmark raising in ``setup`` or while timing: asv stores a failure, its
  exception line comes from asv's ``--show-stderr`` output (:func:`harness.gate.asvrun.parse_errors`);
- a benchmark that base's suite has and head's lacks entirely (an op module
  that raises at import drops its benchmark from the suite, as does deleting
  the op): BROKEN, never REMOVED; the import error comes from importing head's
  suite in a clean export of head (:func:`harness.gate.probe.probe_suite`), since asv's discovery
  hides a suite's stderr. One that head's suite dropped while importing cleanly
  is REMOVED only when a ``Perf-Benchmark-Removed`` trailer names it
  (:mod:`harness.gate.suites`), and so is a case head's suite lists but did not
  measure (a ``setup`` raising ``NotImplementedError``: asv's skip, NaN on both
  sides; h29t F4). A *parameter combination* that base has and head's suite no
  longer lists, while the benchmark's others are measured (a provider renamed),
  stays REMOVED;
- head's suite failing to import at all: no result for head, exit 2, with the
  traceback's last line;
- a phase past its time limit (:mod:`harness.core.procs`): exit 2 naming the
  phase and the case, every process of it ended.

Base's discovery uses the same grid as the measurement (``--quick`` or not), so
the grids compare like with like. Progress: a rich bar per phase (asv's own
``[ 42.00%]`` lines drive it, with the time left) on a terminal; otherwise one
line per phase with its duration and an estimate of the time left
(:mod:`harness.gate.progress`).

One check per scratch folder at a time (:func:`harness.core.workspace.results_lock`).

Configuration is read from the **base** commit (so a pull request cannot relax
its own gate): a ``[check]`` table in ``kernelwatch.toml`` or, failing that,
``[tool.kernelwatch.check]`` in ``pyproject.toml`` (:mod:`harness.gate.settings`).
See ``docs/pr-gate.md``.

This module is the check's orchestration; measuring with asv and reading the
scratch results back through the store are :mod:`harness.gate.asvrun`, the
configuration :mod:`harness.gate.settings`. Their public names are re-exported
here (``check.run_asv``, ``check.collect``, ``check.CheckError``, ...).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import procs
from harness.core.files import write_text_atomic
from harness.core.model import CONTROL_MARK, is_control, printable
from harness.core.workspace import LockBusy, Workspace, WorkspaceError
from harness.gate import controls, sequential
from harness.gate import decide as gate

# Public names of the check that live in its parts (tests and scripts use them as check.*).
from harness.gate.asvrun import (
    AsvRun,
    collect,  # noqa: F401
    commits_with_results,  # noqa: F401
    discover,  # noqa: F401
    grid_from_benchmarks_json,
    measure_pair,
    parse_errors,  # noqa: F401
    pool,
    run_asv,  # noqa: F401
    series_regex,
    suite_conf,
    write_conf,
)
from harness.gate.decide import SeriesInput, Status, Verdict
from harness.gate.probe import missing_on_head, op_of, probe_suite
from harness.gate.progress import PhaseProgress
from harness.gate.settings import (
    CONFIG_KEYS,  # noqa: F401
    DEFAULT_ROUNDS,  # noqa: F401
    REMOVAL_TRAILER,
    CheckError,
    CheckSettings,  # noqa: F401
    load_settings,
    parse_settings,  # noqa: F401
    read_acknowledgements,
    resolve,
)
from harness.gate.suites import ACKNOWLEDGEABLE, acknowledge_removals, name_base_import_errors, unmeasured_on_head

REPORT_SCHEMA = "kernelwatch-check/1"


@dataclass
class CheckOutcome:
    exit_code: int
    report: dict
    markdown: str
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class _Found:
    """What one check accumulates on its way: asv runs, problems (exit 2), warnings."""

    runs: list[AsvRun] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    remeasured: int = 0
    removals: list = field(default_factory=list)  # Perf-Benchmark-Removed trailers of base..head
    looks: dict = field(default_factory=dict)  # label -> the sequential gate's looks (as dicts)


# ----------------------------------------------------------------------------- the check


def _log_default(msg: str) -> None:
    print(printable(msg, keep_layout=True), file=sys.stderr)


def run_check(
    base: str,
    head: str,
    *,
    threshold: float | None = None,
    alpha: float | None = None,
    rounds: int | None = None,
    bench: str | None = None,
    quick: bool = False,
    summary: str | os.PathLike | None = None,
    json_out: str | os.PathLike | None = None,
    repo: str | os.PathLike = ".",
    remeasure: bool | None = None,
    log=_log_default,
    lock_wait_s: float | None = None,
    tty: bool | None = None,
) -> CheckOutcome:
    """Measure ``base`` and ``head`` here, decide, write the report; see the module docstring.

    Parameters
    ----------
    base, head : str
        Git refs (branch, tag, sha) in the repository at ``repo``.
    threshold, alpha, rounds : optional
        Override the configuration read from the base commit.
    bench : str, optional
        asv ``--bench`` regular expression limiting the suite.
    quick : bool
        ``KERNELWATCH_QUICK=1``: one small shape per op, shorter sampling.
    summary, json_out : path, optional
        Where to write the markdown summary and the JSON report (the JSON report
        is always written to the scratch folder as ``report.json`` too).
    remeasure : bool, optional
        Re-measure borderline series (default: configuration, else True).
    lock_wait_s : float, optional
        How long to wait for another check of the same base and head to finish
        (default :data:`harness.core.workspace.DEFAULT_LOCK_WAIT_S`).
    tty : bool, optional
        Progress as rich bars (default: when stderr is a terminal) or one line per phase.

    Raises
    ------
    CheckError
        When the check cannot start (bad refs, bad configuration, not a repository,
        another check of the same commits holding the lock past ``lock_wait_s``).
    """
    if bench:
        try:  # asv would fail on it only after the set-up, twice, with tracebacks in the summary
            re.compile(bench)
        except re.error as exc:
            raise CheckError(f"--bench {bench!r} is not a regular expression: {exc}") from None
    try:
        ws = Workspace.open(repo, "check")
        procs.phase_limit("measure")  # a bad $KERNELWATCH_PHASE_LIMIT_S fails now, not after discovery
    except (WorkspaceError, procs.LimitError) as exc:
        raise CheckError(str(exc)) from None
    root = ws.root
    base_sha, head_sha = resolve(root, base), resolve(root, head)
    settings = load_settings(root, base_sha, threshold=threshold, alpha=alpha, rounds=rounds)
    if remeasure is not None:
        settings.remeasure = remeasure

    ident = ws.identify()
    machine, launch = ws.machine, ws.launch

    pair = f"{base_sha[:12]}-{head_sha[:12]}"
    progress = PhaseProgress(log, tty=tty)
    try:
        with ws.lock(pair, wait_s=lock_wait_s, log=log):
            return _run_check_locked(
                root,
                base_sha,
                head_sha,
                settings,
                ident,
                machine,
                launch,
                pair,
                bench=bench,
                quick=quick,
                summary=summary,
                json_out=json_out,
                log=log,
                progress=progress,
            )
    except LockBusy as exc:
        raise CheckError(str(exc)) from None
    except procs.PhaseTimeout as exc:  # every process of the phase is gone; nothing was decided
        raise CheckError(f"check {pair}: {exc}; logs in {ws.state / 'check' / pair}") from None
    finally:
        progress.close()


def _run_check_locked(
    root: Path,
    base_sha: str,
    head_sha: str,
    settings: CheckSettings,
    ident,
    machine: str,
    launch: str,
    pair: str,
    *,
    bench,
    quick,
    summary,
    json_out,
    log,
    progress,
) -> CheckOutcome:
    """:func:`run_check` once the check's lock is held: measure, decide, report."""
    work = Workspace(root, "check").fresh(pair)
    conf = write_conf(root, work, work / "results")
    same = base_sha == head_sha
    roles = {"base": base_sha, "head": head_sha}
    found = _Found()
    if same:
        found.warnings.append("base and head are the same commit: measured once; nothing can be slower")

    log(
        f"kernelwatch check: {base_sha[:12]} (base) vs {head_sha[:12]} (head) on {machine}, "
        f"{settings.rounds} interleaved rounds" + (f", --bench {bench!r}" if bench else "")
    )
    # Each side's suite from its own commit (issue 29): head's measures both, base's lists base.
    head_conf, problem = suite_conf(root, conf, head_sha, work, "head")
    if problem:
        found.problems.append(problem)
    base_conf, problem = (conf, None) if same else suite_conf(root, conf, base_sha, work, "base")
    if problem:
        found.warnings.append(problem + "; base's suite listed from the working tree's benchmark folder")
    ctx = dict(
        root=root, conf=head_conf, machine=machine, quick=quick, launch=launch, work=work, log=log, progress=progress
    )
    # Head's suite is listed first, under the discover limit: inside the measure phase its
    # discovery ran under measure's 6 h, so a head hanging at import stalled CI (issue 29 S2).
    head_grid = _discover_head(head_sha, bench, **ctx)
    # Then base's: it gives REMOVED, and its parameter grid must match
    # head's for one interleaved asv run to be right (see measure_pair).
    base_meta, base_grid = ({}, set()) if same else _discover_base(base_sha, base_conf, settings, bench, found, **ctx)
    table, misaligned, new_runs, new_problems, load_problems = measure_pair(
        roles,
        [bench, CONTROL_MARK] if bench else [],  # the control kernels run with every check
        rounds=settings.rounds,
        tag="measure",
        base_meta=base_meta,
        user_bench=bench,
        **ctx,
    )
    found.runs += new_runs
    found.problems += new_problems
    found.warnings += load_problems
    if misaligned:
        found.warnings.append(
            "parameter grids differ between base and head for "
            + ", ".join(sorted(misaligned))
            + ": measured commit by commit (alternating) instead of in one interleaved asv run"
        )
    missing = {} if same else _missing_on_head(root, head_sha, work, base_meta, base_grid, quick, found)
    verdicts: list[Verdict] = []
    if not found.problems or missing:
        if same:
            verdicts = _same_commit_verdicts(table, settings.gate)
        else:
            verdicts = _decide(table, roles, base_meta, base_grid, missing, settings, found, ctx, head_grid)
            found.warnings += name_base_import_errors(root, base_sha, work, base_meta, verdicts, quick)

    acks, ack_problems = read_acknowledgements(root, base_sha, head_sha) if not same else ([], [])
    found.warnings += ack_problems
    removable = any(v.status is Status.BROKEN and v.reason.startswith(ACKNOWLEDGEABLE) for v in verdicts)
    removals, rm_problems = read_acknowledgements(root, base_sha, head_sha, REMOVAL_TRAILER) if removable else ([], [])
    found.warnings += rm_problems
    suite_names = set(base_meta) | {v.benchmark for v in verdicts}
    acks = _refuse_broad(acks, suite_names, gate.ACK_TRAILER, found)
    removals = _refuse_broad(removals, suite_names, REMOVAL_TRAILER, found)
    found.removals = removals
    found.warnings += acknowledge_removals(verdicts, removals)
    verdicts = gate.sort_worst_first(gate.apply_acknowledgements(verdicts, acks))
    code = gate.EXIT_BROKEN if found.problems else gate.exit_code(verdicts)
    if not verdicts and not found.problems:
        found.problems.append("no series was measured: nothing to compare (check --bench and the suite)")
    for v in verdicts:
        if v.acknowledged and v.status is Status.SLOWER:
            found.warnings.append(
                f"{v.label}: slower but acknowledged in {v.acknowledged.commit[:12]} ({v.acknowledged.reason})"
            )

    json_path = Path(json_out).resolve() if json_out else work / "report.json"
    report = _report(base_sha, head_sha, machine, ident, settings, bench, quick, code, verdicts, acks, found, json_path)
    md = gate.render_markdown(report)
    _write_outputs(report, md, json_path, work, summary)
    return CheckOutcome(exit_code=code, report=report, markdown=md, verdicts=verdicts)


def _discover_head(
    head_sha: str, bench: str | None, *, root, conf, machine, quick, launch, work, log, progress
) -> set | None:
    """List head's suite (asv discovery only) under the ``discover`` limit, before the
    measure phase (whose asv run discovers it again, then under the 6 h ``measure``
    limit). Returns head's grid, ``None`` when it could not be listed (a suite that
    cannot be listed is reported by the measurement and the probe, once); the grid
    tells a case head skipped from one it no longer has (:func:`_decide`). Raises
    :class:`procs.PhaseTimeout` past the limit."""
    progress.start("discover head's suite")
    _, grid, problem = discover(
        root, conf, machine, head_sha, work=work, launch=launch, tag="head", bench=bench, quick=quick
    )
    progress.end(f"({len(grid)} cases)")
    return None if problem else grid


def _refuse_broad(acks: list, names: set, trailer: str, found: _Found) -> list:
    """``acks`` less those whose pattern matches every benchmark of the suite
    (:func:`harness.gate.decide.matches_everything`), each refused with a warning."""
    kept = []
    for a in acks:
        if gate.matches_everything(a.pattern, names):
            found.warnings.append(
                f"ignored {trailer} trailer in {a.commit[:12]}: pattern {a.pattern!r} matches every benchmark "
                f"of the suite ({len(names)}); name the benchmarks it is for"
            )
        else:
            kept.append(a)
    return kept


def _discover_base(
    base_sha: str,
    base_conf: Path,
    settings: CheckSettings,
    bench: str | None,
    found: _Found,
    *,
    root: Path,
    conf: Path,
    machine: str,
    quick: bool,
    launch: str,
    work: Path,
    log,
    progress: PhaseProgress,
) -> tuple[dict, set]:
    """Base's suite (params per benchmark, grid), discovered with the measurement's grid
    from base's own benchmark folder (``base_conf``, :func:`harness.gate.asvrun.suite_conf`)."""
    progress.start("discover base's suite")
    base_meta, base_grid, problem = discover(
        root, base_conf, machine, base_sha, work=work, launch=launch, tag="base", bench=bench, quick=quick
    )
    if problem:
        found.warnings.append(
            problem
            + (
                "; REMOVED not reported, and a benchmark head lacks cannot be detected"
                if not base_meta
                else "; those benchmarks cannot be REMOVED or missing"
            )
        )
    progress.end(
        f"({len(base_grid)} cases)",
        next_name=f"measure base and head, {settings.rounds} "
        f"interleaved rounds" + (f", {len(base_grid)} cases" if base_grid else ""),
    )
    return base_meta, base_grid


def _missing_on_head(
    root: Path, head_sha: str, work: Path, base_meta: dict, base_grid: set, quick: bool, found: _Found
) -> dict[str, str]:
    """Fail closed: ``{benchmark: why}`` for each benchmark of base's suite (in the
    check's scope) that head's suite lacks; an import error of head's benchmark
    module is also a problem (exit 2)."""
    in_scope = {n for n, _ in base_grid}
    if not in_scope:
        return {}
    base_meta_scope = {n: m for n, m in base_meta.items() if n in in_scope}
    try:
        head_meta, _ = grid_from_benchmarks_json(work / "measure-results" / "benchmarks.json")
    except (OSError, ValueError):
        head_meta = None
    if head_meta is not None and all(n in head_meta for n in base_meta_scope):
        return {}
    ops = sorted({o for o in (op_of(n) for n in base_meta_scope if head_meta is None or n not in head_meta) if o})
    probe = probe_suite(root, head_sha, work, ops, quick=quick)
    for mod, err in sorted(probe["modules"].items()):
        found.problems.append(f"head's benchmark module {mod!r} fails to import: {err}")
    return missing_on_head(base_meta_scope, head_meta, probe)


def _same_commit_verdicts(table: dict, cfg: gate.GateConfig) -> list[Verdict]:
    """Base and head are one commit: SAME for each measured series, BROKEN where it fails."""
    verdicts = []
    for (bname, params), sides in sorted(table.items()):
        s = sides["head"]
        if not s.present:
            continue
        if s.failed:  # classify() reports a head failure as BROKEN whatever base holds
            verdicts.append(gate.classify(SeriesInput(bname, params, s, s), cfg))
        else:
            thr, src = cfg.threshold_for(bname, gate.series_label(bname, params))
            verdicts.append(
                Verdict(
                    bname, params, Status.SAME, "base and head are the same commit", threshold=thr, threshold_source=src
                )
            )
    return verdicts


def _decide(
    table: dict,
    roles: dict,
    base_meta: dict,
    base_grid: set,
    missing: dict,
    settings: CheckSettings,
    found: _Found,
    ctx: dict,
    head_grid: set | None = None,
) -> list[Verdict]:
    """Classify every series, re-measure the borderline ones, and name what head lacks:
    BROKEN when its benchmark is missing from head's suite (``missing``) or head's
    suite lists the case but did not measure it (a skip; ``head_grid`` is head's
    discovered grid, ``None`` when unknown: then every unmeasured case is BROKEN),
    REMOVED only for a parameter combination gone while its benchmark is measured
    (:func:`harness.gate.suites.unmeasured_on_head`)."""
    cfg = settings.gate
    inputs = {k: SeriesInput(k[0], k[1], s["base"], s["head"]) for k, s in sorted(table.items())}
    by_key = {}
    for k, si in inputs.items():
        v = gate.classify(si, cfg)
        if v is not None:
            by_key[k] = v
    drift = controls.drift_range({k: v for k, v in by_key.items() if is_control(k[0])})
    for k, v in list(by_key.items()):  # same compiled code: never blocks, never measured again
        if is_control(k[0]) and v.status in (Status.SLOWER, Status.FASTER) and v.stats:
            found.warnings.append(
                f"control {v.label} moved {v.stats.change:+.1%} between base and head rounds: the machine "
                "drifted during this check; changed series are judged normalised by the controls"
            )
        by_key[k], problem = gate.same_code_verdict(v, inputs[k])
        found.problems += [problem] if problem else []
    open_keys = {k: v for k, v in by_key.items() if not v.same_code}
    todo = [k for k, v in open_keys.items() if gate.needs_remeasure(v)]
    if settings.sequential is not None:
        _decide_sequentially(inputs, open_keys, roles, base_meta, settings, found, ctx)
        by_key.update(open_keys)
    elif todo and settings.remeasure:
        _remeasure(todo, by_key, inputs, roles, base_meta, settings, found, ctx)
    elif todo:
        found.warnings.append(f"{len(todo)} borderline series were not re-measured (remeasure = false)")
    for k, v in list(by_key.items()):  # the machine moved: normalise by the controls, or refuse
        by_key[k], problem = controls.apply_drift(v, drift)
        found.problems += [problem] if problem else []
    measured = {k for k, s in table.items() if s["head"].present}
    for k, v in list(by_key.items()):  # head's suite measured base but not head: skipped on head
        if v.status is Status.REMOVED and k[0] not in missing:
            v.status, why = unmeasured_on_head(k, head_grid, measured)
            v.reason = f"{why}; {v.reason}" if v.status is Status.BROKEN else v.reason
    for bname, params in sorted(base_grid - set(by_key)):
        thr, src = cfg.threshold_for(bname, gate.series_label(bname, params))
        status, why = (
            (Status.BROKEN, missing[bname])
            if bname in missing
            else unmeasured_on_head((bname, params), head_grid, measured)
        )
        by_key[(bname, params)] = Verdict(bname, params, status, why, threshold=thr, threshold_source=src)
    for (bname, _params), v in list(by_key.items()):
        if bname in missing and v.status is Status.REMOVED:
            v.status, v.reason = Status.BROKEN, missing[bname]
    return list(by_key.values())


def _decide_sequentially(
    inputs: dict, by_key: dict, roles: dict, base_meta: dict, settings: CheckSettings, found: _Found, ctx: dict
) -> None:
    """The sequential gate (:func:`harness.gate.sequential.decide_sequentially`): each
    further look measures the open series ``settings.rounds`` more rounds, interleaved."""

    def measure(keys, k):
        table, _, new_runs, problems, load_problems = measure_pair(
            roles,
            [series_regex(*key) for key in keys],
            rounds=settings.rounds,
            tag=f"look{k}",
            base_meta=base_meta,
            user_bench=None,
            **ctx,
        )
        found.runs += new_runs
        found.warnings += load_problems
        found.problems += [f"sequential look {k}: {p}" for p in problems]  # fails closed: exit 2
        return table

    history = sequential.decide_sequentially(inputs, by_key, settings.sequential, settings.gate, measure, ctx["log"])
    found.looks = {by_key[k].label: [lk.as_dict() for lk in looks] for k, looks in history.items()}
    found.remeasured = sum(1 for looks in history.values() if len(looks) > 1)


def _remeasure(
    todo: list,
    by_key: dict,
    inputs: dict,
    roles: dict,
    base_meta: dict,
    settings: CheckSettings,
    found: _Found,
    ctx: dict,
) -> None:
    """Measure the borderline series ``todo`` once more, interleaved, and let
    :func:`harness.gate.decide.confirm` decide each (``by_key`` updated in place)."""
    found.remeasured = len(todo)
    est = ctx["progress"].estimate(len(todo) * 2 * settings.rounds)
    ctx["log"](
        f"  re-measuring {len(todo)} borderline series"
        + (f" (about {est:.0f} s)" if est is not None else "")
        + ": "
        + ", ".join(by_key[k].label for k in todo[:5])
        + (" ..." if len(todo) > 5 else "")
    )
    table2, _, new_runs, rm_problems, load_problems = measure_pair(
        roles,
        [series_regex(*k) for k in todo],
        rounds=settings.rounds,
        tag="remeasure",
        base_meta=base_meta,
        user_bench=None,
        **ctx,
    )
    found.runs += new_runs
    found.warnings += load_problems + [f"re-measurement: {p}" for p in rm_problems]
    for k in todo:
        sides2 = table2.get(k)
        if sides2 is None:
            by_key[k].reason += "; the re-measurement did not run it (kept the first result)"
            by_key[k].borderline = False
            continue
        again = SeriesInput(k[0], k[1], sides2["base"], sides2["head"])
        pooled = SeriesInput(k[0], k[1], pool(inputs[k].base, sides2["base"]), pool(inputs[k].head, sides2["head"]))
        by_key[k] = gate.confirm(by_key[k], again, pooled, settings.gate)


def _report(
    base_sha: str,
    head_sha: str,
    machine: str,
    ident,
    settings: CheckSettings,
    bench,
    quick: bool,
    code: int,
    verdicts: list[Verdict],
    acks: list,
    found: _Found,
    json_path: Path,
) -> dict:
    """The JSON report (schema :data:`REPORT_SCHEMA`, documented in ``docs/pr-gate.md``)."""
    cfg = settings.gate
    return {
        "schema": REPORT_SCHEMA,
        "base": base_sha,
        "head": head_sha,
        "machine": machine,
        "device": {"kind": ident.kind, "name": ident.name, **{k: v for k, v in ident.versions.items()}},
        "config": {
            "threshold": cfg.threshold,
            "alpha": cfg.alpha,
            "rounds": settings.rounds,
            "min_samples": cfg.min_samples,
            "borderline_factor": cfg.borderline_factor,
            "confidence": cfg.confidence,
            "thresholds": [list(t) for t in cfg.thresholds],
            "remeasure": settings.remeasure,
            "sequential": None
            if settings.sequential is None
            else {
                "alpha": settings.sequential.alpha,
                "step": settings.sequential.step,
                "max_rounds": settings.sequential.max_rounds,
                "spending": settings.sequential.spending,
            },
            "source": settings.source,
            "bench": bench,
            "quick": quick,
        },
        "exit_code": code,
        "blocking": [v.label for v in verdicts if v.blocking],
        "counts": gate.counts(verdicts),
        "remeasured": found.remeasured,
        "problems": found.problems,
        "warnings": found.warnings,
        "acknowledgements": [a.as_dict() for a in acks],
        "removals": [a.as_dict() for a in found.removals],
        "runs": [r.as_dict() for r in found.runs],
        "looks": found.looks,
        "json_path": str(json_path),
        "series": [v.as_dict() for v in verdicts],
    }


def _write_outputs(report: dict, md: str, json_path: Path, work: Path, summary) -> None:
    """The report and summary to the scratch folder, ``--json``, ``--summary`` and
    ``$GITHUB_STEP_SUMMARY`` (appended) when set."""
    for path in {json_path, work / "report.json"}:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(report, indent=2, allow_nan=False))
    write_text_atomic(work / "summary.md", md)
    if summary:
        Path(summary).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(summary, md)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
