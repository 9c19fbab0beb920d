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
   asv discovers the suite on head (listed first) and runs base by parameter
   index, so base's suite is listed first (``--bench just-discover``): it gives
   REMOVED, and a benchmark whose parameters differ between the commits is
   measured again commit by commit, alternating (:func:`_measure`).
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

Configuration is read from the **base** commit (so a pull request cannot relax
its own gate): a ``[check]`` table in ``kernelwatch.toml`` or, failing that,
``[tool.kernelwatch.check]`` in ``pyproject.toml``. See ``docs/pr-gate.md``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.gate import decide as gate
from harness.gate.decide import GateConfig, SeriesInput, Side, Status, Verdict

REPORT_SCHEMA = "kernelwatch-check/1"
DEFAULT_ROUNDS = 2
CONFIG_KEYS = {"threshold", "alpha", "rounds", "min_samples", "borderline_factor", "remeasure", "thresholds"}


class CheckError(RuntimeError):
    """The check cannot run at all (bad refs, unreadable configuration, asv missing)."""


@dataclass
class CheckSettings:
    gate: GateConfig
    rounds: int = DEFAULT_ROUNDS
    remeasure: bool = True
    source: str = "defaults"


@dataclass
class AsvRun:
    purpose: str
    commits: list[str]
    rounds: int
    bench: list[str]
    returncode: int
    seconds: float
    log_path: str
    results_dir: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class CheckOutcome:
    exit_code: int
    report: dict
    markdown: str
    verdicts: list[Verdict] = field(default_factory=list)


# ----------------------------------------------------------------------------- configuration


