"""Reproductions from round 6 of the hostile trial of issue 29 (docs/hostile-trial.md,
"Round 6"), fixed since; each with a passing control beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import _benchmarks, _machine, _meta, _v2_file
from test_hostile_round4 import _analyze  # the CLI in a subprocess, as round 4 runs it

from harness.store import results as R

ROOT = Path(__file__).resolve().parent.parent


def _history(res: Path, benches=("suite.x.time_x",), listed=None, machine_json=None) -> None:
    _benchmarks(res, {b: _meta(b) for b in (benches if listed is None else listed)})
    files = {}
    for i in range(6):
        c = f"{i + 1:02x}" * 20
        files[f"{c[:8]}-py3.11.json"] = _v2_file(c, date=1_700_000_000_000 + i * 1000, value=1.0, bench=benches[0])
    _machine(res, "m", files, machine_json=machine_json)


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_json_into_a_folder_that_takes_no_new_files_is_refused_before_the_work(tmp_path):
    """S-c: ``--json /proc/version`` passed the checks (``os.access`` says yes to
    root) and failed at the write as "No such file or directory"."""
    res = tmp_path / "results"
    _history(res)
    proc = _analyze(res, "--json", "/proc/version")
    assert proc.returncode == 2 and "folder /proc does not accept new files" in proc.stderr, proc.stderr
    ok = _analyze(res, "--json", str(tmp_path / "r.json"))  # the control
    assert ok.returncode == 0 and (tmp_path / "r.json").exists(), ok.stderr
    assert not list(tmp_path.glob(".kw-probe.*")), "the probe file was left behind"


def test_a_benchmark_that_benchmarks_json_does_not_list_is_named_once(tmp_path):
    """S-e: results of a benchmark absent from benchmarks.json became param1 with a
    unit guessed from the name, silently. One warning names all such benchmarks."""
    res = tmp_path / "results"
    _history(res, listed=["suite.other.time_other"])
    rs = R.load(res, with_records=False)
    lines = [e for e in rs.errors if "does not list" in e]
    assert len(lines) == 1 and "1 benchmark(s)" in lines[0] and "suite.x.time_x" in lines[0], rs.errors
    res2 = tmp_path / "listed"  # the control: listed, nothing to say
    _history(res2)
    assert not [e for e in R.load(res2, with_records=False).errors if "does not list" in e]


def test_a_machine_json_naming_another_machine_than_its_folder_is_said(tmp_path):
    """S-g: machine.json naming ``other-box`` in folder ``m`` renamed it silently."""
    res = tmp_path / "results"
    _history(res, machine_json={"machine": "other-box", "version": 1})
    rs = R.load(res, with_records=False)
    assert "other-box" in rs.machines
    assert any("names machine 'other-box', not its folder's name 'm'" in e for e in rs.errors), rs.errors
    res2 = tmp_path / "same"
    _history(res2)
    assert not [e for e in R.load(res2, with_records=False).errors if "folder's name" in e]


def test_a_symlink_loop_as_results_is_called_one(tmp_path):
    """S-l: ``--results`` a symlink loop said "does not exist"."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    proc = _analyze(tmp_path / "a")
    assert proc.returncode == 2 and "is a symbolic link to" in proc.stderr and "leads nowhere" in proc.stderr
    proc = _analyze(tmp_path / "missing")  # the control: a plain missing path
    assert proc.returncode == 2 and "missing does not exist" in proc.stderr, proc.stderr


_HEADER = (
    "kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
    "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp,liger_version"
)


def _row(ts: str, version: str) -> str:
    return (
        'rms_norm,liger,forward,speed,ms,H,hidden size,1024,0.02,0.01,0.03,"{""M"": 2048}",'
        f"NVIDIA H100 NVL,{ts},{version}"
    )


