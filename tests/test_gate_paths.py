"""The gate's error and edge paths that the rest of its tests never ran.

``harness.gate.settings``: TOML that cannot be read, a ``[check]`` table read from
a commit's ``kernelwatch.toml`` or ``pyproject.toml`` (each error names the file
and commit), ``min_samples``/``borderline_factor``, a round cap the sequential
rule refuses, refs that are empty or no commit. ``harness.gate.probe``: a stale
export, ``git archive`` failing, an unreadable ``asv.conf.json``, a probe that
times out, prints nothing or cannot run. ``harness.gate.summary``: times of
100 ms and more, long notes, the header limit, truncation of the main and the
folded rows at the exact byte, warnings. ``harness.gate.sequential``: look and
boundary numbering, rounds that run out, a later look that breaks or loses the
round split.

Each test here kills mutants of the gate package samples of
``scripts/mutation_sample.py`` (docs/mutation.md) that lived because no test
executed these lines.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest
from _repo import git

from harness.core import procs
from harness.core.model import GateStatus
from harness.gate import probe, sequential, settings, summary
from harness.gate.decide import GateConfig, SeriesInput, Side, Verdict, classify
from harness.gate.settings import CheckError, load_settings, parse_settings, resolve

COMMIT = "c" * 40
C12 = COMMIT[:12]

# ----------------------------------------------------------------------------- settings: TOML


def test_without_tomllib_or_tomli_the_file_is_named_with_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)
    with pytest.raises(CheckError) as exc:
        settings._toml_loads("a = 1\n", "kernelwatch.toml at 0123456789ab")
    assert str(exc.value) == "kernelwatch.toml at 0123456789ab: reading TOML needs Python 3.11+ or the 'tomli' package"
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def _fake_tomli(monkeypatch, loads):
    mod = types.ModuleType("tomli")
    mod.TOMLDecodeError = type("TOMLDecodeError", (ValueError,), {})
    mod.loads = lambda text: loads(mod, text)
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", mod)


def test_without_tomllib_the_tomli_package_reads_the_file(monkeypatch):
    _fake_tomli(monkeypatch, lambda mod, text: {"read by": "tomli", "text": text})
    assert settings._toml_loads("a = 1\n", "x.toml") == {"read by": "tomli", "text": "a = 1\n"}


def test_tomlis_decode_error_is_invalid_toml_naming_the_file(monkeypatch):
    def loads(mod, text):
        raise mod.TOMLDecodeError("Expected '=' (at line 1, column 3)")

    _fake_tomli(monkeypatch, loads)
    with pytest.raises(CheckError) as exc:
        settings._toml_loads("a b\n", "pyproject.toml at 0123456789ab")
    assert str(exc.value) == "pyproject.toml at 0123456789ab: invalid TOML: Expected '=' (at line 1, column 3)"


def test_valid_toml_is_parsed():
    assert settings._toml_loads('[check]\nthreshold = 0.1\nname = "x"\n', "w") == {
        "check": {"threshold": 0.1, "name": "x"}
    }


# ----------------------------------------------------------------------------- settings: parse_settings


def test_min_samples_and_borderline_factor_reach_the_gate():
    s = parse_settings({"min_samples": 9, "borderline_factor": 3}, "t")
    assert (s.gate.min_samples, s.gate.borderline_factor) == (9, 3.0)
    assert isinstance(s.gate.borderline_factor, float)
    assert (parse_settings({}, "t").gate.min_samples, parse_settings({}, "t").gate.borderline_factor) == (6, 2.0)


@pytest.mark.parametrize(
    "table, message",
    [
        ({"min_samples": 7.0}, "k.toml [check]: min_samples must be an integer, got 7.0"),
        ({"borderline_factor": True}, "k.toml [check]: borderline_factor must be a number, got True"),
        ({"min_samples": 1}, "k.toml [check]: min_samples must be at least 2"),
        ({"borderline_factor": 0.5}, "k.toml [check]: borderline_factor must be at least 1"),
    ],
)
def test_a_bad_gate_value_is_named_with_its_file(table, message):
    with pytest.raises(CheckError) as exc:
        parse_settings(table, "k.toml [check]")
    assert str(exc.value) == message


def test_a_round_cap_the_sequential_rule_refuses_is_named_with_its_file():
    with pytest.raises(CheckError) as exc:
        parse_settings({"rounds": 1, "max_rounds": 1}, "kernelwatch.toml at 0123456789ab [check]")
    assert str(exc.value) == (
        "kernelwatch.toml at 0123456789ab [check]: max_rounds must be an integer >= 2 and >= step (1), got 1"
    )
    assert exc.value.__cause__ is None and exc.value.__suppress_context__
    assert parse_settings({"rounds": 1, "max_rounds": 1, "sequential": False}, "t").sequential is None
    s = parse_settings({"rounds": 1, "max_rounds": 2}, "t")
    assert (s.sequential.step, s.sequential.max_rounds) == (1, 2)


# ----------------------------------------------------------------------------- settings: load_settings


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    r = tmp_path / "repo"
    r.mkdir()
    for name, text in files.items():
        (r / name).write_text(text)
    (r / "README").write_text("x\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    return r, git(r, "rev-parse", "HEAD")


def test_kernelwatch_toml_at_the_commit_is_read_and_named(tmp_path):
    root, sha = _repo(tmp_path, {"kernelwatch.toml": "[check]\nthreshold = 0.2\nrounds = 3\n"})
    (root / "kernelwatch.toml").write_text("[check]\nthreshold = 0.9\n")  # the working tree does not count
    s = load_settings(root, sha)
    assert s.source == f"kernelwatch.toml at {sha[:12]} [check]"
    assert (s.gate.threshold, s.rounds, s.sequential.step) == (0.2, 3, 3)
    s = load_settings(root, sha, threshold=0.3, rounds=4)
    assert (s.gate.threshold, s.rounds) == (0.3, 4)


def test_a_kernelwatch_toml_without_check_falls_back_to_pyproject(tmp_path):
    root, sha = _repo(
        tmp_path,
        {
            "kernelwatch.toml": "[other]\nthreshold = 0.5\n",
            "pyproject.toml": "[tool.kernelwatch.check]\nalpha = 0.02\n",
        },
    )
    s = load_settings(root, sha)
    assert s.source == f"pyproject.toml at {sha[:12]} [tool.kernelwatch.check]"
    assert (s.gate.alpha, s.gate.threshold) == (0.02, 0.05)


@pytest.mark.parametrize(
    "pyproject",
    ["[project]\nname = 'x'\n", "[tool.other]\nx = 1\n", "[tool]\nkernelwatch = 5\n", "tool = 3\n"],
)
def test_a_pyproject_without_the_table_gives_the_defaults(tmp_path, pyproject):
    root, sha = _repo(tmp_path, {"pyproject.toml": pyproject})
    s = load_settings(root, sha, alpha=0.03)
    assert (s.source, s.gate.threshold, s.gate.alpha, s.rounds) == ("defaults", 0.05, 0.03, 2)


@pytest.mark.parametrize(
    "files, message",
    [
        ({"kernelwatch.toml": "check = 3\n"}, "kernelwatch.toml at {c}: [check] must be a table"),
        (
            {"pyproject.toml": "[tool.kernelwatch]\ncheck = 'strict'\n"},
            "pyproject.toml at {c}: [tool.kernelwatch.check] must be a table",
        ),
        (
            {"kernelwatch.toml": "[check]\ntreshold = 0.1\n"},
            "kernelwatch.toml at {c} [check]: unknown key(s) ['treshold']; known: " + str(sorted(settings.CONFIG_KEYS)),
        ),
        (
            {"pyproject.toml": "[tool.kernelwatch.check]\nrounds = 0\n"},
            "pyproject.toml at {c} [tool.kernelwatch.check]: rounds must be at least 1, got 0",
        ),
    ],
)
def test_a_bad_check_table_is_named_with_its_file_and_commit(tmp_path, files, message):
    root, sha = _repo(tmp_path, files)
    with pytest.raises(CheckError) as exc:
        load_settings(root, sha)
    assert str(exc.value) == message.format(c=sha[:12])


def test_invalid_toml_at_the_commit_is_named_with_its_file_and_commit(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    text = "[check]\nthreshold = = 0.1\n"
    root, sha = _repo(tmp_path, {"kernelwatch.toml": text})
    with pytest.raises(tomllib.TOMLDecodeError) as parsed:
        tomllib.loads(text)
    with pytest.raises(CheckError) as exc:
        load_settings(root, sha)
    assert str(exc.value) == f"kernelwatch.toml at {sha[:12]}: invalid TOML: {parsed.value}"


# ----------------------------------------------------------------------------- settings: resolve


@pytest.mark.parametrize("ref", ["", "   ", None])
def test_an_empty_ref_is_refused_before_git_is_asked(tmp_path, ref):
    with pytest.raises(CheckError) as exc:
        resolve(tmp_path / "not-a-repo", ref)
    assert str(exc.value) == f"empty ref {ref!r}: give a branch, tag or commit"


def test_a_ref_that_is_no_commit_is_named_with_gits_reason(tmp_path):
    root, sha = _repo(tmp_path, {})
    assert resolve(root, "main") == sha
    with pytest.raises(CheckError) as exc:
        resolve(root, "nope")
    assert (
        str(exc.value) == f"'nope' is not a commit, branch or tag in {root} (Ref 'nope' did not resolve to an object)"
    )
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


@pytest.mark.parametrize("error, tail", [("", ""), ("  \n", ""), ("first line\nthe last line \n", " (the last line)")])
def test_the_last_line_of_gits_error_is_quoted_only_when_there_is_one(monkeypatch, error, tail):
    import git as gitpython

    class Repo:
        def __init__(self, root):
            pass

        def commit(self, ref):
            raise ValueError(error)

    monkeypatch.setattr(gitpython, "Repo", Repo)
    with pytest.raises(CheckError) as exc:
        resolve(Path("/r"), "topic")
    assert str(exc.value) == "'topic' is not a commit, branch or tag in /r" + tail


# ----------------------------------------------------------------------------- probe


def _tar(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _archive(monkeypatch, result=None, *, raises=None):
    """``git archive`` in :mod:`harness.gate.probe` answers ``result`` (or raises)."""
    calls = []

    def run(cmd, **kw):
        calls.append((cmd, kw))
        if raises is not None:
            raise raises
        return result

    monkeypatch.setattr(probe, "subprocess", types.SimpleNamespace(run=run, SubprocessError=subprocess.SubprocessError))
    return calls


def _archive_of(monkeypatch, files: dict[str, str]):
    return _archive(monkeypatch, subprocess.CompletedProcess([], 0, stdout=_tar(files), stderr=b""))


def _probe_runs(monkeypatch, answer):
    """The probe's interpreter: ``answer(cmd, kw)`` returns a Finished or raises."""
    calls = []

    def run_bounded(cmd, **kw):
        calls.append((list(cmd), kw))
        return answer(cmd, kw)

    monkeypatch.setattr(procs, "run_bounded", run_bounded)
    return calls


