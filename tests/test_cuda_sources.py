"""Compile every CuPy CUDA C source to PTX for sm_80 and sm_90 with nvcc, so a
syntax or type error is caught on machines without a GPU."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import kernels
from kernels._cupy import SOURCES

kernels.all_ops()  # registers every source

NVCC = shutil.which("nvcc")


def test_sources_registered():
    ops_with_cupy = {name for name, op in kernels.all_ops().items() if any(p.backend == "cupy" for p in op.providers.values())}
    assert ops_with_cupy <= {op for op, _ in SOURCES}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("key", sorted(SOURCES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_source_compiles_to_ptx(tmp_path, key, arch):
    src = SOURCES[key]
    cu = tmp_path / "k.cu"
    cu.write_text(src.code)
    out = tmp_path / "k.ptx"
    proc = subprocess.run([NVCC, "-ptx", f"-arch={arch}", "-std=c++17", str(cu), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = out.read_text()
    for name in src.names:
        assert f".entry {name}" in ptx, f"entry point {name} missing from PTX"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
def test_broken_source_is_caught(tmp_path):
    cu = tmp_path / "bad.cu"
    cu.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_symbol; }')
    proc = subprocess.run([NVCC, "-ptx", "-arch=sm_80", str(cu), "-o", str(tmp_path / "bad.ptx")], capture_output=True, text=True)
    assert proc.returncode != 0
