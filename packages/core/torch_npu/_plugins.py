"""Plugin loading for torch_npu.

torch-npu is split into separately installed distributions. ``torch-npu-core``
owns the ``torch_npu`` package; every other distribution (torch-npu-ops,
torch-npu-profiler, ...) is a *plugin* that

* installs its code as a subpackage of ``torch_npu`` (for example the files
  ``torch_npu/profiler/__init__.py``; a plugin never ships
  ``torch_npu/__init__.py``), and
* declares an entry point in the group ``torch_npu.plugins`` whose *name* is
  that subpackage's name and whose *value* is either the subpackage (a
  module) or an initialiser ``init(package_module) -> None`` that is called
  with the ``torch_npu`` module itself::

      [project.entry-points."torch_npu.plugins"]
      profiler = "torch_npu.profiler:_initialize"

Core never imports a plugin by name. It only knows the names of the plugins
of this project (:data:`KNOWN_PLUGINS`, generated from the packages'
pyproject.toml files into ``_package_list.py``) so that using one that is
not installed gives an error that says what to install.

This module is deliberately standalone: it imports nothing from torch_npu
(nor torch) but the data-only ``_package_list.py`` beside it, so it can be
imported before the compiled extension exists and tested on its own. Every
function that depends on the package takes its name as ``package`` (default
``"torch_npu"``).

Intended use in ``torch_npu/__init__.py``::

    from . import _plugins
    _plugins.install_missing_plugin_hook(__name__)

    def __getattr__(name):
        return _plugins.module_getattr(name, __name__)

    _plugins.load_plugins()   # at the end, once torch_npu is usable
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Dict, Iterable, Optional


def _load_package_list() -> ModuleType:
    """The generated ``_package_list`` module beside this file.

    A relative import when this module is ``torch_npu._plugins``; loaded by
    path when this file is loaded on its own (its tests, tools), where there
    is no parent package to import from.
    """
    if __package__:
        from . import _package_list

        return _package_list
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_package_list.py")
    spec = importlib.util.spec_from_file_location(f"{__name__}._package_list", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_package_list = _load_package_list()

__all__ = [
    "KNOWN_PLUGINS",
    "DISTRIBUTION_EXTRAS",
    "ENTRY_POINT_GROUP",
    "CORE_DISTRIBUTION",
    "DISABLE_ENV_VAR",
    "PluginInfo",
    "PluginLoadWarning",
    "MissingPluginError",
    "PluginVersionError",
    "check_plugin_build",
    "install_missing_plugin_hook",
    "uninstall_missing_plugin_hook",
    "module_getattr",
    "load_plugins",
    "loaded_plugins",
    "missing_plugin_message",
]

DEFAULT_PACKAGE = "torch_npu"
ENTRY_POINT_GROUP = "torch_npu.plugins"
CORE_DISTRIBUTION: str = _package_list.CORE_DISTRIBUTION
META_DISTRIBUTION: Optional[str] = _package_list.META_DISTRIBUTION

#: Set to ``1``/``all`` to load no plugin, or to a comma-separated list of
#: plugin names to skip only those (for debugging a plugin that breaks the
#: import).
DISABLE_ENV_VAR = "TORCH_NPU_DISABLE_PLUGINS"

#: Submodule of ``torch_npu`` -> pip distribution that provides it. Used only
#: for error messages; nothing is imported from this table.
KNOWN_PLUGINS: Dict[str, str] = dict(_package_list.PLUGIN_MODULES)

#: Plugin distribution -> extra of the ``torch-npu`` meta-package that
#: installs it (``pip install 'torch-npu[profiler]'``).
DISTRIBUTION_EXTRAS: Dict[str, str] = dict(_package_list.META_EXTRAS)

# Plugin status values recorded in PluginInfo.status.
LOADED = "loaded"
FAILED = "failed"  # importing or initialising it raised
INCOMPATIBLE = "incompatible"  # built for another torch-npu-core version
CONFLICT = "conflict"  # another distribution already provides this name
DISABLED = "disabled"  # skipped because of TORCH_NPU_DISABLE_PLUGINS


class PluginLoadWarning(RuntimeWarning):
    """A plugin was found but could not be loaded; torch_npu works without it."""


class MissingPluginError(ModuleNotFoundError):
    """A torch_npu subpackage provided by a plugin that is not installed."""


class PluginVersionError(ImportError):
    """A plugin does not fit the installed torch-npu-core (or torch)."""


@dataclass(frozen=True)
class PluginInfo:
    """What :func:`load_plugins` did with one entry point."""

    name: str  # entry point name == submodule of the package
    distribution: Optional[str]  # distribution that declared the entry point
    version: Optional[str]  # that distribution's version
    value: str  # the entry point's value, e.g. "torch_npu.profiler:_init"
    status: str  # LOADED, FAILED, INCOMPATIBLE, CONFLICT or DISABLED
    error: Optional[str] = None  # "ExcType: message" when not loaded

    @property
    def ok(self) -> bool:
        return self.status == LOADED


# package name -> {plugin key -> PluginInfo}, filled by load_plugins().
_RECORDS: Dict[str, Dict[str, PluginInfo]] = {}
# packages whose load_plugins() is running (guards against re-entry from a
# plugin that calls load_plugins() while being initialised).
_LOADING: set = set()


# --------------------------------------------------------------------------
# Error messages for plugins that are not installed
# --------------------------------------------------------------------------


def _normalize(dist_name: str) -> str:
    """PEP 503 normalisation, enough to compare distribution names."""
    out = []
    prev_sep = False
    for ch in dist_name.lower():
        if ch in "-_.":
            if not prev_sep:
                out.append("-")
            prev_sep = True
        else:
            out.append(ch)
            prev_sep = False
    return "".join(out)


def missing_plugin_message(name: str, package: str = DEFAULT_PACKAGE) -> str:
    """The error message for ``package.name`` when that plugin is unusable.

    Says which distribution (and meta-package extra) provides it; if the
    distribution is installed but failed to load, says that instead.
    """
    fullname = f"{package}.{name}"
    info = _RECORDS.get(package, {}).get(name)
    if info is not None and not info.ok:
        dist = info.distribution or "its distribution"
        version = f" {info.version}" if info.version else ""
        return (
            f"{fullname} is provided by the {dist}{version} package, which is "
            f"installed but was not loaded ({info.status}: {info.error}). "
            f"See the warning printed when {package} was imported."
        )
    dist = KNOWN_PLUGINS.get(name)
    if dist is None:
        return f"No module named {fullname!r}"
    hint = f"`pip install {dist}`"
    extra = DISTRIBUTION_EXTRAS.get(dist)
    if extra:
        hint += f" or `pip install '{META_DISTRIBUTION}[{extra}]'`"
    return (
        f"{fullname} is provided by the {dist} package, which is not "
        f"installed. Install it with {hint}."
    )


def _missing_plugin_error(name: str, package: str) -> MissingPluginError:
    fullname = f"{package}.{name}"
    return MissingPluginError(missing_plugin_message(name, package), name=fullname)


def _plugin_names(package: str) -> Iterable[str]:
    names = set(KNOWN_PLUGINS)
    names.update(_RECORDS.get(package, {}))
    return names


class _MissingPluginFinder:
    """Last entry of ``sys.meta_path``: turns "No module named
    'torch_npu.profiler'" into a message that says what to install.

    Because it comes after the standard path finder, it is only asked about a
    plugin subpackage that no other finder found, i.e. one that is not
    installed (or not importable); an installed plugin never reaches it.
    Note that ``importlib.util.find_spec("torch_npu.profiler")`` therefore
    raises :class:`MissingPluginError` (a ModuleNotFoundError) rather than
    returning None for a missing plugin.
    """

    def __init__(self, package: str) -> None:
        self.package = package
        self._prefix = package + "."

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        if not fullname.startswith(self._prefix):
            return None
        name = fullname[len(self._prefix) :]
        if "." in name or name not in _plugin_names(self.package):
            return None
        raise _missing_plugin_error(name, self.package)

    def invalidate_caches(self) -> None:  # part of the finder protocol
        pass

    def __repr__(self) -> str:
        return f"<torch_npu missing-plugin finder for {self.package!r}>"


def install_missing_plugin_hook(package: str = DEFAULT_PACKAGE) -> None:
    """Append the missing-plugin finder for ``package`` to ``sys.meta_path``.

    Idempotent: installing it twice for the same package does nothing.
    """
    for finder in sys.meta_path:
        if isinstance(finder, _MissingPluginFinder) and finder.package == package:
            return
    sys.meta_path.append(_MissingPluginFinder(package))


def uninstall_missing_plugin_hook(package: str = DEFAULT_PACKAGE) -> None:
    """Remove the finder installed by :func:`install_missing_plugin_hook`."""
    sys.meta_path[:] = [
        f
        for f in sys.meta_path
        if not (isinstance(f, _MissingPluginFinder) and f.package == package)
    ]


def module_getattr(name: str, package: str = DEFAULT_PACKAGE) -> Any:
    """Implementation of the package's module-level ``__getattr__``.

    ``torch_npu.profiler`` imports the installed plugin subpackage and
    returns it, or raises :class:`MissingPluginError` (an ImportError) saying
    what to install. Any other unknown name raises AttributeError.
    """
    if name.startswith("__") or name not in _plugin_names(package):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    fullname = f"{package}.{name}"
    import importlib

    try:
        return importlib.import_module(fullname)
    except MissingPluginError:
        raise
    except ModuleNotFoundError as exc:
        # Only our own module being absent is translated; a missing
        # dependency *inside* an installed plugin propagates unchanged.
        if exc.name != fullname:
            raise
        raise _missing_plugin_error(name, package) from None


# --------------------------------------------------------------------------
# Compatibility of a plugin with the installed core
# --------------------------------------------------------------------------


def _core_version(core_distribution: str) -> Optional[str]:
    import importlib.metadata

    try:
        return importlib.metadata.version(core_distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_plugin_compatibility(
    dist: Any,
    core_version: Optional[str] = None,
    core_distribution: str = CORE_DISTRIBUTION,
) -> None:
    """Raise ImportError if plugin distribution ``dist`` does not fit this core.

    This is the hook for the compatibility matrix (a later issue will make it
    stricter, e.g. an ABI tag baked in at build time). For now it reads the
    plugin's ``Requires-Dist`` entries on ``core_distribution`` and checks the
    installed core version against them with ``packaging``; without
    ``packaging``, or when core's own metadata is absent (running from a
    source tree), nothing is checked.

    ``dist`` is an ``importlib.metadata.Distribution`` (or any object with
    ``.requires`` and ``.metadata``). ``core_version`` defaults to the
    installed version of ``core_distribution``.
    """
    if dist is None:
        return
    requires = dist.requires or []
    wanted = _normalize(core_distribution)
    if not any(wanted in _normalize(r.split(";")[0]) for r in requires):
        return  # cheap pre-filter: no requirement names core
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return
    if core_version is None:
        core_version = _core_version(core_distribution)
        if core_version is None:
            return
    try:
        core = Version(core_version)
    except InvalidVersion:
        return
    plugin_name = dist.metadata["Name"] if dist.metadata else "a plugin"
    plugin_version = dist.version if dist.metadata else "?"
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if _normalize(req.name) != wanted:
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({"extra": ""}):
                    continue  # e.g. only for an extra of the plugin
            except Exception:
                continue
        if req.specifier and not req.specifier.contains(core, prereleases=True):
            raise ImportError(
                f"{plugin_name} {plugin_version} requires "
                f"{core_distribution}{req.specifier} but {core_distribution} "
                f"{core_version} is installed. Install matching versions, e.g. "
                f"`pip install --upgrade {plugin_name} {core_distribution}`."
            )


def _minor_release(version: str) -> str:
    """ "0.1.3" -> "0.1"; "2.13.0+cpu" -> "2.13"."""
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def check_plugin_build(
    distribution: str,
    plugin_version: str,
    built_with_core: str,
    built_with_torch: str,
    *,
    core_version: Optional[str] = None,
    torch_version: Optional[str] = None,
) -> None:
    """Raise :class:`PluginVersionError` if a compiled plugin was built for
    another core or torch than the installed ones.

    A compiled plugin links core's C++ runtime and torch's C++ API, whose
    ABIs hold within a minor release (core's CMake package says
    SameMinorVersion; torch changes its ABI between minor releases). A plugin
    calls this with the versions baked into it at build time, before it loads
    its extension (which would otherwise fail with an undefined symbol, or
    worse, not fail). ``core_version`` and ``torch_version`` default to the
    installed distributions.
    """
    import importlib.metadata

    if core_version is None:
        core_version = _core_version(CORE_DISTRIBUTION)
    if torch_version is None:
        try:
            torch_version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = None
    problems = []
    if core_version is not None and _minor_release(core_version) != _minor_release(built_with_core):
        problems.append(
            f"it was built against {CORE_DISTRIBUTION} {built_with_core} but "
            f"{CORE_DISTRIBUTION} {core_version} is installed"
        )
    if torch_version is not None and _minor_release(torch_version) != _minor_release(built_with_torch):
        problems.append(
            f"it was built against torch {built_with_torch} but torch {torch_version} is installed"
        )
    if problems:
        raise PluginVersionError(
            f"{distribution} {plugin_version} cannot be loaded: {'; '.join(problems)}. "
            f"A compiled plugin works only with the {CORE_DISTRIBUTION} and torch minor "
            f"releases it was built with (C++ ABI). Install matching versions, e.g. "
            f"`pip install '{CORE_DISTRIBUTION}=={_minor_release(built_with_core)}.*' "
            f"'torch=={built_with_torch}'`, or rebuild {distribution} in this environment."
        )


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def _disabled_plugins() -> set:
    raw = os.environ.get(DISABLE_ENV_VAR, "").strip()
    if not raw or raw.lower() in ("0", "false", "no", "off"):
        return set()
    if raw.lower() in ("1", "true", "yes", "on", "all", "*"):
        return {"*"}
    return {part.strip() for part in raw.split(",") if part.strip()}


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _initialise(ep: Any, package: str) -> None:
    """Import ``ep``'s value and initialise it for ``package``."""
    import types

    obj = ep.load()
    fullname = f"{package}.{ep.name}"
    parent = sys.modules.get(package)
    if isinstance(obj, types.ModuleType):
        # The value is the plugin's module. If it lives elsewhere than
        # package.<name>, make it reachable under that name as well.
        if obj.__name__ != fullname:
            sys.modules.setdefault(fullname, obj)
            if parent is not None and not hasattr(parent, ep.name):
                setattr(parent, ep.name, obj)
        return
    if callable(obj):
        if parent is None:
            import importlib

            parent = importlib.import_module(package)
        obj(parent)
        return
    raise TypeError(
        f"entry point value {ep.value!r} is neither a module nor a callable "
        f"(got {type(obj).__name__})"
    )


