#!/usr/bin/env python
"""A/A stability: run the same suite twice on the same commit and compare.

Prints the fraction of series whose medians agree within 1% (goal on a GPU:
at least 95%) and the distribution of the relative differences
``median_B / median_A - 1``.

How (and why this way): both runs go through asv exactly as ``kernelwatch run``
does (the ``kernelwatch`` environment plugin, one fresh benchmark process per
case, asv's median over our samples), each into its own scratch results
directory. An A/A test must see everything that differs between two real runs
of the tracker (new processes, allocator state, JIT and autotune caches, clocks,
the machine's background load); timing the grid twice inside one process would
hide all of that and flatter the figure. The asv configuration, environment
and results live in a scratch folder (not ``.kernelwatch/``, ``.asv/`` or
``results/``), so the script never touches another run's files; the commit is
checked out from git, so uncommitted edits are not measured.

Usage::

    python experiments/cpu-noise/aa_stability.py [--commit REF] [--bench REGEX] [--quick]
                                   [--threshold 0.01] [--goal 0.95] [--neighbour N] [--rounds R]
                                   [--json OUT] [--keep DIR]

``--neighbour N`` runs N busy-loop processes (``experiments/cpu-noise/busy_neighbour.py``)
during both runs, pinned to CPU 0: the CPU target of issue 13 is >= 90% of
series within 2% with one such neighbour (``--threshold 0.02 --goal 0.9
--neighbour 1``). The load average is printed before and after each run.

Exit code: 0 the goal was met, 1 it was not, 2 the runs produced nothing to compare.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL_FRACTION = 0.95
BINS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.10)


@dataclass
class AAReport:
    """Comparison of two runs of the same suite on the same commit.

    ``diffs`` maps a series label to ``median_B / median_A - 1``; ``unpaired``
    lists series with a value in only one run (or none), with why.
    """

    threshold: float
    diffs: dict[str, float] = field(default_factory=dict)
    unpaired: dict[str, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def fraction_within(self) -> float | None:
        """Share of compared series with ``|diff| <= threshold``; ``None`` when none were compared."""
        if not self.diffs:
            return None
        return sum(1 for d in self.diffs.values() if abs(d) <= self.threshold) / len(self.diffs)

    def quantiles(self) -> dict[str, float] | None:
        """p50/p80/p95/max of ``|diff|``."""
        if not self.diffs:
            return None
        xs = sorted(abs(d) for d in self.diffs.values())

        def q(p):
            pos = (len(xs) - 1) * p
            lo = math.floor(pos)
            hi = min(lo + 1, len(xs) - 1)
            return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

        return {"p50": q(0.5), "p80": q(0.8), "p95": q(0.95), "max": xs[-1]}

    def histogram(self) -> list[tuple[str, int]]:
        """Counts of ``|diff|`` per bin of :data:`BINS` (upper edges inclusive)."""
        edges = (0.0,) + BINS + (math.inf,)
        out = []
        for lo, hi in zip(edges, edges[1:]):
            label = f"<= {hi:.2%}" if lo == 0 else (f"> {lo:.2%}" if hi == math.inf else f"({lo:.2%}, {hi:.2%}]")
            out.append((label, sum(1 for d in self.diffs.values() if (abs(d) > lo or lo == 0) and abs(d) <= hi)))
        return out

    def as_dict(self) -> dict:
        return {
            "threshold": self.threshold,
            "n": self.n,
            "fraction_within": self.fraction_within,
            "quantiles_abs": self.quantiles(),
            "histogram": self.histogram(),
            "diffs": dict(sorted(self.diffs.items())),
            "unpaired": dict(sorted(self.unpaired.items())),
        }


def compare(values_a: dict, values_b: dict, threshold: float = 0.01) -> AAReport:
    """Pair two ``{series label: median or None}`` maps.

    Raises ``ValueError`` for a threshold that is not positive.
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    rep = AAReport(threshold=threshold)
    for key in sorted(set(values_a) | set(values_b), key=str):
        a, b = values_a.get(key), values_b.get(key)
        if a is None or b is None or not (a > 0 and b > 0) or not (math.isfinite(a) and math.isfinite(b)):
            rep.unpaired[str(key)] = f"run A: {a!r}, run B: {b!r}"
            continue
        rep.diffs[str(key)] = b / a - 1
    return rep


