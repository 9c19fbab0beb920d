"""Importers for peers' benchmark data, into :mod:`harness.store.results`' model.

- :func:`load_liger_csv` / :func:`load_liger_csvs`: Liger-Kernel's
  ``benchmark/data/all_benchmark_data.csv`` layout (one row per kernel x provider
  x mode x metric x x-value, with p20/p50/p80), one machine per ``gpu_name``;
  costs derived from the kernel configuration where the configuration is
  complete enough (:func:`harness.core.costs.liger_cost`, the cost registry).

A file that cannot be used raises :class:`ImportError_` with a one-line message
naming the file and line; :func:`load_liger_csvs` records it and goes on with the
other files.
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
import re
from pathlib import Path
from typing import Iterable

from harness.core.costs import liger_cost, seconds_per_unit
from harness.core.devices import SPEC_TABLE, lookup_spec
from harness.core.files import open_regular
from harness.store import results as _results

LIGER_COLUMNS = (
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "metric_unit",
    "x_name",
    "x_label",
    "x_value",
    "y_value_50",
    "y_value_20",
    "y_value_80",
    "extra_benchmark_config_str",
    "gpu_name",
    "timestamp",
    "liger_version",
)

_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)")


class ImportError_(ValueError):
    """Input that an importer cannot use; the message names the file and line."""


# --------------------------------------------------------------------------- Liger


def _machine_for_gpu(gpu: str) -> str:
    from harness.core.devices import machine_name_for

    return machine_name_for("liger", "cuda", gpu)


def read_liger_rows(path: str | Path, problems: list[str] | None = None) -> list[dict]:
    """Rows of one Liger benchmark CSV, validated row by row (:func:`harness.core.schema.liger_row`).

    With ``problems`` (a list), a bad row is skipped with one line
    ``"<file>:<line>: <why>; row skipped"`` and the rest of the file is kept; a
    row whose values cannot be a measurement (zero, negative or non-finite
    times, percentiles out of order, a time no GPU kernel can take) is kept
    with ``row["invalid"]`` set to the reason and a line ``"...; kept as an
    invalid point"``. Without ``problems`` the first bad row raises.

    Raises
    ------
    ImportError_
        For the whole file: unreadable, git merge-conflict markers (two
        unresolved versions of the same rows, so no row can be trusted; the
        message names the first marker's line and counts the others), not a
        Liger header, no usable row; and without ``problems``, the first bad row.
    """
    from harness.core import schema
    from harness.core.files import read_text

    path = Path(path)
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportError_(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    markers = [(n, ln) for n, ln in enumerate(lines, start=1) if _CONFLICT.match(ln)]
    if markers:
        lineno, line = markers[0]
        more = f" (and {len(markers) - 1} more, up to line {markers[-1][0]})" if len(markers) > 1 else ""
        raise ImportError_(
            f"{path}:{lineno}: git merge-conflict marker {line.strip()[:40]!r}{more}; the file holds two "
            f"unresolved versions, resolve the conflict before importing"
        )
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise ImportError_(f"{path}: empty file") from None
    missing = [c for c in LIGER_COLUMNS if c not in header]
    if missing:
        raise ImportError_(f"{path}:1: not a Liger benchmark CSV, missing columns {missing}")
    rows = []
    skipped = 0

    def bad(msg: str) -> None:
        nonlocal skipped
        if problems is None:
            raise ImportError_(msg)
        problems.append(msg + "; row skipped")
        skipped += 1

    for fields in reader:
        lineno = reader.line_num
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            bad(f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
            continue
        try:
            r, invalid = schema.liger_row(dict(zip(header, fields)), f"{path}:{lineno}")
        except schema.SchemaError as exc:
            bad(f"{path}:{lineno}: {exc}")
            continue
        r["lineno"] = lineno
        r["invalid"] = invalid
        if invalid and problems is not None:
            problems.append(f"{path}:{lineno}: {invalid}; kept as an invalid point")
        rows.append(r)
    if not rows:
        raise ImportError_(f"{path}: no usable data rows" + (f" ({skipped} skipped, named above)" if skipped else ""))
    return rows


def _fmt_num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def load_liger_csvs(paths: Iterable[str | Path], into: _results.ResultSet | None = None) -> _results.ResultSet:
    """Import Liger benchmark CSVs into a :class:`harness.store.results.ResultSet`.

    Each ``gpu_name`` becomes a machine (``liger-<gpu slug>``, with ``gpu`` in its
    machine info); each ``liger_version`` a pseudo-commit ``liger-v<version>``
    dated by its earliest timestamp; each (kernel, metric, provider, mode,
    x_name, configuration, x value) a series ``liger.<kernel>.<metric>`` with
    the p50 as value and p20/p50/p80, the derived cost and its reason in
    ``Point.record``. Unusable files go to ``errors`` (one line each) and the
    others still import. Duplicate rows keep the last one.
    """
    paths = [Path(p) for p in paths]
    rs = into or _results.ResultSet(results_dir=paths[0].parent if paths else Path("."))
    for path in paths:
        try:
            rows = read_liger_rows(path, rs.errors)
        except ImportError_ as exc:
            rs.errors.append(str(exc))
            continue
        rs.files_loaded += 1
        for r in rows:
            gpu = r["gpu_name"].strip()
            machine = _machine_for_gpu(gpu)
            if machine not in rs.machines and lookup_spec(gpu, warn=False) is None:
                rs.errors.append(
                    f"{path}:{r['lineno']}: unknown GPU {gpu!r} (no datasheet row in "
                    f"harness/data/{SPEC_TABLE.name}): no MFU, no cross-GPU prediction for machine "
                    f"{machine!r}"
                )
            rs.machines.setdefault(machine, {"machine": machine, "gpu": gpu, "source": "liger-csv"})
            commit = f"liger-v{r['liger_version'].strip() or 'unknown'}"
            try:
                ts = _dt.datetime.strptime(r["timestamp"].strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc)
                date_ms = int(ts.timestamp() * 1000)
            except ValueError:
                date_ms = None
            info = rs.commits.get(commit)
            if info is None:
                rs.commits[commit] = _results.CommitInfo(
                    hash=commit, date_ms=date_ms, subject=f"Liger-Kernel {r['liger_version']}"
                )
            elif date_ms is not None and (info.date_ms is None or date_ms < info.date_ms):
                info.date_ms = date_ms
            rs.env_params[(machine, commit)] = {"gpu": gpu, "liger_version": r["liger_version"]}
            kernel, metric, mode = r["kernel_name"], r["metric_name"], r["kernel_operation_mode"]
            params = (
                ("provider", r["kernel_provider"]),
                ("mode", mode),
                *((str(k), str(v)) for k, v in sorted(r["config"].items())),
                (r["x_name"], _fmt_num(r["x_value"])),
            )
            bench = f"liger.{kernel}.{metric}"
            key = _results.SeriesKey(machine=machine, benchmark=bench, params=params, timing=None)
            series = rs.series.get(key)
            unit = r["metric_unit"]
            if series is None:
                series = rs.series[key] = _results.Series(
                    key=key, unit=unit, type="time" if metric == "speed" else metric
                )
            record = {
                "p20": r["y_value_20"],
                "p50": r["y_value_50"],
                "p80": r["y_value_80"],
                "device": {"name": gpu},
                "source": f"{path}:{r['lineno']}",
                "timestamp": r["timestamp"],
            }
            if r["invalid"]:
                # Never a number: not in an average, a plot, a ratio or a percentage of peak.
                record["invalid"] = r["invalid"]
                series.points = [p for p in series.points if p.commit != commit]
                series.points.append(
                    _results.Point(
                        commit=commit,
                        value=None,
                        reason=f"invalid: {r['invalid']}",
                        version=None,
                        env_name=f"liger {r['liger_version']}",
                        record=record,
                    )
                )
                continue
            if metric == "speed":
                cost, why = liger_cost(kernel, mode, r["x_name"], r["x_value"], r["config"])
                record["cost"] = cost.as_dict() if cost else None
                record["cost_reason"] = why
                record["time_s"] = r["y_value_50"] * (seconds_per_unit(unit) or float("nan"))
            series.points = [p for p in series.points if p.commit != commit]
            series.points.append(
                _results.Point(
                    commit=commit,
                    value=r["y_value_50"],
                    version=None,
                    env_name=f"liger {r['liger_version']}",
                    record=record,
                )
            )
    order = {c: i for i, c in enumerate(rs.commit_order())}
    for s in rs.series.values():
        s.points.sort(key=lambda p: order.get(p.commit, math.inf))
    return rs


def find_liger_csvs(folder: str | Path) -> list[Path]:
    """CSV files in ``folder`` (not recursive) whose header is Liger's, and any
    ``*.csv`` that cannot be read at all (a FIFO, a folder, no permission, not
    UTF-8): those go to :func:`load_liger_csvs`, which reports each with its path
    and reason instead of the file vanishing without a word. A readable CSV with
    another header is not Liger's and is left out."""
    out = []
    for p in sorted(Path(folder).glob("*.csv")):
        try:
            with open_regular(p) as fh:
                head = fh.readline()
        except (OSError, UnicodeDecodeError):
            out.append(p)
            continue
        if all(c in head for c in ("kernel_name", "kernel_provider", "y_value_50")):
            out.append(p)
    return out
