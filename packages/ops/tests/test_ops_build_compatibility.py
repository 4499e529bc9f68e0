"""torch-npu-ops refuses to load against a core or torch it was not built for."""

from __future__ import annotations

import importlib.metadata

import torch

import torch_npu
from torch_npu.ops import _build_info


def test_build_info_matches_the_installed_core_and_torch():
    assert _build_info.BUILT_WITH_CORE == torch_npu.__version__
    assert _build_info.BUILT_WITH_TORCH == torch.__version__.split("+")[0]
    requires = importlib.metadata.requires("torch-npu-ops")
    # the wheel pins the torch it was compiled against, and the core line
    assert f"torch=={_build_info.BUILT_WITH_TORCH}" in requires
    assert "torch-npu-core==0.1.*" in requires


def test_ops_built_for_another_core_is_refused(python_subprocess_env):
    # Pretend the installed torch-npu-core is 0.2.0: ops (built against 0.1.x)
    # must not load its extension, and say what to install.
    result = python_subprocess_env("""
        import importlib.metadata, warnings
        real = importlib.metadata.version
        importlib.metadata.version = lambda d: "0.2.0" if d == "torch-npu-core" else real(d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, torch_npu
        print([str(w.message) for w in caught if "plugin 'ops'" in str(w.message)])
        print(torch_npu._plugins.loaded_plugins()["ops"].status)
        try:
            import torch_npu.ops
        except ImportError as exc:
            print(type(exc).__name__, exc)
    """, {"TORCH_NPU_BACKEND": "simulator"})
    assert result.returncode == 0, result.stderr
    warning, status, error = result.stdout.splitlines()
    assert "not compatible and was not loaded" in warning
    assert status == "incompatible"
    assert error.startswith("PluginVersionError torch-npu-ops 0.1.0 cannot be loaded: it was built "
                            "against torch-npu-core 0.1.0 but torch-npu-core 0.2.0 is installed")
    assert "pip install 'torch-npu-core==0.1.*'" in error
