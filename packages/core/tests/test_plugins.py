"""Tests of torch_npu._plugins that need neither torch nor the C++ extension.

_plugins.py is loaded by file path, and the package it serves is a stand-in
created on disk under a made-up name, so an installed (or editable)
torch_npu never interferes.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
import uuid
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

PLUGINS_PY = Path(__file__).resolve().parents[1] / "torch_npu" / "_plugins.py"


@pytest.fixture
def plugins():
    """A fresh copy of the _plugins module, loaded by path."""
    name = f"_plugins_under_test_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, PLUGINS_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    sys.meta_path[:] = [
        f for f in sys.meta_path if not isinstance(f, module._MissingPluginFinder)
    ]
    del sys.modules[name]


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An importable empty package with a unique name; returns (name, dir)."""
    name = f"fakenpu_{uuid.uuid4().hex[:12]}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name, pkg
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------------------
# Known plugins and messages
# ---------------------------------------------------------------------------


def test_known_plugins(plugins):
    assert plugins.KNOWN_PLUGINS == {
        "ops": "torch-npu-ops",
        "contrib": "torch-npu-ops",
        "optim": "torch-npu-ops",
        "distributed": "torch-npu-distributed",
        "graph": "torch-npu-graph",
        "profiler": "torch-npu-profiler",
    }
    # every plugin distribution has an extra of the meta-package
    for dist in plugins.KNOWN_PLUGINS.values():
        assert dist in plugins.DISTRIBUTION_EXTRAS


def test_missing_message_names_package_and_extra(plugins):
    msg = plugins.missing_plugin_message("profiler")
    assert msg == (
        "torch_npu.profiler is provided by the torch-npu-profiler package, which "
        "is not installed. Install it with `pip install torch-npu-profiler` or "
        "`pip install 'torch-npu[profiler]'`."
    )
    msg = plugins.missing_plugin_message("contrib", "otherpkg")
    assert msg.startswith("otherpkg.contrib is provided by the torch-npu-ops package")
    assert "'torch-npu[ops]'" in msg


def test_standalone_import_does_not_import_torch():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(PLUGINS_PY)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['p'] = m\n"
        "spec.loader.exec_module(m)\n"
        "assert 'torch' not in sys.modules and 'torch_npu' not in sys.modules\n"
        "assert 'importlib.metadata' not in sys.modules, 'metadata must be lazy'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------
# The missing-plugin finder
# ---------------------------------------------------------------------------


def test_finder_explains_missing_plugin(plugins, fake_package):
    pkg, _ = fake_package
    plugins.install_missing_plugin_hook(pkg)
    plugins.install_missing_plugin_hook(pkg)  # idempotent
    finders = [f for f in sys.meta_path if isinstance(f, plugins._MissingPluginFinder)]
    assert len(finders) == 1 and sys.meta_path[-1] is finders[0]

    with pytest.raises(ImportError) as info:
        importlib.import_module(f"{pkg}.profiler")
    assert isinstance(info.value, ModuleNotFoundError)
    assert info.value.name == f"{pkg}.profiler"
    assert "torch-npu-profiler package, which is not installed" in str(info.value)
    assert "pip install 'torch-npu[profiler]'" in str(info.value)

    with pytest.raises(ImportError, match="torch-npu-distributed"):
        exec(f"from {pkg}.distributed import something", {})
    with pytest.raises(ImportError, match="torch-npu-ops"):
        exec(f"import {pkg}.contrib.module", {})


def test_finder_ignores_unknown_names(plugins, fake_package):
    pkg, _ = fake_package
    plugins.install_missing_plugin_hook(pkg)
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module(f"{pkg}.no_such_module")
    assert not isinstance(info.value, plugins.MissingPluginError)
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("profiler")  # not under the package
    assert not isinstance(info.value, plugins.MissingPluginError)


def test_finder_does_not_interfere_with_installed_plugin(plugins, fake_package, tmp_path):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "graph" / "__init__.py", "VALUE = 'graph plugin'\n")
    plugins.install_missing_plugin_hook(pkg)
    mod = importlib.import_module(f"{pkg}.graph")
    assert mod.VALUE == "graph plugin"
    namespace = {}
    exec(f"from {pkg}.graph import VALUE", namespace)
    assert namespace["VALUE"] == "graph plugin"


def test_uninstall_hook(plugins, fake_package):
    pkg, _ = fake_package
    plugins.install_missing_plugin_hook(pkg)
    plugins.uninstall_missing_plugin_hook(pkg)
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module(f"{pkg}.profiler")
    assert not isinstance(info.value, plugins.MissingPluginError)


