"""Which row of the compatibility matrix an environment matches.

Standalone (no torch): :mod:`torch_npu.utils.collect_env` uses it, and it
must work when torch_npu itself does not import.
"""

from __future__ import annotations

from typing import Dict

from . import _compat_data

__all__ = ["match_row"]


def _release(version: str) -> str:
    return version.split("+", 1)[0].strip()


def match_row(torch_version: str, cann_version: str, python_version: str) -> Dict[str, str]:
    """``{"row", "status", "detail"}`` for the environment; status is the
    row's ("tested", "stale", "untested", "unsupported") or "not in the matrix"."""
    python = ".".join(python_version.split(".")[:2])
    key = (_release(torch_version), cann_version, python)
    row = f"torch {key[0]}, CANN {key[1]}, Python {key[2]}"
    if key not in _compat_data.ROWS:
        return {"row": row, "status": "not in the matrix",
                "detail": "no row of COMPATIBILITY.en.md has this combination"}
    status, detail = _compat_data.ROWS[key]
    return {"row": row, "status": status, "detail": detail}
