"""A commit cut off mid-measurement keeps its records (issue 26, finding 2).

``timeout`` sends SIGTERM; Python's default action for it skips every
``finally``, so the records the suite had written into the scratch folder were
deleted by the next run with the folder. Here a real SIGTERM hits a real
``_measure_one`` whose asv is replaced by a stand-in that writes one record
(as the suite does per finished case) and then hangs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure import cutoff, runner

ROOT = Path(__file__).resolve().parent.parent
SHA = "ab" * 20
MACHINE = "m-cpu"

CHILD = r"""
import json, sys, time
from pathlib import Path
import pytest

from harness.measure import cutoff, runner

results, sha, machine, root = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])

def fake_asv(cmd, env=None, **kw):
    d = Path(env["KERNELWATCH_RESULTS_DIR"]) / machine / "kernelwatch"
    d.mkdir(parents=True, exist_ok=True)
    rec = {"commit": sha, "machine": machine, "benchmark": "suite.vector_add.track_time", "params": {"p": "1"}}
    (d / f"{sha}.jsonl").write_text(json.dumps(rec) + "\n")
    print("case written", flush=True)
    time.sleep(120)

runner.procs.run_bounded = fake_asv  # the bounded runner asv goes through (issue 29)
summary = runner.RunSummary(machine=machine, commits=[sha])
with cutoff.sigterm_raises():
    runner._measure_one(root, results, machine, sha, quick=True, launch="spawn", bench_filter=None,
                        summary=summary, log=lambda m: print(m, flush=True))
