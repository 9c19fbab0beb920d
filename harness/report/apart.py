"""Load a results folder in a forked process and stream the columns back
(issue 28): :func:`load_apart`, used by :mod:`harness.report.site` when the
analysis runs inside ``kernelwatch publish``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.report.model import PublishError
from harness.store import results as _results

__all__ = ["load_apart"]


def _load_child(fd: int, results_dir: Path, repo) -> None:
    """In the loading process: load, then pickle ``("ok", (rs, columns))`` or
    ``("error", exception)`` straight into the pipe ``fd`` (streamed: no bytes
    copy of the whole result is held on top of it). An error that would not
    come back out of pickle whole is sent as a :class:`PublishError` with its text."""
    import pickle

    try:
        result = _results.load_columns(results_dir, repo=repo, quartiles=False)
    except BaseException as exc:  # raised again in the parent, which decides
        try:
            blob = pickle.dumps(("error", exc))
            pickle.loads(blob)  # an exception class whose __init__ takes other arguments fails here
        except Exception:
            blob = pickle.dumps(("error", PublishError(f"{type(exc).__name__}: {exc}")))
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        return
    with os.fdopen(fd, "wb") as fh:  # a result that cannot be pickled ends the stream short
        pickle.dump(("ok", result), fh, protocol=pickle.HIGHEST_PROTOCOL)


def _die_with_parent() -> None:
    """Linux: ask for SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``), so a
    killed publish leaves no loader parsing on; nothing where libc cannot be loaded."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def load_apart(results_dir: Path, repo) -> tuple:
    """``(ResultSet, columns)`` of every machine, as
    :func:`harness.store.results.load_columns` (no quartiles), loaded in a forked
    process (Linux) whose memory is all returned when it exits.

    Why: parsing leaves memory with the allocators that the parent would keep
    for the rest of the publish. On 1,000 commits x 2 machines x 504 series the
    loaded columns hold about 52 MiB of arrays and lists, but the loading
    process' resident set grows by 182 MiB, of which ``malloc_trim`` gives back
    only 43 MiB (``experiments/scale/phase_memory.py``, ``docs/performance.md``).
    The result comes back pickled through a pipe, streamed both ways (arrays as
    bytes, each commit string once). Elsewhere than Linux the load runs here.

    A plain ``os.fork`` (not :mod:`multiprocessing`, whose daemonic pool workers
    may not have children): the loader holds only the pipe's write end (a
    parent that stops reading gives it ``BrokenPipeError``, not a blocked
    write), dies with its parent (``PR_SET_PDEATHSIG``), and leaves by
    ``os._exit`` (no parent's ``atexit`` or ``finally`` runs twice). When the
    parent stops early (a signal, an error while reading) the loader is killed
    and reaped before the error goes on.

    Raises
    ------
    Whatever the load raised, raised again here; :class:`PublishError` when the
    loading process died without a result (its exit status named) or its result
    could not be read (the error named).
    """
    if not sys.platform.startswith("linux"):
        return _results.load_columns(results_dir, repo=repo, quartiles=False)
    import pickle

    sys.stdout.flush()
    sys.stderr.flush()  # what is buffered now is written once, by this process
    parent = os.getpid()
    r, w = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # the loader
        code = 1
        try:
            os.close(r)
            _die_with_parent()
            if os.getppid() != parent:  # the parent died before prctl
                os._exit(1)
            _load_child(w, results_dir, repo)
            code = 0
        except BaseException:
            pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as fh:
            tag, obj = pickle.load(fh)
    except (EOFError, pickle.UnpicklingError):  # cut short: the loader died or could not pickle
        status = _reap(pid, wait_s=5.0)
        raise PublishError(f"{results_dir}: the process loading the results died without a result ({status})") from None
    except Exception as exc:  # reading it here failed (MemoryError, a broken object)
        _reap(pid, wait_s=0.0)
        raise PublishError(
            f"{results_dir}: cannot read the loaded results from the loading process ({type(exc).__name__}: {exc})"
        ) from None
    except BaseException:  # a signal or Ctrl-C while reading: stop the loader, then go on
        _reap(pid, wait_s=0.0)
        raise
    _reap(pid, wait_s=60.0)
    if tag != "ok":
        raise obj
    return obj


def _reap(pid: int, wait_s: float) -> str:
    """Wait up to ``wait_s`` seconds for the loader ``pid`` to exit, then SIGKILL
    it; reap it either way. Returns its exit status in words."""
    import signal
    import time

    end = time.monotonic() + wait_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() >= end:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"
