"""The per-machine half of ``publish``: one machine's loaded columns -> its series files and summaries.

Machines are independent until the pages are drawn, so :func:`worker` runs in a
process of its own per machine: it loads the machine
(:func:`harness.store.results.load_columns`), writes ``data/s/<id>.js`` for each
series (values, CI, failures, version changes, analysis marks, and the
figures of our records or, for foreign suites,
:func:`harness.store.dataset.series_metrics`) and returns the small summary the
parent keeps for the pages (:mod:`harness.report.model`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.core.metrics import STATUS_CONTENDED, reason_status
from harness.report import fmt as F
from harness.store import results as _results
from harness.store.dataset import METRIC_KEYS, record_metrics, series_metrics

CLOCK_KEYS = (
    ("sm_clock_mhz", "sm_mhz"),
    ("mem_clock_mhz", "mem_mhz"),
    ("temperature_c", "temp_c"),
    ("power_w", "power_w"),
)


def direction_fn():
    """``harness.analysis.direction_for`` (the one place that knows which way is
    better), or ``None`` when the module cannot be imported."""
    try:
        from harness.analysis import direction_for
    except Exception:
        return None
    return lambda unit: direction_for(None, unit).value == "higher_is_better"


def _clocks_of(rec: dict | None) -> dict | None:
    c = ((rec or {}).get("timing") or {}).get("clocks")
    if not isinstance(c, dict) or not c.get("available"):
        return None
    return c


def _spread_p50(v):
    if isinstance(v, dict):
        return F.num(v.get("p50"))
    return F.num(v)


def is_contended(reason) -> bool:
    """Whether a point's reason says it was measured under CPU contention
    (``harness.core.metrics.STATUS_CONTENDED``): no value, but not a failure."""
    return reason_status(reason) == STATUS_CONTENDED


def _contended_not_missing(mk: dict, x: np.ndarray, contended: set) -> bool:
    """Whether chart mark ``mk`` is a ``missing`` finding of a series whose every
    point from the mark's commit (machine-local ``x1``) on was measured under
    contention: it did not stop (the analysis leaves contended points out), so
    the chart draws no "missing" there (as :class:`harness.report.model.SiteModel`
    lists no such finding)."""
    from harness.core.model import Status

    if mk.get("status") != Status.MISSING or mk.get("x1") is None:
        return False
    later = np.flatnonzero(x >= mk["x1"]).tolist()
    return bool(later) and all(i in contended for i in later)


def _version_changes(versions: list) -> list:
    """``[position, old, new]`` wherever the benchmark version changes."""
    return [[i, str(a), str(b)] for i, (a, b) in enumerate(zip(versions, versions[1:]), start=1) if a != b]


def _record_clocks(records: list, n: int) -> tuple[dict, list]:
    """Per-point clock arrays of the records (NaN where absent) and the
    ``[index, reasons]`` of throttled points."""
    clocks: dict[str, np.ndarray] = {}
    throttle = []
    for i, rec in enumerate(records):
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
    return clocks, throttle


def _series_data(
    c: _results.SeriesColumns, x: np.ndarray, marks: list, higher, vcache: dict | None = None
) -> tuple[dict, dict]:
    """The lazily loaded data file of one series and the summary the parent keeps.

    ``x`` holds the machine-local commit index of each point.
    """
    n = len(c)
    fail = [[i, c.reason[i]] for i in np.flatnonzero(np.isnan(c.value)).tolist() if c.reason[i] is not None]
    # Measured under CPU contention (too few clean samples): no value, but no failure of the
    # kernel either: its own list, drawn and named as contended (the analysis leaves them out).
    contended = [f for f in fail if is_contended(f[1])]
    fail = [f for f in fail if not is_contended(f[1])]
    marks = [mk for mk in marks if not _contended_not_missing(mk, x, {i for i, _ in contended})]
    big = np.flatnonzero(F.beyond_f32(c.value)).tolist()
    if big:  # a gap on the chart, with its status (a float32 chart array would hold inf)
        fail = sorted(
            fail
            + [
                [
                    i,
                    f"not plotted: {float(c.value[i]):.3g} {c.unit or ''} is beyond the chart's "
                    f"float32 range (implausible value)",
                ]
                for i in big
            ]
        )
    ver = vcache.get(id(c.version)) if vcache is not None else None
    if ver is None:
        ver = _version_changes(c.version)
        if vcache is not None:
            vcache[id(c.version)] = ver
    clocks: dict[str, np.ndarray] = {}
    throttle = []
    if c.records is not None:
        clocks, throttle = _record_clocks(c.records, n)
    metrics = series_metrics(c.key.benchmark, c.key.params, c.unit, c.value, c.records)
    ai, tf = metrics.pop("arithmetic_intensity", None), metrics.get("tflops")
    sid = c.key.slug()
    data = {
        "id": sid,
        "machine": c.key.machine,
        "unit": c.unit,
        "n": n,
        "x": F.b64(x, "<i4"),
        "v": F.b64(c.value, "<f4"),
        "lo": F.b64(c.ci_lo, "<f4"),
        "hi": F.b64(c.ci_hi, "<f4"),
        "fail": fail,
        "contended": contended,
        "ver": ver,
        "marks": marks,
        "metrics": {k: F.b64(a, "<f4") for k, a in sorted(metrics.items())},
        "clocks": {k: F.b64(a, "<f4") for k, a in sorted(clocks.items())},
        "throttle": throttle,
        "higher_is_better": higher,
    }
    # The newest point, and the newest valid one with its metrics.
    valid = np.flatnonzero(~np.isnan(c.value))
    latest = None
    if n:
        nv = int(valid[-1]) if valid.size else None
        rec = c.records[nv] if (nv is not None and c.records is not None) else None
        m = record_metrics(rec) or {}
        if rec is None and nv is not None and metrics:
            m = {k: float(a[nv]) for k, a in metrics.items() if not np.isnan(a[nv])}
            if ai is not None and not np.isnan(ai[nv]):
                m["arithmetic_intensity"] = float(ai[nv])
        newest_contended = c.reason[-1] is not None and is_contended(c.reason[-1])
        latest = {
            "commit": c.commits[-1],
            "failed": c.reason[-1] is not None and not newest_contended,
            "fail_reason": c.reason[-1] if not newest_contended else None,
            # the newest point was measured under contention: its value is withheld, the one shown is older
            "contended": c.reason[-1] if newest_contended else None,
            "value": float(c.value[nv]) if nv is not None else None,
            "value_commit": c.commits[nv] if nv is not None else None,
            "ci": ((float(c.ci_lo[nv]), float(c.ci_hi[nv])) if nv is not None and not np.isnan(c.ci_lo[nv]) else None),
            "metrics": {k: F.num(m.get(k)) for k in METRIC_KEYS},
            "bound": m.get("bound"),
            "ai": F.num(m.get("arithmetic_intensity")),
            "status": ((rec or {}).get("metrics") or {}).get("status"),
            "status_reason": ((rec or {}).get("metrics") or {}).get("reason"),
            # why a figure is missing, as the read guards wrote it (harness.core.guards.read_metrics)
            "cache_note": ((rec or {}).get("metrics") or {}).get("cache_note"),
            "peaks_source": ((rec or {}).get("metrics") or {}).get("peaks_source"),
            "has_record": rec is not None,
            "dtype": (rec or {}).get("dtype"),
            "uses_tensor_cores": bool((rec or {}).get("uses_tensor_cores")),
            "device": ((rec or {}).get("device") or {}).get("name")
            if ((rec or {}).get("device") or {}).get("kind") == "cuda"
            else None,
            "compile_facts": (rec or {}).get("compile_facts"),
            "n": n,
            "n_failed": len(fail),
            "n_contended": len(contended),
            # The newest point's throttling, else the newest valid one's (a point that failed a
            # read guard has no value but was still measured under that contention).
            "throttled": next((r for i, r in throttle if i == n - 1), None)
            or (next((r for i, r in throttle if i == nv), None) if nv is not None else None),
        }
    summary = {
        "key": (c.key.machine, c.key.benchmark, tuple(c.key.params), c.key.timing),
        "sid": sid,
        "cid": F.case_id(c.key.benchmark, c.key.params, c.key.timing),
        "unit": c.unit,
        "higher": higher,
        "x": x,
        "v": c.value,
        "fail": [(i, r) for i, r in fail],
        "contended": [(i, r) for i, r in contended],
        "ver": ver,
        "latest": latest,
        "ai": ai,
        "tflops": tf,
    }
    return data, summary


def machine_parts(rs: _results.ResultSet, columns: dict, machines: list[str], out: Path, marks: dict) -> list[dict]:
    """Write the series files of ``machines`` and return one summary per machine.

    ``marks`` maps a series key tuple to its findings (commit hashes); they are
    stored with machine-local commit indices.
    """
    higher = direction_fn()
    order = rs.commit_order()
    pos = {h: i for i, h in enumerate(order)}
    by_machine: dict[str, list] = {}
    for key, c in columns.items():
        by_machine.setdefault(key.machine, []).append(c)
    commits_of: dict[str, list] = {}
    for m, h in rs.env_params:
        commits_of.setdefault(m, []).append(h)
    parts = []
    for m in machines:
        if m not in rs.machines:
            continue
        local = sorted(commits_of.get(m, []), key=pos.__getitem__)
        lidx = {h: i for i, h in enumerate(local)}
        env_changes, prev, env_seen = [], None, {}
        for h in local:
            cur = {k: str(v) for k, v in rs.env_params[(m, h)].items() if k != "machine"}
            for k, v in cur.items():  # every value each environment field took, oldest first
                if v not in env_seen.setdefault(k, []):
                    env_seen[k].append(v)
            if prev is not None and cur != prev:
                diffs = [
                    f"{k} {prev.get(k, '-')} -> {cur.get(k, '-')}"
                    for k in sorted(set(cur) | set(prev))
                    if cur.get(k) != prev.get(k)
                ]
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
            mk = [
                {
                    "status": f["status"],
                    "x0": lidx.get(f["c0"]),
                    "x1": lidx.get(f["c1"]),
                    "ratio": f["ratio"],
                    "ci": f["ci"],
                    "reason": f["reason"],
                }
                for f in marks.get(ktuple, [])
            ]
            data, summary = _series_data(c, x, mk, higher(c.unit) if higher else None, vcache)
            (out / "data" / "s" / f"{summary['sid']}.js").write_text(
                f'KW.put("s/{summary["sid"]}",{F.dumps(data)});\n', encoding="utf-8"
            )
            series.append(summary)
        parts.append(
            {
                "machine": m,
                "info": rs.machines[m],
                "calibration": rs.calibrations.get(m),
                "health": dict(rs.health.get(m) or {}),
                "commits": [
                    (h, rs.commits[h].date_ms, rs.commits[h].order, rs.commits[h].subject, rs.commits[h].author)
                    for h in local
                ],
                "env_changes": env_changes,
                "env_seen": env_seen,
                "series": series,
            }
        )
    return parts


#: Parsed rows a pool worker keeps until it exits (see ``keep_raw`` in
#: :func:`harness.store.results.load_columns`): multiprocessing ends its workers with
#: ``os._exit``, so they are never freed one by one.
_KEEP: list = []


def worker(args: tuple) -> tuple[list[dict], list[str], int]:
    """Process-pool entry: load ``machines`` and write their series files."""
    results_dir, repo, machines, out, marks, in_pool = args
    rs, columns = _results.load_columns(
        results_dir, repo=repo, machines=machines, quartiles=False, keep_raw=_KEEP if in_pool else None
    )
    parts = machine_parts(rs, columns, sorted(rs.machines), Path(out), marks)
    if in_pool:
        _KEEP.append(columns)
    return parts, rs.errors, rs.files_loaded


def machine_dirs(results_dir: Path) -> list[str]:
    return sorted(p.name for p in Path(results_dir).iterdir() if p.is_dir() and (p / "machine.json").exists())
