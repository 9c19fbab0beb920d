"""Importers for peers' benchmark data, into :mod:`harness.store.results`' model.

- :func:`load_liger_csv` / :func:`load_liger_csvs`: Liger-Kernel's
  ``benchmark/data/all_benchmark_data.csv`` layout (one row per kernel x provider
  x mode x metric x x-value, with p20/p50/p80), one machine per ``gpu_name``;
  costs derived from the kernel configuration where the configuration is
  complete enough (:func:`harness.core.costs.liger_cost`, the cost registry);
  repeated runs of a case at one version are one point with one sample per run.

A file that cannot be used raises :class:`ImportError_` with a one-line message
naming the file and line; :func:`load_liger_csvs` records it and goes on with the
other files.
"""

from __future__ import annotations

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


#: A byte that was not UTF-8, as ``surrogateescape`` decodes it (U+DC80..U+DCFF).
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _liger_lines(path: Path) -> tuple[list[str], bool]:
    """The lines of a Liger CSV (bounded: :func:`harness.core.files.read_csv_text`)
    and whether some byte was not UTF-8 (then kept as :data:`_NOT_UTF8`);
    :class:`ImportError_` when unreadable or holding git merge-conflict markers."""
    from harness.core import files

    lossy = False
    try:
        text = files.read_csv_text(path)
    except UnicodeDecodeError as exc:
        # One byte that is not UTF-8 (a cp1252 "é" in a GPU name) lost every row of the
        # file (hostile trial round 7): past a readable header, such rows are skipped by
        # line (:data:`_NOT_UTF8`); a header that is not UTF-8 (UTF-16) refuses the file.
        text = files.read_bytes(path, files.MAX_CSV_BYTES, "MAX_CSV_BYTES").decode("utf-8-sig", "surrogateescape")
        if _NOT_UTF8.search(text.split("\n", 1)[0]):
            raise ImportError_(f"{path}: cannot read ({exc})") from None
        lossy = True
    except (OSError, ValueError) as exc:  # InputLimitError
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
    return lines, lossy


def _over_row_limit(path: Path, lineno: int, problems: list[str] | None) -> None:
    """Say that ``path`` has more than :data:`harness.core.files.MAX_CSV_ROWS` data rows
    (a line in ``problems``), or raise :class:`ImportError_` without ``problems``."""
    from harness.core import files

    msg = (
        f"{path}:{lineno}: more than {files.MAX_CSV_ROWS:,} data rows, the limit MAX_CSV_ROWS "
        f"(harness/core/files.py); this row and the rest of the file skipped, the first "
        f"{files.MAX_CSV_ROWS:,} kept (split the file to import all of it)"
    )
    if problems is None:
        raise ImportError_(msg)
    problems.append(msg)


def read_liger_rows(path: str | Path, problems: list[str] | None = None) -> list[dict]:
    """Rows of one Liger benchmark CSV, validated row by row (:func:`harness.core.schema.liger_row`).

    With ``problems`` (a list), a bad row is skipped with one line
    ``"<file>:<line>: <why>; row skipped"`` and the rest of the file is kept; a
    row whose values cannot be a measurement (zero, negative or non-finite
    times, percentiles out of order, a time no GPU kernel can take) is kept
    with ``row["invalid"]`` set to the reason and a line ``"...; kept as an
    invalid point"``. Without ``problems`` the first bad row raises. An
    ``x_value`` that names a case (:func:`_is_x_name`: ``llama_3_8b``) is kept
    as that string; any other non-number is a bad row.

    Raises
    ------
    ImportError_
        For the whole file: unreadable, git merge-conflict markers (two
        unresolved versions of the same rows, so no row can be trusted; the
        message names the first marker's line and counts the others), not a
        Liger header, no usable row; without ``problems``, the first bad row (or past ``MAX_CSV_ROWS``).
    """
    from harness.core import files, schema

    path = Path(path)
    row_errors: list[str] = []
    lines, lossy = _liger_lines(path)
    reader = files.csv_rows(lines, str(path), row_errors)
    header = _liger_header(path, reader, row_errors)
    rows = []
    skipped = 0

    def bad(msg: str) -> None:
        nonlocal skipped
        if problems is None:
            raise ImportError_(msg)
        problems.append(msg + "; row skipped")
        skipped += 1

    def flush() -> None:  # a field over the limit, a CSV error: that row only
        for msg in row_errors:
            bad(msg.removesuffix("; row skipped"))
        row_errors.clear()

    for lineno, fields in reader:
        flush()
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(rows) + skipped >= files.MAX_CSV_ROWS:
            _over_row_limit(path, lineno, problems)
            break
        if len(fields) != len(header):
            bad(f"{path}:{lineno}: {len(fields)} fields, header has {len(header)}")
            continue
        why = _not_utf8(header, fields) if lossy else None  # only a file the lossy decode read
        if why:
            bad(f"{path}:{lineno}: {why}")
            continue
        if [f.strip() for f in fields] == [h.strip() for h in header]:
            # two CSVs joined with `cat`: was "extra_benchmark_config_str is not JSON" (round 6, S-h)
            bad(f"{path}:{lineno}: repeats the header row (files joined?)")
            continue
        cells = dict(zip(header, fields))
        name = cells["x_value"].strip()
        name = name if _is_x_name(name) else None
        try:
            # A named x value is checked as any number would be; the name is put back after.
            r, invalid = schema.liger_row(dict(cells, x_value="0") if name else cells, f"{path}:{lineno}")
        except schema.SchemaError as exc:
            bad(f"{path}:{lineno}: {exc}")
            continue
        if name:
            r["x_value"] = name
        r["lineno"] = lineno
        r["invalid"] = invalid
        if invalid and problems is not None:
            problems.append(f"{path}:{lineno}: {invalid}; kept as an invalid point")
        rows.append(r)
    flush()
    if not rows:
        raise ImportError_(f"{path}: no usable data rows" + (f" ({skipped} skipped, named above)" if skipped else ""))
    return rows


