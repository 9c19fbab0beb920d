"""``kernelwatch publish``: results -> a static site (jinja2, autoescape on).

A pure transform: the same results (and analysis report) give the same bytes
(sorted iteration, no build timestamps, deterministic encodings). Templates in
``site/templates`` receive finished numbers and strings; scripts and styles ship
from ``site/static`` (Apache ECharts 5.6.0 vendored with its licence: no CDN);
both are packaged as ``harness/report/assets`` (:func:`harness.report.render.site_root`).

This module orchestrates: load (:mod:`harness.report.series`, per machine),
merge (:class:`harness.report.model.SiteModel`), then one module per page
turns the model into template contexts (:class:`harness.report.render.Page`).

Pages
-----
``index.html`` (:mod:`harness.report.overview`)
    Overview, in the order a kernel engineer asks: what got slower, by commit
    (the analysis' events, :mod:`harness.report.attention`), divergences
    between GPUs, health (per machine, then the series not to trust: too
    noisy, failing a value guard, under contention, not enough history,
    failing, stopped reporting), the latest results of the series still
    reporting, and the false-alarm budget; every line links to its evidence.
``bench/<benchmark>.html`` (:mod:`harness.report.benchmark`)
    One benchmark: a case selector (parameters x timing method) and the history
    of that case on every machine in one ECharts chart (zoom, tooltip with commit,
    subject, date, value with its 99% CI and clocks when recorded), a switch
    between time, tflops, gbps, mfu, bw_util and sol (each named with its
    unit), change points from the analysis, version and environment changes,
    failed results as red markers (never zero, never silently missing) and
    the line broken at them and at commits measured without the case; the
    findings of the case shown, with their evidence.
``roofline/<machine>.html`` (:mod:`harness.report.roofline`)
    Log-log roofline: ceilings from the datasheet (:mod:`harness.core.devices`) and
    from this machine's calibration (labels kept apart), the latest point of
    each kernel x parameters (labelled), arrows from a chosen earlier commit,
    and the distance to the roof per kernel, furthest first.
``matrix.html`` (:mod:`harness.report.matrix`)
    Kernel x GPU heatmaps of ``sol`` and of the speed-up since a chosen baseline
    commit (default: the oldest commit the current series have; cells neutral
    where nothing changed in the interval); per-suite geometric means per GPU.
``commit/<hash>.html`` (:mod:`harness.report.commit`)
    Everything one commit changed on every machine: findings, environment and
    benchmark-version changes, failures started or fixed, largest moves.
``machine/<machine>.html``, ``findings.html`` (:mod:`harness.report.machine`, :mod:`harness.report.findings`)
    Latest results of every series of one machine; the findings of the run
    for triage (regressions first, renamed-or-replaced rows, filters, counts
    that add up).

Lazy data
---------
History is not inlined: each series has ``data/s/<id>.js``, each machine
``data/m/<machine>.js`` (its commits as indices into the commit table) and the
commit table is ``data/commits.js``; a benchmark page inserts ``<script src>``
tags for the case shown (a script tag works from ``file://`` as well as over
http, which ``fetch`` does not in Chromium). Each file calls
``KW.put(key, object)``. Per point arrays are little-endian base64: ``x`` int32
(index into the machine's commit list), ``v``/``lo``/``hi`` float32 (value and
99% CI; NaN where absent; the ``fail`` list gives the reason of every failed
point), and, where our records exist, float32 ``tflops``/``gbps``/``mfu``/
``bw_util``/``sol`` and clock arrays.

Scale
-----
Machines are independent until the pages are drawn, so each machine's results
are loaded (:func:`harness.store.results.load_columns`, arrays instead of one object
per point) and its series files written in a worker process (``jobs``,
:func:`harness.report.series.worker`); the
parent merges the commit lists and draws the pages. Running the analysis here
(``analysis="auto"``) needs every series in one process: one forked process
loads every machine and streams the columns back (:func:`harness.report.apart.load_apart`: the
parse's allocator slack leaves with it), and the analysis reads each series'
points through a :class:`harness.store.model.PointView` (made on access, not
held: issue 28). ``experiments/scale/bench_publish.py`` measures it.
float32 keeps 7 significant digits, more than any timing here resolves, at a
quarter of the size and a fraction of the time of JSON numbers (10,000 commits x
2,000 series is 20 million points).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.core import env
from harness.core.files import read_json
from harness.report import (
    attention,
    benchmark,
    bookkeeping,
    commit,
    machine,
    matrix,
    overview,
    profiles,
    roofline,
    swap,
)
from harness.report import findings as findings_page
from harness.report.apart import load_apart as _load_apart
from harness.report.fmt import bench_slug, machine_slug
from harness.report.model import PublishError, SiteModel, finding_problems, finding_rows, marks
from harness.report.render import SITE_ROOT, Renderer, write_tables
from harness.report.series import machine_dirs, machine_parts, worker
from harness.store import results as _results

__all__ = [
    "OWNED",
    "PublishError",
    "PublishReport",
    "bench_slug",
    "draw",
    "load_analysis",
    "machine_slug",
    "publish",
    "run_analysis",
]

#: Folders and files ``publish`` owns inside ``out``; it replaces exactly these.
OWNED = (
    "index.html",
    "matrix.html",
    "findings.html",
    "bench",
    "machine",
    "roofline",
    "commit",
    "data",
    "static",
    "profiles",
)


@dataclass
class PublishReport:
    """What ``publish`` wrote: pages, series, machines, whether any value was usable,
    the input problems, how the analysis was obtained, the baselines offered."""

    out: Path
    index: Path
    pages: int
    series: int
    machines: list[str]
    usable: bool
    errors: list[str] = field(default_factory=list)
    analysis: str = ""
    baselines: list[str] = field(default_factory=list)
    files_loaded: int = 0


# --------------------------------------------------------------------------- analysis


def run_analysis(rs: _results.ResultSet) -> tuple[dict | None, str]:
    """Run :mod:`harness.analysis` on ``rs`` through its adapter
    (:func:`harness.store.dataset.build_inputs`). Returns ``(report dict, message)``;
    the report is ``None`` with the reason when the analysis cannot run."""
    try:
        from harness import analysis as A
        from harness.store.dataset import build_inputs
    except Exception as exc:
        return None, f"analysis not available: harness.analysis cannot be imported ({type(exc).__name__}: {exc})"
    try:
        inputs = build_inputs(rs)
        _, out = A.analyze_inputs(inputs, A.AnalysisConfig())
        return out, "analysis run by kernelwatch publish (default configuration)"
    except Exception as exc:  # the site still renders without it, and says why
        return None, f"analysis not available: it failed ({type(exc).__name__}: {exc})"


def load_analysis(path: Path) -> dict:
    """A saved report of ``kernelwatch analyze --json``. Raises :class:`PublishError`
    when the file is unreadable or not such a report."""
    try:
        data = read_json(path)  # bounded: size and nesting (harness.core.files)
    except (OSError, ValueError) as exc:
        raise PublishError(f"{path}: cannot read the analysis report ({exc})") from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != "kernelwatch-analysis"
        or not isinstance(data.get("findings"), list)
    ):
        raise PublishError(f"{path}: not a kernelwatch analysis report (schema 'kernelwatch-analysis' with findings)")
    return data


# --------------------------------------------------------------------------- publish


def publish(
    results_dir: Path,
    out: Path,
    repo: Path | None = None,
    *,
    analysis: str | Path | None = "auto",
    baselines=(),
    jobs: int | None = None,
) -> PublishReport:
    """Build the site for ``results_dir`` into ``out``.

    Parameters
    ----------
    results_dir : path
        asv results directory (ours or foreign, format v1/v2).
    out : path
        Output folder; the files and folders of :data:`OWNED` in it are replaced,
        anything else is left alone. Atomic (:mod:`harness.report.swap`): the site
        is built in a scratch folder beside ``out`` and swapped in only when whole
        and usable, so a failure, a full disk or a killed process leaves the
        previous site exactly as it was.
    repo : path, optional
        Git repository for commit order, subjects and authors.
    analysis : "auto", "off" or path
        ``auto`` runs :mod:`harness.analysis` here; a path reads a saved report
        (``kernelwatch analyze --json``); ``off`` (or ``None``) shows none.
    baselines : iterable of str
        Commits (hash, prefix, or git ref with ``repo``) offered first as the
        baseline of the matrix and the roofline arrows.
    jobs : int, optional
        Worker processes for loading machines and writing their series files
        (default: the CPUs this process may use, at most one per machine). Ignored
        with ``analysis="auto"``, which needs every series in one process.

    Raises
    ------
    FileNotFoundError
        ``results_dir`` does not exist.
    PublishError
        An unknown baseline, an unreadable analysis report, an ``out`` that is,
        lies inside or holds ``results_dir`` (both named, before any work), or a
        site that cannot be written (a full disk: the message names the path).
    """
    import gc

    # Millions of small objects and no reference cycles: the cyclic collector
    # would only rescan them (see harness.store.results.load_columns).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _publish(results_dir, out, repo, analysis, baselines, jobs)
    finally:
        if was_enabled:
            gc.enable()


def _check_apart(results_dir: Path, out: Path) -> None:
    """Raise :class:`PublishError` naming both paths when the output folder is the
    results folder, inside it, or holds it (links resolved): the site's files would
    be written among the results (``--out R/<machine>`` adds pages to a machine's
    folder) or a later swap could replace them. Checked before any work."""
    r, o = results_dir.resolve(), out.resolve()
    if r == o or r in o.parents or o in r.parents:
        where = "is" if r == o else ("is inside" if r in o.parents else "holds")
        raise PublishError(
            f"output folder {out} {where} the results folder {results_dir}: the site would be written "
            f"among the results; choose an --out outside {results_dir}"
        )


def _not_a_results_folder(results_dir: Path) -> str:
    """Why ``results_dir`` is no results folder, saying what publish reads: a Liger CSV
    given as ``--results`` was "does not exist or is not a folder" although it exists
    (hostile trial round 6, S-d)."""
    accepted = "publish reads an asv results folder (one subfolder per machine)"
    if results_dir.is_file():
        if results_dir.suffix.lower() == ".csv":
            return (
                f"--results {results_dir}: a file, not a folder; {accepted}. A Liger-Kernel CSV is read by "
                f"'kernelwatch analyze --results {results_dir}' (or --liger {results_dir} with an asv folder)"
            )
        return f"--results {results_dir}: a file, not a folder; {accepted}"
    if results_dir.exists():
        return f"--results {results_dir}: not a folder; {accepted}"
    return f"--results {results_dir}: no such folder; {accepted}"


def _publish(results_dir, out, repo, analysis, baselines, jobs) -> PublishReport:
    _T0[0] = 0.0
    _phase("start")
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise FileNotFoundError(_not_a_results_folder(results_dir))
    try:
        with os.scandir(results_dir) as it:
            next(it, None)
    except OSError as exc:  # a folder that cannot be listed: nothing in it can be read
        raise PublishError(f"{results_dir}: cannot read the results folder ({exc.strerror or exc})") from None
    out = Path(out)
    _check_apart(results_dir, out)
    report, amsg = None, "analysis not run (publish --analysis off)"
    if analysis not in (None, "off", "auto"):
        report = load_analysis(Path(analysis))
        amsg = f"analysis report read from {analysis}"
        _analysis_machines_here(report, Path(analysis), results_dir)

    try:
        stage = swap.begin(out, OWNED)
    except OSError as exc:
        raise PublishError(f"{out}: cannot prepare the output folder ({exc})") from None
    try:
        rep = _build(results_dir, stage.path, repo, report, amsg, analysis, baselines, jobs)
        if rep.usable:
            stage.commit()
            rep.errors += [
                f"{old}: the previous site could not be removed after the new one was swapped in "
                "(a file in it cannot be deleted); remove it by hand"
                for old in stage.left_behind
            ]
    except OSError as exc:  # a full disk, a folder that cannot be written: the old site stays
        where, why = _write_failure(exc, stage.path)
        raise PublishError(
            f"{where}: cannot write the site ({why}); the previous site in {out} is left as it was"
        ) from None
    finally:
        stage.abort()
    _phase("swapped in")
    rep.out, rep.index = out, out / "index.html"
    return rep


def _write_failure(exc: OSError, staging: Path) -> tuple[object, str]:
    """Where a site build failed and why, in one line. ``shutil.copytree`` raises
    :class:`shutil.Error` holding one ``(src, dst, why)`` per file it could not
    copy (2.8 KB of tuples on a full disk, issue 29 S1): that is shown as the
    staging folder, the first error and how many there were."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        errors = exc.args[0]
        first = errors[0]
        detail = f"{first[1]}: {first[2]}" if isinstance(first, tuple) and len(first) == 3 else str(first)
        more = f"; {len(errors) - 1} more file(s) failed" if len(errors) > 1 else ""
        return staging, f"first error: {detail}{more}"
    return exc.filename or staging, str(exc.strerror or exc)


