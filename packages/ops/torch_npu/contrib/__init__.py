"""torch_npu.contrib: helpers for porting code to npu (part of torch-npu-ops).

* :mod:`torch_npu.contrib.transfer_to_npu`: ``import`` it to run code
  written for CUDA on npu without editing it.
"""

__all__: list = []
