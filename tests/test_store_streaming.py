"""The streaming loader (issue 28): files read one at a time and rows compacted
into arrays give exactly what reading a machine in memory gives; a commit in two
files falls back to the in-memory rules."""

from __future__ import annotations

import json
import math

import numpy as np
from test_site_data import sha, write_results

from harness.store import columns as C
from harness.store import results as R

BENCH = {
    "suite.a.track_time": {"param_names": ["n"], "params": [["'1'", "'2'", "'3'"]]},
    "suite.b.time_b": {"param_names": [], "params": []},
}


def _value(m, i, bench, combo):
    if i == 7 and combo and combo[0] == "'2'":
        return None  # failed
    if i == 9 and combo and combo[0] == "'3'":
        return math.nan  # skipped
    return 1e-3 * (1 + 0.01 * (i % 5)) * (2 if m == "m2" else 1)


def _results(tmp_path):
    return write_results(
        tmp_path / "r", {"m1": {"cpu": "a"}, "m2": {"cpu": "b"}}, [sha(i) for i in range(23)], BENCH, _value
    )


def _flat(rs, cols) -> dict:
    out = {"errors": list(rs.errors), "files": rs.files_loaded, "skipped": rs.skipped_points}
    for key, c in cols.items():
        out[repr(key)] = (
            list(c.commits),
            [None if v != v else v for v in c.value.tolist()],
            list(c.reason),
            [None if v != v else v for v in c.ci_lo.tolist()],
            [None if v != v else v for v in c.q_75.tolist()],
            list(c.version),
        )
    return out


def test_streamed_and_compacted_equals_in_memory(tmp_path, monkeypatch):
    res = _results(tmp_path)
    streamed = _flat(*R.load_columns(res))
    monkeypatch.setattr(C, "COMPACT_ROWS", 4)  # several chunks per group
    chunked = _flat(*R.load_columns(res))
    monkeypatch.setattr(R, "_stream_machine", lambda *a, **k: None)  # the in-memory path only
    monkeypatch.setattr(C, "COMPACT_ROWS", 10**9)
    in_memory = _flat(*R.load_columns(res))
    assert streamed == chunked == in_memory
    assert any("failed" in str(v) for v in in_memory.values())
    # Negative control: the comparison sees one changed value.
    f = res / "m1" / f"{sha(3)[:8]}-kernelwatch-py3.11.json"
    doc = json.loads(f.read_text())
    doc["results"]["suite.a.track_time"][0][0] *= 1.5
    f.write_text(json.dumps(doc))
    assert _flat(*R.load_columns(res)) != in_memory


def test_a_commit_in_two_files_takes_the_in_memory_rules(tmp_path):
    res = _results(tmp_path)
    src = res / "m1" / f"{sha(4)[:8]}-kernelwatch-py3.11.json"
    (res / "m1" / "copy-of-a-run.json").write_text(src.read_text())
    rs, cols = R.load_columns(res)
    assert sum("in 2 results files" in e for e in rs.errors) == 1, rs.errors
    key = next(k for k in cols if k.machine == "m1" and k.benchmark == "suite.a.track_time")
    assert cols[key].commits.count(sha(4)) == 1 and len(cols[key]) == 23
    assert np.isfinite(cols[key].value).sum() == 23


def test_rows_are_compacted_in_chunks_of_compact_rows(tmp_path, monkeypatch):
    """A group keeps COMPACT_ROWS rows as parsed before it turns them into arrays
    (one numpy pass per chunk, not per row); the last chunk is the remainder."""
    res = _results(tmp_path)  # 23 commits, 2 machines x 2 benchmarks: 4 groups
    monkeypatch.setattr(C, "COMPACT_ROWS", 4)
    sizes = []
    compact = C.Group.compact

    def counting(self, quartiles=True):
        if self.cols[C.RESULT]:
            sizes.append(len(self.cols[C.RESULT]))
        return compact(self, quartiles)

    monkeypatch.setattr(C.Group, "compact", counting)
    R.load_columns(res)
    assert sorted(sizes) == sorted([4] * 5 * 4 + [3] * 4)  # 23 = 5 x 4 + 3, per group


def test_a_statistic_list_shorter_than_the_grid_is_unknown_for_the_rest(tmp_path):
    """A ``stats_*`` list with fewer entries than parameter combinations gives the
    first combinations their statistic and the others none; every value is kept."""
    from test_bad_input import _benchmarks, _machine, _meta, _v2_file

    res = tmp_path / "results"
    grid = [["1", "2", "3"]]
    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x", params=grid)})
    f = _v2_file("a" * 40, params=grid)
    f["result_columns"] += ["stats_ci_99_a", "stats_ci_99_b"]
    f["results"]["suite.x.time_x"] += [[0.9], [1.1, 1.2, 1.3]]  # ci_a for size 1 only
    _machine(res, "m", {"aaaaaaaa-py3.11.json": f})
    rs, cols = R.load_columns(res, with_records=False)
    assert not rs.errors
    by_size = {dict(k.params)["size"]: c for k, c in cols.items()}
    assert [by_size[s].value.tolist() for s in "123"] == [[1.0], [1.0], [1.0]]
    assert by_size["1"].ci_lo.tolist() == [0.9] and by_size["1"].ci_hi.tolist() == [1.1]
    assert all(np.isnan(by_size[s].ci_lo).all() and np.isnan(by_size[s].ci_hi).all() for s in "23")
