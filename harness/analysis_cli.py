"""``kernelwatch analyze``: load results, run :mod:`harness.analysis`, print and save.

Parse -> load (:mod:`harness.results`, :mod:`harness.importers`) -> adapt to the
pure analysis model (:func:`build_inputs`) -> :func:`harness.analysis.analyze`
-> JSON report and a rich table. :func:`run_analyze` is what the CLI calls;
it takes explicit keywords so it is testable without argparse.

Exit codes: 0 the analysis ran (findings or not); 2 the input could not be used.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from harness import analysis as A

EXIT_OK = 0
EXIT_BAD_INPUT = 2

#: Point-level environment keys taken from asv results params / machine info.
_ENV_FROM_PARAMS = ("gpu", "driver", "cuda", "torch", "triton", "harness", "python")


@dataclass
class Inputs:
    """Everything :func:`harness.analysis.analyze` needs, built from a ResultSet."""

    series: list[A.Series]
    aux_series: list[A.Series]
    machine_commits: dict[str, list[str]]
    commit_order: list[str]
    devices: dict[str, A.DevicePeaks]
    costs: dict[tuple, A.CaseCost]
    throughput: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _metric_of(rs_series) -> str:
    t = (rs_series.type or "").lower()
    unit = (rs_series.unit or "").lower()
    if t == "time" or unit in ("seconds", "s", "ms"):
        return "time"
    if t == "memory" or unit in ("mb", "bytes"):
        return "memory"
    return unit or t or "value"


def _device_peaks(name: str | None) -> A.DevicePeaks | None:
    if not name or name == "none":
        return None
    from harness.devices import lookup_spec

    spec = lookup_spec(name, warn=False)
    if spec is None:
        return None
    return A.DevicePeaks(name=spec.sku, peak_gbps=spec.peak_gbps, peak_tflops=dict(spec.peak_tflops))


def _case_cost(rs_series, point) -> tuple[A.CaseCost | None, str | None]:
    rec = point.record or {}
    c = rec.get("cost")
    if isinstance(c, dict):
        total = c.get("bytes_total")
        if total is None:
            total = (c.get("bytes_read") or 0) + (c.get("bytes_written") or 0)
        dtype = c.get("dtype") or rec.get("dtype")
        if c.get("flops") is not None and dtype:
            return A.CaseCost(float(c["flops"]), float(total), str(dtype),
                              bool(c.get("uses_tensor_cores", rec.get("uses_tensor_cores", False)))), None
    from harness.importers import openblas_cost

    if rs_series.key.benchmark.startswith("benchmarks.") and "variant" in dict(rs_series.key.params):
        kc, why = openblas_cost(rs_series.key.benchmark, dict(rs_series.key.params))
        if kc:
            return A.CaseCost(float(kc.flops), float(kc.bytes_total), kc.dtype, kc.uses_tensor_cores), None
        return None, why
    return None, rec.get("cost_reason") or "no cost known"


def build_inputs(rs) -> Inputs:
    """Adapt a :class:`harness.results.ResultSet` to the analysis model.

    Per point, the environment is the results file's params (asv copies the
    machine entry's ``gpu``, ``driver``, ``cuda``, ``torch``, ``triton``,
    ``harness`` keys into them), its ``env_name``, and, where one of our records
    exists, the record's device versions, driver, harness version and timing
    method. ``sol`` series for the efficiency-gap rule come from the records'
    metrics, or from cost, time and the datasheet peaks (:mod:`harness.metrics`).
    """
    order = rs.commit_order()
    rank = {c: i for i, c in enumerate(order)}
    mc: dict[str, set] = {}
    for (machine, commit) in rs.env_params:
        mc.setdefault(machine, set()).add(commit)
    machine_commits = {m: sorted(cs, key=lambda c: rank.get(c, math.inf)) for m, cs in mc.items()}

    devices: dict[str, A.DevicePeaks] = {}
    device_names: dict[str, str] = {}
    for m, info in rs.machines.items():
        name = info.get("gpu")
        if name:
            device_names[m] = str(name)
    series, aux = [], []
    costs: dict[tuple, A.CaseCost] = {}
    throughput: list[dict] = []
    no_cost: dict[str, int] = {}
    for s in rs.series.values():
        metric = _metric_of(s)
        pts = []
        for p in s.points:
            env = {}
            params = rs.env_params.get((s.key.machine, p.commit), {})
            for k in _ENV_FROM_PARAMS:
                if params.get(k) not in (None, ""):
                    env[k] = str(params[k])
            if p.env_name:
                env["env_name"] = p.env_name
            rec = p.record or {}
            dev = rec.get("device") or {}
            for k, v in (dev.get("versions") or {}).items():
                if v:
                    env[k] = str(v)
            if dev.get("driver"):
                env["driver"] = str(dev["driver"])
            if rec.get("harness_version"):
                env["harness"] = str(rec["harness_version"])
            tm = (rec.get("timing") or {}).get("method")
            if tm and not s.key.timing:
                env["timing"] = str(tm)
            if dev.get("name") and s.key.machine not in device_names:
                device_names[s.key.machine] = str(dev["name"])
            pts.append(A.Point(commit=p.commit, value=p.value, reason=p.reason, ci=p.ci_99,
                               samples=tuple(p.samples) if p.samples else None, version=p.version,
                               env=env or None))
        key = A.SeriesKey(s.key.machine, s.key.benchmark, tuple(s.key.params), s.key.timing)
        try:
            series.append(A.Series(key, pts, unit=s.unit, metric=metric))
        except ValueError as exc:
            rs.errors.append(str(exc))
            continue
        if metric != "time":
            continue
        last = next((p for p in reversed(s.points) if p.value is not None), None)
        if last is None:
            continue
        cost, why = _case_cost(s, last)
        if cost is None:
            no_cost[(why or "no cost").split(":")[-1].strip()] = no_cost.get((why or "no cost").split(":")[-1].strip(), 0) + 1
            continue
        costs[(s.key.benchmark, tuple(s.key.params))] = cost
        # a Liger value is in ms; an asv time in seconds
        scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}.get((s.unit or "").lower(), 1.0)
        vals = [p.value for p in s.points if p.value is not None][-5:]
        t = sorted(vals)[len(vals) // 2] * scale
        throughput.append({"machine": s.key.machine, "benchmark": s.key.benchmark,
                           "params": [list(x) for x in s.key.params], "timing": s.key.timing,
                           "time_s": t, "gflops": cost.flops / t / 1e9 if cost.flops else None,
                           "gbps": cost.bytes_total / t / 1e9 if cost.bytes_total else None,
                           "dtype": cost.dtype, "commit": last.commit})
    for m, name in device_names.items():
        peaks = _device_peaks(name)
        if peaks:
            devices[m] = peaks
    aux = _sol_series(rs, series, costs, devices)
    notes = [f"{n} time series without a cost ({why})" for why, n in sorted(no_cost.items())]
    return Inputs(series, aux, machine_commits, order, devices, costs, throughput, notes)


def _sol_series(rs, series: list[A.Series], costs, devices) -> list[A.Series]:
    """``sol`` per point: the record's when it has one, else ``floor / time``
    from the cost and the machine's datasheet peaks (:mod:`harness.metrics`)."""
    out = []
    by_key = {(s.key.machine, s.key.benchmark, s.key.params, s.key.timing): s for s in rs.series.values()}
    for s in series:
        if s.metric != "time":
            continue
        rs_s = by_key.get((s.key.machine, s.key.benchmark, s.key.params, s.key.timing))
        dev = devices.get(s.key.machine)
        cost = costs.get((s.key.benchmark, s.key.params))
        pts = []
        for p in rs_s.points:
            sol = ((p.record or {}).get("metrics") or {}).get("sol")
            if sol is None and dev and cost and p.value is not None:
                scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}.get((s.unit or "").lower(), 1.0)
                t = p.value * scale
                terms = []
                pk = cost.peak_tflops(dev)
                if pk and cost.flops:
                    terms.append(cost.flops / (pk * 1e12))
                if dev.peak_gbps and cost.bytes_total:
                    terms.append(cost.bytes_total / (dev.peak_gbps * 1e9))
                # floor_s / time_s as harness.metrics defines sol (imported
                # arithmetic inlined: harness.metrics pulls in torch)
                sol = max(terms) / t if terms else None
            if sol is not None and sol > 0:
                pts.append(A.Point(commit=p.commit, value=float(sol)))
        if pts:
            out.append(A.Series(s.key, pts, unit="fraction", metric="sol"))
    return out


