"""``kernelwatch run`` is never silent for minutes: one line per asv benchmark (issue 25)."""

from __future__ import annotations

from pathlib import Path

from harness.core import procs
from harness.measure import runner

ROOT = Path(__file__).resolve().parent.parent
SHA = "cd" * 20
MACHINE = "m-cpu"

ASV_OUT = [
    "[ 0.00%] · For kernelwatch commit cdcdcdcd <main>:",
    "[ 0.00%] ·· Benchmarking kernelwatch-py3.11",
    "[25.00%] ··· Running (suite.softmax.track_time--).",
    "[50.00%] ··· suite.softmax.track_time                                1/2 failed",
    "[50.00%] ··· =============== ========================",
    "             For parameters: 'torch', '1024x1024', 'fp32', 'cpu'",
    "[100.00%] ··· suite.vector_add.track_time                                 ok",
]


def test_one_progress_line_per_benchmark_with_its_elapsed_time():
    t = [100.0]
    logs: list[str] = []
    p = runner.CaseProgress(SHA, logs.append, clock=lambda: t[0])
    for i, line in enumerate(ASV_OUT):
        t[0] = 100.0 + 30 * i
        p(line)
    assert logs == [
        "  cdcdcdcd [ 25%] suite.softmax.track_time: running (60 s)",
        "  cdcdcdcd [ 50%] suite.softmax.track_time: 1/2 failed (90 s)",
        "  cdcdcdcd [100%] suite.vector_add.track_time: ok (180 s)",
    ]


def test_a_commit_run_prints_the_lines_as_asv_writes_them(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    seen = []

    def fake_asv(cmd, env=None, on_line=None, **kw):
        assert on_line is not None  # without it the user sees nothing until the commit ends
        for line in ASV_OUT:
            on_line(line)
        seen.append(env["KERNELWATCH_RESULTS_DIR"])
        return procs.Finished(1, "\n".join(ASV_OUT), "", 1.0)

    monkeypatch.setattr(runner.procs, "run_bounded", fake_asv)
    logs: list[str] = []
    summary = runner.RunSummary(machine=MACHINE, commits=[SHA])
    runner._measure_one(
        ROOT, results, MACHINE, SHA, quick=True, launch="spawn", bench_filter=None, summary=summary, log=logs.append
    )
    assert seen
    lines = [m for m in logs if m.startswith("  cdcdcdcd [")]
    assert [m.split("] ")[1].split(":")[0] for m in lines] == [
        "suite.softmax.track_time",
        "suite.softmax.track_time",
        "suite.vector_add.track_time",
    ]
    assert SHA in summary.failed  # asv stored nothing: said so, as before
