"""The packages, the scripts and the docs agree with each other."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compat.check import run_checks  # noqa: E402
from compat.matrix import load  # noqa: E402
from compat.packages import discover  # noqa: E402


def test_tree_agrees_with_the_compatibility_matrix():
    """version.txt, COMPATIBILITY.en.md, package pins, the tables core ships,
    the package lists ./dev and core read, the meta-package's extras:
    everything generated from compat/ and the packages' pyproject.toml
    (tests/test_compat.py tests the check itself)."""
    assert run_checks(load()) == []


def test_every_package_has_a_readme_naming_it():
    for package in discover():
        readme = ROOT / package.folder / "README.md"
        assert readme.is_file(), readme
        assert package.name in readme.read_text(), readme


def test_scripts_are_executable():
    for script in ("dev", ".ci/run"):
        assert os.access(ROOT / script, os.X_OK), script
