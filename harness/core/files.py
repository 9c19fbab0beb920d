"""Opening input files that may not be files: the one place results, records,
calibrations, ``machine.json``, ``benchmarks.json``, Liger CSVs and analysis
reports are opened for reading.

A FIFO named ``x.json`` in a results folder blocks a plain ``open()`` forever
(it waits for a writer); a device or socket is no better. :func:`open_regular`
opens without blocking (``O_NONBLOCK``), checks with ``fstat`` on the open
descriptor (no race between a check and the open) that it is a regular file,
and only then hands back a normal file object.

The bounded readers (:func:`read_json`, :func:`iter_lines`, :func:`csv_rows`,
:func:`read_csv_text`) add named limits on size, nesting depth, line and field
length; :data:`MAX_GRID_POINTS` bounds the parameter grid an asv row may declare
(checked in :mod:`harness.core.schema`). Over a limit is :class:`InputLimitError`
or a skipped line/row, with a message naming the limit.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import IO

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


class NotRegularFileError(OSError):
    """The path exists but is not a regular file (FIFO, socket, device, folder);
    ``strerror`` says which, for a message ``"<file>: cannot read (<strerror>)"``."""


def kind_of(mode: int) -> str:
    """``"a FIFO (named pipe)"``, ``"a socket"``, ... for an ``st_mode`` that is not a regular file."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(
    path: str | os.PathLike, mode: str = "r", encoding: str | None = "utf-8", newline: str | None = None
) -> IO:
    """Open ``path`` for reading (``mode`` ``"r"`` or ``"rb"``) only if it is a regular file.

    Raises
    ------
    NotRegularFileError
        ``path`` is a FIFO, socket, device or folder (never blocks on a FIFO).
    OSError
        Any other reason it cannot be opened (``FileNotFoundError``, ``PermissionError``, ...).
    """
    if mode not in ("r", "rb"):
        raise ValueError(f"open_regular reads only ('r' or 'rb'), got mode {mode!r}")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = kind_of(st.st_mode)
            raise NotRegularFileError(errno.EINVAL, f"{what}, not a regular file; skipped", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if mode == "rb":
        return os.fdopen(fd, "rb")
    return os.fdopen(fd, "r", encoding=encoding, newline=newline)


def read_text(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    """The text of a regular file (:func:`open_regular`); same errors, plus ``UnicodeDecodeError``."""
    with open_regular(path, encoding=encoding) as fh:
        return fh.read()


def is_regular(path: Path) -> bool:
    """``path`` is a regular file (following symlinks); ``False`` when it does not exist."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def check_input_file(path: str | os.PathLike, what: str = "input") -> Path:
    """Check, before any work, that ``path`` is an existing regular file to read; returns it as a ``Path``.

    Inputs must exist (outputs may create their folders, :func:`check_output_file`).
    ``os.stat`` never blocks, so a FIFO is refused without waiting for a writer.
    ``what`` names the option in the message (``"--liger"``).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    NotRegularFileError
        ``path`` is a FIFO, socket, device (``/dev/zero``) or folder.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT, f"{what}: does not exist (an input is never created)", str(path)
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(
            errno.EINVAL, f"{what}: {kind_of(st.st_mode)}, not a regular file; give a file", str(path)
        )
    return path


# ----------------------------------------------------------------------------- bounded reading
#
# Every JSON and CSV that kernelwatch reads from a results folder (``machine.json``,
# ``benchmarks.json``, asv results files, record and calibration JSONL lines, Liger
# CSVs) goes through the readers below, so that a small hostile file fails with one
# line naming it and the limit, and the rest of the folder is still read (issue 29).
# Python's ``json`` recurses once per nesting level: a 10 KB file of brackets raised
# ``RecursionError`` (naming no file) in whatever walked it; ``csv`` raises on a field
# over 128 KB; a regular file of gigabytes was read whole. The limits are far above
# real data (``/work/shared/data``: asv files up to 20 KB, nesting 5, grids up to 72
# parameter combinations) and far below what exhausts memory or time.

#: Largest JSON file read whole (bytes): asv results, ``benchmarks.json``, ``machine.json``,
#: analysis reports. A real asv results file of 300 benchmarks is about 20 KB.
MAX_JSON_BYTES = 64 * 2**20
#: Largest JSONL file (records, calibrations), read line by line (bytes).
MAX_JSONL_BYTES = 512 * 2**20
#: Longest line of a JSONL file (bytes): a record with 10,000 samples is about 200 KB.
MAX_JSONL_LINE_BYTES = 16 * 2**20
#: Largest CSV (bytes): Liger's data for one GPU, 315 benchmarks, is about 73 KB.
MAX_CSV_BYTES = 64 * 2**20
#: Most parameter combinations all results files of one results folder may declare
#: together (each file's rows counted as for :data:`MAX_FILE_GRID_POINTS`): the per-file
#: limit alone let a folder of many small files, each just under it, exhaust memory.
#: Files past the total are skipped by name, the earlier ones kept. Sized from what a
#: point costs now that points are columns made into objects on access (issue 28),
#: measured 2026-12-07 on ``synth_asv.py`` 10,000 commits x 4 machines x 504 series
#: (20,160,000 points): ``kernelwatch publish`` peaks at 2.54 GiB (135 bytes a point),
#: ``kernelwatch analyze`` at 3.35 GiB (174 bytes a point). 25 million keeps that
#: history (issue 28's scale goal) loadable with a quarter to spare and bounds either
#: command near 4.4 GiB; it was 2,000,000 when a point cost about 670 bytes, which
#: cut that history to a tenth.
MAX_FOLDER_GRID_POINTS = 25_000_000
#: Most series (machine x benchmark x parameters) one results folder may hold. A
#: series costs about 2.4 KB loaded before its points (measured 2026-12-07: 200,000
#: one-point series, 20 files of 5 benchmarks x 2,000 combinations, took 468 MiB in
#: ``load_columns``), so :data:`MAX_FOLDER_GRID_POINTS` of one-point series would be
#: 60 GB. 500,000 bounds that part near 1.2 GB; real folders hold far fewer
#: (OpenBLAS 1,011, Liger's A100/H100 CSVs 6,305, issue 28's largest history 2,016).
#: Rows that would add series past it are skipped by name (the first 3, the rest counted).
MAX_FOLDER_SERIES = 500_000
#: Most data rows read from one CSV: Liger's data for one GPU is 315 rows, and each
#: row costs about 0.3 ms to validate and place (a 60,000-row file, capped at 50,000:
#: 14 s at load 4), so a 64 MiB CSV of ~280,000 rows would take over a minute, and
#: many such files many minutes. Rows past the limit are
#: skipped with one line naming the file; the rows before it and the other files are kept.
MAX_CSV_ROWS = 50_000
#: Deepest nesting of arrays and objects in any JSON value (asv results nest 5 deep).
MAX_JSON_DEPTH = 64
#: Longest CSV field (characters): the default of Python's ``csv.field_size_limit``,
#: kept as a named limit so a longer field loses its own row, never the file.
MAX_CSV_FIELD_CHARS = 128 * 1024
#: Longest benchmark name (characters) a results file or ``benchmarks.json`` may
#: hold: asv names are dotted Python paths (``module.Class.time_method``); the
#: longest in the first 3,000 JSON files of ``/work/shared/data`` is 51 characters. A 1 MB name was printed whole in
#: every warning and table row (hostile trial round 4); a longer one loses its own
#: row with a warning that shows its first 60 characters, the rest of the file is kept.
MAX_NAME_CHARS = 1024
#: Most parameter combinations one asv benchmark may declare (product of its axis
#: lengths): each becomes a series (10^4 load in 0.5 s here, 10^5 in 5.5 s, 10^9 exhausted
#: memory from a 900-byte row); real suites declare at most 72.
MAX_GRID_POINTS = 10_000
#: Most parameter combinations all rows of one results file (or all entries of one
#: ``benchmarks.json``) may declare together: the per-row limit alone let one 12 KB file
#: of 10 ``null`` rows with 10^4-point grids make 100,002 series (23 s, 661 MB). Rows
#: past the total are refused, the earlier ones kept. Real files declare at most 222
#: (``/work/shared/data``); twice the per-row limit keeps any single legal row loadable.
MAX_FILE_GRID_POINTS = 2 * MAX_GRID_POINTS

#: A JSON string (escapes unrolled: one pass, no backtracking) or a run of characters that are no bracket.
_NOT_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\[\]{}"]+')
_INNER_PAIR = re.compile(r"\[\]|\{\}")


class InputLimitError(ValueError):
    """Input over one of this module's named limits; the message names the limit and
    its value (the caller prefixes the file). A ``ValueError``, as ``json``'s errors are."""


def json_depth_problem(text: str, limit: int | None = None) -> str | None:
    """Why ``text`` nests too deep for :func:`parse_json` (``None`` when it does not).

    Strings are removed first (brackets inside them do not nest); then each pass
    removes every innermost ``[]``/``{}`` pair, so the passes count the nesting
    depth without recursion, each pass one regular-expression scan in C. Brackets
    left unpaired (a truncated file) count as levels too: ``json`` recurses into
    them before it finds the file truncated. ``limit``: :data:`MAX_JSON_DEPTH` when ``None``.
    """
    limit = MAX_JSON_DEPTH if limit is None else limit
    if text.count("[") + text.count("{") <= limit:
        return None
    s = _NOT_NESTING.sub("", text)
    depth = 0
    while s:
        s2 = _INNER_PAIR.sub("", s)
        if s2 == s:
            depth += len(s)  # unpaired: a bound on how deep json would go
            break
        depth, s = depth + 1, s2
        if depth > limit:
            break
    if depth > limit:
        return f"nested more than {limit} levels deep (limit MAX_JSON_DEPTH in harness/core/files.py)"
    return None


#: A ``\\uD800``..``\\uDFFF`` escape in JSON text: the only way a surrogate code point gets
#: into a decoded string (the bytes are decoded as strict UTF-8). A pair of them is one
#: character (an emoji written escaped); one alone is text no encoder writes (issue 29 F3).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: Duplicate keys named per file at most (the count covers all of them).
MAX_DUPLICATE_KEYS_NAMED = 3


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (U+D800..U+DFFF, which UTF-8 cannot encode)
    replaced by its visible escape, the six characters ``\\udcff``."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _unsurrogate(v, found: list):
    """``v`` with lone surrogates in every string (keys too) escaped; ``found`` gets
    each string changed (as escaped)."""
    if isinstance(v, str):
        if _LONE_SURROGATE.search(v):
            out = escape_surrogates(v)
            found.append(out)
            return out
        return v
    if isinstance(v, list):
        return [_unsurrogate(x, found) for x in v]
    if isinstance(v, dict):
        return {_unsurrogate(k, found): _unsurrogate(x, found) for k, x in v.items()}
    return v


def parse_json(text: str, limit: int | None = None, problems: list[str] | None = None, where: str = "<json>"):
    """``json.loads(text)`` after :func:`json_depth_problem`, with two rules of its own
    (issue 29 S4, F3), each a line in ``problems`` (when given) starting with ``where``:

    - a key repeated within one object: the *last* value is kept (Python's and asv's
      reading, so the file means what asv took it to mean), the key named;
    - a lone surrogate (a ``\\udcff`` escape, valid JSON, but text that UTF-8 cannot
      write: a page, a file name or the terminal would fail on it) in any string,
      key or value: replaced by the visible six characters ``\\udcff``
      (:func:`escape_surrogates`), consistently in every file, so a benchmark keeps
      one name across ``benchmarks.json`` and the results.

    Raises
    ------
    InputLimitError
        Nested more than ``limit`` levels.
    json.JSONDecodeError
        Not JSON (a ``ValueError``).
    """
    why = json_depth_problem(text, limit)
    if why:
        raise InputLimitError(why)
    dupes: list = []

    def pairs_hook(pairs):
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set = set()
            dupes.extend(k for k, _ in pairs if k in seen or seen.add(k))
        return d

    try:
        value = json.loads(text, object_pairs_hook=pairs_hook)
    except RecursionError:  # a Python built with a small stack; never seen, kept as the last guard
        raise InputLimitError("nested too deep for this Python to parse (limit MAX_JSON_DEPTH)") from None
    if dupes and problems is not None:
        named = ", ".join(repr(escape_surrogates(str(k)))[:80] for k in dupes[:MAX_DUPLICATE_KEYS_NAMED])
        more = f" and {len(dupes) - MAX_DUPLICATE_KEYS_NAMED} more" if len(dupes) > MAX_DUPLICATE_KEYS_NAMED else ""
        problems.append(
            f"{where}: duplicate key(s) {named}{more} in one JSON object; the last value of each is used, "
            "the earlier ones are ignored (as Python's and asv's readers do)"
        )
    if _SURROGATE_ESCAPE.search(text):
        found: list = []
        value = _unsurrogate(value, found)
        if found and problems is not None:
            problems.append(
                f"{where}: {len(found)} string(s) hold a lone surrogate (a \\ud800-\\udfff escape, not "
                f"encodable text), e.g. '{found[0][:80]}'; read with it shown as the escape text"
            )
    return value


def read_bytes(path: str | os.PathLike, max_bytes: int, limit_name: str) -> bytes:
    """The bytes of a regular file (:func:`open_regular`), refused over ``max_bytes``.

    The size is checked on the open descriptor before reading and again by reading
    at most ``max_bytes + 1`` bytes (a file that grows while read).

    Raises
    ------
    InputLimitError
        Larger than ``max_bytes`` (the message names ``limit_name``).
    NotRegularFileError, OSError
        As :func:`open_regular`.
    """
    with open_regular(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(max_bytes + 1) if size <= max_bytes else b""
    if size > max_bytes or len(data) > max_bytes:
        raise InputLimitError(
            f"{max(size, len(data)):,} bytes, over the limit {limit_name}={max_bytes:,} (harness/core/files.py)"
        )
    return data


def read_json(path: str | os.PathLike, max_bytes: int | None = None, problems: list[str] | None = None):
    """The JSON value of a regular file, bounded in size (:data:`MAX_JSON_BYTES`) and
    nesting (:data:`MAX_JSON_DEPTH`); duplicate keys and lone surrogates as
    :func:`parse_json`, named in ``problems`` (when given) with the file.

    Raises
    ------
    InputLimitError
        Over a limit (a ``ValueError``; the message names the limit, not the file).
    UnicodeDecodeError, json.JSONDecodeError
        Not UTF-8, not JSON (both ``ValueError``).
    NotRegularFileError, OSError
        As :func:`open_regular`: a FIFO, a device (a link to ``/dev/zero``), a folder, missing.
    """
    max_bytes = MAX_JSON_BYTES if max_bytes is None else max_bytes
    return parse_json(read_bytes(path, max_bytes, "MAX_JSON_BYTES").decode("utf-8"), problems=problems, where=str(path))


def read_gzip_json(path: str | os.PathLike, max_bytes: int | None = None):
    """The JSON value of a gzip-compressed regular file, its *uncompressed* size
    bounded by :data:`MAX_JSON_BYTES` (a small gzip bomb inflates to gigabytes)
    and its nesting by :data:`MAX_JSON_DEPTH`. Errors as :func:`read_json`, plus
    ``EOFError``/``gzip.BadGzipFile`` (an ``OSError``) for a truncated or bad archive."""
    import gzip

    max_bytes = MAX_JSON_BYTES if max_bytes is None else max_bytes
    with open_regular(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputLimitError(
            f"over {max_bytes:,} bytes uncompressed, the limit MAX_JSON_BYTES (harness/core/files.py)"
        )
    return parse_json(data.decode("utf-8"))


def read_csv_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of a CSV file, refused over :data:`MAX_CSV_BYTES`; errors as :func:`read_json`.
    A leading byte-order mark (Excel's "CSV UTF-8" writes one) is dropped
    (``utf-8-sig``), so the first column's name is read as written."""
    return read_bytes(path, MAX_CSV_BYTES, "MAX_CSV_BYTES").decode("utf-8-sig")


def iter_lines(fh, where: str, errors: list[str] | None, max_line: int | None = None):
    """``(lineno, bytes)`` for each line of a binary file object, a line over
    ``max_line`` bytes skipped (read through in chunks, never held whole) with a
    line in ``errors`` naming ``where:lineno`` and the limit (:data:`MAX_JSONL_LINE_BYTES` when ``None``)."""
    max_line = MAX_JSONL_LINE_BYTES if max_line is None else max_line
    lineno = 0
    while True:
        raw = fh.readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = fh.readline(2**20)
            if errors is not None:
                errors.append(
                    f"{where}:{lineno}: line longer than the limit MAX_JSONL_LINE_BYTES={max_line:,} "
                    "bytes (harness/core/files.py); line skipped"
                )
            continue
        yield lineno, raw


def csv_rows(lines, where: str, errors: list[str], max_field: int | None = None):
    """``(line_num, fields)`` for each row ``csv.reader`` reads from ``lines``; a row
    with a field over ``max_field`` characters (or any other ``csv.Error``) is skipped
    with a line in ``errors`` naming ``where:line`` and the limit, and reading goes on
    with the next row (``csv`` recovers at the next line). The process-wide
    ``csv.field_size_limit`` is set only around each row read, then put back.
    ``max_field``: :data:`MAX_CSV_FIELD_CHARS` when ``None``."""
    max_field = MAX_CSV_FIELD_CHARS if max_field is None else max_field
    reader = csv.reader(lines)
    while True:
        old = csv.field_size_limit(max_field)
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            why = (
                f"a field longer than the limit MAX_CSV_FIELD_CHARS={max_field:,} characters (harness/core/files.py)"
                if "field limit" in str(exc)
                else f"not CSV ({exc})"
            )
            errors.append(f"{where}:{reader.line_num}: {why}; row skipped")
            continue
        finally:
            csv.field_size_limit(old)
        yield reader.line_num, fields


# ----------------------------------------------------------------------------- output paths


def check_output_file(path: str | os.PathLike, make_folders: bool = False) -> Path:
    """Check, before any work, that a file can be written at ``path``; returns it as a ``Path``.

    ``make_folders=False``: its folder must exist (a mistyped ``--json
    /nonexistent/dir/x.json`` is refused, never created). ``True``: missing
    folders may be created, so the nearest existing one must be a writable folder.
    Checked with ``os.access``, so a measurement of minutes is not thrown away on
    a path that was never writable (``calibrate --out /etc/passwd/x``).

    Raises
    ------
    IsADirectoryError
        ``path`` is a folder.
    FileNotFoundError
        Its folder does not exist and ``make_folders`` is false.
    NotADirectoryError
        A part of the path that must be a folder is a file.
    PermissionError
        The folder is not writable.
    OSError
        ``path`` exists and is not a regular file (``EINVAL``).
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file to write", str(path))
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists() and not make_folders:
        raise FileNotFoundError(errno.ENOENT, f"folder {folder} does not exist (it is not created)", str(path))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{folder} is a file, not a folder", str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"folder {folder} is not writable", str(path))
    _probe_folder(folder, path)
    if path.exists() and not path.is_file():
        # /proc/version, a device or a FIFO: the atomic write would fail late with
        # "No such file or directory" (hostile trial round 6, S-c)
        raise OSError(errno.EINVAL, "exists and is not a regular file (a device, FIFO or /proc file)", str(path))
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, "not writable", str(path))
    return path


def _probe_folder(folder: Path, path: Path) -> None:
    """Create and remove one temporary file in ``folder``, where the atomic write
    of ``path`` will create its own: ``os.access`` says yes to root on ``/proc``
    and on a read-only mount, and the write then failed late, as "No such file
    or directory" for ``--json /proc/version`` (hostile trial round 6, S-c)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kw-probe.", suffix=".tmp")
    except OSError as exc:
        raise OSError(
            exc.errno, f"folder {folder} does not accept new files ({exc.strerror or exc})", str(path)
        ) from None
    os.close(fd)
    os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` whole or not at all; returns the path.

    The text goes to a temporary file in the same folder (same file system, so
    ``os.replace`` is atomic) and replaces ``path`` only once written and
    flushed: a full disk or a kill leaves the previous file as it was (or no
    file), never a truncated one. Missing folders above ``path`` are created
    (every CLI output may create its folders; its inputs must exist). The file gets the mode a plain ``open`` would
    give (``0o666`` less the umask). Our own code because the standard library
    has the pieces (``tempfile.mkstemp``, ``os.replace``) but no one call.

    Raises
    ------
    OSError
        The write, flush or replace failed; ``filename`` is ``path`` (not the
        temporary file, which is removed), ``strerror`` the cause.
    """
    import tempfile

    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)  # an output may create its folders (inputs must exist)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding=encoding) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write ({exc.strerror or exc})", str(path)) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path
