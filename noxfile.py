"""nox sessions of torch-npu: the compatibility matrix, wheels and checks.

    .venv/bin/nox -l                        # list the sessions
    .venv/bin/nox -s compat_check build install_check lint
    .venv/bin/nox -s "tests(torch='2.13.0', cann='9.0.0', python='3.11')" [-- PYTEST ARGS]
    COMPAT_RECORD=1 .venv/bin/nox -s "tests(...)"   # record a passing run in compat/runs.json

``tests(...)`` sessions are generated from the supported rows of
compat/matrix.toml. Rows that differ only in CANN share one environment and
one build (CANN is resolved at run time: the simulator emulates the release
given by ``NPU_SIM_CANN_VERSION``); the default row's environment is the
repository's ``.venv`` that ``./dev`` makes. Environments are made by
``./dev setup`` with the row's pins, so a row builds exactly as ``./dev``
does. A row whose torch wheel is not on this machine is skipped ("not run").

compat_check, build and install_check run with the interpreter that runs
nox (``.venv``'s: the default row), reusing its build.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from compat.local_wheels import ALLOW_DOWNLOAD_ENV, torch_obtainable  # noqa: E402
from compat.matrix import load  # noqa: E402

MATRIX = load()
DIST = ROOT / "dist"
# The packages in build order, core first (the plugins build against it):
# read from packages/*/pyproject.toml (compat/packages.py).
PACKAGES = MATRIX.package_list
RUFF = "ruff==0.17.6"
# What a new row environment takes on disk, with room to spare: PyPI's torch
# is a CUDA build, about 5.6 GB installed with its nvidia-* dependencies.
ROW_ENV_DISK_BYTES = 7 * 2**30

nox.options.sessions = ["compat_check", "build", "install_check", "lint"]
# A row whose Python is missing fails instead of passing as a skip.
nox.options.error_on_missing_interpreters = True


def _row_env(torch: str, python: str) -> Path:
    if (torch, python) == (MATRIX.default.torch, MATRIX.default.python):
        return ROOT / ".venv"
    return ROOT / ".nox" / "rows" / f"torch-{torch}-py{python}"


def _test_dirs() -> list[str]:
    """The tests of every package (packages/_template is none), then tests/."""
    dirs = [f"{p.folder}/tests" for p in PACKAGES if (ROOT / p.folder / "tests").is_dir()]
    return dirs + ["tests"]


def _pytest_summary(output: str) -> str:
    lines = [l.strip("= ") for l in output.splitlines() if re.search(r"\d+ passed", l)]
    return lines[-1] if lines else "passed"


def _run_streaming(session: nox.Session, cmd: list[str], env: dict[str, str]) -> str:
    """Run ``cmd``, showing its output as it comes, and return that output."""
    session.log(" ".join(cmd))
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    if proc.wait() != 0:
        session.error(f"{cmd[2] if len(cmd) > 2 else cmd[0]} failed with exit code {proc.returncode}")
    return "".join(lines)


_ROWS = [row for row in MATRIX.rows if row in MATRIX.supported]


@nox.session(venv_backend="none")
@nox.parametrize(
    "torch, cann, python",
    [(r.torch, r.cann, r.python) for r in _ROWS],
    ids=[f"torch='{r.torch}', cann='{r.cann}', python='{r.python}'" for r in _ROWS],
)
def tests(session: nox.Session, torch: str, cann: str, python: str) -> None:
    """The test suite of one matrix row (pytest args after --)."""
    if not torch_obtainable(torch, python):
        session.skip(
            f"not run: no torch {torch} wheel for Python {python} on this machine "
            f"(set {ALLOW_DOWNLOAD_ENV}=1 to download one)"
        )
    pins = MATRIX.pins(torch)
    venv = _row_env(torch, python)
    if not venv.exists():
        _require_free_disk(session, venv, ROW_ENV_DISK_BYTES)
    env = {
        "DEV_TORCH": torch,
        "DEV_PYBIND11": pins["pybind11"],
        "DEV_PYTHON": python,
        "DEV_VENV": str(venv),
    }
    session.run(str(ROOT / "dev"), "setup", env=env, external=True)
    python_exe = str(venv / "bin" / "python")
    test_env = {"NPU_SIM_CHECKER": "1", "NPU_SIM_CANN_VERSION": cann}
    args = list(session.posargs) or _test_dirs()
    output = _run_streaming(session, [python_exe, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            test_env)
    if os.environ.get("COMPAT_RECORD") == "1":
        versions = _torch_distributions(python_exe)
        # The environment a rerun needs: pyenv's other Pythons, a torch from PyPI.
        prefix = "".join(f"{name}={os.environ[name]} " for name in ("PYENV_VERSION", ALLOW_DOWNLOAD_ENV)
                         if os.environ.get(name))
        command = (f'{prefix}nox -s "{session.name}"'
                   + (f" -- {' '.join(session.posargs)}" if session.posargs else ""))
        session.run(sys.executable, "-m", "compat", "record", "--torch", torch, "--cann", cann,
                    "--python", python, "--command", command,
                    "--summary", _pytest_summary(output),
                    "--date", datetime.date.today().isoformat(),
                    *[f"--version={k}={v}" for k, v in versions.items()], external=True)


def _torch_distributions(python_exe: str) -> dict[str, str]:
    """The versions of torch and the torch-npu packages in an environment."""
    return json.loads(subprocess.run(
        [python_exe, "-c", "import json, importlib.metadata as m; print(json.dumps("
         "{d.metadata['Name']: d.version for d in m.distributions() "
         "if d.metadata['Name'].startswith('torch')}))"],
        capture_output=True, text=True, check=True).stdout)


def _require_free_disk(session: nox.Session, venv: Path, needed: int) -> None:
    """Fail before pip does: a full disk midway leaves a broken environment
    and an OSError that does not say which step needed the space."""
    free = shutil.disk_usage(venv.parent if venv.parent.exists() else ROOT).free
    if free < needed:
        session.error(
            f"{venv} would need about {needed / 2**30:.0f} GiB of disk and "
            f"{free / 2**30:.1f} GiB is free: free some space (`nox -s clean` removes "
            f"the row environments and dist/) and run again")


def _run_sweep(session: nox.Session, name: str, test: Path, env: dict[str, str], counts_prefix: str) -> None:
    """Run one long sweep (a test module) in the default row, arguments after
    ``--`` going to pytest; with COMPAT_RECORD=1 record a passing run in
    compat/runs.json (COMPATIBILITY.en.md's "Long sweeps"), with the line the
    sweep's conftest prints starting with ``counts_prefix`` in its summary."""
    python_exe = str(_row_env(MATRIX.default.torch, MATRIX.default.python) / "bin" / "python")
    session.run(str(ROOT / "dev"), "setup", external=True)
    output = _run_streaming(session, [python_exe, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(test),
                                      *session.posargs],
                            {"NPU_SIM_CHECKER": "1", **env})
    if os.environ.get("COMPAT_RECORD") == "1":
        versions = _torch_distributions(python_exe)
        counts = [l.strip() for l in output.splitlines() if l.startswith(counts_prefix)]
        session.run(sys.executable, "-m", "compat", "record-sweep", "--name", name,
                    "--torch", MATRIX.default.torch, "--python", MATRIX.default.python,
                    "--command", f'nox -s "{session.name}"',
                    "--summary", _pytest_summary(output) + (f"; {counts[-1]}" if counts else ""),
                    "--date", datetime.date.today().isoformat(),
                    *[f"--version={k}={v}" for k, v in versions.items()], external=True)


@nox.session(venv_backend="none")
def opinfo_full(session: nox.Session) -> None:
    """The whole OpInfo sweep in the default row (every CPU dtype, every
    sample; test_opinfo_conformance.py): too long for CI, run before a release.
    With COMPAT_RECORD=1 a passing run is recorded in compat/runs.json."""
    _run_sweep(session, "opinfo_full", ROOT / "packages" / "ops" / "tests" / "test_opinfo_conformance.py",
               {"TORCH_NPU_OPINFO_FULL": "1"}, "OpInfo conformance:")


@nox.session(venv_backend="none")
def compile_opinfo_full(session: nox.Session) -> None:
    """The wide scan of torch.compile on npu against eager npu (every
    eligible OpInfo in float32, float16, bfloat16 and int64, gradients in
    float32; packages/graph/tests/test_compile_opinfo_full.py): too long for
    CI, about 40 min on 2 cores. Arguments after ``--`` go to pytest (e.g.
    ``-k float32``); the TORCH_NPU_COMPILE_OPINFO_* variables of the test
    module choose dtypes, samples and shards. With COMPAT_RECORD=1 a passing
    run is recorded in compat/runs.json."""
    _run_sweep(session, "compile_opinfo_full", ROOT / "packages" / "graph" / "tests" / "test_compile_opinfo_full.py",
               {"TORCH_NPU_COMPILE_OPINFO_FULL": "1"}, "Compiled OpInfo scan:")


@nox.session(venv_backend="none")
def compat_check(session: nox.Session) -> None:
    """The tree agrees with compat/ (generated files, versions, pins)."""
    session.run(sys.executable, "-m", "compat", "check", external=True)


@nox.session(venv_backend="none")
def build(session: nox.Session) -> None:
    """Wheels of every package into dist/, built against this environment's torch."""
    DIST.mkdir(exist_ok=True)
    for old in DIST.glob("torch_npu*"):
        old.unlink()
    for package in PACKAGES:
        session.run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-q", "-w", str(DIST),
                    str(ROOT / package.folder), external=True)
    session.log("built: " + ", ".join(sorted(p.name for p in DIST.glob("*.whl"))))


