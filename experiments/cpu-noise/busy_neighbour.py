"""Busy-loop neighbour processes for measurement scripts (A/A, gate power).

A neighbour is a separate Python process spinning ``while True: pass``: one
core's worth of CPU demand, the interference a shared runner sees from another
job. Used by ``experiments/cpu-noise/aa_stability.py --neighbour N`` and
``experiments/cpu-noise/gate_power.py --neighbour N``; it is a measurement condition, never
part of kernelwatch itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys


@contextlib.contextmanager
def neighbours(n: int, cpu: int | None = None):
    """Run ``n`` busy-loop processes for the ``with`` block, then end them (by pid).

    ``cpu`` pins them to that core (``os.sched_setaffinity``), where supported.
    Raises ``ValueError`` for a negative ``n``.
    """
    if n < 0:
        raise ValueError(f"neighbour count must be >= 0, got {n}")
    procs = []
    try:
        for _ in range(n):
            p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            if cpu is not None and hasattr(os, "sched_setaffinity"):
                try:
                    os.sched_setaffinity(p.pid, {cpu})
                except OSError:
                    pass
            procs.append(p)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def loadavg() -> str:
    """The 1-, 5- and 15-minute load averages and the CPU count, one line."""
    try:
        a, b, c = os.getloadavg()
    except (AttributeError, OSError):
        return "load average unknown"
    return f"load average {a:.2f} / {b:.2f} / {c:.2f} (1/5/15 min) on {os.cpu_count()} CPUs"
