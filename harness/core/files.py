"""Opening input files that may not be files: the one place results, records,
calibrations, ``machine.json``, ``benchmarks.json``, Liger CSVs and analysis
reports are opened for reading.

A FIFO named ``x.json`` in a results folder blocks a plain ``open()`` forever
(it waits for a writer); a device or socket is no better. :func:`open_regular`
opens without blocking (``O_NONBLOCK``), checks with ``fstat`` on the open
descriptor (no race between a check and the open) that it is a regular file,
and only then hands back a normal file object.
"""

from __future__ import annotations

import errno
import os
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
