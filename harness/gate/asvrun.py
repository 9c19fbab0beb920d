"""Measuring base and head with asv for the gate (``kernelwatch check`` and ``bisect``).

- :func:`run_asv`: one ``asv run --interleave-rounds`` over the commits, into a
  scratch results folder, through the ``kernelwatch`` environment plugin;
- :func:`discover`: the suite as one commit defines it (asv discovery only);
- :func:`parse_errors`: the exception line of each failed benchmark from asv's
  ``--show-stderr`` output (asv keeps a benchmark's stderr only there);
- :func:`collect`: the scratch results, read through the store
  (:func:`harness.store.results.load`, :func:`harness.store.results.record_rounds`),
  as one base and one head :class:`~harness.gate.decide.Side` per series;
- :func:`measure_pair`: base and head measured interleaved, with the benchmarks
  whose parameters differ between the commits measured commit by commit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core import procs
from harness.core.model import Direction, direction_for
from harness.gate.decide import Side
from harness.gate.progress import PhaseProgress, quiet_progress


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


def write_conf(root: Path, work: Path, results: Path) -> Path:
    """The repository's asv configuration made absolute, with results in ``results``
    and environments in ``work/env``; returns the path of the written copy."""
    from harness.measure import runner

    # runner.write_asv_config writes the repository's configuration made absolute; take its content
    # and point results and environments into this check's scratch folder, so a
    # concurrent ``kernelwatch run`` keeps its own checkout and results.
    shared = runner.write_asv_config(root, results, dest=work / "asv.base.conf.json")
    conf = json.loads(shared.read_text())
    conf["results_dir"] = str(results)
    conf["env_dir"] = str(work / "env")
    path = work / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def suite_conf(root: Path, conf: Path, commit: str, work: Path, tag: str) -> tuple[Path, str | None]:
    """A copy of the check's asv configuration ``conf`` whose ``benchmark_dir`` is
    ``commit``'s own benchmark folder, exported with ``git archive`` into
    ``work/suite-<tag>/``: each side's suite is the one its commit defines, so a
    head that deletes a benchmark from the suite cannot also delete it from base's
    list (issue 29; CI checks out head, whose working tree is head's suite).

    Returns ``(path of the new configuration, None)``, or ``(conf, problem)`` when
    the folder cannot be exported (not in the commit, outside the repository, git
    failing); the problem names the commit and the folder.
    """
    import shutil
    import tarfile

    data = json.loads(Path(conf).read_text())
    bdir = Path(data.get("benchmark_dir") or root / "benchmarks")
    try:
        rel = bdir.resolve().relative_to(Path(root).resolve())
    except ValueError:
        return conf, f"asv's benchmark_dir {bdir} is outside the repository: {tag}'s suite not exported"
    dest = work / f"suite-{tag}"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    arch = subprocess.run(
        ["git", "archive", "--format=tar", commit, "--", rel.as_posix()], cwd=root, capture_output=True, timeout=120
    )
    if arch.returncode != 0:
        err = arch.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return conf, f"{tag} {commit[:12]} has no benchmark folder {rel.as_posix()!r} (git archive: {err[0]})"
    with tempfile.TemporaryFile() as fh:
        fh.write(arch.stdout)
        fh.seek(0)
        with tarfile.open(fileobj=fh) as tar:
            tar.extractall(dest, filter="data")
    data["benchmark_dir"] = str(dest / rel)
    out = work / f"asv-suite-{tag}.conf.json"
    out.write_text(json.dumps(data, indent=2))
    return out, None


def series_regex(benchmark: str, params: tuple[tuple[str, str], ...]) -> str:
    """asv ``--bench`` expression selecting exactly one parameter combination
    (asv matches ``name('v1', 'v2', ...)`` built from the parameters' reprs)."""
    inner = r",\ ".join("'?" + re.escape(v) + "'?" for _, v in params)
    return "^" + re.escape(benchmark) + (r"\(" + inner + r"\)$" if params else "$")


def asv_case(lines) -> str:
    """Where an asv command was, from its output lines: the last line (without
    asv's ``[ 42.00%] ··`` prefix: ``Discovering benchmarks``, a benchmark name)
    and the commit of the last ``For <project> commit <sha>`` line."""
    sha = None
    for ln in lines:
        m = _COMMIT_LINE.search(ln)
        if m:
            sha = m["sha"][:12]
    text = next(
        (t for t in (re.sub(r"^(?:\[\s*[\d.]+%\]\s*)?·*\s*", "", ln).strip() for ln in reversed(lines)) if t), ""
    )
    where = text or "no output yet"
    return f"{where} (commit {sha})" if sha and sha not in where else where


def _stream(cmd: list[str], env: dict, cwd: Path, on_line=None, *, phase: str, kind: str, limit_s=None):
    """Run ``cmd`` bounded (:func:`harness.core.procs.run_bounded`: its own process
    group, killed at the end, at the phase's time limit, or when kernelwatch ends);
    ``on_line`` sees each stdout line as it comes. Returns ``(rc, stdout, stderr)``.

    Raises
    ------
    harness.core.procs.PhaseTimeout
        At the time limit of ``kind``, naming ``phase`` and the case (:func:`asv_case`).
    """
    done = procs.run_bounded(
        cmd, phase=phase, kind=kind, limit_s=limit_s, env=env, cwd=cwd, on_line=on_line, describe=asv_case
    )
    return done.returncode, done.stdout, done.stderr


def run_asv(
    root: Path,
    conf: Path,
    machine: str,
    commits: list[str],
    *,
    rounds: int,
    bench: list[str],
    results: Path,
    quick: bool,
    launch: str,
    log_path: Path,
    purpose: str,
    append: bool = False,
    progress: PhaseProgress | None = None,
    kind: str = "measure",
    limit_s: float | None = None,
) -> AsvRun:
    """One interleaved ``asv run`` over ``commits`` storing into ``results`` (a copy
    of ``conf`` pointing there is written beside the log); output goes to ``log_path``;
    ``progress`` (optional) sees asv's output lines as they come.

    Bounded by the time limit of phase ``kind`` (``limit_s`` overrides it;
    :func:`harness.core.procs.phase_limit`): at the limit every process of the run
    (asv, its benchmark processes, its forkserver) is killed, the log written, and
    :class:`harness.core.procs.PhaseTimeout` raised naming ``purpose`` and the case."""
    conf_data = json.loads(Path(conf).read_text())
    conf_data["results_dir"] = str(results)
    conf = log_path.parent / f"asv-{re.sub(r'[^a-z0-9]+', '-', purpose.lower())}.conf.json"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(json.dumps(conf_data, indent=2))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(dict.fromkeys(commits)) + "\n")
        hashfile = fh.name
    cmd = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "--config",
        str(conf),
        "--machine",
        machine,
        "--launch-method",
        launch,
        "--record-samples",
        "--show-stderr",
        "-a",
        f"rounds={rounds}",
    ]
    if len(set(commits)) > 1:
        cmd.append("--interleave-rounds")
    if append:
        cmd.append("--append-samples")
    for b in bench:
        cmd += ["--bench", b]
    cmd.append(f"HASHFILE:{hashfile}")
    env = dict(os.environ)
    env.update(
        {
            "KERNELWATCH_RESULTS_DIR": str(results),
            "KERNELWATCH_MACHINE": machine,
            "KERNELWATCH_QUICK": "1" if quick else "0",
        }
    )
    t0 = time.monotonic()
    on_line = progress.line if progress is not None else None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        rc, stdout, stderr = _stream(cmd, env, root, on_line, phase=purpose, kind=kind, limit_s=limit_s)
    except procs.PhaseTimeout as exc:
        log_path.write_text("$ " + " ".join(cmd) + "\n" + exc.output + f"\n--- stopped ---\n{exc}\n")
        raise
    finally:
        os.unlink(hashfile)
    log_path.write_text("$ " + " ".join(cmd) + "\n" + stdout + "\n--- stderr ---\n" + stderr)
    return AsvRun(
        purpose=purpose,
        commits=list(commits),
        rounds=rounds,
        bench=list(bench),
        returncode=rc,
        seconds=round(time.monotonic() - t0, 1),
        log_path=str(log_path),
        results_dir=str(results),
    )