def suite_paths(results_dir: str | Path, repo: str | Path) -> list[str]:
    """Paths (relative to the repository root) whose change means the benchmark
    suite changed: asv's ``benchmark_dir`` (default ``benchmarks``) and
    ``asv.conf.json``, read from the ``asv.conf.json`` beside the results
    directory or at the repository root (asv's JSON-with-comments loader)."""
    from asv.util import load_json

    root = Path(repo)
    bench_dir = "benchmarks"
    for conf in (Path(results_dir).parent / "asv.conf.json", root / "asv.conf.json"):
        if conf.is_file():
            try:
                bench_dir = str(load_json(str(conf), js_comments=True).get("benchmark_dir") or bench_dir)
            except Exception:  # an unreadable config leaves the default; the load step reports bad files
                pass
            break
    return [bench_dir.rstrip("/"), "asv.conf.json"]


def benchmark_change_notes(repo: str | Path, commits: Sequence[str], paths: Sequence[str]) -> tuple[dict, str | None]:
    """``{commit: [{kind: "benchmark_changed", text, evidence}]}`` for every
    commit in ``commits`` whose diff against its parent touches ``paths``
    (GitPython: one ``git log --name-only -- paths``). Returns the notes and
    an error message (``None`` when the repository was read)."""
    try:
        import git

        r = git.Repo(repo, search_parent_directories=True)
        out = r.git.log("--all", "--format=@@%H", "--name-only", "--", *paths)
    except Exception as exc:  # not a repository, git missing: the analysis runs without the label
        return {}, f"{repo}: could not read the git history for benchmark changes ({type(exc).__name__}: {exc})"
    wanted = set(commits)
    notes: dict[str, list[dict]] = {}
    cur = None
    files: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("@@"):
            cur = line[2:].strip()
            files[cur] = []
        elif line.strip() and cur:
            files[cur].append(line.strip())
    for c, fs in files.items():
        if c in wanted and fs:
            shown = ", ".join(fs[:4]) + (f" and {len(fs) - 4} more" if len(fs) > 4 else "")
            notes[c] = [{"kind": "benchmark_changed",
                         "text": f"benchmark changed: this commit touches the suite ({shown})",
                         "evidence": {"files": fs, "paths": list(paths)}}]
    return notes, None