print("not reached", flush=True)
"""


def _records_file(results: Path) -> Path:
    return results / MACHINE / "kernelwatch" / f"{SHA}.jsonl"


def test_sigterm_during_a_commit_keeps_its_records_and_the_next_run_keeps_them(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(results), SHA, MACHINE, str(ROOT)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # blocks until the stand-in wrote its case
        assert line.strip() == "case written", line
        assert not _records_file(results).exists()  # still in the scratch folder
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "not reached" not in out
    assert "interrupted; kept 1 records" in out, out
    kept = _records_file(results)
    assert json.loads(kept.read_text())["commit"] == SHA
    assert not list((results / ".kernelwatch").glob("scratch-*"))  # nothing half-done left behind
    # The next run: no scratch to delete, the records stay, and it names the commit.
    logs: list[str] = []
    assert cutoff.salvage_stale_scratch(results, log=logs.append) == []
    assert kept.is_file()
    assert cutoff.records_without_results(results, MACHINE, runner.measured_commits(results, MACHINE)) == {SHA: 1}


def test_sigterm_outside_the_block_keeps_the_default_action(tmp_path):
    # Negative control: without sigterm_raises the same child dies at once, no
    # finally runs, and the record stays in the scratch folder only.
    child = CHILD.replace("with cutoff.sigterm_raises():\n    ", "if True:\n    ")
    results = tmp_path / "results"
    results.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(results), SHA, MACHINE, str(ROOT)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "case written"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM
    assert not _records_file(results).exists()
    stale = list((results / ".kernelwatch").glob("scratch-*"))
    assert len(stale) == 1
    # ... and the next run salvages them instead of deleting the folder.
    logs: list[str] = []
    warnings = cutoff.salvage_stale_scratch(results, log=logs.append)
    assert len(warnings) == 1 and "kept abababab (1 records)" in warnings[0]
    assert _records_file(results).is_file() and not stale[0].exists()
    (ROOT / ".kernelwatch" / f"asv-run-{proc.pid}.conf.json").unlink(missing_ok=True)  # the killed child's


def test_a_line_cut_mid_write_is_dropped_and_appends_go_after_old_lines(tmp_path):
    src, dest = tmp_path / "s" / "m", tmp_path / "d" / "m"
    (src / "kernelwatch").mkdir(parents=True)
    (dest / "kernelwatch").mkdir(parents=True)
    (dest / "kernelwatch" / "c1.jsonl").write_text('{"a": 1}\n')
    (src / "kernelwatch" / "c1.jsonl").write_text('{"a": 2}\n{"a": 3')
    (src / "kernelwatch" / "calibration.jsonl").write_text('{"cal": 1}\n')
    assert cutoff.move_records(src, dest) == {"c1": 1}
    assert (dest / "kernelwatch" / "c1.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'
    assert not (dest / "kernelwatch" / "calibration.jsonl").exists()  # the run's copy, not moved back


def test_a_run_told_not_to_calibrate_never_does_and_says_what_is_withheld(tmp_path, monkeypatch):
    from harness.core.devices import DeviceIdentity
    from harness.measure import calibrate

    ident = DeviceIdentity(kind="cpu", name="Test CPU", host="h", versions={}, l2_bytes=1 << 20)
    called = []
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: called.append(k) or {})
    logs: list[str] = []
    warnings = runner._ensure_calibration(tmp_path, "h-cpu", ident, quick=True, allowed=False, log=logs.append)
    assert not called and len(warnings) == 1 and "withheld" in warnings[0] and "--no-calibrate" in warnings[0]
    # Control: allowed, it calibrates, with the time cap.
    cal = {
        "machine": "h-cpu",
        "copy": {"status": "contended"},
        "read": {"status": "ok"},
        "add": {"status": "ok"},
        "matmul": {},
    }
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: called.append(k) or cal)
    monkeypatch.setattr(calibrate, "save", lambda c, r: None)
    warnings = runner._ensure_calibration(tmp_path, "h-cpu", ident, quick=True, allowed=True, log=logs.append)
    assert called[0]["time_cap_s"] == calibrate.DEFAULT_TIME_CAP_S
    called[0]["progress"]("copy bandwidth: 840 MiB")  # each figure is logged as it starts
    assert logs[-1].startswith("  calibrate (") and logs[-1].endswith("s): copy bandwidth: 840 MiB")
    assert warnings and "could not calibrate copy (contended)" in warnings[0]
    assert warnings[0].startswith("could not calibrate: contended")


def test_a_calibration_with_unstable_figures_says_so_and_keeps_them(tmp_path, monkeypatch):
    """Newcomer trial (2026-12-03): all six figures unstable, the pages badged them,
    but the run said nothing. Now one warning names them; a stable figure is silent."""
    from harness.core.devices import DeviceIdentity
    from harness.measure import calibrate

    ident = DeviceIdentity(kind="cpu", name="Test CPU", host="h", versions={}, l2_bytes=1 << 20)
    cal = {
        "machine": "h-cpu",
        "copy": {"status": "ok", "stable": False},
        "read": {"status": "ok", "stable": True},
        "add": {"status": "ok"},
        "matmul": {"fp32": {"status": "ok", "stable": False}},
    }
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: cal)
    monkeypatch.setattr(calibrate, "save", lambda c, r: None)
    logs: list[str] = []
    warnings = runner._ensure_calibration(tmp_path, "h-cpu", ident, quick=True, allowed=True, log=logs.append)
    assert len(warnings) == 1 and "copy, matmul fp32 unstable" in warnings[0] and "read" not in warnings[0]
    assert logs[-1].startswith("warning: calibration of h-cpu:")
    # the control: all stable, nothing to say
    for f in ("copy", "read", "add"):
        cal[f]["stable"] = True
    cal["matmul"]["fp32"]["stable"] = True
    assert runner._ensure_calibration(tmp_path, "h-cpu", ident, quick=True, allowed=True, log=logs.append) == []


def test_a_child_forked_inside_sigterm_raises_dies_of_sigterm():
    """publish's fork pool ends its workers with SIGTERM; a worker that inherited the
    raising handler hung on a lock and the pool waited forever (the README's test
    command timed out). The child dies as by default; the parent still raises."""
    import multiprocessing as mp
    import signal
    import time

    ctx = mp.get_context("fork")
    with cutoff.sigterm_raises((signal.SIGTERM, signal.SIGHUP)):
        p = ctx.Process(target=time.sleep, args=(60,))
        p.start()
        time.sleep(0.2)
        p.terminate()
        p.join(30)
        assert p.exitcode == -signal.SIGTERM, p.exitcode
        with pytest.raises(cutoff.Interrupted):  # the control: the owner raises
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
