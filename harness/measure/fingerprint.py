"""Compiled-code identity of a benchmark case: a fingerprint of what actually ran (issue 24).

Stored in every record as ``code_identity``; two records with the same
``code_identity.fingerprint`` and the same environment (``device``: GPU or CPU
model, driver, library versions) ran the same code, so a step between them is
the machine's, not the code's (:mod:`harness.analysis` and ``kernelwatch check``
label it "same compiled code").

What goes in (``parts``, each hashed with SHA-256 over canonical JSON):

``python``
    The source of the Python code on the timed path: the op's module (the
    provider functions, their launchers and the reference), the shared kernel
    helpers (``kernels/_*.py``) and the timing code (``harness/measure/timing*.py``,
    ``bench.py``), as loaded. Any edit there, a comment included, changes it: the
    fingerprint errs towards "different" (a false "same" would hide a slowdown).
``torch``
    ``torch.__version__``, its git revision, CUDA and cuDNN versions, debug build.
``dispatched`` (torch providers)
    The aten operators one call dispatched, with counts (``aten.add.Tensor`` x 4
    when a change computes the sum four times), and on CUDA the device kernels'
    names (``torch.profiler``).
``triton`` (Triton providers)
    The Triton version, the chosen autotune config and, on a GPU, the hash of
    each compiled kernel the call launched (Triton's own cache key of the
    compiled binary, :func:`harness.measure.compile_facts.launched_kernels`).
    Under ``TRITON_INTERPRET=1`` (no GPU) nothing is compiled: the fingerprint is
    the Triton version, the chosen config and the ``@triton.jit`` functions'
    source (in ``python``), which is what the interpreter runs.
``cuda`` (CuPy providers)
    The op's CUDA C sources (``kernels._cupy.SOURCES``) and the NVRTC options
    (:func:`kernels._cupy.compile_options`); the cubin is not read.

Blind spots (named in ``docs/records.md``): code outside those files that the
timed path calls (a third-party library other than torch, Triton and CuPy, e.g.
a numpy upgrade), the GPU driver's JIT of PTX (covered by the environment's
driver version, not here), cuBLAS/cuDNN heuristics choosing another kernel
(visible in ``dispatched`` on CUDA only), and Python's own version (in the
record's ``device.versions``). Own code because no library identifies "the code
one call ran" across torch, Triton and CuPy.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from harness.core.records import CODE_SCHEME as SCHEME
from harness.core.records import same_code  # noqa: F401  (re-exported: the comparison of two identities)

#: The harness's timing code, whose source is part of every fingerprint.
_TIMING_MODULES = (
    "harness.measure.bench",
    "harness.measure.timing",
    "harness.measure.timing_base",
    "harness.measure.timing_cpu",
    "harness.measure.timing_cuda",
)


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _source(module_name: str) -> str | None:
    mod = sys.modules.get(module_name)
    path = getattr(mod, "__file__", None)
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def python_sources(op_module: str) -> dict[str, str | None]:
    """``{module: sha256[:16] of its file}`` for the op's module, the loaded
    ``kernels._*`` helpers and the timing modules (``None`` where not loaded)."""
    names = {op_module, *_TIMING_MODULES}
    names |= {n for n in list(sys.modules) if n.startswith("kernels._")}
    return {n: _source(n) for n in sorted(names)}


def torch_build() -> dict:
    """The torch build: version, git revision, CUDA, cuDNN, debug."""
    import torch

    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # no cuDNN in a CPU build
        cudnn = None
    return {
        "version": torch.__version__,
        "git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "debug": bool(getattr(torch.version, "debug", False)),
    }


def dispatched(call, device: str) -> dict:
    """Operators (and on CUDA, device kernels) one ``call()`` dispatched, with counts.

    Returns ``{"ops": {name: count}, "kernels": {name: count}}``. The operators
    come from a ``TorchDispatchMode`` (every aten overload that reached a
    backend kernel, e.g. ``aten.add.Tensor``); the device kernels' names from
    ``torch.profiler`` on CUDA only (``kernels`` is empty on the CPU, where the
    profiler would add nothing but its own log lines).
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: Counter = Counter()

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    with _Count():
        call()
    kernels: Counter = Counter()
    if device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        for ev in prof.events():
            if str(getattr(ev, "device_type", "")).rsplit(".", 1)[-1] == "CUDA":
                kernels[ev.name] += 1
    return {"ops": dict(sorted(ops.items())), "kernels": dict(sorted(kernels.items()))}


def _triton_part(case, facts: dict | None) -> dict:
    from harness.measure import compile_facts

    facts = facts if facts is not None else compile_facts.safe_compile_facts(case)
    hashes = [k.get("hash") for k in facts.get("kernels") or []]
    return {
        "version": facts.get("triton"),
        "config": facts.get("autotune_config"),
        "compiled": hashes if facts.get("status") == "ok" else None,
        "status": facts.get("status"),
    }


def _cuda_part(case) -> dict:
    from kernels import _cupy

    sources = sorted(
        (name, hashlib.sha256(src.code.encode()).hexdigest()[:16])
        for (op, name), src in _cupy.SOURCES.items()
        if op == case.op.name
    )
    return {"sources": sources, "options": list(_cupy.compile_options())}


def code_identity(case, facts: dict | None = None) -> dict:
    """The fingerprint of what one benchmark case runs; see the module docstring.

    Parameters
    ----------
    case : harness.measure.bench.Case
        A prepared case (inputs built, correctness checked): ``case.call()`` is
        called once more for the profiler (torch) or, without ``facts``, the
        launch hook (Triton).
    facts : dict, optional
        The case's :func:`harness.measure.compile_facts.compile_facts`, when the
        record has them already (saves a launch).

    Returns
    -------
    dict
        ``scheme``, ``fingerprint`` (16 hex digits over ``parts``), ``parts``
        (see the module docstring) and ``coverage`` (which parts could be
        computed; a part that failed holds ``{"error": ...}`` and ``coverage``
        says so). Never raises: a failed part is recorded, not fatal.
    """
    prov = case.provider
    parts: dict = {"backend": prov.backend, "provider": prov.name}
    coverage: dict[str, str] = {}

    def part(name, fn):
        try:
            parts[name] = fn()
            coverage[name] = "ok"
        except Exception as exc:
            parts[name] = {"error": f"{type(exc).__name__}: {exc}"}
            coverage[name] = "error"

    part("python", lambda: python_sources(prov.fn.__module__))
    part("torch", torch_build)
    if prov.backend == "torch":
        part("dispatched", lambda: dispatched(case.call, case.device))
    elif prov.backend == "triton":
        part("triton", lambda: _triton_part(case, facts))
        if isinstance(parts.get("triton"), dict) and parts["triton"].get("status") != "ok":
            coverage["triton"] = "source only (" + str(parts["triton"].get("status")) + ": not compiled here)"
    elif prov.backend == "cupy":
        part("cuda", lambda: _cuda_part(case))
    return {"scheme": SCHEME, "fingerprint": _digest(parts), "parts": parts, "coverage": coverage}
