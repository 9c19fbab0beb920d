"""The profiling process of ``kernelwatch profile`` and ``triage``: what runs inside
the fresh interpreter that imports one commit's ``kernels`` and ``benchmarks``.

- the cases of a suite (:class:`CaseSpec`, :func:`suite_cases`, :func:`select_cases`);
- one case under ``torch.profiler`` (:func:`profile_one`) and its per-kernel
  table (:func:`kernel_table`, :func:`iteration_times`);
- the worker (:func:`worker_main`, and ``python -m harness.measure.profile_worker
  --worker SPEC.json``, driven round by round over stdin by
  :class:`harness.measure.profile.WorkerProcess`).

Only the standard library and :mod:`harness.measure.compile_facts` at import
time: the commit's code is imported afterwards, from the checkout. Public names
are re-exported by :mod:`harness.measure.profile`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.measure.compile_facts import safe_compile_facts

#: The profiler's range around each profiled call; its own self time is bookkeeping, not the case's.
ITERATION_MARK = "kernelwatch.iteration"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 3
#: torch threads of a CPU profile (``None``: torch's default); see ``_Worker``.
DEFAULT_CPU_THREADS = 1


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class CaseSpec:
    """One benchmark case of the suite: ``benchmark`` (``suite.softmax.track_time``),
    ``op`` and the parameters by name (``provider``, ``shape``, ``dtype``, ``timing``)."""

    benchmark: str
    op: str
    params: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        """asv's name for the case: ``benchmark('v1', 'v2', ...)`` (the string ``--bench`` searches)."""
        return f"{self.benchmark}({', '.join(repr(v) for _, v in self.params)})"

    @property
    def slug(self) -> str:
        """A file name for the case: readable part plus a short hash so names never collide."""
        readable = re.sub(r"[^A-Za-z0-9]+", "_", f"{self.op}_{'_'.join(v for _, v in self.params)}").strip("_")
        return f"{readable[:80]}-{hashlib.sha1(self.label.encode()).hexdigest()[:8]}"

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "op": self.op, "label": self.label, "params": dict(self.params)}


def suite_cases(suite_module) -> list[CaseSpec]:
    """Every case of an asv suite module built like ``benchmarks/suite.py``: classes
    with ``op_name``, ``params`` (a list of value lists) and ``param_names``."""
    import itertools

    out = []
    for name in sorted(vars(suite_module)):
        cls = getattr(suite_module, name)
        if not isinstance(cls, type) or not getattr(cls, "op_name", "") or not hasattr(cls, "track_time"):
            continue
        names = list(getattr(cls, "param_names", []))
        params = list(getattr(cls, "params", []))
        if len(names) != len(params):
            continue
        bench = f"{suite_module.__name__.split('.')[-1]}.{name}.track_time"
        for combo in itertools.product(*params):
            out.append(CaseSpec(bench, cls.op_name, tuple((n, str(v)) for n, v in zip(names, combo))))
    return out


def select_cases(cases: list[CaseSpec], pattern: str | None = None, exact: list[dict] | None = None) -> list[CaseSpec]:
    """Cases whose label matches ``pattern`` (a regular expression searched in the
    label, as asv's ``--bench``), or whose benchmark and parameters equal one of
    ``exact`` (``[{"benchmark": ..., "params": {...}}]``; parameters not given match anything).

    Raises
    ------
    ValueError
        If ``pattern`` is not a valid regular expression.
    """
    if exact:

        def hit(c):
            p = dict(c.params)
            return any(
                e.get("benchmark") == c.benchmark
                and all(str(p.get(k)) == str(v) for k, v in (e.get("params") or {}).items() if k in p)
                for e in exact
            )

        return [c for c in cases if hit(c)]
    if not pattern:
        return list(cases)
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"bad benchmark pattern {pattern!r}: {exc}") from None
    return [c for c in cases if rx.search(c.label)]


# ----------------------------------------------------------------------------- kernel table


