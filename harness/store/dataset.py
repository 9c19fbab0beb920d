"""The dataset: a results directory turned into the analysis model, every figure derived once.

:func:`load_input` reads an asv results directory (format v1/v2, several
machines, with our records and calibrations: :mod:`harness.store.results`), a
folder of Liger CSVs or one CSV (:mod:`harness.store.importers`), or both.
:func:`build_inputs` adapts it to :mod:`harness.analysis`' model: series keyed
by machine x benchmark x params x timing, points with value, samples, CI,
status and reason and environment; costs from the one registry
(:func:`harness.core.costs.cost_of`); ``sol`` and throughput through
:mod:`harness.core.metrics`. :func:`foreign_metrics` gives the site the same
figures per point for foreign suites. ``kernelwatch analyze``
(:mod:`harness.cli.analyze`), ``publish`` (:mod:`harness.report`) and the
scripts read this; none of them derives a metric itself.

Imports: core, store, and the analysis model's types (no analysis is run here).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from harness import analysis as A
from harness.analysis import autotune
from harness.core.costs import cost_of, seconds_per_unit
from harness.core.devices import lookup_spec
from harness.core.metrics import STATUS_CONTENDED, Peaks, compute_metrics, reason_status, roofline_floor_s
from harness.core.model import point_values
from harness.store import importers
from harness.store import results as results_mod
from harness.store.model import PointView

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
    #: ``harness.analysis.autotune.facts_key(...) -> facts`` of every point with a record
    #: that carries a launch config or compile facts (for the ``autotune_changed`` annotation).
    compile_facts: dict[tuple, dict] = field(default_factory=dict)


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
    spec = lookup_spec(name, warn=False)
    if spec is None:
        return None
    # spec_table() refuses, naming the row, any row DevicePeaks would refuse
    return A.DevicePeaks(name=spec.sku, peak_gbps=spec.peak_gbps, peak_tflops=dict(spec.peak_tflops))


def _case_cost(rs_series, point) -> tuple[A.CaseCost | None, str | None]:
    """The case's cost from the registry (:func:`harness.core.costs.cost_of`), as the analysis model's type."""
    kc, why = cost_of(rs_series.key.benchmark, rs_series.key.params, point.record)
    if kc is None:
        return None, why
    try:
        return A.CaseCost(float(kc.flops), float(kc.bytes_total), kc.dtype, kc.uses_tensor_cores), None
    except (TypeError, ValueError) as exc:
        return None, f"cost of {rs_series.key.benchmark}: {exc}"


def _point_env(rs, s, commit: str, env_name, record) -> dict:
    """The environment of one point (its commit, env name and record): results-file
    params, env name, and the record's device versions, driver, harness version
    and timing method."""
    env = {}
    params = rs.env_params.get((s.key.machine, commit), {})
    for k in _ENV_FROM_PARAMS:
        if params.get(k) not in (None, ""):
            env[k] = str(params[k])
    if env_name:
        env["env_name"] = env_name
    rec = record or {}
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
    return env


def _shared_env(rs, s, commit: str, env_name, record, env_of: dict, shared: dict) -> dict:
    """:func:`_point_env`, one dict per distinct environment shared by its points
    (read-only in the analysis): a dict per point was 300 MB of 1,000 x 1,008 points.
    ``env_of`` caches points without a record by (machine, commit, env name)."""
    ck = (s.key.machine, commit, env_name) if record is None else None
    env = env_of.get(ck) if ck is not None else None
    if env is None:
        env = _point_env(rs, s, commit, env_name, record)
        env = shared.setdefault(tuple(env.items()), env)
        if ck is not None:
            env_of[ck] = env
    return env


def _analysis_points(rs, s, env_of: dict, shared_env: dict, compile_facts: dict, device_names: dict):
    """The analysis' points of the store's series ``s``: each with its environment
    (one shared dict per distinct environment), contended points left out; the
    records' compile facts and device names are added to ``compile_facts`` and
    ``device_names``. A series read through a :class:`PointView` gives a view
    again (the kept positions and their environments), not a ``Point`` per point
    (issue 28)."""
    if isinstance(s.points, PointView):
        return _view_points(rs, s, s.points, env_of, shared_env, compile_facts, device_names)
    pts = []
    for p in s.points:
        if p.value is None and reason_status(p.reason) == STATUS_CONTENDED:
            # Measured under CPU contention (too few clean samples): not a failure of the
            # kernel, so not a failure stretch either; left out of the analysis, counted in
            # the health line and drawn on the chart with its reason (harness.store.columns).
            continue
        _record_facts(s, p.commit, p.record, compile_facts, device_names)
        # The store's point is the analysis' point (one class, core.model.Point): its
        # environment filled in, not copied (a copy per point was 130 MB of 1,000 x 1,008).
        p.env = _shared_env(rs, s, p.commit, p.env_name, p.record, env_of, shared_env) or None
        if p.samples is not None and not isinstance(p.samples, tuple):
            p.samples = tuple(p.samples) or None
        pts.append(p)
    return pts


def _view_points(rs, s, view: PointView, env_of, shared_env, compile_facts, device_names) -> PointView:
    """:func:`_analysis_points` of a series read through a :class:`PointView`, from
    its columns' fields: the same rules, without making a ``Point`` per point."""
    keep, envs = [], []
    for i, (commit, value, reason, env_name, record) in enumerate(view.fields()):
        if value is None and reason_status(reason) == STATUS_CONTENDED:
            continue  # as in _analysis_points
        _record_facts(s, commit, record, compile_facts, device_names)
        keep.append(i)
        envs.append(_shared_env(rs, s, commit, env_name, record, env_of, shared_env) or None)
    return view.select(keep, envs)


