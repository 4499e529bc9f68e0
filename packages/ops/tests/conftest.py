"""Tests of torch-npu-ops: every op compared against the CPU."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401


@pytest.fixture(autouse=True)
def drained_device():
    yield
    torch.npu.synchronize()
