"""kernelwatch records: the roofline view of each asv result, stored beside it.

Layout inside an asv results directory::

    <results>/<machine>/machine.json                 asv's
    <results>/<machine>/<sha8>-<env>.json            asv's (format v2)
    <results>/<machine>/kernelwatch/<commit>.jsonl   ours: one record per line
    <results>/<machine>/kernelwatch/calibration.jsonl  ours: one calibration per line

Our files end in ``.jsonl`` so asv's result walker (which loads every ``*.json``
below a machine folder) never mistakes them for its own. A later line for the
same key supersedes an earlier one (re-runs append). The schema is documented
in ``docs/records.md``; :data:`RECORD_SCHEMA` is bumped on incompatible change
and :func:`migrate_record` upgrades older versions.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

RECORD_SCHEMA = 1
CALIBRATION_SCHEMA = 1
#: File of one machine's calibrations inside its records folder (one JSON object a line).
CALIBRATION_FILE = "calibration.jsonl"
RECORDS_SUBDIR = "kernelwatch"


class RecordError(ValueError):
    """A record file or line that cannot be used; the message names file and line."""


def records_dir(results_dir: str | os.PathLike, machine: str) -> Path:
    return Path(results_dir) / machine / RECORDS_SUBDIR


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def record_key(rec: dict) -> tuple:
    """Series identity of a record: machine, commit, benchmark, params, timing method."""
    params = rec.get("params") or {}
    return (
        rec.get("machine"),
        rec.get("commit"),
        rec.get("benchmark"),
        tuple(sorted((str(k), str(v)) for k, v in params.items())),
        (rec.get("timing") or {}).get("method"),
    )


def append_jsonl(path: str | os.PathLike, obj: dict) -> None:
    """Append one JSON object as a line; creates parent folders. The line is written
    with a single ``write`` so concurrent appenders do not interleave within a line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(obj, sort_keys=True, allow_nan=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)


def write_record(results_dir, record: dict) -> Path:
    """Append ``record`` to ``<results>/<machine>/kernelwatch/<commit>.jsonl``.

    Raises ``ValueError`` if the record lacks ``machine`` or ``commit``, or holds a
    NaN/infinite number (JSON has none; a missing value must be ``None``).
    """
    for key in ("machine", "commit", "benchmark"):
        if not record.get(key):
            raise ValueError(f"record has no {key!r}")
    rec = dict(record)
    rec.setdefault("schema", RECORD_SCHEMA)
    rec.setdefault("created_at", now_iso())
    path = records_dir(results_dir, rec["machine"]) / f"{rec['commit']}.jsonl"
    append_jsonl(path, rec)
    return path