def _record_facts(s, commit: str, record, compile_facts: dict, device_names: dict) -> None:
    """A record's compile facts into ``compile_facts``, its device name into
    ``device_names`` (the first one of each machine)."""
    if record is None:
        return
    cf = autotune.facts_from_record(record)
    if cf:
        compile_facts[autotune.facts_key(s.key.machine, s.key.benchmark, s.key.params, commit)] = cf
    dev = (record or {}).get("device") or {}
    if isinstance(dev, dict) and dev.get("name") and s.key.machine not in device_names:
        device_names[s.key.machine] = str(dev["name"])


def build_inputs(rs) -> Inputs:
    """Adapt a :class:`harness.store.results.ResultSet` to the analysis model.

    Per point, the environment is the results file's params (asv copies the
    machine entry's ``gpu``, ``driver``, ``cuda``, ``torch``, ``triton``,
    ``harness`` keys into them), its ``env_name``, and, where one of our records
    exists, the record's device versions, driver, harness version and timing
    method. ``sol`` series for the efficiency-gap rule come from the records'
    metrics, or from cost, time and the datasheet peaks (:mod:`harness.core.metrics`).
    """
    order = rs.commit_order()
    rank = {c: i for i, c in enumerate(order)}
    mc: dict[str, set] = {}
    for machine, commit in rs.env_params:
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
    compile_facts: dict[tuple, dict] = {}
    env_of: dict[tuple, dict] = {}  # (machine, commit, env name) -> env, for points without a record
    shared_env: dict[tuple, dict] = {}
    for s in rs.series.values():
        metric = _metric_of(s)
        pts = _analysis_points(rs, s, env_of, shared_env, compile_facts, device_names)
        key = A.SeriesKey(s.key.machine, s.key.benchmark, tuple(s.key.params), s.key.timing)
        # contended points at the end: the series ran there, it did not go missing
        stored_last = s.points[-1].commit if len(s.points) else None
        kept_last = pts[-1].commit if len(pts) else None
        last_seen = stored_last if stored_last != kept_last else None
        try:
            series.append(A.Series(key, pts, unit=s.unit, metric=metric, last_seen=last_seen))
        except ValueError as exc:
            rs.errors.append(str(exc))
            continue
        if metric != "time":
            continue
        values = point_values(s.points)
        at = next((i for i in range(len(values) - 1, -1, -1) if values[i] is not None), None)
        if at is None:
            continue
        last = s.points[at]
        cost, why = _case_cost(s, last)
        if cost is None:
            no_cost[(why or "no cost").split(":")[-1].strip()] = (
                no_cost.get((why or "no cost").split(":")[-1].strip(), 0) + 1
            )
            continue
        costs[(s.key.benchmark, tuple(s.key.params))] = cost
        scale = _scale(s.unit)
        vals = [v for v in values if v is not None][-5:]
        t = sorted(vals)[len(vals) // 2] * scale
        throughput.append(
            {
                "machine": s.key.machine,
                "benchmark": s.key.benchmark,
                "params": [list(x) for x in s.key.params],
                "timing": s.key.timing,
                "time_s": t,
                "gflops": cost.flops / t / 1e9 if cost.flops else None,
                "gbps": cost.bytes_total / t / 1e9 if cost.bytes_total else None,
                "dtype": cost.dtype,
                "commit": last.commit,
            }
        )
    for m, name in device_names.items():
        peaks = _device_peaks(name)
        if peaks:
            devices[m] = peaks
    aux = _sol_series(rs, series, costs, devices)
    notes = [f"{n} time series without a cost ({why})" for why, n in sorted(no_cost.items())]
    return Inputs(series, aux, machine_commits, order, devices, costs, throughput, notes, compile_facts)


def _sol_series(rs, series: list[A.Series], costs, devices) -> list[A.Series]:
    """``sol`` per point: the record's when it has one, else ``floor / time``
    from the cost and the machine's datasheet peaks
    (:func:`harness.core.metrics.roofline_floor_s`)."""
    out = []
    by_key = {(s.key.machine, s.key.benchmark, s.key.params, s.key.timing): s for s in rs.series.values()}
    for s in series:
        if s.metric != "time":
            continue
        rs_s = by_key.get((s.key.machine, s.key.benchmark, s.key.params, s.key.timing))
        dev = devices.get(s.key.machine)
        cost = costs.get((s.key.benchmark, s.key.params))
        if not (dev and cost) and not _has_records(rs_s.points):
            continue  # neither a record's sol nor a floor to divide by: no point would have one
        pts = []
        for p in rs_s.points:
            sol = ((p.record or {}).get("metrics") or {}).get("sol")
            if sol is None and dev and cost and p.value is not None:
                floor = roofline_floor_s(
                    cost, Peaks(tflops=cost.peak_tflops(dev), gbps=dev.peak_gbps, source=f"datasheet: {dev.name}")
                )
                sol = floor / (p.value * _scale(s.unit)) if floor is not None else None
            if sol is not None and sol > 0:
                pts.append(A.Point(commit=p.commit, value=float(sol)))
        if pts:
            out.append(A.Series(s.key, pts, unit="fraction", metric="sol"))
    return out


def _has_records(points) -> bool:
    """Whether any point has a record (a :class:`PointView` says so from its columns)."""
    fast = getattr(points, "has_records", None)
    return fast() if fast is not None else any(p.record is not None for p in points)


def load_input(results: str | Path, repo: str | Path | None = None, liger_csvs: Sequence[str | Path] = ()):
    """A ResultSet from an asv results directory, a folder of Liger CSVs, a single
    CSV, or both. Raises ``FileNotFoundError`` for a missing path."""
    path = Path(results)
    if not path.exists():
        if path.is_symlink():  # a loop or a dangling link read as "does not exist" (round 6, S-l)
            raise FileNotFoundError(
                f"{path} is a symbolic link to {os.readlink(path)!r}, which leads nowhere (a loop or a missing target)"
            )
        raise FileNotFoundError(f"{path} does not exist")
    csvs = [Path(c) for c in liger_csvs]
    rs = None
    if path.is_file():
        csvs.insert(0, path)
    else:
        has_asv = any((d / "machine.json").exists() for d in path.iterdir() if d.is_dir())
        if has_asv:
            # Points made when read, unless Liger rows are merged into (and sort) these series.
            rs = results_mod.load(path, repo=repo, on_access=not csvs)
        else:
            csvs = importers.find_liger_csvs(path) + csvs
            if not csvs and not has_asv:
                rs = results_mod.load(path, repo=repo)  # reports what it could not use
    if csvs:
        rs = importers.load_liger_csvs(csvs, into=rs)
    return rs


def _scale(unit: str | None) -> float:
    """Seconds per unit of a time series; asv's time series are in seconds."""
    return seconds_per_unit(unit) or 1.0


#: The per-point figures the site plots, besides ``arithmetic_intensity``.
METRIC_KEYS = ("tflops", "gbps", "mfu", "bw_util", "sol")


def record_metrics(rec: dict | None) -> dict | None:
    """The ``metrics`` block of one of our records when its status is ``ok``
    (derived at write time by :func:`harness.core.metrics.compute_metrics`
    with the device's peaks), else ``None``."""
    if not rec:
        return None
    m = rec.get("metrics") or {}
    if m.get("status") not in (None, "ok"):
        return None
    return m


def series_metrics(
    benchmark: str, params, unit: str | None, values: np.ndarray, records: list | None
) -> dict[str, np.ndarray]:
    """Per-point figures of one series: :data:`METRIC_KEYS` and ``arithmetic_intensity``
    as float arrays (NaN where absent), only the keys that have a value somewhere.

    With our records (``records`` a list, one per point, ``None`` where a point
    has none), the records' ``ok`` metrics; without records (a foreign suite),
    :func:`foreign_metrics`; ``{}`` when neither gives anything.
    """
    n = len(values)
    if records is None:
        return foreign_metrics(benchmark, params, unit, values) or {}
    out: dict[str, np.ndarray] = {}
    for i, rec in enumerate(records):
        m = record_metrics(rec)
        if not m:
            continue
        for k in METRIC_KEYS + ("arithmetic_intensity",):
            v = m.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                if k not in out:
                    out[k] = np.full(n, np.nan)
                out[k][i] = float(v)
    return out


def foreign_metrics(benchmark: str, params, unit: str | None, values: np.ndarray) -> dict[str, np.ndarray] | None:
    """Per-point ``tflops``, ``gbps`` and ``arithmetic_intensity`` of a series that
    has no records of ours (a foreign asv suite with a rule in the cost
    registry), or ``None`` when no cost is known or ``unit`` is not a time.

    ``values`` are the stored times (float array, NaN where a point failed); the
    figures come from :func:`harness.core.metrics.compute_metrics` with no peaks
    (none are known for foreign machines, so no mfu, bw_util or sol), NaN where
    the time is missing or the metrics module rejects it.
    """
    scale = seconds_per_unit(unit)
    if scale is None:
        return None
    cost, _why = cost_of(benchmark, params, None)
    if cost is None:
        return None
    out = {k: np.full(len(values), np.nan) for k in ("tflops", "gbps", "arithmetic_intensity")}
    for i, v in enumerate(values.tolist()):
        if v == v:
            m = compute_metrics(cost, v * scale, None, None)
            for k in out:
                x = getattr(m, k)
                if isinstance(x, (int, float)) and math.isfinite(x):
                    out[k][i] = x
    return out
