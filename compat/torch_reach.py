"""What a row of another torch version runs.

Note [What another torch's row runs]: a row that differs from the default
row in torch's version rebuilds every package against that torch and runs
the test suite again, except what cannot depend on torch's version:

* the long sweeps of ./dev's DEFAULT_ROW_ONLY (sampled elsewhere), and
* the test folders none of whose Python sources import torch or torch_npu
  (:func:`torch_free_folders`). Today that is the simulator's folder: the
  simulator library is built without torch (csrc/simulator/CMakeLists.txt)
  and its tests load it with ctypes, so another torch builds the same
  library from the same sources and its tests would run the same code.

The folders are derived from the sources at each run: a test of such a
folder that starts importing torch brings the folder back into every row.
The match is textual and conservative: code run in a child process from a
string counts too.

Only the standard library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, List

ROOT = Path(__file__).resolve().parents[1]
IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+torch(?:_npu)?\b", re.MULTILINE)


def torch_free_folders(test_dirs: Iterable[str], root: Path = ROOT) -> List[str]:
    """The folders under ``test_dirs`` (relative to ``root``) that hold test
    modules and whose Python sources, subfolders included, never import
    torch or torch_npu; a folder listed makes its subfolders redundant."""
    found: List[str] = []
    for test_dir in test_dirs:
        top = root / test_dir
        folders = sorted({p.parent for p in top.rglob("test_*.py") if "__pycache__" not in p.parts})
        for folder in folders:
            sources = [p for p in folder.rglob("*.py") if "__pycache__" not in p.parts]
            if any(IMPORTS_TORCH.search(p.read_text(errors="replace")) for p in sources):
                continue
            relative = str(folder.relative_to(root))
            if not any(relative.startswith(f + "/") for f in found):
                found.append(relative)
    return found
