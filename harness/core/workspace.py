"""The workspace that ``kernelwatch run``, ``check``, ``bisect``, ``triage`` and
``profile`` share: the repository root, kernelwatch's state folder in it, this
device's asv machine entry and launch method, a work folder per command and
commit pair, and the advisory lock that keeps two of them apart.

Written once here; each command opens a :class:`Workspace` and takes what it
needs:

    ws = Workspace.open(repo, "check")        # WorkspaceError: not a repository
    ws.identify()                             # machine name, ~/.asv-machine.json, launch
    with ws.lock(pair, wait_s=..., log=log):  # LockBusy: held past wait_s, naming the holder
        work = ws.fresh(pair)                 # .kernelwatch/check/<pair>/, emptied

The lock is an ``fcntl.flock`` (POSIX) on ``<folder>/.kernelwatch/lock``
(:func:`results_lock`): released by the kernel when the holder exits, even on a
crash, so a stale lock file never blocks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core import devices, files

#: kernelwatch's state folder in the repository (work folders, locks, checkouts).
STATE_DIR = ".kernelwatch"
#: kernelwatch's own folder inside a results directory (lock, scratch, quarantine).
RESULTS_STATE_DIR = ".kernelwatch"
#: Seconds a second process waits for a lock by default (``$KERNELWATCH_LOCK_WAIT_S`` overrides).
DEFAULT_LOCK_WAIT_S = 1800.0
#: Longest wait ``$KERNELWATCH_LOCK_WAIT_S`` may set: one day (``nan``/``inf`` waited forever).
MAX_LOCK_WAIT_S = 86_400.0


class WorkspaceError(RuntimeError):
    """A command that cannot start: not a git repository, a bad setting."""


class LockBusy(WorkspaceError):
    """Another kernelwatch process holds the lock (the message says who)."""


def repo_root(path: str | os.PathLike = ".") -> Path:
    """The working tree root of the git repository containing ``path``.

    Raises
    ------
    WorkspaceError
        When ``path`` is not inside a git repository (or does not exist).
    """
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise WorkspaceError(f"{Path(path).resolve()} is not inside a git repository") from None
    return Path(repo.working_tree_dir)


def write_machine_entry(info: dict) -> Path:
    """Merge ``info`` into ``~/.asv-machine.json`` (other machines kept), as
    ``asv machine`` would, with kernelwatch's GPU identity keys added."""
    path = Path(os.path.expanduser("~/.asv-machine.json"))
    data = {}
    if path.exists():
        try:
            data = files.read_json(path)
        except ValueError:  # not JSON, or over a limit: rewritten whole
            data = {}
        data = data if isinstance(data, dict) else {}
    data[info["machine"]] = info
    data["version"] = 1
    path.write_text(json.dumps(data, indent=4, sort_keys=True))
    return path


def _lock_holder(path: Path) -> str:
    try:
        info = files.read_json(path)  # bounded: the lock file sits in a results folder anyone may write
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info:
        return "another process (no holder recorded)"
    return (
        f"pid {info.get('pid', '?')} on {info.get('host', '?')} ({info.get('command', '?')}, "
        f"since {info.get('since', '?')})"
    )


def lock_wait_default() -> float:
    """``$KERNELWATCH_LOCK_WAIT_S``, else :data:`DEFAULT_LOCK_WAIT_S`.

    Raises
    ------
    WorkspaceError
        When the variable is not a finite number of seconds from 0 to
        :data:`MAX_LOCK_WAIT_S` (``nan``, ``inf``, negative), naming the range.
    """
    from harness.core import env

    try:
        return env.number("KERNELWATCH_LOCK_WAIT_S", DEFAULT_LOCK_WAIT_S, 0.0, MAX_LOCK_WAIT_S, "seconds")
    except env.EnvError as exc:
        raise WorkspaceError(str(exc)) from None


@contextlib.contextmanager
def results_lock(
    folder: str | os.PathLike,
    *,
    what: str = "kernelwatch run",
    wait_s: float | None = None,
    log=print,
    poll_s: float = 0.5,
):
    """Hold the advisory lock of a folder (``<folder>/.kernelwatch/lock``).

    When another process holds it, one line says who (pid, host, command,
    since) and this one waits up to ``wait_s`` seconds (``None``:
    :func:`lock_wait_default`; ``0``: not at all).

    Raises
    ------
    LockBusy
        When the lock is still held after ``wait_s`` seconds, naming the holder.
    """
    import fcntl

    wait_s = lock_wait_default() if wait_s is None else float(wait_s)
    path = Path(folder) / RESULTS_STATE_DIR / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _lock_holder(path)
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"{folder} is in use by {holder}; {what} gave up after {wait_s:.0f} s (lock file {path})"
                    ) from None
                if not told:
                    log(f"{folder} is in use by {holder}; {what} waits up to {wait_s:.0f} s for it")
                    told = True
                time.sleep(poll_s)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": what,
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class Workspace:
    """One command's place in a repository (see the module docstring).

    ``command`` is ``"run"``, ``"check"``, ``"bisect"``, ``"triage"`` or
    ``"profile"``; its work folders and locks live under
    ``<root>/.kernelwatch/<command>/``. ``ident``, ``machine`` and ``launch``
    are set by :meth:`identify`.
    """

    root: Path
    command: str
    ident: devices.DeviceIdentity | None = None
    machine: str | None = None
    #: asv's ``--launch-method``: ``forkserver`` imports torch once per commit and
    #: round instead of once per case; it is unsafe once a CUDA context exists,
    #: so GPUs keep asv's ``spawn``.
    launch: str | None = None

    @classmethod
    def open(cls, repo: str | os.PathLike, command: str) -> "Workspace":
        """The workspace of ``command`` in the repository containing ``repo``.

        Raises
        ------
        WorkspaceError
            When ``repo`` is not inside a git repository.
        """
        return cls(repo_root(repo), command)

    @property
    def state(self) -> Path:
        """``<root>/.kernelwatch``."""
        return self.root / STATE_DIR

    def identify(self) -> devices.DeviceIdentity:
        """This device's identity; writes its asv machine entry and picks the launch method."""
        self.ident = devices.identify()
        self.machine = self.ident.machine_name()
        write_machine_entry(devices.asv_machine_info(self.ident))
        self.launch = "forkserver" if self.ident.kind == "cpu" else "spawn"
        return self.ident

    def lock(self, tag: str, *, wait_s: float | None = None, log=print):
        """The lock of this command on ``tag`` (a commit pair): a second process
        with the same command and tag waits (:func:`results_lock`)."""
        what = f"kernelwatch {self.command} {tag}"
        return results_lock(self.state / self.command / "locks" / tag, what=what, wait_s=wait_s, log=log)

    def fresh(self, tag: str) -> Path:
        """``<root>/.kernelwatch/<command>/<tag>/``, emptied and created."""
        work = self.state / self.command / tag
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        return work
