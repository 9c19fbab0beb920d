"""Records of a commit whose measurement was cut off: kept, never deleted (issue 26).

``kernelwatch run`` measures each commit into a scratch folder
(:func:`harness.measure.runner.new_scratch`) and moves it into place only when
asv stored the commit's results file. The suite writes one kernelwatch record
per finished case as it goes, so a commit cut off by a signal (``timeout``
sends SIGTERM), by asv failing, or by a crash still has the records of the
cases that finished. They are moved into the results folder
(:func:`keep_records`) instead of being deleted with the scratch folder: the
commit still counts as not measured (that needs asv's file), so the next run
over it measures it again and appends (later records of a key win,
:mod:`harness.core.records`), and the next run names the commits that have
records but no asv result (:func:`records_without_results`).

SIGTERM's default action ends Python without running ``finally`` blocks, so
:func:`sigterm_raises` turns it into :class:`Interrupted` (a
``KeyboardInterrupt``, which the CLI already reports as "interrupted") for the
length of a run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from pathlib import Path

from harness.core import records
from harness.core.workspace import RESULTS_STATE_DIR


class Interrupted(KeyboardInterrupt):
    """The run got SIGTERM; raised from the signal handler of :func:`sigterm_raises`."""


@contextlib.contextmanager
def sigterm_raises(signals: tuple = (signal.SIGTERM,)):
    """Within the block, each of ``signals`` (default SIGTERM) raises
    :class:`Interrupted` (so ``finally`` blocks run).

    Only the main thread can set a handler; elsewhere the block runs unchanged.
    A process forked inside the block dies of the signal as by default. The
    previous handlers are restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            # a forked child (publish's worker pool) inherits the handler; multiprocessing
            # ends its workers with SIGTERM and a worker that raised instead of dying hung
            # on a lock, its pool waiting forever: the child dies as by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Interrupted(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def move_records(src_machine_dir: Path, dest_machine_dir: Path) -> dict[str, int]:
    """Move ``<src>/kernelwatch/*.jsonl`` (the calibration excepted) into
    ``<dest>/kernelwatch/``; a file already there gets the lines appended (later
    lines win when read). Returns ``{commit: lines moved}``."""
    moved: dict[str, int] = {}
    rdir = Path(src_machine_dir) / records.RECORDS_SUBDIR
    if not rdir.is_dir():
        return moved
    out_dir = Path(dest_machine_dir) / records.RECORDS_SUBDIR
    for f in sorted(rdir.glob("*.jsonl")):
        if f.name == records.CALIBRATION_FILE:
            continue
        text = f.read_text(encoding="utf-8")
        if not text.strip():
            f.unlink()
            continue
        if text and not text.endswith("\n"):  # a line cut mid-write: keep the whole lines only
            text = text[: text.rfind("\n") + 1]
            if not text:
                f.unlink()
                continue
            f.write_text(text, encoding="utf-8")
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f.name
        if target.exists():
            with open(target, "a", encoding="utf-8") as out:
                out.write(text)
            f.unlink()
        else:
            os.replace(f, target)
        moved[f.stem] = text.count("\n")
    return moved


def keep_records(scratch: Path, results_dir: Path) -> dict[tuple[str, str], int]:
    """Move the records of every machine in ``scratch`` into ``results_dir``
    (:func:`move_records`); nothing else moves. Returns ``{(machine, commit): lines}``."""
    kept: dict[tuple[str, str], int] = {}
    scratch = Path(scratch)
    if not scratch.is_dir():
        return kept
    for mdir in sorted(p for p in scratch.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for commit, n in move_records(mdir, Path(results_dir) / mdir.name).items():
            kept[(mdir.name, commit)] = n
    return kept


def salvage_stale_scratch(results_dir: Path, log=print) -> list[str]:
    """Scratch folders left by a run that was killed outright (SIGKILL, power
    loss): their records are kept (:func:`keep_records`), then the folder is
    removed. Call only while holding the results folder's lock. Returns one
    warning per folder."""
    out = []
    for stale in sorted((Path(results_dir) / RESULTS_STATE_DIR).glob("scratch-*")):
        kept = keep_records(stale, results_dir)
        shutil.rmtree(stale, ignore_errors=True)
        what = ", ".join(f"{c[:8]} ({n} records)" for (_, c), n in sorted(kept.items())) or "no records"
        msg = f"{stale}: scratch folder of an interrupted run; kept {what}, removed the rest (measured again)"
        log(f"warning: {msg}")
        out.append(msg)
    return out


def records_without_results(results_dir: Path, machine: str, measured: set[str]) -> dict[str, int]:
    """``{commit: record lines}`` of ``machine``'s records whose commit has no
    asv result (in ``measured``, full hashes): commits cut off before asv stored them."""
    out = {}
    rdir = records.records_dir(results_dir, machine)
    if not rdir.is_dir():
        return out
    for f in sorted(rdir.glob("*.jsonl")):
        if f.name == records.CALIBRATION_FILE or f.stem in measured:
            continue
        try:
            out[f.stem] = sum(1 for line in f.read_text(encoding="utf-8").splitlines() if line.strip())
        except (OSError, UnicodeDecodeError):
            out[f.stem] = 0
    return out