_COMMIT_LINE = re.compile(r"· For \S+ commit (?P<sha>[0-9a-f]{7,40})\b")
_STATUS_LINE = re.compile(r"·{3} (?P<name>[\w.]+)\s+(?P<status>ok|skipped|failed|timeout|\d+/\d+ failed)\s*$")
_SECTION_LINE = re.compile(r"^\[\s*[\d.]+%\]\s*·{1,2} (?!·)")
_PARAMS_LINE = re.compile(r"For parameters: (?P<params>.*)$")
_EXC_LINE = re.compile(
    r"^\s*(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Result|Exit|Interrupt|Timeout))"
    r"(?::\s*(?P<msg>.*))?$"
)
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
            name, params, last = (
                (m["name"], None, None) if m["status"] != "ok" and m["status"] != "skipped" else (None, None, None)
            )
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


def grid_from_benchmarks_json(
    path: Path, bench: str | None = None, problems: list[str] | None = None
) -> tuple[dict, set]:
    """``({benchmark: params lists as asv stores them}, {(benchmark, ((name, value), ...))})``
    from an asv ``benchmarks.json``, restricted like ``--bench`` (asv's rule: the
    expression is searched in ``name(v1, v2, ...)``). Checked by
    :func:`harness.core.schema.benchmarks_json`: an entry of the wrong shape is
    left out, with a line in ``problems``.

    Raises
    ------
    OSError, ValueError
        If the file cannot be read or parsed, or is not an asv benchmarks.json
        (:class:`harness.core.schema.SchemaError`, a ``ValueError``).
    """
    import itertools

    from harness.core import files, schema

    data = schema.benchmarks_json(files.read_json(path), path, problems if problems is not None else [])

    def clean(v: str) -> str:
        return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v

    meta_params, grid = {}, set()
    for name, meta in data.items():
        if not isinstance(meta, dict) or "name" not in meta:
            continue
        params = meta.get("params") or []
        meta_params[name] = params
        names = meta.get("param_names") or [f"param{i + 1}" for i in range(len(params))]
        for combo in itertools.product(*params) if params else [()]:
            full = f"{name}({', '.join(combo)})" if combo else name
            if bench and not re.search(bench, full):
                continue
            grid.add((name, tuple((str(n), clean(str(v))) for n, v in zip(names, combo))))
    return meta_params, grid


