"""The saved statistics of a compiled batch norm on npu have the shapes and
dtypes eager npu gives them.

Note [Batch norm statistics as eager npu gives them]
``native_batch_norm`` returns, besides its output, the saved mean and
inverse standard deviation. Their shapes and dtypes depend on the device:
on CPU they are empty in eval mode and of the input's dtype in training;
on CUDA they are the running statistics (eval) or the batch's (training),
of the computation dtype (float32 for half inputs). PyTorch's
decomposition, which AOT autograd traces the compiled graph with, asks
``input.device.type == "cpu"`` and so gives npu the CUDA shapes. Eager npu
runs the CPU kernel (packages/ops BatchNormKernels.cpp), so its results
have the CPU shapes, which its OpInfo conformance against CPU requires: the
compiled eval-mode batch norm returned statistics of shape ``[C]`` where
eager returned ``[0]`` (and float32 statistics of float16 inputs in
training), silently. The decomposition's helper is therefore wrapped: for
npu inputs, its statistics are made what the CPU branch makes them. The
normalised output and the running statistics are not touched.
"""

from __future__ import annotations

from typing import Any

import torch

_installed = False


def _npu_statistics_as_cpu(helper: Any) -> Any:
    def native_batch_norm_helper(input: torch.Tensor, weight: Any, bias: Any, running_mean: Any,
                                 running_var: Any, training: bool, momentum: float, eps: float,
                                 functional: bool) -> Any:
        output, save_mean, save_rstd, new_running_mean, new_running_var = helper(
            input, weight, bias, running_mean, running_var, training, momentum, eps, functional)
        if input.device.type == "npu":
            if training:
                save_mean = save_mean.to(dtype=input.dtype)
                save_rstd = save_rstd.to(dtype=input.dtype)
            else:
                save_mean = input.new_zeros((0,))
                save_rstd = input.new_zeros((0,))
        return output, save_mean, save_rstd, new_running_mean, new_running_var

    native_batch_norm_helper.npu_wrapped = helper  # type: ignore[attr-defined]
    return native_batch_norm_helper


def install() -> None:
    """Wrap PyTorch's batch norm decomposition helper (Note [Batch norm
    statistics as eager npu gives them]); idempotent."""
    global _installed
    if _installed:
        return
    from torch._decomp import decompositions

    # The decompositions call the helper through the module's globals, so
    # replacing it there reaches every batch norm variant
    # (native_batch_norm, _native_batch_norm_legit[_no_training],
    # _batch_norm_with_update).
    decompositions.native_batch_norm_helper = _npu_statistics_as_cpu(decompositions.native_batch_norm_helper)
    _installed = True