def _never(cmd, kw):
    raise AssertionError("the probe must not run")


def _printed(data: dict):
    return lambda cmd, kw: procs.Finished(0, "noise\nKERNELWATCH_PROBE " + json.dumps(data) + "\n", "", 0.1)


def test_a_stale_export_is_replaced_and_the_export_is_removed_afterwards(tmp_path, monkeypatch):
    work = tmp_path / "work"
    src = work / f"src-{C12}"
    (src / "benchmarks").mkdir(parents=True)
    (src / "benchmarks" / "stale.py").write_text("raise SystemExit\n")
    _archive_of(monkeypatch, {"asv.conf.json": '{"benchmark_dir": "bench"}', "bench/suite.py": "x = 1\n"})
    seen = {}

    def answer(cmd, kw):
        seen["stale"] = (src / "benchmarks" / "stale.py").exists()
        seen["suite"] = (src / "bench" / "suite.py").read_text()
        err = f"ImportError: no op (at {src}{'/'}bench/suite.py:1)"
        return _printed({"modules": {"suite": err}, "ops": {"softmax": f"KeyError: 'softmax' (at {src}/k.py:3)"}})(
            cmd, kw
        )

    calls = _probe_runs(monkeypatch, answer)
    out = probe.probe_suite(tmp_path, COMMIT, work, ["softmax"], quick=True)
    assert out == {
        "modules": {"suite": "ImportError: no op (at bench/suite.py:1)"},
        "ops": {"softmax": "KeyError: 'softmax' (at k.py:3)"},
        "problem": None,
    }
    assert seen == {"stale": False, "suite": "x = 1\n"}
    assert calls[0][0][3:] == [str(src / "bench"), "softmax"]
    assert not src.exists()


