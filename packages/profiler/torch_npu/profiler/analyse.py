"""Offline analysis from the command line:

    python -m torch_npu.profiler.analyse PATH [--max-process-number N]

PATH is a result directory (``*_ascend_pt``) or a directory holding several
(one per rank)."""

from __future__ import annotations

import argparse
import sys

from .profiler import analyse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_npu.profiler.analyse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--max-process-number", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        outputs = analyse(args.path, max_process_number=args.max_process_number)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for output in outputs:
        print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