def _not_utf8(header: list[str], fields: list[str]) -> str | None:
    """The first column of a row holding a byte that was not UTF-8, named with the byte."""
    for h, f in zip(header, fields):
        m = _NOT_UTF8.search(f)
        if m:
            return f"column {h} is not UTF-8 text (byte 0x{m.group().encode('utf-8', 'surrogateescape').hex()})"
    return None


def _liger_header(path: Path, reader, row_errors: list[str]) -> list[str]:
    """The header row of a Liger CSV from ``reader``, or :class:`ImportError_` for
    the whole file: empty, the header over a limit, a Liger column missing, or a
    column named twice (a row would keep only the later cell, so which holds the
    measurement cannot be told: hostile trial round 6, FL1)."""
    try:
        _, header = next(reader)
    except StopIteration:
        header = None
    if row_errors or header is None:  # the header row itself over a limit: no column can be trusted
        raise ImportError_(row_errors[0].removesuffix("; row skipped") if row_errors else f"{path}: empty file")
    missing = [c for c in LIGER_COLUMNS if c not in header]
    if missing:
        raise ImportError_(f"{path}:1: not a Liger benchmark CSV, missing columns {missing}")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise ImportError_(f"{path}:1: the header names column(s) {twice} more than once; which one to read is unknown")
    return header


def _fmt_num(v: float | str) -> str:
    if isinstance(v, str):  # a categorical x value (a model or configuration name)
        return v
    return str(int(v)) if float(v).is_integer() else repr(v)


def _is_x_name(text: str) -> bool:
    """A Liger x value that names a case (``llama_3_8b``, ``gpt2``, ``qwen2.5-7b``)
    rather than sizing it: letters first, then letters, digits, ``_``, ``.``, ``-``,
    with at least one digit or ``_``. Why not every word: a bare word (``abc``,
    ``hidden``) in x_value is the shape of a column typed or shifted by hand,
    and stays a bad row named by line; ``nan``/``inf`` are numbers, refused as
    not finite by :func:`harness.core.schema.liger_row`."""
    return bool(_X_NAME.fullmatch(text)) and any(c.isdigit() or c == "_" for c in text)


_X_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")


def _liger_run(r: dict, path: Path) -> dict:
    """One run of one case (one CSV row) as kept in the point's record."""
    run = {
        "timestamp": r["timestamp"].strip(),
        "p20": r["y_value_20"],
        "p50": r["y_value_50"],
        "p80": r["y_value_80"],
        "source": f"{path}:{r['lineno']}",
    }
    if r["invalid"]:
        run["invalid"] = r["invalid"]
    return run


