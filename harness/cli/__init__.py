"""The ``kernelwatch`` command line.

Each subcommand parses its arguments, then calls one plain function with
explicit keywords (asv's ``commands/`` pattern), so the functions are testable
without argparse. Exit codes: 0 fine, 1 a regression or blocking slowdown was
found, 2 broken input or could not decide.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from harness.core.files import write_text_atomic
from harness.core.model import printable

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BROKEN = 2


def _err(msg: str) -> None:
    print(printable(f"kernelwatch: error: {msg}", keep_layout=True), file=sys.stderr)


def _log(msg: str) -> None:
    """A progress line to stderr; names from the data carry no terminal control characters."""
    print(printable(msg, keep_layout=True), file=sys.stderr)


# ----------------------------------------------------------------------- list


def cmd_list(as_json: bool = False, out=None) -> int:
    """Every op x provider with whether it can be benchmarked here and why not."""
    out = out or sys.stdout
    import kernels
    from kernels import _backends

    rows = []
    failed = []
    for name in kernels.OP_MODULES:
        try:
            op = kernels.get_op(name)
        except Exception as exc:
            failed.append(name)
            rows.append(
                {
                    "op": name,
                    "provider": None,
                    "backend": None,
                    "available": False,
                    "correctness_only": False,
                    "reason": f"op module failed to import: {type(exc).__name__}: {exc}",
                }
            )
            continue
        for prov in op.providers.values():
            a = _backends.availability(prov.backend)
            rows.append(
                {
                    "op": name,
                    "provider": prov.name,
                    "backend": prov.backend,
                    "available": a.timeable,
                    "correctness_only": a.runnable and not a.timeable,
                    "reason": a.reason,
                    "dtypes": list(prov.dtypes or op.dtypes),
                    "description": prov.description,
                }
            )
    if as_json:
        json.dump(rows, out, indent=2)
        out.write("\n")
    else:
        from rich.table import Table
        from rich.text import Text

        t = Table(title=f"kernelwatch ops on {_backends.benchmark_device()}")
        for col in ("op", "provider", "backend", "benchmarked here", "why / how"):
            t.add_column(col)
        for r in rows:
            mark = "yes" if r["available"] else ("correctness only" if r["correctness_only"] else "no")
            t.add_row(
                *(
                    Text(printable(v))
                    for v in (r["op"], r["provider"] or "-", r["backend"] or "-", mark, r["reason"] or "")
                )
            )
        console(file=out).print(t)
    return EXIT_BROKEN if failed and len(failed) == len(kernels.OP_MODULES) else EXIT_OK


# ----------------------------------------------------------------------- calibrate


def cmd_calibrate(
    out_file: str | None = None, results: str | None = None, quick: bool = False, time_cap_s: float | None = None
) -> int:
    """Measure copy bandwidth and matmul FLOP/s within a time cap; store them for this machine.
    Where it writes is checked first (``OSError`` naming the path, exit 2): a
    measurement of minutes is never lost on a path that cannot be written."""
    from harness.core.devices import identify
    from harness.core.files import check_output_file
    from harness.measure import calibrate

    if out_file:
        check_output_file(out_file, make_folders=True)
    check_output_file(Path(results or "results") / "calibration-check", make_folders=True)
    ident = identify()
    cap = calibrate.DEFAULT_TIME_CAP_S if time_cap_s is None else time_cap_s
    cal = calibrate.measure(ident, quick=quick, progress=lambda m: print(f"  {m}", file=sys.stderr), time_cap_s=cap)
    stored = calibrate.save(cal, Path(results or "results"))
    if out_file:
        calibrate.write_file(cal, out_file)
    for name in calibrate.BANDWIDTH_FIGURES:
        r = cal[name]
        print(
            f"{cal['machine']}: {name} "
            + (
                f"{r['gbps']:.1f} GB/s"
                if r.get("gbps") is not None
                else f"not usable: {r.get('status')}: {r.get('reason')}"
            )
        )
    for dt, m in cal["matmul"].items():
        rate = (
            f"{m['tflops']:.4g} TFLOP/s"
            if m.get("tflops") is not None
            else f"not usable: {m.get('status')}: {m.get('reason')}"
        )
        print(f"{cal['machine']}: matmul {dt} {rate} at {'x'.join(map(str, m['shape']))}")
    for dt, why in cal["skipped"].items():
        print(f"{cal['machine']}: matmul {dt} skipped: {why}")
    print(f"stored in {stored}" + (f" and {out_file}" if out_file else ""))
    return EXIT_OK


# ----------------------------------------------------------------------- selfcheck


def cmd_selfcheck(out_file: str | None = None, quick: bool = False) -> int:
    """Check the timing itself on this machine's GPU (see harness/selfcheck.py);
    0 every check passed, 1 a check failed, 2 no CUDA device or nothing decided."""
    from harness.measure import selfcheck

    report = selfcheck.run(quick=quick, progress=lambda m: print(f"  {m}", file=sys.stderr))
    for line in selfcheck.format_report(report):
        print(line, file=sys.stderr if report["status"] == "no_cuda" else sys.stdout)
    if out_file:
        print(f"report: {selfcheck.write_report(report, out_file)}")
    return int(report["exit_code"])


# ----------------------------------------------------------------------- publish / run


def _add_cache_option(s) -> None:
    s.add_argument(
        "--cache",
        default=None,
        help="folder of the results cache (one SQLite file, results.sqlite): results files already read and "
        "checked, read again when their bytes, their path or kernelwatch change; 'off' for none (default: "
        "$KERNELWATCH_CACHE, which may be 'off', else ~/.cache/kernelwatch/results; entries unused for 14 "
        "days, and the oldest past 2 GiB, are pruned; safe to delete)",
    )


def cmd_publish(
    results: str = "results",
    repo: str | None = ".",
    out: str = "site-out",
    analysis: str = "auto",
    baselines: list[str] | None = None,
    jobs: int | None = None,
    cache: str | None = "off",
) -> int:
    """Build the static site from a results directory (ours or any asv results).

    ``cache``: the results cache folder, ``off``, or ``None`` for the default
    (``$KERNELWATCH_CACHE``, else ``~/.cache/kernelwatch/results``;
    :mod:`harness.store.parse_cache`). The command line passes ``None`` unless
    ``--cache`` is given; callers in Python get no cache unless they ask."""
    from harness.report import site
    from harness.store import parse_cache

    if where := parse_cache.placement_problem(parse_cache.root_from(cache), {"--out": out, "--results": results}):
        _err(where)
        return EXIT_BROKEN
    try:
        with parse_cache.session(cache):
            report = site.publish(
                Path(results),
                Path(out),
                repo=Path(repo) if repo else None,
                analysis=analysis,
                baselines=baselines or (),
                jobs=jobs,
            )
    except (FileNotFoundError, site.PublishError) as exc:
        _err(str(exc))
        return EXIT_BROKEN
    for line in report.errors:
        _log(f"kernelwatch: warning: {line}")
    if not report.usable:
        _err(f"no usable results in {results}: nothing to publish (the site in {out}, if any, is left as it was)")
        return EXIT_BROKEN
    print(
        f"site: {report.index} ({report.pages} pages, {report.series} series, {len(report.machines)} machine{'s' if len(report.machines) != 1 else ''}; "
        f"{report.analysis})"
    )
    return EXIT_OK


def cmd_run(
    range_spec: str | None = None,
    quick: bool = False,
    results: str | None = None,
    out: str | None = None,
    bench: str | None = None,
    rounds: int = 1,
    calibrate: bool = True,
) -> int:
    """Benchmark commits on this machine, then publish."""
    out = out or ("site-quick" if quick else "site-out")
    from harness.measure import runner

    try:
        summary = runner.run_commits(
            range_spec,
            quick=quick,
            results_dir=results,
            bench_filter=bench,
            log=_log,
            rounds=rounds,
            calibrate=calibrate,
        )
    except runner.RunError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    results_dir = results or str(runner.repo_root() / ("results-quick" if quick else "results"))
    code = cmd_publish(results=results_dir, repo=str(runner.repo_root()), out=out, cache=None)
    if summary.failed and not summary.measured and not summary.skipped:
        return EXIT_BROKEN
    return code


# ----------------------------------------------------------------------- check / bisect


def cmd_check(
    base: str,
    head: str,
    threshold: float | None = None,
    alpha: float | None = None,
    rounds: int | None = None,
    bench: str | None = None,
    quick: bool = False,
    summary: str | None = None,
    json_out: str | None = None,
) -> int:
    """PR gate: measure base and head here, interleaved; exit 0 pass, 1 slower, 2 broken/undecided."""
    from harness.gate import check

    try:
        outcome = check.run_check(
            base,
            head,
            threshold=threshold,
            alpha=alpha,
            rounds=rounds,
            bench=bench,
            quick=quick,
            summary=summary,
            json_out=json_out,
        )
    except check.CheckError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    print(printable(outcome.markdown, keep_layout=True))
    return outcome.exit_code


def cmd_bisect(
    good: str,
    bad: str,
    benchmark: str,
    quick: bool = False,
    rounds: int | None = None,
    confirm: bool = True,
    json_out: str | None = None,
) -> int:
    """First commit in good..bad that made ``benchmark`` slower here; exit 0 found, 2 undecided."""
    from harness.gate import bisect

    try:
        outcome = bisect.run_bisect(good, bad, benchmark, quick=quick, rounds=rounds, confirm=confirm)
    except bisect.BisectError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    if json_out:
        write_text_atomic(json_out, json.dumps(outcome.as_dict(), indent=2))
    print(("found: " if outcome.exit_code == EXIT_OK else "undecided: ") + outcome.reason)
    return outcome.exit_code


# ----------------------------------------------------------------------- parser


#: The top-level help, in plain text (the module docstring is reST for the API docs).
DESCRIPTION = (
    "kernelwatch: continuous benchmarks and regression tracking for GPU kernels. "
    "Measure commits (run), build the dashboard (publish), find regressions (analyze), "
    "gate a pull request (check), find the commit that regressed (bisect)."
)
EPILOG = (
    "Exit codes: 0 fine, 1 a regression or blocking slowdown was found, 2 broken input or "
    "could not decide. 'kernelwatch COMMAND --help' explains each option and its default."
)


def version_text() -> str:
    """``kernelwatch X.Y.Z``: the installed distribution's version, else the package's."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        v = version("kernelwatch")
    except PackageNotFoundError:
        from harness import __version__ as v
    return f"kernelwatch {v}"


