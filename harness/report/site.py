"""``kernelwatch publish``: results -> a static site (jinja2, autoescape on).

A pure transform: the same results (and analysis report) give the same bytes
(sorted iteration, no build timestamps, deterministic encodings). Templates in
``site/templates`` receive finished numbers and strings; scripts and styles ship
from ``site/static`` (Apache ECharts 5.6.0 vendored with its licence: no CDN).

Pages
-----
``index.html``
    Overview: per machine a health line (series, failing, regressions, newest
    commit), the newest regressions and cross-GPU divergences from
    :mod:`harness.analysis` with links to their evidence, and the false-alarm
    budget of that analysis.
``bench/<benchmark>.html``
    One benchmark: a case selector (parameters x timing method) and the history
    of that case on every machine in one ECharts chart (zoom, tooltip with commit,
    subject, date, value with its 99% CI and clocks when recorded), a switch
    between time, tflops, gbps, mfu, bw_util and sol, change points from the
    analysis, version and environment changes, and failed results as red
    markers (never zero, never silently missing).
``roofline/<machine>.html``
    Log-log roofline: ceilings from the datasheet (:mod:`harness.core.devices`) and
    from this machine's calibration, the latest point of each kernel x
    parameters, and arrows from a chosen earlier commit.
``matrix.html``
    Kernel x GPU heatmaps of ``sol`` and of the speed-up since a chosen baseline
    commit; per-suite geometric means per GPU.
``commit/<hash>.html``
    Everything one commit changed on every machine: findings, environment and
    benchmark-version changes, failures started or fixed, largest moves.
``machine/<machine>.html``, ``findings.html``
    Latest results of every series of one machine; every finding of the run.

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
per point) and its series files written in a worker process (``jobs``); the
parent merges the commit lists and draws the pages. Running the analysis here
(``analysis="auto"``) needs every series in one process, so it loads
everything in the parent. ``scripts/bench_publish.py`` measures it.
float32 keeps 7 significant digits, more than any timing here resolves, at a
quarter of the size and a fraction of the time of JSON numbers (10,000 commits x
2,000 series is 20 million points).
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import hashlib
import json
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from harness.store import results as _results
from harness.store.dataset import foreign_metrics



def _site_root() -> Path:
    """Folder holding ``templates/`` and ``static/``.

    Installed from a wheel, they ship as ``harness/report/assets`` (pyproject's
    package-dir maps the repository's ``site/`` there); in a source checkout or
    an editable install they are read from ``site/`` itself.
    """
    here = Path(__file__).resolve().parent
    for root in (here / "assets", here.parent.parent / "site"):
        if (root / "templates" / "base.html").is_file():
            return root
    raise FileNotFoundError(f"kernelwatch site templates not found in {here / 'assets'} nor {here.parent.parent / 'site'}")


SITE_ROOT = _site_root()
METRIC_KEYS = ("tflops", "gbps", "mfu", "bw_util", "sol")
CLOCK_KEYS = (("sm_clock_mhz", "sm_mhz"), ("mem_clock_mhz", "mem_mhz"), ("temperature_c", "temp_c"), ("power_w", "power_w"))
#: Folders and files ``publish`` owns inside ``out``; it replaces exactly these.
OWNED = ("index.html", "matrix.html", "findings.html", "bench", "machine", "roofline", "commit", "data", "static")
#: Findings shown per list on the overview (all are on ``findings.html``).
OVERVIEW_FINDINGS = 25
#: Latest-result rows per machine shown on the overview (the rest on the machine page);
#: bounded so the index stays small with hundreds of series.
INDEX_LATEST_ROWS = 40
#: Largest point-to-point moves listed per machine on a commit page.
COMMIT_MOVES = 5
#: Most findings listed on ``findings.html`` (the JSON report has all).
FINDINGS_PAGE_MAX = 5000
#: Newest commits listed (as a table, without script) on a benchmark page.
BENCH_COMMITS = 50
#: Input problems listed on the overview (the command prints all).
ERRORS_SHOWN = 200

REGRESSION_STATUSES = ("regression", "drift_regression", "pending", "failing", "missing")
DIVERGENCE_STATUSES = ("divergent_change", "efficiency_gap", "unexpected_generation_speedup")
STATUS_CLASS = {
    "regression": "bad", "drift_regression": "bad", "divergent_change": "bad", "failing": "bad",
    "pending": "warn", "missing": "warn", "efficiency_gap": "warn", "unexpected_generation_speedup": "warn",
    "improvement": "good", "drift_improvement": "good",
    "benchmark_version_change": "note", "environment_change": "note",
}


class PublishError(ValueError):
    """An option ``publish`` cannot use (unknown baseline commit, unreadable analysis report)."""


@dataclass
class PublishReport:
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


# --------------------------------------------------------------------------- formatting


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(SITE_ROOT / "templates")),
        autoescape=jinja2.select_autoescape(["html", "xml", "j2"], default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["pct"] = pct
    env.filters["tojson_sorted"] = lambda v: jinja2.utils.htmlsafe_json_dumps(v, dumps=_dumps)
    return env


def _dumps(obj, **_kw) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":"))


def fmt(x, digits: int = 4) -> str:
    """Significant-digit formatting; ``None`` renders as ``n/a``."""
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def pct(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.1f}%"


def signed_pct(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:+.1f}%"


def fmt_time(seconds) -> str:
    """A time in the unit that reads best (s, ms, us, ns)."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    a = abs(seconds)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if a >= scale or unit == "ns":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:.4g} s"


def fmt_value(v, unit: str | None) -> str:
    if v is None:
        return "n/a"
    if unit == "seconds":
        return fmt_time(v)
    return f"{v:.4g} {unit or ''}".strip()


def _slug(text: str, n: int = 60) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:n].strip("._") or "x"
    return f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


@functools.lru_cache(maxsize=None)
def bench_slug(name: str) -> str:
    """File-name-safe, collision-free id of a benchmark name."""
    return _slug(name, 80)


def machine_slug(name: str) -> str:
    return _slug(name, 60)


def case_id(benchmark: str, params, timing) -> str:
    """Id of a case (benchmark x parameters x timing), the same on every machine."""
    return "c" + hashlib.sha1(repr((benchmark, tuple(map(tuple, params)), timing)).encode()).hexdigest()[:10]


def _date(ms) -> str | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _b64(arr: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(arr, dtype=dtype).tobytes()).decode("ascii")