def kernel_table(events, iters: int, device_kind: str) -> list[dict]:
    """The per-kernel table of one profiled case.

    Parameters
    ----------
    events : iterable
        ``torch.profiler.profile.key_averages()`` entries (anything with ``key``,
        ``count``, ``self_cpu_time_total`` and ``self_device_time_total`` in
        microseconds, and ``device_type``).
    iters : int
        Calls of the case inside the profiled region (> 0).
    device_kind : {"cuda", "cpu"}
        On CUDA the table lists device-side kernels (``device_type`` CUDA) by
        their device time; on the CPU it lists ATen ops by their CPU self time.

    Returns
    -------
    list of dict
        One row per kernel, largest self time first: ``name``, ``calls`` (over
        all iterations), ``calls_per_iter``, ``self_us_total``, ``self_us_per_iter``,
        ``self_us_mean`` (per launch) and ``share`` (of the summed self time of
        every row, so the shares add to 1).

    Raises
    ------
    ValueError
        If ``iters`` is not positive or ``device_kind`` unknown.
    """
    if not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be a positive int, got {iters!r}")
    if device_kind not in ("cuda", "cpu"):
        raise ValueError(f"device_kind must be 'cuda' or 'cpu', got {device_kind!r}")
    rows = {}
    for e in events:
        name = str(e.key)
        if name == ITERATION_MARK or name.startswith("ProfilerStep"):
            continue
        dev = str(getattr(e, "device_type", "")).rsplit(".", 1)[-1].lower()
        if device_kind == "cuda":
            # Only device-side events: a CPU op or the runtime call that launched a
            # kernel also carries that kernel's time (FunctionEvent.self_device_time_total).
            if dev != "cuda":
                continue
            self_us = float(getattr(e, "self_device_time_total", 0.0) or 0.0)
        else:
            self_us = float(e.self_cpu_time_total or 0.0)
        if self_us <= 0 and not e.count:
            continue
        r = rows.setdefault(name, {"name": name, "calls": 0, "self_us_total": 0.0})
        r["calls"] += int(e.count)
        r["self_us_total"] += self_us
    total = sum(r["self_us_total"] for r in rows.values())
    out = []
    for r in rows.values():
        out.append(
            {
                "name": r["name"],
                "calls": r["calls"],
                "calls_per_iter": r["calls"] / iters,
                "self_us_total": round(r["self_us_total"], 3),
                "self_us_per_iter": round(r["self_us_total"] / iters, 3),
                "self_us_mean": round(r["self_us_total"] / r["calls"], 3) if r["calls"] else None,
                "share": round(r["self_us_total"] / total, 4) if total > 0 else None,
            }
        )
    out.sort(key=lambda r: (-r["self_us_total"], r["name"]))
    return out


def iteration_times(events, device_kind: str) -> tuple[int, dict[str, list[float]]]:
    """Self time of each kernel in each profiled call: ``(n_iterations, {name: [us per call]})``.

    ``events`` is ``torch.profiler.profile.events()`` (``FunctionEvent`` objects).
    Every call of the case runs inside one :data:`ITERATION_MARK` range; an event
    belongs to the call whose range is its ancestor (``cpu_parent`` chain). On
    CUDA a kernel is attributed through the CPU op that launched it (the
    profiler links each device kernel to its launch, ``FunctionEvent.kernels``);
    on the CPU each ATen op counts with its CPU self time. A kernel absent from a
    call counts 0 there.
    """
    marks = sorted((e for e in events if e.name == ITERATION_MARK), key=lambda e: e.time_range.start)
    index = {id(m): i for i, m in enumerate(marks)}
    out: dict[str, list[float]] = {}

    def iteration(e):
        p = e.cpu_parent
        while p is not None:
            if id(p) in index:
                return index[id(p)]
            p = p.cpu_parent
        return None

    for e in events:
        if e.name == ITERATION_MARK:
            continue
        if device_kind == "cuda":
            kernels = list(getattr(e, "kernels", None) or [])
            if not kernels:
                continue
            i = iteration(e)
            if i is None:
                continue
            for k in kernels:
                out.setdefault(k.name, [0.0] * len(marks))[i] += float(k.duration)
        else:
            dev = str(getattr(e, "device_type", "")).rsplit(".", 1)[-1].lower()
            if dev != "cpu":
                continue
            i = iteration(e)
            if i is None:
                continue
            out.setdefault(e.name, [0.0] * len(marks))[i] += float(e.self_cpu_time_total)
    return len(marks), out


