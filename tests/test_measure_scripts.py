"""Pure parts of the measurement scripts: the CPU floor's A/B agreement and the
gate-power script's per-series table (the measuring itself is run by hand; see
docs/performance.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "experiments" / "cpu-noise"


def _load(name: str):
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def test_floor_agreement_counts_blocks_of_two_k_processes():
    floor = _load("cpu_floor")
    ops = list(floor.OPS)
    same = {op: 1.0 for op in ops}
    slow = {op: 1.05 for op in ops}
    # k = 1: pairs (p0, p1), (p2, p3): the first agrees, the second is 5% apart.
    ok, total = floor.agreement([same, same, same, slow], 1, 0.02)
    assert (ok, total) == (len(ops), 2 * len(ops))
    # k = 2: A = (same, same), B = (same, slow): medians 1.0 vs 1.025 -> outside 2% ...
    ok, total = floor.agreement([same, same, same, slow], 2, 0.02)
    assert (ok, total) == (0, len(ops))
    # ... and inside 3%.
    assert floor.agreement([same, same, same, slow], 2, 0.03) == (len(ops), len(ops))
    # Too few processes for one block: nothing compared.
    assert floor.agreement([same], 1, 0.02) == (0, 0)


def test_gate_power_per_series_table_names_each_series():
    gp = _load("gate_power")
    quiet = [[1.0 + 0.001 * (i % 5) for i in range(20)] for _ in range(8)]
    rounds_by = {("suite.a.track_time", (("provider", "torch"),)): {"base": quiet, "head": quiet}}
    md = gp.per_series_table(rounds_by, threshold=0.01, effects=(0.0, 0.05), group=2, alpha=0.01)
    assert "suite.a.track_time(provider=torch)" in md
    row = [line for line in md.splitlines() if "suite.a" in line][0]
    # A/A on identical quiet rounds never blocks; a 5% slowdown always does.
    assert "0.0% (0/4)" in row and "100.0% (4/4)" in row


@pytest.mark.parametrize("bad", [["--processes", "0"], ["--seconds", "0"]])
def test_floor_rejects_nonpositive_options(bad):
    floor = _load("cpu_floor")
    with pytest.raises(SystemExit) as exc:
        floor.main(bad)
    assert exc.value.code == 2


def test_p1_vs_floor_counts_each_op_of_each_process_pair():
    """``p1_vs_floor.floor_pairs``: pairs are processes (0, 1), (2, 3); an op
    agrees when ``|B / A - 1| <= threshold``; the drift entry is not an op."""
    mod = _load("p1_vs_floor")
    runs = [
        {"a": 1.00, "b": 1.00, "__drift__": [1.0]},
        {"a": 1.01, "b": 1.05, "__drift__": [9.0]},
        {"a": 1.00, "b": 1.00},
        {"a": 0.97, "b": 1.019},
    ]
    assert mod.floor_pairs(runs, 0.02) == (2, 4)  # a: 1%, 3%; b: 5%, 1.9%
    assert mod.floor_pairs(runs, 0.06) == (4, 4)
    assert mod.floor_pairs(runs[:3], 0.02) == (1, 2)  # an unpaired last process is left out
