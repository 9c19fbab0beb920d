"""Regression, drift and cross-architecture divergence analysis (pure: no I/O).

Every function here takes series (plain data) and returns records with a
:class:`Status` and a reason; reading results directories is
:mod:`harness.store`'s job, printing :mod:`harness.cli.analyze`'s.

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

Per series (:func:`analyze_series`; the rules and their measurement are in
``docs/analysis.md``):

1. **Usable points**: null, NaN, zero and negative values are failures; their
   runs are failure stretches ("failing since X, back at Y") and the boundary
   across one is a *gap* that nothing links over.
2. **Noise to find levels**: ``sigma0 = 1.4826 * median(|diff(y)|) / sqrt(2)``
   (Rousseeuw & Croux 1993 constant; immune to steps and outliers).
3. **Change points** (:mod:`harness.analysis.detect`): isolated spikes cleaned
   (Hampel), binary segmentation on the CUSUM of a mean shift, Bai's (1997)
   refinement, version/environment/gap boundaries always tested (a detected
   point one commit away is put where the fit is better), and the tail rule
   for the newest ``confirm_after`` commits. Chosen by measurement against
   ruptures' RBF ``KernelCPD``, ``asv.step_detect`` and Apache Otava:
   ``experiments/detection/detect_compare.py``.
4. **Noise to test**: the clipped residual variance of the fitted levels.
5. **Significance**: clipped (Huber) means of up to ``window`` points each
   side, ``se = sigma * sqrt(1/n1 + 1/n2)``, two-sided normal p-value times the
   positions it could have been put at; the recorded samples of the two
   commits (Mann-Whitney U, as ``asv compare``) must agree where they exist.
6. **Ramps and drifts**: close same-way steps are one change; a drift scan
   against a baseline window, the better fit kept where both fire.

Across series (:func:`analyze`): Benjamini-Hochberg at level ``fdr_q`` over all
step and drift tests (Benjamini & Hochberg 1995, JRSS B 57), a published false
alarm budget, "not the code" labels (version, environment, benchmark changed,
workload changed?), events grouped by commit pair, run health, and
cross-machine rules (:func:`divergent_changes`, :func:`efficiency_gaps`,
:func:`generation_speedups`).

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

from harness.analysis.cross import (
    CaseCost,
    DevicePeaks,
    divergent_changes,
    efficiency_gaps,  # noqa: F401
    generation_speedups,
    predicted_speedup,
)
from harness.analysis.detectors import (
    DETECTORS,
    detect_asv,
    detect_binseg,
    detect_otava,  # noqa: F401
    detect_pelt_l1,
    detect_rbf,
)
from harness.analysis.model import (
    ALERT_STATUSES,
    DRIFT_MAX_SHARE,
    ENV_KEYS,
    HIGHER_IS_BETTER,  # noqa: F401
    REPORT_SCHEMA,
    REPORT_VERSION,
    AnalysisConfig,
    Candidate,
    Direction,
    Finding,
    Point,
    Report,
    Series,
    SeriesAnalysis,
    SeriesKey,
    Status,
    direction_for,
)
from harness.analysis.run import analyze, analyze_inputs  # noqa: F401
from harness.analysis.series import analyze_series, failure_stretches  # noqa: F401
from harness.analysis.stats import benjamini_hochberg, robust_noise  # noqa: F401

__all__ = [
    "ALERT_STATUSES",
    "DETECTORS",
    "DRIFT_MAX_SHARE",
    "ENV_KEYS",
    "HIGHER_IS_BETTER",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "AnalysisConfig",
    "Candidate",
    "CaseCost",
    "DevicePeaks",
    "Direction",
    "Finding",
    "Point",
    "Report",
    "Series",
    "SeriesAnalysis",
    "SeriesKey",
    "Status",
    "analyze",
    "analyze_series",
    "benjamini_hochberg",
    "detect_asv",
    "detect_binseg",
    "detect_otava",
    "detect_pelt_l1",
    "detect_rbf",
    "direction_for",
    "divergent_changes",
    "efficiency_gaps",
    "failure_stretches",
    "generation_speedups",
    "predicted_speedup",
    "robust_noise",
]