def read_jsonl(path: str | os.PathLike, errors: list[str] | None = None) -> Iterator[dict]:
    """Yield the JSON objects of a ``.jsonl`` file. A bad line is reported into
    ``errors`` (``"<file>:<line>: <why>"``) and skipped; the rest is still read.
    Lines that are not UTF-8 text (a file of binary garbage) are skipped and
    counted in one line naming the file and the first such line. Bounded
    (:mod:`harness.core.files`): a file over ``MAX_JSONL_BYTES`` is not read (one
    line in ``errors``), a line over ``MAX_JSONL_LINE_BYTES`` or nested deeper than
    ``MAX_JSON_DEPTH`` is skipped by line."""
    from harness.core import files

    path = Path(path)
    try:
        fh = files.open_regular(path, "rb")
    except OSError as exc:
        if errors is not None:
            errors.append(f"{path}: cannot read: {exc.strerror or exc}")
        return
    size = os.fstat(fh.fileno()).st_size
    if size > files.MAX_JSONL_BYTES:
        fh.close()
        if errors is not None:
            errors.append(
                f"{path}: cannot read: {size:,} bytes, over the limit MAX_JSONL_BYTES={files.MAX_JSONL_BYTES:,} "
                "(harness/core/files.py)"
            )
        return
    not_text: list[int] = []
    with fh:
        for lineno, raw in files.iter_lines(fh, str(path), errors):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                not_text.append(lineno)
                continue
            if not line:
                continue
            try:
                obj = files.parse_json(line, problems=errors, where=f"{path}:{lineno}")
            except files.InputLimitError as exc:
                if errors is not None:
                    errors.append(f"{path}:{lineno}: {exc}; line skipped")
                continue
            except ValueError as exc:
                if errors is not None:
                    errors.append(f"{path}:{lineno}: not JSON ({exc.msg})")
                continue
            if not isinstance(obj, dict):
                if errors is not None:
                    errors.append(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
                continue
            yield obj
    if not_text and errors is not None:
        errors.append(
            f"{path}:{not_text[0]}: {len(not_text)} line(s) are not UTF-8 text (binary data?); those lines skipped"
        )


def migrate_record(rec: dict, where: str = "") -> dict:
    """Upgrade a record to :data:`RECORD_SCHEMA`. Raises :class:`RecordError` for a
    record from a newer kernelwatch or without a schema."""
    version = rec.get("schema")
    if version == RECORD_SCHEMA:
        return rec
    if not isinstance(version, int):
        raise RecordError(f"{where}: record has no integer 'schema' field")
    raise RecordError(
        f"{where}: record schema {version} is newer than this kernelwatch ({RECORD_SCHEMA}); upgrade kernelwatch"
    )


def _validate(rec: dict, where: str) -> None:
    """Types of a record's fields (:func:`harness.core.schema.record`); :class:`RecordError` naming ``where``."""
    from harness.core import schema

    try:
        schema.record(rec, where)
    except schema.SchemaError as exc:
        raise RecordError(f"{exc}; record skipped") from None


def load_records(
    results_dir, errors: list[str] | None = None, machine_of: dict[str, str] | None = None
) -> dict[tuple, dict]:
    """Every record under ``results_dir``, keyed by :func:`record_key`; later lines win.
    A record of the wrong shape (:func:`harness.core.schema.record`) is skipped with a
    line in ``errors`` naming file, line and field. With ``machine_of`` (machine
    folder name -> machine id), only those folders are read and a record's key
    carries its folder's machine id, whatever its ``machine`` field says."""
    out: dict[tuple, dict] = {}
    base = Path(results_dir)
    for path in sorted(base.glob(f"*/{RECORDS_SUBDIR}/*.jsonl")):
        if path.name == "calibration.jsonl":
            continue
        folder = path.parent.parent.name
        if machine_of is not None and folder not in machine_of:
            continue
        for i, rec in enumerate(read_jsonl(path, errors)):
            try:
                rec = migrate_record(rec, f"{path}:{i + 1}")
                _validate(rec, f"{path}:{i + 1}")
            except RecordError as exc:
                if errors is not None:
                    errors.append(str(exc))
                continue
            where = misplaced_record(rec, path, folder, machine_of)
            if where:
                if errors is not None:
                    errors.append(f"{path}:{i + 1}: {where}; record skipped")
                continue
            key = record_key(rec)
            if machine_of is not None:
                key = (machine_of[folder],) + key[1:]
            out[key] = rec
    return out


def misplaced_record(rec: dict, path: Path, folder: str, machine_of: dict | None) -> str | None:
    """Why a record does not belong in ``<folder>/kernelwatch/<commit>.jsonl`` (its
    ``commit`` is not the file's, its ``machine`` neither the folder's name nor its
    machine id), or ``None``. Such a record is never used for another commit or machine."""
    commit = str(rec["commit"])
    if not (commit.startswith(path.stem) or path.stem.startswith(commit)) or min(len(commit), len(path.stem)) < 7:
        return f"record of commit {commit[:12]!r} in the file of commit {path.stem[:12]!r}"
    names = {folder}
    if machine_of is not None and folder in machine_of:
        names.add(machine_of[folder])
        names.add(machine_of[folder].removesuffix(f" ({folder})"))
    if rec["machine"] not in names:
        return f"record of machine {str(rec['machine'])[:40]!r} in the folder of machine {' / '.join(sorted(names))!r}"
    return None


def iter_commits_with_records(results_dir, machine: str) -> Iterable[str]:
    d = records_dir(results_dir, machine)
    return sorted(p.stem for p in d.glob("*.jsonl") if p.name != "calibration.jsonl")


#: ``cpu_threads`` default of :func:`latest_calibration`: any thread count.
ANY_THREADS = object()


def latest_calibration(
    results_dir, machine: str, errors: list[str] | None = None, cpu_threads=ANY_THREADS
) -> dict | None:
    """The newest usable calibration of ``machine`` under ``results_dir``, or ``None``.

    Usable: schema :data:`CALIBRATION_SCHEMA` with a ``copy`` section, and
    valid when read (:func:`harness.core.guards.validate_calibration`): an
    absurd figure (zero, negative, NaN, disagreeing with its own time, above
    the datasheet or the physical bound) is not used, a calibration with no
    usable figure is skipped. Each problem, and each unreadable line, is
    appended to ``errors`` with the file. So a run never reuses an absurd
    calibration: it calibrates again.

    ``cpu_threads`` (when given) keeps only CPU calibrations timed with that
    ``cpu`` method thread count (one without ``cpu_threads`` predates the
    setting and ran with torch's default, i.e. ``None``): a ceiling from two
    threads is not one for a single-threaded timing. GPU calibrations are not
    filtered.
    """
    from harness.core.guards import validate_calibration

    path = records_dir(results_dir, machine) / CALIBRATION_FILE
    try:
        if not path.exists() and not path.is_symlink():
            return None
    except OSError as exc:  # a folder on the way that cannot be searched (permissions)
        errors.append(f"{path}: cannot read ({exc.strerror or exc}); calibration unknown")
        return None
    latest = None
    for i, cal in enumerate(read_jsonl(path, errors), start=1):
        if cal.get("schema") == CALIBRATION_SCHEMA and isinstance(cal.get("copy"), dict):
            if (
                cpu_threads is not ANY_THREADS
                and (cal.get("device") or {}).get("kind") == "cpu"
                and cal.get("cpu_threads") != cpu_threads
            ):
                continue
            checked, problems = validate_calibration(cal, f"{path} (calibration {i})")
            if errors is not None:
                errors.extend(problems)
            if checked is not None:
                latest = checked
    return latest


#: Folder of a results directory holding ``kernelwatch profile`` / ``triage``
#: outputs stored with ``--results`` (no ``machine.json``, no ``*.json`` file:
#: asv's and our loaders pass over it); ``kernelwatch publish`` links them.
PROFILES_SUBDIR = "kernelwatch-profiles"


def compile_facts_text(facts: dict | None) -> str:
    """One line for a record's ``compile_facts`` (benchmark page, profiles, triage):
    per kernel ``num_warps``, ``num_stages``, registers, spills and shared memory,
    or the reason they are not available, plus the chosen config."""
    if not facts:
        return "not recorded"
    st = facts.get("status")
    cfg = facts.get("autotune_config") or {}
    cfg_txt = ", ".join(f"{k}={v}" for k, v in cfg.items()) if cfg else ""
    if st == "ok":
        ks = "; ".join(
            f"{k.get('name')}: num_warps={k.get('num_warps')}, num_stages={k.get('num_stages')}, "
            f"registers={k.get('registers')}, spills={k.get('spills')}, shared={k.get('shared_bytes')} B"
            for k in facts.get("kernels", [])
        )
        return f"Triton {facts.get('triton')}: {ks}" + (f" (config {cfg_txt})" if cfg_txt else "")
    return f"{facts.get('reason') or st}" + (f" (config {cfg_txt})" if cfg_txt else "")


#: Scheme of a record's ``code_identity`` (:mod:`harness.measure.fingerprint`).
CODE_SCHEME = "kernelwatch-code/1"


def same_code(a: dict | None, b: dict | None) -> bool:
    """True when two records' ``code_identity`` say the same compiled code ran: the
    same scheme and fingerprint, every part computed (a part that errored, or a
    missing identity, is never "same": the fingerprint errs towards "different")."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    for ci in (a, b):
        if ci.get("scheme") != CODE_SCHEME or not ci.get("fingerprint"):
            return False
        if any(v == "error" for v in (ci.get("coverage") or {}).values()):
            return False
    return a["fingerprint"] == b["fingerprint"]
