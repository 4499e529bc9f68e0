"""The packages of the monorepo, read from their own ``pyproject.toml``.

A package is a folder ``packages/<folder>/`` with a ``pyproject.toml``;
folders whose name starts with ``_`` (``packages/_template``) are not
packages. Everything the tooling needs to know about a package comes from
its pyproject:

- ``[project]``: the distribution name, version and dependencies;
- the ``torch_npu.plugins`` entry point: a plugin's name (also the extra of
  the ``torch-npu`` meta-package that installs it);
- the wheel's file selection (scikit-build-core's ``wheel.packages`` or
  hatchling's ``only-include``): the ``torch_npu`` submodules a plugin installs;
- ``[tool.torch-npu]``: what nothing else says, namely the package's ``role``
  (``core``, ``plugin`` or ``meta``) and ``dev-install``, how ``./dev`` installs it
  into the development environment (``editable``, ``wheel`` or ``no``).

``python -m compat render`` turns this into the lists that cannot read TOML
themselves (``./dev`` is bash, core's ``_plugins.py`` must import without
anything but the standard library) and into the meta-package's extras; the
compat check fails when they drift.

Only the standard library (tomllib; tomli on Python 3.10).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .matrix import ROOT, MatrixError, load_toml

PACKAGES_DIR = ROOT / "packages"
PLUGIN_GROUP = "torch_npu.plugins"
TOP_PACKAGE = "torch_npu"

CORE, PLUGIN, META = "core", "plugin", "meta"
ROLES = (CORE, PLUGIN, META)
# editable: core, whose .py files are then served from the source tree.
# wheel: the plugins; scikit-build-core's editable finder for a subpackage of
#   torch_npu claims the whole torch_npu namespace and would hide core.
# no: the meta-package, which has no code (the nox build and install_check
#   sessions still build and install its wheel).
DEV_INSTALL_MODES = ("editable", "wheel", "no")


@dataclass(frozen=True)
class Package:
    """One package of the monorepo, as its ``pyproject.toml`` describes it."""

    folder: str  # relative to the repository root, e.g. "packages/ops"
    name: str  # the distribution, e.g. "torch-npu-ops"
    version: str
    role: str  # CORE, PLUGIN or META
    dev_install: str  # one of DEV_INSTALL_MODES
    requires: Tuple[str, ...]  # the other packages of the monorepo it needs (to build or to run)
    plugin: Optional[str] = None  # a plugin's entry-point name (torch_npu.<plugin>)
    modules: Tuple[str, ...] = ()  # the torch_npu submodules a plugin installs

    @property
    def release(self) -> str:
        """The version range of this package's release line, e.g. ``==0.1.*``:
        what plugins pin of core, and what the compatibility matrix accepts."""
        parts = self.version.split(".")
        return "==" + ".".join(parts[:2]) + ".*"


def _wheel_modules(pyproject: Dict[str, Any]) -> List[str]:
    """The ``torch_npu`` submodules the wheel ships, from its build backend's
    file selection: a plugin ships ``torch_npu/<module>`` folders, never
    ``torch_npu/__init__.py`` (which is core's)."""
    tool = pyproject.get("tool", {})
    selected: Iterable[str] = tool.get("scikit-build", {}).get("wheel", {}).get("packages", [])
    selected = list(selected)  # a table (source -> destination) or a list
    selected += tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}) \
        .get("only-include", [])
    modules = []
    for path in selected:
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == TOP_PACKAGE:
            modules.append(parts[1])
    return sorted(modules)


def _dependency_names(pyproject: Dict[str, Any]) -> List[str]:
    texts = list(pyproject.get("build-system", {}).get("requires", []))
    project = pyproject.get("project", {})
    texts += project.get("dependencies", [])
    for extra in project.get("optional-dependencies", {}).values():
        texts += extra
    # PEP 508: the name is what precedes the first of these characters.
    return [re.split(r"[\s\[<>=!~;@(]", t.strip(), maxsplit=1)[0].lower() for t in texts]


