"""Every Triton kernel of the ten op families, and every autotune config,
compiled ahead of time for sm_80 and sm_90 (no GPU; ``scripts/triton_aot.py``),
each checked against the target's opt-in shared memory; and the autotune prune
that keeps configs which do not fit off the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernels
from kernels._autotune import SHARED_MEM_OPTIN_BYTES, fit_shared_memory

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "triton_aot.py"


def _backend_missing() -> str | None:
    try:
        from triton.backends import backends

        return None if "nvidia" in backends else "triton has no NVIDIA backend installed"
    except Exception as exc:
        return f"triton backend unavailable: {type(exc).__name__}: {exc}"


class Cfg:
    """The two fields of a ``triton.Config`` the estimate reads."""

    def __init__(self, m, n, k, stages):
        self.kwargs = {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k}
        self.num_stages = stages


def test_opt_in_shared_memory_table_is_the_programming_guides():
    # CUDA C Programming Guide, "Technical Specifications per Compute Capability",
    # maximum shared memory per thread block (opt-in), KB of 1024 bytes. A key
    # typed twice in the dict literal silently drops one capability.
    documented_kb = {
        (8, 0): 163,
        (8, 6): 99,
        (8, 7): 163,
        (8, 9): 99,
        (9, 0): 227,
        (10, 0): 227,
        (10, 3): 227,
        (12, 0): 99,
    }
    assert {cc: b / 1024 for cc, b in SHARED_MEM_OPTIN_BYTES.items()} == documented_kb


def test_estimate_matches_the_issue_figures_and_the_prune_drops_them():
    from kernels.matmul import shared_mem_estimate

    h100, a100 = SHARED_MEM_OPTIN_BYTES[(9, 0)], SHARED_MEM_OPTIN_BYTES[(8, 0)]
    assert (h100, a100) == (232_448, 166_912)
    # Issue 18's figures for sm_90 (compiled metadata.shared, Triton 3.9).
    assert shared_mem_estimate(Cfg(128, 256, 64, 4), 4, (9, 0), tf32=False) == 294_912
    assert shared_mem_estimate(Cfg(128, 256, 64, 3), 4, (9, 0), tf32=True) == 294_912
    assert shared_mem_estimate(Cfg(128, 256, 64, 4), 4, (9, 0), tf32=True) == 393_216
    assert shared_mem_estimate(Cfg(256, 128, 64, 3), 4, (9, 0), tf32=True) == 294_912
    assert shared_mem_estimate(Cfg(128, 128, 64, 4), 4, (9, 0), tf32=True) == 262_144
    fits, over = Cfg(128, 128, 32, 4), Cfg(128, 256, 64, 4)
    est = lambda c: shared_mem_estimate(c, 4, (9, 0), tf32=True)  # noqa: E731
    assert fit_shared_memory([fits, over], est, h100) == [fits]
    assert fit_shared_memory([fits, over], est, None) == [fits, over]  # limit unknown: keep all
    assert fit_shared_memory([over], est, 1000) == [over]  # nothing fits: the smallest stays


@pytest.mark.slow  # two Triton compiles of every kernel and config: minutes on 2 cores
@pytest.mark.skipif(_backend_missing() is not None, reason=str(_backend_missing()))
def test_every_triton_kernel_and_config_compiles_and_fits(tmp_path):
    procs = {}
    for arch in (80, 90):  # one process per target, in parallel (2 CI cores)
        env = dict(
            os.environ,
            TRITON_INTERPRET="0",
            TRITON_CACHE_DIR=str(tmp_path / f"cache{arch}"),
            TRITON_DEFAULT_FP_FUSION="1",
        )
        out = tmp_path / f"sm{arch}.json"
        procs[arch] = (
            out,
            subprocess.Popen(
                [sys.executable, str(SCRIPT), "--arch", str(arch), "--json", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            ),
        )
    rows = []
    for _arch, (out, p) in procs.items():
        log, _ = p.communicate(timeout=600)
        assert p.returncode == 0, log[-6000:]
        rows += json.loads(out.read_text())
    families = {r["family"] for r in rows}
    assert families == set(kernels.all_ops()), families ^ set(kernels.all_ops())
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]
    for r in rows:
        if r["kept"]:
            assert r["shared"] is not None and r["shared"] <= r["limit"]
    # The five matmul configs over Hopper's 227 KiB are pruned there, and only those.
    pruned90 = sorted(
        (r["dtype"], *(r["config"][k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_stages")))
        for r in rows
        if r["arch"] == "sm_90" and not r["kept"]
    )
    assert pruned90 == [
        ("fp32", 128, 256, 64, 4),
        ("tf32", 128, 128, 64, 4),
        ("tf32", 128, 256, 64, 3),
        ("tf32", 128, 256, 64, 4),
        ("tf32", 256, 128, 64, 3),
    ]
    assert all(r["shared"] > r["limit"] for r in rows if not r["kept"])  # no config pruned that would fit
    # Every config of each autotuned kernel was compiled on both targets.
    from kernels import attention, matmul

    for fam, kern in (("matmul", matmul._matmul_kernel), ("attention", attention._attn_fwd_kernel)):
        for arch in ("sm_80", "sm_90"):
            n = {json.dumps(r["config"], sort_keys=True) for r in rows if r["family"] == fam and r["arch"] == arch}
            assert len(n) >= len(kern.configs)


def test_matmul_early_prune_reads_the_device(monkeypatch):
    """The autotuner's early_config_prune: on an H200-like device (sm_90, 227 KiB)
    tf32 drops the over-limit tiles; on a CPU tensor it keeps everything."""
    from types import SimpleNamespace

    import torch
    import triton

    from kernels import matmul

    monkeypatch.setattr(matmul, "device_shared_mem_bytes", lambda device=None: 232_448)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    tiles = [(128, 256, 64, 3), (128, 128, 32, 4), (128, 128, 64, 4), (64, 32, 32, 5)]
    cfgs = [
        triton.Config(
            {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_warps=4, num_stages=s
        )
        for m, n, k, s in tiles
    ]
    a = SimpleNamespace(is_cuda=True, device="cuda:0", element_size=lambda: 4)
    kept = matmul._prune_configs(cfgs, {"a_ptr": a}, ALLOW_TF32=True)
    assert [(c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_K"], c.num_stages) for c in kept] == [
        (128, 32, 4),
        (64, 32, 5),
    ]
    # IEEE fp32 keeps num_stages - 1 buffers: every one of these fits an sm_90 block ...
    assert len(matmul._prune_configs(cfgs, {"a_ptr": a}, ALLOW_TF32=False)) == 4
    # ... but not an A100's 163 KiB: the two 64-deep tiles (192 KiB each) go.
    monkeypatch.setattr(matmul, "device_shared_mem_bytes", lambda device=None: 166_912)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    kept = matmul._prune_configs(cfgs, {"a_ptr": a}, ALLOW_TF32=False)
    assert [c.kwargs["BLOCK_SIZE_K"] for c in kept] == [32, 32]
    cpu = SimpleNamespace(is_cuda=False, element_size=lambda: 4)
    assert matmul._prune_configs(cfgs, {"a_ptr": cpu}, ALLOW_TF32=True) == cfgs