@pytest.mark.parametrize("code", [128, -9])
def test_a_failing_git_archive_is_the_problem_with_gits_message(tmp_path, monkeypatch, code):
    calls = _archive(monkeypatch, subprocess.CompletedProcess([], code, stdout=b"", stderr=b"fatal: not a tree\n"))
    _probe_runs(monkeypatch, _never)
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", ["softmax"], quick=False)
    assert out == {"modules": {}, "ops": {}, "problem": f"git archive {C12} failed: fatal: not a tree"}
    assert calls[0][0] == ["git", "archive", "--format=tar", COMMIT] and calls[0][1]["cwd"] == tmp_path
    assert not (tmp_path / "work" / f"src-{C12}").exists()


@pytest.mark.parametrize(
    "conf", [None, "{not json", '{"benchmark_dir": "other"', "[1, 2]", '{"benchmark_dir": 3}', '"text"']
)
def test_an_unreadable_asv_conf_probes_the_default_benchmarks_folder(tmp_path, monkeypatch, conf):
    files = {"benchmarks/suite.py": "x = 1\n"}
    if conf is not None:
        files["asv.conf.json"] = conf
    _archive_of(monkeypatch, files)
    calls = _probe_runs(monkeypatch, _printed({"modules": {}, "ops": {}}))
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", ["a", "b"], quick=True)
    assert out == {"modules": {}, "ops": {}, "problem": None}
    (cmd, kw), *_ = calls
    src = tmp_path / "work" / f"src-{C12}"
    assert cmd[1] == "-c" and cmd[3:] == [str(src / "benchmarks"), "a", "b"]
    assert (kw["env"]["PYTHONPATH"], kw["env"]["KERNELWATCH_QUICK"], kw["cwd"]) == (str(src), "1", src)


