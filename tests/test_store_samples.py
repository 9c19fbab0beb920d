"""Repeated runs are samples; categorical Liger parameters (issue 23, items 5 and 6).

Every input is built here from its shape: Liger CSVs with several runs of a
version, a named x value; asv results folders with two files for one commit.
Each has a negative control (distinct commits stay distinct points, a bad row
stays a reported bad row, a copied file is not a second run).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from harness.store import dataset, importers
from harness.store import results as R

HEADER = ",".join(importers.LIGER_COLUMNS)
CFG = '"{""M"": 2048, ""dtype"": ""torch.bfloat16"", ""eps"": 1e-06}"'


def _row(x, p50, ts, version, p20=None, p80=None, kernel="rms_norm") -> str:
    p20 = p50 * 0.98 if p20 is None else p20
    p80 = p50 * 1.02 if p80 is None else p80
    return f"{kernel},liger,forward,speed,ms,H,hidden size,{x},{p50},{p20},{p80},{CFG},NVIDIA H100 NVL,{ts},{version}"


def _csv(tmp_path: Path, rows: list[str], name="liger.csv") -> Path:
    f = tmp_path / name
    f.write_text("\n".join([HEADER, *rows]) + "\n")
    return f


# ----------------------------------------------------------------------------- Liger: runs are samples


def test_liger_runs_of_a_version_are_one_point_with_a_sample_each(tmp_path):
    runs = {"0.5.2": [0.0521, 0.0500, 0.0514], "0.6.0": [0.0203, 0.0199, 0.0211]}
    rows = [
        _row(4096, y, f"2025-0{i + 1}-0{k + 1} 10:00:00", v)
        for i, (v, ys) in enumerate(runs.items())
        for k, y in enumerate(ys)
    ]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    assert not rs.errors
    (s,) = rs.series.values()
    assert [p.commit for p in s.points] == ["liger-v0.5.2", "liger-v0.6.0"]
    for p, ys in zip(s.points, runs.values()):
        assert p.samples == ys  # one per run, oldest first, in ms like the value
        assert p.value == statistics.median(ys)
        assert p.ci == (min(y * 0.98 for y in ys), max(y * 1.02 for y in ys))
        assert [r["p50"] for r in p.record["runs"]] == ys
        assert p.record["time_s"] == p.value * 1e-3 and p.record["cost"]["bytes_total"] > 0
        assert p.env_name is None  # the version is the commit, never an environment change
    inp = dataset.build_inputs(rs)
    (a,) = inp.series
    assert [len(p.samples) for p in a.points] == [3, 3]
    assert len({json.dumps(p.env, sort_keys=True) for p in a.points}) == 1


def test_liger_rows_of_one_timestamp_are_one_run_last_wins(tmp_path):
    # negative control: repeated rows of one run (same timestamp) are not more samples
    ts = "2025-01-25 23:43:11"
    rows = [_row(4096, 0.05, ts, "0.5.2"), _row(4096, 0.06, ts, "0.5.2"), _row(4096, 0.07, ts, "0.5.2")]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    ((p,),) = [s.points for s in rs.series.values()]
    assert p.value == 0.07 and p.samples == [0.07]


def test_liger_runs_in_two_files_are_samples_of_one_point(tmp_path):
    a = _csv(tmp_path, [_row(1024, 0.010, "2025-01-01 10:00:00", "0.5.2")], "a.csv")
    b = _csv(tmp_path, [_row(1024, 0.014, "2025-01-02 10:00:00", "0.5.2")], "b.csv")
    rs = importers.load_liger_csvs([a, b])
    ((p,),) = [s.points for s in rs.series.values()]
    assert p.samples == [0.010, 0.014] and p.value == statistics.median([0.010, 0.014])
    assert [r["source"] for r in p.record["runs"]] == [f"{a}:2", f"{b}:2"]


def test_liger_invalid_run_is_never_a_sample(tmp_path):
    rows = [
        _row(4096, 0.05, "2025-01-01 10:00:00", "0.5.2"),
        _row(4096, 0, "2025-01-02 10:00:00", "0.5.2", p20=0, p80=0),
        _row(4096, 0.07, "2025-01-03 10:00:00", "0.5.2"),
        _row(8192, 0, "2025-01-01 10:00:00", "0.5.2", p20=0, p80=0),
    ]
    f = _csv(tmp_path, rows)
    rs = importers.load_liger_csvs([f])
    pts = {dict(s.key.params)["H"]: s.points for s in rs.series.values()}
    (p,) = pts["4096"]
    assert p.samples == [0.05, 0.07] and p.value == statistics.median([0.05, 0.07])
    assert [r.get("invalid", "") for r in p.record["runs"]][1].startswith("column y_value_50 is zero")
    (bad,) = pts["8192"]  # every run invalid: no value, the reason, no samples
    assert bad.value is None and bad.reason.startswith("invalid: ") and not bad.samples
    assert any(e.startswith(f"{f}:3:") and "zero" in e for e in rs.errors)


# ----------------------------------------------------------------------------- Liger: categorical x


def test_liger_named_x_value_is_a_string_parameter(tmp_path):
    rows = [
        _row("llama_3_8b", 0.30, "2025-01-01 10:00:00", "0.5.2", kernel="swiglu"),
        _row("qwen2.5-7b", 0.40, "2025-01-01 10:00:00", "0.5.2", kernel="swiglu"),
        _row(4096, 0.05, "2025-01-01 10:00:00", "0.5.2"),
    ]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    assert not rs.errors
    by_x = {dict(s.key.params)["H"]: s for s in rs.series.values()}
    assert set(by_x) == {"llama_3_8b", "qwen2.5-7b", "4096"}
    named = by_x["llama_3_8b"].points[0]
    assert named.value == 0.30 and named.record["cost"] is None and "is a name" in named.record["cost_reason"]
    assert by_x["4096"].points[0].record["cost"]["bytes_total"] == (2 * 2048 * 4096 + 4096) * 2  # numeric x sizes
    inp = dataset.build_inputs(rs)
    assert {s.key.params[-1] for s in inp.series} == {("H", "llama_3_8b"), ("H", "qwen2.5-7b"), ("H", "4096")}


def test_liger_bad_rows_stay_named_beside_named_x_values(tmp_path):
    # negative control: non-numeric y, a bare word or a non-finite x are still bad rows, by line
    rows = [
        _row("llama_3_8b", "abc", "2025-01-01 10:00:00", "0.5.2", p20=1, p80=1),  # 2: y not a number
        _row("hidden", 0.1, "2025-01-01 10:00:00", "0.5.2"),  # 3: a bare word, not a name
        _row("inf", 0.1, "2025-01-01 10:00:00", "0.5.2"),  # 4: x not finite
        _row("llama_3_8b", 0.2, "2025-01-01 10:00:00", "0.5.2"),  # 5: good
    ]
    f = _csv(tmp_path, rows)
    rs = importers.load_liger_csvs([f])
    skipped = [e for e in rs.errors if "row skipped" in e]
    assert len(skipped) == 3
    assert skipped[0].startswith(f"{f}:2: column y_value_50 is not a number")
    assert skipped[1].startswith(f"{f}:3: column x_value is not a number")
    assert skipped[2].startswith(f"{f}:4: column x_value is not finite")
    ((p,),) = [s.points for s in rs.series.values()]
    assert p.value == 0.2


def test_liger_x_names_need_a_digit_or_underscore_whatever_their_case(tmp_path):
    """Upper-case letters, ``.`` and ``-`` sort before ``_`` but are no digit or
    ``_``: ``Hidden``, ``GPT-NEO`` and ``a.b`` are bare words, bad rows by line;
    ``GPT_2`` is a name (mutation: ``c == "_"`` as ``c <= "_"``)."""
    rows = [
        _row("Hidden", 0.1, "2025-01-01 10:00:00", "0.5.2"),  # 2
        _row("GPT-NEO", 0.1, "2025-01-01 10:00:00", "0.5.2"),  # 3
        _row("a.b", 0.1, "2025-01-01 10:00:00", "0.5.2"),  # 4
        _row("GPT_2", 0.2, "2025-01-01 10:00:00", "0.5.2"),  # 5: a name
    ]
    f = _csv(tmp_path, rows)
    rs = importers.load_liger_csvs([f])
    skipped = [e for e in rs.errors if "row skipped" in e]
    assert [e.split(": column")[0] for e in skipped] == [f"{f}:{n}" for n in (2, 3, 4)]
    assert all("column x_value is not a number" in e for e in skipped)
    assert [dict(s.key.params)["H"] for s in rs.series.values()] == ["GPT_2"]


def test_liger_row_in_an_unconvertible_unit_skips_only_itself(tmp_path):
    """A row whose unit cannot be converted to its case's is skipped by line and
    the rows after it still import (mutation: ``continue`` as ``break``)."""
    rows = [
        _row(4096, 0.05, "2025-01-01 10:00:00", "0.5.2"),  # 2
        _row(4096, 0.06, "2025-01-02 10:00:00", "0.5.2").replace(",ms,", ",GB,"),  # 3: not a time
        _row(4096, 0.07, "2025-01-03 10:00:00", "0.5.2"),  # 4
        _row(8192, 0.09, "2025-01-01 10:00:00", "0.5.2"),  # 5: another case
    ]
    f = _csv(tmp_path, rows)
    rs = importers.load_liger_csvs([f])
    (err,) = [e for e in rs.errors if "row skipped" in e]
    assert err == f"{f}:3: unit 'GB', but this case's earlier rows are in 'ms'; not convertible, row skipped"
    pts = {dict(s.key.params)["H"]: s.points for s in rs.series.values()}
    assert pts["4096"][0].samples == [0.05, 0.07]  # row 4 is a run of the case
    assert pts["8192"][0].value == 0.09


def test_liger_points_are_in_version_order_whatever_the_row_order(tmp_path):
    """A CSV listing the newer version first still gives points oldest first,
    dated by their timestamps (mutation: the sort of every series skipped)."""
    rows = [
        _row(4096, 0.02, "2025-03-01 10:00:00", "0.6.0"),
        _row(4096, 0.05, "2025-01-01 10:00:00", "0.5.2"),
        _row(4096, 0.04, "2025-02-01 10:00:00", "0.5.3"),
    ]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    (s,) = rs.series.values()
    assert [p.commit for p in s.points] == ["liger-v0.5.2", "liger-v0.5.3", "liger-v0.6.0"]
    assert [p.value for p in s.points] == [0.05, 0.04, 0.02]


def test_series_without_a_cost_are_counted_per_reason(tmp_path):
    """The analysis input's note counts the time series without a cost by the
    reason after the kernel's name: two kernels with named x values are one
    note of 2 (mutations: ``+ 1`` as ``** 1``, ``[-1]`` as ``[not 1]``)."""
    rows = [
        _row("llama_3_8b", 0.30, "2025-01-01 10:00:00", "0.5.2", kernel="swiglu"),
        _row("llama_3_8b", 0.20, "2025-01-01 10:00:00", "0.5.2"),
        _row(4096, 0.05, "2025-01-01 10:00:00", "0.5.2"),  # has a cost
    ]
    inp = dataset.build_inputs(importers.load_liger_csvs([_csv(tmp_path, rows)]))
    assert inp.notes == ["2 time series without a cost (no cost derived)"]


# ----------------------------------------------------------------------------- asv: runs of one commit


def _asv_file(commit: str, started: int, values: list, samples: list | None = None) -> dict:
    columns = ["result", "params", "version", "started_at", "duration"]
    row = [values, [["1", "2"]], "v1", started, 1.0]
    if samples is not None:
        columns.append("samples")
        row.append(samples)
    return {
        "version": 2,
        "commit_hash": commit,
        "date": 1_700_000_000_000,
        "env_name": "py3.11",
        "python": "3.11",
        "requirements": {},
        "params": {"machine": "m"},
        "result_columns": columns,
        "results": {"suite.x.time_x": row},
    }


def _asv(tmp_path: Path, files: dict[str, dict]) -> Path:
    res = tmp_path / "results"
    (res / "m").mkdir(parents=True)
    meta = {"name": "suite.x.time_x", "type": "time", "unit": "seconds", "param_names": ["size"]}
    (res / "benchmarks.json").write_text(json.dumps({"version": 2, "suite.x.time_x": {**meta, "version": "1"}}))
    (res / "m" / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    for name, data in files.items():
        (res / "m" / name).write_text(json.dumps(data))
    return res


def _points(rs) -> dict:
    return {dict(s.key.params)["size"]: s.points for s in rs.series.values()}


def test_asv_two_files_of_one_commit_are_one_point_with_both_runs(tmp_path):
    res = _asv(
        tmp_path,
        {
            "aaaaaaaa-py3.11.json": _asv_file("a" * 40, 1_700_000_100_000, [5.0, 6.0]),
            "aaaaaaaa-rerun.json": _asv_file("a" * 40, 1_700_000_900_000, [2.0, None]),  # ran later
        },
    )
    rs = R.load(res, with_records=False)
    pts = _points(rs)
    (p,) = pts["1"]
    assert p.value == 2.0 and p.samples == [5.0, 2.0]  # the last run's value; every run a sample, oldest first
    (q,) = pts["2"]
    assert q.value is None and q.reason == "failed" and not q.samples  # the last run failed: as before
    assert any("1 older run(s)" in e and "aaaaaaaa-rerun.json" in e for e in rs.errors)
    inp = dataset.build_inputs(dataset.load_input(res))
    assert next(s for s in inp.series if dict(s.key.params)["size"] == "1").points[0].samples == (5.0, 2.0)


def test_asv_raw_samples_of_the_runs_are_pooled(tmp_path):
    res = _asv(
        tmp_path,
        {
            "aaaaaaaa-py3.11.json": _asv_file("a" * 40, 1_700_000_100_000, [5.0, 6.0], [[4.9, 5.0, 5.1], None]),
            "aaaaaaaa-rerun.json": _asv_file("a" * 40, 1_700_000_900_000, [2.0, 3.0], [[1.9, 2.0], None]),
        },
    )
    pts = _points(R.load(res, with_records=False))
    assert pts["1"][0].samples == [4.9, 5.0, 5.1, 1.9, 2.0]
    assert pts["2"][0].samples == [6.0, 3.0]  # no raw samples in either run: one value per run


def test_asv_distinct_commits_and_copied_files_stay_as_they_were(tmp_path):
    # negative controls: two commits are two points; a copy (same started_at) is not a second run
    res = _asv(
        tmp_path,
        {
            "aaaaaaaa-py3.11.json": _asv_file("a" * 40, 1_700_000_100_000, [5.0, 6.0]),
            "bbbbbbbb-py3.11.json": _asv_file("b" * 40, 1_700_000_200_000, [2.0, 3.0]),
            "bbbbbbbb-copy.json": _asv_file("b" * 40, 1_700_000_200_000, [2.0, 3.0]),
        },
    )
    rs = R.load(res, with_records=False)
    for pts in _points(rs).values():
        assert [p.commit[0] for p in pts] == ["a", "b"] and all(p.samples is None for p in pts)
    assert any("0 older run(s)" in e for e in rs.errors)


def test_liger_rows_of_one_run_that_disagree_are_named(tmp_path):
    ts = "2025-01-25 23:43:11"
    rows = [_row(4096, 0.05, ts, "0.5.2"), _row(4096, 0.15, ts, "0.5.2")]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    ((p,),) = [s.points for s in rs.series.values()]
    assert p.value == 0.15
    assert any("liger.csv:3" in e and "row 2" in e and "later row is kept" in e for e in rs.errors), rs.errors
    # negative control: identical duplicates say nothing
    rs2 = importers.load_liger_csvs([_csv(tmp_path, [_row(4096, 0.05, ts, "0.5.2")] * 2, name="same.csv")])
    assert not any("later row is kept" in e for e in rs2.errors)


def test_liger_rows_without_a_version_are_named(tmp_path):
    rows = [_row(4096, 0.05, f"2025-01-2{i} 10:00:00", "") for i in range(3)] + [
        _row(4096, 0.05, "2025-01-29 10:00:00", "0.5.2")
    ]
    rs = importers.load_liger_csvs([_csv(tmp_path, rows)])
    (err,) = [e for e in rs.errors if "empty liger_version" in e]
    assert "3 row(s)" in err and "rows 2, 3, 4" in err and "liger-vunknown" in err


def test_short_and_upper_case_hashes_are_the_commit_they_name(tmp_path):
    """``ABC...`` and ``abc1234`` (git's abbreviation) of a full hash in the same
    folder are that commit: one commit, its runs pooled; a short hash naming no
    known commit stays as stored (negative control), and each expansion is named."""
    full = "abc1234" + "d" * 33
    res = _asv(
        tmp_path,
        {
            "a-full.json": _asv_file(full, 1_700_000_100_000, [5.0, 6.0]),
            "b-short.json": _asv_file("abc1234", 1_700_000_900_000, [4.0, 6.5]),
            "c-upper.json": _asv_file(full.upper(), 1_700_000_500_000, [4.5, 6.2]),
            "d-other.json": _asv_file("fedcba9", 1_700_000_950_000, [7.0, 7.0]),
        },
    )
    rs = R.load(res, with_records=False)
    assert set(rs.commits) == {full, "fedcba9"}
    (p, _other) = sorted(_points(rs)["1"], key=lambda q: q.commit)
    assert p.commit == full and p.value == 4.0 and p.samples == [5.0, 4.5, 4.0]
    assert any("b-short.json: commit hash abc1234 is abbreviated; read as " + full in e for e in rs.errors)


def test_per_benchmark_the_row_that_ran_last_wins(tmp_path):
    """File A ran x early and y late; file B re-ran x in between: x's point is
    B's run (A's is a sample), though A's file as a whole ran last."""
    a = _asv_file("a" * 40, 1_700_000_100_000, [5.0, 6.0])
    a["results"]["suite.x.time_y"] = [[9.0, 9.5], [["1", "2"]], "v1", 1_700_000_999_000, 1.0]
    b = _asv_file("a" * 40, 1_700_000_500_000, [2.0, 3.0])
    res = _asv(tmp_path, {"aaaaaaaa-a.json": a, "aaaaaaaa-b.json": b})
    meta = json.loads((res / "benchmarks.json").read_text())
    meta["suite.x.time_y"] = {**meta["suite.x.time_x"], "name": "suite.x.time_y"}
    (res / "benchmarks.json").write_text(json.dumps(meta))
    rs = R.load(res, with_records=False)
    by = {(s.key.benchmark, dict(s.key.params)["size"]): s.points for s in rs.series.values()}
    (x1,) = by[("suite.x.time_x", "1")]
    assert x1.value == 2.0 and x1.samples == [5.0, 2.0]  # B's run wins, A's is the older sample
    (y1,) = by[("suite.x.time_y", "1")]
    assert y1.value == 9.0  # only A has y