def _liger_point(commit: str, runs: list[dict], r: dict, metric: str, unit: str) -> _results.Point:
    """The point of one case at one Liger version from its runs (rows at
    distinct timestamps, oldest first; ``r`` is the newest row, for the case).

    - ``value``: the median of the valid runs' ``y_value_50`` (the series' unit);
    - ``samples``: those runs' ``y_value_50``, one per run, oldest first, so
      ``len(samples)`` is the number of runs (1 for a single run);
    - ``ci``: not asv's 99% CI of the median but the envelope of the valid
      runs' p20..p80 (lowest ``y_value_20``, highest ``y_value_80``): it holds
      every run's median and each run's own spread, so read as a noise floor it
      is the cautious side; equal ends (the GPU timer's resolution) mean no
      spread was seen;
    - ``record``: ``p20``/``p50``/``p80`` the medians over the valid runs,
      every run in ``runs`` (timestamp, percentiles, ``file:line``, ``invalid``),
      ``source`` and ``timestamp`` of the newest run, cost and ``time_s`` of
      ``value`` for speed rows.

    An invalid run (zero, negative, impossible time) is never a sample; when
    every run is invalid the point has no value and the newest run's reason.
    """
    import statistics

    good = [x for x in runs if "invalid" not in x]
    newest = runs[-1]
    record = {"device": {"name": r["gpu_name"].strip()}, "source": newest["source"], "timestamp": newest["timestamp"]}
    record["runs"] = runs
    if not good:
        # Never a number: not in an average, a plot, a ratio or a percentage of peak.
        record["invalid"] = newest["invalid"]
        return _results.Point(commit=commit, value=None, reason=f"invalid: {newest['invalid']}", record=record)
    p50s = [x["p50"] for x in good]
    value = statistics.median(p50s)
    record.update(
        p20=statistics.median(x["p20"] for x in good), p50=value, p80=statistics.median(x["p80"] for x in good)
    )
    if metric == "speed":
        kernel, mode, x = r["kernel_name"], r["kernel_operation_mode"], r["x_value"]
        if isinstance(x, str):
            cost, why = None, f"{kernel}: x value {x!r} is a name, not a size: no cost derived"
        else:
            cost, why = liger_cost(kernel, mode, r["x_name"], x, r["config"])
        record["cost"] = cost.as_dict() if cost else None
        record["cost_reason"] = why
        record["time_s"] = value * (seconds_per_unit(unit) or float("nan"))
    return _results.Point(
        commit=commit,
        value=value,
        ci=(min(x["p20"] for x in good), max(x["p80"] for x in good)),
        samples=p50s,
        record=record,
    )


def load_liger_csvs(paths: Iterable[str | Path], into: _results.ResultSet | None = None) -> _results.ResultSet:
    """Import Liger benchmark CSVs into a :class:`harness.store.results.ResultSet`.

    Each ``gpu_name`` becomes a machine (``liger-<gpu slug>``, with ``gpu`` in its
    machine info); each ``liger_version`` a pseudo-commit ``liger-v<version>``
    dated by its earliest timestamp; each (kernel, metric, provider, mode,
    x_name, configuration, x value) a series ``liger.<kernel>.<metric>``. An x
    value that is a name (:func:`_is_x_name`) is a string parameter value; a
    number stays a number (its parameter spelled ``1024``, the cost sized by it).

    Repeated runs are samples: the rows of one case and version at distinct
    ``timestamp`` values (Liger's benchmark scripts append one row per case per
    run, over every file given) are one point, built by :func:`_liger_point`
    (value the median of the runs' p50, samples one p50 per run). Rows of one
    case, version and timestamp are one run: the last row wins, and when its
    value differs from the row it replaces, a warning names both rows. A row
    with an empty ``liger_version`` is grouped as ``liger-vunknown``, with one
    warning per file naming its rows. The version is
    the code under test (the commit), not the environment: points carry no
    ``env_name``, so a version boundary is not read as an environment change.
    Unusable files go to ``errors`` (one line each) and the others still import.
    """
    paths = [Path(p) for p in paths]
    rs = into or _results.ResultSet(results_dir=paths[0].parent if paths else Path("."))
    runs: dict[tuple, dict[str, tuple[dict, dict]]] = {}  # (series key, commit) -> timestamp -> (row, run)
    for path in paths:
        try:
            rows = read_liger_rows(path, rs.errors)
        except ImportError_ as exc:
            rs.errors.append(str(exc))
            continue
        rs.files_loaded += 1
        no_version = []
        converted: dict[tuple[str, str], list[int]] = {}
        undated: list[int] = []
        for r in rows:
            if _liger_date_ms(r) is None:
                undated.append(r["lineno"])
            key, commit = _liger_place(rs, path, r)
            unit = rs.series[key].unit
            if r["metric_unit"] != unit:
                factor = _unit_factor(r["metric_unit"], unit)
                if factor is None:
                    rs.errors.append(
                        f"{path}:{r['lineno']}: unit {r['metric_unit']!r}, but this case's earlier rows are in "
                        f"{unit!r}; not convertible, row skipped"
                    )
                    continue
                converted.setdefault((r["metric_unit"], unit), []).append(r["lineno"])
                r = dict(r, metric_unit=unit, **{c: r[c] * factor for c in ("y_value_20", "y_value_50", "y_value_80")})
            if not r["liger_version"].strip():
                no_version.append(r["lineno"])
            slot = runs.setdefault((key, commit), {})
            ts = r["timestamp"].strip()
            old = slot.get(ts)
            if old is not None and old[0]["y_value_50"] != r["y_value_50"]:
                rs.errors.append(
                    f"{path}:{r['lineno']}: same case, version and timestamp as row {old[0]['lineno']} with another "
                    f"value ({r['y_value_50']!r} against {old[0]['y_value_50']!r}); the later row is kept"
                )
            slot[ts] = (r, _liger_run(r, path))
        if undated:
            shown = ", ".join(str(n) for n in undated[:5]) + (" ..." if len(undated) > 5 else "")
            rs.errors.append(
                f"{path}: {len(undated)} row(s) whose timestamp is not 'YYYY-MM-DD HH:MM:SS' (rows {shown}): "
                "kept, undated; their version is dated by its other rows, and runs of one version with "
                "such timestamps may be ordered wrongly"
            )
        for (was, unit), lines in converted.items():
            shown = ", ".join(str(n) for n in lines[:5]) + (" ..." if len(lines) > 5 else "")
            rs.errors.append(
                f"{path}: {len(lines)} row(s) in {was!r} where their case's first row is in {unit!r} "
                f"(rows {shown}): converted to {unit!r}"
            )
        if no_version:
            shown = ", ".join(str(n) for n in no_version[:5]) + (" ..." if len(no_version) > 5 else "")
            rs.errors.append(
                f"{path}: {len(no_version)} row(s) with an empty liger_version (rows {shown}): grouped as "
                f"'liger-vunknown', whose runs may be of several versions"
            )
    for (key, commit), by_ts in runs.items():
        series = rs.series[key]
        newest = by_ts[max(by_ts)][0]  # "%Y-%m-%d %H:%M:%S": text order is time order
        series.points.append(
            _liger_point(commit, [by_ts[t][1] for t in sorted(by_ts)], newest, newest["metric_name"], series.unit)
        )
    order = {c: i for i, c in enumerate(rs.commit_order())}
    for s in rs.series.values():
        s.points.sort(key=lambda p: order.get(p.commit, math.inf))
    return rs