def test_a_commented_asv_conf_names_its_benchmark_folder(tmp_path, monkeypatch):
    _archive_of(monkeypatch, {"asv.conf.json": '// asv\n{\n  // here\n  "benchmark_dir": "suite"\n}\n'})
    calls = _probe_runs(monkeypatch, _printed({}))
    assert probe.probe_suite(tmp_path, COMMIT, tmp_path / "w", [], quick=False)["problem"] is None
    assert calls[0][0][3:] == [str(tmp_path / "w" / f"src-{C12}" / "suite")]
    assert calls[0][1]["env"]["KERNELWATCH_QUICK"] == "0"


def test_a_probe_past_its_limit_is_the_problem(tmp_path, monkeypatch):
    _archive_of(monkeypatch, {"benchmarks/suite.py": ""})
    exc = procs.PhaseTimeout(f"probe {C12}'s suite", "import benchmarks.suite", 7, "timeout_s")

    def answer(cmd, kw):
        raise exc

    calls = _probe_runs(monkeypatch, answer)
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", [], quick=True, timeout_s=7)
    assert out == {"modules": {}, "ops": {}, "problem": str(exc)}
    assert (calls[0][1]["phase"], calls[0][1]["kind"], calls[0][1]["limit_s"]) == (f"probe {C12}'s suite", "probe", 7)
    assert not (tmp_path / "work" / f"src-{C12}").exists()


@pytest.mark.parametrize(
    "stdout, stderr, code, tail",
    [
        ("noise\n", "Traceback (most recent call last):\nImportError: bad\n", 1, "ImportError: bad"),
        ("one\ntwo\n", "", 3, "two"),
        ("  \n", " \n", -9, "no output"),
        ("KERNELWATCH_PROBE{}\n", "", 0, "KERNELWATCH_PROBE{}"),
    ],
)
def test_a_probe_that_prints_no_result_names_its_exit_and_last_line(tmp_path, monkeypatch, stdout, stderr, code, tail):
    _archive_of(monkeypatch, {"benchmarks/suite.py": ""})
    _probe_runs(monkeypatch, lambda cmd, kw: procs.Finished(code, stdout, stderr, 0.1))
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", [], quick=True)
    assert out == {
        "modules": {},
        "ops": {},
        "problem": f"probe of {C12}'s suite printed nothing (exit {code}): {tail}",
    }


@pytest.mark.parametrize(
    "error", [OSError("disk full"), subprocess.TimeoutExpired(["git", "archive"], 5), ValueError("bad")]
)
def test_a_probe_that_cannot_run_is_the_problem_naming_the_error(tmp_path, monkeypatch, error):
    _archive(monkeypatch, raises=error)
    _probe_runs(monkeypatch, _never)
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", [], quick=True)
    assert out == {
        "modules": {},
        "ops": {},
        "problem": f"could not probe {C12}'s suite: {type(error).__name__}: {error}",
    }
    assert not (tmp_path / "work" / f"src-{C12}").exists()


