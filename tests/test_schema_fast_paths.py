"""The loader's per-row value checks take a fast path for plain lists (floats,
nulls, ints in range): it must clean exactly what the per-value check cleans."""

from __future__ import annotations

import math
import random

from harness.core import schema as S

COL = {"result": 0, "params": 1, "stats_ci_99_a": 2, "stats_n": 3}


def _reference(row, col):
    """The per-value rule, written out: a result value that is not a number or
    null, or any int beyond float range, becomes null."""
    out = list(row)
    for name in ("result", "stats_ci_99_a", "stats_n"):
        v = row[col[name]]
        if not isinstance(v, list):
            continue
        if name == "result":
            bad = {k for k, x in enumerate(v) if not (x is None or S._is_num(x)) or S._beyond_float(x)}
        else:
            bad = {k for k, x in enumerate(v) if S._beyond_float(x)}
        out[col[name]] = [None if k in bad else x for k, x in enumerate(v)]
    return out


POOL = [1.5, -2.0, 0.0, None, 3, -7, 10**400, -(10**400), math.nan, math.inf, True, "x", 2**1023]


def test_fast_paths_clean_what_the_per_value_rule_cleans():
    rng = random.Random(5)
    cleaned = 0
    for _ in range(4000):
        row = [[rng.choice(POOL) for _ in range(rng.randint(0, 5))] for _ in range(4)]
        row[1] = [["'1'"]]
        problems: list[str] = []
        got = S._clean_result_values(row, COL, "f.json: b", problems)
        want = _reference(row, COL)
        same = [
            [("nan" if isinstance(x, float) and math.isnan(x) else x) for x in col] for col in (got[0], got[2], got[3])
        ]
        ref = [
            [("nan" if isinstance(x, float) and math.isnan(x) else x) for x in col]
            for col in (want[0], want[2], want[3])
        ]
        assert same == ref, row
        cleaned += bool(problems)
        assert bool(problems) == (
            same
            != [[("nan" if isinstance(x, float) and math.isnan(x) else x) for x in c] for c in (row[0], row[2], row[3])]
        )
    assert cleaned > 500  # the random rows do hit the slow path


def test_a_nan_first_or_inside_does_not_hide_a_huge_int():
    for v in ([math.nan, 10**400], [10**400, math.nan], [1, math.nan, -(10**400)], [None, math.nan, 10**400]):
        row = [[1.0], [["'1'"]], list(v), [1]]
        problems: list[str] = []
        out = S._clean_result_values(row, COL, "f.json: b", problems)
        assert problems and all(not S._beyond_float(x) for x in out[2]), v