def discover(
    root: Path,
    conf: Path,
    machine: str,
    commit: str,
    *,
    work: Path,
    launch: str,
    tag: str,
    bench: str | None,
    quick: bool,
) -> tuple[dict, set, str | None]:
    """The suite as ``commit`` defines it (asv discovery only, nothing runs):
    ``(params per benchmark, grid, problem)``; see :func:`grid_from_benchmarks_json`.

    ``quick`` must be the measurement's: the suite's grid depends on
    ``KERNELWATCH_QUICK``, and a quick discovery compared with a full
    measurement made every benchmark look re-parameterised (issue 14)."""
    results = work / f"discover-{tag}"
    run = run_asv(
        root,
        conf,
        machine,
        [commit],
        rounds=1,
        bench=["just-discover"],
        results=results,
        quick=quick,
        launch=launch,
        log_path=work / f"asv-discover-{tag}.log",
        purpose=f"discover {tag}",
        kind="discover",
    )
    entry_problems: list[str] = []
    try:
        meta, grid = grid_from_benchmarks_json(results / "benchmarks.json", bench, entry_problems)
    except (OSError, ValueError) as exc:
        return {}, set(), f"could not list {tag}'s benchmarks (asv exit {run.returncode}: {exc})"
    return meta, grid, ("; ".join(entry_problems) if entry_problems else None)


