"""Points made on access (issue 28): a :class:`PointView` reads as the list of
points it stands for, and the analysis that publish runs on views gives the
report it gives on held points."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_site_data import sha, write_results

from harness.core.model import Point, Series, SeriesKey, point_commits, point_values
from harness.report import site
from harness.store import results as R
from harness.store.model import SeriesColumns

NAN = math.nan


def _columns(n: int = 7, samples: bool = True, records: bool = True) -> SeriesColumns:
    key = SeriesKey("m1", "suite.a.track_time", (("n", "3"),), "")
    value = np.array([1.0, NAN, 1.2, 1.1, NAN, 3.0, 1.05][:n])
    return SeriesColumns(
        key=key,
        unit="seconds",
        type="track",
        commits=[sha(i) for i in range(n)],
        value=value,
        reason=[None, "failed", None, None, "invalid: x", None, None][:n],
        ci_lo=np.array([0.9, NAN, 1.1, NAN, NAN, 2.9, 1.0][:n]),
        ci_hi=np.array([1.1, NAN, 1.3, NAN, NAN, 3.1, 1.1][:n]),
        q_25=np.array([0.95, NAN, NAN, NAN, NAN, NAN, 1.01][:n]),
        q_75=np.array([1.05, NAN, NAN, NAN, NAN, NAN, 1.09][:n]),
        version=["v1"] * (n - 2) + ["v2"] * 2,
        env_name=["py3.11"] * n,
        started_at=list(range(100, 100 + n)),
        samples=[[1.0, 1.01], None, [1.2], None, None, [3.0, 2.9, 3.1], []][:n] if samples else None,
        records=[{"r": i} if i % 3 == 0 else None for i in range(n)] if records else None,
    )


def _held(c: SeriesColumns) -> list[Point]:
    """``columns.points()`` with samples as tuples (what the analysis is given)."""
    out = c.points()
    for p in out:
        if p.samples is not None:
            p.samples = tuple(p.samples) or None
    return out


def test_a_view_reads_as_its_points():
    c = _columns()
    v, held = c.point_view(), _held(c)
    assert len(v) == len(held) == 7
    assert list(v) == held and v == held
    assert [v[i] for i in range(7)] == held
    assert v[-1] == held[-1] and v[-7] == held[0]
    assert v[2:5] == held[2:5] and v[::-2] == held[::-2] and v[5:2] == []
    assert list(reversed(v)) == held[::-1]
    assert v.commit_list() == [p.commit for p in held] == point_commits(v)
    assert v.value_list() == [p.value for p in held] == point_values(v)
    assert held[1].value is None and held[0].ci == (0.9, 1.1) and held[3].ci is None
    assert held[5].samples == (3.0, 2.9, 3.1) and held[6].samples is None  # an empty sample list is none
    assert v.has_records() and not _columns(records=False).point_view().has_records()
    # Negative control: a view over other values is not equal.
    other = _columns()
    other.value[2] = 1.3
    assert other.point_view() != held


def test_a_view_refuses_what_a_list_refuses():
    v = _columns().point_view()
    for bad in (7, -8, 100):
        with pytest.raises(IndexError):
            v[bad]
    for bad in ("1", 1.0, True, None):
        with pytest.raises(TypeError):
            v[bad]
    with pytest.raises(TypeError):
        hash(v)


def test_a_view_takes_numpy_integers_as_a_list_does():
    import numpy as np

    c = _columns()
    v, held = c.point_view(), _held(c)
    assert v[np.int64(2)] == held[np.int64(2)] and v[np.intp(-1)] == held[-1]
    with pytest.raises(IndexError):
        v[np.int32(7)]
    with pytest.raises(TypeError):  # control: a numpy float is no index, for a list either
        v[np.float64(1.0)]


def test_a_point_of_a_view_is_a_copy():
    v = _columns().point_view()
    p = v[0]
    p.value = 99.0
    assert v[0].value == 1.0


def test_select_keeps_positions_and_environments():
    c = _columns()
    held = _held(c)
    envs = [{"torch": "2.13"}, None, {"torch": "2.14"}]
    s = c.point_view().select([0, 2, 5], envs)
    assert s.commit_list() == [sha(0), sha(2), sha(5)]
    assert [p.env for p in s] == envs
    assert [p.value for p in s] == [held[0].value, held[2].value, held[5].value]
    # a selection of a selection maps through both
    s2 = s.select([2], [None])
    assert s2.commit_list() == [sha(5)] and s2[0].samples == (3.0, 2.9, 3.1)
    assert s.has_records() and not c.point_view().select([1, 2], None).has_records()
    with pytest.raises(ValueError, match="2 environments for 3 points"):
        c.point_view().select([0, 1, 2], [None, None])


def test_a_series_over_a_view_checks_duplicate_commits():
    c = _columns()
    c.commits[3] = c.commits[1]
    with pytest.raises(ValueError, match="appears twice"):
        Series(c.key, c.point_view())
    assert len(Series(c.key, _columns().point_view()).points) == 7


BENCH = {
    "suite.a.track_time": {"param_names": ["n"], "params": [["'1'", "'2'"]]},
    "suite.b.time_b": {"param_names": [], "params": []},
}


def _value(m, i, bench, combo):
    if i == 11 and combo and combo[0] == "'2'":
        return None  # failed
    base = 1e-3 * (1 + 0.003 * ((i * 7) % 5))
    step = 1.4 if i >= 24 and bench == "suite.b.time_b" else 1.0  # one real step
    return base * step * (2 if m == "m2" else 1)


def _report(res, held: bool) -> dict:
    rs, columns = R.load_columns(res, quartiles=False)
    for key, c in columns.items():
        s = rs.series[key] = R.Series(key=key, unit=c.unit, type=c.type)
        s.points = c.points() if held else c.point_view()
    out, msg = site.run_analysis(rs)
    assert out is not None, msg
    return json.loads(json.dumps(out, default=str))


def test_the_analysis_on_views_equals_it_on_held_points(tmp_path):
    res = write_results(
        tmp_path / "r",
        {"m1": {"cpu": "a"}, "m2": {"cpu": "b"}},
        [sha(i) for i in range(36)],
        BENCH,
        _value,
        samples=True,
    )
    held, viewed = _report(res, True), _report(res, False)
    assert viewed == held
    statuses = {f["status"] for f in held["findings"]}
    assert "regression" in statuses and "failing" in statuses, statuses
    # Negative control: the comparison sees a moved value.
    f = res / "m1" / f"{sha(30)[:8]}-kernelwatch-py3.11.json"
    doc = json.loads(f.read_text())
    doc["results"]["suite.b.time_b"][0][0] *= 3.0
    f.write_text(json.dumps(doc))
    assert _report(res, False) != held