def test_an_archive_that_is_no_tar_or_a_garbled_result_is_the_problem(tmp_path, monkeypatch):
    _archive(monkeypatch, subprocess.CompletedProcess([], 0, stdout=b"not a tar archive" * 40, stderr=b""))
    _probe_runs(monkeypatch, _never)
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", [], quick=True)
    assert out["problem"].startswith(f"could not probe {C12}'s suite: ReadError: ")
    assert (out["modules"], out["ops"]) == ({}, {})

    _archive_of(monkeypatch, {"benchmarks/suite.py": ""})
    _probe_runs(monkeypatch, lambda cmd, kw: procs.Finished(0, "KERNELWATCH_PROBE {oops\n", "", 0.1))
    out = probe.probe_suite(tmp_path, COMMIT, tmp_path / "work", [], quick=True)
    assert out["problem"].startswith(f"could not probe {C12}'s suite: JSONDecodeError: ")


# ----------------------------------------------------------------------------- summary


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "-"),
        (0.25, "250.0 ms"),
        (0.1, "100.0 ms"),
        (0.0999, "99.900 ms"),
        (0.001, "1.000 ms"),
        (0.0005, "500.00 µs"),
    ],
)
def test_times_are_shown_in_ms_with_digits_by_size(seconds, text):
    assert summary._ms(seconds) == text


def _row(status: str = "BROKEN", label: str = "suite.op10.track_time", reason: str = "boom", **stats) -> dict:
    return {"status": status, "label": label, "reason": reason, "stats": stats or None, "blocking": False}


def test_a_row_shows_a_slow_series_in_ms():
    row = summary._row(_row("SLOWER", reason="r", base_p50_s=0.2, head_p50_s=0.25, ratio=1.25))
    assert row == "| SLOWER | `suite.op10.track_time` | 200.0 ms | 250.0 ms | +25.0% | - | - | r |"


def test_a_note_longer_than_600_characters_is_cut_with_an_ellipsis():
    assert summary._row(_row(reason="n" * 601)).endswith("| " + "n" * 600 + " ... |")
    assert summary._row(_row(reason="n" * 600)).endswith("| - | - | - | - | " + "n" * 600 + " |")


def _report(series: list[dict], **kw) -> dict:
    r = {
        "base": "b" * 40,
        "head": "a" * 40,
        "exit_code": 2,
        "counts": {"BROKEN": 1},
        "config": {"threshold": 0.05, "alpha": 0.01, "rounds": 2},
        "series": series,
    }
    r.update(kw)
    return r


_NOTHING = "No series is slower, broken, uncertain, new or removed.\n"


def _fixed_bytes(report: dict) -> int:
    """Bytes of the header and the footer: a summary of no series less its one line."""
    return len(summary.render_markdown(dict(report, series=[])).encode()) - len(_NOTHING.encode())


def test_a_limit_below_the_header_is_refused_with_the_limit_and_one_that_holds_it_is_not():
    report = _report([])
    fixed = _fixed_bytes(report)
    with pytest.raises(ValueError) as exc:
        summary.render_markdown(report, limit_bytes=fixed - 1)
    assert str(exc.value) == f"summary limit {fixed - 1} bytes cannot hold the header"
    out = summary.render_markdown(report, limit_bytes=fixed)
    assert len(out.encode()) == fixed and "Truncated" not in out


def _n(text: str) -> int:
    return len(text.encode())


def _series(status: str, n: int) -> list[dict]:
    return [_row(status, label=f"suite.op{10 + i}.track_time", reason="r") for i in range(n)]


def test_main_rows_cut_at_the_exact_byte_drop_the_folded_rows_too():
    main, quiet = _series("BROKEN", 6), _series("SAME", 4)
    report = _report(main + quiet)
    row = _n(summary._row(main[0]) + "\n")
    limit = _fixed_bytes(report) + _n(summary._TABLE_HEAD) + 3 * row + 200
    out = summary.render_markdown(report, limit_bytes=limit)
    assert [f"op{10 + i}." in out for i in range(6)] == [True] * 3 + [False] * 3
    assert "<details>" not in out
    assert f"\n**Truncated**: 7 more rows omitted to keep this summary under {limit} bytes; " in out
    assert len(out.encode()) <= limit
    fewer = summary.render_markdown(report, limit_bytes=limit - 1)
    assert "**Truncated**: 8 more rows omitted" in fewer and "op12." not in fewer


