"""CANN release numbers ("8.1.RC1", "8.5.0", "9.0.0") and their order.

The same rules as the simulator's ``CannVersion`` (csrc/simulator/
cann_version.h): ``MAJOR.MINOR.(RCn|N)[.PATCH]``; release candidates come
before the release of the same MAJOR.MINOR, so
8.0.RC1 < 8.0.RC2 < 8.0.0 < 8.0.1 < 8.1.RC1.

Standalone (standard library only) so that the compatibility tooling in
``compat/`` and :mod:`torch_npu.utils.collect_env` can use it without
importing torch.
"""

from __future__ import annotations

import re
from functools import total_ordering
from typing import Tuple

__all__ = ["CannVersion"]

_PATTERN = re.compile(r"^(\d{1,6})\.(\d{1,6})\.(RC)?(\d{1,6})(?:\.(\d{1,6}))?$", re.IGNORECASE)


@total_ordering
class CannVersion:
    """A parsed CANN release number; compares in release order."""

    __slots__ = ("text", "_key")

    def __init__(self, text: str) -> None:
        match = _PATTERN.match(text.strip())
        if match is None:
            raise ValueError(
                f"{text!r} is not a CANN version; expected MAJOR.MINOR.N or "
                "MAJOR.MINOR.RCn (e.g. 8.5.0, 8.1.RC1)"
            )
        major, minor, rc, third, patch = match.groups()
        self.text = text.strip()
        self._key: Tuple[int, ...] = (
            int(major), int(minor), 0 if rc else 1, int(third), int(patch or 0))

    @classmethod
    def is_valid(cls, text: str) -> bool:
        return _PATTERN.match(text.strip()) is not None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = CannVersion(other)
        if not isinstance(other, CannVersion):
            return NotImplemented
        return self._key == other._key

    def __lt__(self, other: object) -> bool:
        if isinstance(other, str):
            other = CannVersion(other)
        if not isinstance(other, CannVersion):
            return NotImplemented
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"CannVersion({self.text!r})"
