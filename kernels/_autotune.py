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