def load_plugins(
    package: str = DEFAULT_PACKAGE,
    *,
    group: str = ENTRY_POINT_GROUP,
    core_distribution: str = CORE_DISTRIBUTION,
    core_version: Optional[str] = None,
) -> Dict[str, PluginInfo]:
    """Import and initialise every plugin registered in ``group``.

    Returns (and records, see :func:`loaded_plugins`) one :class:`PluginInfo`
    per entry point, keyed by plugin name. A plugin that raises while being
    checked, imported or initialised is reported with a
    :class:`PluginLoadWarning` naming it and the error and recorded with a
    non-``loaded`` status; the others still load and this function itself
    does not raise (except for KeyboardInterrupt and the like).

    Called again for the same package, it returns the existing record
    without loading anything a second time.
    """
    if package in _RECORDS:
        return dict(_RECORDS[package])
    if package in _LOADING:  # called by a plugin while loading
        return {}
    _LOADING.add(package)
    record: Dict[str, PluginInfo] = {}
    try:
        import importlib.metadata

        disabled = _disabled_plugins()
        eps = importlib.metadata.entry_points(group=group)
        for ep in sorted(eps, key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            dist_name = dist_version = None
            if dist is not None:
                try:
                    dist_name = dist.metadata["Name"]
                    dist_version = dist.version
                except Exception:  # broken metadata: still try to load it
                    pass

            def note(status: str, error: Optional[str] = None, key: str = ep.name):
                record[key] = PluginInfo(
                    ep.name, dist_name, dist_version, ep.value, status, error
                )

            where = f"{dist_name} {dist_version}" if dist_name else ep.value
            if ep.name in record:
                other = record[ep.name].distribution
                msg = (
                    f"plugin name {ep.name!r} is already provided by {other}; "
                    f"ignoring the one from {where}"
                )
                note(CONFLICT, msg, key=f"{ep.name} ({dist_name or ep.value})")
                warnings.warn(f"{package}: {msg}", PluginLoadWarning, stacklevel=2)
                continue
            if "*" in disabled or ep.name in disabled:
                note(DISABLED, f"disabled by {DISABLE_ENV_VAR}")
                continue
            try:
                _check_plugin_compatibility(dist, core_version, core_distribution)
            except Exception as exc:
                note(INCOMPATIBLE, _describe(exc))
                warnings.warn(
                    f"{package}: plugin {ep.name!r} ({where}) is not compatible "
                    f"and was not loaded: {_describe(exc)}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            try:
                _initialise(ep, package)
            except PluginVersionError as exc:
                note(INCOMPATIBLE, _describe(exc))
                warnings.warn(
                    f"{package}: plugin {ep.name!r} ({where}) is not compatible "
                    f"and was not loaded: {exc}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            except Exception as exc:
                note(FAILED, _describe(exc))
                warnings.warn(
                    f"{package}: plugin {ep.name!r} ({where}) failed to load; "
                    f"continuing without it: {_describe(exc)}",
                    PluginLoadWarning,
                    stacklevel=2,
                )
                continue
            note(LOADED)
    finally:
        _LOADING.discard(package)
        _RECORDS[package] = record
    return dict(record)


def loaded_plugins(package: str = DEFAULT_PACKAGE) -> Dict[str, PluginInfo]:
    """The record made by :func:`load_plugins` (empty if it has not run)."""
    return dict(_RECORDS.get(package, {}))
