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


def test_every_note_is_in_the_architecture_map():
    # ARCHITECTURE.md's table of Notes is where a newcomer looks a decision
    # up: a Note defined in the sources (a comment or docstring line that
    # starts with it) and missing from the table fails here.
    import re

    root = Path(__file__).resolve().parents[1]
    definition = re.compile(r"^\s*(?:#|//|\*)?\s*Note \[([^\]]+)\]", re.MULTILINE)
    suffixes = {".py", ".h", ".cpp"}
    defined = {}
    for folder in ("packages", "compat", "tests", "benchmarks"):
        for path in (root / folder).rglob("*"):
            if path.suffix in suffixes and not {"build", ".venv", "__pycache__"} & set(path.parts):
                for title in definition.findall(path.read_text(errors="replace")):
                    defined.setdefault(title, path.relative_to(root))
    for title in definition.findall((root / "conftest.py").read_text()):
        defined.setdefault(title, "conftest.py")
    architecture = (root / "ARCHITECTURE.md").read_text()
    missing = sorted(f"[{title}] ({path})" for title, path in defined.items() if f"[{title}]" not in architecture)
    assert not missing, "Notes missing from ARCHITECTURE.md's table: " + ", ".join(missing)
