"""The compatibility matrix as Python objects, read from the files in compat/.

- ``matrix.toml``: rows of (torch, CANN, Python), the build pins that follow
  torch, the default row;
- ``packages/*/pyproject.toml`` (through :mod:`compat.packages`): the packages
  and their release lines, the version ranges every row accepts;
- ``cann_features.toml``: which CANN release introduced which feature;
- ``runs.json``: passing runs of row sessions, written by
  ``python -m compat record`` (nox does it with ``COMPAT_RECORD=1``), and of
  the long sweeps too long for CI (``SWEEPS``; ``python -m compat
  record-sweep``). A run names the commit it tested and a fingerprint of the
  test suite it ran; a row or sweep reads as tested only while that
  fingerprint is the current suite's.

Only the standard library (tomllib; tomli on Python 3.10) and core's standalone
``torch_npu/_cann_version.py`` (loaded by path: core need not be installed).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (matrix rows): the same parser, from PyPI
    import tomli as tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional

ROOT = Path(__file__).resolve().parents[1]
COMPAT_DIR = ROOT / "compat"
MATRIX_FILE = COMPAT_DIR / "matrix.toml"
FEATURES_FILE = COMPAT_DIR / "cann_features.toml"
RUNS_FILE = COMPAT_DIR / "runs.json"

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
# Displayed status of a row.
TESTED = "tested"  # a passing run of the current test suite is recorded
STALE = "stale"  # the recorded run ran an older suite: "last tested at <commit>"
UNTESTED = "untested"


def _load_cann_version_module():
    path = ROOT / "packages/core/torch_npu/_cann_version.py"
    name = "_compat_cann_version"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CannVersion = _load_cann_version_module().CannVersion


# The sweeps too long for CI, run by their nox session before a release and
# recorded like the rows: name -> what it runs.
SWEEPS = {
    "opinfo_full": "the whole OpInfo sweep (every sample of every CPU dtype of every OpInfo, "
                   "packages/ops/tests/test_opinfo_conformance.py with TORCH_NPU_OPINFO_FULL=1) "
                   "in the default row",
    "compile_opinfo_full": "the wide scan of torch.compile on npu against eager npu (every eligible OpInfo "
                           "in float32, float16, bfloat16 and int64, gradients in float32, 2 samples each, "
                           "packages/graph/tests/test_compile_opinfo_full.py with "
                           "TORCH_NPU_COMPILE_OPINFO_FULL=1) in the default row",
}


class MatrixError(ValueError):
    """The data in compat/ is malformed."""


def load_toml(path: Path) -> Dict[str, Any]:
    """A TOML file's contents (compat/'s data, a package's pyproject.toml)."""
    with open(path, "rb") as f:
        return tomllib.load(f)


@dataclass(frozen=True, order=True)
class Row:
    """One (torch, CANN, Python) combination."""

    torch: str
    cann: str
    python: str

    @property
    def key(self) -> str:
        return f"torch={self.torch},cann={self.cann},python={self.python}"

    @property
    def session(self) -> str:
        """The name of the row's nox session."""
        return f"tests(torch='{self.torch}', cann='{self.cann}', python='{self.python}')"


@dataclass(frozen=True)
class RowStatus:
    status: str  # TESTED, STALE, UNTESTED or UNSUPPORTED
    reason: str = ""  # for UNSUPPORTED
    run: Optional[Dict[str, Any]] = None  # the latest passing run, for TESTED and STALE


@dataclass(frozen=True)
class Feature:
    name: str
    description: str
    since: str
    apis: List[str]
    used_by: str
    source: str
    checked: str
    simulator: str  # what the simulator does about it


