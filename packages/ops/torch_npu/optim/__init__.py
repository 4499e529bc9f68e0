"""torch_npu.optim: torch_npu's fused optimizers (part of torch-npu-ops).

Each optimizer updates a whole param group with multi-tensor ops
(``torch._foreach_*``; one kernel launch per op for the group on a backend
with multi-tensor kernels), on npu tensors (their main use) and on
CPU tensors, for float32, bfloat16 and float16 parameters. Constructors,
defaults and hyper-parameter checks are torch_npu's (plus a few checks
torch_npu lacks, such as a negative weight_decay for LAMB, BERT Adam and
AdamP).

Exactly a torch.optim optimizer run with ``foreach=True`` (same state, same
results, step for step):

* :class:`NpuFusedSGD` -- :class:`torch.optim.SGD`
* :class:`NpuFusedAdam` -- :class:`torch.optim.Adam`
* :class:`NpuFusedAdamW` -- :class:`torch.optim.AdamW` (HuggingFace
  Trainer's ``optim="adamw_torch_npu_fused"``)
* :class:`NpuFusedRMSprop` -- :class:`torch.optim.RMSprop`
* :class:`NpuFusedAdadelta` -- :class:`torch.optim.Adadelta`

Without a torch.optim counterpart:

* :class:`NpuFusedLamb` -- LAMB (trust ratio, optional global gradient norm)
* :class:`NpuFusedBertAdam` -- BERT's Adam (warmup schedules, no bias
  correction, per-parameter gradient clipping)
* :class:`NpuFusedRMSpropTF` -- RMSprop as TensorFlow computes it
* :class:`NpuFusedAdamP` -- AdamP (projection of scale-invariant weights)

:class:`NpuFusedOptimizerBase` is their base: ``clip_grad_norm_fused_``,
``zero_grad``, ``get_combined_params``/``get_combined_grads``.
"""

__all__ = [
    "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb",
    "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP",
    "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF",
]

from .npu_fused_optim_base import NpuFusedOptimizerBase
from .npu_fused_sgd import NpuFusedSGD
from .npu_fused_adadelta import NpuFusedAdadelta
from .npu_fused_lamb import NpuFusedLamb
from .npu_fused_adam import NpuFusedAdam
from .npu_fused_adamw import NpuFusedAdamW
from .npu_fused_adamp import NpuFusedAdamP
from .npu_fused_bert_adam import NpuFusedBertAdam
from .npu_fused_rmsprop import NpuFusedRMSprop
from .npu_fused_rmsprop_tf import NpuFusedRMSpropTF