def collect(results_dir: Path, commits: dict[str, str], errors: dict) -> tuple[dict, list[str], list[str]]:
    """``({(benchmark, params): {"base": Side, "head": Side}}, warnings, failures)`` from a
    scratch results folder. ``failures``: a results file of this run that the loader
    had to skip (or a row of it); the gate fails closed on them (exit 2), since a
    series missing from that file would otherwise read as REMOVED."""
    from harness.store import results as R

    rs = R.load(results_dir, with_records=False)
    problems, failures = [], []
    for e in rs.errors:
        where = e.split(": ", 1)[0]
        fatal = where.endswith(".json") and Path(where).name not in ("benchmarks.json", "machine.json")
        (failures if fatal else problems).append(f"results: {e}")
    rounds = R.record_rounds(results_dir, problems)
    codes = R.record_code(results_dir, [])  # the same records: their problems are listed once, above
    table: dict = {}
    rates = set()
    for key, series in rs.series.items():
        # The gate's rule reads "head / base > 1" as slower; a rate (GB/s) that halves must
        # read as slower too, so it is compared as its reciprocal (time per unit of work;
        # rank tests and medians are unchanged by it): asv's own advice (shared/ASV_NOTES.md).
        inv = direction_for(None, series.unit) is Direction.HIGHER_IS_BETTER
        if inv and key.benchmark not in rates:
            rates.add(key.benchmark)
            problems.append(f"{key.benchmark}: unit {series.unit!r} is a rate (higher is better): compared as 1/value")
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
                if inv:
                    smp = _reciprocal(smp)
                    rr = [_reciprocal(r) for r in rr] if rr is not None else None
                cc = codes.get((key.machine, sha, key.benchmark, tuple(sorted(key.params)))) or [None]
                code = cc[0] if all(c is not None and c == cc[0] for c in cc) else None
                sides[role] = Side(present=True, samples=smp, rounds=rr, code=code)
        table[(key.benchmark, key.params)] = sides
    return table, problems, failures


def _reciprocal(xs) -> list[float]:
    """``1/x`` of each sample; a zero rate is an infinite time per unit (dropped as invalid later)."""
    return [1.0 / x if x else float("inf") for x in xs]


def commits_with_results(results_dir: Path) -> set[str]:
    from harness.measure import runner

    return runner.measured_commits(results_dir)


