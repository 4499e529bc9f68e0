"""torch_npu.example: <what it provides> (the torch-npu-example plugin).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

__version__ = "0.1.0"

__all__ = ["__version__"]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group, called once with the
    ``torch_npu`` module when it is imported: attach to torch_npu / torch.npu
    and register with torch here, not at module import."""
