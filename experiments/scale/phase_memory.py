#!/usr/bin/env python
"""Resident memory and CPU time after each phase of ``kernelwatch publish``'s
analysis path (``--analysis auto``, the default), on one results history (issue 28).

``load_columns`` runs in a fresh process, as publish runs it
(:func:`harness.report.apart.load_apart`), unless ``--in-process``; the peak
printed is this process' own (``RUSAGE_SELF``), and the loading process'
peak is printed on its own line (``RUSAGE_CHILDREN``, the largest child).

The phases are those of :func:`harness.report.site._build` when it runs the
analysis: ``load_columns`` (:func:`harness.store.results.load_columns`, no
quartiles), ``points`` (each series' points as a
:class:`harness.store.model.PointView` over its columns, as publish does; with
``--held`` one :class:`harness.core.model.Point` per point, as before), ``build_inputs`` (:func:`harness.store.dataset.build_inputs`) and
``analyze`` (:func:`harness.analysis.analyze_inputs`). After each it prints the
resident set (``/proc/self/statm``, MiB, after a garbage collection), the peak
resident set so far (``getrusage(RUSAGE_SELF).ru_maxrss``, MiB) and the CPU
time so far (user + system, seconds), and the growth of the resident set over
the previous phase. It tells which phase holds the memory that ``vs_asv.py``
reports as one peak.

Usage::

    python experiments/scale/phase_memory.py --data /tmp/kw-1k [--json OUT]

``--data`` is a ``vs_asv.py`` history (``results/`` and ``repo/`` inside).
Exits 2 when the folder has no ``results/``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a vs_asv.py history (results/ and repo/ inside)")
    ap.add_argument("--json", type=Path, help="also write the phases here")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="load here, not in a fresh process as publish does (publish before issue 28's loading apart)",
    )
    ap.add_argument(
        "--held",
        action="store_true",
        help="hold one Point object per point (columns.points(), publish before issue 28's views)",
    )
    a = ap.parse_args(argv)
    results = a.data / "results"
    if not results.is_dir():
        print(f"{results}: no results folder (generate one with vs_asv.py --data {a.data})", file=sys.stderr)
        return 2
    repo = a.data / "repo" if (a.data / "repo").is_dir() else None

    from harness import analysis as A
    from harness.store import results as R
    from harness.store.dataset import build_inputs

    rows: list[dict] = []

    def phase(name: str, **extra) -> None:
        gc.collect()
        row = {"phase": name, "rss_mib": _rss_mib(), "peak_mib": _peak_mib(), "cpu_s": _cpu_s(), **extra}
        row["rss_growth_mib"] = row["rss_mib"] - rows[-1]["rss_mib"] if rows else 0.0
        rows.append(row)
        more = " ".join(f"{k}={v}" for k, v in extra.items())
        print(
            f"{name:14s} rss {row['rss_mib']:7.1f} MiB (+{row['rss_growth_mib']:6.1f})  "
            f"peak {row['peak_mib']:7.1f} MiB  cpu {row['cpu_s']:6.1f} s  {more}",
            flush=True,
        )

    t0 = time.perf_counter()
    phase("imports")
    if a.in_process:
        rs, columns = R.load_columns(results, repo=repo, quartiles=False)
    else:
        from harness.report.apart import load_apart as _load_apart

        rs, columns = _load_apart(results, repo)
    phase("load_columns", series=len(columns))
    if not a.in_process:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"{'':14s} the loading process: peak {kids.ru_maxrss / 1024:7.1f} MiB  cpu {kids.ru_utime + kids.ru_stime:6.1f} s"
        )
    n_points = 0
    for key, c in columns.items():
        s = rs.series[key] = R.Series(key=key, unit=c.unit, type=c.type)
        s.points = c.points() if a.held else c.point_view()
        n_points += len(s.points)
    phase("points", points=n_points)
    inputs = build_inputs(rs)
    phase("build_inputs", aux_series=len(inputs.aux_series))
    _, out = A.analyze_inputs(inputs, A.AnalysisConfig())
    phase("analyze", findings=len(out["findings"]))
    print(f"wall {time.perf_counter() - t0:.1f} s")
    if a.json:
        a.json.write_text(json.dumps({"data": str(a.data), "phases": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