def _details(n: int) -> str:
    return f"\n<details><summary>{n} series SAME or FASTER</summary>\n\n" + summary._TABLE_HEAD


def test_once_a_main_row_is_dropped_no_folded_row_is_shown_even_where_it_would_fit():
    """Rows go from the end: a SAME row never takes the place of a dropped worse one."""
    main = [_row("BROKEN", label=f"suite.op{10 + i}.track_time", reason="r" * 500) for i in range(3)]
    quiet = _series("SAME", 4)
    report = _report(main + quiet)
    big, small = _n(summary._row(main[0]) + "\n"), _n(summary._row(quiet[0]) + "\n")
    room = _n(_details(4)) + small
    assert room < big  # the next main row does not fit, the folded table and a row would
    limit = _fixed_bytes(report) + _n(summary._TABLE_HEAD) + big + room + 200
    out = summary.render_markdown(report, limit_bytes=limit)
    assert "op10." in out and "op11." not in out and "<details>" not in out
    assert "**Truncated**: 6 more rows omitted" in out


def test_folded_rows_that_do_not_fit_their_table_head_are_all_dropped():
    main, quiet = _series("BROKEN", 1), _series("SAME", 4)
    report = _report(main + quiet)
    fits = _fixed_bytes(report) + _n(summary._TABLE_HEAD) + _n(summary._row(main[0]) + "\n") + _n(_details(4)) + 200
    out = summary.render_markdown(report, limit_bytes=fits - 1)
    assert "<details>" not in out and "**Truncated**: 4 more rows omitted" in out
    out = summary.render_markdown(report, limit_bytes=fits)
    assert "\n<details><summary>4 series SAME or FASTER</summary>" in out
    assert "**Truncated**: 4 more rows omitted" in out and "\n</details>\n" in out


def test_folded_rows_cut_at_the_exact_byte_close_their_details_and_say_how_many():
    main, quiet = _series("BROKEN", 1), _series("SAME", 5)
    report = _report(main + quiet)
    head = _fixed_bytes(report) + _n(summary._TABLE_HEAD) + _n(summary._row(main[0]) + "\n") + _n(_details(5))
    limit = head + 2 * _n(summary._row(quiet[0]) + "\n") + 200
    out = summary.render_markdown(report, limit_bytes=limit)
    body = out.split("<details>", 1)[1]
    assert [f"op{10 + i}." in body for i in range(5)] == [True, True, False, False, False]
    assert "\n</details>\n\n**Truncated**: 3 more rows omitted to keep this summary under" in out
    assert len(out.encode()) <= limit
    assert "**Truncated**: 4 more rows omitted" in summary.render_markdown(report, limit_bytes=limit - 1)


def test_problems_then_warnings_are_listed_escaped_under_the_counts():
    report = _report([], problems=["asv <failed>"], warnings=["ignored *trailer*", "second | one"])
    lines = summary.render_markdown(report).splitlines()
    i = lines.index("- **Counts**: BROKEN 1")
    assert lines[i + 1 : i + 5] == [
        "- :x: asv \\<failed\\>",
        "- :warning: ignored \\*trailer\\*",
        "- :warning: second \\| one",
        "",
    ]


# ----------------------------------------------------------------------------- sequential


@pytest.mark.parametrize("looks", [0, -2])
def test_boundaries_need_at_least_one_look(looks):
    with pytest.raises(ValueError) as exc:
        sequential.boundaries(0.01, looks)
    assert str(exc.value) == f"need at least one look, got {looks}"


def test_one_look_spends_all_of_alpha_at_once():
    from scipy.stats import norm

    (b,) = sequential.boundaries(0.01, 1)
    assert b == pytest.approx(float(norm.isf(0.01)), abs=1e-12)


#: Three looks of two rounds (fewer boundaries to compute than the default six).
_CFG = sequential.SequentialConfig(step=2, max_rounds=6)


def test_looks_are_numbered_from_one():
    cfg = _CFG
    with pytest.raises(ValueError) as exc:
        sequential.look([0.1, 0.2], 0, cfg, 0.05)
    assert str(exc.value) == "looks are numbered from 1, got 0"
    assert sequential.look([0.1, 0.2], 1, cfg, 0.05).look == 1