def test_a_file_without_rows_is_listed_after_the_run_it_did_not_make(tmp_path):
    """Two files of one commit, neither with ``started_at``: the warning lists
    them as they ran, by modification time, newest first; a file with no rows
    ran at no known time, never at the epoch (mutation: ``default=-math.inf``
    as ``default=not math.inf``)."""
    full = _asv_file("a" * 40, 0, [5.0, 6.0])
    full["result_columns"] = ["result", "params", "version", "duration"]
    full["results"]["suite.x.time_x"] = [[5.0, 6.0], [["1", "2"]], "v1", 1.0]
    empty = dict(full, results={})
    res = _asv(tmp_path, {"aaaaaaaa-empty.json": empty, "aaaaaaaa-full.json": full})
    os.utime(res / "m" / "aaaaaaaa-empty.json", (1_600_000_000, 1_600_000_000))
    os.utime(res / "m" / "aaaaaaaa-full.json", (1_700_000_000, 1_700_000_000))
    rs = R.load(res, with_records=False)
    (err,) = [e for e in rs.errors if "in 2 results files" in e]
    listed = err.split("samples of its points: ")[1]
    full_at, empty_at = listed.index("aaaaaaaa-full.json (1 of 1"), listed.index("aaaaaaaa-empty.json (0 of 0")
    assert full_at < empty_at
    assert [[p.value for p in pts] for pts in _points(rs).values()] == [[5.0], [6.0]]


