"""Reproductions from the third hostile trial of issue 29 (docs/hostile-trial.md).

Each test states what the trial expected; the ones still failing are marked
``xfail(strict=True)`` with the observed failure, so a fix turns them into a
pass (and ``strict`` makes the stale marker fail until it is removed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import _benchmarks, _machine, _meta, _v2_file

from harness.gate import check
from harness.gate import decide as gate
from harness.gate.settings import CheckSettings
from harness.store import dataset

COMMITS = ["a" * 40, "b" * 40, "c" * 40, "d" * 40]


def _history(res: Path, bad_row=None, bench: str = "suite.x.time_x") -> Path:
    """Four commits of ``bench`` on machine ``m`` (values 1.0); ``bad_row(row)`` edits
    the row of the third commit's file in place. Returns that file's path."""
    _benchmarks(res, {bench: _meta(bench)})
    files = {}
    for i, c in enumerate(COMMITS):
        f = _v2_file(c, date=1_700_000_000_000 + i * 1000, bench=bench)
        f["result_columns"] = f["result_columns"] + ["samples"]
        f["results"][bench].append([[1.0, 1.0], [1.0, 1.0]])
        if i == 2 and bad_row is not None:
            bad_row(f["results"][bench])
        files[f"{c[:8]}-py3.11.json"] = f
    d = _machine(res, "m", files)
    return d / f"{COMMITS[2][:8]}-py3.11.json"


def _set(col: int, value):
    def edit(row):
        row[col] = value

    return edit


def test_an_integer_beyond_float_range_in_a_result_loses_its_point_only(tmp_path):
    res = tmp_path / "results"
    bad = _history(res, _set(0, [10**400, 1.0]))
    rs = dataset.load_input(res)  # was: OverflowError: int too large to convert to float, no file named
    assert any(str(bad) in e for e in rs.errors), rs.errors
    assert len(rs.series) == 2  # both parameter values keep their series


@pytest.mark.parametrize(
    "column, value",
    [
        ("result", 10**400),  # asv's bare (unparameterised) form
        ("stats_q_25", [10**400, 1.0]),
        ("stats_ci_99_b", [-(10**400), 1.0]),
        ("started_at", 10**400),
        ("duration", 10**400),
        ("samples", [[10**400, 1.0], [1.0]]),
    ],
    ids=["result", "stats_q_25", "stats_ci_99_b", "started_at", "duration", "samples"],
)
def test_an_integer_beyond_float_range_in_any_column_is_named_not_a_crash(tmp_path, column, value):
    res = tmp_path / "results"

    def edit(row):
        cols = ["result", "params", "version", "started_at", "duration", "samples", "stats_q_25", "stats_ci_99_b"]
        while len(row) < len(cols):
            row.append([1.0, 1.0])
        row[cols.index(column)] = value

    bad = _history(res, edit)
    for f in bad.parent.glob("*-py3.11.json"):  # every file declares the extra columns
        data = json.loads(f.read_text())
        data["result_columns"] = data["result_columns"] + ["stats_q_25", "stats_ci_99_b"]
        for row in data["results"].values():
            row.extend([[1.0, 1.0]] * (8 - len(row)))
        f.write_text(json.dumps(data))
    rs = dataset.load_input(res)  # was: OverflowError, no file named, nothing loaded
    assert len(rs.series) == 2
    if column != "samples":  # a sample beyond float range is dropped like any non-finite sample
        assert any(str(bad) in e and column in e for e in rs.errors), rs.errors


def test_a_float_beyond_range_in_a_result_is_a_gap_control(tmp_path):
    # negative control of the test above: the same magnitude written as a float is handled
    res = tmp_path / "results"
    _history(res, _set(0, [1e308, 1.0]))
    rs = dataset.load_input(res)
    assert len(rs.series) == 2


def test_an_integer_beyond_float_range_in_a_ci_column_is_named(tmp_path):
    res = tmp_path / "results"

    def edit(row):
        row[3] = 0  # started_at
        row.insert(5, [10**400, 1.0])  # stats_ci_99_a

    _benchmarks(res, {"suite.x.time_x": _meta("suite.x.time_x")})
    files = {}
    for i, c in enumerate(COMMITS):
        f = _v2_file(c, date=1_700_000_000_000 + i * 1000)
        f["result_columns"] = f["result_columns"] + ["stats_ci_99_a"]
        f["results"]["suite.x.time_x"].append([0.9, 0.9])
        if i == 2:
            f["results"]["suite.x.time_x"][5] = [10**400, 0.9]
        files[f"{c[:8]}-py3.11.json"] = f
    d = _machine(res, "m", files)
    rs = dataset.load_input(res)
    assert any(str(d / f"{COMMITS[2][:8]}-py3.11.json") in e for e in rs.errors), rs.errors


def test_samples_that_are_a_flat_list_of_numbers_are_a_row_error(tmp_path):
    res = tmp_path / "results"
    bad = _history(res, _set(5, [1.0, 1.0]))  # asv writes one list of samples per parameter combination
    rs = dataset.load_input(res)  # was: TypeError: 'float' object is not iterable, no file named
    assert any(str(bad) in e and "samples" in e for e in rs.errors), rs.errors
    assert len(rs.series) == 2


def test_samples_as_lists_of_lists_load_control(tmp_path):
    res = tmp_path / "results"
    _history(res)
    rs = dataset.load_input(res)
    assert len(rs.series) == 2 and not [e for e in rs.errors if "samples" in e]


def test_publish_survives_a_lone_surrogate_in_a_benchmark_name(tmp_path, capsys):
    import harness.cli as cli

    res = tmp_path / "results"
    name = "suite.x.time_\udcff"
    _history(res, bench=name)
    # json.dumps writes the escape "\udcff", which json.loads accepts: valid JSON, unencodable text
    assert "\\udcff" in (res / "benchmarks.json").read_text()
    rc = cli.main(["publish", "--results", str(res), "--repo", "", "--analysis", "off", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_OK, err  # was 2: "UnicodeEncodeError: ... surrogates not allowed", no file named
    assert str(res / "benchmarks.json") in err and "surrogate" in err, err  # named, read as the escape text
    pages = [p.read_text(encoding="utf-8") for p in (tmp_path / "s" / "bench").glob("*.html")]
    assert any("time_\\udcff" in t for t in pages)  # the page shows the escaped name


def test_analyze_prints_a_lone_surrogate_and_bidi_overrides_escaped(tmp_path):
    # h29t F3: analyze wrote a raw 0xff byte; S3: U+202E printed raw reverses the rest of the line
    res = tmp_path / "results"
    _history(res, bench="suite.x.time_\udcff\u202e\u2066z")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", "--results", str(res)],
        capture_output=True,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "300"},
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out.decode("utf-8", "replace")
    out.decode("utf-8")  # strict: no raw surrogate byte reached the terminal
    assert "\u202e".encode() not in out and "\u2066".encode() not in out
    assert b"time_\\udcff\\u202e\\u2066z" in out, out.decode("utf-8", "replace")


def test_printable_escapes_bidi_overrides_isolates_and_surrogates():
    from harness.core.model import printable

    for ch in [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)] + ["\udcff"]:
        assert printable(f"a{ch}b") == f"a\\u{ord(ch):04x}b"
    assert printable("\x1bé\u200e") == "\\x1bé\u200e"  # ESC as before; é and the LRM mark left alone


def test_publish_of_a_plain_name_control(tmp_path, capsys):
    import harness.cli as cli

    res = tmp_path / "results"
    _history(res)
    rc = cli.main(["publish", "--results", str(res), "--repo", "", "--analysis", "off", "--out", str(tmp_path / "s")])
    assert rc == cli.EXIT_OK, capsys.readouterr().err


@pytest.mark.xfail(
    strict=True,
    reason="h29t F4: a case of base's suite measured on neither side (head's suite skips it on both, "
    "NotImplementedError in setup) is REMOVED without a trailer and the gate exits 0",
)
def test_a_case_that_heads_suite_skips_on_both_sides_blocks_without_a_trailer():
    # kernelwatch check measures both commits with head's benchmark code (suite-head); a head
    # whose setup raises NotImplementedError for one op makes asv record NaN ("skipped") for
    # base and head alike: the series is in base_grid, absent from the table.
    key = ("suite.vector_add.track_time", (("provider", "torch"), ("shape", "1048576")))
    settings = CheckSettings(gate=gate.GateConfig())
    found = check._Found()
    verdicts = check._decide({}, {}, {}, {key}, {}, settings, found, {})
    assert [v.status for v in verdicts] == [gate.Status.BROKEN], [(v.status, v.reason) for v in verdicts]
    assert gate.exit_code(verdicts) == gate.EXIT_BROKEN


def test_a_case_missing_from_heads_suite_is_broken_control():
    key = ("suite.vector_add.track_time", (("provider", "torch"),))
    settings = CheckSettings(gate=gate.GateConfig())
    verdicts = check._decide({}, {}, {}, {key}, {key[0]: "missing from head's suite"}, settings, check._Found(), {})
    assert [v.status for v in verdicts] == [gate.Status.BROKEN]


@pytest.mark.xfail(strict=True, reason="h29t S1: KERNELWATCH_QUICK=false/off/no turns quick mode on")
@pytest.mark.parametrize("value", ["false", "off", "no"])
def test_quick_off_values_mean_off(monkeypatch, value):
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", value)
    assert bench._quick() is False


def test_quick_zero_means_off_control(monkeypatch):
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", "0")
    assert bench._quick() is False
    monkeypatch.setenv("KERNELWATCH_QUICK", "1")
    assert bench._quick() is True


def test_a_duplicate_key_in_benchmarks_json_or_a_results_file_is_named(tmp_path):
    # h29t S4: a second entry of a benchmark (its unit flipped) and a second commit_hash were silently last-wins
    res = tmp_path / "results"
    bad = _history(res)
    text = (res / "benchmarks.json").read_text()
    dup = json.dumps({"suite.x.time_x": _meta("suite.x.time_x", unit="GB/s", type="track")})[1:-1]
    (res / "benchmarks.json").write_text(text[:-1] + ", " + dup + "}")
    raw = bad.read_text()
    bad.write_text(raw[:-1] + ', "commit_hash": "' + COMMITS[2] + '"}')
    rs = dataset.load_input(res)
    assert any(str(res / "benchmarks.json") in e and "duplicate key" in e and "suite.x.time_x" in e for e in rs.errors)
    assert any(str(bad) in e and "duplicate key" in e and "commit_hash" in e for e in rs.errors), rs.errors
    assert {s.unit for s in rs.series.values()} == {"GB/s"}  # documented: the last one wins, as in asv
    assert len(rs.series) == 2


def test_a_duplicate_key_in_a_record_line_is_named_by_line(tmp_path):
    from harness.core import files

    problems: list[str] = []
    assert files.parse_json('{"a": 1, "b": 2, "a": 3}', problems=problems, where="f.jsonl:4") == {"a": 3, "b": 2}
    assert len(problems) == 1 and problems[0].startswith("f.jsonl:4: duplicate key(s) 'a'")
    problems.clear()
    assert files.parse_json('{"a": 1, "b": {"c": 2}}', problems=problems) == {"a": 1, "b": {"c": 2}}
    assert problems == []  # control


def test_a_symlinked_machine_folder_is_loaded_once(tmp_path):
    # h29t S8: h100-link -> h100-runner was a second machine with the same points
    res = tmp_path / "results"
    real = _history(res).parent
    (res / "h100-link").symlink_to(real.name)
    (res / "zz-link").symlink_to(real.name)  # after the folder in name order too
    rs = dataset.load_input(res)
    assert list(rs.machines) == ["m"] and len(rs.series) == 2, rs.machines
    for link in ("h100-link", "zz-link"):
        assert any(str(res / link) in e and str(real) in e and "skipped" in e for e in rs.errors), rs.errors


@pytest.mark.parametrize("content", ["{not json", "[" * 100 + "]" * 100, '{"machine": 5}', "\xff"])
def test_a_corrupt_machine_json_keeps_the_results_under_the_folder_name(tmp_path, content):
    # a broken machine.json lost every result of the machine; the folder names it instead
    res = tmp_path / "results"
    mjson = _history(res).parent / "machine.json"
    mjson.write_bytes(content.encode("latin-1"))
    rs = dataset.load_input(res)
    assert list(rs.machines) == ["m"] and len(rs.series) == 2
    assert all(len(s.points) == 4 for s in rs.series.values())
    assert any(str(mjson) in e and "loaded as machine 'm'" in e for e in rs.errors), rs.errors


def test_impossible_values_are_named_impossible_and_counted_apart(tmp_path):
    # h29t S5: -5, 0, 1e300 (among 1.0) and 1e-300 were counted in failed_points with no "impossible" reason
    from harness.analysis import run as analysis

    res = tmp_path / "results"
    bad = _history(res, _set(0, [-5.0, 0.0]))
    last = bad.parent / f"{COMMITS[3][:8]}-py3.11.json"
    data = json.loads(last.read_text())
    data["results"]["suite.x.time_x"][0] = [1e300, 1e-300]
    last.write_text(json.dumps(data))
    rs = dataset.load_input(res)
    reasons = [r for s in rs.series.values() for r in (p.reason for p in s.points) if r]
    assert sorted(reasons) == [
        "invalid: impossible value -5.0 (a result is a finite number > 0)",
        "invalid: impossible value 0.0 (a result is a finite number > 0)",
    ]
    report = analysis.analyze(list(rs.series.values()))
    assert report.summary["failed_points"] == 4 and report.summary["impossible_points"] == 4
    text = " ".join(f.reason for f in report.findings)
    assert text.count("impossible value") == 4, text


@pytest.mark.parametrize(
    "case, named",
    [
        ("columns_empty", "has no 'result' column"),
        ("row_empty", "row has 0 of the 6 entries"),
        ("row_result_only", "row has 1 of the 6 entries of 'result_columns', no 'params'"),
    ],
)
def test_rows_with_no_value_are_named_not_loaded_as_junk_series(tmp_path, case, named):
    # h29t S6: these loaded a third, parameterless series of nothing, and the one warning blamed benchmarks.json
    res = tmp_path / "results"
    bad = _history(res)
    data = json.loads(bad.read_text())
    if case == "columns_empty":
        data["result_columns"] = []
    else:
        data["results"]["suite.x.time_x"] = [] if case == "row_empty" else [[2.0, 2.0]]
    bad.write_text(json.dumps(data))
    rs = dataset.load_input(res)
    assert len(rs.series) == 2 and all(len(s.points) == 3 for s in rs.series.values())
    assert [e for e in rs.errors if str(bad) in e and named in e], rs.errors
    assert not [e for e in rs.errors if "benchmarks.json" in e], rs.errors


def test_a_parameter_mismatch_names_the_results_file_not_benchmarks_json(tmp_path):
    res = tmp_path / "results"
    bad = _history(res)
    data = json.loads(bad.read_text())
    data["results"]["suite.x.time_x"][:2] = [2.0, []]  # an unparameterised row of a parameterised benchmark
    bad.write_text(json.dumps(data))
    rs = dataset.load_input(res)
    msg = [e for e in rs.errors if "param_names" in e]
    assert len(msg) == 1 and msg[0].startswith(f"{bad}: benchmark suite.x.time_x: its row has 0 parameter lists")