def console(file=None, stderr: bool = False):
    """A rich Console that wraps at the terminal's width on a terminal and
    never off one (a log, a pipe, CI), where rich would otherwise assume 80 columns."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handler exits 1 silently, which reads as "regression found";
            # raise instead, so main() says so and exits 2 (hostile trial round 5)
            raise BrokenPipeError("the reader of this output went away")

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    tty = hasattr(stream, "isatty") and stream.isatty()
    return _Console(file=stream, width=None if tty else 10_000, soft_wrap=not tty)


def build_parser() -> argparse.ArgumentParser:
    """The ``kernelwatch`` parser: one subparser per subcommand, each added by its
    ``_add_<command>`` function (in this order: the order of ``--help``)."""
    p = argparse.ArgumentParser(prog="kernelwatch", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument(
        "--version", action="version", version=version_text(), help="print the installed kernelwatch version and exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_run,
        _add_publish,
        _add_list,
        _add_calibrate,
        _add_selfcheck,
        _add_analyze,
        _add_check,
        _add_bisect,
        _add_profile,
        _add_triage,
    ):
        add(sub)
    return p


def _int_at_least(minimum: int, maximum: int | None = None):
    """An argparse type: an integer >= ``minimum`` and, when given, <= ``maximum``
    (argparse turns the error into a usage error naming the option, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {text.strip()}")
        return value

    return parse


#: The most ``--rounds`` any command takes. A round is a fresh process per case and
#: commit (seconds to minutes each); the run-to-run spread falls only as 1/sqrt(rounds),
#: so 1000 rounds (a 30x cut) is already days of measuring, and a larger count is a
#: typo, not a plan. ``--rounds 99999999999999999999`` used to start measuring
#: (hostile trial round 6, S-k).
MAX_ROUNDS = 1000
#: The most ``--iters`` / ``--warmup`` calls per case and round: 100000 calls of a
#: 1 ms kernel are already 100 s per case under the profiler.
MAX_CALLS = 100_000

_positive_int = _int_at_least(1)
_nonnegative_int = _int_at_least(0)
_rounds_int = _int_at_least(1, MAX_ROUNDS)
_iters_int = _int_at_least(1, MAX_CALLS)
_warmup_int = _int_at_least(0, MAX_CALLS)


def _finite_float(low: float, high: float | None = None, *, accepted: str):
    """An argparse type: a finite number with ``low < x`` (and ``x < high`` when given);
    the usage error names the option and the value as typed (``--min-effect 1e400``
    was "min_effect must be a finite number, got inf": hostile trial round 6, S-m)."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low < value and (high is None or value < high)):
            raise argparse.ArgumentTypeError(f"expected {accepted}, got {text!r}")
        return value

    return parse


def _nonempty_path(what: str):
    """An argparse type: a path that is not blank. ``--results ''`` read the current
    folder, then said ": no benchmark series" (hostile trial round 6, S-o)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"empty; give {what}")
        return text

    return parse


