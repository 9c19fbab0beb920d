"""One asv results file: reading it (format v1 migrated in memory, format v2 rows
as they are) and the conventions of its names and parameters.

Used by :mod:`harness.store.results` (the loader of whole directories) and by
``kernelwatch run`` to see which commits a machine has measured. Errors are
``asv.util.UserError`` with a one-line reason.
"""

from __future__ import annotations

from pathlib import Path


def clean_param(v: str) -> str:
    """asv stores parameter values as repr strings ("'torch'"); show them bare."""
    v = str(v)
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


def type_from_name(name: str) -> str | None:
    """asv's naming convention (``time_``, ``mem_``, ``peakmem_``, ``track_``) for
    results whose benchmark is missing from ``benchmarks.json``."""
    last = name.rsplit(".", 1)[-1]
    for prefix, kind in (("time_", "time"), ("peakmem_", "peakmemory"), ("mem_", "memory"), ("track_", "track")):
        if last.startswith(prefix):
            return kind
    return None


def unit_from_name(name: str) -> str | None:
    return {"time": "seconds", "peakmemory": "bytes", "memory": "bytes"}.get(type_from_name(name))


class ResultsFile:
    """The parts of one asv results file (format 2) that kernelwatch uses."""

    __slots__ = ("commit_hash", "date", "params", "env_name", "columns", "results")

    def __init__(self, raw: dict):
        self.commit_hash = raw["commit_hash"]
        self.date = raw["date"]
        self.params = raw["params"]
        self.env_name = raw["env_name"]
        self.columns = raw["result_columns"]
        self.results = raw["results"]

    def fields(self) -> tuple:
        """The fields as one tuple of plain values (:mod:`harness.store.parse_cache`)."""
        return (self.commit_hash, self.date, self.params, self.env_name, self.columns, self.results)

    @classmethod
    def from_fields(cls, fields: tuple) -> ResultsFile:
        """The inverse of :meth:`fields`; ``ValueError`` for a tuple of another length."""
        if not isinstance(fields, tuple) or len(fields) != len(cls.__slots__):
            raise ValueError("a ResultsFile needs 6 fields")
        self = cls.__new__(cls)
        self.commit_hash, self.date, self.params, self.env_name, self.columns, self.results = fields
        return self


def read_results_file(path: Path, problems: list | None = None) -> ResultsFile:
    """Read one asv results file, migrating format v1 in memory with asv's own
    ``Results.update_to_2`` (as ``asv update`` would on disk, without touching
    the user's files).

    Format 2 (``result_columns`` plus one row per benchmark, documented in
    asv's ``asv/results.py``) is read here directly instead of through
    ``Results.load``: that re-reads the file and builds a dict per parameter
    combination and statistic, which dominated ``kernelwatch publish`` at
    10,000 commits (``experiments/scale/bench_publish.py``). Errors are ``asv.util.UserError``
    with a one-line reason naming the field (:func:`harness.core.schema.results_file`);
    rows of the wrong shape are dropped with a line each in ``problems``.

    Inside :func:`harness.store.parse_cache.using`, a file whose bytes were
    read and checked before (same path, same kernelwatch) comes from that
    cache with the same ``problems`` lines; a file that raises is never cached.
    """
    from asv import util as asv_util

    from harness.core.files import MAX_JSON_BYTES, InputLimitError, read_bytes
    from harness.store import parse_cache

    try:
        data = read_bytes(path, MAX_JSON_BYTES, "MAX_JSON_BYTES")
    except InputLimitError as exc:
        raise asv_util.UserError(f"cannot read ({exc})") from None
    except OSError as exc:
        raise asv_util.UserError(f"cannot read ({exc.strerror or exc})") from None
    cache = parse_cache.active()
    key = cache.key(path, data) if cache is not None else None
    hit = cache.get(key, path) if cache is not None else None
    if hit is not None:
        fields, lines = hit
        if problems is not None:
            problems.extend(lines)
        return ResultsFile.from_fields(fields)
    mine: list = []
    try:
        res = _check_results(path, data, mine)
    finally:
        if problems is not None:
            problems.extend(mine)
    if cache is not None:
        cache.put(key, res.fields(), mine)
    return res


def _check_results(path: Path, data: bytes, problems: list) -> ResultsFile:
    """The checked :class:`ResultsFile` of one file's bytes (see :func:`read_results_file`)."""
    from asv import util as asv_util
    from asv.results import Results

    from harness.core import schema
    from harness.core.files import InputLimitError, parse_json

    try:
        raw = parse_json(data.decode("utf-8"), problems=problems, where=str(path))  # duplicate keys, lone surrogates
    except InputLimitError as exc:
        raise asv_util.UserError(f"cannot read ({exc})") from None
    except ValueError as exc:
        raise asv_util.UserError(f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise asv_util.UserError(f"expected a JSON object, got {type(raw).__name__}")
    version = raw.get("version")
    if version == 1:
        try:
            raw = Results.update_to_2(raw)
        except Exception as exc:
            raise asv_util.UserError(f"format v1 file could not be migrated ({type(exc).__name__}: {exc})") from None
    elif version != Results.api_version:
        raise asv_util.UserError(
            f"field 'version' {version!r:.20} is not an asv results format this kernelwatch "
            f"reads ({', '.join(map(str, schema.RESULTS_VERSIONS))})"
        )
    try:
        raw = schema.results_file(raw, path, problems)
    except schema.SchemaError as exc:
        raise asv_util.UserError(str(exc).removeprefix(f"{path}: ")) from None
    return ResultsFile(raw)
