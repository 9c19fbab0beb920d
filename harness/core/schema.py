"""Type and schema validation of every input file, in one place (issue 14).

Each reader calls one function here *before* it uses a file's content:

========================  ===================================================
:func:`machine_json`      ``<results>/<machine>/machine.json`` (asv)
:func:`benchmarks_json`   ``<results>/benchmarks.json`` (asv, version 2)
:func:`results_file`      ``<results>/<machine>/<sha8>-<env>.json`` (asv v1/v2;
                          v1 already migrated in memory by asv's own code)
:func:`record`            one line of ``<machine>/kernelwatch/<commit>.jsonl``
:func:`liger_row`         one data row of a Liger-Kernel benchmark CSV
========================  ===================================================

Rules: a file whose top level is wrong (not an object, unknown version, a
required key missing or of the wrong type) raises :class:`SchemaError` with a
one-line message naming the file and the field; the caller skips that file and
goes on. An entry inside a file that is wrong (one benchmark of
``benchmarks.json``, one result row, one CSV row) is dropped from what is
returned, and one line naming the file, the entry and the field goes into
``problems``; the rest of the file is used.

Scope: *types and shapes* only (is ``unit`` a string, are ``params`` a list of
lists of strings, is a time a finite number). Whether a value is *plausible*
(faster than the device's peak allows, an MFU above what the field measures)
is decided where records are turned into figures (``harness.core.metrics`` /
``harness.store.dataset``), not here. One exception, documented at :func:`liger_row`:
a Liger time that no GPU kernel can take is invalid at import, because the
importer has no device model to defer it to.

Why our own code: asv validates only ``version`` (``asv.util.load_json``) and
its loaders fail with a ``KeyError``/``AttributeError`` on the first wrong
type; ``jsonschema`` would add a dependency and still leave the per-row
messages and the skip-and-continue policy to us.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from harness.core import files as _files

#: asv's ``benchmarks.json`` API version (``asv.benchmarks.Benchmarks.api_version``).
BENCHMARKS_JSON_VERSIONS = (2,)
#: asv's results file versions kernelwatch reads (1 is migrated with asv's own code).
RESULTS_VERSIONS = (1, 2)
#: asv's ``machine.json`` API version (``asv.machine.Machine.api_version``).
MACHINE_JSON_VERSIONS = (1,)

#: A commit hash: hex, at least git's default abbreviation (7) and at most SHA-256's 64
#: digits. "abcd" or "1e999" names no commit anyone can find (issue 29 S7).
MIN_HASH_LEN = 7
_HEX = re.compile(r"[0-9a-fA-F]{%d,64}" % MIN_HASH_LEN)
_RESULT_COLUMNS = frozenset({"result", "params", "version", "started_at", "duration", "samples", "profile"})


class SchemaError(ValueError):
    """A file (or entry) of the wrong shape; the message names the file and the field."""


def _tname(v) -> str:
    return "null" if v is None else type(v).__name__


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: Element types of a value list that needs no per-value check: floats (never
#: beyond float range) and nulls. ``set(map(type, v)) <= _PLAIN`` is the fast
#: path of the loader's per-row checks (a tenth of their cost on asv's lists).
_PLAIN = frozenset({float, type(None)})
#: With ints too: then one ``min``/``max`` over the list tells whether any is beyond float range.
_NUMERIC = frozenset({int, float, type(None)})


#: Dates asv stores are milliseconds since 1970 (``date``, ``started_at``); one outside
#: 1970-01-01..2100-01-01 (``-1``, ``1e308``, ``NaN``) is impossible for a commit or a run.
EPOCH_MS_MIN = 0
#: A commit ``date`` before 1990-01-01 (``0``, ``3.5``) is a placeholder, not a date: git
#: (2005), asv (2013) and CUDA (2007) are all later (issue 29 S7). Only the date is lost.
#: ``started_at`` keeps :data:`EPOCH_MS_MIN` (a wrong one loses its row, and tools write 0).
COMMIT_DATE_MS_MIN = 631_152_000_000  # 1990-01-01T00:00:00Z
EPOCH_MS_MAX = 4_102_444_800_000  # 2100-01-01T00:00:00Z


def date_ms_problem(v, min_ms: float = EPOCH_MS_MIN) -> str | None:
    """Why a number cannot be an asv date in ms since 1970 (``None`` when it can):
    beyond float range, not finite, or outside ``min_ms``..:data:`EPOCH_MS_MAX`
    (:data:`EPOCH_MS_MIN`, 1970, by default; :data:`COMMIT_DATE_MS_MIN`, 1990, for a
    commit's ``date``)."""
    if _beyond_float(v):
        return f"{_short(v)} is beyond float range"
    if not math.isfinite(v):
        return f"{v!r} is not a finite number"
    if not min_ms <= v <= EPOCH_MS_MAX:
        first = "1990-01-01" if min_ms == COMMIT_DATE_MS_MIN else "1970-01-01"
        return f"{v!r:.30} ms is outside {first}..2100-01-01"
    return None


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# ----------------------------------------------------------------------------- asv files


def machine_json(data, path: Path | str) -> dict:
    """Validate an asv ``machine.json``: an object whose ``machine`` (if present) is
    a non-empty string and whose ``version`` (if present) is one asv wrote.

    Returns the object. Raises :class:`SchemaError`."""
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected a JSON object, got {_tname(data)}")
    name = data.get("machine")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise SchemaError(f"{path}: field 'machine' must be a non-empty string, got {_tname(name)} {name!r:.40}")
    ver = data.get("version")
    if ver is not None and ver not in MACHINE_JSON_VERSIONS:
        raise SchemaError(
            f"{path}: field 'version' {ver!r:.20} is not a machine.json version this kernelwatch "
            f"reads ({', '.join(map(str, MACHINE_JSON_VERSIONS))})"
        )
    return data


def benchmarks_json(data, path: Path | str, problems: list[str]) -> dict[str, dict]:
    """Validate an asv ``benchmarks.json``; returns ``{name: metadata}`` of the usable entries.

    Per entry: an object; ``params`` a list of lists of strings (asv stores reprs);
    ``param_names`` a list of strings, one per parameter list; ``unit``, ``type``,
    ``version`` strings when present (``unit``/``type`` may be ``null``). A bad
    entry is left out with a line in ``problems`` (then units and parameter names
    of that benchmark fall back as for a missing file).

    Raises
    ------
    SchemaError
        Not an object, or a ``version`` other than asv's 2.
    """
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected a JSON object, got {_tname(data)}")
    ver = data.get("version")
    if ver not in BENCHMARKS_JSON_VERSIONS:
        raise SchemaError(
            f"{path}: field 'version' {ver!r:.20} is not a benchmarks.json version this "
            f"kernelwatch reads ({', '.join(map(str, BENCHMARKS_JSON_VERSIONS))})"
        )
    out, declared = {}, 0
    for name, meta in data.items():
        if name == "version":
            continue
        if len(name) > _files.MAX_NAME_CHARS:
            problems.append(f"{path}: {name_problem(name)}; its metadata is ignored")
            continue
        where = f"{path}: benchmark {name}"
        if not isinstance(meta, dict):
            problems.append(f"{where}: entry is {_tname(meta)}, not an object; its metadata is ignored")
            continue
        why = _benchmark_meta_problem(meta, declared)
        if why:
            problems.append(f"{where}: {why}; its metadata is ignored (units and parameter names fall back)")
            continue
        declared += _grid_points(meta.get("params"))
        out[name] = meta
    return out


def name_problem(name: str, what: str = "benchmark name") -> str:
    """Why a name (``what``: a benchmark name, a Liger name column) is refused:
    longer than :data:`harness.core.files.MAX_NAME_CHARS`; the message shows only its start."""
    return (
        f"{what} of {len(name):,} characters ({name[:60]!r}...) is over the limit "
        f"MAX_NAME_CHARS={_files.MAX_NAME_CHARS:,} (harness/core/files.py)"
    )


def _benchmark_meta_problem(meta: dict, declared_before: int = 0) -> str | None:
    params = meta.get("params", [])
    if params is None:
        params = []
    if not isinstance(params, list) or not all(_str_list(axis) for axis in params):
        return f"field 'params' must be a list of lists of strings, got {_tname(params)} {str(params)[:40]!r}"
    grid = _grid_problem(params, declared_before)
    if grid:
        return grid
    names = meta.get("param_names", None)
    if names is not None:
        if not _str_list(names):
            return f"field 'param_names' must be a list of strings, got {_tname(names)} {str(names)[:40]!r}"
        if params and len(names) != len(params):
            return f"field 'param_names' has {len(names)} names for {len(params)} parameter lists"
    for key in ("unit", "type"):
        v = meta.get(key)
        if v is not None and not isinstance(v, str):
            return f"field {key!r} must be a string, got {_tname(v)} {v!r:.40}"
    v = meta.get("version")
    if v is not None and not isinstance(v, str):
        return f"field 'version' must be a string, got {_tname(v)}"
    v = meta.get("name")
    if v is not None and not isinstance(v, str):
        return f"field 'name' must be a string, got {_tname(v)}"
    return None


#: Top-level fields of a format-2 results file and their types (asv.results.Results.save).
_RESULTS_FIELDS = {
    "commit_hash": (str,),
    "date": (int, float),
    "env_name": (str,),
    "python": (str,),
    "params": (dict,),
    "requirements": (dict,),
    "result_columns": (list,),
    "results": (dict,),
}


def results_file(raw, path: Path | str, problems: list[str]) -> dict:
    """Validate one asv results file (format 2, after asv's migration of v1).

    File level (raises :class:`SchemaError`): an object; every field of
    ``_RESULTS_FIELDS`` present with its type (``date`` a number or ``null``, not a boolean;
    a ``date`` of the wrong type or outside 1990..2100, :func:`date_ms_problem`, is a line in
    ``problems`` and the date is treated as unknown, the file's results kept);
    ``commit_hash`` 7 to 64 hex digits (:data:`MIN_HASH_LEN`); ``result_columns`` known column names, ``result`` among them; ``params``
    values scalars. Row level (the row is dropped, a line in ``problems`` names
    file, benchmark and field): a row that is not a list, or one too short to hold
    its ``result`` and ``params`` entries (``[]``); a ``params`` column
    that is not a list of lists of strings; a ``result`` that is neither a
    number, ``null`` nor a list of numbers/``null``; ``version`` not a string;
    ``started_at``/``duration`` not numbers, ``started_at`` outside 1970..2100,
    ``duration`` negative or not finite; ``samples`` not a list, or not one list
    (or ``null``) per parameter combination (a flat list of numbers, issue 29 F2).
    An integer beyond float range (``10**400``) in ``result`` or a ``stats_*``
    column loses only that value (a line in ``problems``, :func:`_clean_result_values`).

    Returns ``raw`` with only the usable rows in ``results``.
    """
    if not isinstance(raw, dict):
        raise SchemaError(f"{path}: expected a JSON object, got {_tname(raw)}")
    for key, types in _RESULTS_FIELDS.items():
        if key not in raw:
            raise SchemaError(f"{path}: missing field {key!r}")
        v = raw[key]
        if key == "date" and (v is None or not _is_num(v) or date_ms_problem(v, COMMIT_DATE_MS_MIN)):
            # unknown commit date: the commit is ordered by history only; a wrong-typed
            # or impossible date loses only the date, never the file's results
            if v is not None:
                why = date_ms_problem(v, COMMIT_DATE_MS_MIN) if _is_num(v) else f"got {_tname(v)} {str(v)[:40]!r}"
                problems.append(
                    f"{path}: field 'date' must be a date in ms since 1970 (1990..2100) or null, {why}; "
                    "date treated as unknown (the commit is placed by git history, or last)"
                )
                raw = dict(raw, date=None)
            continue
        if not isinstance(v, types) or isinstance(v, bool):
            raise SchemaError(
                f"{path}: field {key!r} must be {' or '.join(t.__name__ for t in types)}, "
                f"got {_tname(v)} {str(v)[:40]!r}"
            )
    if not _HEX.fullmatch(raw["commit_hash"]):
        # The hash names output files (commit pages): never let it be a path.
        raise SchemaError(
            f"{path}: field 'commit_hash' {raw['commit_hash'][:60]!r} is not a hex string "
            f"of {MIN_HASH_LEN} to 64 digits (a commit hash)"
        )
    cols = raw["result_columns"]
    for c in cols:
        if not isinstance(c, str):
            raise SchemaError(f"{path}: field 'result_columns' has a column that is not a name: {c!r:.40}")
        if c not in _RESULT_COLUMNS and not c.startswith("stats_"):
            # a column a newer asv may add: its cells are not read, the file is kept (it
            # lost the whole file, so the whole history, before: hostile trial round 7)
            problems.append(f"{path}: field 'result_columns' has an unknown column {c[:40]!r}; its values are ignored")
    if "result" not in cols:
        # no row of such a file holds a value: loading it would make series of nothing (h29t S6)
        raise SchemaError(
            f"{path}: field 'result_columns' {str(cols)[:60]} has no 'result' column, so no row holds a value"
        )
    for k, v in raw["params"].items():
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise SchemaError(f"{path}: field 'params.{k}' must be a scalar, got {_tname(v)}")
    col = {c: i for i, c in enumerate(cols)}
    good, cleaned, declared = {}, False, 0
    for name, row in raw["results"].items():
        if len(name) > _files.MAX_NAME_CHARS:
            problems.append(f"{path}: {name_problem(name)}; row skipped")
            continue
        i = col.get("params")
        params = row[i] if isinstance(row, list) and i is not None and i < len(row) else None
        grid = _grid_problem(params, declared)
        if grid:
            problems.append(f"{path}: benchmark {name}: {grid}; row skipped")
            continue
        declared += _grid_points(params)
        clean = _clean_result_values(row, col, f"{path}: benchmark {name}", problems)
        cleaned |= clean is not row
        why = _row_problem(clean, col)
        if why:
            problems.append(f"{path}: benchmark {name}: {why}; row skipped")
            continue
        good[name] = clean
    if cleaned or len(good) != len(raw["results"]):
        raw = dict(raw, results=good)
    return raw


#: The largest magnitude a float64 holds (``sys.float_info.max``); JSON allows an
#: integer of any length (``10**400``), which ``float()`` cannot convert.
_FLOAT_MAX = 1.7976931348623157e308


def _beyond_float(x) -> bool:
    """An integer too large for a float64 (comparing an int with a float is exact in Python)."""
    return type(x) is int and not -_FLOAT_MAX <= x <= _FLOAT_MAX


def _value_columns(col: dict) -> list[str]:
    return ["result"] + [c for c in col if c.startswith("stats_")]


def _clean_result_values(row, col: dict, where: str, problems: list[str]):
    """``row`` with each value of its ``result`` list that is neither a number
    nor null replaced by null (that point then counts as failed), one problem
    line naming them: a wrong-typed value loses its own point, not the
    benchmark's other parameter combinations. The same for an integer beyond
    float range (``10**400``, valid JSON) in ``result`` (a bare one too) or a
    ``stats_*`` column (that statistic becomes unknown), issue 29 F1."""
    if not isinstance(row, list):
        return row
    out = row
    for name in _value_columns(col):
        i = col.get(name)
        if i is None or i >= len(row):
            continue
        v = row[i]
        if name == "result" and _beyond_float(v):
            problems.append(f"{where}: field 'result' is {_short(v)}, beyond float range; that point counts as failed")
            out = list(out) if out is row else out
            out[i] = None
            continue
        if not isinstance(v, list):
            continue
        types = set(map(type, v))
        if types <= _PLAIN or (name != "result" and int not in types):
            continue  # nothing to clean: floats and nulls (and, in stats, no int)
        if types <= _NUMERIC:  # ints and floats, no bool: one C pass for the range (a NaN can only send it on)
            nums = v if type(None) not in types else [x for x in v if x is not None]
            if nums and -_FLOAT_MAX <= min(nums) and max(nums) <= _FLOAT_MAX:
                continue
        if name == "result":
            bad = {k for k, x in enumerate(v) if not (x is None or _is_num(x)) or _beyond_float(x)}
        else:
            bad = {k for k, x in enumerate(v) if _beyond_float(x)}
        if not bad:
            continue
        first = min(bad)
        x = v[first]
        what = f"{_tname(x)} {x!r:.30}" if not _beyond_float(x) else f"{_short(x)}, beyond float range"
        loses = "those points count as failed" if name == "result" else "that statistic of those points is unknown"
        problems.append(
            f"{where}: {len(bad)} value(s) of field {name!r} are not numbers a float holds (value {first} "
            f"holds {what}); {loses}, the other {len(v) - len(bad)} are kept"
        )
        out = list(out) if out is row else out
        out[i] = [None if k in bad else x for k, x in enumerate(v)]
    return out


def _grid_points(params) -> int:
    """Parameter combinations a declared grid (a list of axes) expands to, counted
    without expanding (``math.prod`` of the axis lengths); 1 for no grid or a
    grid of the wrong type (the type check names that)."""
    if not isinstance(params, list) or not all(isinstance(a, list) for a in params):
        return 1
    return math.prod(len(a) for a in params)


def _grid_problem(params, declared_before: int = 0) -> str | None:
    """Why a declared parameter grid is too large to expand into points: more than
    :data:`harness.core.files.MAX_GRID_POINTS` combinations, or, with the
    ``declared_before`` combinations of the file's earlier rows, more than
    :data:`harness.core.files.MAX_FILE_GRID_POINTS`. Costs nothing to refuse a
    row declaring 10^9 combinations. ``None`` when within both limits."""
    n = _grid_points(params)
    if n > _files.MAX_GRID_POINTS:
        return (
            f"field 'params' declares {n:,} parameter combinations, over the limit "
            f"MAX_GRID_POINTS={_files.MAX_GRID_POINTS:,} (harness/core/files.py)"
        )
    if declared_before + n > _files.MAX_FILE_GRID_POINTS:
        return (
            f"field 'params' declares {n:,} parameter combinations, which with the {declared_before:,} "
            f"of the file's earlier rows is over the per-file limit "
            f"MAX_FILE_GRID_POINTS={_files.MAX_FILE_GRID_POINTS:,} (harness/core/files.py)"
        )
    return None


def _row_problem(row, col: dict) -> str | None:
    if not isinstance(row, list):
        return f"row is {_tname(row)}, not a list"
    # asv writes every column in every row; one cut before its 'result' or 'params'
    # entry has no value, or values of no known parameter combination (h29t S6)
    need = max(col[c] for c in ("result", "params") if c in col) + 1
    if len(row) < need:
        missing = [c for c in ("result", "params") if c in col and col[c] >= len(row)]
        return (
            f"row has {len(row)} of the {len(col)} entries of 'result_columns', "
            f"no {' and no '.join(repr(c) for c in missing)}"
        )

    def at(name):
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else None

    params = at("params")
    if params is not None and (not isinstance(params, list) or not all(_str_list(a) for a in params)):
        return f"field 'params' must be a list of lists of strings, got {_tname(params)} {str(params)[:40]!r}"
    n = 1
    for axis in params or []:
        n *= len(axis)
    result = at("result")
    if isinstance(result, list):
        if not set(map(type, result)) <= _PLAIN and not all(x is None or _is_num(x) for x in result):
            bad = next(x for x in result if not (x is None or _is_num(x)))
            return f"field 'result' holds {_tname(bad)} {bad!r:.30}, not a number or null"
        if params and len(result) != n:
            return f"field 'result' has {len(result)} values for {n} parameter combinations"
    elif result is not None and not _is_num(result):
        return f"field 'result' must be a number, null or a list, got {_tname(result)} {result!r:.30}"
    v = at("version")
    if v is not None and not isinstance(v, str):
        return f"field 'version' must be a string, got {_tname(v)}"
    for key in ("started_at", "duration"):
        v = at(key)
        if v is not None and not _is_num(v):
            return f"field {key!r} must be a number, got {_tname(v)}"
        if key == "started_at" and v is not None and date_ms_problem(v):
            return f"field 'started_at' must be a date in ms since 1970 (1970..2100), {date_ms_problem(v)}"
        if key == "duration" and v is not None and (_beyond_float(v) or not (math.isfinite(v) and v >= 0)):
            return f"field 'duration' must be a finite number of seconds >= 0, got {_short(v)!r:.30}"
    for key in [c for c in col if c.startswith("stats_")] + ["samples"]:
        v = at(key)
        if v is not None and not isinstance(v, list):
            return f"field {key!r} must be a list, got {_tname(v)}"
    smp = at("samples")
    if smp is not None:
        # asv writes one list of samples (or null) per parameter combination (issue 29 F2)
        flat = next((s for s in smp if s is not None and not isinstance(s, list)), None)
        if flat is not None:
            return (
                f"field 'samples' must hold one list of samples (or null) per parameter combination, "
                f"got {_tname(flat)} {_short(flat)!r:.30} as an entry"
            )
    return None


# ----------------------------------------------------------------------------- kernelwatch records

#: Sub-objects of a record and the type each must have when present (docs/records.md).
_RECORD_OBJECTS = ("params", "timing", "metrics", "cost", "device", "provenance")


def record(rec, where: str) -> dict:
    """Validate one kernelwatch record (a line of a ``.jsonl`` file).

    ``machine``, ``commit``, ``benchmark`` non-empty strings; ``params``,
    ``timing``, ``metrics``, ``cost``, ``device``, ``provenance`` objects when
    present; ``params`` values scalars; ``timing.samples_s`` a list of numbers
    when present; ``metrics.status`` a string when present.

    Returns the record. Raises :class:`SchemaError` naming ``where`` (file:line)
    and the field."""
    if not isinstance(rec, dict):
        raise SchemaError(f"{where}: record is {_tname(rec)}, not an object")
    for key in ("machine", "commit", "benchmark"):
        v = rec.get(key)
        if not isinstance(v, str) or not v:
            raise SchemaError(f"{where}: field {key!r} must be a non-empty string, got {_tname(v)}")
    for key in _RECORD_OBJECTS:
        v = rec.get(key)
        if v is not None and not isinstance(v, dict):
            raise SchemaError(f"{where}: field {key!r} must be an object, got {_tname(v)} {str(v)[:40]!r}")
    for k, v in (rec.get("params") or {}).items():
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise SchemaError(f"{where}: field 'params.{k}' must be a scalar, got {_tname(v)}")
    smp = (rec.get("timing") or {}).get("samples_s")
    if smp is not None and (not isinstance(smp, list) or not all(_is_num(x) for x in smp)):
        raise SchemaError(f"{where}: field 'timing.samples_s' must be a list of numbers")
    method = (rec.get("timing") or {}).get("method")
    if method is not None and not isinstance(method, str):
        raise SchemaError(f"{where}: field 'timing.method' must be a string, got {_tname(method)}")
    status = (rec.get("metrics") or {}).get("status")
    if status is not None and not isinstance(status, str):
        raise SchemaError(f"{where}: field 'metrics.status' must be a string, got {_tname(status)}")
    _record_numbers(rec, where)
    return rec


#: Number fields of a record's objects (``docs/records.md``): ``null`` or a finite
#: number a float can hold (JSON allows ``10**400``, which ``float()`` cannot, and
#: Python's reader ``NaN``; the bridge writes ``null`` for either, never a string).
_RECORD_NUMBERS = {
    "cost": ("flops", "bytes_read", "bytes_written", "bytes_total"),
    "timing": (
        "p20_s",
        "p50_s",
        "p80_s",
        "stdev_rel",
        "ci_rel",
        "elapsed_s",
        "number",
        "p50_clock_normalised_s",
        "p50_unthrottled_s",
        "flush_bytes",
    ),
    "metrics": (
        "time_s",
        "latency_ms",
        "tflops",
        "gbps",
        "arithmetic_intensity",
        "mfu",
        "bw_util",
        "sol",
        "mfu_measured",
        "bw_util_measured",
        "sol_measured",
        "floor_ms",
    ),
}


def _record_numbers(rec: dict, where: str) -> None:
    for block, names in _RECORD_NUMBERS.items():
        obj = rec.get(block) or {}
        for name in names:
            v = obj.get(name)
            if v is None:
                continue
            ok = _is_num(v)
            if ok:
                try:
                    ok = math.isfinite(float(v))
                except OverflowError:
                    ok = False
            if not ok:
                raise SchemaError(
                    f"{where}: field '{block}.{name}' must be a finite number within float range, "
                    f"got {_tname(v)} {_short(v)!r}"
                )


def _short(v) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
        return f"an integer of {len(str(abs(v))) if v.bit_length() < 10_000 else 'over 3000'} digits"
    return str(v)[:24]


# ----------------------------------------------------------------------------- Liger CSV rows

#: Seconds per unit of Liger's ``metric_unit`` for speed rows.
LIGER_TIME_UNITS = {"s": 1.0, "seconds": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: No GPU kernel launched from PyTorch completes in under a microsecond: CUDA's
#: launch latency alone is a few microseconds (NVIDIA, "CUDA C++ Best Practices
#: Guide", section on kernel launch overhead); a timed forward/backward pass of
#: a Liger kernel is tens of microseconds or more.
MIN_GPU_KERNEL_S = 1e-6


def _liger_num(text, col: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise SchemaError(f"column {col} is not a number: {str(text)[:30]!r}") from None


#: x values kept are below 2^53: from there consecutive integers share one float64, so
#: two rows of different sizes would become one case (hostile trial round 6).
MAX_EXACT_X = 2.0**53


def liger_row(fields: dict, where: str) -> tuple[dict, str | None]:
    """Validate one Liger CSV row (already split into ``{column: text}``).

    Returns ``(row, invalid)``: ``row`` with ``x_value``, ``y_value_20/50/80`` as
    floats and ``config`` parsed; ``invalid`` is ``None`` or the reason its
    values cannot be used as a measurement (then the importer keeps the row as
    an invalid point, never as a number):

    - a ``y`` value that is not finite (``nan``, ``inf``), zero or negative;
    - percentiles out of order (p20 > p50 or p50 > p80);
    - a speed row whose unit is unknown, or whose p50 time is below
      :data:`MIN_GPU_KERNEL_S` (no GPU kernel is that fast; the 1e-9 ms that
      became "860580103% of peak").

    Raises
    ------
    SchemaError
        A non-numeric value, a non-finite ``x_value``, a configuration that is
        not a JSON object, an empty ``gpu_name``, a name column longer than
        :data:`harness.core.files.MAX_NAME_CHARS`: the row cannot be placed in
        any series (message without the location; the caller adds ``where``).
    """
    r = dict(fields)
    try:
        cfg = _files.parse_json(r.get("extra_benchmark_config_str") or "{}")
    except ValueError as exc:
        raise SchemaError(f"extra_benchmark_config_str is not JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(cfg, dict):
        raise SchemaError(f"extra_benchmark_config_str is {_tname(cfg)}, not a JSON object")
    r["config"] = cfg
    for col in ("x_value", "y_value_50", "y_value_20", "y_value_80"):
        r[col] = _liger_num(r.get(col), col)
    if not math.isfinite(r["x_value"]):
        raise SchemaError(f"column x_value is not finite: {fields.get('x_value')!r}")
    if r["x_value"] < 0:
        # Liger's x is a size (hidden size, sequence length, batch, vocabulary): a
        # negative one was kept as a case and sized a cost (hostile trial round 7)
        raise SchemaError(f"column x_value {fields.get('x_value')!r} is negative; it is a size or count")
    if abs(r["x_value"]) >= MAX_EXACT_X:
        # 9007199254740992 and ...993 are one float: two cases would merge into one point
        raise SchemaError(
            f"column x_value {fields.get('x_value')!r} is beyond 2^53, where neighbouring sizes are the same float"
        )
    for col in ("gpu_name", "kernel_name", "kernel_provider", "metric_name"):
        if not (r.get(col) or "").strip():
            raise SchemaError(f"empty {col}")
    for col in ("gpu_name", "kernel_name", "kernel_provider", "metric_name", "kernel_operation_mode"):
        if len(r.get(col) or "") > _files.MAX_NAME_CHARS:  # becomes part of a benchmark name
            raise SchemaError(name_problem(r[col], f"column {col}"))
    invalid = None
    for col in ("y_value_50", "y_value_20", "y_value_80"):
        v = r[col]
        if not math.isfinite(v):
            invalid = f"column {col} is not finite ({fields.get(col)!r})"
        elif v <= 0:
            invalid = f"column {col} is {'zero' if v == 0 else 'negative'} ({fields.get(col)!r})"
        if invalid:
            break
    if invalid is None and not (r["y_value_20"] <= r["y_value_50"] <= r["y_value_80"]):
        invalid = (
            f"percentiles out of order (p20 {r['y_value_20']:g}, p50 {r['y_value_50']:g}, p80 {r['y_value_80']:g})"
        )
    if invalid is None and r.get("metric_name") == "speed":
        unit = (r.get("metric_unit") or "").strip()
        scale = LIGER_TIME_UNITS.get(unit)
        if scale is None:
            invalid = f"speed row with unknown time unit {unit!r}"
        elif r["y_value_50"] * scale < MIN_GPU_KERNEL_S:
            invalid = (
                f"p50 {r['y_value_50']:g} {unit} = {r['y_value_50'] * scale:.3g} s is faster than any GPU "
                f"kernel launch (< {MIN_GPU_KERNEL_S:g} s): physically impossible"
            )
    return r, invalid
