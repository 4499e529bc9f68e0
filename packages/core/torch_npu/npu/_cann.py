"""The CANN release in use and the features it has (``torch.npu.get_cann_version``,
``torch.npu.is_cann_feature_available``, ``torch.npu.require_cann_feature``)."""

from __future__ import annotations

import os
import warnings
from typing import Optional

from .. import _C
from .._cann_features import (
    feature_available,
    missing_feature_message,
    unsupported_cann_message,
)

__all__ = ["get_cann_version", "is_cann_feature_available", "require_cann_feature"]


def _backend_info() -> tuple[str, str]:
    info = _C._backend_info()
    return str(info["cann_version"]), str(info["backend"])


_reach_written: set[str] = set()


def _note_cann_question() -> None:
    """Log that the running test asks which CANN is in use.

    Asking is what makes code behave differently at another CANN release, so
    it is logged as the simulator logs the features asked for (Note [Which
    tests reach CANN's features], compat/cann_reach.py)."""
    log = os.environ.get("NPU_SIM_CANN_REACH_LOG")
    if not log:
        return
    line = f"{os.environ.get('NPU_SIM_CANN_REACH_TAG', '')}\tcann_version\n"
    if line not in _reach_written:
        _reach_written.add(line)
        with open(log, "a") as f:
            f.write(line)


def _backend() -> tuple[str, str]:
    """The CANN version and backend, asked on the user's behalf."""
    _note_cann_question()
    return _backend_info()


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
    """Called once at device initialisation, in every process. Not logged as
    a question about CANN: it warns only below the oldest supported release,
    and every row of the matrix is a supported release."""
    version, backend = _backend_info()
    message = unsupported_cann_message(version, backend)
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