def _num(x) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _params_text(params) -> str:
    return ", ".join(f"{k}={v}" for k, v in params)


# --------------------------------------------------------------------------- analysis


def _direction_fn():
    """``harness.analysis.direction_for`` (the one place that knows which way is
    better), or ``None`` when the module cannot be imported."""
    try:
        from harness.analysis import direction_for
    except Exception:
        return None
    return lambda unit: direction_for(None, unit).value == "higher_is_better"


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
        report = A.analyze(inputs.series, A.AnalysisConfig(), machine_commits=inputs.machine_commits,
                           commit_order=inputs.commit_order, costs=inputs.costs, devices=inputs.devices,
                           aux_series=inputs.aux_series)
        return report.as_dict(), "analysis run by kernelwatch publish (default configuration)"
    except Exception as exc:  # the site still renders without it, and says why
        return None, f"analysis not available: it failed ({type(exc).__name__}: {exc})"


def load_analysis(path: Path) -> dict:
    """A saved report of ``kernelwatch analyze --json``. Raises :class:`PublishError`
    when the file is unreadable or not such a report."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PublishError(f"{path}: cannot read the analysis report ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != "kernelwatch-analysis" or not isinstance(data.get("findings"), list):
        raise PublishError(f"{path}: not a kernelwatch analysis report (schema 'kernelwatch-analysis' with findings)")
    return data


def _key_tuple(k: dict | None):
    """An analysis report's series key as ``(machine, benchmark, params, timing)``."""
    if not isinstance(k, dict) or not k.get("machine") or not k.get("benchmark"):
        return None
    try:
        params = tuple((str(a), str(b)) for a, b in (k.get("params") or []))
    except (TypeError, ValueError):
        return None
    return (k.get("machine"), k.get("benchmark"), params, k.get("timing"))


# --------------------------------------------------------------------------- per machine (worker side)


def _record_metrics(rec: dict | None) -> dict | None:
    """The metrics of a record whose status is ``ok`` (else ``None``)."""
    if not rec:
        return None
    m = rec.get("metrics") or {}
    if m.get("status") not in (None, "ok"):
        return None
    return m


def _clocks_of(rec: dict | None) -> dict | None:
    c = ((rec or {}).get("timing") or {}).get("clocks")
    if not isinstance(c, dict) or not c.get("available"):
        return None
    return c


def _spread_p50(v):
    if isinstance(v, dict):
        return _num(v.get("p50"))
    return _num(v)


def _version_changes(versions: list) -> list:
    """``[position, old, new]`` wherever the benchmark version changes."""
    return [[i, str(a), str(b)] for i, (a, b) in enumerate(zip(versions, versions[1:]), start=1) if a != b]


def _series_data(c: _results.SeriesColumns, x: np.ndarray, marks: list, higher,
                 vcache: dict | None = None) -> tuple[dict, dict]:
    """The lazily loaded data file of one series and the summary the parent keeps.

    ``x`` holds the machine-local commit index of each point.
    """
    n = len(c)
    fail = [[i, c.reason[i]] for i in np.flatnonzero(np.isnan(c.value)).tolist() if c.reason[i] is not None]
    ver = vcache.get(id(c.version)) if vcache is not None else None
    if ver is None:
        ver = _version_changes(c.version)
        if vcache is not None:
            vcache[id(c.version)] = ver
    metrics: dict[str, np.ndarray] = {}
    clocks: dict[str, np.ndarray] = {}
    throttle = []
    ai = tf = None
    if c.records is not None:
        for i, rec in enumerate(c.records):
            m = _record_metrics(rec)
            if m:
                for k in METRIC_KEYS + ("arithmetic_intensity",):
                    val = _num(m.get(k))
                    if val is not None:
                        if k not in metrics:
                            metrics[k] = np.full(n, np.nan)
                        metrics[k][i] = val
            ck = _clocks_of(rec)
            if ck:
                for src, dst in CLOCK_KEYS:
                    val = _spread_p50(ck.get(src))
                    if val is not None:
                        if dst not in clocks:
                            clocks[dst] = np.full(n, np.nan)
                        clocks[dst][i] = val
                if ck.get("throttle_reasons"):
                    throttle.append([i, ", ".join(map(str, ck["throttle_reasons"]))])
        ai, tf = metrics.pop("arithmetic_intensity", None), metrics.get("tflops")
    else:
        fm = foreign_metrics(c.key.benchmark, c.key.params, c.unit, c.value)
        if fm is not None:
            metrics = fm
            ai, tf = metrics.pop("arithmetic_intensity", None), metrics.get("tflops")
    sid = c.key.slug()
    data = {
        "id": sid, "machine": c.key.machine, "unit": c.unit, "n": n,
        "x": _b64(x, "<i4"), "v": _b64(c.value, "<f4"), "lo": _b64(c.ci_lo, "<f4"), "hi": _b64(c.ci_hi, "<f4"),
        "fail": fail, "ver": ver, "marks": marks,
        "metrics": {k: _b64(a, "<f4") for k, a in sorted(metrics.items())},
        "clocks": {k: _b64(a, "<f4") for k, a in sorted(clocks.items())},
        "throttle": throttle, "higher_is_better": higher,
    }
    # The newest point, and the newest valid one with its metrics.
    valid = np.flatnonzero(~np.isnan(c.value))
    latest = None
    if n:
        nv = int(valid[-1]) if valid.size else None
        rec = c.records[nv] if (nv is not None and c.records is not None) else None
        m = _record_metrics(rec) or {}
        if rec is None and nv is not None and metrics:
            m = {k: float(a[nv]) for k, a in metrics.items() if not np.isnan(a[nv])}
            if ai is not None and not np.isnan(ai[nv]):
                m["arithmetic_intensity"] = float(ai[nv])
        latest = {
            "commit": c.commits[-1], "failed": c.reason[-1] is not None, "fail_reason": c.reason[-1],
            "value": float(c.value[nv]) if nv is not None else None,
            "value_commit": c.commits[nv] if nv is not None else None,
            "ci": ((float(c.ci_lo[nv]), float(c.ci_hi[nv])) if nv is not None and not np.isnan(c.ci_lo[nv]) else None),
            "metrics": {k: _num(m.get(k)) for k in METRIC_KEYS},
            "bound": m.get("bound"), "ai": _num(m.get("arithmetic_intensity")),
            "status": ((rec or {}).get("metrics") or {}).get("status"),
            "dtype": (rec or {}).get("dtype"), "uses_tensor_cores": bool((rec or {}).get("uses_tensor_cores")),
            "device": ((rec or {}).get("device") or {}).get("name") if ((rec or {}).get("device") or {}).get("kind") == "cuda" else None,
            "n": n, "n_failed": len(fail),
        }
    summary = {
        "key": (c.key.machine, c.key.benchmark, tuple(c.key.params), c.key.timing), "sid": sid,
        "cid": case_id(c.key.benchmark, c.key.params, c.key.timing), "unit": c.unit, "higher": higher,
        "x": x, "v": c.value, "fail": [(i, r) for i, r in fail], "ver": ver, "latest": latest,
        "ai": ai, "tflops": tf,
    }
    return data, summary


