"""Is a torch wheel obtainable from this machine's local sources?

"Local" means pip's configured find-links directories and ``file://``
indexes (``pip config list``). A row whose torch is only on a remote index
(a multi-GB CUDA build on this project's machines) is not run unless
``NOX_ALLOW_TORCH_DOWNLOAD=1``; it is reported as not run, never as passed.
"""

from __future__ import annotations

import html.parser
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterable, List
from urllib.parse import unquote, urlparse

ALLOW_DOWNLOAD_ENV = "NOX_ALLOW_TORCH_DOWNLOAD"


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: List[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self.names.append(unquote(href.split("#", 1)[0].rsplit("/", 1)[-1]))


def _pip_config() -> dict:
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                         capture_output=True, text=True).stdout
    config: dict = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        config[key.split(".", 1)[-1].strip()] = value.strip().strip("'\"")
    return config


def _local_paths(values: Iterable[str]) -> List[Path]:
    paths = []
    for value in values:
        for item in value.split():
            if item.startswith("file://"):
                paths.append(Path(urlparse(item).path))
            elif "://" not in item:
                paths.append(Path(item))
    return [p for p in paths if p.exists()]


def local_wheel_names(project: str = "torch") -> List[str]:
    """File names of ``project`` wheels in the local find-links dirs and indexes."""
    config = _pip_config()
    names: List[str] = []
    for directory in _local_paths([config.get("find-links", ""), os.environ.get("PIP_FIND_LINKS", "")]):
        names += [p.name for p in directory.glob("*.whl")]
    indexes = [config.get("index-url", ""), config.get("extra-index-url", ""),
               os.environ.get("PIP_EXTRA_INDEX_URL", "")]
    for index in _local_paths(indexes):
        page = index / project / "index.html"
        if page.exists():
            parser = _Links()
            parser.feed(page.read_text(errors="replace"))
            names += parser.names
    return names


def torch_wheel_is_local(torch: str, python: str) -> bool:
    tag = "cp" + python.replace(".", "")
    pattern = re.compile(rf"^torch-{re.escape(torch)}(\+[^-]+)?-{tag}-{tag}-\S+\.whl$")
    return any(pattern.match(name) for name in local_wheel_names())


def torch_obtainable(torch: str, python: str) -> bool:
    return os.environ.get(ALLOW_DOWNLOAD_ENV) == "1" or torch_wheel_is_local(torch, python)