def _add_run(sub) -> None:
    """``kernelwatch run``."""
    s = sub.add_parser("run", help="benchmark commits on this machine (asv), then build the site")
    s.add_argument(
        "range",
        nargs="?",
        default=None,
        help="commits to measure: 'A..B', one ref, or default the last 5 commits of the current branch",
    )
    s.add_argument(
        "--quick",
        action="store_true",
        help="one small shape per op and a looser stopping rule (default results dir: results-quick)",
    )
    s.add_argument(
        "--results",
        type=_nonempty_path("an asv results folder"),
        default=None,
        help="asv results directory (default: results, or results-quick with --quick)",
    )
    s.add_argument(
        "--out",
        type=_nonempty_path("a folder for the site"),
        default=None,
        help="where to write the site (default: site-out, or site-quick with --quick)",
    )
    s.add_argument("--bench", default=None, help="only benchmarks matching this regular expression (asv --bench)")
    s.add_argument(
        "--rounds",
        type=_rounds_int,
        default=1,
        help="processes per case, spread over each commit's run; the value is the median of all their "
        "samples (asv -a rounds=N; default: 1). On a shared CPU 4 rounds cut the run-to-run spread "
        "about 3x (docs/performance.md) at 4x the time; at most 1000, days of measuring already",
    )
    s.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="never calibrate: use the stored calibration, or none (the figures against measured ceilings "
        "are then withheld and the run says so); default: calibrate when none is usable",
    )
    s.set_defaults(
        func=lambda a: cmd_run(
            a.range, quick=a.quick, results=a.results, out=a.out, bench=a.bench, rounds=a.rounds, calibrate=a.calibrate
        )
    )