def _machine_parts(rs: _results.ResultSet, columns: dict, machines: list[str], out: Path, marks: dict) -> list[dict]:
    """Write the series files of ``machines`` and return one summary per machine.

    ``marks`` maps a series key tuple to its findings (commit hashes); they are
    stored with machine-local commit indices.
    """
    higher = _direction_fn()
    order = rs.commit_order()
    pos = {h: i for i, h in enumerate(order)}
    by_machine: dict[str, list] = {}
    for key, c in columns.items():
        by_machine.setdefault(key.machine, []).append(c)
    commits_of: dict[str, list] = {}
    for (m, h) in rs.env_params:
        commits_of.setdefault(m, []).append(h)
    parts = []
    for m in machines:
        if m not in rs.machines:
            continue
        local = sorted(commits_of.get(m, []), key=pos.__getitem__)
        lidx = {h: i for i, h in enumerate(local)}
        env_changes, prev = [], None
        for h in local:
            cur = {k: str(v) for k, v in rs.env_params[(m, h)].items() if k != "machine"}
            if prev is not None and cur != prev:
                diffs = [f"{k} {prev.get(k, '-')} -> {cur.get(k, '-')}" for k in sorted(set(cur) | set(prev))
                         if cur.get(k) != prev.get(k)]
                env_changes.append((lidx[h], "; ".join(diffs)))
            prev = cur
        series = []
        xcache: dict[int, np.ndarray] = {}  # series of one benchmark share their commit and version lists
        vcache: dict[int, list] = {}
        for c in sorted(by_machine.get(m, []), key=lambda c: (c.key.benchmark, c.key.params, c.key.timing or "")):
            ktuple = (m, c.key.benchmark, tuple(c.key.params), c.key.timing)
            x = xcache.get(id(c.commits))
            if x is None:
                x = xcache[id(c.commits)] = np.array(list(map(lidx.__getitem__, c.commits)), dtype=np.int64)
            mk = [{"status": f["status"], "x0": lidx.get(f["c0"]), "x1": lidx.get(f["c1"]), "ratio": f["ratio"],
                   "ci": f["ci"], "reason": f["reason"]} for f in marks.get(ktuple, [])]
            data, summary = _series_data(c, x, mk, higher(c.unit) if higher else None, vcache)
            (out / "data" / "s" / f"{summary['sid']}.js").write_text(
                f"KW.put(\"s/{summary['sid']}\",{_dumps(data)});\n", encoding="utf-8")
            series.append(summary)
        parts.append({
            "machine": m, "info": rs.machines[m], "calibration": rs.calibrations.get(m),
            "commits": [(h, rs.commits[h].date_ms, rs.commits[h].order, rs.commits[h].subject, rs.commits[h].author)
                        for h in local],
            "env_changes": env_changes, "series": series,
        })
    return parts


#: Parsed rows a pool worker keeps until it exits (see ``keep_raw`` in
#: :func:`harness.store.results.load_columns`): multiprocessing ends its workers with
#: ``os._exit``, so they are never freed one by one.
_KEEP: list = []


def _worker(args: tuple) -> tuple[list[dict], list[str], int]:
    """Process-pool entry: load ``machines`` and write their series files."""
    results_dir, repo, machines, out, marks, in_pool = args
    rs, columns = _results.load_columns(results_dir, repo=repo, machines=machines, quartiles=False,
                                        keep_raw=_KEEP if in_pool else None)
    parts = _machine_parts(rs, columns, sorted(rs.machines), Path(out), marks)
    if in_pool:
        _KEEP.append(columns)
    return parts, rs.errors, rs.files_loaded


def _machine_dirs(results_dir: Path) -> list[str]:
    return sorted(p.name for p in Path(results_dir).iterdir() if p.is_dir() and (p / "machine.json").exists())


# --------------------------------------------------------------------------- findings (parent side)


def _finding_rows(report: dict | None) -> list[dict]:
    """Findings of an analysis report as flat rows (commit hashes, formatted magnitude)."""
    rows = []
    for f in (report or {}).get("findings") or []:
        if not isinstance(f, dict):
            continue
        st = str(f.get("status"))
        cr = list(f.get("commit_range") or []) + [None, None]
        mg = f.get("magnitude") or {}
        ratio, change = _num(mg.get("ratio")), _num(mg.get("change"))
        ci = mg.get("ci")
        ci = [_num(ci[0]), _num(ci[1])] if isinstance(ci, list) and len(ci) == 2 else None
        if ci and None in ci:
            ci = None
        key = f.get("key") if isinstance(f.get("key"), dict) else {}
        other = f.get("other_key") if isinstance(f.get("other_key"), dict) else {}
        rows.append({
            "status": st, "cls": STATUS_CLASS.get(st, "note"), "series": str(f.get("series") or ""),
            "key": _key_tuple(key), "other_key": _key_tuple(other),
            "machine": str(key.get("machine") or ""), "benchmark": str(key.get("benchmark") or ""),
            "other_machine": str(other.get("machine") or ""),
            "c0": cr[0] if isinstance(cr[0], str) else None, "c1": cr[1] if isinstance(cr[1], str) else None,
            "ratio_num": ratio, "ci_num": ci, "change_num": change,
            "ratio": fmt(ratio, 4), "ci": f"{ci[0]:.4g} .. {ci[1]:.4g}" if ci else "n/a",
            "change": signed_pct(change), "abs_change": abs(change) if change is not None else 0.0,
            "reason": str(f.get("reason") or ""),
        })
    return rows


