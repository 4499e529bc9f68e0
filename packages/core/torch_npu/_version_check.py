"""Check at import time that the installed torch is one torch_npu supports.

torch_npu's compiled extension uses PyTorch's C++ API, whose ABI changes
between minor releases, so the installed torch must have the same
major.minor as the torch torch_npu was built with. It must also be one of
the versions this source tree adapts (``version.txt``, baked into
``torch_npu/_build_info.py`` at build time).

Standalone on purpose (imports nothing from torch or torch_npu) so that it
can run before the extension is loaded, and be tested without it.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Optional, Sequence, Tuple

__all__ = ["check_torch_version", "SKIP_ENV_VAR", "strip_local", "same_version"]

SKIP_ENV_VAR = "TORCH_NPU_SKIP_TORCH_VERSION_CHECK"

_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)$")


def strip_local(version: str) -> str:
    """``"2.13.0+cpu"`` -> ``"2.13.0"`` (drops a PEP 440 local label)."""
    return version.strip().split("+", 1)[0]


def _parse(version: str) -> Tuple[Tuple[int, ...], str]:
    """(release numbers without trailing zeros, rest such as "rc1"/"a0")."""
    text = strip_local(version)
    match = _RELEASE.match(text)
    if not match:
        return ((), text.lower())
    release = [int(part) for part in match.group(1).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    return (tuple(release), match.group(2).strip().lower())


def same_version(a: str, b: str) -> bool:
    """Equal once local labels are dropped ("2.13" == "2.13.0+cpu")."""
    return _parse(a) == _parse(b)


def _major_minor(version: str) -> Tuple[int, ...]:
    match = _RELEASE.match(strip_local(version))
    if not match:
        return ()
    parts = [int(part) for part in match.group(1).split(".")]
    parts += [0] * (2 - len(parts))
    return tuple(parts[:2])


def _skip_requested() -> bool:
    value = os.environ.get(SKIP_ENV_VAR, "").strip().lower()
    return value in ("1", "true", "yes", "on")


def check_torch_version(
    installed_version: str,
    supported: Sequence[str],
    built_with: str,
    *,
    torch_npu_version: Optional[str] = None,
) -> None:
    """Raise ImportError unless ``installed_version`` of torch is usable.

    ``installed_version`` is ``torch.__version__``; ``supported`` the
    versions in ``version.txt`` (``_build_info.SUPPORTED_TORCH_VERSIONS``);
    ``built_with`` the torch the extension was compiled against
    (``_build_info.BUILT_WITH_TORCH``); ``torch_npu_version`` is only used in
    the message. Local labels (``+cpu``) are ignored everywhere.

    The installed torch must be listed in ``supported`` *and* have the same
    major.minor as ``built_with``. With ``TORCH_NPU_SKIP_TORCH_VERSION_CHECK=1``
    a mismatch gives a RuntimeWarning instead of the error.
    """
    supported = tuple(str(v).strip() for v in supported if str(v).strip())
    listed = any(same_version(installed_version, v) for v in supported)
    abi_ok = bool(_major_minor(built_with)) and (
        _major_minor(installed_version) == _major_minor(built_with)
    )
    if listed and abi_ok:
        return

    built = strip_local(built_with)
    installed = installed_version.strip()
    what = f"torch_npu {torch_npu_version}" if torch_npu_version else "torch_npu"
    supports = ", ".join(strip_local(v) for v in supported) or "none"
    facts = (
        f"{what} was built for torch {built} (this tree supports: {supports}) "
        f"but torch {installed} is installed."
    )
    advice = (
        f" Install a supported torch, e.g. `pip install torch=={built}`, or a "
        f"torch_npu built for torch {strip_local(installed)}; see "
        f"COMPATIBILITY.en.md."
    )
    if _skip_requested():
        warnings.warn(
            facts + advice + f" Importing anyway because {SKIP_ENV_VAR} is "
            "set (unsupported: expect crashes or wrong results).",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    raise ImportError(
        facts + advice + f" Set {SKIP_ENV_VAR}=1 to import anyway (unsupported)."
    )
