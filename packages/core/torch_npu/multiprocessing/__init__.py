"""npu tensors through :mod:`torch.multiprocessing` (as torch_npu's).

Importing torch_npu registers the reductions; see
:mod:`torch_npu.multiprocessing.reductions`.
"""

from .reductions import init_reductions, ipc_collect

__all__ = ["init_reductions", "ipc_collect"]
