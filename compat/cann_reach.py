"""Which packages reach CANN themselves, and so which tests a CANN row runs.

Note [What a CANN row runs]: a row of the matrix that differs from the
default row only in the emulated CANN release changes one thing, the
simulator's feature table (compat/cann_features.toml: what each release
lacks is refused with ACL_ERROR_RT_FEATURE_NOT_SUPPORT). Only code that
calls CANN, or asks which features CANN has, can behave differently there.
A package whose sources do neither reaches the device only through core's
runtime, whose own tests run in every CANN row; its tests would run the
same code paths again, so CANN rows skip them (the default row and every
other torch's row run them). The list is derived from the sources at each
run, never written down: a package that starts calling CANN is back in the
CANN rows without anyone editing a list.

Only the standard library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List

from .matrix import ROOT
from .packages import Package, discover

# A call of a CANN function (acl runtime, model capture, HCCL), core's CANN
# function table, or a question about CANN's features.
CANN_USE = re.compile(
    r"\bacl(?:rt|mdl|sys|op|nn)[A-Z]\w*|\baclInit\b|\baclFinalize\b|\bacl::api\(\)"
    r"|\bHccl[A-Z]\w*\s*\(|\b_cann_features\b|\bfeature_available\b|\bcann_feature\w*|\b(?:get_)?cann_version\b"
)
SOURCE_SUFFIXES = (".py", ".pyi", ".cpp", ".cc", ".c", ".h", ".hpp", ".inc")
NOT_SOURCES = {"tests", "build", "dist", "__pycache__", "examples", "benchmarks"}


def sources(folder: Path) -> Iterable[Path]:
    """The package's own source files (not its tests, examples or build trees)."""
    for path in sorted(folder.rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file() and \
                not NOT_SOURCES.intersection(path.relative_to(folder).parts):
            yield path


def first_cann_use(folder: Path) -> str:
    """``file:line: text`` of the first CANN use in the package, or ''."""
    for path in sources(folder):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CANN_USE.search(line):
                return f"{path.relative_to(folder)}:{number}: {line.strip()}"
    return ""


def packages_without_cann(root: Path = ROOT) -> List[Package]:
    """The packages whose sources never call CANN nor ask about its features."""
    return [p for p in discover(root) if (root / p.folder / "tests").is_dir()
            and not first_cann_use(root / p.folder)]


def tests_cann_rows_skip(root: Path = ROOT) -> List[str]:
    """Test folders (relative to ``root``) a CANN-only row skips."""
    return [f"{p.folder}/tests" for p in packages_without_cann(root)]
