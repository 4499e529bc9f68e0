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

For the same reason CI runs one CANN row per feature set
(:func:`ci_cann_releases`): two emulated releases with the same features
differ only in the version string torch_npu reports, so CI runs the oldest
release of each set, and none for the default release's set (the default row
covers it). The sets come from cann_features.toml at each run: a feature
added for a release brings its row back into CI. The other rows are run with
nox by hand and shown stale in COMPATIBILITY.en.md until they are.

Only the standard library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List

from .matrix import ROOT, CannVersion, Matrix
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


def ci_cann_releases(matrix: Matrix) -> List[str]:
    """The emulated CANN releases CI runs rows for besides the default one:
    the oldest of each feature set other than the default release's."""
    seen = {matrix.features_at(matrix.default.cann)}
    chosen = []
    for cann in sorted(matrix.emulated_cann, key=CannVersion):
        features = matrix.features_at(cann)
        if features not in seen:
            seen.add(features)
            chosen.append(cann)
    return chosen


def tests_cann_rows_skip(root: Path = ROOT) -> List[str]:
    """Test folders (relative to ``root``) a CANN-only row skips."""
    return [f"{p.folder}/tests" for p in packages_without_cann(root)]
