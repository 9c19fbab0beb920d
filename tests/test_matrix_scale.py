"""The matrix page's per-suite means read each row a bounded number of times
(issue 29, item 5): work is counted, not timed, so a busy machine cannot fail it.
The timing itself is ``experiments/scale/bench_matrix.py`` (prints the ratio)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.report.matrix import suite_means

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments" / "scale"))
import bench_matrix  # noqa: E402


class CountingRow(dict):
    """A row that counts how often its ``suite`` is read."""

    reads = 0

    def __getitem__(self, k):
        if k == "suite":
            CountingRow.reads += 1
        return super().__getitem__(k)


def suite_reads(classes: int) -> int:
    rows = [CountingRow(r) for r in bench_matrix.rows(classes)]
    model = SimpleNamespace(machines=bench_matrix.MACHINES, candidates=bench_matrix.CANDIDATES)
    CountingRow.reads = 0
    geo = suite_means(model, rows)
    assert len(geo) == classes
    return CountingRow.reads


def test_suite_means_reads_each_row_a_bounded_number_of_times():
    small, large = suite_reads(100), suite_reads(400)
    # linear: 4x the rows, 4x the reads; filtering all rows once per suite was 16x
    assert large <= 5 * small, (small, large)
    assert large <= 3 * 400, large


def test_suite_means_groups_and_counts_like_before():
    model = SimpleNamespace(machines=["m1"], candidates=[{"hash": "a" * 40}])
    rows = [
        {"suite": "s.b", "sol": {"m1": 0.25}, "sol_status": {}, "speedup": {"a" * 40: {"m1": 2.0}}, "doubt": {}},
        {"suite": "s.a", "sol": {"m1": 1.5}, "sol_status": {"m1": ("above_peak", "x")}, "speedup": {}, "doubt": {}},
        {"suite": "s.b", "sol": {"m1": 1.0}, "sol_status": {}, "speedup": {"a" * 40: {"m1": 0.5}}, "doubt": {}},
    ]
    geo = suite_means(model, rows)
    assert [g["suite"] for g in geo] == ["s.a", "s.b"]
    assert geo[0]["sol"][0][1] == "0, 1 failing a guard left out"
    assert geo[1]["sol"][0][1] == "2"
    assert geo[1]["speedup"]["a" * 40] == [("1.000x", 2, 0)]
    # a mean over a cell marked [?] (too noisy, contended) is marked too (newcomer trial, 2026-12-03)
    rows[2]["doubt"] = {"m1": "too noisy to judge"}
    assert suite_means(model, rows)[1]["speedup"]["a" * 40] == [("[?] 1.000x", 2, 1)]


@pytest.mark.parametrize("argv", [["--classes", "0"], ["--repeat", "0"]])
def test_bench_matrix_rejects_bad_sizes(argv):
    with pytest.raises(SystemExit):
        bench_matrix.main(argv)