# ----------------------------------------------------------------------------- the worker


def _environment(ident) -> dict:
    import platform

    d = ident.as_dict()
    v = dict(d.get("versions") or {})
    return {
        "device_kind": d.get("kind"),
        "device": d.get("name"),
        "driver": d.get("driver"),
        "compute_capability": d.get("compute_capability"),
        "torch": v.get("torch"),
        "cuda": v.get("cuda"),
        "triton": v.get("triton"),
        "harness": v.get("harness"),
        "python": platform.python_version(),
    }


def profile_one(case, *, iters: int, warmup: int, trace_path: Path | None) -> dict:
    """Profile a prepared case: ``warmup`` calls, then ``iters`` calls under
    ``torch.profiler``; returns ``{"wall_us_per_iter", "kernels", "trace"}``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = case.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(warmup):
        case.call()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    walls = []
    with profile(activities=acts) as prof:
        for _ in range(iters):
            t0 = time.perf_counter()
            with record_function(ITERATION_MARK):
                case.call()
                sync()
            walls.append((time.perf_counter() - t0) * 1e6)
    kind = "cuda" if cuda else "cpu"
    table = kernel_table(prof.key_averages(), iters, kind)
    n, per_iter = iteration_times(prof.events(), kind)
    for row in table:
        series = per_iter.get(row["name"])
        # Noise on a shared machine only adds time: the fastest call is the
        # contention-free cost (timeit's rule), kept beside the mean.
        row["self_us_iter_min"] = round(min(series), 3) if series and n == iters else None
    out = {
        "wall_us_per_iter": round(sum(walls) / iters, 3),
        "wall_us_min": round(min(walls), 3),
        "kernels": table,
        "per_iter_us": {k: [round(v, 3) for v in vs] for k, vs in per_iter.items()},
        "trace": None,
    }
    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))  # a .gz suffix makes torch gzip it
        out["trace"] = str(trace_path)
    return out


class _Worker:
    """The profiling side of one commit, inside its own interpreter (see :func:`worker_main`)."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.checkout_dir = str(Path(spec["checkout"]).resolve())
        self.problems: list[str] = []
        self.cases: list[CaseSpec] = []
        self.environment = None
        self.machine = None
        os.environ["KERNELWATCH_QUICK"] = "1" if spec.get("quick") else "0"
        # The commit's code under test first on the path; this kernelwatch's harness is
        # already imported (this module), so ``harness.*`` stays ours.
        sys.path.insert(0, self.checkout_dir)
        for name in [
            m for m in sys.modules if m in ("kernels", "benchmarks") or m.startswith(("kernels.", "benchmarks."))
        ]:
            del sys.modules[name]
        try:
            import importlib

            suite = importlib.import_module("benchmarks.suite")
            import kernels

            if not str(Path(kernels.__file__).resolve()).startswith(self.checkout_dir):
                self.problems.append(
                    f"kernels imported from {kernels.__file__}, not from the checkout {self.checkout_dir}"
                )
        except Exception as exc:
            self.problems.append(
                f"cannot import the suite of {(spec.get('commit') or 'the working tree')[:12]}: "
                f"{type(exc).__name__}: {exc}"
            )
            return
        from harness.core import devices

        ident = devices.identify()
        if ident.kind == "cpu" and spec.get("cpu_threads"):
            # On a shared CPU a multi-threaded ATen op waits at its barrier for a
            # descheduled thread (100x swings measured on a loaded 2-core runner);
            # one thread keeps the per-kernel comparison about the code.
            import torch

            torch.set_num_threads(int(spec["cpu_threads"]))
        self.environment = _environment(ident)
        import torch

        self.environment["torch_threads"] = torch.get_num_threads()
        self.machine = ident.machine_name()
        try:
            self.cases = select_cases(suite_cases(suite), spec.get("pattern"), spec.get("exact"))
        except ValueError as exc:
            self.problems.append(str(exc))

    def round(self, r: int) -> dict:
        """Profile every selected case once (each prepared afresh, then released)."""
        from harness.measure import bench
        from kernels._base import parse_shape

        result = {
            "commit": self.spec.get("commit"),
            "round": r,
            "machine": self.machine,
            "environment": self.environment,
            "matched": [c.label for c in self.cases],
            "cases": [],
            "problems": list(self.problems),
        }
        out_dir = Path(self.spec["out_dir"])
        mode = self.spec.get("mode", "profile")
        for c in self.cases:
            row = {**c.as_dict(), "status": "ok", "reason": None}
            p = dict(c.params)
            try:
                case = bench.prepare(
                    c.op, p.get("provider"), parse_shape(p.get("shape")), p.get("dtype"), p.get("timing")
                )
            except NotImplementedError as exc:
                row.update(status="skipped", reason=str(exc))
                result["cases"].append(row)
                continue
            except Exception as exc:
                row.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
                result["cases"].append(row)
                continue
            try:
                if mode == "ncu":
                    import torch

                    case.call()
                    torch.cuda.synchronize()
                    torch.cuda.profiler.start()
                    case.call()
                    torch.cuda.synchronize()
                    torch.cuda.profiler.stop()
                else:
                    trace = out_dir / "traces" / f"{c.slug}.r{r}.trace.json.gz"
                    row.update(
                        profile_one(
                            case,
                            iters=int(self.spec.get("iters", DEFAULT_ITERS)),
                            warmup=int(self.spec.get("warmup", DEFAULT_WARMUP)),
                            trace_path=trace,
                        )
                    )
                    row["launch_config"] = {}
                    if case.provider.config is not None:
                        try:
                            row["launch_config"] = case.provider.config(*case.inputs)
                        except Exception as exc:
                            row["launch_config"] = {"error": f"{type(exc).__name__}: {exc}"}
                    row["compile_facts"] = safe_compile_facts(case)
            except Exception as exc:
                row.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
            finally:
                del case
            result["cases"].append(row)
        return result