@dataclass
class Matrix:
    packages: Dict[str, str]  # distribution -> version specifier (its release line)
    build_pins: Dict[str, Dict[str, str]]  # torch version -> {tool: version}
    default: Row
    emulated_cann: List[str]
    supported: Dict[Row, str] = field(default_factory=dict)  # row -> ""
    unsupported: Dict[Row, str] = field(default_factory=dict)  # row -> reason
    features: List[Feature] = field(default_factory=list)
    runs: List[Dict[str, Any]] = field(default_factory=list)
    sweeps: List[Dict[str, Any]] = field(default_factory=list)  # passing runs of SWEEPS
    suite: str = ""  # suite_fingerprint() of the tree the matrix was loaded from
    # compat.packages.Package of every package, in build order
    package_list: List[Any] = field(default_factory=list)

    # ---- queries ---------------------------------------------------------
    @property
    def rows(self) -> List[Row]:
        """Every row, supported first, in version order."""
        return sorted(self.supported, key=_row_order) + sorted(self.unsupported, key=_row_order)

    @property
    def torch_versions(self) -> List[str]:
        """The torch versions of supported rows (what version.txt lists)."""
        return sorted({r.torch for r in self.supported}, key=_version_tuple)

    def pins(self, torch: str) -> Dict[str, str]:
        try:
            return dict(self.build_pins[torch])
        except KeyError:
            raise MatrixError(f"matrix.toml has no [torch.\"{torch}\"] build pins") from None

    def status(self, row: Row) -> RowStatus:
        if row in self.unsupported:
            return RowStatus(UNSUPPORTED, reason=self.unsupported[row])
        if row not in self.supported:
            raise MatrixError(f"{row.key} is not a row of the matrix")
        runs = [r for r in self.runs if r.get("row") == row.key]
        if not runs:
            return RowStatus(UNTESTED)
        run = max(runs, key=lambda r: r.get("date", ""))
        current = run.get("suite") is not None and run.get("suite") == self.suite
        return RowStatus(TESTED if current else STALE, run=run)

    def sweep_status(self, name: str) -> RowStatus:
        """TESTED, STALE or UNTESTED, as a row's, for one of SWEEPS."""
        if name not in SWEEPS:
            raise MatrixError(f"{name!r} is not a sweep (known: {', '.join(SWEEPS)})")
        runs = [r for r in self.sweeps if r.get("sweep") == name]
        if not runs:
            return RowStatus(UNTESTED)
        run = max(runs, key=lambda r: r.get("date", ""))
        current = run.get("suite") is not None and run.get("suite") == self.suite
        return RowStatus(TESTED if current else STALE, run=run)

    def find_row(self, torch: str, cann: str, python: str) -> Optional[Row]:
        row = Row(torch, cann, python)
        return row if row in self.supported or row in self.unsupported else None

    def feature(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(name)

    def features_at(self, cann: str) -> FrozenSet[str]:
        """The names of the features CANN release ``cann`` has (those whose
        ``since`` is not newer)."""
        return frozenset(f.name for f in self.features if CannVersion(f.since) <= CannVersion(cann))


def _version_tuple(text: str):
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


def _row_order(row: Row):
    return (_version_tuple(row.torch), _version_tuple(row.python), CannVersion(row.cann))


def _as_list(value: Any, what: str) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise MatrixError(f"{what} must be a string or a list of strings, got {value!r}")


def _expand(entry: Dict[str, Any], index: int) -> List[Row]:
    where = f"matrix.toml [[row]] #{index + 1}"
    for key in ("torch", "cann", "python", "status"):
        if key not in entry:
            raise MatrixError(f"{where} has no {key!r}")
    rows = []
    for torch in _as_list(entry["torch"], f"{where} torch"):
        for cann in _as_list(entry["cann"], f"{where} cann"):
            if not CannVersion.is_valid(cann):
                raise MatrixError(f"{where}: {cann!r} is not a CANN version")
            for python in _as_list(entry["python"], f"{where} python"):
                rows.append(Row(torch, cann, python))
    return rows


def load(
    matrix_file: Path = MATRIX_FILE,
    features_file: Path = FEATURES_FILE,
    runs_file: Path = RUNS_FILE,
    root: Path = ROOT,
) -> Matrix:
    """Read and validate the compat/ files and the packages under ``root``."""
    from .packages import discover  # compat.packages imports this module

    data = load_toml(matrix_file)
    if "packages" in data:
        raise MatrixError("matrix.toml: the [packages] table is gone; the package versions are "
                          "read from packages/*/pyproject.toml")
    package_list = discover(root)
    default = data.get("default", {})
    try:
        default_row = Row(default["torch"], default["cann"], default["python"])
    except KeyError as exc:
        raise MatrixError(f"matrix.toml [default] has no {exc.args[0]!r}") from None
    matrix = Matrix(
        packages={p.name: p.release for p in package_list},
        package_list=package_list,
        build_pins={k: dict(v) for k, v in data.get("torch", {}).items()},
        default=default_row,
        emulated_cann=list(data.get("cann", {}).get("emulated", [])),
    )
    for index, entry in enumerate(data.get("row", [])):
        status = entry.get("status")
        for row in _expand(entry, index):
            if row in matrix.supported or row in matrix.unsupported:
                raise MatrixError(f"{row.key} appears in more than one [[row]]")
            if status == SUPPORTED:
                matrix.supported[row] = ""
            elif status == UNSUPPORTED:
                if not entry.get("reason"):
                    raise MatrixError(f"unsupported row {row.key} needs a 'reason'")
                matrix.unsupported[row] = entry["reason"]
            else:
                raise MatrixError(
                    f"matrix.toml [[row]] #{index + 1}: status must be "
                    f"{SUPPORTED!r} or {UNSUPPORTED!r}, got {status!r}"
                )
    if default_row not in matrix.supported:
        raise MatrixError(f"the default row {default_row.key} is not a supported row")
    for torch in matrix.torch_versions:
        matrix.pins(torch)  # every supported torch has build pins
    features = load_toml(features_file).get("feature", {})
    for name, spec in features.items():
        try:
            feature = Feature(name=name, **spec)
        except TypeError as exc:
            raise MatrixError(f"cann_features.toml [feature.{name}]: {exc}") from None
        if not CannVersion.is_valid(feature.since):
            raise MatrixError(f"[feature.{name}] since={feature.since!r} is not a CANN version")
        matrix.features.append(feature)
    matrix.features.sort(key=lambda f: (CannVersion(f.since), f.name))
    if runs_file.exists():
        recorded = json.loads(runs_file.read_text())
        matrix.runs = list(recorded.get("runs", []))
        matrix.sweeps = list(recorded.get("sweeps", []))
    matrix.suite = suite_fingerprint()
    return matrix


def _suite_files(root: Path) -> List[Path]:
    dirs = sorted(root.glob("packages/*/tests")) + [root / "tests"]
    return sorted(f for d in dirs if d.is_dir() for f in d.rglob("*")
                  if f.is_file() and "__pycache__" not in f.parts)


def suite_fingerprint(root: Path = ROOT) -> str:
    """A hash of every file of the test suites (``packages/*/tests``, ``tests``):
    a recorded run vouches for a row only while the suite it ran is this one."""
    digest = hashlib.sha256()
    for path in _suite_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def current_commit(root: Path = ROOT) -> str:
    """The short hash of the checked-out commit, "+dirty" when the tree has
    uncommitted changes; "unknown" outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short=10", "HEAD")
        # Recording a row rewrites runs.json and what is rendered from it; a
        # matrix run records several rows, each on the same commit.
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                         ":!compat/runs.json", ":!COMPATIBILITY.en.md",
                         ":!packages/core/torch_npu/_compat_data.py"))
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def passed_count(summary: str) -> Optional[int]:
    """The number of passed tests in a pytest summary line, or None."""
    found = re.search(r"(\d+) passed", summary)
    return int(found.group(1)) if found else None


def _run_record(command: str, summary: str, versions: Dict[str, str], date: str) -> Dict[str, Any]:
    return {"date": date, "command": command, "summary": summary, "passed": passed_count(summary),
            "commit": current_commit(), "suite": suite_fingerprint(),
            "versions": dict(sorted(versions.items()))}


def _write_runs(runs_file: Path, key: str, name_field: str, record: Dict[str, Any]) -> None:
    """Put ``record`` into runs.json's ``key`` list, replacing the older
    record with the same ``name_field``, keeping the other lists."""
    data = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    data.setdefault("runs", [])
    entries = [r for r in data.get(key, []) if r.get(name_field) != record[name_field]]
    entries.append(record)
    entries.sort(key=lambda r: r[name_field])
    data[key] = entries
    runs_file.write_text(json.dumps(data, indent=2) + "\n")


def record_run(row: Row, command: str, summary: str, versions: Dict[str, str],
               date: str, runs_file: Path = RUNS_FILE) -> None:
    """Add a passing run of ``row`` to runs.json (replacing an older one)."""
    _write_runs(runs_file, "runs", "row", {"row": row.key, **_run_record(command, summary, versions, date)})


def record_sweep(name: str, torch: str, python: str, command: str, summary: str, versions: Dict[str, str],
                 date: str, runs_file: Path = RUNS_FILE) -> None:
    """Add a passing run of the sweep ``name`` (one of SWEEPS) to runs.json."""
    if name not in SWEEPS:
        raise MatrixError(f"{name!r} is not a sweep (known: {', '.join(SWEEPS)})")
    _write_runs(runs_file, "sweeps", "sweep",
                {"sweep": name, "torch": torch, "python": python, **_run_record(command, summary, versions, date)})
