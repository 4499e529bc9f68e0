"""Files generated from the compat/ data.

- ``COMPATIBILITY.en.md``: the matrix for people;
- ``packages/core/torch_npu/_compat_data.py``: the matrix and the CANN
  feature table for torch_npu at run time (collect_env's row, feature checks);
- ``packages/core/csrc/simulator/cann_feature_table.inc``: the simulator's
  feature gates.

They are committed, so that each package builds from its own folder; the
compat check fails when one differs from what :func:`generated_files` gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from .matrix import ROOT, STALE, TESTED, UNSUPPORTED, CannVersion, Matrix, Row

DOC_FILE = ROOT / "COMPATIBILITY.en.md"
CORE_DATA_FILE = ROOT / "packages/core/torch_npu/_compat_data.py"
SIM_TABLE_FILE = ROOT / "packages/core/csrc/simulator/cann_feature_table.inc"

_HEADER_NOTE = "Generated from compat/ by `python -m compat render`; do not edit by hand."


def _cell(matrix: Matrix, row: Row) -> str:
    status = matrix.status(row)
    if status.status == TESTED:
        return f"tested {status.run['date']}"
    if status.status == STALE:
        return f"last tested at {_tested_at(status.run)}"
    if status.status == UNSUPPORTED:
        return "unsupported"
    return "untested"


def _tested_at(run: Dict[str, Any]) -> str:
    """Where a recorded run was made: its commit, or its date for records
    made before runs named their commit."""
    return run.get("commit") or run["date"]


def render_doc(matrix: Matrix) -> str:
    out: List[str] = [
        "# Compatibility",
        "",
        f"<!-- {_HEADER_NOTE} -->",
        "",
        "Which versions of PyTorch, CANN and Python torch-npu works with. The data",
        "lives in [`compat/`](compat/) (`matrix.toml`, `cann_features.toml`,",
        "`runs.json`); this page, the table torch_npu ships and the simulator's",
        "CANN feature gates are generated from it, and CI fails when they disagree.",
        "",
        "- **tested DATE**: the row's nox session passed on that date with the",
        "  current test suite (command, commit and count below);",
        "- **last tested at COMMIT**: a passing run is recorded, but the test suite",
        "  has changed since (`python -m compat` compares a hash of every test file);",
        "  the row needs a new run before it counts as tested;",
        "- **untested**: meant to work, no passing run recorded (on this project's",
        "  machines only torch 2.13.0 and 2.14.1 for Python 3.11 are on local disk;",
        "  other rows run with `NOX_ALLOW_TORCH_DOWNLOAD=1`, which installs PyPI's",
        "  torch, a multi-GB CUDA build that runs on the CPU);",
        "- **unsupported**: known not to work (reason below).",
        "",
        "CANN columns are releases of CANN's runtime API. No NPU and no CANN",
        "installation exist on the machines this project is tested on: every",
        "result is on the embedded simulator emulating that release",
        "(`NPU_SIM_CANN_VERSION`).",
        "",
    ]
    rows = matrix.rows
    for torch in sorted({r.torch for r in rows}, key=lambda v: [int(p) for p in v.split(".")]):
        of_torch = [r for r in rows if r.torch == torch]
        canns = sorted({r.cann for r in of_torch}, key=CannVersion)
        pythons = sorted({r.python for r in of_torch}, key=lambda v: [int(p) for p in v.split(".")])
        out += [f"## torch {torch}", ""]
        pins = matrix.build_pins.get(torch)
        if pins:
            out += ["Build pins: " + ", ".join(f"{k} {v}" for k, v in sorted(pins.items())) + ".", ""]
        out.append("| Python | " + " | ".join(f"CANN {c}" for c in canns) + " |")
        out.append("|---|" + "---|" * len(canns))
        for python in pythons:
            cells = []
            for cann in canns:
                row = matrix.find_row(torch, cann, python)
                cells.append(_cell(matrix, row) if row else "—")
            out.append(f"| {python} | " + " | ".join(cells) + " |")
        out.append("")

    recorded = [(r, matrix.status(r)) for r in rows if matrix.status(r).status in (TESTED, STALE)]
    out += ["## Recorded runs", ""]
    if recorded:
        for row, status in recorded:
            run = status.run
            versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items())
            where = f"commit {run['commit']}" if run.get("commit") else "commit not recorded"
            stale = "" if status.status == TESTED else " **The test suite has changed since.**"
            out += [
                f"- torch {row.torch}, CANN {row.cann}, Python {row.python}: "
                f"{run['date']}, {where}, `{run['command']}`: {run.get('summary', '')}"
                + (f" ({versions})" if versions else "") + "." + stale,
            ]
    else:
        out.append("None yet.")
    out.append("")

    reasons: Dict[str, List[Row]] = {}
    for row in rows:
        status = matrix.status(row)
        if status.status == UNSUPPORTED:
            reasons.setdefault(status.reason, []).append(row)
    if reasons:
        out += ["## Unsupported", ""]
        for reason, of_reason in reasons.items():
            combos = "; ".join(f"torch {r.torch}, CANN {r.cann}, Python {r.python}" for r in of_reason)
            out.append(f"- {combos}: {reason}.")
        out.append("")

    out += [
        "## Packages",
        "",
        "Each row accepts these versions of the torch-npu packages. Plugins pin the",
        "torch-npu-core versions they work with in their metadata, and a plugin",
        "built against another core is refused at import with a message that says",
        "what to install.",
        "",
        "| package | versions |",
        "|---|---|",
    ]
    for dist, spec in sorted(matrix.packages.items()):
        out.append(f"| {dist} | `{spec}` |")
    out += [
        "",
        "[`version.txt`](version.txt) lists the torch versions this tree adapts; builds",
        "and the import-time check read it. A build of torch_npu works only with the",
        "torch it was built with (C++ ABI); `import torch_npu` refuses any other",
        "(`TORCH_NPU_SKIP_TORCH_VERSION_CHECK=1` imports anyway, unsupported).",
        "",
        "## CANN features",
        "",
        "Features that depend on the CANN release. torch_npu says which CANN a",
        "feature needs when the one in use is older",
        "(`torch.npu.require_cann_feature`, `torch.npu.is_cann_feature_available`),",
        "and the simulator gates the features it implements by the release it",
        "emulates.",
        "",
        "| feature | since | used by | simulator | source |",
        "|---|---|---|---|---|",
    ]
    for f in matrix.features:
        out.append(f"| {f.name}: {f.description} | {f.since} | {f.used_by} | {f.simulator} | {f.source}; {f.checked} |")
    out += [
        "",
        "## Running a row",
        "",
        "```",
        "./dev setup                                   # .venv with nox",
        ".venv/bin/nox -l                              # every session",
        f'.venv/bin/nox -s "{matrix.default.session}"',
        "COMPAT_RECORD=1 .venv/bin/nox -s \"tests(...)\" # record a passing run in compat/runs.json",
        "```",
        "",
        "A row whose torch cannot be obtained on the machine is reported as not run",
        "(skipped), never as passed.",
        "",
    ]
    return "\n".join(out)


def render_core_data(matrix: Matrix) -> str:
    lines = [
        f'"""The compatibility matrix and CANN feature table. {_HEADER_NOTE}"""',
        "",
        "# (torch, cann, python) -> (status, detail): status is 'tested' (detail:",
        "# date and command), 'stale' (a run of an older test suite; detail: where",
        "# it was last tested), 'untested' or 'unsupported' (detail: the reason).",
        "ROWS = {",
    ]
    for row in matrix.rows:
        status = matrix.status(row)
        if status.status == TESTED:
            detail = f"{status.run['date']}: {status.run['command']}"
        elif status.status == STALE:
            detail = f"last tested at {_tested_at(status.run)}; the test suite has changed since"
        elif status.status == UNSUPPORTED:
            detail = status.reason
        else:
            detail = ""
        lines.append(f"    ({row.torch!r}, {row.cann!r}, {row.python!r}): ({status.status!r}, {detail!r}),")
    lines += [
        "}",
        "",
        f"DEFAULT_ROW = ({matrix.default.torch!r}, {matrix.default.cann!r}, {matrix.default.python!r})",
        "",
        "# distribution -> version specifier accepted by the rows",
        "PACKAGES = {",
    ]
    for dist, spec in sorted(matrix.packages.items()):
        lines.append(f"    {dist!r}: {spec!r},")
    oldest = min((CannVersion(r.cann) for r in matrix.supported), default=None)
    lines += [
        "}",
        "",
        "# The oldest CANN release of a supported row.",
        f"OLDEST_SUPPORTED_CANN = {str(oldest)!r}",
        "",
        "# feature -> (first CANN release with it, description, what uses it)",
        "CANN_FEATURES = {",
    ]
    for f in matrix.features:
        lines.append(f"    {f.name!r}: ({f.since!r}, {f.description!r}, {f.used_by!r}),")
    lines += ["}", ""]
    return "\n".join(lines)


def render_simulator_table(matrix: Matrix) -> str:
    lines = [
        f"// {_HEADER_NOTE}",
        "// NPU_SIM_CANN_FEATURE(enumerator, name, description, first CANN release)",
    ]
    for f in matrix.features:
        enumerator = "k" + "".join(part.capitalize() for part in f.name.split("_"))
        description = f.description.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'NPU_SIM_CANN_FEATURE({enumerator}, "{f.name}", "{description}", "{f.since}")')
    return "\n".join(lines) + "\n"


def generated_files(matrix: Matrix) -> Dict[Path, str]:
    return {
        DOC_FILE: render_doc(matrix),
        CORE_DATA_FILE: render_core_data(matrix),
        SIM_TABLE_FILE: render_simulator_table(matrix),
    }