# ----------------------------------------------------------------------------- asv: row shapes


def test_bare_result_of_a_parameterised_row_is_its_first_combination(tmp_path):
    """A bare number as the result of a 3-combination row (asv's unparameterised
    form) is the first combination's value, the others failed, and the rows of
    the other commits keep their own values (mutations: ``n - 1`` as ``n * 1``
    and as ``n >> 1``)."""

    def three(commit: str, day: int, result) -> dict:
        f = _asv_file(commit, 1_700_000_000_000 + day, [])
        f["date"] += day * 86_400_000
        f["results"]["suite.x.time_x"][:2] = [result, [["1", "2", "3"]]]
        return f

    res = _asv(
        tmp_path,
        {
            "aaaaaaaa-py3.11.json": three("a" * 40, 0, [1.0, 2.0, 3.0]),
            "bbbbbbbb-py3.11.json": three("b" * 40, 1, 7.0),
            "cccccccc-py3.11.json": three("c" * 40, 2, [4.0, 5.0, 6.0]),
        },
    )
    rs = R.load(res, with_records=False)
    got = {size: [(p.commit[0], p.value, p.reason) for p in pts] for size, pts in _points(rs).items()}
    assert got == {
        "1": [("a", 1.0, None), ("b", 7.0, None), ("c", 4.0, None)],
        "2": [("a", 2.0, None), ("b", None, "failed"), ("c", 5.0, None)],
        "3": [("a", 3.0, None), ("b", None, "failed"), ("c", 6.0, None)],
    }


def test_a_grid_change_joins_a_part_with_samples_and_one_without(tmp_path):
    """A benchmark whose grid grew between commits is one series per case over
    both grids; raw samples of the old grid's file stay with its point, the new
    grid's point (a file without samples) has none (mutation: ``[None] * len(c)``
    as ``[None] & len(c)``)."""
    old = _asv_file("a" * 40, 1_700_000_100_000, [5.0, 6.0], [[4.9, 5.0, 5.1], [6.0, 6.1]])
    new = _asv_file("b" * 40, 1_700_000_200_000, [2.0, 3.0, 4.0])
    new["date"] += 86_400_000
    new["results"]["suite.x.time_x"][1] = [["1", "2", "3"]]
    res = _asv(tmp_path, {"aaaaaaaa-py3.11.json": old, "bbbbbbbb-py3.11.json": new})
    rs = R.load(res, with_records=False)
    got = {size: [(p.commit[0], p.value, p.samples) for p in pts] for size, pts in _points(rs).items()}
    assert got == {
        "1": [("a", 5.0, [4.9, 5.0, 5.1]), ("b", 2.0, None)],
        "2": [("a", 6.0, [6.0, 6.1]), ("b", 3.0, None)],
        "3": [("b", 4.0, None)],
    }
