"""Run code written for CUDA on npu: ``from torch_npu.contrib import transfer_to_npu``.

Importing this module (once, before the CUDA code runs) patches torch so that

* ``torch.cuda.<name>`` is ``torch.npu.<name>`` for every public name of
  ``torch.npu`` (``is_available``, ``synchronize``, ``device_count``,
  ``set_device``, ``Stream``, ``Event``, ``manual_seed``, memory statistics,
  ...), and ``torch.cuda.amp`` is ``torch.npu.amp`` where it exists;
* ``"cuda"``/``"cuda:N"`` and ``torch.device("cuda")`` given as a device to
  tensor factories (``torch.randn(2, device="cuda")``, ``torch.tensor``,
  ``torch.zeros_like``, ...), ``Tensor.to``/``new_*``/``pin_memory``,
  ``nn.Module.to``/``to_empty``, ``torch.load(map_location=...)``,
  ``torch.set_default_device``, ``torch.Generator`` and
  ``torch.get_device_module`` mean npu;
* ``torch.device("cuda", 0)`` creates ``device(type='npu', index=0)``
  (``torch.device`` stays usable with ``isinstance`` and pickles as
  ``torch.device``);
* ``Tensor.cuda``, ``nn.Module.cuda`` and the storages' ``cuda`` are their
  ``npu`` methods;
* ``torch.autocast("cuda")`` and ``torch.amp.GradScaler("cuda")`` (whose
  default device is "cuda") use npu;
* ``torch.distributed.init_process_group``/``new_group`` read the backend
  ``"nccl"`` as ``"hccl"`` (provided by torch-npu-distributed) and a cuda
  ``device_id`` as npu.

Only references looked up after the import see the patches: a name bound
earlier (``from torch.cuda import synchronize``) keeps the CUDA function.
Tensors still report ``device.type == "npu"`` and ``is_cuda == False``.
There is no way back within the process.
"""

from __future__ import annotations

import copyreg
import functools
import re
import warnings
from typing import Any, Callable, Optional

import torch

__all__: list = []

_PATCHED_FLAG = "_torch_npu_transfer_to_npu"

#: Tensor factories and other ``torch.<name>`` functions with a device argument.
_TORCH_FUNCTIONS = (
    "arange", "as_tensor", "asarray", "bartlett_window", "blackman_window", "empty",
    "empty_like", "empty_permuted", "empty_strided", "eye", "from_file", "full",
    "full_like", "hamming_window", "hann_window", "kaiser_window", "linspace",
    "logspace", "normal", "ones", "ones_like", "rand", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "randperm", "range", "scalar_tensor",
    "sparse_bsc_tensor", "sparse_bsr_tensor", "sparse_compressed_tensor",
    "sparse_coo_tensor", "sparse_csc_tensor", "sparse_csr_tensor", "tensor",
    "tril_indices", "triu_indices", "zeros", "zeros_like", "set_default_device",
    "get_device_module",
)
_TENSOR_METHODS = (
    "to", "new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor",
    "new_zeros", "pin_memory", "is_pinned",
)
_MODULE_METHODS = ("to", "to_empty")
#: Keyword arguments that name a device.
_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id", "type")

_RealDevice = torch.device
_RealGenerator = torch.Generator


# -- conversions ----------------------------------------------------------------


def _npu_string(text: str) -> str:
    """``"cuda"`` -> ``"npu"``, ``"cuda:1"`` -> ``"npu:1"``; anything else as is."""
    if text == "cuda" or text.startswith("cuda:"):
        return "npu" + text[4:]
    return text


def _convert(value: Any, dicts: bool = False) -> Any:
    """``value`` with a cuda device (string or torch.device) made npu."""
    if isinstance(value, str):
        return _npu_string(value)
    if isinstance(value, _RealDevice):
        if value.type != "cuda":
            return value
        return _RealDevice("npu") if value.index is None else _RealDevice("npu", value.index)
    if dicts and isinstance(value, dict):  # torch.load's map_location={"cuda:0": "cpu"}
        return {_convert(k): _convert(v) for k, v in value.items()}
    return value


def _convert_backend(backend: Any) -> Any:
    """A torch.distributed backend string with nccl -> hccl, cuda -> npu."""
    if not isinstance(backend, str):
        return backend
    backend = re.sub(r"\bnccl\b", "hccl", backend, flags=re.IGNORECASE)
    return re.sub(r"\bcuda(?=:)", "npu", backend)


def _wrap(fn: Callable, dicts: bool = False) -> Callable:
    """``fn`` with its device arguments (positional strings/devices and the
    keywords of :data:`_DEVICE_KWARGS`) converted from cuda to npu."""
    if getattr(fn, _PATCHED_FLAG, False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_convert(a, dicts) for a in args)
        for key in _DEVICE_KWARGS:
            if key in kwargs:
                kwargs[key] = _convert(kwargs[key], dicts)
        return fn(*args, **kwargs)

    setattr(wrapper, _PATCHED_FLAG, True)
    return wrapper


# -- torch.device and torch.Generator ------------------------------------------


class _ConvertingMeta(type):
    """Metaclass of the stand-ins for C types (torch.device, torch.Generator):
    calling the stand-in converts the arguments and creates an instance of
    the real type; isinstance/issubclass answer for the real type."""

    _real: type

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_convert(a) for a in args)
        kwargs = {k: _convert(v) if k in _DEVICE_KWARGS else v for k, v in kwargs.items()}
        return cls._real(*args, **kwargs)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._real)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._real, name)