def _constraints(session: nox.Session) -> Path:
    """Pins our distributions to the wheels in dist/. PyPI has an unrelated
    ``torch-npu`` (Ascend's, 2.x) that pip would otherwise prefer."""
    pins = []
    for wheel in sorted(DIST.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        pins.append(f"{name.replace('_', '-')}=={version}")
    if len(pins) != len(PACKAGES):
        session.error(f"dist/ holds {len(pins)} of our {len(PACKAGES)} wheels: run `nox -s build` first")
    path = Path(session.create_tmp()) / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


# Fresh environments with the default row's Python, installed from dist/.
@nox.session(python=MATRIX.default.python)
@nox.parametrize("selection", ["all", "core+distributed"])
def install_check(session: nox.Session, selection: str) -> None:
    """`pip install --find-links dist "torch-npu[all]"`, or a selective install,
    into a fresh venv; then probe what works and what says what to install."""
    constraints = _constraints(session)
    torch = MATRIX.default.torch
    specs = ["torch-npu[all]"] if selection == "all" else ["torch-npu-core", "torch-npu-distributed"]
    session.install("--find-links", str(DIST), "-c", str(constraints), f"torch=={torch}", *specs)
    # Run from a directory without the sources, so only the installed packages count.
    with session.chdir(session.create_tmp()):
        session.run("python", str(ROOT / "compat" / "install_probe.py"), selection,
                    env={"NPU_SIM_CHECKER": "1"})
    # Each check's environment holds a full torch (about 1 GB) and is made
    # afresh every run; once it has passed, the disk is worth more.
    shutil.rmtree(session.virtualenv.location, ignore_errors=True)


@nox.session(python=MATRIX.default.python)
def lint(session: nox.Session) -> None:
    """ruff over the Python sources (configuration in ruff.toml)."""
    session.install(RUFF)
    session.run("ruff", "check", str(ROOT))


@nox.session(venv_backend="none")
def clean(session: nox.Session) -> None:
    """Remove dist/ and the row environments under .nox/rows."""
    shutil.rmtree(DIST, ignore_errors=True)
    shutil.rmtree(ROOT / ".nox" / "rows", ignore_errors=True)
