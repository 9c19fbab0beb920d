"""Compile every CuPy CUDA C source for sm_80 and sm_90 without a GPU.

Two compilers, because they disagree: ``nvcc -ptx`` catches syntax and type
errors, and NVRTC, which CuPy's ``RawModule`` uses on the GPU, is stricter
about the host environment (no ``<math.h>`` macros such as ``INFINITY``, no
system include path: ``cuda_fp16.h`` resolves only through the ``-I`` that
:func:`kernels._cupy.compile_options` adds). NVRTC comes from the
``nvidia-cuda-nvrtc`` wheel (13.0, the version cupy-cuda13x loads), or from
``$KERNELWATCH_NVRTC`` (a path to ``libnvrtc.so``); without either the NVRTC
tests skip with that reason."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import kernels
from kernels import _cupy
from kernels._cupy import SOURCES

kernels.all_ops()  # registers every source

NVCC = shutil.which("nvcc")
ARCHS = ["sm_80", "sm_90"]


def test_sources_registered():
    ops_with_cupy = {
        name for name, op in kernels.all_ops().items() if any(p.backend == "cupy" for p in op.providers.values())
    }
    assert ops_with_cupy <= {op for op, _ in SOURCES}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("key", sorted(SOURCES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_source_compiles_to_ptx(tmp_path, key, arch):
    src = SOURCES[key]
    cu = tmp_path / "k.cu"
    cu.write_text(src.code)
    out = tmp_path / "k.ptx"
    proc = subprocess.run(
        [NVCC, "-ptx", f"-arch={arch}", "-std=c++17", str(cu), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = out.read_text()
    for name in src.names:
        assert f".entry {name}" in ptx, f"entry point {name} missing from PTX"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed on this machine")
def test_broken_source_is_caught(tmp_path):
    cu = tmp_path / "bad.cu"
    cu.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_symbol; }')
    proc = subprocess.run(
        [NVCC, "-ptx", "-arch=sm_80", str(cu), "-o", str(tmp_path / "bad.ptx")], capture_output=True, text=True
    )
    assert proc.returncode != 0


# --------------------------------------------------------------------- NVRTC


def _nvrtc_paths() -> tuple[str | None, str | None]:
    """(libnvrtc, libnvrtc-builtins or None) from $KERNELWATCH_NVRTC or the wheel."""
    explicit = os.environ.get("KERNELWATCH_NVRTC")
    if explicit:
        builtins = sorted(glob.glob(str(Path(explicit).parent / "libnvrtc-builtins.so.*")))
        return explicit, (builtins[0] if builtins else None)
    spec = importlib.util.find_spec("nvidia")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        for lib in ("cu13/lib", "cuda_nvrtc/lib"):
            d = Path(loc) / lib
            main = sorted(glob.glob(str(d / "libnvrtc.so.*")))
            builtins = [b for b in sorted(glob.glob(str(d / "libnvrtc-builtins.so.*"))) if ".alt." not in b]
            if main:
                return [m for m in main if ".alt." not in m][0], (builtins[0] if builtins else None)
    return None, None


class Nvrtc:
    """The few NVRTC calls a compile needs, through ctypes (NVRTC's C API, ``nvrtc.h``)."""

    def __init__(self, path: str, builtins: str | None):
        if builtins:  # libnvrtc loads its builtins by soname; preload them globally
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)

    def compile(self, code: str, options: list[str]) -> tuple[int, str, str]:
        """(result code, log, PTX); result 0 is NVRTC_SUCCESS."""
        lib = self.lib
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), b"kernel.cu", 0, None, None)
        if rc:
            return rc, f"nvrtcCreateProgram failed ({rc})", ""
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = lib.nvrtcCompileProgram(prog, len(options), opts)
            n = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetProgramLog(prog, log)
            ptx = ""
            if rc == 0:
                lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
                buf = ctypes.create_string_buffer(n.value)
                lib.nvrtcGetPTX(prog, buf)
                ptx = buf.value.decode()
            return rc, log.value.decode(errors="replace"), ptx
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_PATH, _BUILTINS = _nvrtc_paths()


@pytest.fixture(scope="module")
def nvrtc():
    if _PATH is None:
        pytest.skip("NVRTC not found: install the nvidia-cuda-nvrtc wheel (test extra) or set KERNELWATCH_NVRTC")
    try:
        return Nvrtc(_PATH, _BUILTINS)
    except OSError as exc:
        pytest.skip(f"cannot load NVRTC from {_PATH}: {exc}")


def _options(arch: str) -> list[str]:
    return [f"-arch=compute_{arch[3:]}", *_cupy.compile_options()]


def test_include_dir_holds_the_fp16_and_bf16_headers():
    dirs = _cupy.include_dirs()
    assert dirs, "no folder with cuda_fp16.h and cuda_bf16.h (CUDA_PATH, /usr/local/cuda, nvidia or triton wheels)"
    assert all((Path(dirs[0]) / h).is_file() for h in ("cuda_fp16.h", "cuda_bf16.h"))
    assert f"-I{dirs[0]}" in _cupy.compile_options()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("key", sorted(SOURCES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_source_compiles_with_nvrtc(nvrtc, key, arch):
    src = SOURCES[key]
    rc, log, ptx = nvrtc.compile(src.code, _options(arch))
    assert rc == 0, f"NVRTC {nvrtc.version} rejects {key} for {arch}:\n{log[-3000:]}"
    for name in src.names:
        assert f".entry {name}" in ptx, f"entry point {name} missing from NVRTC's PTX"


def test_nvrtc_rejects_host_macros_nvcc_accepts(nvrtc):
    # The softmax bug: -INFINITY compiles with nvcc but not with NVRTC.
    code = 'extern "C" __global__ void k(float* x) { x[0] = -INFINITY; }'
    rc, log, _ = nvrtc.compile(code, _options("sm_90"))
    assert rc != 0 and "INFINITY" in log


def test_nvrtc_needs_the_include_path(nvrtc):
    code = '#include <cuda_bf16.h>\nextern "C" __global__ void k(__nv_bfloat16* x) { x[0] = __float2bfloat16(1.0f); }'
    rc, log, _ = nvrtc.compile(code, ["-arch=compute_90", "-std=c++17"])
    assert rc != 0 and "cuda_bf16.h" in log
    rc, log, _ = nvrtc.compile(code, _options("sm_90"))
    assert rc == 0, log
