"""scikit-build-core metadata provider: pin the torch a C++ package was built with.

A C++ extension of torch works only with the torch it was compiled against
(C++ ABI), so the wheel's ``Requires-Dist`` gets ``torch==<that version>``
(local label such as ``+cpu`` dropped: the CPU and CUDA builds share the ABI).
Used from the pyproject.toml of packages/core and packages/ops::

    [project]
    dynamic = ["dependencies"]

    [[tool.dynamic-metadata]]
    provider = { path = "../../compat/build_metadata", module = "torch_requirement" }
    field = "dependencies"
"""

from __future__ import annotations

import importlib.metadata
from typing import Any, Mapping


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict:
    if settings.get("field", "dependencies") != "dependencies":
        raise ValueError("torch_requirement only provides 'dependencies'")
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            "torch is not installed in the build environment: build with "
            "--no-build-isolation in an environment with the torch to build against, "
            "or let the [build-system] requirements install it") from None
    return {"dependencies": [f"torch=={version.split('+', 1)[0]}"]}