# ---------------------------------------------------------------------------
# module_getattr
# ---------------------------------------------------------------------------


def test_module_getattr_imports_installed_plugin(plugins, fake_package):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", "NAME = 'ops'\n")
    mod = plugins.module_getattr("ops", pkg)
    assert mod.NAME == "ops"
    assert getattr(sys.modules[pkg], "ops") is mod


def test_module_getattr_missing_plugin_raises_import_error(plugins, fake_package):
    pkg, _ = fake_package
    # works with or without the finder installed
    for install in (False, True):
        if install:
            plugins.install_missing_plugin_hook(pkg)
        with pytest.raises(ImportError) as info:
            plugins.module_getattr("profiler", pkg)
        assert isinstance(info.value, plugins.MissingPluginError)
        assert "pip install torch-npu-profiler" in str(info.value)


def test_module_getattr_unknown_name_is_attribute_error(plugins, fake_package):
    pkg, _ = fake_package
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        plugins.module_getattr("nothing", pkg)
    with pytest.raises(AttributeError):
        plugins.module_getattr("__wrapped__", pkg)


def test_module_getattr_keeps_errors_inside_plugin(plugins, fake_package):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "graph" / "__init__.py", "import a_dependency_that_is_missing\n")
    with pytest.raises(ModuleNotFoundError) as info:
        plugins.module_getattr("graph", pkg)
    assert info.value.name == "a_dependency_that_is_missing"
    assert not isinstance(info.value, plugins.MissingPluginError)


def test_package_getattr_hook(plugins, fake_package):
    """The way torch_npu/__init__.py uses it: module-level __getattr__."""
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", "NAME = 'ops'\n")
    module = importlib.import_module(pkg)
    module.__getattr__ = lambda name: plugins.module_getattr(name, pkg)
    assert module.ops.NAME == "ops"
    with pytest.raises(ImportError, match="torch-npu-graph"):
        module.graph
    assert not hasattr(module, "nothing")


# ---------------------------------------------------------------------------
# load_plugins with a patched entry_points()
# ---------------------------------------------------------------------------


def _fake_dist(name, version="0.1.0", requires=()):
    return SimpleNamespace(
        metadata={"Name": name}, version=version,
        requires=None if requires is None else list(requires),
    )


def _ep(name, value, group="fake.plugins", dist=None):
    ep = importlib.metadata.EntryPoint(name=name, value=value, group=group)
    return ep._for(dist) if dist is not None else ep


@pytest.fixture
def patch_entry_points(monkeypatch):
    def patch(eps, group="fake.plugins"):
        def entry_points(**params):
            assert params == {"group": group}
            return list(eps)

        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)

    return patch


