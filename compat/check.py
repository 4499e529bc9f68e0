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

from . import packages as pkgs
from .matrix import ROOT, SWEEPS, Matrix, MatrixError, load_toml
from .render import generated_files


def _pyproject(package: pkgs.Package) -> dict:
    return load_toml(ROOT / package.folder / "pyproject.toml")


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
            problems.append(f"{rel} differs from what compat/ and the packages' pyproject.toml give: "
                            "run `python -m compat render`")
    return problems


def check_version_txt(matrix: Matrix) -> List[str]:
    lines = (ROOT / "version.txt").read_text().splitlines()
    listed = [l.strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]
    if sorted(listed) != sorted(matrix.torch_versions):
        return [f"version.txt lists {listed} but the supported rows of compat/matrix.toml "
                f"have torch {matrix.torch_versions}"]
    return []


def check_plugin_pins(matrix: Matrix) -> List[str]:
    """Plugins pin the core versions of the matrix and a torch it lists."""
    problems = []
    core_package = pkgs.core(matrix.package_list)
    core_name, core_spec = core_package.name, SpecifierSet(core_package.release)
    for plugin in pkgs.plugins(matrix.package_list):
        dist = plugin.name
        reqs = _requirements(_pyproject(plugin))
        core = reqs.get(core_name)
        if core is None:
            problems.append(f"{dist} does not pin {core_name}")
        elif core.specifier != core_spec:
            problems.append(f"{dist} pins {core_name}{core.specifier}, the release line of "
                            f"{core_name} {core_package.version} is {core_spec}")
        torch = reqs.get("torch")
        if torch is not None:  # static pin: must admit every torch of the matrix
            for v in matrix.torch_versions:
                if not torch.specifier.contains(Version(v)):
                    problems.append(f"{dist} requires torch{torch.specifier}, which excludes {v}")
    meta_package = pkgs.meta(matrix.package_list)
    if meta_package is not None:
        core = _requirements(_pyproject(meta_package)).get(core_name)
        if core is None or core.specifier != core_spec:
            problems.append(f"the {meta_package.name} meta-package must require {core_name}{core_spec}")
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
    for package in matrix.package_list:  # every C++ package (scikit-build-core) builds against the row's pins
        pyproject = _pyproject(package)
        if pyproject.get("build-system", {}).get("build-backend") != "scikit_build_core.build":
            continue
        build = _requirements(pyproject, "build")
        for tool, version in pins.items():
            req = build.get(tool)
            if req is None or str(req.specifier) != f"=={version}":
                problems.append(f"{package.folder}/pyproject.toml [build-system] must pin {tool}=={version}")
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
    for run in matrix.sweeps:
        if run.get("sweep") not in SWEEPS:
            problems.append(f"compat/runs.json records the sweep {run.get('sweep')!r}, which is no sweep "
                            f"(known: {', '.join(SWEEPS)})")
    return problems


CHECKS: List[Callable[[Matrix], List[str]]] = [
    check_generated,
    check_version_txt,
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
