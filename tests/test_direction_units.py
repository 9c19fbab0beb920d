"""A unit's direction comes from the unit (issue 29, item 7): rates are
higher-is-better, asv's own units and any time or size lower-is-better.

The end-to-end case: a ``track_`` benchmark in GB/s that halves was reported
as an improvement ("-50.0% faster"); it is a regression.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness import analysis as A
from harness.core.model import Direction, direction_for, unit_direction
from harness.store import results as R
from harness.store.dataset import build_inputs

RATES = (
    "GB/s",
    "GiB/s",
    "GFLOP/s",
    "TFLOP/s",
    "ops/s",
    "items/s",
    "it/s",
    "samples/sec",
    "tokens per second",
    "rows/min",
    "1/s",
    "Gbps",
    "GBps",
    "TFLOPS",
    "gflops",
    "IOPS",
    " gb/s ",
)
LOWER = ("seconds", "bytes", "unit", "s", "ms", "us", "ns", "MB", "GiB", "B", "s/it", "ms/op")


@pytest.mark.parametrize("unit", RATES)
def test_rates_are_higher_is_better(unit):
    assert unit_direction(unit) is Direction.HIGHER_IS_BETTER
    assert direction_for(None, unit) is Direction.HIGHER_IS_BETTER
    # the analysis passes a track_ series' lowercased unit as its metric name too
    assert direction_for(unit.strip().lower(), unit) is Direction.HIGHER_IS_BETTER


@pytest.mark.parametrize("unit", LOWER)
def test_asv_units_times_and_sizes_are_lower_is_better(unit):
    assert unit_direction(unit) is Direction.LOWER_IS_BETTER
    assert direction_for(None, unit) is Direction.LOWER_IS_BETTER


@pytest.mark.parametrize("unit", ["Hz", "kHz", "MHz", "GHz", "x", "times"])
def test_frequencies_and_speedup_factors_are_higher_is_better(unit):
    """Hostile trial (issue 29 item 7): a track_ in Hz or a speed-up in x that
    halves read as "-50% faster"; the control beside it, seconds, stays lower."""
    assert unit_direction(unit) is Direction.HIGHER_IS_BETTER
    assert direction_for(None, unit) is Direction.HIGHER_IS_BETTER
    assert unit_direction("s") is Direction.LOWER_IS_BETTER


def test_a_unit_that_says_nothing_leaves_the_name_to_decide():
    for unit in ("fraction", "%", "count", "", None):
        assert unit_direction(unit) is None
    assert direction_for("sol", "fraction") is Direction.HIGHER_IS_BETTER
    assert direction_for("latency_ms", None) is Direction.LOWER_IS_BETTER
    assert direction_for("count", "count") is Direction.LOWER_IS_BETTER
    # a recognised unit wins over a name: a "gbps" column measured in seconds is a time
    assert direction_for("gbps", "seconds") is Direction.LOWER_IS_BETTER


def _results(root: Path, unit: str, values: list[float]) -> Path:
    """An asv results folder: one ``track_`` benchmark in ``unit``, one commit per value."""
    m = root / "m"
    m.mkdir(parents=True)
    (m / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    name = "suite.copy.track_bandwidth"
    meta = {"name": name, "type": "track", "unit": unit, "param_names": [], "params": [], "version": "1"}
    (root / "benchmarks.json").write_text(json.dumps({"version": 2, name: meta}))
    for i, v in enumerate(values):
        sha = f"{i + 1:02x}" * 20
        (m / f"{sha[:8]}-py.json").write_text(
            json.dumps(
                {
                    "version": 2,
                    "commit_hash": sha,
                    "date": 1_700_000_000_000 + i * 86_400_000,
                    "env_name": "py",
                    "python": "3.11",
                    "requirements": {},
                    "params": {"machine": "m"},
                    "result_columns": ["result", "params", "version", "started_at", "duration"],
                    "results": {name: [[v], [], "1", 1_700_000_000_000, 1.0]},
                }
            )
        )
    return root


@pytest.mark.parametrize("unit, want", [("GB/s", A.Status.REGRESSION), ("seconds", A.Status.IMPROVEMENT)])
def test_a_bandwidth_that_halves_is_a_regression(tmp_path, unit, want):
    rng = np.random.default_rng(0)
    values = list(100.0 * (1 + 0.005 * rng.standard_normal(40)))
    values[25:] = [v / 2 for v in values[25:]]
    rs = R.load(_results(tmp_path / "results", unit, values))
    inputs = build_inputs(rs)
    (s,) = inputs.series
    assert s.unit == unit
    report = A.analyze(inputs.series, machine_commits=inputs.machine_commits, commit_order=inputs.commit_order)
    statuses = [f.status for f in report.findings]
    assert want in statuses, statuses
    # the negative control: the same numbers in seconds are a 2x speed-up, never a regression
    other = A.Status.IMPROVEMENT if want is A.Status.REGRESSION else A.Status.REGRESSION
    assert other not in statuses
    f = next(f for f in report.findings if f.status is want)
    if want is A.Status.REGRESSION:
        assert "worse" in f.reason and "faster" not in f.reason, f.reason


def test_the_gate_reads_a_bandwidth_that_halves_as_slower(tmp_path):
    from harness.gate import asvrun
    from harness.gate import decide as gate

    rng = np.random.default_rng(1)
    res = tmp_path / "results"
    name = "suite.copy.track_bandwidth"
    shas = {}
    for role, level, unit in (("base", 100.0, "GB/s"), ("head", 50.0, "GB/s")):
        sha = ("b" if role == "base" else "c") * 40
        shas[role] = sha
        m = res / "m"
        m.mkdir(parents=True, exist_ok=True)
        (m / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
        smp = list(level * (1 + 0.01 * rng.standard_normal(20)))
        (m / f"{sha[:8]}-py.json").write_text(
            json.dumps(
                {
                    "version": 2,
                    "commit_hash": sha,
                    "date": 1_700_000_000_000 + (0 if role == "base" else 1000),
                    "env_name": "py",
                    "python": "3.11",
                    "requirements": {},
                    "params": {"machine": "m"},
                    "result_columns": ["result", "params", "version", "started_at", "duration", "samples"],
                    "results": {name: [[float(np.median(smp))], [], "1", 1, 1.0, [smp]]},
                }
            )
        )
        meta = {"name": name, "type": "track", "unit": unit, "param_names": [], "params": [], "version": "1"}
        (res / "benchmarks.json").write_text(json.dumps({"version": 2, name: meta}))
    table, warnings, failures = asvrun.collect(res, shas, {})
    assert not failures
    assert any("rate" in w and name in w for w in warnings), warnings
    sides = table[(name, ())]
    v = gate.classify(gate.SeriesInput(name, (), sides["base"], sides["head"]))
    assert v.status is gate.Status.SLOWER and v.stats.ratio == pytest.approx(2.0, rel=0.05)
    # negative control: the same numbers in seconds are twice as fast
    meta["unit"] = "seconds"
    (res / "benchmarks.json").write_text(json.dumps({"version": 2, name: meta}))
    table, warnings, _ = asvrun.collect(res, shas, {})
    sides = table[(name, ())]
    assert gate.classify(gate.SeriesInput(name, (), sides["base"], sides["head"])).status is gate.Status.FASTER


@pytest.mark.parametrize("unit", ["%", "score", "accuracy"])
def test_a_unit_that_does_not_say_is_assumed_and_says_so(tmp_path, unit, capsys):
    """An accuracy in % that halves cannot be told from an error rate that halves:
    kernelwatch reads it as asv does (lower is better) and says it assumed that, in
    the summary, one warning per unit and the finding's reason (issue 29, round 4).
    The negative control: the same numbers in GB/s are stated, not assumed."""
    from harness.cli import main
    from harness.core.model import direction_assumed

    assert direction_assumed(None, unit) and not direction_assumed(None, "GB/s")
    assert not direction_assumed(None, "seconds") and not direction_assumed(None, None)
    assert not direction_assumed("track_throughput", unit)  # the name says
    rng = np.random.default_rng(2)
    values = list(90.0 * (1 + 0.005 * rng.standard_normal(40)))
    values[25:] = [v / 2 for v in values[25:]]
    for u, assumed in ((unit, True), ("GB/s", False)):
        root = _results(tmp_path / u.replace("/", "_").replace("%", "pct") / "results", u, values)
        out = tmp_path / f"{len(u)}-{assumed}.json"
        assert main(["analyze", "--results", str(root), "--repo", "", "--json", str(out)]) == 0
        captured = capsys.readouterr()
        text = captured.err  # warnings go to stderr with every other input problem (round 6, S-a)
        rep = json.loads(out.read_text())
        assert rep["summary"]["direction_assumed"] == ({u: 1} if assumed else {})
        (f,) = [f for f in rep["findings"] if f["key"]["benchmark"].endswith("track_bandwidth")]
        assert ("lower is better assumed" in f["reason"]) is assumed, f["reason"]
        assert (f"kernelwatch: warning: 1 series in unit {u!r}" in text) is assumed, text
        assert "kernelwatch analysis" in captured.out and "kernelwatch: warning" not in captured.out, captured.out
