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


KEY_T = ("suite.vector_add.track_time", (("provider", "torch"),))
KEY_X = ("suite.vector_add.track_time", (("provider", "triton"),))


def _measured(*keys):
    from harness.gate.decide import Side

    ok = Side(present=True, samples=[1e-3] * 10)
    return {k: {"base": ok, "head": ok} for k in keys}


def test_a_case_heads_suite_lists_but_skips_is_broken_and_a_removal_trailer_acknowledges_it():
    # h29t F4 end to end through _decide: head's discovery lists the case, asv stored NaN for it
    from harness.gate import suites

    settings = CheckSettings(gate=gate.GateConfig())
    vs = check._decide(_measured(KEY_X), {}, {}, {KEY_T, KEY_X}, {}, settings, check._Found(), {}, {KEY_T, KEY_X})
    by = {v.params: v for v in vs}
    assert by[KEY_T[1]].status is gate.Status.BROKEN and by[KEY_T[1]].reason.startswith(suites.SKIPPED_ON_HEAD)
    assert "NotImplementedError" in by[KEY_T[1]].reason and "Perf-Benchmark-Removed" in by[KEY_T[1]].reason
    assert gate.exit_code(vs) == gate.EXIT_BROKEN
    ack = gate.Acknowledgement("suite.vector_add.*", "torch path retired, see #7", "e" * 40)
    assert len(suites.acknowledge_removals(vs, [ack])) == 1
    assert by[KEY_T[1]].status is gate.Status.REMOVED and gate.exit_code(vs) == gate.EXIT_OK


def test_a_case_base_measured_and_head_skipped_is_broken():
    # head's suite measured base (a value) but not head (NaN): classify says REMOVED, the gate BROKEN
    from harness.gate.decide import Side

    table = _measured(KEY_X)
    table[KEY_T] = {"base": Side(present=True, samples=[1e-3] * 10), "head": Side.absent()}
    settings = CheckSettings(gate=gate.GateConfig())
    vs = check._decide(table, {}, {}, {KEY_T, KEY_X}, {}, settings, check._Found(), {}, {KEY_T, KEY_X})
    by = {v.params: v for v in vs}
    assert by[KEY_T[1]].status is gate.Status.BROKEN, by[KEY_T[1]].reason
    assert "measured on base, not run on head" in by[KEY_T[1]].reason


def test_a_benchmark_left_without_any_of_bases_combinations_is_broken():
    # head keeps the benchmark's name but changes its params so none of base's cases exist
    settings = CheckSettings(gate=gate.GateConfig())
    vs = check._decide({}, {}, {}, {KEY_T, KEY_X}, {}, settings, check._Found(), {}, set())
    assert [v.status for v in vs] == [gate.Status.BROKEN] * 2


def test_a_renamed_parameter_combination_stays_removed_control():
    # a provider renamed: that combination is gone, the benchmark's others are measured on head
    settings = CheckSettings(gate=gate.GateConfig())
    vs = check._decide(_measured(KEY_X), {}, {}, {KEY_T, KEY_X}, {}, settings, check._Found(), {}, {KEY_X})
    by = {v.params: v for v in vs}
    assert by[KEY_T[1]].status is gate.Status.REMOVED and gate.exit_code(vs) == gate.EXIT_OK


def test_a_case_missing_from_heads_suite_is_broken_control():
    key = ("suite.vector_add.track_time", (("provider", "torch"),))
    settings = CheckSettings(gate=gate.GateConfig())
    verdicts = check._decide({}, {}, {}, {key}, {key[0]: "missing from head's suite"}, settings, check._Found(), {})
    assert [v.status for v in verdicts] == [gate.Status.BROKEN]


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


def _method() -> str:
    from kernels import _backends

    return "cpu" if _backends.benchmark_device() == "cpu" else "hot"


@pytest.mark.parametrize("value", ["false", "OFF", " No ", "0"])
def test_off_values_mean_off_for_every_yes_no_variable(monkeypatch, value):
    # h29t S1: the suite's own grid reader and the throttling switch read their variables too
    import benchmarks.suite as suite
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", value)
    monkeypatch.setenv("KERNELWATCH_EXCLUDE_THROTTLED", value)
    assert suite._quick() is False
    case = bench.prepare("vector_add", "torch", (64,), "fp32", _method())
    assert case.config.exclude_throttled is False


@pytest.mark.parametrize("var", ["KERNELWATCH_QUICK", "KERNELWATCH_EXCLUDE_THROTTLED"])
def test_a_yes_no_variable_with_another_value_names_the_variable_and_the_accepted_values(monkeypatch, var):
    import benchmarks.suite as suite
    from harness.core.env import EnvError
    from harness.measure import bench

    monkeypatch.setenv(var, "disabled")
    with pytest.raises(EnvError, match=rf"{var}='disabled'.*1/true/yes/on.*0/false/no/off"):
        suite._quick() if var == "KERNELWATCH_QUICK" else bench.prepare("vector_add", "torch", (64,), "fp32", _method())
    if var == "KERNELWATCH_QUICK":
        with pytest.raises(EnvError, match=var):
            bench._quick()


