"""``kernelwatch analyze``: load results, run :mod:`harness.analysis`, print and save.

Parse (in :mod:`harness.cli`) -> load and adapt (:mod:`harness.store.dataset`)
-> :func:`harness.analysis.analyze` -> JSON report and a rich table.
:func:`run_analyze` is what the CLI calls; it takes explicit keywords so it is
testable without argparse.

Exit codes: 0 the analysis ran (findings or not); 2 the input could not be used.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from rich.markup import escape as _markup_escape
from rich.text import Text

from harness import analysis as A
from harness.core.model import CONFIRMED_REGRESSIONS, printable
from harness.store.dataset import build_inputs, load_input
from harness.store.suite import benchmark_change_notes, suite_paths

EXIT_OK = 0
EXIT_BAD_INPUT = 2


#: The order of the findings table: what got slower first (a person reads the
#: top rows), then cross-GPU claims, speed-ups, and the bookkeeping last
#: (a newcomer's OpenBLAS table showed 29 version changes in its 40 rows).
CLI_ORDER = (
    A.Status.REGRESSION,
    A.Status.DRIFT_REGRESSION,
    A.Status.PENDING,
    A.Status.DIVERGENT_CHANGE,
    A.Status.UNEXPECTED_SPEEDUP,
    A.Status.EFFICIENCY_GAP,
    A.Status.IMPROVEMENT,
    A.Status.DRIFT_IMPROVEMENT,
    A.Status.ENV_CHANGE,
    A.Status.VERSION_CHANGE,
    A.Status.FAILING,
    A.Status.MISSING,
)


def _esc(text) -> str:
    """A data-derived string for a rich markup line: control characters shown as
    escapes (:func:`harness.core.model.printable`), then markup escaped."""
    return _markup_escape(printable(text))


def _path_problem(json_path, liger_csvs, compare_asv, results_dir=None) -> str | None:
    """Why the command line's paths cannot be used, checked before the analysis
    (``None`` when they can): an output may create its folders, if they can be
    made, and may not be inside the results folder or be one of the inputs (the
    report replaced a measured results file, exit 0: hostile trial round 4, O1);
    an input must exist and be a regular file (``/dev/zero``, a FIFO or a
    folder given as a file was skipped with exit 0; issue 29, S3/S4); ``-`` needs
    an open standard output."""
    from harness.core.files import check_input_file, check_output_file

    if str(json_path) == "-" and (sys.stdout is None or getattr(sys.stdout, "closed", False)):
        # fd 1 closed at start: Python sets sys.stdout to None (round 4: AttributeError)
        return "--json -: standard output is closed; give a file path instead"
    if json_path and str(json_path) != "-":
        out = Path(json_path).resolve()
        inputs = [Path(c).resolve() for c in liger_csvs] + ([Path(compare_asv).resolve()] if compare_asv else [])
        if out in inputs:
            return f"--json {json_path}: that is one of the inputs; give another path for the report"
        if results_dir is not None and str(results_dir).strip():
            res = Path(results_dir).resolve()
            if out == res or out.is_relative_to(res):
                return (
                    f"--json {json_path}: inside the results folder {results_dir}; the report would replace "
                    "or sit among the measurements: give a path outside it"
                )
        try:
            check_output_file(json_path, make_folders=True)
        except OSError as exc:
            return f"--json {json_path}: {exc.strerror}"
    named = [("--liger", c) for c in liger_csvs] + ([("--compare-asv", compare_asv)] if compare_asv else [])
    for option, given in named:
        try:
            check_input_file(given, option)
        except OSError as exc:
            return f"{option} {given}: {exc.strerror}"
    return None


def repo_problem(repo, option: str = "--repo") -> str | None:
    """Why ``repo`` (a ``--repo`` given on the command line) cannot order the commits,
    ``None`` when it can: a path that does not exist, or one that is not inside a
    git repository (GitPython, parent folders searched as the store does). A typo'd
    ``--repo`` used to be a warning and an order by stored dates, exit 0 (hostile
    trial h29t S9). Blank means "no repository" and is never a problem."""
    import git

    if repo is None or not str(repo).strip():
        return None
    path = Path(repo)
    if not path.exists():
        return f"{option} {repo}: no such file or folder (give a git repository, or '' for none)"
    try:
        git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return f"{option} {repo}: not a git repository (nor inside one); give a git repository, or '' for none"
    return None


def run_analyze(
    results_dir,
    repo=None,
    json_path=None,
    *,
    liger_csvs: Sequence[str | Path] = (),
    config: A.AnalysisConfig | None = None,
    console=None,
    err_console=None,
    max_rows: int = 40,
    compare_asv: str | Path | None = None,
    suite_extra: Sequence[str | Path] = (),
) -> int:
    """Run the analysis and report.

    Parameters
    ----------
    results_dir : path
        asv results directory (format v1/v2, several machines, with our records),
        a folder of Liger CSVs, or one Liger CSV.
    repo : path, optional
        Git repository for commit order (else stored commit dates; ``''`` is none).
        A path that does not exist or is not a git repository is exit 2, naming it
        (:func:`repo_problem`).
    json_path : path, optional
        Where to write the versioned JSON report (``-`` for stdout).
    liger_csvs : paths
        Extra Liger CSVs to import into the same run.
    config : AnalysisConfig, optional
    console : rich Console, optional (tests pass a recording one): the table.
    err_console : rich Console, optional: errors, skipped input and notes, as
        ``kernelwatch: error: ...`` like every other subcommand. Default: standard
        error, or ``console`` when a console is passed without it. Errors used to go
        to standard output with the table, so ``analyze ... > report.txt`` hid them
        (hostile trial round 5).
    max_rows : findings shown in the table (all are in the JSON).
    compare_asv : path to an asv ``regressions.json`` to compare with.
    suite_extra : more repository paths the suite reads (with ``repo``): a commit
        touching them, ``benchmark_dir`` or ``asv.conf.json`` is labelled
        "benchmark changed".

    Returns
    -------
    int
        0 when the analysis ran, 2 when the input could not be used.
    """
    from harness.cli import console as make_console

    # with the JSON on stdout, the table goes to stderr; off a terminal rich would wrap at 80 columns
    if err_console is None:
        err_console = console if console is not None else make_console(stderr=True)
    console = console or make_console(stderr=str(json_path) == "-")

    def error(text: str) -> int:
        err_console.print(f"[red]kernelwatch: error:[/red] {_esc(text)}", highlight=False)
        return EXIT_BAD_INPUT

    config = config or A.AnalysisConfig()
    problem = repo_problem(repo) or _path_problem(json_path, liger_csvs, compare_asv, results_dir)
    repo = repo if repo and str(repo).strip() else None
    if problem:
        return error(problem)
    try:
        rs = load_input(results_dir, repo, liger_csvs)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        return error(str(exc))
    for e in rs.errors:
        err_console.print(f"[yellow]kernelwatch: warning:[/yellow] {_esc(e)}", highlight=False)
    if not rs.series:
        return error(f"{results_dir}: no benchmark series found (no asv results or Liger CSVs)")
    inputs = build_inputs(rs)
    notes: dict = {}
    if repo:
        paths = suite_paths(results_dir, repo) + [str(x) for x in suite_extra]
        notes, err = benchmark_change_notes(repo, inputs.commit_order, paths)
        if err:
            err_console.print(f"[yellow]note:[/yellow] {_esc(err)}", highlight=False)
    report, out = A.analyze_inputs(inputs, config, commit_notes=notes)
    out["input"] = _input_summary(results_dir, repo, rs, inputs)
    out["throughput"] = inputs.throughput
    if compare_asv:
        try:
            out["asv_comparison"] = compare_with_asv(report, compare_asv, inputs.series)
        except (OSError, ValueError, TypeError, AttributeError) as exc:  # over a limit, not JSON, not asv's layout
            return error(f"--compare-asv {compare_asv}: cannot use it ({exc}); give asv's published regressions.json")
    failed = _write_json(json_path, out) if json_path else None
    if failed:
        return error(failed)
    print_report(out, console, max_rows=max_rows, err_console=err_console)
    return EXIT_OK


def _write_json(json_path, out: dict) -> str | None:
    """Write the report to ``json_path`` (``-``: standard output), whole or not at
    all (a full disk keeps the previous report); why it failed, or ``None``."""
    from harness.core.files import write_text_atomic

    text = json.dumps(out, indent=1, sort_keys=False, allow_nan=False, default=str)
    if str(json_path) == "-":
        sys.stdout.write(text + "\n")
        return None
    try:
        write_text_atomic(json_path, text + "\n")
    except OSError as exc:
        return f"--json {exc.filename}: {exc.strerror}"
    return None


def _input_summary(results_dir, repo, rs, inputs) -> dict:
    """The report's ``input`` block: what was read, what was skipped and why, and
    how the commits were ordered."""
    return {
        "results": str(results_dir),
        "repo": str(repo) if repo else None,
        "files_loaded": rs.files_loaded,
        "skipped_points": rs.skipped_points,
        "errors": list(rs.errors),
        "notes": inputs.notes,
        "commit_order": "git history" if repo else "stored commit date",
        "commits": len(inputs.commit_order),
        "devices": {m: d.name for m, d in inputs.devices.items()},
    }


def _short(c: str | None) -> str:
    return "-" if not c else (c[:8] if len(c) == 40 else c)


def _cells(*values) -> list:
    """Table cells as rich ``Text``: a name, path or reason from the data is shown as
    written, never read as markup (``[/b]`` raised ``MarkupError``; ``[link=...]``
    became a terminal hyperlink showing only its label; issue 29), and with its
    control characters shown as escapes (an ESC sequence coloured or cleared the terminal)."""
    return [Text(printable(v)) for v in values]


def _newest_threshold(b: dict) -> str:
    """The budget's BH threshold(s) as text: the history family's, and the
    newest commits' family when the report has one (reports before it had one)."""
    new = b.get("bh_threshold_p_newest")
    if isinstance(new, (int, float)) and not isinstance(new, bool):
        return f"s p={b['bh_threshold_p']:.2g} for a series' history and p={new:.2g} for its newest commits,"
    return f" p={b['bh_threshold_p']:.2g}"


