"""Compile facts of the Triton kernels a benchmark case launches (stored in its record).

For each Triton kernel a case launches: the chosen autotune config (the
provider's ``config``), ``num_warps``, ``num_stages``, registers and spills
(ptxas, through the loaded binary) and shared memory, read from the compiled
kernel's metadata on CUDA; "not available under the interpreter" without a GPU.
Own code because Triton has no public "what did this call launch" API: a launch
hook names the CUDA function of each launch, which identifies the compiled
kernel in ``JITFunction.device_caches``.
"""

from __future__ import annotations

import sys

INTERPRETER_REASON = "not available under the interpreter (TRITON_INTERPRET=1: no GPU, Triton kernels are not compiled)"


def _jit_functions(module) -> list:
    """The ``triton.runtime.jit.JITFunction`` objects a module defines (through
    ``@triton.autotune`` / ``@triton.heuristics`` wrappers, which keep ``.fn``)."""
    found, seen = [], set()
    for obj in list(vars(module).values()):
        for _ in range(4):
            if hasattr(obj, "device_caches"):
                if id(obj) not in seen:
                    seen.add(id(obj))
                    found.append(obj)
                break
            obj = getattr(obj, "fn", None)
            if obj is None:
                break
    return found


def facts_from_compiled(kernel) -> dict:
    """Compile facts of one Triton ``CompiledKernel``: ``name``, ``num_warps``,
    ``num_stages``, ``registers`` (per thread) and ``spills`` (as ptxas reports them,
    known once the binary is loaded), ``shared_bytes`` (static + dynamic shared
    memory the launch reserves) and the compilation ``hash``. Missing fields are
    ``None`` (the backend does not provide them)."""
    md = getattr(kernel, "metadata", None)

    def meta(name):
        v = getattr(md, name, None)
        return v if isinstance(v, (int, str)) or v is None else str(v)

    return {
        "name": getattr(kernel, "name", None) or meta("name"),
        "num_warps": meta("num_warps"),
        "num_stages": meta("num_stages"),
        "num_ctas": meta("num_ctas"),
        "registers": getattr(kernel, "n_regs", None),
        "spills": getattr(kernel, "n_spills", None),
        "shared_bytes": meta("shared"),
        "hash": getattr(kernel, "hash", None),
    }


def _install_launch_hook(hook):
    """Add ``hook(metadata)`` to Triton's launch-enter hooks; returns the remover.
    Triton >= 3.4 keeps a ``HookChain`` in ``triton.knobs.runtime``; 3.2/3.3 a
    single settable ``knobs.runtime.launch_enter_hook``; older versions
    ``CompiledKernel.launch_enter_hook``."""
    try:
        from triton import knobs

        chain = knobs.runtime.launch_enter_hook
        if hasattr(chain, "add") and hasattr(chain, "remove"):
            chain.add(hook)
            return lambda: chain.remove(hook)
        previous = chain
        knobs.runtime.launch_enter_hook = hook
        return lambda: setattr(knobs.runtime, "launch_enter_hook", previous)
    except (ImportError, AttributeError):
        from triton.compiler.compiler import CompiledKernel

        previous = getattr(CompiledKernel, "launch_enter_hook", None)
        CompiledKernel.launch_enter_hook = hook
        return lambda: setattr(CompiledKernel, "launch_enter_hook", previous)


def launched_kernels(call, module) -> list:
    """Call ``call()`` once and return the compiled Triton kernels of ``module``
    that it launched, in launch order (each kernel once).

    Triton keeps compiled kernels per specialisation in ``JITFunction.device_caches``;
    the launch hook names the CUDA function each launch used, which identifies the
    cache entry, so kernels compiled earlier for other shapes are not reported.
    """
    launched = []

    def hook(metadata):
        data = getattr(metadata, "data", metadata)
        if isinstance(data, dict):
            launched.append(data.get("function"))

    remove = _install_launch_hook(hook)
    try:
        call()
    finally:
        remove()
    compiled = []
    for fn in _jit_functions(module):
        for entry in getattr(fn, "device_caches", {}).values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            for k in list(getattr(cache, "values", lambda: [])()):
                compiled.append(k)
    out = []
    for handle in dict.fromkeys(h for h in launched if h is not None):
        for k in compiled:
            if getattr(k, "function", None) == handle and k not in out:
                out.append(k)
    return out


def compile_facts(case) -> dict:
    """Compile facts of the Triton kernels a benchmark case launches (stored in its record).

    Parameters
    ----------
    case : harness.measure.bench.Case
        A prepared case (inputs built, correctness checked).

    Returns
    -------
    dict
        ``status``: ``"ok"`` (``kernels``: one :func:`facts_from_compiled` dict per
        launched kernel), ``"unavailable"`` (``reason``: under the interpreter, or
        no launch seen), ``"not_applicable"`` (not a Triton provider) or
        ``"error"`` (``reason`` names the exception; the benchmark goes on).
        Also ``autotune_config``: the launch configuration the provider reports
        (the autotuner's choice for these inputs, ``{}`` when it has none) and
        ``triton``: the compiler version.
    """
    prov = case.provider
    if prov.backend != "triton":
        return {"status": "not_applicable", "reason": f"{prov.backend} provider: no Triton kernel"}
    out: dict = {"triton": None, "autotune_config": {}}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception as exc:
        return {**out, "status": "error", "reason": f"triton not importable: {type(exc).__name__}: {exc}"}
    if prov.config is not None:
        try:
            out["autotune_config"] = prov.config(*case.inputs)
        except Exception as exc:
            out["autotune_config"] = {"error": f"{type(exc).__name__}: {exc}"}
    from kernels import _backends

    if _backends.triton_interpreted():
        return {**out, "status": "unavailable", "reason": INTERPRETER_REASON}
    try:
        module = sys.modules[prov.fn.__module__]
        kernels = launched_kernels(case.call, module)
        if case.device == "cuda":
            import torch

            torch.cuda.synchronize()
    except Exception as exc:
        return {**out, "status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    if not kernels:
        return {**out, "status": "unavailable", "reason": f"no Triton launch of {prov.fn.__module__} seen"}
    return {**out, "status": "ok", "kernels": [facts_from_compiled(k) for k in kernels]}


def safe_compile_facts(case) -> dict:
    """:func:`compile_facts` that never raises (the record keeps the reason):
    the one call ``harness.measure.bench`` makes per record."""
    try:
        return compile_facts(case)
    except Exception as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