@pytest.mark.parametrize("value", ["../../escape", "/tmp/x", "-x", ".hidden", "a b", "m" * 129])
def test_a_machine_that_is_no_machine_name_is_refused_before_a_record_is_written(monkeypatch, tmp_path, value):
    from harness.core.env import EnvError
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", "1")
    case = bench.prepare("vector_add", "torch", (64,), "fp32", _method())
    monkeypatch.setenv("ASV_COMMIT", "f" * 40)
    monkeypatch.setenv("KERNELWATCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KERNELWATCH_MACHINE", value)
    with pytest.raises(EnvError, match=r"KERNELWATCH_MACHINE=.*asv machine name.*starting with a letter or digit"):
        bench.run(case, "suite.vector_add.track_time")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # no record anywhere


def test_a_machine_name_is_used_control(monkeypatch, tmp_path):
    from harness.core import env

    assert (
        env.machine("KERNELWATCH_MACHINE", {"KERNELWATCH_MACHINE": "ci-pool_1.a-h100-80gb"}) == "ci-pool_1.a-h100-80gb"
    )
    assert env.machine("KERNELWATCH_MACHINE", {"KERNELWATCH_MACHINE": " "}) is None
    assert env.machine("KERNELWATCH_MACHINE", {}) is None


# ----------------------------------------------------------------------------- h29t S9: --repo that is no repository


@pytest.mark.parametrize("kind", ["missing", "plain folder"])
@pytest.mark.parametrize("command", ["analyze", "publish"])
def test_a_repo_that_is_no_git_repository_is_exit_2_naming_it(tmp_path, capsys, kind, command):
    import harness.cli as cli

    res = tmp_path / "results"
    _history(res)
    bad = tmp_path / ("nonexistent" if kind == "missing" else "plain")
    if kind == "plain folder":
        bad.mkdir()
    args = [command, "--results", str(res), "--repo", str(bad)]
    args += ["--analysis", "off", "--out", str(tmp_path / "s")] if command == "publish" else []
    rc = cli.main(args)
    err = capsys.readouterr()
    assert rc == cli.EXIT_BROKEN, err  # was: a warning, exit 0, ordered by date
    assert str(bad) in err.out + err.err and "git repository" in err.out + err.err
    assert not (tmp_path / "s").exists()  # refused before any work


def test_no_repo_and_the_default_outside_a_repository_still_work_control(tmp_path, capsys, monkeypatch):
    import harness.cli as cli

    res = tmp_path / "results"
    _history(res)
    assert cli.main(["analyze", "--results", str(res), "--repo", ""]) == cli.EXIT_OK, capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # not a repository: publish's default '.' orders by date, with a warning
    rc = cli.main(["publish", "--results", str(res), "--analysis", "off", "--out", str(tmp_path / "s")])
    assert rc == cli.EXIT_OK, capsys.readouterr().err


# ----------------------------------------------------------------------------- h29t S11: NEW rows keep head's names

NEW_BENCH = "suite.newop.track_time"
OLD_BENCH = "suite.x.time_x"


def _fake_asv(base_sha: str, head_sha: str):
    """A stand-in for :func:`harness.gate.asvrun.run_asv` writing what asv writes: each run
    saves the ``benchmarks.json`` of the suite it discovered (its own commit's, for a run of
    one commit; head's, listed first, for the interleaved run) and one results file per
    commit. Base's suite lacks ``NEW_BENCH`` (its op fails to import on base)."""
    from harness.gate.asvrun import AsvRun

    head_entries = {
        NEW_BENCH: _meta(NEW_BENCH, param_names=["provider"], params=[["'torch'", "'triton'"]]),
        OLD_BENCH: _meta(OLD_BENCH),
    }
    base_entries = {OLD_BENCH: _meta(OLD_BENCH)}

    def run(root, conf, machine, commits, *, results, log_path, purpose, append=False, **kw):
        entries = head_entries if commits[0] == head_sha else base_entries
        _benchmarks(results, entries)
        files = {}
        for i, sha in enumerate(commits):
            suite = head_entries if sha == head_sha else base_entries
            f = _v2_file(sha, date=1_700_000_000_000 + i)
            for name, meta in suite.items():
                f["results"][name] = [[1e-3] * len(meta["params"][0]), meta["params"], "v1", 0, 1.0]
            files[f"{sha[:8]}-py3.11.json"] = f
        _machine(results, "m", files)
        Path(log_path).write_text("")
        return AsvRun(purpose, list(commits), 1, [], 0, 0.0, str(log_path), str(results))

    return run