def _add_publish(sub) -> None:
    """``kernelwatch publish``."""
    s = sub.add_parser("publish", help="build the static site from existing results")
    s.add_argument(
        "--results",
        type=_nonempty_path("an asv results folder"),
        default="results",
        help="asv results directory, ours or foreign (default: results)",
    )
    s.add_argument(
        "--repo",
        default=None,
        help="git repository for commit order and subjects (default: . when it is one, else none "
        "with a warning; '' for none; a given path that is no git repository is an error)",
    )
    s.add_argument(
        "--out",
        type=_nonempty_path("a folder for the site"),
        default="site-out",
        help="output folder (default: site-out)",
    )
    s.add_argument(
        "--analysis",
        default="auto",
        help="'auto' runs the regression analysis while publishing, 'off' skips it, or the path of a "
        "report written by 'kernelwatch analyze --json' (default: auto)",
    )
    s.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="commit (hash, prefix, or ref with --repo) offered first as the baseline of the kernel x GPU "
        "matrix and the roofline arrows; repeatable (default: the oldest commit, and 1, 10, 100, "
        "1000 commits before the newest)",
    )
    s.add_argument(
        "--jobs",
        type=_positive_int,
        default=None,
        help="worker processes loading machines in parallel when the analysis is not run here "
        "(default: the CPUs available, at most one per machine)",
    )
    _add_cache_option(s)
    s.set_defaults(func=_cmd_publish)


def _cmd_publish(a) -> int:
    """``publish`` from its arguments: an explicit ``--repo`` must be a git repository
    (exit 2 naming it; ``''`` is none); the default ``.`` outside one orders by
    stored dates with a warning, as before."""
    from harness.cli.analyze import repo_problem

    problem = repo_problem(a.repo)
    if problem:
        _err(problem)
        return EXIT_BROKEN
    repo = "." if a.repo is None else a.repo
    return cmd_publish(
        results=a.results,
        repo=repo or None,
        out=a.out,
        analysis=a.analysis,
        baselines=a.baseline,
        jobs=a.jobs,
        cache=a.cache,
    )


def _add_list(sub) -> None:
    """``kernelwatch list``."""
    s = sub.add_parser("list", help="every op x provider, whether it can be benchmarked here and why not")
    s.add_argument("--json", action="store_true", help="JSON: a list of {op, provider, available, reason, ...}")
    s.set_defaults(func=lambda a: cmd_list(as_json=a.json))


