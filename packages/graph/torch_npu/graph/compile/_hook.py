"""Registers npu with Dynamo and Inductor when they first look up devices.

Importing Dynamo and Inductor costs seconds, which ``import torch_npu``
must not pay, and registering while they are being imported runs into
their import cycles. So the plugin only installs an import hook: when
``torch._dynamo.device_interface`` or ``torch._inductor.codegen.common`` is
loaded, the function each calls before its first device lookup
(``init_device_reg``, ``init_backend_registration``) is wrapped so that it
also runs :func:`torch_npu.graph.compile.register`, by then with both
packages fully imported; and when ``torch._inductor.config`` is loaded, the
``npu_backend`` option is added to it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Callable, Sequence

# Inductor's config: the npu_backend option must exist before torch.compile
# checks its options, which is before any device lookup.
_CONFIG = "torch._inductor.config"

# module -> the function its device lookups call first.
_TRIGGERS = {
    "torch._dynamo.device_interface": "init_device_reg",
    "torch._inductor.codegen.common": "init_backend_registration",
}


def _wrap(module: ModuleType, function_name: str) -> None:
    original: Callable[..., Any] = getattr(module, function_name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        from . import register

        register()
        return result

    setattr(module, function_name, wrapper)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        if module.__name__ == _CONFIG:
            _add_config_option()
        else:
            _wrap(module, _TRIGGERS[module.__name__])


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in _TRIGGERS and fullname != _CONFIG:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def _add_config_option() -> None:
    from . import _add_config_option as add

    add()


def install() -> None:
    """Arranges for npu to be registered before Dynamo or Inductor look up a
    device (at once if either is already loaded)."""
    if _CONFIG in sys.modules:
        _add_config_option()
    for name, function_name in _TRIGGERS.items():
        module = sys.modules.get(name)
        if module is not None and hasattr(module, function_name):
            _wrap(module, function_name)
    interfaces = sys.modules.get("torch._dynamo.device_interface")
    if getattr(interfaces, "_device_initialized", False):
        # Dynamo looked up its devices already and will not call
        # init_device_reg again.
        from . import register

        register()
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