def print_report(out: dict, console, max_rows: int = 40, err_console=None) -> None:
    """Readable tables: summary, false-alarm budget, findings, throughput. Every
    value from the data reaches rich as ``Text`` or escaped, never as markup.
    Warnings go to ``err_console`` (standard error from the CLI), else ``console``."""
    from rich.table import Table

    s = out["summary"]
    b = out["false_alarm_budget"]
    console.print(
        f"[bold]kernelwatch analysis[/bold] (report v{out['version']}): {s['series']} series on "
        f"{len(s['machines'])} machine(s), {s['points']} points, {s['failed_points']} failed"
        f"{' (' + str(s['impossible_points']) + ' impossible values)' if s.get('impossible_points') else ''}, "
        f"{(out.get('input') or {}).get('skipped_points', 0)} skipped (asv NaN: not run, no point), "
        f"{len((out.get('input') or {}).get('errors') or [])} input problems (each a warning line), "
        f"{s['series_all_failed']} series with no valid value",
        highlight=False,
    )
    console.print(
        f"false-alarm budget: expected false alerts this run {b['expected_false_alerts']:.3g} "
        f"(FDR q={b['fdr_q']}, BH threshold{_newest_threshold(b)} over {b['hypotheses']} hypotheses; "
        f"point-by-point alerting at 1% would expect {b['expected_false_alerts_without_fdr']:.3g})",
        highlight=False,
    )
    console.print(Text(printable(f"change detection: {s.get('change_detection', '')}")))
    for unit, n in (s.get("direction_assumed") or {}).items():
        (err_console or console).print(
            Text(
                printable(
                    f"kernelwatch: warning: {n} series in unit {unit!r}: the unit does not say which way is better; "
                    "read as lower-is-better (asv's convention). A rate unit (GB/s, items/s) or a name "
                    "ending in tflops, gbps, throughput or speedup reads as higher-is-better (docs/analysis.md)."
                )
            )
        )
    events = out.get("events") or []
    if events:
        t = Table(title=f"events: commits that moved something ({len(events)}; showing {min(len(events), max_rows)})")
        for col in ("status", "commits", "series", "machines", "worst", "labels"):
            t.add_column(col, overflow="fold")
        for e in events[:max_rows]:
            cr = e["commit_range"]
            names = sorted({r["key"]["benchmark"].rsplit(".", 1)[-1] for r in e["series"]})
            t.add_row(
                *_cells(
                    e["status"],
                    f"{_short(cr[0])}..{_short(cr[1])}",
                    f"{e['n_slower']} slower, {e['n_faster']} faster"
                    + (
                        f", {n_div} diverged"
                        if (n_div := sum(r["direction"] == "diverged" for r in e["series"]))
                        else ""
                    )
                    + ": "
                    + ", ".join(names[:4])
                    + (" ..." if len(names) > 4 else ""),
                    ", ".join(e["machines"]),
                    f"x{e['max_magnitude']:.3g}" if e["max_magnitude"] else "-",
                    "; ".join(a["text"] for a in e["annotations"][:2]),
                )
            )
        console.print(t)
    findings = out["findings"]
    rank = {st.value: i for i, st in enumerate(CLI_ORDER)}
    findings = sorted(findings, key=lambda f: (rank.get(f["status"], 99), -(abs(f["magnitude"]["change"] or 0))))
    if findings:
        t = Table(title=f"findings ({len(findings)}; showing {min(len(findings), max_rows)})", show_lines=False)
        for col in ("status", "series", "commits", "ratio", "CI", "reason"):
            t.add_column(col, overflow="fold")
        for f in findings[:max_rows]:
            mg = f["magnitude"]
            ratio = f"{mg['ratio']:.3f}" if mg["ratio"] is not None else "-"
            ci = f"{mg['ci'][0]:.3f}-{mg['ci'][1]:.3f}" if mg["ci"] and mg["ci"][0] is not None else "-"
            cr = f["commit_range"]
            t.add_row(*_cells(f["status"], f["series"], f"{_short(cr[0])}..{_short(cr[1])}", ratio, ci, f["reason"]))
        console.print(t)
        left = Counter(f["status"] for f in findings[max_rows:])
        if left:
            console.print(
                "not shown: "
                + ", ".join(f"{n} {st}" for st, n in sorted(left.items(), key=lambda kv: rank.get(kv[0], 99)))
                + " (every finding is in --json; the site lists them by kind)"
            )
    else:
        console.print("no findings")
    tp = out.get("throughput") or []
    if tp:
        machines = sorted({r["machine"] for r in tp})
        cases: dict[tuple, dict] = {}
        for r in tp:
            cases.setdefault((r["benchmark"], tuple(map(tuple, r["params"])), r["timing"]), {})[r["machine"]] = r
        shown = sorted(cases.items(), key=lambda kv: -max((x["gflops"] or 0) for x in kv[1].values()))[:15]
        t = Table(title=f"throughput, GFLOP/s at the latest commits (top {len(shown)} of {len(cases)} cases)")
        t.add_column("case", overflow="fold")
        for m in machines:
            t.add_column(Text(printable(m)), justify="right")
        for (bench, params, _timing), row in shown:
            t.add_row(
                *_cells(
                    f"{bench.split('.', 1)[-1]}({', '.join(str(v) for _, v in params)})",
                    *[f"{row[m]['gflops']:.2f}" if m in row and row[m]["gflops"] else "-" for m in machines],
                )
            )
        console.print(t)
    cmp_ = out.get("asv_comparison")
    if cmp_:
        console.print(
            f"asv published {cmp_['asv_count']} regression(s); kernelwatch agrees on "
            f"{cmp_['agree']}, differs on {len(cmp_['rows']) - cmp_['agree']} (see JSON)",
            highlight=False,
        )