def _liger_date_ms(r: dict) -> int | None:
    """The row's ``timestamp`` (Liger writes ``%Y-%m-%d %H:%M:%S``, UTC) in epoch
    milliseconds; ``None`` when it is not one (named per file by the loader)."""
    try:
        ts = _dt.datetime.strptime(r["timestamp"].strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return int(ts.timestamp() * 1000)


def _unit_factor(unit: str, into: str) -> float | None:
    """What a value in ``unit`` is multiplied by to be in ``into`` (both time
    units, :func:`harness.core.costs.seconds_per_unit`), ``None`` otherwise: one
    case measured in ``ms`` in one version and ``s`` in the next was read as a
    1000x change (hostile trial round 6)."""
    a, b = seconds_per_unit(unit), seconds_per_unit(into)
    return a / b if a and b else None


def _liger_place(rs: _results.ResultSet, path: Path, r: dict) -> tuple[_results.SeriesKey, str]:
    """The machine, pseudo-commit and series of one Liger row, registered in ``rs``."""
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
    date_ms = _liger_date_ms(r)
    info = rs.commits.get(commit)
    if info is None:
        rs.commits[commit] = _results.CommitInfo(
            hash=commit, date_ms=date_ms, subject=f"Liger-Kernel {r['liger_version']}"
        )
    elif date_ms is not None and (info.date_ms is None or date_ms < info.date_ms):
        info.date_ms = date_ms
    rs.env_params[(machine, commit)] = {"gpu": gpu, "liger_version": r["liger_version"]}
    metric = r["metric_name"]
    params = (
        ("provider", r["kernel_provider"]),
        ("mode", r["kernel_operation_mode"]),
        *((str(k), str(v)) for k, v in sorted(r["config"].items())),
        (r["x_name"], _fmt_num(r["x_value"])),
    )
    key = _results.SeriesKey(
        machine=machine, benchmark=f"liger.{r['kernel_name']}.{metric}", params=params, timing=None
    )
    if key not in rs.series:
        rs.series[key] = _results.Series(key=key, unit=r["metric_unit"], type="time" if metric == "speed" else metric)
    return key, commit


def find_liger_csvs(folder: str | Path) -> list[Path]:
    """CSV files in ``folder`` (not recursive) whose header is Liger's, and any
    ``*.csv`` that cannot be read at all (a FIFO, a folder, no permission, not
    UTF-8): those go to :func:`load_liger_csvs`, which reports each with its path
    and reason instead of the file vanishing without a word. A readable CSV with
    another header is not Liger's and is left out."""
    out = []
    for p in sorted(Path(folder).glob("*.csv")):
        try:
            with open_regular(p, encoding="utf-8-sig") as fh:
                head = fh.readline()
        except (OSError, UnicodeDecodeError):
            out.append(p)
            continue
        if all(c in head for c in ("kernel_name", "kernel_provider", "y_value_50")):
            out.append(p)
    return out
