"""The compat tooling: reading the matrix and the package list, generating the docs and tables, the check."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compat import local_wheels  # noqa: E402
from compat.check import check_cann_axis, check_generated, check_runs, check_version_txt  # noqa: E402
from compat.matrix import (  # noqa: E402
    STALE, TESTED, UNSUPPORTED, UNTESTED, MatrixError, Row, current_commit, load, record_run, record_sweep,
    suite_fingerprint,
)
from compat.packages import discover  # noqa: E402
from compat.render import (  # noqa: E402
    EXTRAS_BEGIN, EXTRAS_END, render_core_data, render_doc, render_meta_pyproject, render_package_list,
    render_packages_txt, render_simulator_table,
)


@pytest.fixture
def matrix():
    return load()


def _write_matrix(tmp_path: Path, rows: str, default: str = 'torch = "2.13.0"\ncann = "9.0.0"\npython = "3.11"') -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(f'[torch."2.13.0"]\npybind11 = "3.0.4"\n[default]\n{default}\n{rows}')
    return path


def test_rows_expand_and_default_is_supported(matrix):
    default = Row("2.13.0", "9.0.0", "3.11")
    assert matrix.default == default
    assert default in matrix.supported
    assert matrix.torch_versions == ["2.13.0", "2.14.1"]
    assert matrix.pins("2.13.0") == {"pybind11": "3.0.4"}
    assert matrix.pins("2.14.1") == {"pybind11": "3.1.0"}
    assert matrix.status(Row("2.13.0", "9.0.0", "3.9")).status == UNSUPPORTED
    assert "Python >= 3.10" in matrix.status(Row("2.13.0", "9.0.0", "3.9")).reason
    assert default.session == "tests(torch='2.13.0', cann='9.0.0', python='3.11')"


def test_malformed_matrices_are_rejected(tmp_path):
    features = ROOT / "compat/cann_features.toml"
    bad_status = _write_matrix(tmp_path, '[[row]]\ntorch = "2.13.0"\ncann = "9.0.0"\npython = "3.11"\nstatus = "maybe"')
    with pytest.raises(MatrixError, match="status must be 'supported' or 'unsupported'"):
        load(bad_status, features, tmp_path / "none.json")
    no_reason = _write_matrix(tmp_path, '[[row]]\ntorch = "2.13.0"\ncann = "9.0.0"\npython = "3.11"\nstatus = "supported"\n'
                                        '[[row]]\ntorch = "2.13.0"\ncann = "9.0.0"\npython = "3.9"\nstatus = "unsupported"')
    with pytest.raises(MatrixError, match="needs a 'reason'"):
        load(no_reason, features, tmp_path / "none.json")
    twice = _write_matrix(tmp_path, '[[row]]\ntorch = "2.13.0"\ncann = "9.0.0"\npython = "3.11"\nstatus = "supported"\n' * 2)
    with pytest.raises(MatrixError, match="more than one"):
        load(twice, features, tmp_path / "none.json")
    bad_cann = _write_matrix(tmp_path, '[[row]]\ntorch = "2.13.0"\ncann = "9"\npython = "3.11"\nstatus = "supported"')
    with pytest.raises(MatrixError, match="is not a CANN version"):
        load(bad_cann, features, tmp_path / "none.json")
    packages_table = tmp_path / "packages.toml"
    packages_table.write_text("[packages]\n" + _write_matrix(tmp_path, "").read_text())
    with pytest.raises(MatrixError, match=r"\[packages\] table is gone"):
        load(packages_table, features, tmp_path / "none.json")
    no_default_row = _write_matrix(tmp_path, '[[row]]\ntorch = "2.13.0"\ncann = "8.5.0"\npython = "3.11"\nstatus = "supported"')
    with pytest.raises(MatrixError, match="default row .* is not a supported row"):
        load(no_default_row, features, tmp_path / "none.json")


def test_recorded_run_makes_a_row_tested_everywhere(matrix, tmp_path):
    row = Row("2.13.0", "8.5.0", "3.11")
    assert matrix.status(row).status in (UNTESTED, TESTED, STALE)
    runs = tmp_path / "runs.json"
    record_run(row, 'nox -s "tests(...)"', "12 passed, 1 skipped", {"torch": "2.13.0+cpu"}, "2031-01-02", runs)
    matrix.runs = json.loads(runs.read_text())["runs"]
    status = matrix.status(row)
    assert status.status == TESTED and status.run["date"] == "2031-01-02"
    # the record names what it vouches for: the commit, the suite, the count
    assert status.run["commit"] == current_commit() and status.run["passed"] == 12
    assert status.run["suite"] == suite_fingerprint() == matrix.suite
    doc = render_doc(matrix)
    assert "tested 2031-01-02" in doc
    assert (f"CANN 8.5.0, Python 3.11: 2031-01-02, commit {current_commit()}, `nox -s \"tests(...)\"`: "
            "12 passed, 1 skipped (torch 2.13.0+cpu).") in doc
    assert "('2.13.0', '8.5.0', '3.11'): ('tested', '2031-01-02: nox -s \"tests(...)\"')" in render_core_data(matrix)
    # the committed files no longer match: the check says to render
    problems = check_generated(matrix)
    assert any("COMPATIBILITY.en.md differs" in p and "python -m compat render" in p for p in problems)
    assert check_runs(matrix) == []


def test_a_run_of_another_test_suite_no_longer_counts_as_tested(matrix, tmp_path):
    row = Row("2.13.0", "8.5.0", "3.11")
    runs = tmp_path / "runs.json"
    record_run(row, "./dev test", "12 passed", {}, "2031-01-02", runs)
    matrix.runs = json.loads(runs.read_text())["runs"]
    matrix.runs[0]["commit"] = "0123456789"
    matrix.suite = "another suite"  # what a changed test file does
    status = matrix.status(row)
    assert status.status == STALE
    assert "last tested at 0123456789" in render_doc(matrix)
    assert "The test suite has changed since." in render_doc(matrix)
    assert "'stale', 'last tested at 0123456789; the test suite has changed since'" in render_core_data(matrix)
    del matrix.runs[0]["suite"]  # a record from before runs named their suite
    matrix.suite = suite_fingerprint()
    assert matrix.status(row).status == STALE


def test_suite_fingerprint_follows_every_test_file(tmp_path):
    (tmp_path / "packages/core/tests").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text("def test_a(): assert True\n")
    (tmp_path / "packages/core/tests/data.json").write_text("{}")
    before = suite_fingerprint(tmp_path)
    (tmp_path / "packages/core/tests/__pycache__").mkdir()
    (tmp_path / "packages/core/tests/__pycache__/x.pyc").write_bytes(b"0")
    assert suite_fingerprint(tmp_path) == before  # bytecode is no test
    (tmp_path / "packages/core/tests/data.json").write_text("{ }")
    assert suite_fingerprint(tmp_path) != before


def test_check_catches_disagreements(matrix):
    assert check_version_txt(matrix) == [] and check_cann_axis(matrix) == []
    matrix.supported[Row("2.15.0", "9.0.0", "3.11")] = ""
    assert "version.txt lists ['2.13.0', '2.14.1']" in check_version_txt(matrix)[0]
    matrix.supported[Row("2.13.0", "8.3.RC1", "3.11")] = ""
    assert "8.3.RC1" in check_cann_axis(matrix)[0]
    matrix.runs.append({"row": "torch=1.0,cann=9.0.0,python=3.11", "date": "d", "command": "c", "summary": "s"})
    assert "which is no supported row" in check_runs(matrix)[0]


def test_simulator_table_is_one_x_macro_line_per_feature(matrix):
    table = render_simulator_table(matrix)
    lines = [line for line in table.splitlines() if line.startswith("NPU_SIM_CANN_FEATURE(")]
    assert len(lines) == len(matrix.features)
    assert 'NPU_SIM_CANN_FEATURE(kVirtualMemory, "virtual_memory", ' in table
    assert all(f.source and f.checked for f in matrix.features)  # every fact says where it is from


def test_local_torch_wheels(monkeypatch, tmp_path):
    names = ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
             "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"]
    monkeypatch.setattr(local_wheels, "local_wheel_names", lambda project="torch": names)
    monkeypatch.delenv(local_wheels.ALLOW_DOWNLOAD_ENV, raising=False)
    assert local_wheels.torch_obtainable("2.13.0", "3.11")
    assert local_wheels.torch_obtainable("2.14.1", "3.11")
    assert not local_wheels.torch_obtainable("2.13.0", "3.12")
    assert not local_wheels.torch_obtainable("2.13", "3.11")
    monkeypatch.setenv(local_wheels.ALLOW_DOWNLOAD_ENV, "1")
    assert local_wheels.torch_obtainable("2.13.0", "3.12")


def test_local_wheel_names_reads_find_links_and_file_indexes(monkeypatch, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    (links / "torch-9.9.9-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    index = tmp_path / "simple" / "torch"
    index.mkdir(parents=True)
    (index / "index.html").write_text('<a href="../../files/torch-8.8.8-cp312-cp312-x.whl#sha256=00">t</a>')
    monkeypatch.setattr(local_wheels, "_pip_config", lambda: {
        "find-links": str(links), "extra-index-url": f"https://remote.invalid/simple file://{tmp_path}/simple"})
    names = local_wheels.local_wheel_names()
    assert "torch-9.9.9-cp311-cp311-linux_x86_64.whl" in names
    assert "torch-8.8.8-cp312-cp312-x.whl" in names
    assert local_wheels.torch_wheel_is_local("8.8.8", "3.12")


# ---------------------------------------------------------------------------
# The package list, read from packages/*/pyproject.toml
# ---------------------------------------------------------------------------


def _write_package(root: Path, folder: str, name: str, role: str, dev_install: str, extra: str = "") -> None:
    (root / "packages" / folder).mkdir(parents=True)
    (root / "packages" / folder / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "0.3.1"\ndependencies = ["torch-npu-core==0.3.*"]\n{extra}'
        f'[tool.torch-npu]\nrole = "{role}"\ndev-install = "{dev_install}"\n')


def _plugin_tables(name: str, *modules: str) -> str:
    selection = ", ".join(f'"torch_npu/{m}"' for m in modules)
    return (f'[project.entry-points."torch_npu.plugins"]\n{name} = "torch_npu.{name}:_init"\n'
            f"[tool.hatch.build.targets.wheel]\nonly-include = [{selection}]\n")


@pytest.fixture
def package_tree(tmp_path):
    """A tree of packages: a meta-package, two plugins, core (last in folder
    order), and a _template that is no package."""
    _write_package(tmp_path, "meta", "torch-npu", "meta", "no")
    _write_package(tmp_path, "alpha", "torch-npu-alpha", "plugin", "wheel", _plugin_tables("alpha", "alpha", "extra"))
    _write_package(tmp_path, "beta", "torch-npu-beta", "plugin", "wheel", _plugin_tables("beta", "beta"))
    _write_package(tmp_path, "zcore", "torch-npu-core", "core", "editable")
    _write_package(tmp_path, "_template", "torch-npu-example", "plugin", "wheel", _plugin_tables("example", "example"))
    return tmp_path


def test_packages_are_the_folders_with_a_pyproject_core_first(package_tree):
    packages = discover(package_tree)
    assert [p.folder for p in packages] == ["packages/zcore", "packages/alpha", "packages/beta", "packages/meta"]
    alpha = packages[1]
    assert (alpha.name, alpha.role, alpha.plugin, alpha.modules) == (
        "torch-npu-alpha", "plugin", "alpha", ("alpha", "extra"))
    assert alpha.release == "==0.3.*" and alpha.dev_install == "wheel"


def test_the_package_list_and_the_extras_are_rendered_from_the_pyprojects(package_tree, matrix):
    matrix.package_list = discover(package_tree)
    text = render_package_list(matrix)
    data: dict = {}
    exec(compile(text, "_package_list.py", "exec"), data)  # data only, no imports
    assert data["CORE_DISTRIBUTION"] == "torch-npu-core" and data["META_DISTRIBUTION"] == "torch-npu"
    assert data["PLUGIN_MODULES"] == {"alpha": "torch-npu-alpha", "extra": "torch-npu-alpha", "beta": "torch-npu-beta"}
    assert data["META_EXTRAS"] == data["PLUGIN_ENTRY_POINTS"] == {"torch-npu-alpha": "alpha", "torch-npu-beta": "beta"}
    lines = [line for line in render_packages_txt(matrix).splitlines() if not line.startswith("#")]
    assert lines == ["packages/zcore torch-npu-core editable", "packages/alpha torch-npu-alpha wheel",
                     "packages/beta torch-npu-beta wheel", "packages/meta torch-npu no"]

    pyproject = f'[project]\nname = "torch-npu"\n[project.optional-dependencies]\n{EXTRAS_BEGIN}\nold = ["x"]\n{EXTRAS_END}\n'
    assert render_meta_pyproject(matrix, pyproject) == (
        f'[project]\nname = "torch-npu"\n[project.optional-dependencies]\n{EXTRAS_BEGIN}\n'
        'alpha = ["torch-npu-alpha"]\nbeta = ["torch-npu-beta"]\nall = ["torch-npu[alpha,beta]"]\n'
        f"{EXTRAS_END}\n")
    with pytest.raises(MatrixError, match="marker lines"):
        render_meta_pyproject(matrix, "[project]\n")


def test_malformed_packages_are_rejected(package_tree):
    _write_package(package_tree, "gamma", "torch-npu-gamma", "plugin", "sometimes", _plugin_tables("gamma", "gamma"))
    with pytest.raises(MatrixError, match="dev-install must be one of"):
        discover(package_tree)
    (package_tree / "packages/gamma/pyproject.toml").unlink()
    _write_package(package_tree, "delta", "torch-npu-delta", "plugin", "wheel", _plugin_tables("delta", "other"))
    with pytest.raises(MatrixError, match="must ship torch_npu/delta"):
        discover(package_tree)


def test_check_says_to_render_when_a_package_is_added(matrix):
    assert check_generated(matrix) == []
    graph = next(p for p in matrix.package_list if p.plugin == "graph")
    matrix.package_list.append(dataclasses.replace(graph, folder="packages/new", name="torch-npu-new",
                                                   plugin="new", modules=("new",)))
    problems = "\n".join(check_generated(matrix))
    for generated in ("compat/packages.txt", "packages/core/torch_npu/_package_list.py",
                      "packages/torch-npu/pyproject.toml"):
        assert f"{generated} differs" in problems
    assert "run `python -m compat render`" in problems


def test_a_recorded_sweep_is_shown_and_goes_stale_with_the_suite(matrix, tmp_path):
    runs = tmp_path / "runs.json"
    row = Row("2.13.0", "8.5.0", "3.11")
    record_run(row, "./dev test", "12 passed", {}, "2031-01-02", runs)
    assert matrix.sweep_status("opinfo_full").status in (UNTESTED, TESTED, STALE)
    record_sweep("opinfo_full", "2.13.0", "3.11", 'nox -s "opinfo_full"',
                 "700 passed; OpInfo conformance: 690/702 entries match", {"torch": "2.13.0+cpu"}, "2031-01-03", runs)
    recorded = json.loads(runs.read_text())
    assert [r["row"] for r in recorded["runs"]] == [row.key]  # the rows' records are kept
    matrix.runs, matrix.sweeps = recorded["runs"], recorded["sweeps"]
    status = matrix.sweep_status("opinfo_full")
    assert status.status == TESTED and status.run["passed"] == 700 and status.run["commit"] == current_commit()
    doc = render_doc(matrix)
    assert "- `opinfo_full`, the whole OpInfo sweep" in doc and ": tested 2031-01-03." in doc
    assert "690/702 entries match" in doc
    matrix.suite = "another suite"
    assert matrix.sweep_status("opinfo_full").status == STALE
    assert "(the test suite has changed since)" in render_doc(matrix)
    with pytest.raises(MatrixError, match="is not a sweep"):
        record_sweep("no_such_sweep", "2.13.0", "3.11", "x", "1 passed", {}, "2031-01-03", runs)
    matrix.sweeps.append({"sweep": "no_such_sweep"})
    assert any("no_such_sweep" in p for p in check_runs(matrix))


def _write_files(root: Path, files: dict[str, str]) -> None:
    """Writes each relative path of ``files`` under ``root`` with its text."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_cann_rows_run_the_tests_that_asked_about_cann(tmp_path):
    # Note [What a CANN row runs]: the default row's log names the nodes that
    # asked (Note [Which tests reach CANN's features]); the rows run their files.
    from compat.cann_reach import cann_row_tests

    _write_files(tmp_path, {
        "a/tests/test_graphs.py": "def test_capture(): ...\n",
        "a/tests/test_plain.py": "def test_add(): ...\n",
        "a/tests/test_version.py": "os.environ['NPU_SIM_CANN_VERSION'] = '8.0.0'\n",
        "b/tests/conftest.py": "import torch\n",
        "b/tests/test_x.py": "def test_x(): ...\n",
        "c/tests/sim/_lib.py": "lib.aclsysGetCANNVersion\n",
        "c/tests/sim/test_y.py": "def test_y(): ...\n",
        # A helper that names the version without asking leaves its folder out.
        "d/tests/sim/_runner.py": "STRIPPED = ('NPU_SIM_CANN_VERSION',)  # cann-reach: not a question\n",
        "d/tests/sim/test_w.py": "def test_w(): ...\n",
        "c/tests/test_z.py": "def test_z(): ...\n",
    })
    dirs = ["a/tests", "b/tests", "c/tests", "d/tests"]
    log = tmp_path / "reach.log"
    log.write_text("a/tests/test_graphs.py::test_capture[float]\tmodel_capture\n"
                   "b/tests\tvirtual_memory\n"
                   "b/tests/test_x.py::test_x\tcann_version\n")
    # Logged files and folders, and sources that ask themselves (a helper's
    # whole folder); a folder chosen whole covers its files.
    assert cann_row_tests(log, dirs, tmp_path) == [
        "a/tests/test_graphs.py", "a/tests/test_version.py", "b/tests", "c/tests/sim"]
    # Nothing logged: only the sources that ask.
    log.write_text("")
    assert cann_row_tests(log, dirs, tmp_path) == ["a/tests/test_version.py", "c/tests/sim"]
    # A question outside any node (no tag): everything.
    log.write_text("\tcann_version\n")
    assert cann_row_tests(log, dirs, tmp_path) == dirs