def _measure_misaligned_pair(tmp_path, monkeypatch, rounds, **extra):
    """``asvrun.measure_pair`` of COMMITS[0] against COMMITS[1] through :func:`_fake_asv`,
    base's suite lacking NEW_BENCH (so it is measured commit by commit)."""
    from harness.gate import asvrun

    base_sha, head_sha = COMMITS[0], COMMITS[1]
    monkeypatch.setattr(asvrun, "run_asv", _fake_asv(base_sha, head_sha))
    return asvrun.measure_pair(
        {"base": base_sha, "head": head_sha},
        [],
        rounds=rounds,
        tag="measure",
        base_meta={OLD_BENCH: [["1", "2"]]},
        user_bench=None,
        root=tmp_path,
        conf=tmp_path / "asv.conf.json",
        machine="m",
        quick=True,
        launch="spawn",
        work=tmp_path,
        log=lambda m: None,
        **extra,
    )


def test_new_rows_measured_commit_by_commit_keep_heads_parameter_names(tmp_path, monkeypatch):
    # base's op fails to import, so base's suite lacks NEW_BENCH: its grid differs from head's,
    # it is measured commit by commit into one folder, and base's run (the last) wrote a
    # benchmarks.json without it: head's NEW rows were named param1 instead of provider
    table, misaligned, _, problems, warnings = _measure_misaligned_pair(tmp_path, monkeypatch, rounds=1)
    assert misaligned == {NEW_BENCH} and not problems, (problems, warnings)
    new = sorted(k[1] for k in table if k[0] == NEW_BENCH)
    assert new == [(("provider", "torch"),), (("provider", "triton"),)], new
    assert all(table[(NEW_BENCH, p)]["head"].present and not table[(NEW_BENCH, p)]["base"].present for p in new)


def test_the_time_left_for_commit_by_commit_counts_cases_commits_and_rounds(tmp_path, monkeypatch):
    """After the interleaved run, the progress estimates the commit-by-commit phase
    from its size: 2 misaligned cases x 2 commits x 3 rounds = 12 case runs
    (mutation: ``n_alt * 2 * rounds`` as ``n_alt * 2 & rounds``, 4 & 3 = 0)."""
    from harness.gate.progress import PhaseProgress

    ends = []

    class Recorder(PhaseProgress):
        def end(self, detail="", **kw):
            ends.append((self.phases[-1]["phase"], kw))
            return super().end(detail, **kw)

    lines = []
    _, misaligned, _, problems, _ = _measure_misaligned_pair(
        tmp_path, monkeypatch, rounds=3, progress=Recorder(lines.append, tty=False)
    )
    assert misaligned == {NEW_BENCH} and not problems
    phase, kw = ends[0]
    assert phase == "measure"
    assert kw["next_name"] == "1 benchmarks commit by commit" and kw["next_cases"] == 12
    assert "next: 1 benchmarks commit by commit, about" in lines[0]


def test_head_entries_fill_only_what_is_missing_and_an_unreadable_file_is_named(tmp_path):
    import json

    from harness.gate import asvrun

    head_res, alt = tmp_path / "head", tmp_path / "alt"
    _benchmarks(head_res, {NEW_BENCH: _meta(NEW_BENCH, param_names=["provider"]), OLD_BENCH: _meta(OLD_BENCH)})
    _benchmarks(alt, {OLD_BENCH: _meta(OLD_BENCH, param_names=["n"])})
    assert asvrun.keep_heads_entries(alt, head_res) == []
    kept = json.loads((alt / "benchmarks.json").read_text())
    assert kept[OLD_BENCH]["param_names"] == ["n"] and kept[NEW_BENCH]["param_names"] == ["provider"]
    (head_res / "benchmarks.json").write_text("{")
    [w] = asvrun.keep_heads_entries(alt, head_res)
    assert str(head_res / "benchmarks.json") in w


# ----------------------------------------------------------------------------- h29t S1: scripts/setup.sh's yes/no


def _setup_sh(tmp_path: Path, value: str):
    import shutil
    import subprocess

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "scripts").mkdir()
    shutil.copy2(root / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    fake = tmp_path / "fakepy"  # an interpreter without torch that cannot make a venv either
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "KERNELWATCH_KEEP_TORCH": value}
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "setup.sh")], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("value", ["1", "TRUE", " on ", "yes"])
def test_setup_keep_torch_on_values_keep_the_runners_torch(tmp_path, value):
    proc = _setup_sh(tmp_path, value)
    assert proc.returncode == 2 and "has no torch" in proc.stderr, proc.stderr  # took the keep-torch path


@pytest.mark.parametrize("value", ["0", "false", "Off", "no", ""])
def test_setup_keep_torch_off_values_install_the_cpu_torch(tmp_path, value):
    proc = _setup_sh(tmp_path, value)
    assert proc.returncode == 1 and "has no torch" not in proc.stderr, proc.stderr  # went on to make a venv


def test_setup_keep_torch_other_values_are_refused_naming_the_accepted_ones(tmp_path):
    proc = _setup_sh(tmp_path, "maybe")
    assert proc.returncode == 2 and "KERNELWATCH_KEEP_TORCH='maybe'" in proc.stderr
    assert "1/true/yes/on" in proc.stderr and "0/false/no/off" in proc.stderr
    assert not (tmp_path / ".venv").exists()
