"""The saved statistics of a compiled layer norm on npu have the dtype eager
npu gives them.

Note [Layer norm statistics as eager npu gives them]
``native_layer_norm`` returns, besides its output, the mean and inverse
standard deviation of each normalised row. On CPU they are of the input's
dtype (float16 for float16 inputs); on CUDA of the computation dtype
(float32 for half inputs). Eager npu runs the CPU kernel (packages/ops
NormKernels.cpp allocates the statistics the CPU allocates), but PyTorch's
reference, which is both the fake (meta) implementation Dynamo traces with
and the decomposition Inductor compiles, asks ``input.device.type in
["cpu", "mtia"]`` and so gives npu the CUDA dtype: the compiled
``native_layer_norm`` of float16 returned float32 statistics where eager
returned float16, silently. Both are therefore wrapped: for npu inputs the
statistics are converted to the input's dtype, as the CPU branch converts
them. The normalised output is not touched. (Like batch norm's, Note [Batch
norm statistics as eager npu gives them].)
"""

from __future__ import annotations

from typing import Any

import torch

_installed = False


def _npu_statistics_as_cpu(reference: Any) -> Any:
    def native_layer_norm(input: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        result = reference(input, *args, **kwargs)
        if input.device.type != "npu" or kwargs:
            # Out= variants write into the caller's tensors, whose dtypes
            # the caller chose.
            return result
        output, mean, rstd = result
        return output, mean.to(dtype=input.dtype), rstd.to(dtype=input.dtype)

    native_layer_norm.npu_wrapped = reference  # type: ignore[attr-defined]
    return native_layer_norm


def install() -> None:
    """Wrap PyTorch's layer norm reference where the fake implementation and
    Inductor's decomposition call it (Note [Layer norm statistics as eager
    npu gives them]); idempotent."""
    global _installed
    if _installed:
        return
    import torch._inductor.decomposition as inductor_decompositions
    import torch._refs as refs

    # native_layer_norm_fake calls the reference through torch._refs'
    # globals; Inductor's decomposition imported it under its own name.
    refs.native_layer_norm = _npu_statistics_as_cpu(refs.native_layer_norm)
    inductor_decompositions.decomp_native_layer_norm = _npu_statistics_as_cpu(
        inductor_decompositions.decomp_native_layer_norm)
    _installed = True
