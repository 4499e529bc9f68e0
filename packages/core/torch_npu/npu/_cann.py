"""The CANN release in use and the features it has (``torch.npu.get_cann_version``,
``torch.npu.is_cann_feature_available``, ``torch.npu.require_cann_feature``)."""

from __future__ import annotations

import warnings
from typing import Optional

from .. import _C
from .._cann_features import (
    feature_available,
    missing_feature_message,
    unsupported_cann_message,
)

__all__ = ["get_cann_version", "is_cann_feature_available", "require_cann_feature"]


def _backend() -> tuple[str, str]:
    info = _C._backend_info()
    return str(info["cann_version"]), str(info["backend"])


def get_cann_version(module: str = "CANN") -> str:
    """The version of the CANN in use, e.g. ``"9.0.0"`` (the emulated release
    on the simulator); ``""`` when CANN does not report it (releases before
    8.1.RC1) or for a module other than ``"CANN"``, like Ascend's
    ``torch_npu.npu.utils.get_cann_version``."""
    if module.upper() != "CANN":
        return ""
    version, _ = _backend()
    return "" if version == "unknown" else version


def is_cann_feature_available(name: str) -> bool:
    """Whether the CANN in use has feature ``name`` (see COMPATIBILITY.en.md,
    "CANN features"); unknown (old CANN without a version query) counts as
    available only for features older than that query."""
    version, _ = _backend()
    return feature_available(name, version) is not False


def require_cann_feature(name: str, purpose: Optional[str] = None) -> None:
    """Raise RuntimeError saying which CANN to install when the CANN in use
    lacks feature ``name``. ``purpose`` names what needs it in the message."""
    version, backend = _backend()
    message = missing_feature_message(name, version, backend, purpose)
    if message is not None:
        raise RuntimeError(message)


def _warn_if_unsupported() -> None:
    """Called once at device initialisation."""
    version, backend = _backend()
    message = unsupported_cann_message(version, backend)
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