def _add_calibrate(sub) -> None:
    """``kernelwatch calibrate``."""
    s = sub.add_parser("calibrate", help="measure this machine's ceilings (copy bandwidth, matmul FLOP/s per dtype)")
    s.add_argument("--out", dest="out_file", default=None, help="also write the calibration to this JSON file")
    s.add_argument("--results", default="results", help="results directory to store it in (default: results)")
    s.add_argument("--quick", action="store_true", help="smaller sizes, shorter sampling")
    s.add_argument(
        "--time-cap",
        dest="time_cap_s",
        type=float,
        default=None,
        help="seconds the figures may take in all; those left out are stored 'no_time' without a value (default: 90)",
    )
    s.set_defaults(
        func=lambda a: cmd_calibrate(out_file=a.out_file, results=a.results, quick=a.quick, time_cap_s=a.time_cap_s)
    )


def _add_selfcheck(sub) -> None:
    """``kernelwatch selfcheck``."""
    s = sub.add_parser(
        "selfcheck",
        help="check the timing itself on this GPU (copy bandwidth, do_bench agreement, "
        "cold vs hot); exit 0 pass, 1 fail, 2 no CUDA device / undecided",
    )
    s.add_argument("--out", dest="out_file", default=None, help="write the JSON report to this file (default: none)")
    s.add_argument("--quick", action="store_true", help="smaller kernels and shorter sampling (default: off)")
    s.set_defaults(func=lambda a: cmd_selfcheck(out_file=a.out_file, quick=a.quick))


def _add_analyze(sub) -> None:
    """``kernelwatch analyze``."""
    s = sub.add_parser(
        "analyze",
        help="regressions, drifts, failures and cross-GPU divergence in a results "
        "directory; exit 0 analysed (findings or not), 2 input unusable",
    )
    s.add_argument(
        "--results",
        required=True,
        type=_nonempty_path("an asv results folder, a folder of Liger CSVs, or one Liger CSV"),
        help="asv results directory (v1/v2, several machines, with kernelwatch records), a folder of "
        "Liger-Kernel benchmark CSVs, or one such CSV",
    )
    s.add_argument(
        "--repo",
        default=None,
        help="git repository for commit order (default: none, order by stored commit date; a path that "
        "is no git repository is an error)",
    )
    s.add_argument(
        "--json",
        dest="json_path",
        type=_nonempty_path("a file path, or '-' for standard output"),
        default=None,
        help="write the versioned JSON report here ('-' for stdout; default: none)",
    )
    s.add_argument(
        "--liger", action="append", default=[], help="also import this Liger CSV (repeatable; default: none)"
    )
    s.add_argument("--compare-asv", default=None, help="asv-published regressions.json to compare with (default: none)")
    s.add_argument(
        "--detector",
        default="binseg",
        choices=["binseg", "rbf", "asv", "otava", "pelt_l1"],
        help="change-point detector (default: binseg, chosen by measurement against the others, "
        "see docs/analysis.md; otava needs 'pip install --no-deps apache-otava')",
    )
    s.add_argument(
        "--min-effect",
        type=_finite_float(0, accepted="a finite number above 0, e.g. 0.05 for a 5 percent change"),
        default=0.05,
        help="smallest relative change reported: a change is reported when its 99%% CI reaches it (default: 0.05)",
    )
    s.add_argument(
        "--fdr",
        type=_finite_float(0, 1, accepted="a number between 0 and 1, both excluded, e.g. 0.05"),
        default=0.05,
        help="false discovery rate across all tests of a run, between 0 and 1 (default: 0.05)",
    )
    s.add_argument(
        "--rows",
        type=_nonnegative_int,
        default=40,
        help="findings shown in the table, 0 or more; all are in the JSON (default: 40)",
    )
    s.add_argument(
        "--suite-path",
        action="append",
        default=[],
        help="with --repo: another repository path the benchmark suite reads; a commit touching it (or "
        "asv's benchmark_dir, or asv.conf.json) is labelled 'benchmark changed' (repeatable; default: none)",
    )
    _add_cache_option(s)
    s.set_defaults(func=lambda a: _cmd_analyze(a))


