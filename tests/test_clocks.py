"""NVML clocks: decoding, a fake NVML, NVML missing (never a failure), per-sample
throttle flags, exclusion and clock normalisation through the timers."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from harness.measure import clocks, timing


class NVMLError(Exception):
    pass


class FakeNVML:
    """Just the pynvml calls harness.measure.clocks makes; values settable per test."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(
        self,
        *,
        sm=1980,
        mem=2619,
        max_sm=1980,
        max_mem=2619,
        temp=45,
        power_mw=350_000,
        reasons=0x0,
        uuid="GPU-1234",
        legacy_reasons=False,
        fail=(),
    ):
        self.sm, self.mem, self.max_sm, self.max_mem = sm, mem, max_sm, max_mem
        self.temp, self.power_mw, self.reasons, self.uuid = temp, power_mw, reasons, uuid
        self.fail = set(fail)
        self.inits = 0
        self.shutdowns = 0
        if legacy_reasons:  # an older nvidia-ml-py: only the "Throttle" name
            self.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: self._get("reasons", self.reasons)
        else:
            self.nvmlDeviceGetCurrentClocksEventReasons = lambda h: self._get("reasons", self.reasons)

    def _get(self, what, value):
        if what in self.fail:
            raise NVMLError(f"NVML_ERROR_NOT_SUPPORTED: {what}")
        return value() if callable(value) else value

    def nvmlInit(self):
        if "init" in self.fail:
            raise NVMLError("NVML Shared Library Not Found")
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != self.uuid:
            raise NVMLError("NVML_ERROR_NOT_FOUND")
        return "handle"

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if "pci" in self.fail:
            raise NVMLError("NVML_ERROR_NOT_FOUND")
        return "handle"

    def nvmlDeviceGetHandleByIndex(self, i):
        return "handle"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self._get("sm" if kind == 1 else "mem", self.sm if kind == 1 else self.mem)

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self._get("max", self.max_sm if kind == 1 else self.max_mem)

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._get("temp", self.temp)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._get("power", self.power_mw)


PROPS = SimpleNamespace(uuid="1234", pci_bus_id=0x18, pci_domain_id=0, pci_device_id=0)


# --------------------------------------------------------------------- decoding