def _values_after(series: A.Series | None, jump_value: float) -> list | None:
    """The series from the commit asv's jump lands on to the newest, each as a
    ratio to the median of the 10 values before it (to show excursions)."""
    if series is None:
        return None
    vals = [p.value for p in series.points]
    hits = [i for i, v in enumerate(vals) if v is not None and math.isclose(v, jump_value, rel_tol=1e-9)]
    if not hits:
        return None
    i = hits[-1]
    before = sorted(v for v in vals[max(0, i - 10) : i] if v is not None)
    if not before:
        return None
    med = before[len(before) // 2]
    return [
        {"commit": p.commit, "ratio_to_before": (p.value / med) if p.value is not None else None}
        for p in series.points[i:]
    ]


def compare_with_asv(report: A.Report, regressions_json: str | Path, series_list: Sequence[A.Series]) -> dict:
    """Line up asv's published ``regressions.json`` with this report's findings.

    asv's entries are ``[name(params), graph path, {machine}, param index,
    last value, best value, [[rev_before, rev_after, value_before, value_after], ...]]``
    with revisions as positions in asv's own commit numbering; the commit range is
    matched by values' series, so each asv entry is paired with our finding(s)
    on the same machine and case. Raises ``ValueError`` for an unreadable file.
    """
    from harness.core.files import read_json

    data = read_json(regressions_json)
    regs = data.get("regressions") if isinstance(data, dict) else None
    if not isinstance(regs, list):
        raise ValueError("no 'regressions' list")
    by_case: dict[tuple, list[A.Finding]] = {}
    for f in report.findings:
        if f.key is not None:
            by_case.setdefault((f.key.machine, f.key.benchmark, tuple(str(v) for _, v in f.key.params)), []).append(f)
    series_by_case = {(s.key.machine, s.key.benchmark, tuple(str(v) for _, v in s.key.params)): s for s in series_list}
    rows = []
    agree = 0
    for entry in regs:
        name, _graph, gparams, _idx, last, best, jumps = entry[:7]
        bench, _, args = name.partition("(")
        vals = tuple(a.strip().strip("'\"") for a in args.rstrip(")").split(",")) if args else ()
        machine = gparams.get("machine")
        ours = [
            f for f in by_case.get((machine, bench, vals), []) if f.status not in (A.Status.FAILING, A.Status.MISSING)
        ]
        st = [f.status.value for f in ours]
        same = any(s in CONFIRMED_REGRESSIONS for s in st)
        agree += same
        rows.append(
            {
                "asv": {
                    "benchmark": name,
                    "machine": machine,
                    "last": last,
                    "best": best,
                    "ratio": last / best if best else None,
                    "jumps": jumps,
                },
                "kernelwatch": [f.as_dict() for f in ours],
                "agree": same,
                "values_after_jump": _values_after(series_by_case.get((machine, bench, vals)), last),
            }
        )
    return {"asv_count": len(regs), "agree": agree, "rows": rows}