@pytest.mark.parametrize("pairs", [[], [float("nan"), float("inf")]], ids=["none", "none-finite"])
def test_a_cap_look_with_no_finite_pair_is_undecided_not_same(pairs):
    """Nothing measured at the cap is no evidence of "no change": UNCERTAIN (exit 2),
    with the estimate 0.0 and no interval; before the cap nothing is decided."""
    cap = sequential.look(pairs, _CFG.looks, _CFG, 0.05)
    assert (cap.pairs, cap.estimate, cap.low, cap.high, cap.decision, cap.final) == (
        0,
        0.0,
        None,
        None,
        GateStatus.UNCERTAIN,
        True,
    )
    assert sequential.look(pairs, 1, _CFG, 0.05).decision is None
    one = sequential.look([0.01], _CFG.looks, _CFG, 0.05)  # one pair within the threshold: SAME at the cap
    assert (one.pairs, one.decision) == (1, GateStatus.SAME)


def _rounds(medians: list[float], n: int = 5) -> list[list[float]]:
    return [[m] * n for m in medians]


#: Round-pair log ratios that no look with up to 4 pairs decides (too noisy).
_NOISY = [0.2, -0.1, 0.2, -0.1]


def test_the_replay_stops_when_the_rounds_run_out_undecided():
    base = _rounds([1.0] * 4)
    head = _rounds([math.exp(d) for d in _NOISY])
    looks = sequential.run_sequence(base, head, _CFG, 0.05)
    assert [(lk.look, lk.pairs, lk.decision, lk.final) for lk in looks] == [(1, 2, None, False), (2, 4, None, False)]
    assert len(sequential.run_sequence(base[:3], head, _CFG, 0.05)) == 1


KEY = ("suite.vector_add.track_time", (("provider", "torch"),))


def _open_series() -> tuple[dict, dict, Verdict]:
    base = _rounds([1.0, 1.0])
    head = _rounds([math.exp(d) for d in _NOISY[:2]])
    si = SeriesInput(
        KEY[0],
        KEY[1],
        Side(True, samples=[x for r in base for x in r], rounds=base),
        Side(True, samples=[x for r in head for x in r], rounds=head),
    )
    v = classify(si, GateConfig())
    assert v.status in (GateStatus.SLOWER, GateStatus.FASTER, GateStatus.SAME, GateStatus.UNCERTAIN)
    return {KEY: si}, {KEY: v}, v


def test_a_series_failing_on_head_at_a_later_look_is_broken_naming_the_look():
    inputs, verdicts, _ = _open_series()
    calls, logs = [], []

    def measure(keys, k):
        calls.append((list(keys), k))
        base = _rounds([1.0, 1.0])
        return {KEY: {"base": Side(True, samples=base[0] + base[1], rounds=base), "head": Side(True, True, error="E")}}

    history = sequential.decide_sequentially(inputs, verdicts, _CFG, GateConfig(), measure, log=logs.append)
    assert calls == [([KEY], 2)]
    assert logs == ["  sequential look 2: 1 open series, 2 more rounds a side"]
    assert [lk.decision for lk in history[KEY]] == [None]
    v = verdicts[KEY]
    assert (v.status, v.reason) == (GateStatus.BROKEN, "failed at sequential look 2: E")
    assert inputs[KEY].head.failed


@pytest.mark.parametrize("lost", ["base", "head", "both"])
def test_a_later_look_without_rounds_stops_measuring_the_series(lost):
    """Without the round split on either side the rule cannot look again: the series
    is undecided (UNCERTAIN, exit 2), never left with look 1's fixed-rule verdict."""
    inputs, verdicts, first = _open_series()
    calls = []

    def side(name, value):
        if lost in (name, "both"):
            return Side(True, samples=[value] * 5)
        return Side(True, samples=[value] * 5, rounds=[[value] * 5])

    def measure(keys, k):
        calls.append((list(keys), k))
        return {KEY: {"base": side("base", 1.0), "head": side("head", 1.1)}}

    history = sequential.decide_sequentially(inputs, verdicts, _CFG, GateConfig(), measure)
    assert calls == [([KEY], 2)] and len(history[KEY]) == 1
    assert verdicts[KEY] is first and first.status is GateStatus.UNCERTAIN and not first.borderline
    assert first.reason.endswith("; sequential look 2 lost the round split: undecided after look 1")
    pooled = inputs[KEY]
    assert (pooled.base.rounds is None, pooled.head.rounds is None) == (lost != "head", lost != "base")
    assert (len(pooled.base.samples), len(pooled.head.samples)) == (15, 15)
