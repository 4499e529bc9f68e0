"""What the picture commands share: matplotlib imported on first use (an
optional dependency), and self-contained HTML pages (one inlined PNG, tables).

Used by ``memory_viz`` (memory snapshots) and ``run_summary`` (profiling
results).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from typing import Any

INSTALL_HINT = "pip install 'torch-npu-profiler[viz]'"

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.6em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f2f2f2; }
pre { margin: 0; font-size: 0.85em; white-space: pre-wrap; }
img { max-width: 100%; border: 1px solid #ddd; }
.note { color: #666; font-size: 0.9em; }
"""


def import_matplotlib(purpose: str) -> Any:
    """matplotlib, imported on first use; a missing one says how to install it."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401  (fails early when broken)
    except ImportError as e:
        raise ImportError(f"{purpose} needs matplotlib, an optional dependency of torch-npu-profiler: "
                          f"{INSTALL_HINT} (import failed: {e})") from e
    return matplotlib


def escape(value: Any) -> str:
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    """An HTML table; ``rows`` hold already-escaped cell HTML."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, png: bytes, image_alt: str, body: str) -> str:
    """A whole HTML page: the title, the PNG inlined as base64, then ``body``."""
    image = base64.b64encode(png).decode("ascii")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{escape(title)}</h1>\n"
            f'<img alt="{escape(image_alt)}" src="data:image/png;base64,{image}">\n{body}\n</body>\n</html>\n')
