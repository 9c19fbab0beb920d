"""Which launch configuration an autotuned Triton kernel used, per tuning key.

``triton.autotune`` caches its choice per *key* (the values of the ``key=``
arguments plus the dtype of every tensor argument) and exposes only
``best_config``, the config of the *latest* launch. A benchmark that records
``best_config`` after timing several shapes would attach one shape's config to
another's result. :class:`ConfigRecord` stores the config right after each
launch under the caller's own key, which must separate inputs exactly as the
autotuner's key does; reading it back is then correct for *these* inputs
whatever ran in between. Own code because Triton offers no public lookup of
its per-key cache that is stable across versions (``Autotuner.cache`` is keyed
by an internal tuple whose layout changed between releases).
"""

from __future__ import annotations

from typing import Hashable


def config_dict(cfg) -> dict:
    """A ``triton.Config`` as a plain dict: its meta-parameters (``BLOCK_SIZE_M`` ...)
    plus ``num_warps`` and ``num_stages``."""
    out = dict(cfg.kwargs)
    out["num_warps"] = cfg.num_warps
    out["num_stages"] = cfg.num_stages
    return out


class ConfigRecord:
    """Per-key record of the configs an autotuned kernel launched with.

    Parameters
    ----------
    kernel : triton.runtime.Autotuner
        The ``@triton.autotune``-decorated kernel.
    """

    def __init__(self, kernel) -> None:
        self._kernel = kernel
        self._chosen: dict[Hashable, dict] = {}

    def after_launch(self, key: Hashable) -> None:
        """Call right after launching ``kernel`` for inputs with tuning key ``key``."""
        cfg = getattr(self._kernel, "best_config", None)
        if cfg is None:
            raise RuntimeError("autotuned kernel exposes no best_config after a launch")
        self._chosen[key] = config_dict(cfg)

    def get(self, key: Hashable) -> dict | None:
        """The config recorded for ``key`` (a copy), or ``None`` if nothing with that key ran yet."""
        cfg = self._chosen.get(key)
        return None if cfg is None else dict(cfg)


# --------------------------------------------------------------------- shared memory

#: Largest dynamic shared memory one block may opt in to, bytes, per compute
#: capability (CUDA C Programming Guide, "Technical Specifications per Compute
#: Capability": 8.0 and 8.7: 163 KB, 8.6 and 8.9: 99 KB, 9.0 and 10.x: 227 KB,
#: 12.x: 99 KB; 1 KB = 1024 bytes).
SHARED_MEM_OPTIN_BYTES = {
    (8, 0): 166_912,
    (8, 6): 101_376,
    (8, 7): 166_912,
    (8, 9): 101_376,
    (9, 0): 232_448,
    (10, 0): 232_448,
    (10, 3): 232_448,
    (12, 0): 101_376,
}


def device_shared_mem_bytes(device=None) -> int | None:
    """Opt-in shared memory per block of a CUDA device, bytes; ``None`` without CUDA.

    PyTorch's ``shared_memory_per_block_optin`` when it has it, else Triton's
    driver (``max_shared_mem``), else :data:`SHARED_MEM_OPTIN_BYTES` by
    compute capability. Never initialises CUDA where there is no device.
    """
    import torch

    from kernels import _backends

    if not _backends.cuda_available():
        return None
    idx = torch.cuda.current_device() if device is None else torch.device(device).index or 0
    props = torch.cuda.get_device_properties(idx)
    v = getattr(props, "shared_memory_per_block_optin", None)
    if v:
        return int(v)
    try:
        from triton.runtime import driver

        return int(driver.active.utils.get_device_properties(idx)["max_shared_mem"])
    except Exception:
        return SHARED_MEM_OPTIN_BYTES.get((props.major, props.minor))


def fit_shared_memory(configs, need_bytes, limit_bytes: int | None):
    """The configs whose estimated shared memory ``need_bytes(cfg)`` is at most
    ``limit_bytes``; all of them when the limit is unknown (``None``); the one
    with the smallest estimate when none fits (a launch must have a config).

    Used as (part of) a ``triton.autotune`` ``early_config_prune``: a config that
    does not fit is otherwise compiled, rejected with "out of resource: shared
    memory" and compiled again in every process and tuning key.
    """
    configs = list(configs)
    if limit_bytes is None or not configs:
        return configs
    kept = [c for c in configs if need_bytes(c) <= limit_bytes]
    return kept or [min(configs, key=need_bytes)]