def _build(results_dir, out, repo, report, amsg, analysis, baselines, jobs) -> PublishReport:
    """Build the whole site into the empty folder ``out`` (the scratch folder of
    :mod:`harness.report.swap`)."""
    for sub in ("bench", "machine", "roofline", "commit", "data/s", "data/m"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shutil.copytree(SITE_ROOT / "static", out / "static")
    _phase("output folder prepared")

    if analysis == "auto":
        # Quartiles are not shown (the workers below read none either): a fifth less to hold.
        rs, columns = _load_apart(results_dir, repo)
        for key, c in columns.items():
            s = rs.series[key] = _results.Series(key=key, unit=c.unit, type=c.type)
            s.points = c.point_view()  # points made when read, not held (issue 28)
        report, amsg = run_analysis(rs)
        findings = finding_rows(report)
        parts = machine_parts(rs, columns, sorted(rs.machines), out, bookkeeping.chart_marks(marks(findings), report))
        errors, files_loaded = list(rs.errors), rs.files_loaded
        del rs, columns
    else:
        findings = finding_rows(report)
        fmarks = bookkeeping.chart_marks(marks(findings), report)
        names = machine_dirs(results_dir)
        n_jobs = max(1, min(jobs or _cpus(), len(names)))
        if n_jobs > 1:
            import multiprocessing as mp

            # One machine per task and a fresh process per task: the largest
            # machines balance over the workers and each exits without freeing.
            work = [(str(results_dir), str(repo) if repo else None, [m], str(out), fmarks, True) for m in names]
            ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
            done = _map_fresh_processes(ctx, n_jobs, worker, work)
        else:
            work = [(str(results_dir), str(repo) if repo else None, names, str(out), fmarks, False)]
            done = [worker(w) for w in work] if names else [([], [], 0)]
        parts = sorted((p for d in done for p in d[0]), key=lambda p: p["machine"])
        errors = list(dict.fromkeys(e for d in done for e in d[1]))  # global problems are seen by every worker
        files_loaded = sum(d[2] for d in done)

    _phase("machines loaded, series files written")
    if analysis not in (None, "off", "auto"):
        errors += _analysis_mismatch(report, Path(analysis), results_dir, parts)
    errors += finding_problems(
        report, str(analysis) if analysis not in (None, "off", "auto") else "the analysis report"
    )
    model = SiteModel(parts, findings, report, amsg, results_dir, errors, repo)
    model.resolve(baselines, current=attention.current_baseline(model))
    attention.qualify(model)
    _phase("merged")
    pages = draw(model, out, jobs=max(1, jobs or _cpus()))
    _phase("pages drawn")
    usable = any(bool(np.any(~np.isnan(s["v"]))) for p in parts for s in p["series"])
    return PublishReport(
        out=out,
        index=out / "index.html",
        pages=pages,
        series=sum(len(p["series"]) for p in parts),
        machines=[p["machine"] for p in parts],
        usable=usable,
        errors=errors,
        analysis=amsg,
        baselines=[c["hash"] for c in model.candidates],
        files_loaded=files_loaded,
    )


def _report_machines(report: dict) -> set[str]:
    ms = {str(m) for m in ((report.get("summary") or {}).get("machines") or [])}
    return ms | {
        str((f.get("key") or {}).get("machine"))
        for f in report["findings"]
        if isinstance(f, dict) and (f.get("key") or {}).get("machine") is not None
    }


def _analysis_machines_here(report: dict, path: Path, results_dir: Path) -> None:
    """Raise :class:`PublishError` when none of the machines of a saved analysis
    report is in ``results_dir`` (a report of another results folder); checked
    from the ``machine.json`` files, before the output folder is touched."""
    from harness.store import layout

    theirs = _report_machines(report)
    if not theirs:
        return
    here = set()
    for mdir, minfo in layout.machine_folders(results_dir, [], None):
        here |= {mdir.name, str(minfo.get("machine") or mdir.name)}
    if not theirs & here:
        src = (report.get("input") or {}).get("results")
        raise PublishError(
            f"{path}: analysis report of another results folder{f' ({src})' if src else ''}: none of "
            f"its machines ({', '.join(sorted(theirs)[:5])}) is in {results_dir} "
            f"(machines: {', '.join(sorted(here)[:5]) or 'none'})"
        )


def _analysis_mismatch(report: dict, path: Path, results_dir: Path, parts: list) -> list[str]:
    """Warnings for the findings of a saved analysis report whose machine or
    commits are not in the published results (they are listed, not linked to data)."""
    here_m = {p["machine"] for p in parts}
    here_c = {t[0] for p in parts for t in p["commits"]}
    bad_m, bad_c, n_bad = set(), set(), 0
    for f in report["findings"]:
        if not isinstance(f, dict):
            continue
        m = (f.get("key") or {}).get("machine")
        cs = [c for c in (f.get("commit_range") or []) if isinstance(c, str)]
        miss_c = {c for c in cs if c not in here_c}
        if (m is not None and m not in here_m) or miss_c:
            n_bad += 1
            if m is not None and m not in here_m:
                bad_m.add(str(m))
            bad_c |= miss_c
    missing = sorted(_report_machines(report) - here_m)
    if not n_bad and not missing:
        return []
    src = (report.get("input") or {}).get("results")
    what = []
    if missing:
        what.append(f"machine(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} not in {results_dir}")
    if bad_c:
        what.append(f"{len(bad_c)} commit(s) not in its results (e.g. {sorted(bad_c)[0][:12]})")
    return [
        f"{path}: analysis report{f' of {src}' if src else ''} does not match these results: "
        f"{n_bad} of {len(report['findings'])} finding(s) name "
        + "; ".join(what)
        + " (is it from another results folder?)"
    ]


def draw(model: SiteModel, out: Path, jobs: int = 1) -> int:
    """Write every page of ``model`` into ``out``; returns the number of pages.

    Page order: data tables, benchmark, machine, roofline and matrix pages,
    commit pages (in ``jobs`` forked workers when there are many), findings,
    overview.
    """
    r = Renderer(out, model)
    write_tables(out, model)
    profiles.attach(model)  # stored profiles/triages: links for cases and findings
    n = profiles.write(model, r, out)
    for module in (benchmark, machine, roofline, matrix):
        for page in module.pages(model):
            r.write(page)
            n += 1
    _phase("benchmark, machine, roofline and matrix pages")
    n += _commit_pages(model, r, jobs)
    _phase("commit pages")
    for module in (findings_page, overview):
        for page in module.pages(model):
            r.write(page)
            n += 1
    return n


def _commit_pages(model: SiteModel, r: Renderer, jobs: int) -> int:
    index = commit.prepare(model)
    n_c = len(model.order)

    def render(indices) -> None:
        for i in indices:
            r.write(commit.page(model, index, i))

    chunks = [range(k, n_c, jobs) for k in range(jobs)] if n_c else []
    if jobs > 1 and n_c > 200 and sys.platform.startswith("linux"):
        # Rendering 10,000 pages is CPU-bound: forked children share the index above.
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        procs = [ctx.Process(target=render, args=(ch,)) for ch in chunks]
        for pr in procs:
            pr.start()
        for pr in procs:
            pr.join()
        bad = [pr.exitcode for pr in procs if pr.exitcode != 0]
        if bad:
            raise RuntimeError(f"rendering commit pages failed in a worker (exit codes {bad})")
    else:
        for ch in chunks:
            render(ch)
    return n_c


def _map_fresh_processes(ctx, n_jobs: int, fn, work: list) -> list:
    """``fn`` over ``work`` in a pool of ``n_jobs`` processes, a fresh one per task.

    The pool is closed and joined, never terminated, once the map is done:
    ``with Pool(...)`` terminates on exit, and with ``maxtasksperchild`` the
    pool's worker-handler thread may be forking a replacement worker at that
    moment while ``terminate`` SIGTERMs the others; a worker killed inside the
    task queue's read lock leaves it held, the replacement blocks on it for
    ever and ``terminate`` waits on the replacement (seen here: a
    ``kernelwatch publish`` of two machines hung in ``Pool.__exit__``, its new
    worker in ``queues.get``'s ``with self._rlock``). ``close`` lets each
    worker take the stop sentinel and exit by itself. Terminate is only used
    when the map itself raised.
    """
    pool = ctx.Pool(processes=n_jobs, maxtasksperchild=1)
    try:
        done = pool.map(fn, work, chunksize=1)
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()
    return done


_T0 = [0.0]


def _phase(what: str) -> None:
    """With ``KERNELWATCH_PUBLISH_TIMES=1``, print the seconds since the last phase to stderr."""
    import time

    now = time.perf_counter()
    if env.flag("KERNELWATCH_PUBLISH_TIMES") and _T0[0]:
        print(f"kernelwatch publish: {what}: {now - _T0[0]:.1f} s", file=sys.stderr)
    _T0[0] = now


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