def test_rows_of_another_torch_skip_the_folders_that_never_import_torch(tmp_path):
    # Note [What another torch's row runs]: a folder is skipped only when no
    # source in it or under it imports torch or torch_npu, code run from a
    # string in a child process included.
    from compat.torch_reach import torch_free_folders

    _write_files(tmp_path, {
        "a/tests/test_ops.py": "import torch\n",
        "a/tests/sim/conftest.py": "import ctypes\n",
        "a/tests/sim/test_lib.py": "def test_lib(): ...\n",
        "a/tests/sim/deep/test_more.py": "def test_more(): ...\n",
        "a/tests/child/test_child.py": 'CODE = """\n    import torch_npu\n"""\n',
        "b/tests/test_plugin.py": "from plugin_contract import PluginContract\n",
        "b/tests/_helper.py": "from torch import nn\n",
    })
    assert torch_free_folders(["a/tests", "b/tests"], tmp_path) == ["a/tests/sim"]
    # On this tree: the simulator's tests, which load its library with ctypes.
    assert torch_free_folders(["packages/core/tests", "tests"]) == ["packages/core/tests/simulator"]


def test_ci_runs_one_cann_release_per_feature_set():
    # Note [What a CANN row runs]: on this tree 8.5.0 has 9.0.0's features
    # (the default row covers them); 8.0.0 and 8.1.RC1 each lack some.
    from compat.cann_reach import ci_cann_releases

    matrix = load()
    assert matrix.features_at("8.5.0") == matrix.features_at(matrix.default.cann)
    assert ci_cann_releases(matrix) == ["8.0.0", "8.1.RC1"]
    # A feature new in 9.0.0 brings 8.5.0 back; releases that share a set
    # are represented by the oldest.
    since_9 = dataclasses.replace(matrix.features[0], name="new_in_9", since="9.0.0")
    matrix.features.append(since_9)
    assert ci_cann_releases(matrix) == ["8.0.0", "8.1.RC1", "8.5.0"]
    matrix.features = [f for f in matrix.features if f.since not in ("8.1.RC1",)]
    assert ci_cann_releases(matrix) == ["8.0.0", "8.5.0"]


