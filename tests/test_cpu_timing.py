"""The ``cpu`` timing method: thread count it sets, contention it sees (issue 13).

Contention is injected (scripted schedstat files, a scripted thread clock),
never inferred from timing ratios, so these tests decide the same on an idle
and on a saturated machine.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from harness.core import devices
from harness.measure import clocks, timing


class FakeNs:
    def __init__(self):
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def cfg(**kw) -> timing.TimingConfig:
    base = dict(method="cpu", min_samples=20, min_time_s=0.0, max_time_s=0.5, warmup_s=0.001, batch=5)
    base.update(kw)
    return timing.TimingConfig(**base)


# --------------------------------------------------------------------- thread count


def test_cpu_method_sets_the_intra_op_thread_count_and_restores_it():
    import torch

    before = torch.get_num_threads()
    seen = []
    r = timing.time_cpu(lambda: seen.append(torch.get_num_threads()), cfg(max_time_s=0.02))
    assert set(seen) == {1}  # default: one thread, during warm-up and sampling
    assert r.config["threads"] == 1
    assert r.extra["cpu"]["threads"] == {"requested": 1, "torch_threads": 1}
    assert torch.get_num_threads() == before

    seen.clear()
    r = timing.time_cpu(lambda: seen.append(torch.get_num_threads()), cfg(max_time_s=0.02, threads=2))
    assert set(seen) == {2} and r.config["threads"] == 2
    seen.clear()
    r = timing.time_cpu(lambda: seen.append(torch.get_num_threads()), cfg(max_time_s=0.02, threads=None))
    assert set(seen) == {before} and r.extra["cpu"]["threads"]["requested"] is None


def test_thread_count_is_validated():
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="threads"):
            timing.TimingConfig(method="cpu", threads=bad)


def test_thread_count_is_part_of_the_harness_version(monkeypatch):
    from harness import __version__

    monkeypatch.delenv(devices.CPU_THREADS_ENV, raising=False)
    assert devices.cpu_timing_threads() == 1
    assert devices.harness_version("cpu") == f"{__version__}+cpu1t"
    assert devices.harness_version("cuda") == __version__  # GPU timing has no thread count
    monkeypatch.setenv(devices.CPU_THREADS_ENV, "4")
    assert devices.cpu_timing_threads() == 4 and devices.harness_version("cpu") == f"{__version__}+cpu4t"
    monkeypatch.setenv(devices.CPU_THREADS_ENV, "torch")
    assert devices.cpu_timing_threads() is None
    assert devices.harness_version("cpu") == f"{__version__}+cpu-torch-threads"
    monkeypatch.setenv(devices.CPU_THREADS_ENV, "zero")
    with pytest.raises(ValueError, match="KERNELWATCH_CPU_THREADS"):
        devices.cpu_timing_threads()


def test_bench_cpu_case_takes_the_thread_count_from_the_environment(monkeypatch):
    from harness.measure import bench

    monkeypatch.setenv("KERNELWATCH_QUICK", "1")
    monkeypatch.setenv(devices.CPU_THREADS_ENV, "2")
    case = bench.prepare("vector_add", "torch", (4096,), "fp32", "cpu")
    assert case.config.threads == 2


# --------------------------------------------------------------------- every thread watched


class TaskDir:
    """A scripted ``/proc/self/task``: one folder per thread with a schedstat file."""

    def __init__(self, root, tids):
        self.root = root
        self.c = {tid: [0, 0] for tid in tids}
        self.write()

    def write(self):
        for tid, (run, wait) in self.c.items():
            d = self.root / str(tid)
            d.mkdir(exist_ok=True)
            (d / "schedstat").write_text(f"{run} {wait} 1\n")

    def add(self, tid, run_ns=0, wait_ns=0):
        self.c.setdefault(tid, [0, 0])
        self.c[tid][0] += run_ns
        self.c[tid][1] += wait_ns
        self.write()


def test_run_queue_wait_is_taken_per_thread():
    def rd(tasks):
        return clocks.ClockReading(
            t_s=0.0, sched_run_s=0.0, sched_wait_s=sum(w for _, w in tasks.values()) / 1e9, sched_tasks=tasks
        )

    a = rd({1: (0, 100), 2: (0, 5_000)})
    b = rd({1: (0, 300), 3: (0, 700)})  # thread 2 ended, thread 3 was born in between
    assert clocks.run_queue_wait_s(a, b) == pytest.approx((200 + 700) / 1e9)
    assert clocks.run_queue_wait_s(a, clocks.ClockReading(t_s=1.0)) is None


def test_a_worker_threads_wait_is_seen_and_the_stretch_excluded(tmp_path):
    """The timing thread (tid 10) never waits; a pool worker (tid 11) waits 50%
    of every other stretch. Watching only tid 10 would see nothing."""
    clk = FakeNs()
    tasks = TaskDir(tmp_path, [10, 11])
    state = {"calls": 0}

    def fn():
        clk.ns += 200_000
        state["calls"] += 1
        stretch = state["calls"] // 50  # with 200 us samples, a 10 ms stretch is 50 calls
        if stretch % 2 == 1:
            tasks.add(11, wait_ns=100_000)
        tasks.add(10, run_ns=200_000)

    mon = clocks.CpuSchedMonitor(task_dir=str(tmp_path), now=lambda: clk.ns / 1e9)
    r = timing.time_cpu(fn, cfg(min_samples=100, max_time_s=1.0), clock_ns=clk, monitor=mon)
    c = r.extra["cpu"]
    assert c["contended_batches"] > 0 and c["excluded_samples"] == c["contended_samples"] > 0
    assert c["judged"].startswith("per stretch")  # no thread clock with a synthetic clock
    assert c["contended"] is False  # enough clean samples were left
    assert r.throttled == [False] * len(r.samples_s) and len(r.samples_s) >= 100
    assert "excluded as throttled or CPU-contended" in r.stop_reason
    waits = [w for w, bad in zip(c["batches"]["run_queue_wait_s"], c["batches"]["contended_samples"]) if bad]
    assert waits and min(waits) > 0
    assert r.clocks["throttle_reasons"] == ["cpu_contention"]

    # The same script seen through the timing thread's file alone: no contention.
    clk.ns = 0
    state["calls"] = 0
    one = clocks.CpuSchedMonitor(path=str(tmp_path / "10" / "schedstat"), now=lambda: clk.ns / 1e9)
    r1 = timing.time_cpu(fn, cfg(min_samples=100, max_time_s=1.0), clock_ns=clk, monitor=one)
    assert r1.extra["cpu"]["contended_batches"] == 0


def test_contention_can_be_flagged_instead_of_excluded(tmp_path):
    clk = FakeNs()
    tasks = TaskDir(tmp_path, [10])

    def fn():
        clk.ns += 200_000
        tasks.add(10, run_ns=100_000, wait_ns=100_000)  # waits half of the time, always

    mon = clocks.CpuSchedMonitor(task_dir=str(tmp_path), now=lambda: clk.ns / 1e9)
    r = timing.time_cpu(fn, cfg(exclude_contended=False), clock_ns=clk, monitor=mon)
    assert r.extra["cpu"]["contended"] is True and r.extra["cpu"]["excluded_samples"] == 0
    assert r.throttled and all(r.throttled)


def test_too_few_clean_samples_keeps_all_of_them_flagged(tmp_path):
    clk = FakeNs()
    tasks = TaskDir(tmp_path, [10])

    def fn():
        clk.ns += 200_000
        tasks.add(10, run_ns=100_000, wait_ns=100_000)

    mon = clocks.CpuSchedMonitor(task_dir=str(tmp_path), now=lambda: clk.ns / 1e9)
    r = timing.time_cpu(fn, cfg(max_time_s=0.05), clock_ns=clk, monitor=mon)
    c = r.extra["cpu"]
    assert c["contended"] is True and c["excluded_samples"] == 0
    assert len(r.samples_s) >= 20 and not r.converged
    assert "only 0 uncontended samples" in r.stop_reason and all(r.throttled)


def test_a_preempted_sample_of_the_single_timing_thread_is_excluded_alone():
    """Single-threaded, each sample's wall time is checked against the timing
    thread's CPU time (scripted here): every 7th sample lost half its wall time
    to a neighbour. Those samples, and only those, are dropped, even without
    scheduler statistics."""
    clk = FakeNs()
    th = FakeNs()
    state = {"calls": 0}

    def fn():
        state["calls"] += 1
        clk.ns += 200_000
        th.ns += 100_000 if state["calls"] % 7 == 0 else 200_000

    none = clocks.NullMonitor("no schedstat in this test")
    r = timing.time_cpu(fn, cfg(min_samples=100, max_time_s=1.0), clock_ns=clk, monitor=none, thread_ns=th)
    c = r.extra["cpu"]
    assert c["judged"].startswith("per sample")
    assert c["contended_samples"] > 0 and c["excluded_samples"] == c["contended_samples"]
    assert set(r.samples_s) == {200e-6}  # all kept samples are clean
    n = sum(c["batches"]["n_samples"])
    assert c["contended_samples"] == pytest.approx(n / 7, abs=3)
    assert sum(c["batches"]["kept_samples"]) == len(r.samples_s) == n - c["contended_samples"]
    fr = [t / w for t, w in zip(c["batches"]["thread_cpu_s"], c["batches"]["wall_s"])]
    assert all(0.85 < f <= 1.0 for f in fr)  # thread CPU time beside wall time, per stretch
    # With two threads the timing thread may legitimately wait for its workers: not a signal.
    clk.ns = th.ns = state["calls"] = 0
    r2 = timing.time_cpu(fn, cfg(min_samples=100, max_time_s=1.0, threads=2), clock_ns=clk, monitor=none, thread_ns=th)
    assert r2.extra["cpu"]["contended_samples"] == 0 and r2.extra["cpu"]["judged"].startswith("per stretch")


@pytest.mark.skipif(not os.path.isdir(clocks.TASK_DIR), reason="no /proc/self/task (not Linux)")
def test_the_real_monitor_sees_every_thread_of_the_process():
    stop = threading.Event()
    tid = []

    def spin():
        tid.append(threading.get_native_id())
        while not stop.is_set():
            sum(range(1000))

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        while not tid:
            time.sleep(0.001)
        mon = clocks.open_cpu_monitor()
        assert mon.available and "every thread" in mon.name
        a = mon.read()
        time.sleep(0.05)
        b = mon.read()
    finally:
        stop.set()
        t.join()
    assert tid[0] in a.sched_tasks and threading.get_native_id() in a.sched_tasks
    assert b.sched_tasks[tid[0]][0] > a.sched_tasks[tid[0]][0]  # the spinning thread ran
    assert clocks.run_queue_wait_s(a, b) is not None


def test_real_timing_records_cpu_time_beside_wall_time():
    r = timing.time_cpu(lambda: sum(range(300)), cfg(max_time_s=0.05))
    b = r.extra["cpu"]["batches"]
    n = r.extra["cpu"]["batches_total"]
    assert n >= 1 and all(len(v) == n for v in b.values())
    assert all(w > 0 for w in b["wall_s"]) and all(c is not None and c >= 0 for c in b["thread_cpu_s"])
    assert sum(b["kept_samples"]) == len(r.samples_s)
    assert r.extra["cpu"]["judged"].startswith("per sample")  # real clock, one thread


def test_steady_malloc_stops_per_call_page_faults():
    """A 4 MiB temporary per call: with glibc's thresholds fixed, the pages are
    reused, so the timing thread takes (almost) no page fault per call. Counted,
    not timed: at least 1000 calls whatever the load, because the heap still
    grows once or twice early on (1024 faults each, seen in fresh processes),
    and over the 25 calls a loaded machine fits in 0.05 s that read as 80 per call."""
    import torch

    x = torch.ones(1 << 20)
    r = timing.time_cpu(lambda: (x * 2).sum(), cfg(min_samples=1000, target_rel=0.5, max_time_s=20.0, warmup_s=0.05))
    assert sum(r.extra["cpu"]["batches"]["n_samples"]) * r.number >= 1000
    m = r.extra["cpu"]["malloc"]
    if not m["applied"]:
        pytest.skip(m["reason"])
    assert r.config["steady_malloc"] is True
    assert r.extra["cpu"]["minor_faults_per_call"] is not None
    assert r.extra["cpu"]["minor_faults_per_call"] < 16  # a fresh 4 MiB buffer would be ~1000 faults
    off = timing.time_cpu(lambda: None, cfg(max_time_s=0.01, steady_malloc=False))
    assert off.extra["cpu"]["malloc"] == {"applied": False, "reason": "steady_malloc off"}


def test_sampling_waits_out_a_contended_period_for_clean_samples():
    """Every sample of the first 0.6 s is preempted (scripted thread clock); the
    method goes past max_time_s (0.3 s) until it has min_samples clean ones."""
    clk = FakeNs()
    th = FakeNs()

    def fn():
        clk.ns += 200_000
        th.ns += 50_000 if clk.ns < 600_000_000 else 200_000

    none = clocks.NullMonitor("no schedstat in this test")
    r = timing.time_cpu(fn, cfg(min_samples=20, max_time_s=0.3), clock_ns=clk, monitor=none, thread_ns=th)
    c = r.extra["cpu"]
    assert c["contended"] is False and len(r.samples_s) >= 20 and set(r.samples_s) == {200e-6}
    assert "extended by up to 0.6 s for clean samples: 0 -> " in r.stop_reason
    assert 0.6 <= r.elapsed_s or clk.ns / 1e9 >= 0.6
