"""Regression, drift and cross-architecture divergence analysis (pure: no I/O).

Every function here takes series (plain data) and returns records with a
:class:`Status` and a reason; reading results directories is
:mod:`harness.results`' job, printing is :mod:`harness.analysis_cli`'s.

Model
-----
A *series* is machine x benchmark x parameters x timing method (see
``shared/ARCHITECTURE.md``). Its points are ordered by commit (git history, else
commit date; the caller orders them). Values are oriented before anything is
detected: ``y = log(value)`` for lower-is-better metrics (time, memory) and
``y = -log(value)`` for higher-is-better ones (tflops, gbps, mfu, bw_util, sol),
so an *upward* move of ``y`` is always a regression and a step of ``d`` in ``y``
is a ratio ``exp(d)`` in the natural unit. (asv feeds raw values to its
detector and so treats every metric as lower-is-better; see
``shared/ASV_NOTES.md``.)

Per series (:func:`analyze_series`):

1. **Noise**: ``sigma = 1.4826 * median(|diff(y)|) / sqrt(2)``, the MAD of first
   differences (Rousseeuw & Croux 1993 consistency constant; differencing makes it
   immune to level shifts, the median to outliers), floored at
   ``AnalysisConfig.noise_floor``.
2. **Change points**: ``ruptures.KernelCPD`` with an RBF kernel on ``y / sigma``
   (Arlot, Celisse & Harchaoui 2019, "A kernel multiple change-point algorithm via
   model selection", JMLR 20), penalised linearly in the number of change points.
   The bounded kernel makes one outlier cheap to keep inside a segment. The choice
   over ``asv.step_detect`` (L1 Potts) and ruptures PELT/l1 was made by
   measurement: ``scripts/compare_detectors.py`` and ``docs/analysis.md``.
   Benchmark-``version`` and environment boundaries are always tested too.
3. **Significance** of a candidate at index ``k``: the step is
   ``d = median(y[after]) - median(y[before])`` over the neighbouring segments
   (at most ``window`` points each side); its standard error is
   ``sigma * sqrt(pi/2) * sqrt(1/n1 + 1/n2)`` (the asymptotic variance of a sample
   median under Gaussian noise is ``pi/2 * sigma^2 / n``); the two-sided normal
   p-value is multiplied by the number of positions the detector could have
   chosen (Bonferroni over positions: the location was picked from the same data).
   Where raw samples were recorded for the commits on both sides of the step,
   a Mann-Whitney U test on them (as ``asv compare`` does) must agree.
4. **Drift** against a baseline window: a run of ``2..drift_max_len`` commits that
   each move the same way by less than ``min_effect`` but together by at least
   ``min_effect`` relative to the median of the ``window`` commits before the run.
5. **Gaps**: a ``None`` value is a failure, counted and reported; a series whose
   last value is older than its machine's newest commit is *missing since* that
   commit.

Across series (:func:`analyze`): Benjamini-Hochberg at level ``fdr_q`` over all
step and drift tests (Benjamini & Hochberg 1995, JRSS B 57), a published false
alarm budget, and cross-machine rules (:func:`divergent_changes`,
:func:`efficiency_gaps`, :func:`generation_speedups`).

Layout (each module under ~600 lines):

* :mod:`harness.analysis.model`: inputs, configuration, findings, report.
* :mod:`harness.analysis.stats`: noise, Benjamini-Hochberg, the step test.
* :mod:`harness.analysis.detect`: spike cleaning, binary segmentation, the tail rule.
* :mod:`harness.analysis.detectors`: the selectable detectors (binseg and the libraries).
* :mod:`harness.analysis.series`: one series -> candidates and gap findings.
* :mod:`harness.analysis.drift`: creeping drifts.
* :mod:`harness.analysis.findings`: candidates -> findings (one per change).
* :mod:`harness.analysis.events`: findings grouped by commit, labels, health.
* :mod:`harness.analysis.cross`: cross-machine rules.
* :mod:`harness.analysis.run`: :func:`analyze`, the whole run.

Nothing here does I/O or imports :mod:`harness.measure` (``tests/test_layout.py``).
"""

from harness.analysis.cross import (CaseCost, DevicePeaks, divergent_changes, efficiency_gaps,  # noqa: F401
                                    generation_speedups, predicted_speedup)
from harness.analysis.detectors import (DETECTORS, detect_asv, detect_binseg, detect_otava,  # noqa: F401
                                        detect_pelt_l1, detect_rbf)
from harness.analysis.model import (ALERT_STATUSES, DRIFT_MAX_SHARE, ENV_KEYS, HIGHER_IS_BETTER,  # noqa: F401
                                    REPORT_SCHEMA, REPORT_VERSION, AnalysisConfig, Candidate, Direction, Finding,
                                    Point, Report, Series, SeriesAnalysis, SeriesKey, Status, direction_for)
from harness.analysis.run import analyze  # noqa: F401
from harness.analysis.series import analyze_series, failure_stretches  # noqa: F401
from harness.analysis.stats import benjamini_hochberg, robust_noise  # noqa: F401

__all__ = [
    "ALERT_STATUSES", "DETECTORS", "DRIFT_MAX_SHARE", "ENV_KEYS", "HIGHER_IS_BETTER", "REPORT_SCHEMA",
    "REPORT_VERSION", "AnalysisConfig", "Candidate", "CaseCost", "DevicePeaks", "Direction", "Finding", "Point",
    "Report", "Series", "SeriesAnalysis", "SeriesKey", "Status", "analyze", "analyze_series", "benjamini_hochberg",
    "detect_asv", "detect_binseg", "detect_otava", "detect_pelt_l1", "detect_rbf", "direction_for", "divergent_changes",
    "efficiency_gaps", "failure_stretches", "generation_speedups", "predicted_speedup", "robust_noise",
]
