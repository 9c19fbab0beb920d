"""Out-of-bounds reads by the Triton kernels: every input placed so that it ends
just before an inaccessible page (``kernels._check.guarded_copy``), so a kernel
whose load mask is missing or off by one dies with SIGSEGV instead of reading
garbage that its masked store would then discard (an output comparison alone
cannot see that bug). Runs in a subprocess, since the failure is the process dying."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels import _backends

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="guard pages need mprotect (Linux)"),
    pytest.mark.skipif(not _backends.triton_interpreted(), reason="the interpreter dereferences raw host addresses"),
]

CHILD = textwrap.dedent("""
    import sys
    import torch
    import kernels
    from kernels._check import guarded_copy

    for name, op in kernels.all_ops().items():
        for prov_name, prov in op.providers.items():
            if prov.backend != "triton":
                continue
            for dtype in ("fp32", "bf16"):
                if not prov.supports(dtype) or dtype not in op.dtypes:
                    continue
                for shape in op.test_shapes:
                    # The interpreter's GEMM at matmul's largest shape costs seconds;
                    # its smaller odd shapes exercise the same masks.
                    if op.cost(shape, dtype).flops > 2e6 and shape != op.test_shapes[0]:
                        continue
                    print("RUN", name, prov_name, dtype, shape, flush=True)
                    inputs = tuple(guarded_copy(t) if isinstance(t, torch.Tensor) else t
                                   for t in op.make_inputs(shape, dtype, "cpu"))
                    prov.fn(*inputs)
    print("ALL OK", flush=True)
""")


def _child(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)


def test_no_triton_kernel_reads_past_its_inputs():
    proc = _child(CHILD)
    last = [line for line in proc.stdout.splitlines() if line.startswith("RUN")][-1:]
    assert proc.returncode == 0 and "ALL OK" in proc.stdout, (
        f"exit {proc.returncode} while running {last}: an out-of-bounds read (missing/off-by-one load mask) "
        f"if the exit is -{int(signal.SIGSEGV)}\n{proc.stderr[-2000:]}"
    )


NO_MASK = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl
    from kernels._check import guarded_copy

    @triton.jit
    def add_without_load_mask(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        out = tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets)  # BUG: unmasked loads
        tl.store(out_ptr + offsets, out, mask=mask)

    x, y = guarded_copy(torch.randn(1823)), guarded_copy(torch.randn(1823))
    out = torch.empty(1823)
    add_without_load_mask[(2,)](x, y, out, 1823, BLOCK_SIZE=1024)
    # Unguarded, the same kernel's output would be right (the store is masked):
    print("SURVIVED", torch.equal(out, x + y), flush=True)
""")


def test_a_kernel_without_load_masks_is_caught():
    proc = _child(NO_MASK)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr[-1000:])
    assert "SURVIVED" not in proc.stdout


@pytest.mark.parametrize("numel", [1, 1023, 1024, 1025, 3 * 1024 + 7])
def test_guarded_copy_maps_only_the_pages_it_needs(numel):
    """The copy ends exactly at the guard page, and the mapping is the tensor's
    pages plus that one: a page count computed wrong (bytes taken as pages) still
    places the tensor before the guard, so only the mapping's size tells."""
    import mmap

    import torch

    from kernels import _check

    t = torch.arange(numel, dtype=torch.float32)
    out = _check.guarded_copy(t)
    assert torch.equal(out, t)
    mm = _check._GUARDED[-1]
    page = mmap.PAGESIZE
    nbytes = numel * 4
    assert len(mm) == (max(1, -(-nbytes // page)) + 1) * page
    assert out.data_ptr() + nbytes == ctypes.addressof(ctypes.c_char.from_buffer(mm)) + len(mm) - page