def _marks(findings: list[dict]) -> dict:
    out: dict = {}
    for f in findings:
        mark = {"status": f["status"], "c0": f["c0"], "c1": f["c1"], "ratio": f["ratio_num"], "ci": f["ci_num"],
                "reason": f["reason"]}
        for k in {f["key"], f["other_key"]} - {None}:
            out.setdefault(k, []).append(mark)
    return out


# --------------------------------------------------------------------------- publish


def publish(results_dir: Path, out: Path, repo: Path | None = None, *, analysis: str | Path | None = "auto",
            baselines=(), jobs: int | None = None) -> PublishReport:
    """Build the site for ``results_dir`` into ``out``.

    Parameters
    ----------
    results_dir : path
        asv results directory (ours or foreign, format v1/v2).
    out : path
        Output folder; the files and folders of :data:`OWNED` in it are replaced,
        anything else is left alone.
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
        An unknown baseline or an unreadable analysis report.
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


def _publish(results_dir, out, repo, analysis, baselines, jobs) -> PublishReport:
    _T0[0] = 0.0
    _phase("start")
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise FileNotFoundError(f"results directory {results_dir} does not exist or is not a folder")
    out = Path(out)
    report, amsg = None, "analysis not run (publish --analysis off)"
    if analysis not in (None, "off", "auto"):
        report = load_analysis(Path(analysis))
        amsg = f"analysis report read from {analysis}"

    out.mkdir(parents=True, exist_ok=True)
    for name in OWNED:
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    for sub in ("bench", "machine", "roofline", "commit", "data/s", "data/m"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shutil.copytree(SITE_ROOT / "static", out / "static")
    _phase("output folder prepared")

    if analysis == "auto":
        rs, columns = _results.load_columns(results_dir, repo=repo)
        for key, c in columns.items():
            s = rs.series[key] = _results.Series(key=key, unit=c.unit, type=c.type)
            s.points = c.points()
        report, amsg = run_analysis(rs)
        findings = _finding_rows(report)
        parts = _machine_parts(rs, columns, sorted(rs.machines), out, _marks(findings))
        errors, files_loaded = list(rs.errors), rs.files_loaded
        del rs, columns
    else:
        findings = _finding_rows(report)
        marks = _marks(findings)
        names = _machine_dirs(results_dir)
        n_jobs = max(1, min(jobs or _cpus(), len(names)))
        if n_jobs > 1:
            import multiprocessing as mp

            # One machine per task and a fresh process per task: the largest
            # machines balance over the workers and each exits without freeing.
            work = [(str(results_dir), str(repo) if repo else None, [m], str(out), marks, True) for m in names]
            ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
            with ctx.Pool(processes=n_jobs, maxtasksperchild=1) as pool:
                done = pool.map(_worker, work, chunksize=1)
        else:
            work = [(str(results_dir), str(repo) if repo else None, names, str(out), marks, False)]
            done = [_worker(w) for w in work] if names else [([], [], 0)]
        parts = sorted((p for d in done for p in d[0]), key=lambda p: p["machine"])
        errors = list(dict.fromkeys(e for d in done for e in d[1]))  # global problems are seen by every worker
        files_loaded = sum(d[2] for d in done)

    _phase("machines loaded, series files written")
    b = _Builder(parts, out, findings, report, amsg, results_dir, errors, repo)
    b.jobs = max(1, jobs or _cpus())
    b.resolve(baselines)
    _phase("merged")
    pages = b.build()
    _phase("pages drawn")
    usable = any(bool(np.any(~np.isnan(s["v"]))) for p in parts for s in p["series"])
    return PublishReport(out=out, index=out / "index.html", pages=pages, series=sum(len(p["series"]) for p in parts),
                         machines=[p["machine"] for p in parts], usable=usable, errors=errors,
                         analysis=amsg, baselines=[c["hash"] for c in b.candidates], files_loaded=files_loaded)


_T0 = [0.0]


def _phase(what: str) -> None:
    """With ``KERNELWATCH_PUBLISH_TIMES=1``, print the seconds since the last phase to stderr."""
    import time

    now = time.perf_counter()
    if os.environ.get("KERNELWATCH_PUBLISH_TIMES") == "1" and _T0[0]:
        print(f"kernelwatch publish: {what}: {now - _T0[0]:.1f} s", file=sys.stderr)
    _T0[0] = now


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _commit_key(t: tuple):
    h, date, order = t[0], t[1], t[2]
    return (order if order is not None else math.inf, date if date is not None else math.inf, h)


def resolve_baselines(requested, commits: list[dict], repo: Path | None, results_dir) -> list[str]:
    """Full hashes for ``requested`` (hashes, unique prefixes, or git refs when a
    repository is given). Raises :class:`PublishError` naming an unknown one."""
    known = {c["hash"] for c in commits}
    out = []
    for ref in requested or ():
        ref = str(ref).strip()
        hits = [c["hash"] for c in commits if c["hash"].startswith(ref.lower())] \
            if re.fullmatch(r"[0-9a-fA-F]{4,40}", ref) else []
        if len(hits) == 1:
            out.append(hits[0])
            continue
        if len(hits) > 1:
            raise PublishError(f"baseline {ref!r} is ambiguous: {len(hits)} commits in the results start with it")
        full = None
        if repo is not None:
            try:
                import git

                full = git.Repo(repo, search_parent_directories=True).commit(ref).hexsha
            except Exception:
                full = None
        if full is None or full not in known:
            raise PublishError(f"baseline {ref!r} is not a commit with results in {results_dir}")
        out.append(full)
    return list(dict.fromkeys(out))


def _baseline_candidates(order: list[str], chosen: list[str]) -> list[dict]:
    """The chosen baselines, then the oldest commit and the commits 1, 10, 100
    and 1000 before the newest (those that exist), oldest first."""
    n = len(order)
    auto = {}
    if n >= 2:
        auto[order[0]] = "oldest commit"
        for back in (1000, 100, 10, 1):
            if back < n - 1:
                auto.setdefault(order[n - 1 - back], f"{back} commit{'s' if back > 1 else ''} before the newest")
    pos = {h: i for i, h in enumerate(order)}
    hashes = list(dict.fromkeys(list(chosen) + sorted(auto, key=pos.__getitem__)))
    return [{"hash": h, "short": h[:8], "index": pos[h], "why": "chosen with --baseline" if h in chosen else auto[h]}
            for h in hashes]


@dataclass
class _S:
    """A series as the parent keeps it: global commit indices and values."""

    key: tuple
    machine: str
    benchmark: str
    params: tuple
    timing: str | None
    sid: str
    cid: str
    unit: str | None
    higher: bool | None
    gx: np.ndarray
    v: np.ndarray
    fail: list
    ver: list
    latest: dict | None
    ai: np.ndarray | None
    tflops: np.ndarray | None
    base: dict = field(default_factory=dict)  # baseline hash -> (value, commit, ai, tflops)

    @functools.cached_property
    def label(self) -> str:
        return f"{self.benchmark}({_params_text(self.params)})"  # the timing method is one of the params

    @functools.cached_property
    def href(self) -> str:
        return f"bench/{bench_slug(self.benchmark)}.html#{self.cid}"


class _Builder:
    """Draws every page from the machine parts. Methods fill plain dicts for the templates."""

    def __init__(self, parts, out, findings, report, amsg, results_dir, errors, repo):
        self.out, self.report, self.amsg, self.results_dir, self.errors = out, report, amsg, results_dir, errors
        self.repo = Path(repo) if repo else None
        self.env = environment()
        self._nav: dict[str, str] = {}
        self.jobs = 1
        self.parts = {p["machine"]: p for p in parts}
        self.machines = sorted(self.parts)
        self.mslug = {m: machine_slug(m) for m in self.machines}
        info: dict[str, tuple] = {}
        for p in parts:
            for t in p["commits"]:
                info.setdefault(t[0], t)
        self.order = [t[0] for t in sorted(info.values(), key=_commit_key)]
        self.cidx = {h: i for i, h in enumerate(self.order)}
        self.commits = [{"hash": h, "short": h[:8], "date": _date(info[h][1]), "subject": info[h][3] or "",
                         "author": info[h][4] or ""} for h in self.order]
        self.maps: dict[str, np.ndarray] = {}
        self.env_changes: dict[str, list[dict]] = {}
        self.series: list[_S] = []
        for m in self.machines:
            p = self.parts[m]
            gmap = np.array([self.cidx[t[0]] for t in p["commits"]], dtype=np.int64)
            self.maps[m] = gmap
            self.env_changes[m] = [{"x": int(gmap[i]), "commit": self.order[gmap[i]], "text": t} for i, t in p["env_changes"]]
            for s in p["series"]:
                k = s["key"]
                self.series.append(_S(key=k, machine=k[0], benchmark=k[1], params=k[2], timing=k[3], sid=s["sid"],
                                      cid=s["cid"], unit=s["unit"], higher=s["higher"],
                                      gx=gmap[s["x"]] if len(s["x"]) else np.empty(0, dtype=np.int64), v=s["v"],
                                      fail=s["fail"], ver=s["ver"], latest=s["latest"], ai=s["ai"], tflops=s["tflops"]))
        self.series.sort(key=lambda s: (s.benchmark, s.params, s.timing or "", s.machine))
        self.by_key = {s.key: s for s in self.series}
        self.findings = []
        for f in findings:
            s = self.by_key.get(f["key"])
            row = dict(f, href=s.href if s else None,
                       c0=f["c0"] if f["c0"] in self.cidx else None, c1=f["c1"] if f["c1"] in self.cidx else None,
                       c0_short=(f["c0"] or "")[:8], c1_short=(f["c1"] or "")[:8],
                       order=self.cidx.get(f["c1"], self.cidx.get(f["c0"], -1)),
                       params=_params_text(f["key"][2]) if f["key"] else "")
            row.pop("key")
            row.pop("other_key")
            self.findings.append(row)
        self.findings.sort(key=lambda r: (-r["order"], -r["abs_change"], r["series"], r["status"]))
        self.noise: dict[str, float] = {}
        rows = (report or {}).get("series") or []
        if rows:
            try:
                from harness.analysis import SeriesKey as AKey

                label_noise = {r.get("series"): r.get("noise_rel") for r in rows if isinstance(r, dict)}
                for s in self.series:
                    nz = _num(label_noise.get(AKey(s.machine, s.benchmark, tuple(s.params), s.timing).label()))
                    if nz is not None:
                        self.noise[s.sid] = nz
            except Exception:
                pass

    def resolve(self, baselines) -> None:
        chosen = resolve_baselines(baselines, self.commits, self.repo, self.results_dir)
        self.candidates = _baseline_candidates(self.order, chosen)
        for s in self.series:
            valid = np.flatnonzero(~np.isnan(s.v))
            if not valid.size:
                continue
            xs = s.gx[valid]
            for cand in self.candidates:
                j = int(np.searchsorted(xs, cand["index"], side="right")) - 1
                if j < 0:
                    continue
                i = int(valid[j])
                s.base[cand["hash"]] = (float(s.v[i]), self.order[int(s.gx[i])],
                                        _num(s.ai[i]) if s.ai is not None else None,
                                        _num(s.tflops[i]) if s.tflops is not None else None)

    # ---------------------------------------------------------------- build
    def build(self) -> int:
        pages = 0
        self._write_tables()
        pages += self._bench_pages()
        pages += self._machine_pages()
        pages += self._roofline_pages()
        pages += self._matrix_page()
        _phase("benchmark, machine, roofline and matrix pages")
        pages += self._commit_pages()
        _phase("commit pages")
        pages += self._findings_page()
        pages += self._index_page()
        return pages

    def _render(self, template: str, path: Path, **ctx) -> None:
        path.write_text(self.env.get_template(template).render(**ctx), encoding="utf-8")

    def _base(self, root: str) -> dict:
        """Context every page shares; the navigation is rendered once per depth (10,000 commit pages)."""
        nav = self._nav.get(root)
        if nav is None:
            nav = self._nav[root] = jinja2.utils.markupsafe.Markup(self.env.get_template("_nav.html").render(
                root=root, machines_nav=[{"name": m, "slug": self.mslug[m]} for m in self.machines]))
        return {"root": root, "nav": nav}

    def _write_tables(self) -> None:
        data = {"hash": [c["hash"] for c in self.commits], "date": [c["date"] for c in self.commits],
                "subject": [c["subject"] for c in self.commits], "author": [c["author"] for c in self.commits]}
        (self.out / "data" / "commits.js").write_text(f"KW.put(\"commits\",{_dumps(data)});\n", encoding="utf-8")
        for m in self.machines:
            key = f"m/{self.mslug[m]}"
            (self.out / "data" / f"{key}.js").write_text(
                f"KW.put(\"{key}\",{_dumps({'machine': m, 'commits': _b64(self.maps[m], '<i4')})});\n", encoding="utf-8")

    def _latest_row(self, s: _S, root: str) -> dict:
        la = s.latest or {}
        m = la.get("metrics") or {}
        c = self.commits[self.cidx[la["commit"]]] if la.get("commit") in self.cidx else {}
        return {
            "benchmark": s.benchmark, "params": _params_text(s.params), "timing": s.timing or "",
            "href": root + s.href, "machine": s.machine,
            "commit": (la.get("commit") or "")[:8], "commit_full": la.get("commit") or "", "date": c.get("date") or "",
            "failed": bool(la.get("failed")), "fail_reason": la.get("fail_reason") or "",
            "value": fmt_value(la.get("value"), s.unit),
            "ci": (f"{fmt_value(la['ci'][0], s.unit)} .. {fmt_value(la['ci'][1], s.unit)}" if la.get("ci") else ""),
            "tflops": fmt(m.get("tflops")), "gbps": fmt(m.get("gbps")), "mfu": pct(m.get("mfu")),
            "bw_util": pct(m.get("bw_util")), "sol": pct(m.get("sol")), "bound": la.get("bound") or "n/a",
            "status": la.get("status") if la.get("status") not in (None, "ok") else "",
            "n": la.get("n", 0), "n_failed": la.get("n_failed", 0),
        }

    # ---------------------------------------------------------------- benchmark pages
    def _bench_pages(self) -> int:
        by_bench: dict[str, list[_S]] = {}
        for s in self.series:
            by_bench.setdefault(s.benchmark, []).append(s)
        self.bench_list = []
        f_by_bench: dict[str, list] = {}
        for f in self.findings:
            f_by_bench.setdefault(f["benchmark"], []).append(f)
        tpl = self.env.get_template("benchmark.html")
        base = self._base("../")
        for bname in sorted(by_bench):
            infos = by_bench[bname]
            cases: dict[str, dict] = {}
            for s in infos:
                cs = cases.setdefault(s.cid, {"id": s.cid, "label": _params_text(s.params) or "(no parameters)",
                                              "timing": s.timing or "", "series": {}, "rows": []})
                cs["series"][s.machine] = s.sid
                cs["rows"].append(self._latest_row(s, "../"))
            case_list = sorted(cases.values(), key=lambda c: (c["label"], c["timing"]))
            findings = f_by_bench.get(bname, [])
            ms = sorted({s.machine for s in infos})
            unit = infos[0].unit
            slug = bench_slug(bname)
            page_data = {
                "benchmark": bname, "unit": unit, "machines": ms, "mslug": {m: self.mslug[m] for m in ms},
                "cases": [{"id": c["id"], "label": c["label"], "series": c["series"]} for c in case_list],
                "env": {m: self.env_changes.get(m, []) for m in ms},
            }
            mask = np.zeros(len(self.order), dtype=bool)
            for s in infos:
                mask[s.gx] = True
            used = np.flatnonzero(mask)
            recent = [self.commits[i] for i in used[::-1][:BENCH_COMMITS].tolist()]
            (self.out / "bench" / f"{slug}.html").write_text(tpl.render(
                **base, title=f"{bname} - kernelwatch", benchmark=bname, unit=unit or "",
                cases=case_list, findings=findings[:500], n_findings=len(findings), page_data=page_data,
                recent=recent, n_used=int(used.size)), encoding="utf-8")
            self.bench_list.append({"name": bname, "slug": slug, "cases": len(case_list), "machines": len(ms),
                                    "findings": len(findings)})
        return len(by_bench)

    # ---------------------------------------------------------------- machine pages
    def _machine_pages(self) -> int:
        self.health = []
        self.index_latest = []
        for m in self.machines:
            p = self.parts[m]
            infos = [s for s in self.series if s.machine == m]
            rows = [self._latest_row(s, "../") for s in infos]
            self.index_latest.append({"name": m, "slug": self.mslug[m], "total": len(infos),
                                      "rows": [self._latest_row(s, "") for s in infos[:INDEX_LATEST_ROWS]]})
            info = p["info"]
            cal = p["calibration"]
            calib = None
            if cal:
                calib = {"copy_gbps": fmt(_num((cal.get("copy") or {}).get("gbps"))),
                         "matmul": [(k, fmt(_num((v or {}).get("tflops")))) for k, v in sorted((cal.get("matmul") or {}).items())],
                         "date": str(cal.get("date") or "")}
            newest = self.commits[int(self.maps[m][-1])] if len(self.maps[m]) else None
            gpu = str(info.get("gpu") or "")
            self.health.append({
                "name": m, "slug": self.mslug[m], "device": gpu if gpu and gpu != "none" else str(info.get("cpu") or ""),
                "series": len(rows), "failing": sum(1 for r in rows if r["failed"]),
                "regressions": sum(1 for f in self.findings if f["machine"] == m and f["status"] in ("regression", "drift_regression")),
                "newest": newest, "calibrated": cal is not None,
            })
            self._render("machine.html", self.out / "machine" / f"{self.mslug[m]}.html", **self._base("../"),
                         title=f"{m} - kernelwatch", machine=m,
                         info=[(k, str(v)) for k, v in sorted(info.items()) if v not in (None, "")],
                         calibration=calib, rows=rows, slug=self.mslug[m])
        return len(self.machines)

    # ---------------------------------------------------------------- roofline
    def _ceilings(self, m: str, infos: list[_S]) -> list[dict]:
        """Datasheet (spec table) and measured (calibration) ceilings of machine ``m``."""
        from harness.core.devices import lookup_spec

        out = []
        gpu = str(self.parts[m]["info"].get("gpu") or "")
        if not gpu or gpu == "none":
            gpu = next((s.latest["device"] for s in infos if s.latest and s.latest.get("device")), "")
        spec = lookup_spec(gpu, warn=False) if gpu and gpu != "none" else None
        used = sorted({(str(s.latest["dtype"]), s.latest["uses_tensor_cores"]) for s in infos
                       if s.latest and s.latest.get("dtype")})
        if spec is not None:
            comp = {}
            for dtype, tc in used:
                pk = spec.peak_for(dtype, tc)
                if pk:
                    name = dtype if tc else ("fp64" if dtype == "fp64" else "fp32")
                    comp[f"{name} {'tensor' if tc else 'vector'}"] = pk
            if not comp:
                comp = {k: v for k, v in spec.peak_tflops.items()}
            out.append({"kind": "datasheet", "label": f"datasheet {spec.sku}", "gbps": spec.peak_gbps,
                        "compute": sorted(comp.items()), "source": spec.source})
        cal = self.parts[m]["calibration"]
        if cal:
            gb = _num((cal.get("copy") or {}).get("gbps"))
            comp = [(f"{k} matmul", _num((v or {}).get("tflops"))) for k, v in sorted((cal.get("matmul") or {}).items())]
            comp = [(k, v) for k, v in comp if v]
            if gb or comp:
                out.append({"kind": "measured", "label": f"measured {str(cal.get('date') or '')[:10]}", "gbps": gb,
                            "compute": comp, "source": "kernelwatch calibrate"})
        return out

    def _roofline_pages(self) -> int:
        for m in self.machines:
            infos = [s for s in self.series if s.machine == m]
            points, zero_flop, no_cost = [], [], 0
            for s in infos:
                la = s.latest or {}
                met = la.get("metrics") or {}
                ai, tf = la.get("ai"), met.get("tflops")
                label = f"{s.benchmark}({_params_text(s.params)})"
                if ai is None or tf is None:
                    no_cost += 1
                    continue
                if ai <= 0 or tf <= 0:
                    zero_flop.append({"label": label, "href": "../" + s.href,
                                      "gbps": fmt(met.get("gbps")), "bw_util": pct(met.get("bw_util"))})
                    continue
                base = {h: [b[2], b[3], b[1][:8]] for h, b in sorted(s.base.items())
                        if b[2] and b[3] and b[2] > 0 and b[3] > 0}
                points.append({"id": s.sid, "label": label, "case": s.cid, "bench": bench_slug(s.benchmark),
                               "ai": ai, "tflops": tf, "sol": met.get("sol"), "bound": la.get("bound"),
                               "commit": (la.get("value_commit") or "")[:8], "base": base})
            ceilings = self._ceilings(m, infos)
            data = {"machine": m, "points": points, "ceilings": ceilings}
            self._render("roofline.html", self.out / "roofline" / f"{self.mslug[m]}.html", **self._base("../"),
                         title=f"roofline {m} - kernelwatch", machine=m, data=data, ceilings=ceilings,
                         n_points=len(points), zero_flop=zero_flop, no_cost=no_cost, slug=self.mslug[m],
                         candidates=self.candidates)
        return len(self.machines)

    # ---------------------------------------------------------------- matrix
    def _matrix_page(self) -> int:
        cases: dict[str, dict] = {}
        for s in self.series:
            c = cases.setdefault(s.cid, {"id": s.cid, "href": s.href,
                                         "label": s.label,
                                         "suite": s.benchmark.rsplit(".", 1)[0] if "." in s.benchmark else s.benchmark,
                                         "sol": {}, "speedup": {}})
            la = s.latest or {}
            sol = (la.get("metrics") or {}).get("sol")
            if sol is not None and sol > 0:
                c["sol"][s.machine] = sol
            now = la.get("value")
            if now is None or now <= 0 or s.higher is None:
                continue
            for cand in self.candidates:
                b = s.base.get(cand["hash"])
                if b is None or not b[0] or b[0] <= 0:
                    continue
                c["speedup"].setdefault(cand["hash"], {})[s.machine] = (now / b[0]) if s.higher else (b[0] / now)
        rows = sorted(cases.values(), key=lambda c: c["label"])
        machines = self.machines
        geo = []
        for su in sorted({c["suite"] for c in rows}):
            members = [c for c in rows if c["suite"] == su]
            sol = []
            for m in machines:
                vals = [c["sol"][m] for c in members if m in c["sol"]]
                g = _geomean(vals)
                sol.append((pct(g) if g is not None else "n/a", len(vals)))
            sp = {}
            for cand in self.candidates:
                cells = []
                for m in machines:
                    vals = [v for v in (c["speedup"].get(cand["hash"], {}).get(m) for c in members) if v]
                    g = _geomean(vals)
                    cells.append((f"{g:.3f}x" if g is not None else "n/a", len(vals)))
                sp[cand["hash"]] = cells
            geo.append({"suite": su, "sol": sol, "speedup": sp})
        data = {
            "machines": machines,
            "cases": [{"id": c["id"], "label": c["label"], "href": c["href"],
                       "sol": [c["sol"].get(m) for m in machines],
                       "speedup": {h: [d.get(m) for m in machines] for h, d in sorted(c["speedup"].items())}}
                      for c in rows],
        }
        self._render("matrix.html", self.out / "matrix.html", **self._base(""), title="kernel x GPU matrix - kernelwatch",
                     data=data, machines=machines, geo=geo, candidates=self.candidates,
                     n_cases=len(rows), n_sol=sum(1 for c in rows if c["sol"]))
        return 1

    # ---------------------------------------------------------------- commit pages
    def _commit_pages(self) -> int:
        n_c = len(self.order)
        per_commit: dict[int, dict] = {}

        def slot(i: int, m: str) -> dict:
            d = per_commit.setdefault(i, {})
            return d.setdefault(m, {"env": [], "version": [], "started": [], "fixed": [], "moves": []})

        for m, lst in self.env_changes.items():
            for e in lst:
                slot(e["x"], m)["env"].append(e["text"])
        for m in self.machines:
            infos = [s for s in self.series if s.machine == m]
            if not infos or not n_c:
                continue
            # Largest point-to-point moves: a commits x series matrix of the
            # log ratio to the previous valid point, oriented so that + is worse.
            mat = np.zeros((n_c, len(infos)), dtype=np.float32)
            for j, s in enumerate(infos):
                ok = ~np.isnan(s.v)
                failed_at = dict(s.fail)
                for i in (np.flatnonzero(np.diff(ok.astype(np.int8)) != 0) + 1).tolist():
                    e = {"label": s.label, "href": "../" + s.href, "reason": failed_at.get(i) or ""}
                    slot(int(s.gx[i]), m)["fixed" if ok[i] else "started"].append(e)
                if len(ok) and not ok[0]:
                    slot(int(s.gx[0]), m)["started"].append({"label": s.label, "href": "../" + s.href,
                                                            "reason": failed_at.get(0) or ""})
                for i, old, new in s.ver:
                    slot(int(s.gx[i]), m)["version"].append(f"{s.label}: version {old} -> {new}")
                valid = np.flatnonzero(ok)
                if valid.size >= 2:
                    d = np.diff(np.log(s.v[valid]))
                    if s.higher:
                        d = -d
                    mat[s.gx[valid[1:]], j] = d
            absm = np.abs(mat)
            k_top = min(COMMIT_MOVES, len(infos))
            if k_top < len(infos):
                top = np.argpartition(-absm, k_top - 1, axis=1)[:, :k_top]
            else:
                top = np.tile(np.arange(len(infos)), (n_c, 1))
            for xi in np.flatnonzero(absm.max(axis=1) > 0).tolist():
                cols = sorted((int(c) for c in top[xi] if absm[xi, c] > 0), key=lambda c: (-absm[xi, c], c))
                for c in cols:
                    s, d = infos[c], float(mat[xi, c])
                    nz = self.noise.get(s.sid)
                    slot(xi, m)["moves"].append({"label": s.label, "href": "../" + s.href,
                                                 "change": signed_pct(math.expm1(d)), "cls": "bad" if d > 0 else "good",
                                                 "noise": pct(nz) if nz is not None else "n/a"})
        find_by_commit: dict[str, list[dict]] = {}
        for f in self.findings:
            for c in dict.fromkeys([f["c1"], f["c0"]]):
                if c:
                    find_by_commit.setdefault(c, []).append(f)
        measured: dict[int, set] = {}
        for m in self.machines:
            for i in self.maps[m].tolist():
                measured.setdefault(i, set()).add(m)
        self._commit_ctx = (per_commit, find_by_commit, measured)
        chunks = [range(k, n_c, self.jobs) for k in range(self.jobs)] if n_c else []
        if self.jobs > 1 and n_c > 200 and sys.platform.startswith("linux"):
            # Rendering 10,000 pages is CPU-bound: forked children share the data above.
            import multiprocessing as mp

            ctx = mp.get_context("fork")
            procs = [ctx.Process(target=self._render_commits, args=(ch,)) for ch in chunks]
            for pr in procs:
                pr.start()
            for pr in procs:
                pr.join()
            bad = [pr.exitcode for pr in procs if pr.exitcode != 0]
            if bad:
                raise RuntimeError(f"rendering commit pages failed in a worker (exit codes {bad})")
        else:
            for ch in chunks:
                self._render_commits(ch)
        return n_c

    def _render_commits(self, indices) -> None:
        per_commit, find_by_commit, measured = self._commit_ctx
        tpl = self.env.get_template("commit.html")
        base = self._base("../")
        empty = {"env": [], "version": [], "started": [], "fixed": [], "moves": []}
        n_c = len(self.commits)
        for i in indices:
            c = self.commits[i]
            d = per_commit.get(i, {})
            sections = [{"machine": m, "measured": m in measured.get(i, ()), **d.get(m, empty)} for m in self.machines]
            (self.out / "commit" / f"{c['hash']}.html").write_text(tpl.render(
                **base, title=f"{c['short']} - kernelwatch", commit=c, findings=find_by_commit.get(c["hash"], []),
                sections=sections, prev=self.commits[i - 1] if i > 0 else None,
                next=self.commits[i + 1] if i + 1 < n_c else None,
                analysis=self.amsg if self.report is None else None), encoding="utf-8")

    # ---------------------------------------------------------------- findings + index
    def _budget(self) -> dict | None:
        b = (self.report or {}).get("false_alarm_budget")
        if not isinstance(b, dict):
            return None
        return {"expected": fmt(_num(b.get("expected_false_alerts")), 3),
                "without_fdr": fmt(_num(b.get("expected_false_alerts_without_fdr")), 3),
                "fdr_q": fmt(_num(b.get("fdr_q")), 3), "threshold": fmt(_num(b.get("bh_threshold_p")), 3),
                "hypotheses": b.get("hypotheses"), "method": str(b.get("method") or "")}

    def _findings_page(self) -> int:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f["status"]] = counts.get(f["status"], 0) + 1
        self._render("findings.html", self.out / "findings.html", **self._base(""), title="findings - kernelwatch",
                     findings=self.findings[:FINDINGS_PAGE_MAX], total=len(self.findings),
                     counts=sorted(counts.items()), analysis=self.amsg, has_report=self.report is not None,
                     budget=self._budget())
        return 1

    def _index_page(self) -> int:
        # Most serious kind first, then newest, then largest. A benchmark that
        # stopped reporting is one line, not one per case.
        regs = sorted(_group_missing(f for f in self.findings if f["status"] in REGRESSION_STATUSES),
                      key=lambda f: (REGRESSION_STATUSES.index(f["status"]), -f["order"], -f["abs_change"]))
        divs = sorted((f for f in self.findings if f["status"] in DIVERGENCE_STATUSES),
                      key=lambda f: (DIVERGENCE_STATUSES.index(f["status"]), -f["order"], -f["abs_change"]))
        summary = (self.report or {}).get("summary") or {}
        self._render("index.html", self.out / "index.html", **self._base(""), title="kernelwatch",
                     results_dir=str(self.results_dir), health=self.health, n_commits=len(self.commits),
                     n_series=len(self.series), newest=self.commits[-1] if self.commits else None,
                     has_report=self.report is not None, analysis=self.amsg, budget=self._budget(),
                     regressions=regs[:OVERVIEW_FINDINGS], n_regressions=len(regs),
                     divergences=divs[:OVERVIEW_FINDINGS], n_divergences=len(divs),
                     n_findings=len(self.findings), summary_points=summary.get("points"),
                     benches=self.bench_list, errors=self.errors[:ERRORS_SHOWN], n_errors=len(self.errors),
                     latest=self.index_latest)
        return 1


def _group_missing(findings) -> list[dict]:
    """``missing`` findings of one machine and benchmark over the same commits
    merged into one row naming how many cases stopped."""
    out, groups = [], {}
    for f in findings:
        if f["status"] != "missing":
            out.append(f)
            continue
        k = (f["machine"], f["benchmark"], f["c0"], f["c1"])
        if k in groups:
            groups[k]["n"] += 1
            continue
        g = groups[k] = dict(f, n=1)
        out.append(g)
    for g in groups.values():
        if g["n"] > 1:
            g["series"] = f"{g['machine']} / {g['benchmark']} ({g['n']} cases)"
    return out


def _geomean(vals) -> float | None:
    vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