def test_liger_header_repeated_mid_file_and_bad_timestamps_are_named(tmp_path):
    """S-h: a header repeated at line 3 (two CSVs joined) read as "extra_benchmark_config_str
    is not JSON"; a timestamp ``garbage`` was taken silently."""
    csv = tmp_path / "joined.csv"
    rows = [
        _row("2025-01-01 10:00:00", "0.5.1"),
        _HEADER,
        _row("garbage", "0.5.2"),
        _row("2025-01-03 10:00:00", "0.5.3"),
    ]
    csv.write_text(_HEADER + "\n" + "\n".join(rows) + "\n")
    proc = _analyze(csv)
    assert proc.returncode == 0, proc.stderr
    assert f"{csv}:3: repeats the header row" in proc.stderr and "is not JSON" not in proc.stderr, proc.stderr
    assert "1 row(s) whose timestamp is not 'YYYY-MM-DD HH:MM:SS' (rows 4)" in proc.stderr, proc.stderr
    good = tmp_path / "good.csv"  # the control
    good.write_text(_HEADER + "\n" + "\n".join(_row(f"2025-01-0{d} 10:00:00", f"0.5.{d}") for d in (1, 2, 3)) + "\n")
    proc = _analyze(good)
    assert proc.returncode == 0 and "kernelwatch: warning" not in proc.stderr, proc.stderr


def test_an_old_site_that_cannot_be_removed_after_the_swap_is_named(tmp_path, monkeypatch):
    """S-j: publish over a site holding an immutable file (``chattr +i``) exited 0 and
    left the old site as ``.site.kw-stage-*`` without a word. The swap still happens;
    the folder left behind is named (publish prints it as a warning)."""
    from harness.report import swap

    def publish_once(remove) -> swap.Staging:
        out = tmp_path / "site"
        st = swap.begin(out, ("index.html",))
        (st.path / "index.html").write_text("new")
        monkeypatch.setattr(swap.shutil, "rmtree", remove)
        st.commit()
        monkeypatch.undo()
        return st

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("old")
    stuck = publish_once(lambda *a, **k: None)  # as an immutable file makes rmtree fail
    assert (tmp_path / "site" / "index.html").read_text() == "new"
    assert len(stuck.left_behind) == 1 and stuck.left_behind[0].exists()
    ok = publish_once(__import__("shutil").rmtree)  # the control: removed, nothing to name
    assert ok.left_behind == [] and (tmp_path / "site" / "index.html").read_text() == "new"


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_during_publish_ends_it_as_ctrl_c_does(tmp_path, sig):
    """Round 7: SIGTERM (a CI timeout) or SIGHUP during publish killed it silently
    (exit -15) and left its staging folder. Now: one line, exit 2, no staging folder,
    the previous site whole. The signal is sent once the staging folder exists."""
    import signal
    import time

    out = tmp_path / "site"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KERNELWATCH_DEBUG", None)
    cmd = [sys.executable, "-m", "harness.cli", "publish", "--results", str(ROOT / "examples/openblas/results")]
    cmd += ["--out", str(out)]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr  # the control: a whole publish
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    for _attempt in range(3):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".site.kw-stage-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is not None:
            pytest.skip("publish finished before its staging folder was seen")
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            break
        # the signal came once the new site was swapped in, as the process ended
        # (seen on a busy machine): the site must then be whole, with no staging left
        assert not list(tmp_path.glob(".site.kw-*")), list(tmp_path.iterdir())
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    else:
        pytest.skip("three signals in a row arrived after the publish had finished its work")
    assert proc.returncode == 2, (proc.returncode, err)
    assert f"kernelwatch: error: interrupted (signal {sig})" in err, err
    assert not list(tmp_path.glob(".site.kw-*")), list(tmp_path.iterdir())
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_many_empty_folders_are_one_warning_not_one_each(tmp_path):
    """Round 7: 3,000 empty subfolders gave 3,001 warning lines; the real one was
    buried. More than three empty folders are one line with a count."""
    res = tmp_path / "results"
    _history(res)
    for i in range(50):
        (res / f"empty{i:02d}").mkdir()
    rs = R.load(res, with_records=False)
    lines = [e for e in rs.errors if "no machine.json" in e]
    assert len(lines) == 1 and "50 folders with no machine.json" in lines[0], lines[:3]
    assert "m" in rs.machines
    res2 = tmp_path / "few"  # the control: two are named one by one
    _history(res2)
    (res2 / "a").mkdir()
    (res2 / "b").mkdir()
    assert len([e for e in R.load(res2, with_records=False).errors if "no machine.json" in e]) == 2