def measure_pair(
    roles: dict[str, str],
    bench: list[str],
    *,
    rounds: int,
    tag: str,
    base_meta: dict,
    user_bench: str | None,
    root: Path,
    conf: Path,
    machine: str,
    quick: bool,
    launch: str,
    work: Path,
    log,
    progress: PhaseProgress | None = None,
) -> tuple[dict, set, list, list, list]:
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
    progress = progress or quiet_progress()
    results = work / f"{tag}-results"
    progress.start(tag)
    run = run_asv(
        root,
        conf,
        machine,
        [head_sha, base_sha],
        rounds=rounds,
        bench=bench,
        results=results,
        quick=quick,
        launch=launch,
        log_path=work / f"asv-{tag}.log",
        purpose=tag,
        progress=progress,
    )
    runs, problems, warnings = [run], [], []
    have = commits_with_results(results)
    if "No benchmarks selected" in Path(run.log_path).read_text():
        # head's suite has nothing in scope: not a failure to measure; what base has
        # and head lacks is BROKEN (or acknowledged REMOVED) by the check, and an
        # empty comparison is a problem there ("no series was measured").
        warnings.append(
            f"{tag}: asv selected no benchmark of head's suite" + (f" for {' '.join(bench)}" if bench else "")
        )
        have = set(roles.values())
    for role, sha in roles.items():
        if sha not in have:
            tail = Path(run.log_path).read_text().strip().splitlines()[-3:]
            problems.append(
                f"asv stored no result for {role} {sha[:12]} (exit {run.returncode}): "
                + " | ".join(x.strip() for x in tail)
            )
    if not results.is_dir():  # asv stored nothing at all: the problems above say why
        progress.end(f"(asv exit {run.returncode}, no results; log: {run.log_path})")
        return {}, set(), runs, problems, warnings
    table, load_warnings, failures = collect(results, roles, parse_errors(Path(run.log_path).read_text()))
    warnings += load_warnings
    problems += failures
    n_commits = len(set(roles.values()))
    misaligned = set()
    if not (problems or base_sha == head_sha or not base_meta):
        try:
            head_meta, _ = grid_from_benchmarks_json(results / "benchmarks.json")
        except (OSError, ValueError) as exc:
            warnings.append(f"could not read head's benchmark list ({exc}); parameter grids not compared")
            head_meta = {}
        measured = {name for name, _ in table}
        misaligned = {n for n in measured if n in head_meta and head_meta[n] != base_meta.get(n)}
    n_alt = sum(1 for k in table if k[0] in misaligned)
    progress.end(
        f"({len(table)} series, asv exit {run.returncode}; log: {run.log_path})",
        work=max(1, len(table)) * n_commits * rounds,
        next_name=(f"{len(misaligned)} benchmarks commit by commit" if misaligned else None),
        next_cases=n_alt * 2 * rounds,
    )
    if not misaligned:
        return table, set(), runs, problems, warnings
    progress.start(f"{tag}: {len(misaligned)} benchmarks commit by commit")
    alt_results = work / f"{tag}-alternating-results"
    regexes = ["^" + re.escape(n) + r"(\(|$)" for n in sorted(misaligned)]
    logs = []
    for r in range(rounds):
        for j, sha in enumerate([head_sha, base_sha] if r % 2 == 0 else [base_sha, head_sha]):
            progress.segment(2 * r + j, 2 * rounds)
            alt = run_asv(
                root,
                conf,
                machine,
                [sha],
                rounds=1,
                bench=regexes,
                results=alt_results,
                quick=quick,
                launch=launch,
                log_path=work / f"asv-{tag}-alt-r{r}-{sha[:8]}.log",
                purpose=f"{tag} alternating",
                append=r > 0,
                progress=progress,
            )
            runs.append(alt)
            logs.append(Path(alt.log_path).read_text())
    progress.end(f"({n_alt} series with other parameters on base)", work=max(1, n_alt) * 2 * rounds)
    warnings += keep_heads_entries(alt_results, results)
    alt_table, alt_warnings, failures = collect(alt_results, roles, parse_errors("\n".join(logs)))
    problems += failures
    warnings += alt_warnings
    table = {k: v for k, v in table.items() if k[0] not in misaligned}
    for k, v in alt_table.items():
        if k[0] in misaligned and (
            not user_bench or re.search(user_bench, k[0] + "(" + ", ".join(repr(x) for _, x in k[1]) + ")")
        ):
            table[k] = v
    return table, misaligned, runs, problems, warnings


def keep_heads_entries(results: Path, head_results: Path) -> list[str]:
    """Add to ``results/benchmarks.json`` every benchmark that it lacks and
    ``head_results/benchmarks.json`` (head's suite, saved by the interleaved run) has.

    The commit-by-commit runs share one results folder, and every ``asv run`` saves
    the ``benchmarks.json`` of the suite it discovered, replacing the last one. When
    base's run comes last and base's op or benchmark module fails to import, the
    benchmark head adds is missing from that file, and the store named its NEW rows
    ``param1, param2, ...`` instead of head's parameter names (hostile trial h29t S11):
    labels that match neither head's suite nor a trailer's pattern. Entries both files
    have are left as they are. Returns warnings naming an unreadable file (then nothing
    is changed and the store's own warning says what degrades)."""
    from harness.core.files import read_json, write_text_atomic

    target, source = results / "benchmarks.json", head_results / "benchmarks.json"
    try:
        have = read_json(target) if target.exists() else {"version": 2}
        head = read_json(source)
    except (OSError, ValueError) as exc:
        return [f"head's parameter names ({source}) not applied to {target}: {exc}"]
    if not isinstance(have, dict) or not isinstance(head, dict):
        return [f"head's parameter names not applied: {target} or {source} is not a JSON object"]
    added = {k: v for k, v in head.items() if k != "version" and k not in have and isinstance(v, dict)}
    if added:
        write_text_atomic(target, json.dumps({**have, **added}))
    return []


def pool(a: Side, b: Side) -> Side:
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
    code = a.code if a.code is not None and a.code == b.code else None
    return Side(present=True, samples=list(a.samples or []) + list(b.samples or []), rounds=rounds, code=code)