def test_decode_reasons_by_bit():
    assert clocks.decode_reasons(0) == ()
    assert clocks.decode_reasons(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert clocks.decode_reasons(0x40 | 0x800) == ("hw_thermal_slowdown", "bit_0x800")
    with pytest.raises(ValueError):
        clocks.decode_reasons(-1)
    with pytest.raises(TypeError):
        clocks.decode_reasons(True)


def test_without_clocks_only_hard_slowdown_reasons_count_as_throttled():
    r = lambda reasons: clocks.ClockReading(t_s=0.0, reasons=reasons)  # noqa: E731
    assert r(("gpu_idle", "applications_clocks_setting")).throttled is False
    assert r(("sw_power_cap",)).throttled is False  # an H200 at its 700 W cap is not throttled
    assert r(("hw_thermal_slowdown",)).throttled is True
    assert r(None).throttled is None
    assert clocks.BatchClocks(1, [r(("hw_slowdown",))]).throttled is True
    assert clocks.BatchClocks(1, [r(("sw_power_cap",))]).throttled is False


def test_a_batch_is_throttled_by_its_sm_clock_below_75_percent_of_max_as_nvbench():
    def b(sm, reasons=()):
        return clocks.BatchClocks(1, [reading(sm, reasons)], max_sm_clock_mhz=1980)

    # Dense matmuls at the power cap: clock a few percent under boost, reason set: not throttled.
    assert b(1830, ["sw_power_cap"]).throttled is False
    assert b(0.75 * 1980).throttled is False  # at the threshold
    assert b(0.74 * 1980).throttled is True  # below it, with or without a reason
    assert b(1000, ["sw_power_cap"]).throttled is True
    # The clock rule wins over a hard reason when the clock is known and high.
    assert b(1900, ["hw_thermal_slowdown"]).throttled is False
    assert b(1900, ["hw_thermal_slowdown"]).reasons == ("hw_thermal_slowdown",)  # still reported


def test_normalise_by_hand():
    assert clocks.normalise(1.0, 1485, 1980) == pytest.approx(0.75)
    assert clocks.normalise(1.0, None, 1980) is None
    assert clocks.normalise(1.0, 1500, None) is None
    with pytest.raises(ValueError):
        clocks.normalise(1.0, 0, 1980)


# --------------------------------------------------------------------- the monitor on a fake NVML


def test_monitor_reads_everything_through_nvml():
    nv = FakeNVML(sm=1755, reasons=0x4)
    mon = clocks.open_monitor(0, nvml=nv, props=PROPS)
    assert mon.available and mon.max_sm_clock_mhz == 1980 and mon.name == "NVIDIA H200"
    r = mon.read()
    assert (r.sm_clock_mhz, r.mem_clock_mhz, r.temperature_c) == (1755, 2619, 45)
    assert r.power_w == pytest.approx(350.0)  # NVML reports mW
    assert r.reasons == ("sw_power_cap",) and r.throttled is False
    mon.close()
    mon.close()
    assert nv.inits == 1 and nv.shutdowns == 1


def test_an_unsupported_query_is_unknown_not_an_error():
    nv = FakeNVML(fail={"power", "reasons", "max"})
    mon = clocks.open_monitor(0, nvml=nv, props=PROPS)
    r = mon.read()
    assert r.power_w is None and r.reasons is None and r.throttled is None
    assert r.sm_clock_mhz == 1980 and mon.max_sm_clock_mhz is None


def test_older_pynvml_reason_name_still_decodes():
    mon = clocks.open_monitor(0, nvml=FakeNVML(reasons=0x20, legacy_reasons=True), props=PROPS)
    assert mon.read().reasons == ("sw_thermal_slowdown",)


def test_device_mapping_prefers_uuid_then_pci(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert clocks.open_monitor(0, nvml=FakeNVML(), props=PROPS).available  # UUID ("GPU-" prefixed)
    pci_only = SimpleNamespace(uuid="nope", pci_bus_id=0x18, pci_domain_id=0, pci_device_id=0)
    assert clocks.open_monitor(0, nvml=FakeNVML(), props=pci_only).available
    nv = FakeNVML(fail={"pci"})
    mon = clocks.open_monitor(0, nvml=nv, props=pci_only)
    assert not mon.available and "cannot map CUDA device 0" in mon.reason
    assert nv.shutdowns == 1  # NVML released on the failure path


# --------------------------------------------------------------------- NVML missing


def test_nvml_library_missing_is_recorded_as_unknown():
    mon = clocks.open_monitor(0, nvml=FakeNVML(fail={"init"}), props=PROPS)
    assert isinstance(mon, clocks.NullMonitor)
    assert "NVML unavailable" in mon.reason and "Not Found" in mon.reason
    assert mon.read() is None and mon.max_sm_clock_mhz is None


def test_pynvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    mon = clocks.open_monitor(0, props=PROPS)
    assert not mon.available and "not installed" in mon.reason


def test_no_cuda_here_gives_a_null_monitor():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this check is for machines without CUDA")
    mon = clocks.open_monitor()
    assert not mon.available and "no CUDA device" in mon.reason


def test_summary_without_nvml_is_unknown_with_reason():
    s = clocks.summarize([clocks.BatchClocks(n_samples=3)], [1.0, 1.0, 1.0], clocks.NullMonitor("no NVML here"))
    assert s["clocks"] == {"available": False, "reason": "no NVML here", "excluded_samples": 0}
    assert s["throttled"] is None and s["p50_clock_normalised_s"] is None and s["p50_unthrottled_s"] is None


# --------------------------------------------------------------------- per-sample flags and normalisation


def reading(sm, reasons=(), t=0.0):
    return clocks.ClockReading(
        t_s=t, sm_clock_mhz=sm, mem_clock_mhz=2619, temperature_c=50, power_w=400.0, reasons=tuple(reasons)
    )


def test_summarize_flags_and_normalises_per_batch():
    mon = SimpleNamespace(available=True, max_sm_clock_mhz=2000, max_mem_clock_mhz=2619, index=0, name="x")
    batches = [
        clocks.BatchClocks(2, [reading(2000), reading(2000)]),
        clocks.BatchClocks(2, [reading(1000, ["sw_power_cap"]), reading(1000)]),
        clocks.BatchClocks(1, [reading(1500, ["gpu_idle"])]),
    ]
    samples = [1.0, 1.0, 2.0, 2.0, 1.2]
    s = clocks.summarize(batches, samples, mon)
    assert s["throttled"] == [False, False, True, True, False]
    # normalised: 1.0, 1.0, 2.0*0.5, 2.0*0.5, 1.2*0.75 -> median 1.0
    assert s["p50_clock_normalised_s"] == pytest.approx(1.0)
    assert s["p50_unthrottled_s"] == pytest.approx(1.0)  # median of 1.0, 1.0, 1.2
    c = s["clocks"]
    assert c["throttled_samples"] == 2 and c["throttle_reasons"] == ["sw_power_cap"]
    assert c["sm_clock_mhz"] == {"min": 1000, "p50": 1500, "max": 2000} and c["readings"] == 5
    with pytest.raises(ValueError):
        clocks.summarize(batches, samples[:-1], mon)


class ScriptedMonitor:
    """A monitor whose readings alternate: one batch clean, the next power-capped."""

    available = True
    reason = None
    max_sm_clock_mhz = 2000
    max_mem_clock_mhz = 2619
    index = 0
    name = "scripted"

    def __init__(self):
        self.batch = 0
        self.calls = 0

    def read(self):
        self.calls += 1
        throttled = (self.batch % 2) == 1
        # 1400 of 2000 MHz: below NVBench's 75% (1600 would not be, reason or not).
        r = reading(1400 if throttled else 2000, ["sw_power_cap"] if throttled else [])
        if self.calls % 2 == 0:  # time_cpu reads once "during" and once after: two reads per batch
            self.batch += 1
        return r


class FakeNs:
    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


def _timed(exclude: bool):
    clk = FakeNs()

    def fn():
        clk.ns += 200_000

    config = timing.TimingConfig(
        method="cpu", min_samples=20, min_time_s=0.0, max_time_s=1.0, warmup_s=0.001, batch=5, exclude_throttled=exclude
    )
    mon = ScriptedMonitor()
    return timing.time_cpu(fn, config, clock_ns=clk, monitor=mon), mon


def test_throttled_samples_are_flagged_in_the_result():
    r, mon = _timed(exclude=False)
    assert r.clocks["available"] and r.clocks["excluded_samples"] == 0
    assert len(r.throttled) == len(r.samples_s)
    assert any(r.throttled) and not all(r.throttled)
    assert r.clocks["throttled_samples"] == sum(r.throttled)
    assert r.clocks["throttle_reasons"] == ["sw_power_cap"]
    assert r.p50_unthrottled_s == pytest.approx(200e-6)
    assert r.p50_clock_normalised_s is not None and r.p50_clock_normalised_s <= r.p50_s


def test_throttled_samples_can_be_excluded():
    r, _ = _timed(exclude=True)
    assert r.clocks["excluded_samples"] > 0
    assert r.throttled == [False] * len(r.samples_s)
    assert len(r.samples_s) >= 20  # the minimum counts kept samples only
    assert r.config["exclude_throttled"] is True
    assert "samples excluded as throttled" in r.stop_reason


# --------------------------------------------------------------------- CPU contention (schedstat)


def test_parse_schedstat():
    assert clocks.parse_schedstat("123 456 7\n") == (123, 456)
    for bad in ("", "12", "a b c", "-1 2 3"):
        with pytest.raises(ValueError):
            clocks.parse_schedstat(bad)


def test_cpu_monitor_missing_is_unknown(tmp_path):
    mon = clocks.open_cpu_monitor(str(tmp_path / "nope"))
    assert not mon.available and "CPU contention unknown" in mon.reason


def test_cpu_monitor_reads_a_schedstat_file(tmp_path):
    f = tmp_path / "schedstat"
    f.write_text("2000000000 500000000 10\n")
    mon = clocks.open_cpu_monitor(str(f))
    r = mon.read()
    assert mon.available and r.sched_run_s == pytest.approx(2.0) and r.sched_wait_s == pytest.approx(0.5)
    f.write_text("garbage")
    assert mon.read().sched_wait_s is None  # a bad read is unknown, not an error


def sched(t, wait):
    return clocks.ClockReading(t_s=t, sched_run_s=t, sched_wait_s=wait)


def test_contended_batch_is_flagged_by_run_queue_wait():
    quiet = clocks.BatchClocks(3, [sched(10.0, 1.0), sched(11.0, 1.01)])  # waited 1% of 1 s
    busy = clocks.BatchClocks(3, [sched(20.0, 2.0), sched(21.0, 2.6)])  # waited 60%
    assert quiet.cpu_wait_frac == pytest.approx(0.01) and quiet.throttled is False and quiet.reasons == ()
    assert busy.cpu_wait_frac == pytest.approx(0.6) and busy.throttled is True
    assert busy.reasons == ("cpu_contention",)
    assert clocks.BatchClocks(1, [sched(1.0, 0.0)]).throttled is None  # one reading: no interval
    mon = clocks.open_cpu_monitor()
    if mon.available:
        s = clocks.summarize([quiet, busy], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0], mon)
        assert s["throttled"] == [False] * 3 + [True] * 3 and s["p50_unthrottled_s"] == 1.0
        assert s["clocks"]["throttle_reasons"] == ["cpu_contention"]
        assert s["clocks"]["cpu_wait_frac"]["max"] == pytest.approx(0.6)
        assert s["p50_clock_normalised_s"] is None  # no clocks on a CPU


def test_time_cpu_records_contention_on_linux():
    mon = clocks.open_cpu_monitor()
    if not mon.available:
        pytest.skip(mon.reason)
    r = timing.time_cpu(lambda: sum(range(200)), timing.TimingConfig(method="cpu", max_time_s=0.05, warmup_s=0.001))
    assert r.clocks["available"] and r.clocks["cpu_wait_frac"] is not None
    assert r.throttled is not None and len(r.throttled) == len(r.samples_s)
    assert r.clocks["throttled_samples"] == sum(r.throttled)


def test_the_batch_bookkeeping_old_names_in_clocks_still_resolve():
    """BatchClocks, normalise and summarize moved to harness.measure.clock_batches;
    harness.measure.clocks still answers those names (lazily), and only those."""
    from harness.measure import clock_batches
    from harness.measure.clocks import BatchClocks

    assert BatchClocks is clock_batches.BatchClocks
    assert clocks.summarize is clock_batches.summarize and clocks.normalise is clock_batches.normalise
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = clocks.no_such_name
