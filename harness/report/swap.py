"""Atomic replacement of a published site: build beside it, swap it in when whole.

``publish`` never writes into the live output folder. It builds the new site in
a scratch folder beside it (same parent, so the same filesystem), and only when
the build has finished (every page written, the results usable) swaps the two
folders:

- on Linux, with one ``renameat2(RENAME_EXCHANGE)`` system call (Linux 3.15+,
  glibc 2.28+; ``man 2 rename``): readers see the old folder or the new one,
  never a mix and never nothing, whatever happens to the process;
- elsewhere, or on a filesystem that does not support the exchange, with two
  ``rename`` calls (old -> ``.<name>.kw-old-*``, new -> name): a kill between
  the two leaves the old site under the ``kw-old`` name, and the next
  :func:`begin` puts it back before doing anything else.

The entries of the output folder that ``publish`` does not own (anything not
in ``owned``: a ``CNAME``, a ``.nojekyll``, a user's notes) are carried into
the new folder as hard links (copies where the filesystem has none), so they
are left as they were. A failed build (an exception, a full disk, nothing
usable) removes the scratch folder and leaves the old site untouched; a
killed build leaves a scratch folder named with its process id, removed by
the next :func:`begin` once that process is gone.

Why our own code: the standard library has ``os.replace`` (atomic for files,
and for a folder only onto an empty one); no well-kept library swaps two
non-empty folders, and the system call is twenty lines through ``ctypes``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import uuid
from pathlib import Path

__all__ = ["Staging", "begin", "exchange"]

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
_STAGE = ".kw-stage-"
_OLD = ".kw-old-"


def _renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the folders ``a`` and ``b`` (both must exist). Returns
    ``False`` when the platform or filesystem cannot (then nothing changed);
    raises :class:`OSError` for any other failure of the system call."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_of(name: str, marker: str) -> int | None:
    try:
        return int(name.split(marker, 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return None


def _recover(out: Path) -> None:
    """Undo what a killed :meth:`Staging.commit` or build left beside ``out``:
    an old site parked by the two-rename fallback goes back when ``out`` is
    missing; scratch and parked folders of processes that are gone are removed."""
    parent, prefix = out.parent, f".{out.name}"
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        for marker in (_OLD, _STAGE):
            if not name.startswith(prefix + marker):
                continue
            pid = _pid_of(name, marker)
            if pid is None or pid == os.getpid() or _alive(pid):
                continue
            path = parent / name
            if marker == _OLD and not out.exists():
                os.rename(path, out)
            else:
                shutil.rmtree(path, ignore_errors=True)


class Staging:
    """A scratch folder beside ``out`` for one build; see the module docstring.

    Attributes
    ----------
    out : Path
        The live output folder (a symbolic link is followed: its target is replaced).
    path : Path
        The scratch folder to build into (exists, empty).
    """

    def __init__(self, out: Path, owned: tuple[str, ...]):
        out = Path(out)
        self.out = Path(os.path.realpath(out)) if out.is_symlink() else out.absolute()
        self.owned = frozenset(owned)
        if self.out.exists() and not self.out.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder", str(self.out))
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _recover(self.out)
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path = self.out.parent / f".{self.out.name}{_STAGE}{tag}"
        self._old = self.out.parent / f".{self.out.name}{_OLD}{tag}"
        self.path.mkdir()
        self.done = False
        #: Old-site folders the swap could not remove (a file made immutable by root):
        #: the new site is in place, and each is named to the user (round 6, S-j).
        self.left_behind: list[Path] = []

    def _carry_extras(self) -> None:
        """Hard-link (or copy) the entries of ``out`` that publish does not own into the scratch folder."""
        if not self.out.is_dir():
            return
        for entry in sorted(os.listdir(self.out)):
            if entry in self.owned:
                continue
            src, dst = self.out / entry, self.path / entry
            if os.path.lexists(dst):
                continue  # written by this build: the new site wins
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif src.is_dir():
                shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
            else:
                _link_or_copy(src, dst)

    def commit(self) -> None:
        """Swap the finished scratch folder in as ``out``; the old site is removed
        afterwards. Raises :class:`OSError` when the swap fails (the old site is then
        still in place)."""
        self._carry_extras()
        if not self.out.exists():
            os.rename(self.path, self.out)
        elif exchange(self.path, self.out):
            self._remove_old(self.path)  # the old site, now at the scratch path
        else:
            os.rename(self.out, self._old)
            try:
                os.rename(self.path, self.out)
            except OSError:
                os.rename(self._old, self.out)
                raise
            self._remove_old(self._old)
        self.done = True

    def _remove_old(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):
            self.left_behind.append(path)

    def abort(self) -> None:
        """Remove the scratch folder; ``out`` is left as it was."""
        if not self.done:
            shutil.rmtree(self.path, ignore_errors=True)


def _link_or_copy(src, dst) -> str:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return str(dst)


def begin(out: Path, owned: tuple[str, ...]) -> Staging:
    """A :class:`Staging` for building a new site for ``out`` (see the module docstring).

    Raises
    ------
    NotADirectoryError
        ``out`` exists and is not a folder (it is left as it is).
    OSError
        The parent of ``out`` cannot be created or written.
    """
    return Staging(out, owned)
