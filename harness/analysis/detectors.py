"""The change-point detectors selectable with ``AnalysisConfig.detector``.

``binseg`` (the default, :mod:`harness.analysis.detect`) is chosen by
measurement (``docs/analysis.md``, "Choosing the detection core"); the
library detectors stay available for that comparison: ruptures' RBF
``KernelCPD`` and PELT/l1, ``asv.step_detect`` and Apache Otava's E-divisive.
Each takes the standardised oriented series ``z`` (noise 1) and returns the
indices of the first point of every new segment.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from harness.analysis.detect import binary_segmentation
from harness.analysis.model import AnalysisConfig


def detect_binseg(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points by binary segmentation on the CUSUM of a mean shift
    (:func:`harness.analysis.detect.binary_segmentation`; ``z`` has noise 1,
    so the split threshold ``config.split_z`` is in noise units)."""
    return binary_segmentation(z, 1.0, min_size=config.min_segment, z=config.split_z)


def detect_rbf(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points (indices of the first point of each new segment) by
    ``ruptures.KernelCPD`` (RBF kernel, C implementation) on standardised ``z``."""
    import ruptures as rpt

    n = z.size
    if n < 2 * config.min_segment:
        return []
    algo = rpt.KernelCPD(kernel="rbf", params={"gamma": config.gamma}, min_size=config.min_segment)
    bkps = algo.fit(z.reshape(-1, 1)).predict(pen=config.penalty)
    return [int(b) for b in bkps if 0 < b < n]


def detect_pelt_l1(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points by ``ruptures.Pelt`` with the robust ``l1`` cost (pure Python:
    kept for the comparison in ``docs/analysis.md``; too slow for 900 series)."""
    import ruptures as rpt

    n = z.size
    if n < 2 * config.min_segment:
        return []
    # l1 cost of pure noise grows ~ sqrt(2/pi) per point in sigma units; the
    # penalty is in the same units as the rbf one after scaling (measured).
    bkps = (
        rpt.Pelt(model="l1", min_size=config.min_segment, jump=1)
        .fit(z.reshape(-1, 1))
        .predict(pen=config.penalty * 1.5)
    )
    return [int(b) for b in bkps if 0 < b < n]


def detect_asv(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points from ``asv.step_detect.detect_steps`` (L1 Potts model with
    asv's automatic penalty). ``z`` is oriented so up is worse; asv wants a
    positive lower-is-better signal, so it gets ``exp(sigma-scaled z)``."""
    from asv import step_detect

    vals = list(np.exp(z * 0.01))  # any monotone positive map; asv is scale-aware only through ratios
    steps = step_detect.detect_steps(vals)
    return [int(s[0]) for s in steps[1:]]


def detect_otava(z: np.ndarray, config: AnalysisConfig) -> list[int]:
    """Change points from Apache Otava's E-divisive with the Hunter split/merge
    (``otava.analysis.compute_change_points``; Fleming et al. 2023,
    doi:10.1145/3578244.3583719) at p 1e-4, window 50: kept for the measured
    comparison in ``docs/analysis.md``. Needs ``pip install --no-deps apache-otava``;
    raises ``ValueError`` naming that when it is missing."""
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:
        raise ValueError("detector 'otava' needs apache-otava: pip install --no-deps apache-otava") from exc
    if z.size < 2 * config.min_segment:
        return []
    # Otava's magnitude is relative to the mean: feed a positive signal
    vals = list(np.exp(0.01 * (z - z.min())))
    cps, _weak = compute_change_points(vals, window_len=50, max_pvalue=1e-4, min_magnitude=0.0)
    return [int(c.index) for c in cps if 0 < c.index < z.size]


DETECTORS: dict[str, Callable[[np.ndarray, AnalysisConfig], list[int]]] = {
    "binseg": detect_binseg,
    "rbf": detect_rbf,
    "pelt_l1": detect_pelt_l1,
    "asv": detect_asv,
    "otava": detect_otava,
}