def medians(results_dir: Path, commit: str) -> tuple[dict, dict, list[str], set]:
    """From one results directory: ``{series label: asv median for commit or None}``,
    ``{series label: share of its samples flagged throttled/contended, or None}``
    (from the kernelwatch record's ``timing.throttled``), the loader's errors, and
    the labels whose value is flagged contended (``timing.extra.cpu.contended``)."""
    from harness.store import results

    rs = results.load(results_dir)
    out, flagged = {}, {}
    contended = set()
    for key, series in rs.series.items():
        pts = [p for p in series.points if p.commit == commit]
        label = f"{key.machine}:{key.case_label()}"
        out[label] = pts[-1].value if pts else None
        timing = ((pts[-1].record or {}).get("timing") or {}) if pts else {}
        flags = timing.get("throttled")
        known = [f for f in flags or [] if f is not None]
        flagged[label] = sum(known) / len(known) if known else None
        if ((timing.get("extra") or {}).get("cpu") or {}).get("contended"):
            contended.add(label)
    return out, flagged, rs.errors, contended


def throttle_summary(flagged: dict) -> str:
    """One line: how many series had throttled (GPU) or contended (CPU) samples."""
    known = {k: v for k, v in flagged.items() if v is not None}
    if not known:
        return "throttling/contention unknown (no clock or scheduler readings in the records)"
    hit = [v for v in known.values() if v > 0]
    share = statistics.fmean(known.values())
    return (
        f"{len(hit)} of {len(known)} series had samples taken while throttled or CPU-contended "
        f"({share:.0%} of all their samples)"
    )