class device(metaclass=_ConvertingMeta):  # noqa: N801 - stands in for torch.device
    """``torch.device`` with ``"cuda"`` read as ``"npu"`` (installed by
    torch_npu.contrib.transfer_to_npu). Creates real ``torch.device`` objects."""

    _real = _RealDevice


class Generator(metaclass=_ConvertingMeta):
    """``torch.Generator`` with ``device="cuda"`` read as npu (installed by
    torch_npu.contrib.transfer_to_npu). Creates real ``torch.Generator`` objects."""

    _real = _RealGenerator


device.__module__ = _RealDevice.__module__  # "torch": pickles as torch.device
device.__qualname__ = device.__name__ = "device"
Generator.__module__ = "torch"


def _reduce_device(d: torch.device) -> tuple:
    # A device pickles as a call of torch.device. The real class is no longer
    # reachable under that name, so pickle the stand-in, which is; unpickling
    # without this module calls the real torch.device with the same arguments.
    args = (d.type,) if d.index is None else (d.type, d.index)
    return device, args


# -- patches ----------------------------------------------------------------------


def _patch_function(owner: Any, name: str, dicts: bool = False) -> None:
    fn = getattr(owner, name, None)
    if fn is not None:
        setattr(owner, name, _wrap(fn, dicts))


def _patch_init(cls: type, convert: Callable[[Any], Any], arg: str, default: Any = None) -> None:
    """Converts the argument ``arg`` (positional index 0 after self) of
    ``cls.__init__``; ``default`` replaces a missing one."""
    original = cls.__init__
    if getattr(original, _PATCHED_FLAG, False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args:
            args = (convert(args[0]),) + args[1:]
        elif arg in kwargs:
            kwargs[arg] = convert(kwargs[arg])
        elif default is not None:
            kwargs[arg] = default
        original(self, *args, **kwargs)

    setattr(__init__, _PATCHED_FLAG, True)
    cls.__init__ = __init__


def _patch_torch_cuda() -> None:
    npu = torch.npu
    for name in getattr(npu, "__all__", ()):
        setattr(torch.cuda, name, getattr(npu, name))
    for name in ("_lazy_init", "is_available", "is_initialized", "synchronize"):
        if hasattr(npu, name):
            setattr(torch.cuda, name, getattr(npu, name))
    amp = getattr(npu, "amp", None)
    if amp is not None:
        torch.cuda.amp = amp


def _patch_cuda_methods() -> None:
    torch.Tensor.cuda = torch.Tensor.npu
    torch.nn.Module.cuda = torch.nn.Module.npu
    for storage in (torch.UntypedStorage, torch.TypedStorage):
        if hasattr(storage, "npu"):
            storage.cuda = storage.npu


def _patch_distributed() -> None:
    if not torch.distributed.is_available():
        return
    import torch.distributed as dist

    for name in ("init_process_group", "new_group"):
        original = getattr(dist, name, None)
        if original is None or getattr(original, _PATCHED_FLAG, False):
            continue

        def make(original: Callable) -> Callable:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if original.__name__ == "init_process_group" and args:
                    args = (_convert_backend(args[0]),) + args[1:]
                if "backend" in kwargs:
                    kwargs["backend"] = _convert_backend(kwargs["backend"])
                if "device_id" in kwargs:
                    kwargs["device_id"] = _convert(kwargs["device_id"])
                return original(*args, **kwargs)

            setattr(wrapper, _PATCHED_FLAG, True)
            return wrapper

        setattr(dist, name, make(original))


def _patch_amp() -> None:
    _patch_init(torch.amp.autocast_mode.autocast, _convert, "device_type")
    _patch_init(torch.amp.GradScaler, _convert, "device", default="npu")


def _install() -> None:
    if getattr(torch, _PATCHED_FLAG, False):
        return
    for name in _TORCH_FUNCTIONS:
        _patch_function(torch, name)
    _patch_function(torch, "load", dicts=True)
    for name in _TENSOR_METHODS:
        _patch_function(torch.Tensor, name)
    for name in _MODULE_METHODS:
        _patch_function(torch.nn.Module, name)
    torch.device = device  # type: ignore[misc]
    torch.Generator = Generator  # type: ignore[misc]
    copyreg.pickle(_RealDevice, _reduce_device)
    _patch_torch_cuda()
    _patch_cuda_methods()
    _patch_distributed()
    _patch_amp()
    setattr(torch, _PATCHED_FLAG, True)
    warnings.warn(
        "torch_npu.contrib.transfer_to_npu: torch.cuda.* now refers to torch.npu.*, "
        "and 'cuda' devices (torch.device('cuda'), device='cuda', .cuda(), .to('cuda')) "
        "are npu devices.",
        UserWarning,
        stacklevel=3,
    )


def converted_backend(backend: Optional[str]) -> Optional[str]:
    """The torch.distributed backend that ``backend`` becomes once this module
    is imported (``"nccl"`` -> ``"hccl"``, ``"cuda:nccl,cpu:gloo"`` ->
    ``"npu:hccl,cpu:gloo"``)."""
    return _convert_backend(backend)


def converted_device(value: Any) -> Any:
    """``value`` with a cuda device (``"cuda"``, ``"cuda:N"`` or a cuda
    ``torch.device``) made the npu device, as the patched functions see it."""
    return _convert(value)


_install()

__all__ = ["converted_backend", "converted_device"]