def _add_check(sub) -> None:
    """``kernelwatch check``."""
    s = sub.add_parser(
        "check",
        help="PR gate: base vs head on this device, interleaved; exit 0 pass, "
        "1 blocking slowdown, 2 broken or undecided",
    )
    s.add_argument("--base", required=True, help="base commit/ref (its configuration is used)")
    s.add_argument("--head", required=True, help="head commit/ref")
    s.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="practical threshold, relative (default: configuration, else 0.05)",
    )
    s.add_argument(
        "--alpha", type=float, default=None, help="Mann-Whitney significance level (default: configuration, else 0.01)"
    )
    s.add_argument(
        "--rounds",
        type=_rounds_int,
        default=None,
        help="interleaved asv rounds per commit, 1 to 1000 (default: configuration, else 2)",
    )
    s.add_argument("--bench", default=None, help="only benchmarks matching this regular expression (asv --bench)")
    s.add_argument("--quick", action="store_true", help="small shapes and short sampling (default: off)")
    s.add_argument(
        "--summary",
        default=None,
        help="also write the markdown summary here (default: none; $GITHUB_STEP_SUMMARY is appended to when set)",
    )
    s.add_argument(
        "--json",
        dest="json_out",
        type=_nonempty_path("a file path"),
        default=None,
        help="write the JSON report here (default: .kernelwatch/check/<base>-<head>/report.json)",
    )
    s.set_defaults(
        func=lambda a: cmd_check(
            a.base,
            a.head,
            threshold=a.threshold,
            alpha=a.alpha,
            rounds=a.rounds,
            bench=a.bench,
            quick=a.quick,
            summary=a.summary,
            json_out=a.json_out,
        )
    )


def _add_bisect(sub) -> None:
    """``kernelwatch bisect``."""
    s = sub.add_parser(
        "bisect",
        help="first commit in good..bad that made a benchmark slower on this device "
        "(asv find, then confirmed); exit 0 found, 2 undecided",
    )
    s.add_argument("--good", required=True, help="a commit where the benchmark is fast")
    s.add_argument("--bad", required=True, help="a later commit where it is slow")
    s.add_argument(
        "--benchmark", required=True, help="asv regular expression selecting one benchmark, optionally some parameters"
    )
    s.add_argument("--quick", action="store_true", help="small shapes and short sampling (default: off)")
    s.add_argument(
        "--rounds",
        type=_rounds_int,
        default=None,
        help="interleaved rounds of the confirmation, 1 to 1000 (default: 2)",
    )
    s.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="report asv find's pick without re-measuring it against its parent",
    )
    s.add_argument(
        "--json",
        dest="json_out",
        type=_nonempty_path("a file path"),
        default=None,
        help="write the outcome as JSON here (default: none)",
    )
    s.set_defaults(
        func=lambda a: cmd_bisect(
            a.good, a.bad, a.benchmark, quick=a.quick, rounds=a.rounds, confirm=a.confirm, json_out=a.json_out
        )
    )


# ----------------------------------------------------------------------- profile / triage (issue 17)


def cmd_profile(
    pattern: str,
    commit: str | None = None,
    out: str | None = None,
    ncu: bool = False,
    quick: bool = False,
    iters: int = 20,
    warmup: int = 3,
    json_out: str | None = None,
    results: str | None = None,
) -> int:
    """Profile matching cases at a commit; exit 0 profiled, 2 nothing matched or a case failed."""
    from harness.measure import profile

    try:
        outcome = profile.run_profile(
            pattern,
            commit=commit,
            out=out,
            ncu=ncu,
            quick=quick,
            iters=iters,
            warmup=warmup,
            results=results,
            log=_log,
        )
    except profile.ProfileError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    for note in outcome.notes:
        _log(f"kernelwatch: note: {note}")
    if json_out:
        write_text_atomic(json_out, json.dumps(outcome.report, indent=1, allow_nan=False, default=str))
    print(printable(outcome.markdown, keep_layout=True))
    print(
        f"profile: {outcome.json_path} and {outcome.md_path}; traces in {outcome.json_path.parent / 'traces'}",
        file=sys.stderr,
    )
    return outcome.exit_code


