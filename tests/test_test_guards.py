"""The checks every test run of the tree shares (the root conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_module_that_keeps_npu_memory_from_its_import_fails_naming_itself(tmp_path):
    # Note [Test modules hold no device memory]: run pytest on a copy of the
    # root conftest beside two modules, one making its tensor inside the test.
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_at_import.py").write_text(textwrap.dedent("""\
        import torch, torch_npu
        KEPT = torch.ones(1024, device="npu")
        def test_uses_it():
            assert KEPT.sum().item() == 1024
    """))
    (tmp_path / "test_inside.py").write_text(textwrap.dedent("""\
        import torch, torch_npu
        def test_makes_its_own():
            assert torch.ones(4, device="npu").sum().item() == 4
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "--continue-on-collection-errors", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "importing test_at_import.py left 4096 bytes of npu memory allocated" in out, out
    assert "1 passed, 1 error" in out, out
