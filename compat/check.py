"""The compat check: the tree agrees with the compat/ data.

Each check returns a list of problems (empty when fine); :func:`run_checks`
runs them all. Needs ``packaging`` (in every environment ./dev makes).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .matrix import ROOT, Matrix, MatrixError, load_toml
from .render import generated_files

PACKAGE_DIRS = {
    "torch-npu-core": "packages/core",
    "torch-npu-ops": "packages/ops",
    "torch-npu-distributed": "packages/distributed",
    "torch-npu-graph": "packages/graph",
    "torch-npu-profiler": "packages/profiler",
    "torch-npu": "packages/torch-npu",
}
PLUGINS = ("torch-npu-ops", "torch-npu-distributed", "torch-npu-graph", "torch-npu-profiler")
CORE = "torch-npu-core"


def _pyproject(dist: str) -> dict:
    return load_toml(ROOT / PACKAGE_DIRS[dist] / "pyproject.toml")


def _requirements(pyproject: dict, section: str = "dependencies") -> Dict[str, Requirement]:
    if section == "build":
        texts = pyproject.get("build-system", {}).get("requires", [])
    else:
        texts = pyproject.get("project", {}).get("dependencies", [])
        texts += pyproject.get("tool", {}).get("scikit-build", {}).get("metadata", {}) \
            .get("dependencies", {}).get("requires", [])
    return {Requirement(t).name.lower(): Requirement(t) for t in texts}


def check_generated(matrix: Matrix) -> List[str]:
    problems = []
    for path, text in generated_files(matrix).items():
        rel = path.relative_to(ROOT)
        if not path.exists():
            problems.append(f"{rel} is missing: run `python -m compat render`")
        elif path.read_text() != text:
            problems.append(f"{rel} differs from the compat/ data: run `python -m compat render`")
    return problems


def check_version_txt(matrix: Matrix) -> List[str]:
    lines = (ROOT / "version.txt").read_text().splitlines()
    listed = [l.strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]
    if sorted(listed) != sorted(matrix.torch_versions):
        return [f"version.txt lists {listed} but the supported rows of compat/matrix.toml "
                f"have torch {matrix.torch_versions}"]
    return []


def check_package_versions(matrix: Matrix) -> List[str]:
    problems = []
    for dist, folder in PACKAGE_DIRS.items():
        spec = matrix.packages.get(dist)
        if spec is None:
            problems.append(f"compat/matrix.toml [packages] has no {dist}")
            continue
        project = _pyproject(dist)["project"]
        version = project.get("version")
        if version is None or not SpecifierSet(spec).contains(Version(version), prereleases=True):
            problems.append(f"{folder}/pyproject.toml: {dist} {version} is outside the matrix's {spec}")
    return problems


def check_plugin_pins(matrix: Matrix) -> List[str]:
    """Plugins pin the core versions of the matrix and a torch it lists."""
    problems = []
    core_spec = SpecifierSet(matrix.packages[CORE])
    for dist in PLUGINS:
        reqs = _requirements(_pyproject(dist))
        core = reqs.get(CORE)
        if core is None:
            problems.append(f"{dist} does not pin {CORE}")
        elif core.specifier != core_spec:
            problems.append(f"{dist} pins {CORE}{core.specifier}, the matrix says {core_spec}")
        torch = reqs.get("torch")
        if torch is not None:  # static pin: must admit every torch of the matrix
            for v in matrix.torch_versions:
                if not torch.specifier.contains(Version(v)):
                    problems.append(f"{dist} requires torch{torch.specifier}, which excludes {v}")
    meta = _requirements(_pyproject("torch-npu"))
    core = meta.get(CORE)
    if core is None or core.specifier != core_spec:
        problems.append(f"the torch-npu meta-package must require {CORE}{core_spec}")
    return problems


def check_build_pins(matrix: Matrix) -> List[str]:
    """The default row's pins are what ./dev and the isolated builds use."""
    problems = []
    torch = matrix.default.torch
    pins = {"torch": torch, **matrix.pins(torch)}
    dev = (ROOT / "dev").read_text()
    defaults = {"torch": rf'DEFAULT_TORCH="{re.escape(torch)}"'}
    for tool, version in pins.items():
        pattern = defaults.get(tool, rf'DEV_{tool.upper()}:-{re.escape(version)}\}}')
        if not re.search(pattern, dev):
            problems.append(f"./dev: the default {tool} must be {version} (matrix default row)")
    for dist in PACKAGE_DIRS:  # every C++ package (scikit-build-core) builds against the row's pins
        pyproject = _pyproject(dist)
        if pyproject.get("build-system", {}).get("build-backend") != "scikit_build_core.build":
            continue
        build = _requirements(pyproject, "build")
        for tool, version in pins.items():
            req = build.get(tool)
            if req is None or str(req.specifier) != f"=={version}":
                problems.append(f"{PACKAGE_DIRS[dist]}/pyproject.toml [build-system] must pin {tool}=={version}")
    return problems


def check_cann_axis(matrix: Matrix) -> List[str]:
    in_rows = {r.cann for r in matrix.supported}
    if set(matrix.emulated_cann) != in_rows:
        return [f"[cann] emulated = {matrix.emulated_cann} but supported rows use {sorted(in_rows)}"]
    return []


def check_runs(matrix: Matrix) -> List[str]:
    problems = []
    keys = {r.key for r in matrix.supported}
    for run in matrix.runs:
        if run.get("row") not in keys:
            problems.append(f"compat/runs.json records {run.get('row')}, which is no supported row")
        for key in ("date", "command", "summary"):
            if not run.get(key):
                problems.append(f"compat/runs.json: the run of {run.get('row')} has no {key}")
    return problems


CHECKS: List[Callable[[Matrix], List[str]]] = [
    check_generated,
    check_version_txt,
    check_package_versions,
    check_plugin_pins,
    check_build_pins,
    check_cann_axis,
    check_runs,
]


def run_checks(matrix: Matrix) -> List[str]:
    problems: List[str] = []
    for check in CHECKS:
        try:
            problems += check(matrix)
        except (MatrixError, OSError, KeyError) as exc:
            problems.append(f"{check.__name__}: {exc}")
    return problems