def read_package(directory: Path, root: Path = ROOT) -> Package:
    """The :class:`Package` in ``directory`` (which holds a pyproject.toml)."""
    where = f"{directory.relative_to(root).as_posix()}/pyproject.toml"
    pyproject = load_toml(directory / "pyproject.toml")
    project = pyproject.get("project", {})
    ours = pyproject.get("tool", {}).get("torch-npu", {})
    for key in ("name", "version"):
        if not project.get(key):
            raise MatrixError(f"{where}: [project] has no {key}")
    role, dev_install = ours.get("role"), ours.get("dev-install")
    if role not in ROLES:
        raise MatrixError(f"{where}: [tool.torch-npu] role must be one of {ROLES}, got {role!r}")
    if dev_install not in DEV_INSTALL_MODES:
        raise MatrixError(f"{where}: [tool.torch-npu] dev-install must be one of "
                          f"{DEV_INSTALL_MODES}, got {dev_install!r}")
    entry_points = sorted(project.get("entry-points", {}).get(PLUGIN_GROUP, {}))
    plugin, modules = None, ()
    if role == PLUGIN:
        if len(entry_points) != 1:
            raise MatrixError(f'{where}: a plugin declares one [project.entry-points."{PLUGIN_GROUP}"] '
                              f"entry, found {entry_points}")
        plugin = entry_points[0]
        modules = tuple(_wheel_modules(pyproject))
        if plugin not in modules:
            raise MatrixError(f"{where}: the plugin {plugin!r} must ship {TOP_PACKAGE}/{plugin} "
                              f"(its wheel ships {[f'{TOP_PACKAGE}/{m}' for m in modules]})")
    elif entry_points:
        raise MatrixError(f"{where}: only a plugin declares a {PLUGIN_GROUP} entry point")
    return Package(
        folder=directory.relative_to(root).as_posix(),
        name=project["name"],
        version=project["version"],
        role=role,
        dev_install=dev_install,
        requires=tuple(_dependency_names(pyproject)),
        plugin=plugin,
        modules=modules,
    )


def _build_order(packages: List[Package]) -> List[Package]:
    """Every package after the packages of the monorepo it requires (core
    before its plugins); otherwise in folder order, so the order is stable."""
    names = {p.name for p in packages}
    pending = sorted(packages, key=lambda p: p.folder)
    ordered: List[Package] = []
    done: set = set()
    while pending:
        ready = [p for p in pending if all(r in done for r in p.requires if r in names and r != p.name)]
        if not ready:
            raise MatrixError("the packages require each other in a cycle: "
                              + ", ".join(p.name for p in pending))
        for p in ready:
            ordered.append(p)
            done.add(p.name)
        pending = [p for p in pending if p.name not in done]
    return ordered


def discover(root: Path = ROOT) -> List[Package]:
    """The packages under ``root/packages``, in build order.

    Raises :class:`~compat.matrix.MatrixError` when the pyprojects do not
    describe exactly one core, at most one meta-package and uniquely named
    plugins and modules."""
    packages = [read_package(d, root) for d in sorted((root / "packages").iterdir())
                if (d / "pyproject.toml").is_file() and not d.name.startswith("_")]
    roles = [p.role for p in packages]
    if roles.count(CORE) != 1 or roles.count(META) > 1:
        raise MatrixError(f"packages/ must hold one core package and at most one meta-package, "
                          f"found roles {roles}")
    seen: Dict[str, str] = {}
    for p in packages:
        for key in (p.name, *(f"{TOP_PACKAGE}.{m}" for m in p.modules)):
            if key in seen:
                raise MatrixError(f"{key} is claimed by both {seen[key]} and {p.folder}")
            seen[key] = p.folder
    return _build_order(packages)


def core(packages: List[Package]) -> Package:
    return next(p for p in packages if p.role == CORE)


def meta(packages: List[Package]) -> Optional[Package]:
    return next((p for p in packages if p.role == META), None)


def plugins(packages: List[Package]) -> List[Package]:
    """The plugins, sorted by name (the order of the meta-package's extras)."""
    return sorted((p for p in packages if p.role == PLUGIN), key=lambda p: p.plugin)
