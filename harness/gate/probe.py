"""Why a benchmark of base's suite is missing from head's: import head's suite in a
clean export of head, in a fresh interpreter (:func:`probe_suite`), and turn that
into BROKEN reasons (:func:`missing_on_head`). Part of the gate failing closed
(issue 14): an op module that raises at import drops its benchmark from the
suite, and asv's discovery keeps the suite's stderr to itself, so without this
the gate called the benchmark REMOVED and passed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.core import procs

_PROBE = r"""
import importlib, json, os, sys, traceback
out = {"modules": {}, "ops": {}}
bdir = sys.argv[1]
pkg = os.path.basename(bdir.rstrip("/"))
sys.path.insert(0, os.path.dirname(os.path.abspath(bdir)))
for f in sorted(os.listdir(bdir)):
    if f.endswith(".py") and not f.startswith("_"):
        try:
            importlib.import_module(pkg + "." + f[:-3])
        except BaseException as exc:
            tb = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
            where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
            out["modules"][f[:-3]] = f"{type(exc).__name__}: {exc}" + (f" (at {where})" if where else "")
try:
    import kernels
    for name in sys.argv[2:]:
        try:
            kernels.get_op(name)
        except BaseException as exc:
            tb = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
            where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
            out["ops"][name] = f"{type(exc).__name__}: {exc}" + (f" (at {where})" if where else "")
except BaseException as exc:
    out["ops"]["*"] = f"import kernels: {type(exc).__name__}: {exc}"
print("KERNELWATCH_PROBE " + json.dumps(out))
"""


def probe_suite(
    root: Path, commit: str, work: Path, ops: list[str], *, quick: bool, timeout_s: float | None = None
) -> dict:
    """Why ``commit``'s suite lacks benchmarks: import its benchmark modules and
    ``kernels.get_op(op)`` for each of ``ops`` in a clean export of the commit
    (``git archive``), in a fresh interpreter.

    asv's discovery keeps a suite's stderr to itself, so without this the reason
    a benchmark vanished (an op module raising at import) was only in a log.
    Returns ``{"modules": {module: error}, "ops": {op: error}, "problem": str | None}``;
    paths in the errors are relative to the export. Bounded by the ``probe`` phase
    limit (``timeout_s`` overrides it; :func:`harness.core.procs.phase_limit`): a suite
    that hangs at import is killed, with its process group, and named in ``problem``.
    """
    src = work / f"src-{commit[:12]}"
    out = {"modules": {}, "ops": {}, "problem": None}
    try:
        if src.exists():
            shutil.rmtree(src)
        src.mkdir(parents=True)
        arch = subprocess.run(
            ["git", "archive", "--format=tar", commit],
            cwd=root,
            capture_output=True,
            timeout=procs.PHASE_LIMITS_S["git"],
        )
        if arch.returncode != 0:
            out["problem"] = f"git archive {commit[:12]} failed: {arch.stderr.decode(errors='replace').strip()}"
            return out
        with tempfile.TemporaryFile() as fh:
            fh.write(arch.stdout)
            fh.seek(0)
            with tarfile.open(fileobj=fh) as tar:
                tar.extractall(src, filter="data")
        try:
            conf = json.loads(re.sub(r"^\s*//.*$", "", (src / "asv.conf.json").read_text(), flags=re.M))
            named = conf.get("benchmark_dir") if isinstance(conf, dict) else None
            bdir = src / (named if isinstance(named, str) else "benchmarks")
        except (OSError, ValueError):
            bdir = src / "benchmarks"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ASV_", "KERNELWATCH_RESULTS"))}
        env.update(PYTHONPATH=str(src), KERNELWATCH_QUICK="1" if quick else "0")
        try:
            proc = procs.run_bounded(
                [sys.executable, "-c", _PROBE, str(bdir), *ops],
                phase=f"probe {commit[:12]}'s suite",
                kind="probe",
                limit_s=timeout_s,
                cwd=src,
                env=env,
            )
        except procs.PhaseTimeout as exc:
            out["problem"] = str(exc)
            return out
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("KERNELWATCH_PROBE ")), None)
        if line is None:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            out["problem"] = f"probe of {commit[:12]}'s suite printed nothing (exit {proc.returncode}): {tail[0]}"
            return out
        data = json.loads(line.split(" ", 1)[1])
        prefix = str(src) + os.sep

        def rel(t: str) -> str:
            return t.replace(prefix, "")

        out["modules"] = {k: rel(v) for k, v in data.get("modules", {}).items()}
        out["ops"] = {k: rel(v) for k, v in data.get("ops", {}).items()}
    except (OSError, ValueError, subprocess.SubprocessError, tarfile.TarError) as exc:
        out["problem"] = f"could not probe {commit[:12]}'s suite: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(src, ignore_errors=True)
    return out


#: How :func:`missing_on_head` starts the reason of a benchmark that head's suite
#: dropped while importing cleanly: the one case a removal trailer may acknowledge.
DELETED_ON_HEAD = "in base's suite, missing from head's (deleted or renamed?)"


def op_of(benchmark: str) -> str | None:
    """``suite.vector_add.track_time`` -> ``vector_add`` (our suite's naming); else ``None``."""
    parts = benchmark.split(".")
    return parts[1] if len(parts) == 3 else None


def missing_on_head(base_meta: dict, head_meta: dict | None, probe: dict | None) -> dict[str, str]:
    """``{benchmark: reason}`` for each benchmark of base's suite that head's suite
    lacks entirely (``head_meta`` ``None``: head's suite could not be listed at all)."""
    probe = probe or {"modules": {}, "ops": {}, "problem": None}
    out = {}
    for name in sorted(base_meta):
        if head_meta is not None and name in head_meta:
            continue
        op = op_of(name)
        mod = name.split(".", 1)[0]
        why = (probe["ops"].get(op) if op else None) or probe["modules"].get(mod) or probe["ops"].get("*")
        if why:
            lead = f"op {op!r}" if op and probe["ops"].get(op) else f"benchmark module {mod!r}"
            out[name] = f"in base's suite, missing from head's: {lead} fails to import on head: {why}"
        elif head_meta is None:
            out[name] = "in base's suite; head's suite could not be listed" + (
                f" ({probe['problem']})" if probe.get("problem") else ""
            )
        else:
            out[name] = (
                DELETED_ON_HEAD + "; a benchmark that head drops cannot be measured, so it blocks "
                "unless a commit of the pull request says it was removed on purpose (a "
                "Perf-Benchmark-Removed trailer)" + (f"; {probe['problem']}" if probe.get("problem") else "")
            )
    return out
