"""Fault injection on the moves that publish a measurement (issue 30).

``kernelwatch run`` measures into a scratch folder and moves whole files into
the results folder (:func:`harness.measure.runner.promote_scratch`), records
first, the asv results file last (its presence is what "measured" means). The
property a reader relies on: whenever the process dies, every results file in
the results folder parses, and a commit counts as measured only with its
records beside it. Tested by crashing at every ``os.replace`` of a promotion
in turn, and by a write that dies half-way, which an in-place write (instead
of a rename) would turn into a truncated results file.
"""

from __future__ import annotations

import builtins
import io
import json
from pathlib import Path

import pytest
from test_bad_input import _machine, _v2_file

from harness.measure import runner
from harness.store import results as R

OLD, NEW = "a" * 40, "b" * 40


class Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing may catch it)."""


def _setup(tmp_path) -> tuple[Path, Path]:
    res = tmp_path / "results"
    _machine(res, "m", {f"{OLD[:8]}-py3.11.json": _v2_file(OLD)})
    (res / "benchmarks.json").write_text(json.dumps({"version": 2}))
    scratch = runner.new_scratch(res, "m", "t")
    sd = _machine(scratch, "m", {f"{NEW[:8]}-py3.11.json": _v2_file(NEW), f"{OLD[:8]}-py3.11.json": _v2_file(OLD)})
    (sd / "kernelwatch").mkdir()
    (sd / "kernelwatch" / f"{NEW}.jsonl").write_text('{"schema": 1, "commit": "%s"}\n' % NEW)
    (scratch / "benchmarks.json").write_text(json.dumps({"version": 2, "x": 1}))
    return res, scratch


def _assert_consistent(res: Path) -> None:
    for f in sorted((res / "m").glob("*.json")):
        if f.name != "machine.json":
            assert runner._results_file_problem(f) is None, f"{f.name} is half-written"
        else:
            json.loads(f.read_text())
    json.loads((res / "benchmarks.json").read_text())
    measured = runner.measured_commits(res, "m")
    assert OLD in measured  # what was there before is never lost
    if NEW in measured:  # "measured" only with the records that describe it
        assert (res / "m" / "kernelwatch" / f"{NEW}.jsonl").is_file()
    rs = R.load(res, with_records=False)
    assert not [e for e in rs.errors if "truncated" in e or "not valid JSON" in e], rs.errors


def _count_replaces(tmp_path) -> int:
    res, scratch = _setup(tmp_path / "count")
    calls = []
    real = runner.os.replace

    def counting(a, b):
        calls.append((a, b))
        real(a, b)

    runner.os.replace, saved = counting, runner.os.replace
    try:
        runner.promote_scratch(scratch, res)
    finally:
        runner.os.replace = saved
    return len(calls)


def test_promotion_uses_replace_for_every_file(tmp_path):
    # records, machine.json, two results files, benchmarks.json
    assert _count_replaces(tmp_path) == 5


@pytest.mark.parametrize("crash_at", range(5))
def test_a_crash_before_any_rename_leaves_a_consistent_results_folder(tmp_path, monkeypatch, crash_at):
    res, scratch = _setup(tmp_path)
    real = runner.os.replace
    n = [0]

    def dying(a, b):
        if n[0] == crash_at:
            raise Crash(f"killed before rename {crash_at}: {a} -> {b}")
        n[0] += 1
        real(a, b)

    monkeypatch.setattr(runner.os, "replace", dying)
    with pytest.raises(Crash):
        runner.promote_scratch(scratch, res)
    monkeypatch.setattr(runner.os, "replace", real)
    _assert_consistent(res)
    # The next run finishes the promotion from the same scratch.
    runner.promote_scratch(scratch, res)
    _assert_consistent(res)
    assert runner.measured_commits(res, "m") == {OLD, NEW}


def test_a_write_that_dies_half_way_never_lands_in_the_results_folder(tmp_path, monkeypatch):
    """Any file opened for writing under the results folder (outside the scratch)
    gets half its bytes, then the process dies. A promotion that renames never
    writes there; one that copied or wrote in place would leave half a file."""
    res, scratch = _setup(tmp_path)
    real_open = builtins.open
    opened = []

    class HalfWriter(io.StringIO):
        def __init__(self, path, mode):
            super().__init__()
            self.path, self.mode = path, mode

        def close(self):
            data = self.getvalue()
            with real_open(self.path, self.mode, encoding="utf-8") as fh:
                fh.write(data[: len(data) // 2])
            raise Crash(f"died writing {self.path}")

        def __exit__(self, *exc):
            self.close()

    def guarded_open(file, mode="r", *args, **kwargs):
        p = Path(file).resolve() if isinstance(file, (str, Path)) else None
        writing = any(c in mode for c in "wax+")
        if p is not None and writing and res.resolve() in p.parents and scratch.resolve() not in p.parents:
            opened.append(p)
            if p.suffix == ".json" and "b" not in mode:
                return HalfWriter(p, mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    try:
        runner.promote_scratch(scratch, res)
    except Crash:
        pass
    monkeypatch.setattr(builtins, "open", real_open)
    monkeypatch.setattr(io, "open", real_open)
    assert [p for p in opened if p.suffix == ".json"] == [], "a results file was written in place"
    _assert_consistent(res)


def test_the_half_writer_does_catch_an_in_place_write(tmp_path, monkeypatch):
    """Negative control for the test above: a promotion that writes the results
    file in place (``write_text``) instead of renaming it is caught."""
    res, scratch = _setup(tmp_path)
    real = runner.os.replace

    def in_place(a, b):
        a, b = Path(a), Path(b)
        if b.suffix == ".json" and b.parent.name == "m" and b.name != "machine.json":
            with open(b, "w", encoding="utf-8") as fh:
                fh.write(a.read_text(encoding="utf-8"))
            a.unlink()
        else:
            real(a, b)

    monkeypatch.setattr(runner.os, "replace", in_place)
    with pytest.raises(AssertionError, match="written in place"):
        test_a_write_that_dies_half_way_never_lands_in_the_results_folder(tmp_path / "again", monkeypatch)


def test_asv_config_is_written_beside_and_renamed(tmp_path, monkeypatch):
    """The run's asv.conf.json: a crash before the rename leaves the old config whole."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "asv.conf.json").write_text(json.dumps({"version": 1, "benchmark_dir": "benchmarks"}))
    dest = tmp_path / "state" / "asv.conf.json"
    runner.write_asv_config(root, tmp_path / "results", dest)
    before = dest.read_text()

    def dying(a, b):
        raise Crash("killed before rename")

    monkeypatch.setattr(runner.os, "replace", dying)
    with pytest.raises(Crash):
        runner.write_asv_config(root, tmp_path / "other-results", dest)
    assert dest.read_text() == before and json.loads(before)["results_dir"] == str(tmp_path / "results")
