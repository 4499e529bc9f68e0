"""Which tests can behave differently at another CANN release, and so which
tests a CANN row runs.

Note [What a CANN row runs]: a row of the matrix that differs from the
default row only in the emulated CANN release changes one thing, the
simulator's feature table (compat/cann_features.toml: what each release
lacks is refused with ACL_ERROR_RT_FEATURE_NOT_SUPPORT) and the version it
reports. A test that never asks for a gated feature nor for the version runs
the same code at every release, so CANN rows run only the tests that ask
(:func:`cann_row_tests`); the default row and other torch versions' rows run
everything. Which tests ask is derived at each CI run, never written down:

* Note [Which tests reach CANN's features]: during the default row, the
  simulator (feature_gates.cpp) and torch_npu's version queries
  (torch_npu/npu/_cann.py, collect_env) log each feature or version question
  with the pytest node asking it (pytest_cann_reach.py tags the node; child
  processes inherit the tag). A question asked while a module or folder is
  collected names that module or folder; one asked outside any node makes
  the rows run everything.
* Test sources that name CANN's version or features themselves (they set
  NPU_SIM_CANN_VERSION, read the version, ...) run too, whatever the log says;
  a helper module or conftest that names them brings its whole folder, unless
  the line says it asks nothing (NOT_A_QUESTION).

So a test that starts using a gated feature is in the CANN rows at the next
run without anyone editing a list. What the log cannot see: a child process
started with an environment of its own (without the tag and log variables),
and a shared fixture whose question is logged against the first test that
used it only.

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
from typing import Iterable, List, Optional, Set

from .matrix import ROOT, CannVersion, Matrix

# Test sources that ask about CANN's release themselves.
ASKS_ABOUT_CANN = re.compile(
    r"NPU_SIM_CANN_VERSION|GetCANNVersion|cann_version|cann_feature|_backend_info|collect_env"
)
# A source line that names CANN's version or features without asking (a
# declaration, a variable a runner strips from its children's environment)
# carries this marker, so that a helper module does not put its whole folder
# in every CANN row.
NOT_A_QUESTION = "cann-reach: not a question"
# Where ./dev test has the simulator and torch_npu log the questions asked.
LOG_VARIABLE = "NPU_SIM_CANN_REACH_LOG"
TAG_VARIABLE = "NPU_SIM_CANN_REACH_TAG"


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


def logged_paths(log: Path) -> Optional[Set[str]]:
    """The test files and folders (relative to the root) whose nodes asked a
    question in ``log``; None when one was asked outside any node."""
    paths = set()
    for line in log.read_text().splitlines():
        tag, _, _what = line.partition("\t")
        path = tag.split("::", 1)[0]
        if not path or path == ".":
            return None
        paths.add(path)
    return paths


def sources_asking(test_dirs: Iterable[str], root: Path = ROOT) -> Set[str]:
    """The test sources under ``test_dirs`` that name CANN's version or
    features: test modules themselves, and for a conftest or helper module,
    its whole folder."""
    found = set()
    for folder in test_dirs:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            text = "\n".join(line for line in path.read_text(errors="replace").splitlines()
                             if NOT_A_QUESTION not in line)
            if not ASKS_ABOUT_CANN.search(text):
                continue
            test_module = path.name.startswith("test_")
            found.add(str((path if test_module else path.parent).relative_to(root)))
    return found


def cann_row_tests(log: Path, test_dirs: List[str], root: Path = ROOT) -> List[str]:
    """What a row that differs only in CANN runs (Note [What a CANN row
    runs]): the files and folders whose tests asked a question in ``log`` (the
    default row's), and the test sources that ask themselves; all of
    ``test_dirs`` when a question was asked outside any test."""
    logged = logged_paths(log)
    if logged is None:
        return list(test_dirs)
    chosen = logged | sources_asking(test_dirs, root)
    # A folder chosen whole makes its files redundant on the command line.
    folders = {p for p in chosen if (root / p).is_dir()}
    return sorted(p for p in chosen
                  if not any(p != f and p.startswith(f + "/") for f in folders)
                  and any(p == d or p.startswith(d + "/") for d in test_dirs))