def asv_config(root: Path, scratch: Path, results_dir: Path) -> Path:
    """An asv configuration for one run, kept in ``scratch``.

    ``harness.runner.write_asv_config`` writes to the shared ``.kernelwatch/``
    folder and uses the shared ``.asv/env`` build folder; a concurrent
    ``kernelwatch run`` in the same checkout would race with us there.
    """
    text = re.sub(r"^\s*//.*$", "", (root / "asv.conf.json").read_text(), flags=re.M)
    conf = json.loads(text)
    conf.update(
        {
            "repo": str(root),
            "benchmark_dir": str(root / conf.get("benchmark_dir", "benchmarks")),
            "env_dir": str(scratch / "env"),
            "results_dir": str(results_dir),
            "html_dir": str(scratch / "html"),
            "plugins": [".harness.measure.asv_env"],
        }
    )
    path = scratch / f"asv-{results_dir.name}.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def run_once(
    root: Path,
    scratch: Path,
    name: str,
    commit: str,
    machine: str,
    launch: str,
    quick: bool,
    bench: str | None,
    rounds: int = 1,
) -> tuple[Path, float, subprocess.CompletedProcess]:
    results_dir = scratch / name
    results_dir.mkdir(parents=True, exist_ok=True)
    conf = asv_config(root, scratch, results_dir)
    hashfile = scratch / "hashes.txt"
    hashfile.write_text(commit + "\n")
    env = dict(
        os.environ,
        KERNELWATCH_RESULTS_DIR=str(results_dir),
        KERNELWATCH_MACHINE=machine,
        KERNELWATCH_QUICK="1" if quick else "0",
    )
    cmd = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "--config",
        str(conf),
        "--machine",
        machine,
        "--launch-method",
        launch,
        "--record-samples",
        "--show-stderr",
        f"HASHFILE:{hashfile}",
    ]
    if bench:
        cmd += ["--bench", bench]
    if rounds > 1:
        # asv runs round N of every case, then round N-1, ...: each case's processes
        # are spread over the whole run; asv's value is the median of all rounds' samples.
        cmd += ["-a", f"rounds={rounds}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    (scratch / f"{name}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return results_dir, time.perf_counter() - t0, proc


def print_report(rep: AAReport, out=sys.stdout) -> None:
    fw = rep.fraction_within
    print(f"A/A: {rep.n} series compared, {len(rep.unpaired)} unpaired", file=out)
    if fw is None:
        print("A/A: nothing to compare", file=out)
        return
    print(
        f"A/A: {fw:.1%} of series have medians within {rep.threshold:.0%} "
        f"(goal on a GPU: >= {GOAL_FRACTION:.0%} within 1%; on a CPU with one neighbour: >= 90% within 2%)",
        file=out,
    )
    q = rep.quantiles()
    print("|median_B / median_A - 1|: " + ", ".join(f"{k} {v:.2%}" for k, v in q.items()), file=out)
    signed = list(rep.diffs.values())
    print(f"signed: mean {statistics.fmean(signed):+.2%}, median {statistics.median(signed):+.2%}", file=out)
    for label, count in rep.histogram():
        print(f"  {label:>18s}: {count:4d} {'#' * count}", file=out)
    worst = sorted(rep.diffs.items(), key=lambda kv: -abs(kv[1]))[:5]
    print("largest differences:", file=out)
    for label, d in worst:
        print(f"  {d:+8.2%}  {label}", file=out)
    for label, why in list(rep.unpaired.items())[:5]:
        print(f"  unpaired: {label}: {why}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="HEAD", help="commit to measure twice (default: HEAD)")
    ap.add_argument("--bench", default=None, help="only benchmarks matching this regular expression (asv --bench)")
    ap.add_argument("--quick", action="store_true", help="kernelwatch's --quick grid and stopping rule (default: full)")
    ap.add_argument("--threshold", type=float, default=0.01, help="agreement threshold, relative (default: 0.01)")
    ap.add_argument("--json", dest="json_out", default=None, help="also write the comparison as JSON here")
    ap.add_argument(
        "--keep",
        default=None,
        help="use this folder for the scratch runs and keep it (default: a temporary folder, removed afterwards)",
    )
    ap.add_argument(
        "--goal",
        type=float,
        default=GOAL_FRACTION,
        help=f"share of series that must agree for exit 0 (default: {GOAL_FRACTION})",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="asv rounds (processes) per case and run, as `kernelwatch run --rounds` (default: 1)",
    )
    ap.add_argument(
        "--neighbour",
        type=int,
        default=0,
        help="busy-loop neighbour processes pinned to CPU 0 during both runs (default: 0)",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")

    import git
    from busy_neighbour import loadavg, neighbours

    from harness.core import devices
    from harness.measure import runner

    repo = git.Repo(ROOT)
    commit = repo.commit(args.commit).hexsha
    ident = devices.identify()
    machine = ident.machine_name()
    runner.write_machine_entry(devices.asv_machine_info(ident))
    launch = "forkserver" if ident.kind == "cpu" else "spawn"  # as harness.measure.runner chooses

    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kw-aa-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"A/A on {machine}, commit {commit[:12]}, scratch {scratch}", file=sys.stderr)
    loads = {}
    flagged_any: set = set()
    try:
        got, notes = {}, {}
        for name in ("run-A", "run-B"):
            before = loadavg()
            with neighbours(args.neighbour, cpu=0):
                rdir, secs, proc = run_once(
                    ROOT, scratch, name, commit, machine, launch, args.quick, args.bench, args.rounds
                )
            loads[name] = {"before": before, "after": loadavg()}
            print(
                f"{name}: asv exit {proc.returncode} in {secs:.0f} s (log: {scratch / (name + '.log')}); "
                f"{args.neighbour} busy neighbour(s); before: {before}; after: {loads[name]['after']}",
                file=sys.stderr,
            )
            vals, flagged, errors, contended = medians(rdir, commit)
            flagged_any.update(contended)
            for e in errors:
                print(f"{name}: warning: {e}", file=sys.stderr)
            got[name] = vals
            notes[name] = throttle_summary(flagged)
        rep = compare(got["run-A"], got["run-B"], args.threshold)
        print_report(rep)
        # Series whose value either run flagged as measured under contention (too few
        # clean samples): reported with that status, never as a plain number.
        both_clean = {k: d for k, d in rep.diffs.items() if k not in flagged_any}
        within_clean = (
            sum(1 for d in both_clean.values() if abs(d) <= args.threshold) / len(both_clean) if both_clean else None
        )
        print(
            f"A/A: {len(flagged_any)} series flagged contended in a run (status 'contended' when read: no value, "
            f"a badge; unpaired above if their value was dropped); of the {len(both_clean)} compared and clean: "
            + (f"{within_clean:.1%} within {args.threshold:.0%}" if within_clean is not None else "none")
        )
        for name, note in notes.items():
            print(f"{name}: {note}")
            print(
                f"{name}: {args.neighbour} busy neighbour(s); {loads[name]['before']} before, "
                f"{loads[name]['after']} after"
            )
        if args.json_out:
            Path(args.json_out).write_text(
                json.dumps(
                    {
                        "commit": commit,
                        "machine": machine,
                        "quick": args.quick,
                        "rounds": args.rounds,
                        "throttling": notes,
                        "neighbours": args.neighbour,
                        "load": loads,
                        "goal": args.goal,
                        "contended_series": sorted(flagged_any),
                        **rep.as_dict(),
                    },
                    indent=2,
                )
                + "\n"
            )
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if rep.fraction_within is None:
        return 2
    return 0 if rep.fraction_within >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