def cmd_triage(
    base: str | None = None,
    head: str | None = None,
    benchmark: str | None = None,
    finding: str | None = None,
    analysis: str | None = None,
    results: str | None = None,
    rounds: int = 5,
    threshold: float = 0.10,
    alpha: float = 0.01,
    iters: int = 20,
    warmup: int = 3,
    quick: bool = False,
    out: str | None = None,
    json_out: str | None = None,
    summary: str | None = None,
) -> int:
    """Profile base and head interleaved and diff the kernels; exit 0 nothing slower,
    1 a kernel or case slower, 2 could not triage."""
    from harness.gate import triage

    try:
        outcome = triage.run_triage(
            base,
            head,
            benchmark=benchmark,
            finding=finding,
            analysis=analysis,
            results=results,
            rounds=rounds,
            threshold=threshold,
            alpha=alpha,
            iters=iters,
            warmup=warmup,
            quick=quick,
            out=out,
            log=_log,
        )
    except triage.TriageError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    if json_out:
        write_text_atomic(json_out, json.dumps(outcome.report, indent=1, allow_nan=False, default=str))
    if summary:
        write_text_atomic(summary, outcome.markdown)
    print(printable(outcome.markdown, keep_layout=True))
    print(f"triage: {outcome.json_path} and {outcome.md_path}", file=sys.stderr)
    return outcome.exit_code


def _add_profile(sub) -> None:
    """``kernelwatch profile``."""
    s = sub.add_parser(
        "profile",
        help="run matching benchmark cases once under torch.profiler at a commit: "
        "Chrome trace, per-kernel table, compile facts; exit 0 profiled, 2 broken",
    )
    s.add_argument(
        "pattern",
        help="regular expression searched in asv case names, e.g. "
        "\"softmax.*'triton'\" (suite.softmax.track_time('triton', '4096x4096', ...))",
    )
    s.add_argument(
        "--commit",
        default=None,
        help="commit/ref to profile, checked out as 'kernelwatch run' does (default: the working tree "
        "as it is, uncommitted changes included)",
    )
    s.add_argument("--out", default=None, help="output folder (default: .kernelwatch/profile/<sha12>/)")
    s.add_argument(
        "--ncu",
        action="store_true",
        help="also collect Nsight Compute speed-of-light metrics per kernel (needs CUDA and 'ncu' on "
        "PATH; otherwise says so and continues; default: off)",
    )
    s.add_argument("--quick", action="store_true", help="the suite's quick shapes (default: off)")
    s.add_argument("--iters", type=_iters_int, default=20, help="profiled calls per case (1 to 100000; default: 20)")
    s.add_argument("--warmup", type=_warmup_int, default=3, help="calls before profiling (0 to 100000; default: 3)")
    s.add_argument(
        "--json",
        dest="json_out",
        type=_nonempty_path("a file path"),
        default=None,
        help="also write the JSON report here (default: none)",
    )
    s.add_argument(
        "--results", default=None, help="also store the profile in this results directory, for the site (default: none)"
    )
    s.set_defaults(
        func=lambda a: cmd_profile(
            a.pattern,
            commit=a.commit,
            out=a.out,
            ncu=a.ncu,
            quick=a.quick,
            iters=a.iters,
            warmup=a.warmup,
            json_out=a.json_out,
            results=a.results,
        )
    )


def _add_triage(sub) -> None:
    """``kernelwatch triage``."""
    s = sub.add_parser(
        "triage",
        help="profile base and head interleaved and report which kernels got slower or "
        "faster, appeared or disappeared, launch counts, compile facts, environment; "
        "exit 0 nothing slower, 1 slower, 2 could not triage",
    )
    s.add_argument("--base", default=None, help="base commit/ref (default: from --finding)")
    s.add_argument("--head", default=None, help="head commit/ref (default: from --finding)")
    s.add_argument(
        "--benchmark",
        default=None,
        help="regular expression searched in asv case names (default: the finding's series)",
    )
    s.add_argument(
        "--finding", default=None, help="an event id (ev-<hash>) or finding (f<N>) of the report given with --analysis"
    )
    s.add_argument("--analysis", default=None, help="report written by 'kernelwatch analyze --json' (with --finding)")
    s.add_argument(
        "--results",
        default=None,
        help="results directory: also diff the environment of the commits' stored records, and store "
        "the triage there so 'kernelwatch publish' links it from the finding (default: none)",
    )
    s.add_argument(
        "--rounds",
        type=_rounds_int,
        default=5,
        help="profiled rounds per commit, interleaved between the two commits' processes, 1 to 1000 (default: 5)",
    )
    s.add_argument("--threshold", type=float, default=0.10, help="relative change that counts (default: 0.10)")
    s.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="one-sided Mann-Whitney level over the rounds for a kernel to count as slower/faster "
        "(default: 0.01; needs --rounds 4 or more)",
    )
    s.add_argument(
        "--iters", type=_iters_int, default=20, help="profiled calls per case and round (1 to 100000; default: 20)"
    )
    s.add_argument("--warmup", type=_warmup_int, default=3, help="calls before profiling (0 to 100000; default: 3)")
    s.add_argument("--quick", action="store_true", help="the suite's quick shapes (default: off)")
    s.add_argument("--out", default=None, help="output folder (default: .kernelwatch/triage/<base12>-<head12>/)")
    s.add_argument(
        "--json",
        dest="json_out",
        type=_nonempty_path("a file path"),
        default=None,
        help="also write the JSON report here (default: none)",
    )
    s.add_argument("--summary", default=None, help="also write the markdown here (default: none)")
    s.set_defaults(
        func=lambda a: cmd_triage(
            a.base,
            a.head,
            benchmark=a.benchmark,
            finding=a.finding,
            analysis=a.analysis,
            results=a.results,
            rounds=a.rounds,
            threshold=a.threshold,
            alpha=a.alpha,
            iters=a.iters,
            warmup=a.warmup,
            quick=a.quick,
            out=a.out,
            json_out=a.json_out,
            summary=a.summary,
        )
    )


