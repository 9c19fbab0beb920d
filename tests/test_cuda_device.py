"""On a CUDA machine: the real ``time_cuda`` in every CUDA mode, NVML, and the
self-check, end to end. Without CUDA every test here skips with that reason
(the same logic is tested on the simulated CUDA in ``tests/test_timing.py``
and ``tests/test_selfcheck.py``)."""

from __future__ import annotations

import pytest
import torch

from kernels import _backends

pytestmark = pytest.mark.skipif(not _backends.cuda_available(), reason="no CUDA device visible to PyTorch")


@pytest.mark.parametrize("method", ["cold", "hot", "graph"])
def test_time_cuda_on_the_device(method):
    from harness.core import devices
    from harness.measure import clocks, timing

    n = 1 << 24
    src = torch.ones(n, device="cuda")
    dst = torch.empty_like(src)
    ident = devices.identify("cuda")
    cfg = timing.quick(timing.TimingConfig(method=method, max_time_s=0.2))
    with clocks.open_monitor() as monitor:
        r = timing.time_cuda(
            lambda: dst.copy_(src), cfg, l2_bytes=ident.l2_bytes, rotated=[lambda: dst.copy_(src)], monitor=monitor
        )
    assert r.method == method and len(r.samples_s) >= cfg.min_samples
    assert all(s > 0 for s in r.samples_s)
    # 128 MiB moved per copy: physically under the fastest HBM (8 TB/s) never.
    assert 2 * 4 * n / r.p50_s < 8e12
    assert torch.equal(dst, src)
    if method == "cold":
        assert r.flush_bytes and r.extra["flush"].startswith("read")


def test_nvml_monitor_reads_clocks_or_says_why():
    from harness.measure import clocks

    with clocks.open_monitor() as m:
        reading = m.read()
        if getattr(m, "available", False):
            assert reading is not None and reading.sm_clock_mhz and reading.sm_clock_mhz > 0
        else:
            assert m.reason


def test_selfcheck_quick_on_the_device():
    from harness.measure import selfcheck

    report = selfcheck.run(quick=True)
    assert report["status"] in ("pass", "fail", "undecided") and report["checks"]
    assert report["exit_code"] in (0, 1, 2)
    names = {c["name"] for c in report["checks"]}
    assert {"timer_agreement", "integrity_guard"} <= names