def test_a_results_file_holding_another_commit_than_its_name_is_said(tmp_path):
    """Round 7: ``03433efb-....json`` holding 03edd518's hash made 03433efb vanish;
    the only warning spoke of 03edd518 in two files. The name's disagreement is named."""
    res = tmp_path / "results"
    _history(res)
    d = res / "m"
    src = sorted(d.glob("0[12]*.json"))
    (d / src[0].name).write_text(src[1].read_text())  # 01010101-... now holds 02020202...
    rs = R.load(res, with_records=False)
    assert any(f"{src[0].name}: named for commit 01010101 but holds commit_hash 020202020202" in e for e in rs.errors)
    rs2 = R.load(_fresh(tmp_path), with_records=False)  # the control: names and contents agree
    assert not [e for e in rs2.errors if "named for commit" in e]


def _fresh(tmp_path: Path) -> Path:
    res = tmp_path / "fresh"
    _history(res)
    return res


def test_an_unknown_result_column_is_ignored_not_the_whole_file(tmp_path):
    """Round 7: one column a newer asv might add (``foo_col``) skipped every file,
    so the whole history. Its values are ignored, named per file; a column that
    is not a name still refuses the file."""
    import json

    res = tmp_path / "results"
    _history(res)
    for f in (res / "m").glob("0*.json"):
        data = json.loads(f.read_text())
        data["result_columns"].insert(1, "foo_col")
        for row in data["results"].values():
            row.insert(1, "whatever")
        f.write_text(json.dumps(data))
    rs = R.load(res, with_records=False)
    assert rs.files_loaded == 6 and sum(len(s.points) for s in rs.series.values()) == 12, rs.errors
    assert all(p.value == 1.0 for s in rs.series.values() for p in s.points)
    assert len([e for e in rs.errors if "unknown column 'foo_col'; its values are ignored" in e]) == 6
    bad = sorted((res / "m").glob("0*.json"))[0]  # the control: a column that is no name
    data = json.loads(bad.read_text())
    data["result_columns"][1] = 7
    bad.write_text(json.dumps(data))
    rs = R.load(res, with_records=False)
    assert rs.files_loaded == 5 and any("is not a name: 7" in e for e in rs.errors), rs.errors


def test_a_liger_row_with_a_byte_that_is_not_utf8_loses_that_row_only(tmp_path):
    """Round 7: one cp1252 byte (0xe9) in a GPU name lost all rows of the file, the
    error giving a byte offset. The row is skipped by line; a UTF-16 file (its
    header unreadable) is still refused whole, and a negative x is refused by row."""
    csv = tmp_path / "cp1252.csv"
    rows = [_row(f"2025-01-0{d} 10:00:00", f"0.5.{d}").encode() for d in (1, 2, 3)]
    bad = _row("2025-01-04 10:00:00", "0.5.4").replace("NVIDIA H100 NVL", "NVIDIA H100 NVL caf\x00").encode()
    bad = bad.replace(b"caf\x00", b"caf\xe9")
    neg = _row("2025-01-05 10:00:00", "0.5.5").replace(",1024,", ",-1024,").encode()
    csv.write_bytes(b"\n".join([_HEADER.encode(), *rows, bad, neg]) + b"\n")
    out = tmp_path / "r.json"
    proc = _analyze(csv, "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"{csv}:5: column gpu_name is not UTF-8 text (byte 0xe9); row skipped" in proc.stderr, proc.stderr
    assert f"{csv}:6: column x_value '-1024' is negative" in proc.stderr, proc.stderr
    import json

    assert json.loads(out.read_text())["summary"]["points"] == 3
    utf16 = tmp_path / "utf16.csv"  # the control: no header to read, the file is refused
    utf16.write_bytes((_HEADER + "\n" + _row("2025-01-01 10:00:00", "0.5.1") + "\n").encode("utf-16"))
    proc = _analyze(utf16)
    assert proc.returncode == 2 and "cannot read" in proc.stderr, proc.stderr