def load_input(results: str | Path, repo: str | Path | None = None, liger_csvs: Sequence[str | Path] = ()):
    """A ResultSet from an asv results directory, a folder of Liger CSVs, a single
    CSV, or both. Raises ``FileNotFoundError`` for a missing path."""
    from harness import importers, results as R

    path = Path(results)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    csvs = [Path(c) for c in liger_csvs]
    rs = None
    if path.is_file():
        csvs.insert(0, path)
    else:
        has_asv = any((d / "machine.json").exists() for d in path.iterdir() if d.is_dir())
        if has_asv:
            rs = R.load(path, repo=repo)
        else:
            csvs = importers.find_liger_csvs(path) + csvs
            if not csvs and not has_asv:
                rs = R.load(path, repo=repo)  # reports what it could not use
    if csvs:
        rs = importers.load_liger_csvs(csvs, into=rs)
    return rs


def run_analyze(results_dir, repo=None, json_path=None, *, liger_csvs: Sequence[str | Path] = (),
                config: A.AnalysisConfig | None = None, console=None, max_rows: int = 40,
                compare_asv: str | Path | None = None, suite_extra: Sequence[str | Path] = ()) -> int:
    """Run the analysis and report.

    Parameters
    ----------
    results_dir : path
        asv results directory (format v1/v2, several machines, with our records),
        a folder of Liger CSVs, or one Liger CSV.
    repo : path, optional
        Git repository for commit order (else stored commit dates).
    json_path : path, optional
        Where to write the versioned JSON report (``-`` for stdout).
    liger_csvs : paths
        Extra Liger CSVs to import into the same run.
    config : AnalysisConfig, optional
    console : rich Console, optional (tests pass a recording one)
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
    from rich.console import Console

    # with the JSON on stdout, the table goes to stderr
    console = console or Console(stderr=str(json_path) == "-")
    config = config or A.AnalysisConfig()
    try:
        rs = load_input(results_dir, repo, liger_csvs)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return EXIT_BAD_INPUT
    for e in rs.errors:
        console.print(f"[yellow]skipped:[/yellow] {e}", highlight=False)
    if not rs.series:
        console.print(f"[red]error:[/red] {results_dir}: no benchmark series found (no asv results or Liger CSVs)")
        return EXIT_BAD_INPUT
    inputs = build_inputs(rs)
    notes: dict = {}
    if repo:
        paths = suite_paths(results_dir, repo) + [str(x) for x in suite_extra]
        notes, err = benchmark_change_notes(repo, inputs.commit_order, paths)
        if err:
            console.print(f"[yellow]note:[/yellow] {err}", highlight=False)
    report = A.analyze(inputs.series, config, machine_commits=inputs.machine_commits,
                       commit_order=inputs.commit_order, costs=inputs.costs, devices=inputs.devices,
                       aux_series=inputs.aux_series, commit_notes=notes)
    out = report.as_dict()
    out["input"] = {"results": str(results_dir), "repo": str(repo) if repo else None,
                    "files_loaded": rs.files_loaded, "errors": list(rs.errors), "notes": inputs.notes,
                    "commit_order": "git history" if repo else "stored commit date",
                    "commits": len(inputs.commit_order),
                    "devices": {m: d.name for m, d in inputs.devices.items()}}
    out["throughput"] = inputs.throughput
    if compare_asv:
        try:
            out["asv_comparison"] = compare_with_asv(report, compare_asv, inputs.series)
        except (OSError, ValueError) as exc:
            console.print(f"[yellow]skipped:[/yellow] {compare_asv}: {exc}")
    if json_path:
        text = json.dumps(out, indent=1, sort_keys=False, allow_nan=False, default=str)
        if str(json_path) == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(text + "\n")
    print_report(out, console, max_rows=max_rows)
    return EXIT_OK


def _short(c: str | None) -> str:
    return "-" if not c else (c[:8] if len(c) == 40 else c)


def print_report(out: dict, console, max_rows: int = 40) -> None:
    """Readable tables: summary, false-alarm budget, findings, throughput."""
    from rich.table import Table

    s = out["summary"]
    b = out["false_alarm_budget"]
    console.print(
        f"[bold]kernelwatch analysis[/bold] (report v{out['version']}): {s['series']} series on "
        f"{len(s['machines'])} machine(s), {s['points']} points, {s['failed_points']} failed, "
        f"{s['series_all_failed']} series with no valid value", highlight=False)
    console.print(
        f"false-alarm budget: expected false alerts this run {b['expected_false_alerts']:.3g} "
        f"(FDR q={b['fdr_q']}, BH threshold p={b['bh_threshold_p']:.3g} over {b['hypotheses']} hypotheses; "
        f"point-by-point alerting at 1% would expect {b['expected_false_alerts_without_fdr']:.3g})", highlight=False)
    console.print(f"change detection: {s.get('change_detection', '')}", highlight=False)
    events = out.get("events") or []
    if events:
        t = Table(title=f"events: commits that moved something ({len(events)}; showing {min(len(events), max_rows)})")
        for col in ("status", "commits", "series", "machines", "worst", "labels"):
            t.add_column(col, overflow="fold")
        for e in events[:max_rows]:
            cr = e["commit_range"]
            names = sorted({r["key"]["benchmark"].rsplit(".", 1)[-1] for r in e["series"]})
            t.add_row(e["status"], f"{_short(cr[0])}..{_short(cr[1])}",
                      f"{e['n_slower']} slower, {e['n_faster']} faster: " + ", ".join(names[:4])
                      + (" ..." if len(names) > 4 else ""),
                      ", ".join(e["machines"]),
                      f"x{e['max_magnitude']:.3g}" if e["max_magnitude"] else "-",
                      "; ".join(a["text"] for a in e["annotations"][:2]))
        console.print(t)
    findings = out["findings"]
    rank = {st.value: i for i, st in enumerate(A.Status)}
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
            t.add_row(f["status"], f["series"], f"{_short(cr[0])}..{_short(cr[1])}", ratio, ci, f["reason"])
        console.print(t)
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
            t.add_column(m, justify="right")
        for (bench, params, timing), row in shown:
            t.add_row(f"{bench.split('.', 1)[-1]}({', '.join(str(v) for _, v in params)})",
                      *[f"{row[m]['gflops']:.2f}" if m in row and row[m]["gflops"] else "-" for m in machines])
        console.print(t)
    cmp_ = out.get("asv_comparison")
    if cmp_:
        console.print(f"asv published {cmp_['asv_count']} regression(s); kernelwatch agrees on "
                      f"{cmp_['agree']}, differs on {len(cmp_['rows']) - cmp_['agree']} (see JSON)", highlight=False)


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
    before = sorted(v for v in vals[max(0, i - 10):i] if v is not None)
    if not before:
        return None
    med = before[len(before) // 2]
    return [{"commit": p.commit, "ratio_to_before": (p.value / med) if p.value is not None else None}
            for p in series.points[i:]]


def compare_with_asv(report: A.Report, regressions_json: str | Path, series_list: Sequence[A.Series]) -> dict:
    """Line up asv's published ``regressions.json`` with this report's findings.

    asv's entries are ``[name(params), graph path, {machine}, param index,
    last value, best value, [[rev_before, rev_after, value_before, value_after], ...]]``
    with revisions as positions in asv's own commit numbering; the commit range is
    matched by values' series, so each asv entry is paired with our finding(s)
    on the same machine and case. Raises ``ValueError`` for an unreadable file.
    """
    data = json.loads(Path(regressions_json).read_text())
    regs = data.get("regressions") if isinstance(data, dict) else None
    if not isinstance(regs, list):
        raise ValueError("no 'regressions' list")
    by_case: dict[tuple, list[A.Finding]] = {}
    for f in report.findings:
        if f.key is not None:
            by_case.setdefault((f.key.machine, f.key.benchmark, tuple(str(v) for _, v in f.key.params)), []).append(f)
    series_by_case = {(s.key.machine, s.key.benchmark, tuple(str(v) for _, v in s.key.params)): s
                      for s in series_list}
    rows = []
    agree = 0
    for entry in regs:
        name, _graph, gparams, _idx, last, best, jumps = entry[:7]
        bench, _, args = name.partition("(")
        vals = tuple(a.strip().strip("'\"") for a in args.rstrip(")").split(",")) if args else ()
        machine = gparams.get("machine")
        ours = [f for f in by_case.get((machine, bench, vals), [])
                if f.status not in (A.Status.FAILING, A.Status.MISSING)]
        st = [f.status.value for f in ours]
        same = any(s in ("regression", "drift_regression") for s in st)
        agree += same
        rows.append({"asv": {"benchmark": name, "machine": machine, "last": last, "best": best,
                             "ratio": last / best if best else None, "jumps": jumps},
                     "kernelwatch": [f.as_dict() for f in ours], "agree": same,
                     "values_after_jump": _values_after(series_by_case.get((machine, bench, vals)), last)})
    return {"asv_count": len(regs), "agree": agree, "rows": rows}
