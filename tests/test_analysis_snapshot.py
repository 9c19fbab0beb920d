"""The whole analysis report of one built history, compared with a stored snapshot.

The other analysis tests each assert one rule; this one pins everything the
report says at once (every finding's status, commits, ratio, CI, p and q
values, reason and annotations; the health counts, excursions, machine events
and per-series summaries) on a history that has each shape kernelwatch handles:
steps both ways and in both directions of metric, an excursion that reverts, a
ramp before a big step, a step just before a failure stretch, a creep, a
machine-wide slow phase, repeated runs as samples, an environment change and a
benchmark version bump at a step, a pending step at the end, a series that
stopped, categorical parameters, and the cross-GPU rules (divergent change,
efficiency gap, generation speed-up).

A change of any number or word of the report fails it, which is the point: the
mutation samples (docs/mutation.md) found that rule-by-rule tests let many
one-line bugs through because each asserts only what its rule is about. When a
change of the report is intended, regenerate the snapshot with
``pytest tests/test_analysis_snapshot.py --snapshot-update`` and read its diff
in review (syrupy, https://github.com/syrupy-project/syrupy). Floats are kept
to 6 significant digits so that the last bits of a BLAS or libm on another
machine do not count as a change.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from test_analysis import A100, H100, mk, noisy

import harness.analysis as A

N = 80
COMMITS = [hashlib.sha1(f"commit {i}".encode()).hexdigest() for i in range(N)]


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def _series(values, name, machine="cpu", params=(("n", "1"),), *, commits=COMMITS, **kw):
    return mk(values, name, machine, commits=commits, params=params, **kw)


def _history():
    series, aux = [], []
    ones = np.ones(N)

    def lv(*parts):
        return np.concatenate([np.full(n, x, dtype=float) for n, x in parts])

    series.append(_series(noisy(lv((40, 1.0), (40, 1.2)), 0.02, 1), "suite.step_up.track_time", unit="seconds"))
    series.append(_series(noisy(lv((50, 1.0), (30, 0.8)), 0.02, 2), "suite.step_down.track_time", unit="seconds"))
    series.append(
        _series(
            noisy(lv((45, 100.0), (35, 85.0)), 0.02, 3), "suite.matmul.track_tflops", metric="tflops", unit="tflops"
        )
    )
    exc = ones.copy()
    exc[30:32] = 1.5
    series.append(_series(noisy(exc, 0.01, 4), "suite.excursion.track_time", unit="seconds"))
    exc = 50.0 * ones
    exc[60:63] = 65.0
    series.append(_series(noisy(exc, 0.01, 40), "suite.excursion.track_gbps", metric="gbps", unit="gbps"))
    series.append(
        _series(noisy(lv((40, 1.0), (2, 1.04), (38, 3.12)), 0.02, 5), "suite.ramp.track_time", unit="seconds")
    )
    gap = list(noisy(lv((50, 1.0), (30, 5.9)), 0.02, 6))
    for i in range(51, 57):
        gap[i] = None
    series.append(_series(gap, "suite.before_gap.track_time", unit="seconds"))
    creep = np.r_[np.ones(30), np.linspace(1.0, 1.25, 30), 1.25 * np.ones(20)]
    series.append(_series(noisy(creep, 0.005, 7), "suite.creep.track_time", unit="seconds"))
    # repeated runs: five samples a commit, a 6% step at 40 in 3% noise
    rng = np.random.default_rng(8)
    level = lv((40, 1.0), (40, 1.06))
    samp = [list(x * np.exp(0.03 * rng.standard_normal(5))) for x in level]
    series.append(
        _series([float(np.median(s)) for s in samp], "suite.samples.track_time", unit="seconds", samples=samp)
    )
    # six runs a commit: the rank test's side of the samples test
    samp6 = [list(x * np.exp(0.03 * rng.standard_normal(6))) for x in lv((40, 1.0), (40, 1.15))]
    series.append(
        _series([float(np.median(s)) for s in samp6], "suite.samples6.track_time", unit="seconds", samples=samp6)
    )
    series.append(_series(noisy(np.ones(N), 0.6, 41), "suite.noisy.track_time", unit="seconds"))
    series.append(_series([1.0, 1.01, 0.99], "suite.short.track_time", unit="seconds", commits=COMMITS[-3:]))
    stop = list(noisy(lv((28, 1.0), (2, 1.6)), 0.02, 42))
    series.append(_series(stop, "suite.renamed.track_time", unit="seconds", commits=COMMITS[:30]))
    envs = [{"torch": "2.12"}] * 60 + [{"torch": "2.13"}] * 20
    series.append(_series(noisy(lv((60, 1.0), (20, 1.3)), 0.02, 9), "suite.env.track_time", unit="seconds", envs=envs))
    versions = ["v1"] * 25 + ["v2"] * 55
    series.append(
        _series(
            noisy(lv((25, 1.0), (55, 2.0)), 0.02, 10), "suite.version.track_time", unit="seconds", versions=versions
        )
    )
    series.append(_series(noisy(lv((78, 1.0), (2, 1.5)), 0.02, 11), "suite.pending.track_time", unit="seconds"))
    series.append(
        _series(noisy(np.ones(20), 0.02, 12), "suite.stopped.track_time", unit="seconds", commits=COMMITS[:20])
    )
    # an odd number of positions (79 points): the step test's family size is n - 2 m + 1
    series.append(
        _series(
            noisy(lv((40, 1.0), (39, 1.05)), 0.02, 43), "suite.odd.track_time", unit="seconds", commits=COMMITS[:79]
        )
    )
    # short series with asv's stored CI (+-3%): under 8 points it floors the noise
    for k in (7, 8):
        series.append(
            _series(
                noisy(np.ones(k), 0.002, 44 + k),
                f"suite.short{k}.track_time",
                unit="seconds",
                commits=COMMITS[-k:],
                ci=0.03,
            )
        )
    # two versions run three times each (a Liger CSV's shape): a samples test on 2 points
    runs = [[1.0, 1.01, 0.99], [2.5, 2.52, 2.49]]
    series.append(
        _series(
            [float(np.median(r)) for r in runs],
            "suite.two_versions.track_time",
            unit="seconds",
            samples=runs,
            commits=COMMITS[-2:],
        )
    )
    # a step at 20, then a version bump at 50 with the code step one commit after it
    versions2 = ["v1"] * 50 + ["v2"] * 30
    series.append(
        _series(
            noisy(lv((20, 1.0), (31, 1.3), (29, 1.95)), 0.01, 45),
            "suite.near_version.track_time",
            unit="seconds",
            versions=versions2,
        )
    )
    series.append(_series([None] * 12, "suite.all_failed.track_time", unit="seconds", commits=COMMITS[-12:]))
    out = noisy(ones, 0.02, 13)
    out[44] *= 1.8
    series.append(_series(out, "suite.outlier.track_time", unit="seconds"))
    for j, model in enumerate(("llama_3_8b", "mistral_7b")):
        series.append(
            _series(
                noisy(lv((35, 1.0), (45, 1.0 + 0.25 * j)), 0.02, 14 + j),
                "suite.liger.track_time",
                params=(("model", model), ("provider", "triton")),
                unit="seconds",
            )
        )
    # a machine-wide slow phase of 3 commits on "box": every series moves and comes back
    for j in range(6):
        v = noisy(ones, 0.015, 20 + j)
        v[55:58] *= 1.25
        series.append(_series(v, f"suite.phase{j}.track_time", machine="box", unit="seconds"))
    v = noisy(ones, 0.01, 27)  # an excursion of its own on 'box', well before the phase: not the machine's
    v[20:22] *= 1.5
    series.append(_series(v, "suite.own_excursion.track_time", machine="box", unit="seconds"))
    v = noisy(ones, 0.01, 26)  # a frozen control kernel moves with the machine: the evidence
    v[55:58] *= 1.2
    series.append(_series(v, "suite.control_copy.track_time", machine="box", unit="seconds"))
    # cross-GPU: opposite moves at 30 (divergent), sol for the efficiency gap, times for the speed-up
    series.append(
        _series(noisy(lv((30, 1.0), (50, 0.85)), 0.02, 30), "suite.cross.track_time", "ampere", unit="seconds")
    )
    series.append(
        _series(noisy(lv((30, 1.0), (50, 1.15)), 0.02, 31), "suite.cross.track_time", "hopper", unit="seconds")
    )
    series.append(_series(noisy(np.ones(N), 0.01, 32), "suite.gen.track_time", "ampere", unit="seconds"))
    series.append(_series(noisy(np.ones(N), 0.01, 33), "suite.gen.track_time", "hopper", unit="seconds"))
    aux.append(_series(noisy(0.8 * np.ones(N), 0.01, 34), "suite.gen.track_sol", "ampere", metric="sol"))
    aux.append(_series(noisy(0.4 * np.ones(N), 0.01, 35), "suite.gen.track_sol", "hopper", metric="sol"))
    costs = {
        ("suite.gen.track_time", (("n", "1"),)): A.CaseCost(
            flops=1e6, bytes_total=1e9, dtype="bf16", uses_tensor_cores=False
        ),
    }
    notes = {
        COMMITS[40]: [
            {"kind": "benchmark_changed", "text": "benchmarks/b.py changed", "evidence": {"files": ["benchmarks/b.py"]}}
        ]
    }
    return series, aux, costs, notes


def _rounded(x):
    if isinstance(x, float):
        return x if not math.isfinite(x) or x == 0 else float(f"{x:.6g}")
    if isinstance(x, dict):
        return {str(k): _rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v) for v in x]
    return x


#: The default configuration, and one with every count and level moved, so that a
#: bug which is invisible at the defaults (``2 * 3`` read as ``2 + 3 + 1``, a
#: window that only the default length hides) still changes the report.
CONFIGS = {
    "default": A.AnalysisConfig(),
    "moved": A.AnalysisConfig(
        min_effect=0.03,
        window=20,
        min_segment=2,
        confirm_after=3,
        min_points=5,
        drift_max_len=4,
        excursion_max_len=6,
        min_estimate_share=0.7,
        ci_level=0.95,
        divergence_threshold=0.08,
        split_z=3.5,
        tail_z=2.5,
    ),
}


def _report(config: A.AnalysisConfig = CONFIGS["default"]):
    series, aux, costs, notes = _history()
    report = A.analyze(
        series,
        config,
        commit_order=COMMITS,
        costs=costs,
        devices={"ampere": A100, "hopper": H100},
        aux_series=aux,
        commit_notes=notes,
    )
    return _rounded(report.as_dict())


@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_report_of_the_built_history_is_the_stored_one(snapshot_json, config):
    assert _report(CONFIGS[config]) == snapshot_json


def test_the_built_history_has_each_shape_it_is_built_for():
    """The snapshot is only worth something if the history exercises the rules:
    a finding of each kind the history was built for is in it (so a snapshot
    regenerated after a bug that silences a rule would not pass this)."""
    d = _report()
    got = {(f["status"], f["key"]["benchmark"] if f["key"] else None) for f in d["findings"]}
    for want in [
        ("regression", "suite.step_up.track_time"),
        ("improvement", "suite.step_down.track_time"),
        ("regression", "suite.matmul.track_tflops"),
        ("regression", "suite.ramp.track_time"),
        ("regression", "suite.before_gap.track_time"),
        ("pending", "suite.samples.track_time"),  # the two commits' samples do not differ
        ("drift_regression", "suite.creep.track_time"),
        ("environment_change", "suite.env.track_time"),
        ("benchmark_version_change", "suite.version.track_time"),
        ("pending", "suite.pending.track_time"),
        ("missing", "suite.stopped.track_time"),
        ("regression", "suite.liger.track_time"),
        ("efficiency_gap", "suite.gen.track_sol"),
        ("unexpected_generation_speedup", "suite.gen.track_time"),
        ("divergent_change", "suite.cross.track_time"),
    ]:
        assert want in got, (want, sorted(got))
    assert not {s for s, b in got if b == "suite.excursion.track_time" and s in ("regression", "improvement")}
    (ev,) = d["machine_events"]
    assert [c["moved"] for c in ev["controls"]] == [True], "the control kernel moved with the phase on 'box'"
    assert d["summary"]["series_all_failed"] == 1 and d["summary"]["failed_points"] == 18
