"""Bounded child processes for every phase of ``run``, ``check``, ``bisect`` and
``triage`` (issue 29, item 4): a time limit per phase, the phase and the case it
was at when it stops, and no process left behind.

:func:`run_bounded` starts a command in a session of its own, under a small
supervisor, and ends every process of that session (the command, asv and all it
starts: benchmark processes, the forkserver; asv gives each of its children a
process group of its own, but they stay in the session) when

- the command finishes (stragglers such as asv's forkserver go with it),
- the phase's time limit passes (:class:`PhaseTimeout`, naming the phase, the
  limit and where it came from, and the case from the command's last output line),
- kernelwatch itself ends, even by ``kill -9``: the supervisor reads a pipe that
  only kernelwatch holds open and ends the session at its end of file.

Why our own code: the standard library's ``subprocess.run(timeout=...)`` kills only
the direct child (asv), never its children, ``os.killpg`` misses asv's children
(their own process groups), and nothing in our dependencies (no ``psutil``)
tracks a process tree; the session id in ``/proc/<pid>/stat`` reaches them all.

Limits: :data:`PHASE_LIMITS_S` per phase kind; ``$KERNELWATCH_PHASE_LIMIT_S``
(seconds, 1 to :data:`MAX_LIMIT_S`) overrides every kind; a caller's explicit
``limit_s`` overrides both.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

#: Default time limit of each phase kind, seconds. asv bounds a benchmark's own
#: run (``timeout``, 900 s in our suite) but not its discovery, which imports the
#: whole suite: a head whose module hangs at import stalled ``check`` forever.
PHASE_LIMITS_S = {
    "discover": 1800.0,  # asv listing one commit's suite (imports it once)
    "measure": 6 * 3600.0,  # one asv run over a pair of commits, or one commit of `run`
    "probe": 600.0,  # importing one commit's suite in a fresh interpreter
    "find": 12 * 3600.0,  # asv find over a bisection range
    "git": 300.0,  # a git command (archive, show)
    "profile": 1800.0,  # one round of a triage/profile worker (imports torch and the suite first)
}
#: Environment variable that overrides every phase kind's limit, in seconds.
LIMIT_ENV = "KERNELWATCH_PHASE_LIMIT_S"
#: Largest accepted limit (a week): a larger value is a typo, not a phase.
MAX_LIMIT_S = 7 * 24 * 3600.0
#: Seconds between SIGTERM to the group and SIGKILL on a timeout.
KILL_GRACE_S = 5.0


class PhaseTimeout(RuntimeError):
    """A phase ran past its time limit; its whole process group was killed.

    Attributes: ``phase`` (e.g. ``"check: measure"``), ``case`` (what the command
    was at: its last output line, e.g. ``Discovering benchmarks`` or a benchmark
    name), ``limit_s``, ``source`` (where the limit came from), ``output`` (the
    command's stdout and stderr up to then).
    """

    def __init__(self, phase: str, case: str, limit_s: float, source: str, output: str = ""):
        self.phase, self.case, self.limit_s, self.source, self.output = phase, case, limit_s, source, output
        super().__init__(
            f"phase '{phase}' stopped at its time limit of {limit_s:g} s ({source}) while at: {case}; "
            "its processes were killed"
        )


class LimitError(ValueError):
    """``$KERNELWATCH_PHASE_LIMIT_S`` or a ``limit_s`` is not a number of seconds in range."""


@dataclass
class Finished:
    """A bounded command that ended by itself: exit status, its output, wall seconds."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _check_limit(value: float, what: str, typed: str | None = None) -> float:
    """``value`` as seconds, or :class:`LimitError` naming ``what`` and the value as
    typed (``typed``, the environment's text): ``1e400`` was reported as ``=inf``,
    a value nobody wrote (hostile trial round 6, S-m)."""
    shown = repr(typed) if typed is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LimitError(f"{what}={shown or repr(value)} is not a number of seconds (accepted: 1 to {MAX_LIMIT_S:g})")
    if not 1 <= value <= MAX_LIMIT_S:
        raise LimitError(
            f"{what}={shown or format(value, 'g') + ' s'} is out of range (accepted: 1 to {MAX_LIMIT_S:g} s)"
        )
    return float(value)


def phase_limit(kind: str, limit_s: float | None = None) -> tuple[float, str]:
    """``(seconds, source)`` of the time limit of a phase of ``kind`` (a key of
    :data:`PHASE_LIMITS_S`): ``limit_s`` when given, else ``$KERNELWATCH_PHASE_LIMIT_S``,
    else the default.

    Raises
    ------
    LimitError
        A limit that is not a finite number of seconds from 1 to :data:`MAX_LIMIT_S`
        (the message names the variable and the accepted range).
    KeyError
        An unknown ``kind``.
    """
    default = PHASE_LIMITS_S[kind]
    if limit_s is not None:
        return _check_limit(limit_s, "limit_s"), "set by the caller"
    raw = os.environ.get(LIMIT_ENV)
    if raw is not None and raw.strip():
        try:
            value = float(raw)
        except ValueError:
            raise LimitError(
                f"{LIMIT_ENV}={raw!r} is not a number of seconds (accepted: 1 to {MAX_LIMIT_S:g})"
            ) from None
        return _check_limit(value, LIMIT_ENV, raw), f"${LIMIT_ENV}"
    return default, f"default for {kind!r}; ${LIMIT_ENV} overrides"


def session_pids(sid: int) -> list[int]:
    """Pids of the live processes of session ``sid`` (Linux ``/proc/<pid>/stat``,
    field 6; zombies left out), this process excluded; ``[]`` where there is no ``/proc``."""
    me, out = os.getpid(), []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:  # a zombie is gone already
            out.append(int(name))
    return out


# The supervisor: the leader of the command's session. It runs the command, and kills
# every process of the session (asv gives each of its children a process group of its
# own, but they stay in the session) when the command ends (stragglers: asv's forkserver)
# or when its stdin, a pipe only kernelwatch holds, reaches end of file (kernelwatch gone,
# even by kill -9). The session scan is session_pids(), repeated here: the supervisor
# runs with the command's environment, where harness may not be importable.
_SUPERVISOR = r"""
import os, signal, subprocess, sys, threading
def end_session(sig):
    me, sid = os.getpid(), os.getsid(0)
    for _ in range(20):
        pids = []
        for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if name.isdigit() and int(name) != me:
                try:
                    with open("/proc/%s/stat" % name, "rb") as fh:
                        f = fh.read().rsplit(b")", 1)[1].split()
                    if f[0] != b"Z" and int(f[3]) == sid:
                        pids.append(int(name))
                except (OSError, IndexError, ValueError):
                    pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if sig != signal.SIGKILL:
            return
        threading.Event().wait(0.05)
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def orphaned():
    try:
        while os.read(0, 1):
            pass
    except OSError:
        pass
    end_session(signal.SIGKILL)
    os._exit(137)
threading.Thread(target=orphaned, daemon=True).start()
rc = child.wait()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
end_session(signal.SIGTERM)
sys.stdout.flush()
os._exit(rc if rc >= 0 else 128 - rc)  # not sys.exit: the reader thread must not block shutdown
"""


def kill_session(sid: int, grace_s: float = KILL_GRACE_S, leader: subprocess.Popen | None = None) -> None:
    """End every process of session ``sid`` (the supervisor's pid): SIGTERM, then
    SIGKILL after ``grace_s`` (at once when ``grace_s`` is 0), repeated until none
    is left (a dying asv may still fork). By ``/proc`` where there is one, else by
    the process group ``sid`` (``os.killpg``). Processes already gone are fine."""

    def signal_all(sig) -> bool:
        pids = session_pids(sid)
        try:
            os.killpg(sid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        return bool(pids)

    if grace_s > 0 and signal_all(signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and session_pids(sid):
            if leader is not None and leader.poll() is None:
                try:
                    leader.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(0.1)
    for _ in range(50):
        if not signal_all(signal.SIGKILL):
            break
        if leader is not None:
            leader.poll()  # reap the supervisor, or it stays listed as a zombie of the session
        time.sleep(0.05)


def last_line(lines: Sequence[str]) -> str:
    """The command's last non-empty output line (the default ``describe``)."""
    for ln in reversed(lines):
        if ln.strip():
            return ln.strip()
    return "no output yet"


def run_bounded(
    cmd: Sequence[str],
    *,
    phase: str,
    kind: str,
    limit_s: float | None = None,
    env: dict | None = None,
    cwd=None,
    on_line: Callable[[str], None] | None = None,
    describe: Callable[[Sequence[str]], str] = last_line,
) -> Finished:
    """Run ``cmd`` in its own session under the supervisor; stdout lines go to
    ``on_line`` as they come (an exception there stops the display, never the
    command). The process group is killed when the command ends, at the time
    limit of ``kind`` (:func:`phase_limit`), or when this process ends.

    Returns
    -------
    Finished
        When the command ended by itself (any exit status).

    Raises
    ------
    PhaseTimeout
        At the time limit; ``case`` is ``describe(stdout lines so far)``.
    LimitError
        A bad limit (before anything starts).
    """
    limit, source = phase_limit(kind, limit_s)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISOR, *cmd],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        errors="replace",
        start_new_session=True,
    )
    out: list[str] = []
    recent: deque[str] = deque(maxlen=200)
    err: list[str] = []

    def read_out():
        show = on_line
        for line in proc.stdout:
            out.append(line)
            recent.append(line.rstrip("\n"))
            if show is not None:
                try:
                    show(line.rstrip("\n"))
                except Exception:  # a progress display must never stop a measurement
                    show = None

    readers = [
        threading.Thread(target=read_out, daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),
    ]
    for t in readers:
        t.start()
    try:
        try:
            rc = proc.wait(timeout=max(0.0, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            case = describe(list(recent))
            kill_session(proc.pid, leader=proc)
            proc.wait()
            for t in readers:
                t.join(timeout=5)
            raise PhaseTimeout(phase, case, limit, source, "".join(out) + "".join(err)) from None
    except BaseException:
        kill_session(proc.pid, grace_s=0, leader=proc)  # KeyboardInterrupt and the like: nothing left behind
        raise
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
    kill_session(proc.pid, grace_s=0, leader=proc)  # what the supervisor's SIGTERM did not end
    for t in readers:
        t.join(timeout=5)
    return Finished(rc, "".join(out), "".join(err), time.monotonic() - t0)
