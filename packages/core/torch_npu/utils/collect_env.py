"""Print the environment torch_npu runs in, for bug reports.

    python -m torch_npu.utils.collect_env          # readable report
    python -m torch_npu.utils.collect_env --json   # the same as JSON

Every piece is collected on its own: one that cannot be determined is shown
as ``unavailable: <reason>`` and the rest is still printed. The module only
imports the standard library at top level, so it can also be run as a plain
script (``python collect_env.py``) when ``import torch_npu`` itself fails.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any, Callable, Dict, List

__all__ = ["get_env_info", "pretty_str", "main", "DISTRIBUTIONS"]

#: The distributions of this project, in display order.
DISTRIBUTIONS = (
    "torch-npu",
    "torch-npu-core",
    "torch-npu-ops",
    "torch-npu-distributed",
    "torch-npu-graph",
    "torch-npu-profiler",
)

#: Environment variables that change what torch_npu does.
ENV_PREFIXES = ("NPU_SIM_", "ASCEND_", "TORCH_NPU_")

NOT_INSTALLED = "not installed"


def unavailable(reason: Any) -> str:
    if isinstance(reason, BaseException):
        text = str(reason).strip().splitlines()
        text = text[0] if text else ""
        reason = f"{type(reason).__name__}: {text}" if text else type(reason).__name__
    return f"unavailable: {reason}"


def is_unavailable(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("unavailable: ")


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # a report must never crash
        return unavailable(exc)


def _os_name() -> str:
    name = platform.platform()
    try:
        release = platform.freedesktop_os_release()
        pretty = release.get("PRETTY_NAME")
        if pretty:
            name = f"{pretty} ({name})"
    except (OSError, AttributeError):
        pass
    return name


def _distributions() -> Dict[str, str]:
    import importlib.metadata

    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = NOT_INSTALLED
        except Exception as exc:
            out[dist] = unavailable(exc)
    return out


def _import(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


def _plugins() -> Any:
    plugins = _import("torch_npu._plugins")
    out = {}
    for key, info in sorted(plugins.loaded_plugins().items()):
        out[key] = {
            "distribution": info.distribution,
            "version": info.version,
            "status": info.status,
            "error": info.error,
        }
    return out


def _build_info() -> Dict[str, Any]:
    build = _import("torch_npu._build_info")
    return {
        "version": getattr(build, "__version__", None),
        "built_with_torch": getattr(build, "BUILT_WITH_TORCH", None),
        "supported_torch_versions": list(getattr(build, "SUPPORTED_TORCH_VERSIONS", ())),
        "cann_headers_version": getattr(build, "CANN_HEADERS_VERSION", None),
    }


def _backend() -> Dict[str, Any]:
    c = _import("torch_npu._C")
    _import("torch_npu.npu._cann")._note_cann_question()
    info = dict(c._backend_info())
    return {key: info.get(key) for key in ("backend", "library", "cann_version", "description")}


def _compatibility(info: Dict[str, Any]) -> Dict[str, Any]:
    """The matrix row the environment matches (COMPATIBILITY.en.md)."""
    if is_unavailable(info.get("backend")) or is_unavailable(info.get("torch")):
        return unavailable("needs the torch and backend information above")
    rows = _import("torch_npu._compat_rows")
    return rows.match_row(str(info["torch"]), str(info["backend"]["cann_version"]),
                          platform.python_version())


def _devices(torch: Any) -> Dict[str, Any]:
    npu = torch.npu
    out: Dict[str, Any] = {"available": _safe(npu.is_available)}
    count = _safe(npu.device_count)
    out["count"] = count
    devices: List[Dict[str, Any]] = []
    if isinstance(count, int):
        for i in range(count):
            devices.append(
                {
                    "index": i,
                    "name": _safe(lambda: str(npu.get_device_name(i))),
                    "total_memory": _safe(
                        lambda: int(npu.get_device_properties(i).total_memory)
                    ),
                }
            )
    out["devices"] = devices
    return out


def get_env_info() -> Dict[str, Any]:
    """Collect everything as a JSON-serialisable dict.

    A value that could not be determined is the string
    ``"unavailable: <reason>"``.
    """
    info: Dict[str, Any] = {
        "python": f"{platform.python_version()} ({sys.executable})",
        "os": _safe(_os_name),
        "machine": platform.machine(),
        "environment": {
            key: value
            for key, value in sorted(os.environ.items())
            if key.startswith(ENV_PREFIXES)
        },
        "distributions": _safe(_distributions),
    }

    try:
        torch = _import("torch")
    except Exception as exc:
        torch = None
        info["torch"] = unavailable(exc)
    else:
        info["torch"] = str(getattr(torch, "__version__", "unknown"))

    try:
        torch_npu = _import("torch_npu")
    except Exception as exc:
        torch_npu = None
        info["torch_npu"] = unavailable(exc)
    else:
        info["torch_npu"] = str(getattr(torch_npu, "__version__", "unknown"))

    if torch_npu is None:
        reason = unavailable("torch_npu could not be imported (see torch_npu above)")
        for key in ("build", "plugins", "backend", "compatibility", "devices"):
            info[key] = reason
        return info

    info["build"] = _safe(_build_info)
    info["plugins"] = _safe(_plugins)
    info["backend"] = _safe(_backend)
    info["compatibility"] = _safe(lambda: _compatibility(info))
    if torch is not None and hasattr(torch, "npu"):
        info["devices"] = _safe(lambda: _devices(torch))
    else:
        info["devices"] = unavailable("torch.npu is not registered")
    return info


def _bytes(value: Any) -> str:
    if not isinstance(value, int):
        return str(value)
    return f"{value} bytes ({value / 2**30:.2f} GiB)"


def _section(lines: List[str], title: str, value: Any, body: Callable[[Any], None]) -> None:
    if is_unavailable(value) or not isinstance(value, (dict, list)):
        lines.append(f"{title}: {value}")
        return
    lines.append(f"{title}:")
    body(value)


def pretty_str(info: Dict[str, Any]) -> str:
    """Render :func:`get_env_info`'s dict as readable text."""
    lines: List[str] = []
    get = info.get
    missing = unavailable("not collected")

    lines.append(f"Python: {get('python', missing)}")
    lines.append(f"OS: {get('os', missing)}")
    lines.append(f"Machine: {get('machine', missing)}")
    lines.append(f"torch: {get('torch', missing)}")
    lines.append(f"torch_npu: {get('torch_npu', missing)}")

    def dists(value: Dict[str, Any]) -> None:
        for name, version in value.items():
            lines.append(f"  {name}: {version}")

    _section(lines, "Distributions", get("distributions", missing), dists)

    def build(value: Dict[str, Any]) -> None:
        supported = value.get("supported_torch_versions") or []
        lines.append(f"  torch_npu version: {value.get('version')}")
        lines.append(f"  built with torch: {value.get('built_with_torch')}")
        lines.append(f"  supported torch: {', '.join(map(str, supported)) or 'none'}")
        lines.append(f"  CANN headers: {value.get('cann_headers_version')}")

    _section(lines, "Build", get("build", missing), build)

    def plugins(value: Dict[str, Any]) -> None:
        if not value:
            lines.append("  (none)")
        for name, plugin in value.items():
            text = f"  {name}: {plugin.get('distribution')} {plugin.get('version')} [{plugin.get('status')}]"
            if plugin.get("error"):
                text += f" {plugin['error']}"
            lines.append(text)

    _section(lines, "Plugins", get("plugins", missing), plugins)

    def backend(value: Dict[str, Any]) -> None:
        lines.append(f"  backend: {value.get('backend')}")
        lines.append(f"  library: {value.get('library')}")
        lines.append(f"  CANN version: {value.get('cann_version')}")
        lines.append(f"  description: {value.get('description')}")

    _section(lines, "Backend", get("backend", missing), backend)

    def compatibility(value: Dict[str, Any]) -> None:
        lines.append(f"  matrix row: {value.get('row')}")
        status = value.get("status")
        detail = value.get("detail")
        lines.append(f"  status: {status}" + (f" ({detail})" if detail else ""))

    _section(lines, "Compatibility (COMPATIBILITY.en.md)", get("compatibility", missing), compatibility)

    def devices(value: Dict[str, Any]) -> None:
        lines.append(f"  available: {value.get('available')}")
        lines.append(f"  device count: {value.get('count')}")
        for dev in value.get("devices") or []:
            lines.append(
                f"  npu:{dev.get('index')}: {dev.get('name')}, "
                f"total memory {_bytes(dev.get('total_memory'))}"
            )

    _section(lines, "Devices", get("devices", missing), devices)

    def environment(value: Dict[str, Any]) -> None:
        if not value:
            lines.append("  (none set)")
        for key, val in value.items():
            lines.append(f"  {key}={val}")

    _section(lines, "Environment (NPU_SIM_*, ASCEND_*, TORCH_NPU_*)", get("environment", missing), environment)
    return "\n".join(lines)


def main(argv: List[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    info = get_env_info()
    if "--json" in argv:
        print(json.dumps(info, indent=2, sort_keys=False))
    else:
        print("Collecting environment information...")
        print(pretty_str(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