def test_a_row_sample_runs_a_deterministic_half_and_says_so(tmp_path):
    # Note [Rows of another torch run half the tests]: the two halves
    # partition the tests (none lost, none run twice), the same half runs
    # the same tests, and the summary says how many ran.
    import os
    import re
    import subprocess

    (tmp_path / "test_many.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('i', range(40))\n"
        "def test_case(i):\n"
        "    print(f'RAN {i}')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> tuple[set[int], str]:
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "compat.pytest_row_sample", "-s",
                               "-p", "no:cacheprovider", str(tmp_path), *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return {int(i) for i in re.findall(r"RAN (\d+)", done.stdout)}, done.stdout

    first, out0 = run("--row-sample=0/2")
    second, out1 = run("--row-sample=1/2")
    assert first and second and not first & second and first | second == set(range(40))
    assert run("--row-sample=0/2")[0] == first
    assert f"row sample 0/2: ran {len(first)} of the 40 tests collected" in out0
    assert f"{40 - len(second)} deselected" in out1
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "compat.pytest_row_sample", "-p",
                           "no:cacheprovider", str(tmp_path), "--row-sample=2/2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "expected K/N with 0 <= K < N" in done.stdout + done.stderr


def test_the_simulator_folder_asks_about_cann_only_in_its_test_modules():
    # Note [What a CANN row runs]: a helper module or conftest of the
    # simulator's tests that names CANN's version or features (outside a line
    # marked as not a question) would put the whole folder in every CANN row.
    from compat.cann_reach import sources_asking

    asking = sources_asking(["packages/core/tests"], ROOT)
    assert "packages/core/tests/simulator" not in asking
    assert "packages/core/tests/simulator/test_sim_config.py" in asking
