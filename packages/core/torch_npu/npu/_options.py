"""Ascend runtime options: ``torch.npu.set_option``, ``set_compile_mode``,
``torch.npu.config.allow_internal_format``, ``torch.npu.matmul.allow_hf32``,
``torch.npu.conv.allow_hf32`` and their kin.

On CANN these tune how operators are compiled and which precision the cube
units use (HF32, a reduced-precision float32 like CUDA's TF32). The model-zoo
scripts written for Ascend's torch_npu set them in their preamble, so they
must work here unchanged: every option is validated as torch_npu validates
it, stored, and reads back what was set. The simulator computes with the
CPU's kernels in full precision, so none of them changes a result here
(documented in core's README); on CANN they would be handed to the runtime.
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Callable, Dict, Optional, Union

__all__ = [
    "CubeMathType",
    "config",
    "conv",
    "get_mm_bmm_format_nd",
    "get_option",
    "is_jit_compile_false",
    "matmul",
    "set_compile_mode",
    "set_mm_bmm_format_nd",
    "set_option",
]

_lock = threading.Lock()
_options: Dict[str, str] = {}

# Accepted values of the options whose values torch_npu checks: a list of
# strings, a predicate, or None (any string). Other options are accepted as
# they are, as torch_npu accepts them.
_ALLOWED_VALUES: Dict[str, Union[None, list, Callable[[str], bool]]] = {
    "ACL_PRECISION_MODE": ["allow_fp32_to_fp16", "must_keep_origin_dtype"],
    "ACL_OP_SELECT_IMPL_MODE": ["high_performance", "high_precision"],
    "ACL_AICORE_NUM": lambda value: value.isdigit() and 1 <= int(value) <= 32,
    "ACL_OPTYPELIST_FOR_IMPLMODE": None,
    "ACL_OP_DEBUG_LEVEL": ["0", "1", "2", "3", "4"],
    "ACL_DEBUG_DIR": None,
    "ACL_OP_COMPILER_CACHE_MODE": ["disable", "enable", "force"],
    "ACL_OP_COMPILER_CACHE_DIR": None,
    "ACL_OP_DEBUG_OPTION": None,
}
_ACCEPTED_TEXT = {"ACL_AICORE_NUM": "an integer from 1 to 32"}


def _store(name: str, value: str) -> None:
    with _lock:
        _options[name] = value


def get_option(name: str) -> Optional[str]:
    """The value last set for option ``name`` (``None`` if never set)."""
    with _lock:
        return _options.get(name)


def set_option(option: Dict[str, Any]) -> None:
    """Sets Ascend runtime options, e.g.
    ``torch.npu.set_option({"ACL_PRECISION_MODE": "must_keep_origin_dtype"})``.

    Values are converted to strings. A value outside an option's accepted
    values raises ValueError naming the option and what it accepts; nothing
    is stored then. ``{"MM_BMM_ND_ENABLE": "enable" | "disable"}`` also sets
    :func:`set_mm_bmm_format_nd`. No option changes how the simulator
    computes.
    """
    if not isinstance(option, dict):
        raise TypeError(f"torch.npu.set_option expects a dict of option names to values, got {type(option).__name__}")
    checked: Dict[str, str] = {}
    for name, value in option.items():
        if not isinstance(name, str):
            raise TypeError(f"torch.npu.set_option: option names are strings, got {name!r}")
        text = str(value)
        allowed = _ALLOWED_VALUES.get(name)
        ok = allowed is None or (allowed(text) if callable(allowed) else text in allowed)
        if not ok:
            accepted = _ACCEPTED_TEXT.get(name) or ", ".join(repr(v) for v in allowed)  # type: ignore[union-attr]
            raise ValueError(f"torch.npu.set_option: {name} must be {accepted}; got {value!r}")
        checked[name] = text
    for name, text in checked.items():
        _store(name, text)
    nd = checked.get("MM_BMM_ND_ENABLE")
    if nd in ("enable", "disable"):
        set_mm_bmm_format_nd(nd == "enable")


def set_compile_mode(jit_compile: bool = False) -> None:
    """Chooses between compiling operators just in time (``True``) and CANN's
    precompiled binary kernels (``False``, what Ascend recommends for
    training). Stored; the simulator has no operator compiler."""
    _store("jitCompile", "enable" if jit_compile else "disable")


def is_jit_compile_false() -> bool:
    """Whether :func:`set_compile_mode` last chose binary kernels (``False``);
    binary kernels are the default, as on CANN 8 and later."""
    return get_option("jitCompile") != "enable"


_mm_bmm_format_nd = True


def set_mm_bmm_format_nd(is_nd: bool = True) -> None:
    """Whether mm and bmm keep their operands in the ND format (default
    ``True``). Every npu tensor is ND here; stored for code that reads it."""
    global _mm_bmm_format_nd
    _mm_bmm_format_nd = bool(is_nd)


def get_mm_bmm_format_nd() -> bool:
    """The setting of :func:`set_mm_bmm_format_nd`."""
    return _mm_bmm_format_nd


class CubeMathType(enum.IntEnum):
    """How the cube units compute float32 matmuls
    (``torch.npu.matmul.cube_math_type``)."""

    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3
    USE_FP32_ADD = 4


def _check_bool(owner: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be a bool, got {type(value).__name__}")
    return value


class _OptionNamespace:
    """Base of ``torch.npu.config``, ``torch.npu.matmul`` and ``torch.npu.conv``:
    attributes backed by runtime options. Unknown attributes raise
    AttributeError (a typo must not pass silently)."""

    _owner = ""
    _attributes: Dict[str, str] = {}  # attribute -> option name
    _defaults: Dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        option = type(self)._attributes.get(name)
        if option is None:
            raise AttributeError(f"{self._owner} has no attribute {name!r}")
        value = get_option(option)
        return self._decode(name, value) if value is not None else type(self)._defaults[name]

    def __setattr__(self, name: str, value: Any) -> None:
        option = type(self)._attributes.get(name)
        if option is None:
            raise AttributeError(
                f"{self._owner} has no attribute {name!r}; it has {', '.join(sorted(type(self)._attributes))}"
            )
        _store(option, self._encode(name, value))

    def _encode(self, name: str, value: Any) -> str:
        return "enable" if _check_bool(self._owner, name, value) else "disable"

    def _decode(self, name: str, value: str) -> Any:
        return value == "enable"

    def __repr__(self) -> str:
        settings = ", ".join(f"{name}={getattr(self, name)!r}" for name in sorted(type(self)._attributes))
        return f"{self._owner}({settings})"


class _Config(_OptionNamespace):
    """``torch.npu.config``: ``allow_internal_format`` (default ``False``):
    whether operators may keep results in Ascend's private formats
    (FRACTAL_NZ, ...). Explicit casts (``torch_npu.npu_format_cast``) are
    honoured either way."""

    _owner = "torch.npu.config"
    _attributes = {"allow_internal_format": "ALLOW_INTERNAL_FORMAT"}
    _defaults = {"allow_internal_format": False}


class _Matmul(_OptionNamespace):
    """``torch.npu.matmul``: ``allow_hf32`` (default ``False``), float32
    matmuls in HF32 on the cube units, and ``cube_math_type``."""

    _owner = "torch.npu.matmul"
    _attributes = {"allow_hf32": "ALLOW_MATMUL_HF32", "cube_math_type": "CUBE_MATH_TYPE"}
    _defaults = {"allow_hf32": False, "cube_math_type": None}

    def _encode(self, name: str, value: Any) -> str:
        if name == "cube_math_type":
            if not isinstance(value, CubeMathType):
                raise TypeError(f"torch.npu.matmul.cube_math_type must be a torch.npu.CubeMathType, got {value!r}")
            return str(int(value))
        return super()._encode(name, value)

    def _decode(self, name: str, value: str) -> Any:
        if name == "cube_math_type":
            return CubeMathType(int(value))
        return super()._decode(name, value)


class _Conv(_OptionNamespace):
    """``torch.npu.conv``: ``allow_hf32`` (default ``True``), float32
    convolutions in HF32 on the cube units."""

    _owner = "torch.npu.conv"
    _attributes = {"allow_hf32": "ALLOW_CONV_HF32"}
    _defaults = {"allow_hf32": True}


config = _Config()
matmul = _Matmul()
conv = _Conv()