def _cmd_analyze(a) -> int:
    from harness.analysis import AnalysisConfig
    from harness.cli.analyze import run_analyze

    try:
        cfg = AnalysisConfig(detector=a.detector, min_effect=a.min_effect, fdr_q=a.fdr)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    from harness.store import parse_cache

    if where := parse_cache.placement_problem(parse_cache.root_from(a.cache), {"--results": a.results}):
        _err(where)
        return EXIT_BROKEN
    with parse_cache.session(a.cache):
        return run_analyze(
            a.results,
            a.repo,
            a.json_path,
            liger_csvs=a.liger,
            config=cfg,
            max_rows=a.rows,
            compare_asv=a.compare_asv,
            suite_extra=a.suite_path,
        )


def _escape_unencodable_output() -> None:
    """Print what the terminal's encoding cannot show as escapes (``\\u00e9``)
    instead of failing: with an ASCII stdout (``PYTHONIOENCODING=ascii``, a C
    locale) a non-ASCII benchmark name made ``analyze`` exit 2 with a
    ``UnicodeEncodeError`` halfway through its table (hostile trial round 4, O4)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


def main(argv: list[str] | None = None) -> int:
    """Parse, run one subcommand, map failures to exit codes: every crash is 2
    (never 1, which reads as "regression found"); with ``KERNELWATCH_DEBUG`` on
    (:data:`harness.core.env.FLAG_ON`) the traceback is printed too."""
    from harness.core import env

    _escape_unencodable_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        debug = env.flag("KERNELWATCH_DEBUG")
    except env.EnvError as exc:
        _err(str(exc))
        return EXIT_BROKEN
    import signal

    from harness.measure import cutoff

    try:
        # SIGTERM (a CI timeout) and SIGHUP (a closed terminal) end a command as Ctrl-C
        # does: its finally blocks run, scratch folders go, one line says so. They
        # killed publish silently, its staging folder left behind (hostile trial round 7).
        with cutoff.sigterm_raises((signal.SIGTERM, signal.SIGHUP)):
            code = int(args.func(args))
        if sys.stdout is not None:  # None when fd 1 was closed at start
            sys.stdout.flush()  # a reader that went away fails here, not at exit (exit 1, silent)
        return code
    except BrokenPipeError:
        # `kernelwatch analyze | head`: the reader closed the pipe. Python would exit 1
        # at shutdown with no message, which reads as "regression found" (round 5).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        _err("standard output was closed by its reader (broken pipe); the output is incomplete")
        return EXIT_BROKEN
    except KeyboardInterrupt as exc:
        _err(f"interrupted ({exc})" if isinstance(exc, cutoff.Interrupted) else "interrupted")
        return EXIT_BROKEN
    except env.EnvError as exc:  # a setting out of range is bad input, not a crash (round 5)
        _err(str(exc))
        return EXIT_BROKEN
    except OSError as exc:  # an output path that cannot be written, an unreadable folder
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _err(f"{where}{exc.strerror or exc}")
        return EXIT_BROKEN
    except Exception as exc:
        # Last resort: one line naming the failure instead of a traceback.
        # KERNELWATCH_DEBUG=1 shows the traceback, and the exit code stays 2.
        if debug:
            import traceback

            traceback.print_exc()
        _err(f"{args.command} failed: {type(exc).__name__}: {exc} (set KERNELWATCH_DEBUG=1 for the traceback)")
        return EXIT_BROKEN


if __name__ == "__main__":
    sys.exit(main())
