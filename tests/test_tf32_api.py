"""The TF32 switch uses PyTorch's current API: after anything set
``fp32_precision``, reading the legacy ``allow_tf32`` raises on torch >= 2.9."""

from __future__ import annotations

import pytest
import torch

from kernels.matmul import tf32_mode


@pytest.fixture
def restore_precision():
    m = torch.backends.cuda.matmul
    old = getattr(m, "fp32_precision", None)
    yield
    if old is not None:
        m.fp32_precision = old


def test_tf32_mode_sets_and_restores_after_the_new_api_was_used(restore_precision):
    m = torch.backends.cuda.matmul
    if not hasattr(m, "fp32_precision"):
        pytest.skip(f"torch {torch.__version__} has no fp32_precision")
    m.fp32_precision = "tf32"  # what any library (or a user) may have done first
    with pytest.raises(RuntimeError):
        _ = m.allow_tf32  # the legacy read the old switch did first: it raises now
    with tf32_mode(False):
        assert m.fp32_precision == "ieee"
        with tf32_mode(True):
            assert m.fp32_precision == "tf32"
        assert m.fp32_precision == "ieee"
    assert m.fp32_precision == "tf32"
