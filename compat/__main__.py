"""Command line of the compat tooling: ``python -m compat COMMAND``."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import List, Optional

from .check import run_checks
from .matrix import MatrixError, Row, load, record_run, record_sweep
from .render import generated_files


def _render(args: argparse.Namespace) -> int:
    matrix = load()
    for path, text in generated_files(matrix).items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path}")
    return 0


def _check(args: argparse.Namespace) -> int:
    problems = run_checks(load())
    for problem in problems:
        print(f"compat check: {problem}", file=sys.stderr)
    if problems:
        print(f"compat check: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("compat check: the tree agrees with compat/")
    return 0


def _rows(args: argparse.Namespace) -> int:
    matrix = load()
    out = []
    for row in matrix.rows:
        status = matrix.status(row)
        out.append({"torch": row.torch, "cann": row.cann, "python": row.python,
                    "status": status.status, "session": row.session,
                    "default": row == matrix.default,
                    "pins": matrix.build_pins.get(row.torch, {})})
    print(json.dumps(out, indent=2))
    return 0


def _ci_rows(args: argparse.Namespace) -> int:
    """The rows CI runs besides the default one: the default torch and Python
    with one CANN release of each feature set the default release does not
    have (Note [What a CANN row runs]), and every other torch of the matrix
    with the default CANN and Python when its wheel is on this machine."""
    from .cann_reach import ci_cann_releases
    from .local_wheels import torch_wheel_is_local

    matrix = load()
    d = matrix.default
    canns = ci_cann_releases(matrix)
    for row in matrix.rows:
        if row not in matrix.supported or row == d:
            continue
        other_cann = (row.torch, row.python) == (d.torch, d.python) and row.cann in canns
        other_torch = (row.cann, row.python) == (d.cann, d.python) and torch_wheel_is_local(row.torch, row.python)
        if other_cann or other_torch:
            print(row.session)
    return 0


def _cann_row_tests(args: argparse.Namespace) -> int:
    """The tests a row that differs only in CANN runs (Note [What a CANN row runs])."""
    from .cann_reach import cann_row_tests

    for path in cann_row_tests(Path(args.reach_log), args.test_dirs):
        print(path)
    return 0


def _torch_free_tests(args: argparse.Namespace) -> int:
    """The test folders a row of another torch skips (Note [What another
    torch's row runs])."""
    from .torch_reach import torch_free_folders

    for path in torch_free_folders(args.test_dirs):
        print(path)
    return 0


def _record(args: argparse.Namespace) -> int:
    matrix = load()
    torch, cann, python = args.torch, args.cann, args.python
    row = Row(torch, cann, python)
    if row not in matrix.supported:
        print(f"compat record: {row.key} is not a supported row", file=sys.stderr)
        return 2
    versions = dict(v.split("=", 1) for v in args.version)
    date = args.date or datetime.date.today().isoformat()
    record_run(row, args.command, args.summary, versions, date)
    return _render(args)


def _record_sweep(args: argparse.Namespace) -> int:
    versions = dict(v.split("=", 1) for v in args.version)
    date = args.date or datetime.date.today().isoformat()
    record_sweep(args.name, args.torch, args.python, args.command, args.summary, versions, date)
    return _render(args)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("render", help="regenerate the files made from compat/").set_defaults(fn=_render)
    sub.add_parser("check", help="fail when the tree disagrees with compat/").set_defaults(fn=_check)
    sub.add_parser("rows", help="print the rows as JSON").set_defaults(fn=_rows)
    sub.add_parser("ci-rows", help="print the nox sessions of the extra rows CI runs").set_defaults(fn=_ci_rows)
    reach = sub.add_parser("cann-row-tests", help="print the tests a row that differs only in CANN runs: "
                           "those that asked about CANN in the default row's run")
    reach.add_argument("reach_log", help="the default row's NPU_SIM_CANN_REACH_LOG")
    reach.add_argument("test_dirs", nargs="+", help="the test folders of the tree")
    reach.set_defaults(fn=_cann_row_tests)
    free = sub.add_parser("torch-free-tests", help="print the test folders that never import torch "
                          "(a row of another torch skips them)")
    free.add_argument("test_dirs", nargs="+", help="the test folders of the tree")
    free.set_defaults(fn=_torch_free_tests)
    rec = sub.add_parser("record", help="record a passing run of a row, then render")
    rec.add_argument("--torch", required=True)
    rec.add_argument("--cann", required=True)
    rec.add_argument("--python", required=True)
    rec.add_argument("--command", required=True)
    rec.add_argument("--summary", required=True)
    rec.add_argument("--version", action="append", default=[], metavar="DIST=VERSION")
    rec.add_argument("--date")
    rec.set_defaults(fn=_record)
    sweep = sub.add_parser("record-sweep", help="record a passing run of a long sweep, then render")
    sweep.add_argument("--name", required=True)
    for flag in ("--torch", "--python", "--command", "--summary"):
        sweep.add_argument(flag, required=True)
    sweep.add_argument("--version", action="append", default=[], metavar="DIST=VERSION")
    sweep.add_argument("--date")
    sweep.set_defaults(fn=_record_sweep)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except MatrixError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
