"""What each op family declares, pinned: the benchmark grid, the test shapes, the
edge values and the negative controls' documented errors (issue 30).

The benchmark shapes and dtypes are the parameters of every asv series: a shape
edited by mistake silently starts new series in every history and ends the old
ones as ``missing``. The test shapes are the odd sizes the correctness tests rely
on; shrinking them weakens every kernel test at once. Both are compared with
``tests/data/kernel_declarations.json``; a deliberate change regenerates it::

    python tests/test_kernel_declarations.py --write
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import kernels
from kernels.control import CONTROL_OPS

SNAPSHOT = Path(__file__).resolve().parent / "data" / "kernel_declarations.json"


def _declarations() -> dict:
    ops = {**kernels.all_ops(), **CONTROL_OPS}
    return {
        name: {
            "dtypes": list(op.dtypes),
            "bench_shapes": {k: [list(s) for s in v] for k, v in op.bench_shapes.items()},
            "bench_dtypes": {k: list(v) for k, v in op.bench_dtypes.items()},
            "test_shapes": [list(s) for s in op.test_shapes],
        }
        for name, op in ops.items()
    }


def test_the_snapshot_records_every_op_family():
    assert sorted(_declarations()) == sorted(json.loads(SNAPSHOT.read_text())), (
        "op families added or removed: regenerate the snapshot"
    )


# One test per op, so the op's name is in the test id: the mutation plan runs a
# kernel module's tests under ``-k OP`` (scripts/mutation_sample.py), and one test
# for all ops was deselected there (a "quick" shape edit survived).
@pytest.mark.parametrize("name", sorted(_declarations()))
def test_op_declares_the_recorded_benchmark_grid_and_test_shapes(name):
    recorded = json.loads(SNAPSHOT.read_text()).get(name)
    now = _declarations()[name]
    assert now == recorded, (
        f"{name}: benchmark grid or test shapes changed (new asv series, or weaker tests); "
        f"if deliberate, run `python {Path(__file__).name} --write`: recorded {recorded}, now {now}"
    )


def test_histogram_edge_values_cover_each_documented_edge():
    from kernels.histogram import SPECIAL_VALUES

    v = np.array(SPECIAL_VALUES, dtype=np.float64)
    assert any(x == 0.0 and math.copysign(1.0, x) < 0 for x in SPECIAL_VALUES), "-0.0"
    assert any(x == 0.0 and math.copysign(1.0, x) > 0 for x in SPECIAL_VALUES), "+0.0"
    assert np.isnan(v).any() and np.isposinf(v).any() and np.isneginf(v).any()
    assert float(np.nextafter(np.float32(1), np.float32(0))) in SPECIAL_VALUES  # last bin
    assert float(np.float32(1e-45)) in SPECIAL_VALUES  # smallest subnormal: bin 0
    assert 1.0 in SPECIAL_VALUES  # the upper edge


@pytest.mark.parametrize("N", [19, 1823])
def test_layernorm_negative_control_is_off_by_exactly_the_variance_correction(N):
    """``layernorm.WRONG`` divides by N - 1: its centred, scaled output is the right
    one times sqrt((N - 1) / N), about 1/(2N) off. A control wrong by far more
    than documented no longer tests that the tolerance is tight."""
    from kernels import layernorm

    x, w, b = layernorm.OP.make_inputs((5, N), "fp32", "cpu")
    x, w, b = x.double(), w.double(), b.double()
    # EPS is negligible beside the unit-scale variance of these inputs.
    got = (layernorm.WRONG(x, w, b).double() - b) / w
    want = (layernorm.OP.reference(x, w, b).double() - b) / w
    torch.testing.assert_close(got, want * math.sqrt((N - 1) / N), rtol=1e-4, atol=1e-5)


def test_matmul_shared_memory_estimate_on_ampere_keeps_one_buffer_fewer():
    from kernels.matmul import shared_mem_estimate

    class Cfg:
        kwargs = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32}
        num_stages = 4

    tiles = (128 + 64) * 32
    assert shared_mem_estimate(Cfg, 2, (8, 0)) == 3 * tiles * 2  # mma.sync: stages - 1
    assert shared_mem_estimate(Cfg, 4, (8, 6), tf32=True) == 3 * tiles * 4
    assert shared_mem_estimate(Cfg, 2, (9, 0)) == 4 * tiles * 2  # wgmma: stages
    assert shared_mem_estimate(Cfg, 2, (10, 0)) == 4 * tiles * 2
    assert shared_mem_estimate(Cfg, 4, (9, 0), tf32=False) == 3 * tiles * 4  # IEEE fp32: no wgmma


def test_attention_prune_never_returns_no_config():
    import triton

    from kernels.attention import TUNE_MIN_S, _prune_configs

    big = [triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": n}, num_warps=4, num_stages=3) for n in (64, 128)]
    assert _prune_configs(big, {"S": 4096}, DOT_PRECISION="ieee") == big[:1]
    assert _prune_configs(big, {"S": TUNE_MIN_S - 1}) == big[:1]
    assert _prune_configs(big, {"S": TUNE_MIN_S}) == big


@pytest.mark.parametrize("M, K, N", [(16, 32, 48), (1, 1, 1), (17, 33, 19), (33, 16, 15)])
def test_matmul_fp8_padding_gives_multiples_of_16_and_the_same_product(M, K, N):
    """The fp8 GEMM runs only on a GPU; its padding is plain torch and runs here."""
    from kernels.matmul import pad_for_fp8

    g = torch.Generator().manual_seed(M * K * N)
    a, b = torch.randn((M, K), generator=g), torch.randn((K, N), generator=g)
    a_p, b_p = pad_for_fp8(a, b)
    assert all(d % 16 == 0 for d in (*a_p.shape, *b_p.shape))
    assert a_p.shape[1] == b_p.shape[0] and a_p.shape[0] - M < 16 and b_p.shape[1] - N < 16
    assert a_p.shape[1] - K < 16
    if (M, K, N) != (16, 32, 48):
        assert b_p.stride() == (1, b_p.shape[0])  # column-major, as cuBLASLt wants
    torch.testing.assert_close((a_p @ b_p)[:M, :N], a @ b, rtol=1e-5, atol=1e-5)
    assert not (a_p @ b_p)[M:].any() and not (a_p @ b_p)[:, N:].any()


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(json.dumps(_declarations(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")


@pytest.mark.parametrize("shape", [(19, 33, 47), (256, 256, 256), (1, 7, 3)])
def test_control_matmul_cost_is_2mnk_flops_and_each_matrix_once(shape):
    """The control matmul's cost is the textbook one: 2*m*n*k flops, a (m x k)
    and b (k x n) read once, the m x n result written once, in fp32's 4 bytes
    (mutations: ``2 * m * n / k``, ``m * n & s``)."""
    m, n, k = shape
    cost = CONTROL_OPS["control_matmul"].cost(shape, "fp32")
    assert cost.flops == 2 * m * n * k
    assert cost.bytes_read == (m * k + k * n) * 4
    assert cost.bytes_written == m * n * 4


def test_matmul_autotune_configs_are_launchable_on_a_gpu(monkeypatch):
    """Every compiled (non-interpreted) matmul config is one Triton can launch:
    num_warps a power of two from 1 to 16, num_stages at least 1, block sizes
    powers of two of at least 16 (tl.dot's minimum) (mutation: a config's
    ``num_warps`` 8 as 7)."""
    from kernels import _backends, matmul

    monkeypatch.setattr(_backends, "triton_interpreted", lambda: False)
    configs = matmul._configs()
    assert len(configs) > 1, "the compiled path has more than the interpreter's one tile"
    for c in configs:
        assert c.num_warps in (1, 2, 4, 8, 16), c
        assert c.num_stages >= 1, c
        for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
            v = c.kwargs[key]
            assert v >= 16 and v & (v - 1) == 0, (key, c)