def _toml_loads(text: str, where: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise CheckError(f"{where}: reading TOML needs Python 3.11+ or the 'tomli' package") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CheckError(f"{where}: invalid TOML: {exc}") from None


def parse_settings(table: dict, where: str, *, threshold: float | None = None, alpha: float | None = None,
                   rounds: int | None = None) -> CheckSettings:
    """Settings from a ``[check]`` table; explicit arguments win over the table.

    Raises
    ------
    CheckError
        For an unknown key or a value of the wrong type, naming ``where`` and the key.
    """
    unknown = set(table) - CONFIG_KEYS
    if unknown:
        raise CheckError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")

    def num(key, kind=float):
        v = table.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise CheckError(f"{where}: {key} must be a{'n integer' if kind is int else ' number'}, got {v!r}")
        return kind(v)

    overrides = table.get("thresholds") or {}
    if not isinstance(overrides, dict):
        raise CheckError(f"{where}: thresholds must be a table of \"pattern\" = number")
    remeasure = table.get("remeasure", True)
    if not isinstance(remeasure, bool):
        raise CheckError(f"{where}: remeasure must be true or false, got {remeasure!r}")
    kw = {}
    for key, kind in (("min_samples", int), ("borderline_factor", float)):
        v = num(key, kind)
        if v is not None:
            kw[key] = v
    r = rounds if rounds is not None else num("rounds", int)
    r = DEFAULT_ROUNDS if r is None else r
    if r < 1:
        raise CheckError(f"{where}: rounds must be at least 1, got {r}")
    try:
        g = GateConfig(threshold=threshold if threshold is not None else (num("threshold") or 0.05),
                       alpha=alpha if alpha is not None else (num("alpha") or 0.01),
                       thresholds=tuple((str(k), v) for k, v in overrides.items()), **kw)
    except ValueError as exc:
        raise CheckError(f"{where}: {exc}") from None
    return CheckSettings(gate=g, rounds=r, remeasure=remeasure, source=where)


def load_settings(root: Path, commit: str, **explicit) -> CheckSettings:
    """Read the check configuration as it is at ``commit`` (``kernelwatch.toml``
    ``[check]``, else ``pyproject.toml`` ``[tool.kernelwatch.check]``, else defaults)."""
    for path, keys in (("kernelwatch.toml", ("check",)), ("pyproject.toml", ("tool", "kernelwatch", "check"))):
        proc = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            continue
        where = f"{path} at {commit[:12]}"
        table = _toml_loads(proc.stdout, where)
        for k in keys:
            table = table.get(k) if isinstance(table, dict) else None
            if table is None:
                break
        if table is None:
            continue
        if not isinstance(table, dict):
            raise CheckError(f"{where}: [{'.'.join(keys)}] must be a table")
        return parse_settings(table, f"{where} [{'.'.join(keys)}]", **explicit)
    return parse_settings({}, "defaults", **explicit)


# ----------------------------------------------------------------------------- git


def resolve(root: Path, ref: str) -> str:
    import git

    try:
        return git.Repo(root).commit(ref).hexsha
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        raise CheckError(f"cannot resolve {ref!r} to a commit: {str(exc).strip().splitlines()[-1]}") from None


def read_acknowledgements(root: Path, base: str, head: str) -> tuple[list[gate.Acknowledgement], list[str]]:
    """Acknowledgement trailers of the commits in ``base..head`` (newest first) and
    one warning per malformed trailer."""
    import git

    repo = git.Repo(root)
    acks, problems = [], []
    for c in repo.iter_commits(f"{base}..{head}"):
        for key, value in c.trailers_list:
            if key.strip().lower() != gate.ACK_TRAILER.lower():
                continue
            try:
                acks.append(gate.parse_acknowledgement(value, c.hexsha, c.author.name))
            except ValueError as exc:
                problems.append(f"ignored acknowledgement: {exc}")
    return acks, problems


# ----------------------------------------------------------------------------- asv


def _write_conf(root: Path, work: Path, results: Path) -> Path:
    from harness.measure import runner

    # runner.write_asv_config writes .kernelwatch/asv.conf.json; take its content
    # and point results and environments into this check's scratch folder, so a
    # concurrent ``kernelwatch run`` keeps its own checkout and results.
    shared = runner.write_asv_config(root, results)
    conf = json.loads(shared.read_text())
    conf["results_dir"] = str(results)
    conf["env_dir"] = str(work / "env")
    path = work / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def series_regex(benchmark: str, params: tuple[tuple[str, str], ...]) -> str:
    """asv ``--bench`` expression selecting exactly one parameter combination
    (asv matches ``name('v1', 'v2', ...)`` built from the parameters' reprs)."""
    inner = r",\ ".join("'?" + re.escape(v) + "'?" for _, v in params)
    return "^" + re.escape(benchmark) + (r"\(" + inner + r"\)$" if params else "$")


def run_asv(root: Path, conf: Path, machine: str, commits: list[str], *, rounds: int, bench: list[str],
            results: Path, quick: bool, launch: str, log_path: Path, purpose: str, append: bool = False) -> AsvRun:
    """One interleaved ``asv run`` over ``commits`` storing into ``results`` (a copy
    of ``conf`` pointing there is written beside the log); output goes to ``log_path``."""
    conf_data = json.loads(Path(conf).read_text())
    conf_data["results_dir"] = str(results)
    conf = log_path.parent / f"asv-{re.sub(r'[^a-z0-9]+', '-', purpose.lower())}.conf.json"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps(conf_data, indent=2))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(dict.fromkeys(commits)) + "\n")
        hashfile = fh.name
    cmd = [sys.executable, "-m", "asv", "run", "--config", str(conf), "--machine", machine,
           "--launch-method", launch, "--record-samples", "--show-stderr", "-a", f"rounds={rounds}"]
    if len(set(commits)) > 1:
        cmd.append("--interleave-rounds")
    if append:
        cmd.append("--append-samples")
    for b in bench:
        cmd += ["--bench", b]
    cmd.append(f"HASHFILE:{hashfile}")
    env = dict(os.environ)
    env.update({"KERNELWATCH_RESULTS_DIR": str(results), "KERNELWATCH_MACHINE": machine,
                "KERNELWATCH_QUICK": "1" if quick else "0"})
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
    finally:
        os.unlink(hashfile)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("$ " + " ".join(cmd) + "\n" + proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return AsvRun(purpose=purpose, commits=list(commits), rounds=rounds, bench=list(bench),
                  returncode=proc.returncode, seconds=round(time.monotonic() - t0, 1), log_path=str(log_path),
                  results_dir=str(results))


_COMMIT_LINE = re.compile(r"· For \S+ commit (?P<sha>[0-9a-f]{7,40})\b")
_STATUS_LINE = re.compile(r"·{3} (?P<name>[\w.]+)\s+(?P<status>ok|skipped|failed|timeout|\d+/\d+ failed)\s*$")
_SECTION_LINE = re.compile(r"^\[\s*[\d.]+%\]\s*·{1,2} (?!·)")
_PARAMS_LINE = re.compile(r"For parameters: (?P<params>.*)$")
_EXC_LINE = re.compile(r"^\s*(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Result|Exit|Interrupt|Timeout))"
                       r"(?::\s*(?P<msg>.*))?$")
_ASV_NOTE = re.compile(r"asv: (?P<msg>benchmark timed out.*|setup_cache failed.*|benchmark suite import failed.*)$")


def parse_errors(log_text: str) -> dict[tuple[str | None, str, tuple[str, ...] | None], str]:
    """Exception line per commit x failed benchmark x parameters from asv's
    ``--show-stderr`` output.

    Returns ``{(sha8, benchmark, (param values...)): "WrongResult: ..."}``;
    parameter values are bare strings (quotes removed); ``sha8`` is the commit
    of the enclosing ``For <project> commit`` line (``None`` before any); the
    parameters are ``None`` when asv printed no ``For parameters`` line. Best
    effort: asv keeps a benchmark's stderr only in its console output.
    """
    out: dict = {}
    sha = None
    name = None
    params = None
    last = None

    def flush():
        if name is not None and last is not None:
            out.setdefault((sha, name, params), last)

    for raw in log_text.splitlines():
        line = raw.rstrip()
        m = _COMMIT_LINE.search(line)
        if m:
            flush()
            sha, name, params, last = m["sha"][:8], None, None, None
            continue
        m = _STATUS_LINE.search(line)
        if m:
            flush()
            name, params, last = (m["name"], None, None) if m["status"] != "ok" and m["status"] != "skipped" \
                else (None, None, None)
            continue
        if _SECTION_LINE.match(line):
            flush()
            name, params, last = None, None, None
            continue
        if name is None:
            continue
        m = _PARAMS_LINE.search(line)
        if m:
            flush()
            last = None
            try:
                vals = ast.literal_eval("(" + m["params"] + ",)")
                params = tuple(str(v) for v in vals)
            except (ValueError, SyntaxError):
                params = tuple(v.strip().strip("'\"") for v in m["params"].split(","))
            continue
        text = re.sub(r"^\[\s*[\d.]+%\]\s*·*\s*", "", line)
        m = _EXC_LINE.match(text)
        if m:
            exc = m["exc"].rsplit(".", 1)[-1]
            last = f"{exc}: {m['msg']}" if m["msg"] else exc
            continue
        m = _ASV_NOTE.search(text)
        if m and last is None:
            last = m["msg"]
    flush()
    return out


def grid_from_benchmarks_json(path: Path, bench: str | None = None) -> tuple[dict, set]:
    """``({benchmark: params lists as asv stores them}, {(benchmark, ((name, value), ...))})``
    from an asv ``benchmarks.json``, restricted like ``--bench`` (asv's rule: the
    expression is searched in ``name(v1, v2, ...)``).

    Raises
    ------
    OSError, ValueError
        If the file cannot be read or parsed.
    """
    import itertools

    data = json.loads(path.read_text())

    def clean(v: str) -> str:
        return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v

    meta_params, grid = {}, set()
    for name, meta in data.items():
        if not isinstance(meta, dict) or "name" not in meta:
            continue
        params = meta.get("params") or []
        meta_params[name] = params
        names = meta.get("param_names") or [f"param{i + 1}" for i in range(len(params))]
        for combo in (itertools.product(*params) if params else [()]):
            full = f"{name}({', '.join(combo)})" if combo else name
            if bench and not re.search(bench, full):
                continue
            grid.add((name, tuple((str(n), clean(str(v))) for n, v in zip(names, combo))))
    return meta_params, grid


def discover(root: Path, conf: Path, machine: str, commit: str, *, work: Path, launch: str, tag: str,
             bench: str | None) -> tuple[dict, set, str | None]:
    """The suite as ``commit`` defines it (asv discovery only, nothing runs):
    ``(params per benchmark, grid, problem)``; see :func:`grid_from_benchmarks_json`."""
    results = work / f"discover-{tag}"
    run = run_asv(root, conf, machine, [commit], rounds=1, bench=["just-discover"], results=results, quick=True,
                  launch=launch, log_path=work / f"asv-discover-{tag}.log", purpose=f"discover {tag}")
    try:
        meta, grid = grid_from_benchmarks_json(results / "benchmarks.json", bench)
    except (OSError, ValueError) as exc:
        return {}, set(), f"could not list {tag}'s benchmarks (asv exit {run.returncode}: {exc})"
    return meta, grid, None


def collect(results_dir: Path, commits: dict[str, str], errors: dict) -> tuple[dict, list[str]]:
    """``{(benchmark, params): {"base": Side, "head": Side}}`` from a scratch results folder."""
    from harness.store import results as R

    rs = R.load(results_dir, with_records=False)
    problems = [f"results: {e}" for e in rs.errors]
    rounds = _rounds_from_records(results_dir, problems)
    table: dict = {}
    for key, series in rs.series.items():
        sides = {}
        for role, sha in commits.items():
            pts = [p for p in series.points if p.commit == sha]
            if not pts:
                sides[role] = Side.absent()
                continue
            p = pts[-1]
            if p.value is None:
                vals = tuple(v for _, v in key.params)
                msg = errors.get((sha[:8], key.benchmark, vals)) or errors.get((sha[:8], key.benchmark, None))
                if p.reason and p.reason.startswith("invalid"):
                    msg = msg or f"asv stored an {p.reason}"
                sides[role] = Side(present=True, failed=True, error=msg)
            else:
                smp = list(p.samples or [p.value])
                rr = rounds.get((key.machine, sha, key.benchmark, tuple(sorted(key.params))))
                if rr is not None and sum(len(r) for r in rr) != len(smp):
                    rr = None  # records and asv disagree (e.g. a round without a record): no round split
                sides[role] = Side(present=True, samples=smp, rounds=rr)
        table[(key.benchmark, key.params)] = sides
    return table, problems


def _rounds_from_records(results_dir: Path, problems: list[str]) -> dict:
    """``{(machine, commit, benchmark, sorted params): [samples of each round]}`` from the
    kernelwatch records of a results folder: the suite writes one record per asv
    round (process), in the order the rounds ran."""
    from harness.core import records

    out: dict = {}
    for path in sorted(Path(results_dir).glob(f"*/{records.RECORDS_SUBDIR}/*.jsonl")):
        machine, commit = path.parent.parent.name, path.stem
        for rec in records.read_jsonl(path, problems):
            smp = (rec.get("timing") or {}).get("samples_s")
            if not isinstance(smp, list) or not rec.get("benchmark"):
                continue
            params = tuple(sorted((str(k), str(v)) for k, v in (rec.get("params") or {}).items()))
            out.setdefault((machine, commit, rec["benchmark"], params), []).append([float(x) for x in smp])
    return out


def commits_with_results(results_dir: Path) -> set[str]:
    from harness.measure import runner

    return runner.measured_commits(results_dir)


# ----------------------------------------------------------------------------- the check


def _log_default(msg: str) -> None:
    print(msg, file=sys.stderr)


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

    Raises
    ------
    CheckError
        When the check cannot start (bad refs, bad configuration, not a repository).
    """
    from harness.core import devices
    from harness.measure import runner

    try:
        root = runner.repo_root(repo)
    except runner.RunError as exc:
        raise CheckError(str(exc)) from None
    base_sha, head_sha = resolve(root, base), resolve(root, head)
    settings = load_settings(root, base_sha, threshold=threshold, alpha=alpha, rounds=rounds)
    if remeasure is not None:
        settings.remeasure = remeasure
    cfg = settings.gate

    ident = devices.identify()
    machine = ident.machine_name()
    runner.write_machine_entry(devices.asv_machine_info(ident))
    # forkserver imports torch once per commit and round instead of once per case; it
    # is unsafe once a CUDA context exists, so GPUs keep asv's default (as runner.py).
    launch = "forkserver" if ident.kind == "cpu" else "spawn"

    work = root / runner.STATE_DIR / "check" / f"{base_sha[:12]}-{head_sha[:12]}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    results = work / "results"
    conf = _write_conf(root, work, results)
    same = base_sha == head_sha
    roles = {"base": base_sha, "head": head_sha}
    problems: list[str] = []
    warnings: list[str] = []
    runs: list[AsvRun] = []
    if same:
        warnings.append("base and head are the same commit: measured once; nothing can be slower")

    log(f"kernelwatch check: {base_sha[:12]} (base) vs {head_sha[:12]} (head) on {machine}, "
        f"{settings.rounds} interleaved rounds" + (f", --bench {bench!r}" if bench else ""))
    ctx = dict(root=root, conf=conf, machine=machine, quick=quick, launch=launch, work=work, log=log)
    verdicts: list[Verdict] = []
    n_remeasured = 0
    # Base's suite first: it gives REMOVED, and its parameter grid must match
    # head's for one interleaved asv run to be right (see _measure).
    base_meta, base_grid = {}, set()
    if not same:
        base_meta, base_grid, problem = discover(root, conf, machine, base_sha, work=work, launch=launch,
                                                 tag="base", bench=bench)
        if problem:
            warnings.append(problem + "; REMOVED not reported")
    table, misaligned, new_runs, new_problems, load_problems = _measure(
        roles, [bench] if bench else [], rounds=settings.rounds, tag="measure", base_meta=base_meta,
        user_bench=bench, **ctx)
    runs += new_runs
    problems += new_problems
    warnings += load_problems
    if misaligned:
        warnings.append("parameter grids differ between base and head for " + ", ".join(sorted(misaligned))
                        + ": measured commit by commit (alternating) instead of in one interleaved asv run")
    if not problems:
        if same:
            for (bname, params), sides in sorted(table.items()):
                s = sides["head"]
                if not s.present:
                    continue
                if s.failed:  # classify() reports a head failure as BROKEN whatever base holds
                    verdicts.append(gate.classify(SeriesInput(bname, params, s, s), cfg))
                else:
                    thr, src = cfg.threshold_for(bname, gate.series_label(bname, params))
                    verdicts.append(Verdict(bname, params, Status.SAME, "base and head are the same commit",
                                            threshold=thr, threshold_source=src))
        else:
            inputs = {k: SeriesInput(k[0], k[1], s["base"], s["head"]) for k, s in sorted(table.items())}
            by_key = {}
            for k, si in inputs.items():
                v = gate.classify(si, cfg)
                if v is not None:
                    by_key[k] = v
            todo = [k for k, v in by_key.items() if gate.needs_remeasure(v)]
            if todo and settings.remeasure:
                n_remeasured = len(todo)
                log(f"  re-measuring {len(todo)} borderline series: "
                    + ", ".join(by_key[k].label for k in todo[:5]) + (" ..." if len(todo) > 5 else ""))
                table2, _, new_runs, _, load_problems = _measure(
                    roles, [series_regex(*k) for k in todo], rounds=settings.rounds, tag="remeasure",
                    base_meta=base_meta, user_bench=None, **ctx)
                runs += new_runs
                warnings += load_problems
                for k in todo:
                    sides2 = table2.get(k)
                    if sides2 is None:
                        by_key[k].reason += "; the re-measurement did not run it (kept the first result)"
                        by_key[k].borderline = False
                        continue
                    again = SeriesInput(k[0], k[1], sides2["base"], sides2["head"])
                    pooled = SeriesInput(k[0], k[1], _pool(inputs[k].base, sides2["base"]),
                                         _pool(inputs[k].head, sides2["head"]))
                    by_key[k] = gate.confirm(by_key[k], again, pooled, cfg)
            elif todo:
                warnings.append(f"{len(todo)} borderline series were not re-measured (remeasure = false)")
            for bname, params in sorted(base_grid - set(by_key)):
                thr, src = cfg.threshold_for(bname, gate.series_label(bname, params))
                by_key[(bname, params)] = Verdict(bname, params, Status.REMOVED,
                                                  "in base's suite, not in head's (not measured)",
                                                  threshold=thr, threshold_source=src)
            verdicts = list(by_key.values())

    acks, ack_problems = read_acknowledgements(root, base_sha, head_sha) if not same else ([], [])
    warnings += ack_problems
    verdicts = gate.apply_acknowledgements(verdicts, acks)
    verdicts = gate.sort_worst_first(verdicts)
    code = gate.EXIT_BROKEN if problems else gate.exit_code(verdicts)
    if not verdicts and not problems:
        problems.append("no series was measured: nothing to compare (check --bench and the suite)")
    for v in verdicts:
        if v.acknowledged:
            warnings.append(f"{v.label}: slower but acknowledged in {v.acknowledged.commit[:12]} "
                            f"({v.acknowledged.reason})")

    json_path = Path(json_out).resolve() if json_out else work / "report.json"
    report = {
        "schema": REPORT_SCHEMA,
        "base": base_sha,
        "head": head_sha,
        "machine": machine,
        "device": {"kind": ident.kind, "name": ident.name, **{k: v for k, v in ident.versions.items()}},
        "config": {"threshold": cfg.threshold, "alpha": cfg.alpha, "rounds": settings.rounds,
                   "min_samples": cfg.min_samples, "borderline_factor": cfg.borderline_factor,
                   "confidence": cfg.confidence, "thresholds": [list(t) for t in cfg.thresholds],
                   "remeasure": settings.remeasure, "source": settings.source, "bench": bench, "quick": quick},
        "exit_code": code,
        "blocking": [v.label for v in verdicts if v.blocking],
        "counts": gate.counts(verdicts),
        "remeasured": n_remeasured,
        "problems": problems,
        "warnings": warnings,
        "acknowledgements": [a.as_dict() for a in acks],
        "runs": [r.as_dict() for r in runs],
        "json_path": str(json_path),
        "series": [v.as_dict() for v in verdicts],
    }
    md = gate.render_markdown(report)
    for path in {json_path, work / "report.json"}:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, allow_nan=False))
    (work / "summary.md").write_text(md)
    if summary:
        Path(summary).parent.mkdir(parents=True, exist_ok=True)
        Path(summary).write_text(md)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(md)
    return CheckOutcome(exit_code=code, report=report, markdown=md, verdicts=verdicts)


def _measure(roles: dict[str, str], bench: list[str], *, rounds: int, tag: str, base_meta: dict,
             user_bench: str | None, root: Path, conf: Path, machine: str, quick: bool, launch: str, work: Path,
             log) -> tuple[dict, set, list, list, list]:
    """Measure base and head, interleaved; returns ``(table, misaligned names, runs,
    problems, warnings)`` with ``table`` as :func:`collect` gives it.

    asv discovers the suite once (on head, listed first: head's benchmarks are the
    ones that must run) and then runs each commit by *parameter index*. When base's
    suite has other parameters for a benchmark (a provider or shape added or
    removed), base's index ``i`` is another case than head's: those benchmarks are
    measured again commit by commit, alternating (head, base, base, head, ...),
    each ``asv run`` discovering its own commit's suite.
    """
    base_sha, head_sha = roles["base"], roles["head"]
    results = work / f"{tag}-results"
    run = run_asv(root, conf, machine, [head_sha, base_sha], rounds=rounds, bench=bench, results=results,
                  quick=quick, launch=launch, log_path=work / f"asv-{tag}.log", purpose=tag)
    runs, problems = [run], []
    log(f"  {tag}: {run.seconds:.0f} s (asv exit {run.returncode}); log: {run.log_path}")
    have = commits_with_results(results)
    for role, sha in roles.items():
        if sha not in have:
            tail = Path(run.log_path).read_text().strip().splitlines()[-3:]
            problems.append(f"asv stored no result for {role} {sha[:12]} (exit {run.returncode}): "
                            + " | ".join(x.strip() for x in tail))
    table, warnings = collect(results, roles, parse_errors(Path(run.log_path).read_text()))
    if problems or base_sha == head_sha or not base_meta:
        return table, set(), runs, problems, warnings
    try:
        head_meta, _ = grid_from_benchmarks_json(results / "benchmarks.json")
    except (OSError, ValueError) as exc:
        warnings.append(f"could not read head's benchmark list ({exc}); parameter grids not compared")
        return table, set(), runs, problems, warnings
    measured = {name for name, _ in table}
    misaligned = {n for n in measured if n in head_meta and head_meta[n] != base_meta.get(n)}
    if not misaligned:
        return table, set(), runs, problems, warnings
    alt_results = work / f"{tag}-alternating-results"
    regexes = ["^" + re.escape(n) + r"(\(|$)" for n in sorted(misaligned)]
    logs = []
    for r in range(rounds):
        for sha in ([head_sha, base_sha] if r % 2 == 0 else [base_sha, head_sha]):
            alt = run_asv(root, conf, machine, [sha], rounds=1, bench=regexes, results=alt_results, quick=quick,
                          launch=launch, log_path=work / f"asv-{tag}-alt-r{r}-{sha[:8]}.log",
                          purpose=f"{tag} alternating", append=r > 0)
            runs.append(alt)
            logs.append(Path(alt.log_path).read_text())
    log(f"  {tag}: {len(misaligned)} benchmarks with other parameters on base measured commit by commit")
    alt_table, alt_warnings = collect(alt_results, roles, parse_errors("\n".join(logs)))
    warnings += alt_warnings
    table = {k: v for k, v in table.items() if k[0] not in misaligned}
    for k, v in alt_table.items():
        if k[0] in misaligned and (not user_bench or re.search(user_bench, k[0] + "(" + ", ".join(
                repr(x) for _, x in k[1]) + ")")):
            table[k] = v
    return table, misaligned, runs, problems, warnings


def _pool(a: Side, b: Side) -> Side:
    """Both measurements of one side as one sample; a failure in either fails it."""
    if a.present and a.failed:
        return a
    if b.present and b.failed:
        return b
    if not a.present:
        return b
    if not b.present:
        return a
    rounds = (list(a.rounds) + list(b.rounds)) if a.rounds is not None and b.rounds is not None else None
    return Side(present=True, samples=list(a.samples or []) + list(b.samples or []), rounds=rounds)
