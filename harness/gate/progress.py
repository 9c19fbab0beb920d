"""Progress of ``kernelwatch check``'s phases: rich bars on a terminal, one line
per phase with the time left otherwise (issue 14: a 12-minute check used to
show nothing)."""

from __future__ import annotations

import re
import sys
import time

from harness.core.model import printable

_PERCENT = re.compile(r"^\[\s*(?P<pct>\d+(?:\.\d+)?)%\]")


class PhaseProgress:
    """Progress of the check's phases (discovery, measurement, alternating, re-measurement).

    On a terminal (``tty=True``, default ``sys.stderr.isatty()``) a rich bar per
    phase, driven by asv's ``[ 42.00%]`` lines, with elapsed time and time left.
    Otherwise one line per phase through ``log`` when it ends: its duration and,
    when later phases are known, an estimate of the time they will take (from
    the seconds per benchmark case x commit x round measured so far).
    """

    def __init__(self, log, tty: bool | None = None, console=None):
        self.log = log
        self._console = console  # a rich Console (tests); default: rich's stderr console
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.rate_s: float | None = None  # seconds per case x commit x round
        self._rich = None
        self._task = None
        self._seg = (0, 1)
        self.phases: list[dict] = []

    def segment(self, i: int, n: int) -> None:
        """The next asv runs are part ``i`` of ``n`` of the current phase (its bar spans them all)."""
        self._seg = (i, max(1, n))

    def start(self, name: str, cases: int | None = None) -> None:
        self.phases.append({"phase": name, "cases": cases, "t0": time.monotonic()})
        self._seg = (0, 1)
        if self.tty:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            if self._rich is None:
                if self._console is None:
                    from rich.console import Console

                    self._console = Console(stderr=True)  # stdout carries the summary
                self._rich = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    TextColumn("{task.percentage:>5.1f}%"),
                    TimeElapsedColumn(),
                    TextColumn("left"),
                    TimeRemainingColumn(),
                    transient=False,
                    console=self._console,
                )
                self._rich.start()
            from rich.markup import escape

            self._task = self._rich.add_task(f"check: {escape(printable(name))}", total=100.0)

    def line(self, text: str) -> None:
        """One line of asv output: advance the bar on a percentage line."""
        if self._rich is None or self._task is None:
            return
        m = _PERCENT.match(text)
        if m:
            i, n = self._seg
            self._rich.update(self._task, completed=min(100.0, (i + float(m["pct"]) / 100.0) / n * 100.0))

    def estimate(self, cases: int) -> float | None:
        return None if self.rate_s is None else self.rate_s * cases

    def end(
        self, detail: str = "", *, work: int | None = None, next_cases: int | None = None, next_name: str | None = None
    ) -> float:
        """Close the current phase; ``work`` = cases x commits x rounds it ran (sets the rate)."""
        ph = self.phases[-1]
        secs = time.monotonic() - ph["t0"]
        ph["seconds"] = round(secs, 1)
        if work:
            self.rate_s = secs / work
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, completed=100.0)
            self._task = None
        left = ""
        if next_name is not None:
            est = self.estimate(next_cases or 0)
            left = f"; next: {next_name}" + (f", about {est:.0f} s left" if est is not None else "")
        msg = f"  [{len(self.phases)}] {ph['phase']}: {secs:.0f} s{(' ' + detail) if detail else ''}{left}"
        msg = printable(msg, keep_layout=True)  # nor a terminal control character (issue 29 F4)
        if self._rich is not None:
            self._rich.console.print(msg, markup=False)  # a case or path from the data is no markup
        else:
            self.log(msg)
        return secs

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None


def quiet_progress() -> PhaseProgress:
    return PhaseProgress(lambda m: None, tty=False)
