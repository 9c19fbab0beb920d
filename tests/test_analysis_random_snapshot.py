"""Seeded random histories: every series' analysis and the whole report, against snapshots.

``test_analysis_snapshot.py`` pins the report of one history built by hand,
with one series of each shape at one place. The mutation samples
(docs/mutation.md) kept finding one-token bugs that only other positions,
lengths and sizes reach: a ramp's baseline read from index 1 instead of 0, the
level after a ramp read past its window, a step one commit from the series'
start, a machine phase in the newest commits. This file draws many of each
shape at random places, sizes, noise levels and lengths (numpy's seeded
``default_rng``, the same on every platform), then pins

* for each series, what :func:`harness.analysis.analyze_series` found before
  the run-wide FDR step: every candidate (kind, commits, size, standard
  error, p-value, counts on each side, annotation), the levels, the
  excursions, the cleaned spikes, the noise, and
* the whole JSON report of :func:`harness.analysis.analyze` over all of them,

under the default configuration and one with every count and level moved.
Floats are kept to 6 significant digits (``test_analysis_snapshot._rounded``).
A change of the analysis's behaviour on any of these series fails the test;
when one is intended, regenerate with ``pytest
tests/test_analysis_random_snapshot.py --snapshot-update`` and read the diff.
``test_the_random_histories_reach_every_rule`` checks that the draws still
produce each kind of finding, so a regenerated snapshot cannot hide a rule
that went silent.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from test_analysis import A100, H100, mk
from test_analysis_snapshot import CONFIGS, _rounded

import harness.analysis as A

SEEDS = (0, 1, 2)
N = 70
SHAPES = (
    "flat",
    "step",
    "two_steps",
    "ramp",
    "excursion",
    "spikes",
    "before_gap",
    "pending",
    "creep",
    "short",
    "samples",
    "intermittent",
    "version",
    "env",
)


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def _commits(seed: int) -> list[str]:
    return [hashlib.sha1(f"seed {seed} commit {i}".encode()).hexdigest() for i in range(N)]


def _one(rng: np.random.Generator, shape: str, n: int) -> dict:
    """Values (``None`` = failed) and the extras of one series of ``shape``, ``n`` long."""
    y = np.ones(n)
    kw: dict = {}
    size = float(rng.choice([-1, 1]) * rng.uniform(0.03, 0.6))
    at = int(rng.integers(1, n))
    if shape == "step":
        y[at:] *= 1 + size
    elif shape == "two_steps":
        b = min(n - 1, at + int(rng.integers(1, 6)))
        y[at:] *= 1 + size
        y[b:] *= 1 + float(rng.uniform(-0.4, 0.8))
    elif shape == "ramp":
        L = min(int(rng.integers(2, 7)), n)
        a = min(at, n - L)
        y[a : a + L] *= np.linspace(1 + size / L, 1 + size, L)
        y[a + L :] *= 1 + size
        if rng.random() < 0.5:  # a big jump after the ramp: blame the jump
            y[min(n - 1, a + L + 2) :] *= float(rng.choice([1.5, 3.0]))
    elif shape == "excursion":
        L = int(rng.integers(1, 10))
        y[at : at + L] *= 1 + size
        if rng.random() < 0.3:  # partly back
            y[at + L :] *= 1 + size / 3
    elif shape == "spikes":
        for k in rng.integers(0, n, size=int(rng.integers(1, 4))):
            y[k] *= float(rng.uniform(1.3, 2.5))
    elif shape == "creep":
        L = min(int(rng.integers(4, 25)), n)
        a = min(at, n - L)
        y[a : a + L] *= np.linspace(1, 1 + size, L)
        y[a + L :] *= 1 + size
    elif shape == "pending":
        y[n - int(rng.integers(1, 4)) :] *= 1 + size
    elif shape == "version":
        y[at:] *= 1 + size
        shift = int(rng.integers(-1, 2))
        kw["versions"] = ["v1" if i < at + shift else "v2" for i in range(n)]
    elif shape == "env":
        y[at:] *= 1 + size * float(rng.integers(0, 2))
        kw["envs"] = [{"torch": "2.12"} if i < at else {"torch": "2.13"} for i in range(n)]
    noise = float(rng.choice([0.002, 0.01, 0.02, 0.04]))
    y = y * np.exp(noise * rng.standard_normal(n))
    if shape == "samples":
        k = int(rng.choice([3, 5, 6]))
        y2 = np.ones(n)
        y2[at:] *= 1 + size / 4
        samp = [list(v * np.exp(0.03 * rng.standard_normal(k))) for v in y2]
        y = np.array([float(np.median(s)) for s in samp])
        kw["samples"] = samp
    values: list = [float(v) for v in y]
    if shape == "before_gap":
        g = min(n - 2, at + int(rng.integers(0, 3)))
        for i in range(g + 1, min(n - 1, g + 1 + int(rng.integers(2, 8)))):
            values[i] = None
    if shape == "intermittent":
        for i in rng.choice(n, size=max(1, n // 5), replace=False):
            values[int(i)] = None
    if shape == "short":
        values = values[-int(rng.integers(2, 9)) :]
    if rng.random() < 0.15:  # asv's stored CI on some series
        kw["ci"] = float(rng.uniform(0.005, 0.05))
    return {"values": values, **kw}


def _history(seed: int) -> list[A.Series]:
    """40 series of random shapes over 3 machines, a machine-wide slow phase on
    ``box``, and the same benchmarks on two GPUs moving apart at one commit."""
    rng = np.random.default_rng(seed)
    commits = _commits(seed)
    out: list[A.Series] = []
    for i in range(40):
        shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
        n = int(rng.choice([5, 12, 30, N]))
        extra = _one(rng, shape, n)
        values = extra.pop("values")
        metric, unit = ("tflops", "tflops") if rng.random() < 0.3 else (None, "seconds")
        name = f"suite.{shape}{i}.track_{'tflops' if metric else 'time'}"
        # most series reach the newest commit; some stopped long ago (renamed)
        at = N - len(values) if len(values) == N or rng.random() < 0.8 else int(rng.integers(0, N - len(values)))
        cs = commits[at : at + len(values)]
        out.append(mk(values, name, f"m{i % 2}", metric=metric, unit=unit, commits=cs, **extra))
    t, L = int(rng.integers(10, N - 1)), int(rng.integers(1, 4))
    for j in range(6):
        v = np.exp(0.01 * rng.standard_normal(N))
        v[t : t + L] *= 1.25
        out.append(mk(list(v), f"suite.phase{j}.track_time", "box", unit="seconds", commits=commits))
    c = int(rng.integers(10, N - 10))
    for machine, move in (("ampere", 0.85), ("hopper", 1.15)):
        v = np.exp(0.015 * rng.standard_normal(N))
        v[c:] *= move
        out.append(mk(list(v), "suite.cross.track_time", machine, unit="seconds", commits=commits))
    return out


def _candidate(c: A.Candidate, commits: list[str]) -> dict:
    return {
        "kind": c.kind,
        "at": commits[c.index][:8],
        "start": commits[c.start][:8],
        "d": c.d,
        "se": c.se,
        "p": c.p_value,
        "p_samples": c.p_samples,
        "n_before": c.n_before,
        "n_after": c.n_after,
        "annotation": c.annotation,
        "reason": c.annotation_reason,
        "jump": c.jump,
        "note": c.note,
        "also": [commits[k][:8] for k in c.also],
        "part": c.part,
        "moves": [(commits[k][:8], d) for k, d in c.moves],
        "span_lo": c.span_lo,
    }


def _series_analysis(s: A.Series, config: A.AnalysisConfig, machine_commits: list[str]) -> dict:
    a = A.analyze_series(s, config, machine_commits=machine_commits)
    cm = a.valid_commits
    return {
        "series": s.key.label(),
        "n": [a.n_points, a.n_valid, a.n_failed, a.n_positions],
        "failures": a.failure_reasons,
        "noise": a.noise,
        "se_typical": a.se_typical,
        "insufficient": a.insufficient,
        "spikes": [x[:8] for x in a.spikes],
        "levels": [list(lv) for lv in a.levels],
        "excursions": [[cm[f][:8], cm[b][:8] if b < len(cm) else None, d, net] for f, b, d, net in a.excursions],
        "candidates": [_candidate(c, cm) for c in a.candidates],
        "gaps": [f.as_dict() for f in a.gap_findings],
    }


def _per_series(seed: int, config: A.AnalysisConfig) -> list[dict]:
    commits = _commits(seed)
    return _rounded([_series_analysis(s, config, commits) for s in _history(seed)])


def _report(seed: int, config: A.AnalysisConfig) -> dict:
    report = A.analyze(_history(seed), config, commit_order=_commits(seed), devices={"ampere": A100, "hopper": H100})
    return _rounded(report.as_dict())


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", SEEDS)
def test_each_series_analysis_of_a_random_history_is_the_stored_one(snapshot_json, seed, config):
    assert _per_series(seed, CONFIGS[config]) == snapshot_json


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", SEEDS)
def test_the_report_of_a_random_history_is_the_stored_one(snapshot_json, seed, config):
    assert _report(seed, CONFIGS[config]) == snapshot_json


def test_the_random_histories_reach_every_rule():
    """Over the seeds, the draws yield each kind of finding and each internal
    outcome the snapshots are meant to pin (else a regenerated snapshot could
    hide a rule gone silent)."""
    statuses, kinds, machine_events = set(), set(), 0
    excursions = spikes = annotated = merged = 0
    for seed in SEEDS:
        d = _report(seed, CONFIGS["default"])
        statuses |= {f["status"] for f in d["findings"]}
        machine_events += len(d["machine_events"])
        for row in _per_series(seed, CONFIGS["default"]):
            kinds |= {c["kind"] for c in row["candidates"]}
            excursions += len(row["excursions"])
            spikes += len(row["spikes"])
            annotated += sum(1 for c in row["candidates"] if c["annotation"])
            merged += sum(1 for c in row["candidates"] if c["moves"])
    for want in (
        "regression",
        "improvement",
        "pending",
        "missing",
        "drift_regression",
        "environment_change",
        "benchmark_version_change",
        "divergent_change",
    ):
        assert want in statuses, (want, sorted(statuses))
    assert kinds >= {"step", "drift"}, kinds
    assert machine_events >= len(SEEDS) - 1
    assert excursions and spikes and annotated and merged, (excursions, spikes, annotated, merged)
