"""torch_npu.distributed: collective communication between npu devices (the torch-npu-distributed plugin).

This release is the package skeleton of the monorepo: it installs, loads as a
plugin and pins the torch-npu-core versions it works with. ProcessGroupHCCL
(the ``hccl`` backend of torch.distributed), the simulated HCCL and the
libtorch C++ API come with the distributed issue (see README.md); until
then ``init_process_group("hccl")`` is not available.

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

__version__ = "0.1.0"

__all__ = ["__version__"]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group. Nothing to attach yet: the
    hccl backend registers itself here once it exists."""