def worker_main(spec: dict, rounds=None) -> list[dict]:
    """Profile the selected cases of one commit in this process, once per round.

    ``spec``: ``checkout`` (folder whose ``kernels`` and ``benchmarks`` are
    imported), ``commit``, ``pattern`` or ``exact``, ``out_dir``, ``iters``,
    ``warmup``, ``quick``, ``mode`` (``"profile"``, or ``"ncu"``: one call between
    ``cudaProfilerStart``/``Stop`` for Nsight Compute). ``rounds``: an iterable of
    round numbers (default ``[0]``); :func:`_main` feeds it from stdin so that a
    triage can alternate two commits' processes while each imports torch once.
    """
    w = _Worker(spec)
    return [w.round(int(r)) for r in (rounds if rounds is not None else [0])]


ROUND_DONE = "KERNELWATCH-ROUND-DONE"


def _main(argv: list[str]) -> int:
    """``python -m harness.measure.profile_worker --worker SPEC.json``: read round numbers from
    stdin (one per line, ``quit`` ends), write ``<result_prefix>-r<N>.json`` for
    each and print ``KERNELWATCH-ROUND-DONE <N>``."""
    if len(argv) != 3 or argv[1] != "--worker":
        print("usage: python -m harness.measure.profile_worker --worker SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[2]).read_text())
    w = _Worker(spec)
    print(f"{ROUND_DONE} ready", flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line == "quit" or not line.isdigit():
            break
        res = w.round(int(line))
        Path(f"{spec['result_prefix']}-r{line}.json").write_text(
            json.dumps(res, indent=1, allow_nan=False, default=str)
        )
        print(f"{ROUND_DONE} {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