def test_load_plugins_initialiser_and_module(plugins, fake_package, patch_entry_points):
    pkg, pkg_dir = fake_package
    _write(
        pkg_dir / "ops" / "__init__.py",
        """
        CALLS = []
        def init(package):
            CALLS.append(package.__name__)
            package.ops_ready = True
        """,
    )
    _write(pkg_dir / "profiler" / "__init__.py", "KIND = 'module'\n")
    importlib.import_module(pkg)
    patch_entry_points(
        [
            _ep("ops", f"{pkg}.ops:init", dist=_fake_dist("torch-npu-ops", "0.3.0")),
            _ep("profiler", f"{pkg}.profiler", dist=_fake_dist("torch-npu-profiler")),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = plugins.load_plugins(pkg, group="fake.plugins")
    assert set(record) == {"ops", "profiler"}
    ops = record["ops"]
    assert (ops.name, ops.distribution, ops.version, ops.status, ops.error) == (
        "ops", "torch-npu-ops", "0.3.0", "loaded", None,
    )
    assert ops.value == f"{pkg}.ops:init" and ops.ok
    assert record["profiler"].status == "loaded"
    assert sys.modules[f"{pkg}.ops"].CALLS == [pkg]
    assert sys.modules[pkg].ops_ready is True
    assert sys.modules[pkg].profiler.KIND == "module"
    assert plugins.loaded_plugins(pkg) == record
    # a second call does not initialise again
    assert plugins.load_plugins(pkg, group="fake.plugins") == record
    assert sys.modules[f"{pkg}.ops"].CALLS == [pkg]


def test_failing_plugin_warns_and_others_still_load(plugins, fake_package, patch_entry_points):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "graph" / "__init__.py", "raise RuntimeError('graph is broken')\n")
    _write(
        pkg_dir / "ops" / "__init__.py",
        "def init(package):\n    raise ValueError('bad init')\n",
    )
    _write(pkg_dir / "profiler" / "__init__.py", "def init(package):\n    pass\n")
    importlib.import_module(pkg)
    patch_entry_points(
        [
            _ep("graph", f"{pkg}.graph:init", dist=_fake_dist("torch-npu-graph")),
            _ep("ops", f"{pkg}.ops:init", dist=_fake_dist("torch-npu-ops")),
            _ep("profiler", f"{pkg}.profiler:init", dist=_fake_dist("torch-npu-profiler")),
            _ep("weird", "json:__doc__"),  # neither module nor callable
        ]
    )
    with pytest.warns(plugins.PluginLoadWarning) as caught:
        record = plugins.load_plugins(pkg, group="fake.plugins")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3, messages
    assert any(
        "'graph'" in m and "torch-npu-graph 0.1.0" in m and "RuntimeError: graph is broken" in m
        for m in messages
    )
    assert any("'ops'" in m and "ValueError: bad init" in m for m in messages)
    assert any("'weird'" in m and "neither a module nor a callable" in m for m in messages)
    assert record["graph"].status == "failed"
    assert record["graph"].error == "RuntimeError: graph is broken"
    assert record["ops"].status == "failed"
    assert record["weird"].status == "failed"
    assert record["profiler"].status == "loaded"
    # never silently dropped: every entry point is in the record
    assert set(plugins.loaded_plugins(pkg)) == {"graph", "ops", "profiler", "weird"}
    # importing the failed plugin afterwards explains itself
    plugins.install_missing_plugin_hook(pkg)
    with pytest.raises(ImportError, match="installed but was not loaded"):
        importlib.import_module(f"{pkg}.weird")


def test_disable_env_var(plugins, fake_package, patch_entry_points, monkeypatch):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", "def init(package):\n    package.ran = True\n")
    _write(pkg_dir / "graph" / "__init__.py", "def init(package):\n    package.graph_ran = True\n")
    importlib.import_module(pkg)
    patch_entry_points([_ep("ops", f"{pkg}.ops:init"), _ep("graph", f"{pkg}.graph:init")])
    monkeypatch.setenv(plugins.DISABLE_ENV_VAR, "ops")
    record = plugins.load_plugins(pkg, group="fake.plugins")
    assert record["ops"].status == "disabled"
    assert record["graph"].status == "loaded"
    assert not hasattr(sys.modules[pkg], "ran")


def test_conflicting_plugin_names(plugins, fake_package, patch_entry_points):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", "def init(package):\n    pass\n")
    importlib.import_module(pkg)
    patch_entry_points(
        [
            _ep("ops", f"{pkg}.ops:init", dist=_fake_dist("torch-npu-ops")),
            _ep("ops", f"{pkg}.ops:init", dist=_fake_dist("other-ops")),
        ]
    )
    with pytest.warns(plugins.PluginLoadWarning, match="already provided by torch-npu-ops"):
        record = plugins.load_plugins(pkg, group="fake.plugins")
    assert record["ops"].status == "loaded"
    assert record["ops (other-ops)"].status == "conflict"


def test_no_plugins(plugins, patch_entry_points):
    patch_entry_points([])
    assert plugins.loaded_plugins("nothing_here") == {}
    assert plugins.load_plugins("nothing_here", group="fake.plugins") == {}


# ---------------------------------------------------------------------------
# Compatibility hook
# ---------------------------------------------------------------------------


def test_compatibility_accepts_matching_core(plugins):
    pytest.importorskip("packaging")
    check = plugins._check_plugin_compatibility
    check(_fake_dist("torch-npu-ops", requires=["torch-npu-core==0.1.*"]), "0.1.3")
    check(_fake_dist("torch-npu-ops", requires=["torch_npu_core>=0.1,<0.2"]), "0.1.0")
    check(_fake_dist("torch-npu-ops", requires=["torch-npu-core"]), "5.0")
    check(_fake_dist("torch-npu-ops", requires=["numpy>=9"]), "0.1.0")
    check(_fake_dist("torch-npu-ops", requires=None), "0.1.0")
    check(None, "0.1.0")
    # a requirement only for one of the plugin's extras does not count
    check(
        _fake_dist("torch-npu-ops", requires=["torch-npu-core>=9; extra == 'test'"]),
        "0.1.0",
    )


def test_compatibility_mismatch_names_both_versions(plugins):
    pytest.importorskip("packaging")
    dist = _fake_dist("torch-npu-profiler", "0.4.0", requires=["torch-npu-core==0.2.*"])
    with pytest.raises(ImportError) as info:
        plugins._check_plugin_compatibility(dist, "0.1.0")
    msg = str(info.value)
    assert "torch-npu-profiler 0.4.0 requires torch-npu-core==0.2.*" in msg
    assert "torch-npu-core 0.1.0 is installed" in msg


def test_compatibility_uses_installed_core_version(plugins, monkeypatch):
    pytest.importorskip("packaging")
    monkeypatch.setattr(plugins, "_core_version", lambda name: "0.1.0")
    dist = _fake_dist("torch-npu-ops", requires=["torch-npu-core>=0.2"])
    with pytest.raises(ImportError, match="0.1.0"):
        plugins._check_plugin_compatibility(dist)
    # core not installed as a distribution (source tree): nothing to check
    monkeypatch.setattr(plugins, "_core_version", lambda name: None)
    plugins._check_plugin_compatibility(dist)


def test_incompatible_plugin_is_reported_not_loaded(plugins, fake_package, patch_entry_points):
    pytest.importorskip("packaging")
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", "raise AssertionError('must not be imported')\n")
    _write(pkg_dir / "graph" / "__init__.py", "")
    importlib.import_module(pkg)
    patch_entry_points(
        [
            _ep("ops", f"{pkg}.ops", dist=_fake_dist("torch-npu-ops", "0.9.0", ["torch-npu-core>=0.9"])),
            _ep("graph", f"{pkg}.graph", dist=_fake_dist("torch-npu-graph", "0.1.0", ["torch-npu-core==0.1.*"])),
        ]
    )
    with pytest.warns(plugins.PluginLoadWarning, match=r"'ops'.*not compatible.*0\.1\.0"):
        record = plugins.load_plugins(pkg, group="fake.plugins", core_version="0.1.0")
    assert record["ops"].status == "incompatible"
    assert "torch-npu-core 0.1.0 is installed" in record["ops"].error
    assert record["graph"].status == "loaded"


def test_compiled_plugin_built_for_the_installed_core_and_torch_loads(plugins):
    plugins.check_plugin_build("torch-npu-ops", "0.1.2", "0.1.0", "2.13.0",
                               core_version="0.1.7", torch_version="2.13.0+cpu")


def test_compiled_plugin_built_for_another_core_is_refused(plugins):
    with pytest.raises(plugins.PluginVersionError) as info:
        plugins.check_plugin_build("torch-npu-ops", "0.2.0", "0.2.1", "2.13.0",
                                   core_version="0.1.0", torch_version="2.13.0")
    message = str(info.value)
    assert message.startswith("torch-npu-ops 0.2.0 cannot be loaded: it was built against "
                              "torch-npu-core 0.2.1 but torch-npu-core 0.1.0 is installed.")
    assert "pip install 'torch-npu-core==0.2.*' 'torch==2.13.0'" in message
    assert isinstance(info.value, ImportError)


def test_compiled_plugin_built_for_another_torch_is_refused(plugins):
    with pytest.raises(plugins.PluginVersionError, match=r"built against torch 2\.14\.1 but "
                       r"torch 2\.13\.0\+cpu is installed"):
        plugins.check_plugin_build("torch-npu-ops", "0.1.0", "0.1.0", "2.14.1",
                                   core_version="0.1.0", torch_version="2.13.0+cpu")


def test_plugin_refusing_at_import_is_recorded_incompatible(plugins, fake_package, patch_entry_points):
    pkg, pkg_dir = fake_package
    _write(pkg_dir / "ops" / "__init__.py", textwrap.dedent(f"""
        import sys
        sys.modules[{plugins.__name__!r}].check_plugin_build(
            "torch-npu-ops", "0.1.0", "0.9.0", "2.13.0", core_version="0.1.0", torch_version="2.13.0")
    """))
    importlib.import_module(pkg)
    patch_entry_points([_ep("ops", f"{pkg}.ops", dist=_fake_dist("torch-npu-ops"))])
    with pytest.warns(plugins.PluginLoadWarning, match=r"'ops'.*not compatible.*built against"):
        record = plugins.load_plugins(pkg, group="fake.plugins", core_version="0.1.0")
    assert record["ops"].status == "incompatible"
    assert record["ops"].error.startswith("PluginVersionError: torch-npu-ops 0.1.0 cannot be loaded")


# ---------------------------------------------------------------------------
# End to end: real distributions on disk, in a subprocess
# ---------------------------------------------------------------------------


def _make_dist(site: Path, dist: str, version: str, entry_points: str = "", requires=()):
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    _write(info / "METADATA", "\n".join(meta) + "\n")
    if entry_points:
        _write(info / "entry_points.txt", entry_points)


def test_end_to_end_with_installed_distributions(tmp_path):
    pytest.importorskip("packaging")
    pkg = "fakecore_pkg"
    group = "fakecore.plugins"
    core_site, plug_site = tmp_path / "core_site", tmp_path / "plug_site"

    # The core distribution: a package whose __init__ uses _plugins (and the
    # generated package list beside it) the way torch_npu/__init__.py does.
    shutil.copy(PLUGINS_PY, _write(core_site / pkg / "_plugins.py", ""))
    shutil.copy(PLUGINS_PY.with_name("_package_list.py"), core_site / pkg / "_package_list.py")
    _write(
        core_site / pkg / "__init__.py",
        f"""
        import pkgutil
        __path__ = pkgutil.extend_path(__path__, __name__)
        from . import _plugins
        _plugins.install_missing_plugin_hook(__name__)

        def __getattr__(name):
            return _plugins.module_getattr(name, __name__)

        _plugins.load_plugins(
            __name__, group={group!r}, core_distribution="fakecore-core")
        """,
    )
    _make_dist(core_site, "fakecore-core", "0.1.0")

    # A plugin in another sys.path entry (like an editable install): ships
    # fakecore_pkg/fakeplug/ but no fakecore_pkg/__init__.py.
    _write(
        plug_site / pkg / "fakeplug" / "__init__.py",
        """
        INITIALISED_WITH = None
        def initialize(package):
            global INITIALISED_WITH
            INITIALISED_WITH = package.__name__
        """,
    )
    _make_dist(
        plug_site, "torch-npu-fakeplug", "0.1",
        f"[{group}]\nfakeplug = {pkg}.fakeplug:initialize\n",
        requires=["fakecore-core==0.1.*"],
    )
    # A plugin whose initialiser raises, and an incompatible one.
    _write(plug_site / pkg / "broken" / "__init__.py", "def init(p):\n    raise OSError('no device')\n")
    _make_dist(plug_site, "torch-npu-broken", "2.0", f"[{group}]\nbroken = {pkg}.broken:init\n")
    _write(plug_site / pkg / "future" / "__init__.py", "raise AssertionError('imported')\n")
    _make_dist(
        plug_site, "torch-npu-future", "1.0", f"[{group}]\nfuture = {pkg}.future\n",
        requires=["fakecore-core>=1.0"],
    )

    script = textwrap.dedent(
        f"""
        import json, sys, warnings
        sys.path[:0] = [{str(core_site)!r}, {str(plug_site)!r}]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import {pkg}
        out = {{"warnings": [str(w.message) for w in caught]}}
        out["record"] = {{k: [v.distribution, v.version, v.status, v.error]
                         for k, v in {pkg}._plugins.loaded_plugins({pkg!r}).items()}}
        out["initialised_with"] = {pkg}.fakeplug.INITIALISED_WITH
        try:
            import {pkg}.profiler
        except ImportError as e:
            out["import_profiler"] = [type(e).__name__, str(e)]
        try:
            {pkg}.profiler
        except ImportError as e:
            out["getattr_profiler"] = str(e)
        try:
            {pkg}.nothing
        except AttributeError as e:
            out["getattr_unknown"] = str(e)
        print(json.dumps(out))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)

    assert out["record"]["fakeplug"] == ["torch-npu-fakeplug", "0.1", "loaded", None]
    assert out["record"]["broken"][:3] == ["torch-npu-broken", "2.0", "failed"]
    assert out["record"]["broken"][3] == "OSError: no device"
    assert out["record"]["future"][2] == "incompatible"
    assert out["initialised_with"] == pkg
    assert len(out["warnings"]) == 2, out["warnings"]
    assert any("'broken'" in w and "OSError: no device" in w for w in out["warnings"])
    assert any(
        "'future'" in w and "fakecore-core>=1.0" in w and "fakecore-core 0.1.0" in w
        for w in out["warnings"]
    )
    assert out["import_profiler"][0] == "MissingPluginError"
    assert out["import_profiler"][1] == (
        f"{pkg}.profiler is provided by the torch-npu-profiler package, which is "
        "not installed. Install it with `pip install torch-npu-profiler` or "
        "`pip install 'torch-npu[profiler]'`."
    )
    assert out["getattr_profiler"] == out["import_profiler"][1]
    assert "has no attribute 'nothing'" in out["getattr_unknown"]
