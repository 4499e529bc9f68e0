"""torch_npu: the Ascend NPU as the PyTorch device ``npu``.

``import torch_npu`` (or just ``import torch``, through torch's device-backend
autoload) registers the device:

>>> import torch, torch_npu
>>> x = torch.ones(2, 2).npu()
>>> x.device
device(type='npu', index=0)

Where CANN is installed its runtime drives real NPUs; otherwise the embedded
NPU simulator stands in, with the same code path (see ``TORCH_NPU_BACKEND``).
Operator kernels, distributed, graph and profiler support come from plugin
packages (``pip install 'torch-npu[all]'``), reachable as ``torch_npu.<name>``.
"""

import os as _os
import pkgutil as _pkgutil


def _autoload() -> None:
    """Entry point of torch's ``torch.backends`` group.

    torch calls it at the end of ``import torch``; importing this package has
    already done all the work. Defined before ``import torch`` below: when
    torch_npu is imported first, torch's autoload finds this package only
    partially initialized.
    """


# Plugin distributions install subpackages of torch_npu (torch_npu/profiler,
# ...) from their own directories; let them extend this package.
__path__ = _pkgutil.extend_path(__path__, __name__)

import torch as _torch

from . import _build_info
from ._version_check import check_torch_version as _check_torch_version

# Before loading any C++: with another torch, _C would fail with an opaque
# undefined-symbol error instead of this check's message.
_check_torch_version(
    _torch.__version__,
    _build_info.SUPPORTED_TORCH_VERSIONS,
    _build_info.BUILT_WITH_TORCH,
    torch_npu_version=_build_info.__version__,
)

__version__: str = _build_info.__version__

# torch 2.13 is strict about the order of these steps: the C++ library first
# (kernels, guard, hooks and allocators for PrivateUse1), then the rename to
# "npu", the device module, and the generated Tensor/Module/Storage methods.
from . import _C  # noqa: E402

if _torch._C._get_privateuse1_backend_name() != "npu":
    _torch.utils.rename_privateuse1_backend("npu")

from . import npu  # noqa: E402
from .npu.memory import erase_stream as erase_stream  # noqa: E402  (torch_npu.erase_stream, as in Ascend's)

_torch._register_device_module("npu", npu)
_torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_storage=True
)

from . import _serialization  # noqa: E402
from . import utils as utils  # noqa: E402  (torch_npu.utils.get_cann_version, as in Ascend's)

_serialization.register()

from . import _dlpack  # noqa: E402

_dlpack.register()

from . import multiprocessing as multiprocessing  # noqa: E402  (torch_npu.multiprocessing, as in Ascend's)

multiprocessing.init_reductions()

from . import _autograd_exit  # noqa: E402
from . import _unreported_failures  # noqa: E402

# Exit handlers run in reverse order: first the report of device-work
# failures nobody synchronized for (the drain's own copy would swallow
# them), then the autograd drain.
_autograd_exit.register()
_unreported_failures.register()

#: Directory to add to CMAKE_PREFIX_PATH for ``find_package(TorchNPUCore)``.
cmake_prefix_path: str = _os.path.join(_os.path.dirname(_C.__file__), "share", "cmake")

from . import _plugins  # noqa: E402


def __getattr__(name: str):
    # torch_npu.profiler etc.: the installed plugin, or an ImportError that
    # says which package to install. Defined before plugins load, so that a
    # plugin may use another one while it initialises.
    return _plugins.module_getattr(name)


_plugins.install_missing_plugin_hook()
_plugins.load_plugins()
