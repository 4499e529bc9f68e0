"""A picture of a memory snapshot: a PNG and a self-contained HTML page.

The input is a snapshot in torch.cuda's format: what
``torch.cuda.memory._snapshot()`` returns and ``torch.cuda.memory._dump_snapshot(path)``
pickles, a dict with ``"segments"`` (the allocator's state when the snapshot was
taken) and ``"device_traces"`` (per device, the allocator's recent actions when
``_record_memory_history()`` was on). :func:`render_snapshot` turns it into

- a PNG, drawn by matplotlib: per device, the memory over time as a stacked
  area chart by allocation site (the ``top`` sites by their own peak, the rest
  as "other", with the reserved memory and OOMs marked), and the segment layout
  (one bar per segment, its blocks coloured by allocation site or state);
- an HTML page that needs no network to view: the PNG inlined as base64 and
  tables of the peaks, the largest live allocations at the peak with their
  stacks, the call sites, the segments and the OOM events.

From the command line::

    python -m torch_npu.profiler.memory_viz SNAPSHOT.pickle [-o out.html] [--png out.png]
                                            [--device N] [--top N]

matplotlib is an optional dependency: ``pip install 'torch-npu-profiler[viz]'``.
Only the rendering needs it; loading and analysing a snapshot
(:func:`load_snapshot`, :func:`analyze_snapshot`) use the standard library.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._html_report import INSTALL_HINT, escape, import_matplotlib, page, table

__all__ = [
    "SnapshotError",
    "Allocation",
    "CallSite",
    "DeviceMemory",
    "MemoryReport",
    "load_snapshot",
    "analyze_snapshot",
    "render_snapshot",
    "main",
]

DEFAULT_TOP = 8
# The segment panel shows at most this many segments per device: a real
# allocator holds hundreds of small ones, whose bars would be a few pixels
# tall. The largest are shown (they hold most of the memory); the tables list all.
MAX_SEGMENT_BARS = 32
# The HTML lists this many of the largest live allocations at the peak.
MAX_LIVE_ROWS = 25
# The picture is FIGURE_WIDTH * DPI pixels wide; its height grows with the
# number of devices and segments.
FIGURE_WIDTH = 14.0  # inches
DPI = 100

OTHER = "other"
NO_STACK = "<no stack recorded>"
ALLOC_ACTIONS = ("alloc",)
RELEASE_ACTIONS = ("free_completed",)  # the block is reusable only from then on
SEGMENT_GROW = ("segment_alloc", "segment_map")
SEGMENT_SHRINK = ("segment_free", "segment_unmap")
KNOWN_ACTIONS = frozenset(ALLOC_ACTIONS + RELEASE_ACTIONS + SEGMENT_GROW + SEGMENT_SHRINK
                          + ("free_requested", "snapshot", "oom"))
# Block states: torch's C++ snapshot writes "active_pending_free"; the
# docstring of torch.cuda.memory._snapshot says "active_awaiting_free".
ALLOCATED = "active_allocated"
PENDING = ("active_pending_free", "active_awaiting_free")
INACTIVE = "inactive"

HOW_TO_MAKE_ONE = ("a memory snapshot is the pickle written by "
                   "torch.cuda.memory._dump_snapshot(path) (or pickle.dump of "
                   "torch.cuda.memory._snapshot())")


class SnapshotError(ValueError):
    """The input is not a memory snapshot in torch.cuda's format (the message
    says what is wrong with it and how to make one)."""


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


class _RefusedObject(pickle.UnpicklingError):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only. A snapshot holds nothing but dicts, lists,
    tuples, strings and numbers; refusing every class means a file that is not
    a snapshot cannot run code while being read."""

    def find_class(self, module: str, name: str) -> Any:
        raise _RefusedObject(f"it holds a Python object of class {module}.{name}")


def load_snapshot(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """Read a pickled memory snapshot and check that it has torch.cuda's format.

    A pickled list is taken as the segments alone (what old releases of
    ``_snapshot()`` returned), as torch's own ``_memory_viz`` does.

    Raises:
        FileNotFoundError: there is no such file.
        SnapshotError: the file is not a memory snapshot.
    """
    path = Path(path)
    if path.is_dir():
        raise SnapshotError(f"{path} is a directory, not a memory snapshot; {HOW_TO_MAKE_ONE}")
    with open(path, "rb") as f:
        try:
            data = _PlainUnpickler(f).load()
        except _RefusedObject as e:
            raise SnapshotError(f"{path} is not a memory snapshot: {e} (not loaded: unpickling "
                                f"objects runs code). {HOW_TO_MAKE_ONE}") from None
        except Exception as e:  # truncated or not a pickle at all (UnpicklingError, EOFError, ...)
            raise SnapshotError(f"{path} is not a memory snapshot: it is not a readable pickle "
                                f"({type(e).__name__}: {e}). {HOW_TO_MAKE_ONE}") from None
    return _validated(data, str(path))


def _validated(data: Any, where: str) -> Dict[str, Any]:
    """``data`` as a snapshot dict, or a SnapshotError naming the first problem."""
    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    if not isinstance(data, Mapping):
        raise SnapshotError(f"{where} is not a memory snapshot: it holds a {type(data).__name__}, "
                            f"not a dict with 'segments' and 'device_traces'. {HOW_TO_MAKE_ONE}")
    if "segments" not in data:
        keys = ", ".join(repr(k) for k in list(data)[:8]) or "none"
        raise SnapshotError(f"{where} is not a memory snapshot: the dict has no 'segments' "
                            f"(its keys: {keys}). {HOW_TO_MAKE_ONE}")
    segments, traces = data["segments"], data.get("device_traces") or []
    if not isinstance(segments, list) or not isinstance(traces, list):
        raise SnapshotError(f"{where} is not a memory snapshot: 'segments' and 'device_traces' "
                            f"must be lists. {HOW_TO_MAKE_ONE}")
    for i, seg in enumerate(segments):
        if not isinstance(seg, Mapping) or "total_size" not in seg or "blocks" not in seg:
            raise SnapshotError(f"{where}: segment {i} is not a segment of a memory snapshot "
                                f"(a dict with 'total_size' and 'blocks'). {HOW_TO_MAKE_ONE}")
        for j, block in enumerate(seg["blocks"]):
            if not isinstance(block, Mapping) or "size" not in block or "state" not in block:
                raise SnapshotError(f"{where}: block {j} of segment {i} has no 'size' or 'state'. "
                                    f"{HOW_TO_MAKE_ONE}")
    for d, entries in enumerate(traces):
        if not isinstance(entries, list):
            raise SnapshotError(f"{where}: device_traces[{d}] is not a list of trace entries. "
                                f"{HOW_TO_MAKE_ONE}")
        for k, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "action" not in entry:
                raise SnapshotError(f"{where}: device_traces[{d}][{k}] is not a trace entry "
                                    f"(a dict with an 'action'). {HOW_TO_MAKE_ONE}")
    return {**data, "segments": segments, "device_traces": traces}


# ---------------------------------------------------------------------------
# Analysis (standard library only)
# ---------------------------------------------------------------------------

Frame = Mapping[str, Any]
SiteKey = Tuple[str, int, str]  # (filename, line, function)


def _is_library_frame(frame: Frame) -> bool:
    """Frames a reader does not want as "the" allocation site: C++ frames and
    torch's own Python code (``nn.Linear.forward`` allocates for every model;
    the caller in user code says which one)."""
    filename = str(frame.get("filename", ""))
    normalized = filename.replace("\\", "/")
    return (not normalized.endswith(".py")
            or "/torch/" in normalized
            or "/torch_npu/" in normalized
            or normalized.startswith("<"))


def _site_key(frames: Optional[Sequence[Frame]]) -> Optional[SiteKey]:
    """The allocation site of a stack: the innermost frame outside torch and
    C++ (frames are innermost first in a snapshot), else the innermost frame."""
    frames = [f for f in (frames or []) if isinstance(f, Mapping)]
    if not frames:
        return None
    chosen = next((f for f in frames if not _is_library_frame(f)), frames[0])
    try:
        line = int(chosen.get("line", 0) or 0)
    except (TypeError, ValueError):  # a frame without a usable line number still names a site
        line = 0
    return (str(chosen.get("filename", "?")), line, str(chosen.get("name", "?")))


def _site_label(key: Optional[SiteKey]) -> str:
    if key is None:
        return NO_STACK
    filename, line, name = key
    short = "/".join(filename.replace("\\", "/").split("/")[-2:])
    return f"{name} ({short}:{line})"


def format_frames(frames: Optional[Sequence[Frame]], limit: int = 12) -> str:
    """A stack as text, innermost frame first, one ``file:line in name`` a line."""
    lines = [f"{f.get('filename', '?')}:{f.get('line', '?')} in {f.get('name', '?')}"
             for f in (frames or []) if isinstance(f, Mapping)]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more frames"]
    return "\n".join(lines) or NO_STACK


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``1.5 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass
class Allocation:
    """A live allocation: its address, requested bytes and allocation stack."""

    address: int
    size: int
    frames: List[Dict[str, Any]]
    site: str


@dataclass
class CallSite:
    """An allocation site and the most memory its allocations held at once."""

    label: str
    peak_bytes: int
    frames: List[Dict[str, Any]]


@dataclass
class DeviceMemory:
    """What one device's part of a snapshot says, ready to draw.

    ``times`` and the series are sampled after each trace entry (the first
    sample is the state before the trace); ``series`` maps the top sites, then
    ``"other"``, to their bytes at each sample. Bytes of allocations are the
    requested sizes (what the trace records), counted from ``alloc`` until
    ``free_completed`` (a block waiting for its streams is not reusable yet).
    """

    device: int
    segments: List[Dict[str, Any]]
    trace_entries: int
    time_unit: str  # "ms" (from the entries' time_us) or "trace entry"
    times: List[float] = field(default_factory=list)
    series: Dict[str, List[int]] = field(default_factory=dict)
    allocated: List[int] = field(default_factory=list)
    reserved: List[int] = field(default_factory=list)
    peak_allocated: int = 0
    peak_index: int = 0  # the sample of the peak
    peak_reserved: int = 0
    peak_reserved_index: int = 0
    live_at_peak: List[Allocation] = field(default_factory=list)
    sites: List[CallSite] = field(default_factory=list)  # the top sites, largest peak first
    other_sites: int = 0  # how many sites "other" stands for
    ooms: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def has_trace(self) -> bool:
        return self.trace_entries > 0

    @property
    def reserved_now(self) -> int:
        return sum(int(s.get("total_size", 0)) for s in self.segments)

    @property
    def allocated_now(self) -> int:
        return sum(int(b.get("size", 0)) for s in self.segments for b in s["blocks"]
                   if b.get("state") == ALLOCATED)

    @property
    def pending_now(self) -> int:
        return sum(int(b.get("size", 0)) for s in self.segments for b in s["blocks"]
                   if b.get("state") in PENDING)

    @property
    def peak_time(self) -> float:
        return self.times[self.peak_index] if self.times else 0.0


def _segment_device(seg: Mapping[str, Any]) -> int:
    return int(seg.get("device", 0) or 0)


def _live_blocks(segments: Iterable[Mapping[str, Any]]) -> Dict[int, Tuple[int, List[Frame]]]:
    """The allocations live when the snapshot was taken, by address: blocks in
    use or waiting for their streams (the trace has not freed them yet)."""
    live: Dict[int, Tuple[int, List[Frame]]] = {}
    for seg in segments:
        offset = int(seg.get("address", 0) or 0)
        for block in seg["blocks"]:
            # Blocks without an address (old snapshots) follow each other.
            address = int(block.get("address", offset))
            if block.get("state") == ALLOCATED or block.get("state") in PENDING:
                size = int(block.get("requested_size", block["size"]) or block["size"])
                live[address] = (size, list(block.get("frames") or []))
            offset = address + int(block["size"])
    return live


def _entry_times(entries: Sequence[Mapping[str, Any]]) -> Tuple[List[float], str]:
    """The x value of each entry: milliseconds since the first entry when every
    entry has a non-decreasing ``time_us``, else the entry's index."""
    stamps = [e.get("time_us") for e in entries]
    if entries and all(isinstance(t, (int, float)) for t in stamps) \
            and all(a <= b for a, b in zip(stamps, stamps[1:])) and stamps[-1] > stamps[0]:
        start = stamps[0]
        return [(t - start) / 1000.0 for t in stamps], "ms"
    return [float(i + 1) for i in range(len(entries))], "trace entry"


def _analyze_device(device: int, segments: List[Dict[str, Any]],
                    entries: List[Dict[str, Any]], top: int) -> DeviceMemory:
    result = DeviceMemory(device=device, segments=segments, trace_entries=len(entries),
                          time_unit="trace entry")
    live_end = _live_blocks(segments)

    # The trace is a ring buffer: allocations made before its first entry are
    # only known from the snapshot's blocks. Walking the trace backwards from
    # the final state gives what was live (and reserved) when it starts.
    live = dict(live_end)
    reserved = result.reserved_now
    for e in reversed(entries):
        action, addr, size = e["action"], e.get("addr"), int(e.get("size", 0) or 0)
        if action in ALLOC_ACTIONS:
            live.pop(addr, None)
        elif action in RELEASE_ACTIONS:
            live[addr] = (size, list(e.get("frames") or []))
        elif action in SEGMENT_GROW:
            reserved -= size
        elif action in SEGMENT_SHRINK:
            reserved += size
    start_live, start_reserved = live, max(reserved, 0)

    # Forward pass 1: every site's own peak, the overall peaks and the OOMs.
    site_of: Dict[Optional[SiteKey], str] = {}
    site_frames: Dict[str, List[Frame]] = {}

    def site(frames: List[Frame]) -> str:
        key = _site_key(frames)
        if key not in site_of:
            label = _site_label(key)
            # Two files with the same last two path components: keep them apart.
            if label in site_frames:
                label = f"{label} [{key[0] if key else ''}]"
            site_of[key] = label
            site_frames[label] = frames
        return site_of[key]

    start_sites = {a: (s, site(f)) for a, (s, f) in start_live.items()}
    current = dict(start_sites)
    site_bytes: Dict[str, int] = {}
    for s, label in current.values():
        site_bytes[label] = site_bytes.get(label, 0) + s
    site_peak = dict(site_bytes)
    allocated = sum(site_bytes.values())
    reserved = start_reserved
    allocated_series, reserved_series = [allocated], [reserved]
    changes: List[List[Tuple[str, int]]] = []  # per entry: (site, change of its bytes), ...
    for i, e in enumerate(entries):
        action, addr, size = e["action"], e.get("addr"), int(e.get("size", 0) or 0)
        change: List[Tuple[str, int]] = []
        if action in ALLOC_ACTIONS:
            if addr in current:  # an alloc over a live address: the trace lost its free
                old, old_label = current.pop(addr)
                change.append((old_label, -old))
            label = site(list(e.get("frames") or []))
            current[addr] = (size, label)
            change.append((label, size))
        elif action in RELEASE_ACTIONS and addr in current:
            freed, label = current.pop(addr)
            change.append((label, -freed))
        elif action in SEGMENT_GROW:
            reserved += size
        elif action in SEGMENT_SHRINK:
            reserved = max(reserved - size, 0)
        elif action == "oom":
            result.ooms.append({**e, "index": i, "allocated": allocated, "reserved": reserved})
        for label, delta in change:
            site_bytes[label] = site_bytes.get(label, 0) + delta
            site_peak[label] = max(site_peak.get(label, 0), site_bytes[label])
            allocated += delta
        changes.append(change)
        allocated_series.append(allocated)
        reserved_series.append(reserved)

    ranked = sorted(site_peak, key=lambda label: (-site_peak[label], label))
    chosen = [label for label in ranked[:max(top, 0)] if site_peak[label] > 0]
    result.sites = [CallSite(label, site_peak[label], list(site_frames.get(label, [])))
                    for label in chosen]
    result.other_sites = len(ranked) - len(chosen)
    groups = chosen + [OTHER]
    index_of = {label: i for i, label in enumerate(chosen)}
    other = len(chosen)

    # Forward pass 2: the series of the chosen sites and "other".
    level = [0] * len(groups)
    for s, label in start_sites.values():
        level[index_of.get(label, other)] += s
    columns = [list(level)]
    for change in changes:
        for label, delta in change:
            level[index_of.get(label, other)] += delta
        columns.append(list(level))
    result.series = {g: [col[i] for col in columns] for i, g in enumerate(groups)}
    times, result.time_unit = _entry_times(entries)
    result.times = [0.0] + times  # the first sample is the state before the first entry
    result.allocated, result.reserved = allocated_series, reserved_series
    result.peak_index = max(range(len(allocated_series)), key=allocated_series.__getitem__)
    result.peak_allocated = allocated_series[result.peak_index]
    result.peak_reserved_index = max(range(len(reserved_series)), key=reserved_series.__getitem__)
    result.peak_reserved = reserved_series[result.peak_reserved_index]
    for oom in result.ooms:
        oom["time"] = result.times[oom["index"] + 1]

    # Replay up to the peak (sample k follows entries[:k]) for what was live then.
    at_peak: Dict[int, Tuple[int, List[Frame]]] = dict(start_live)
    for e in entries[:result.peak_index]:
        if e["action"] in ALLOC_ACTIONS:
            at_peak[e.get("addr")] = (int(e.get("size", 0) or 0), list(e.get("frames") or []))
        elif e["action"] in RELEASE_ACTIONS:
            at_peak.pop(e.get("addr"), None)
    result.live_at_peak = sorted(
        (Allocation(int(a or 0), s, [dict(f) for f in fr], site(fr)) for a, (s, fr) in at_peak.items()),
        key=lambda a: (-a.size, a.address))
    return result


def analyze_snapshot(snapshot: Mapping[str, Any], *, device: Optional[int] = None,
                     top: int = DEFAULT_TOP) -> List[DeviceMemory]:
    """The per-device analysis :func:`render_snapshot` draws, without drawing.

    Args:
        snapshot: a snapshot dict (see :func:`load_snapshot`).
        device: only this device; by default every device with segments or
            trace entries.
        top: how many allocation sites get their own layer; the rest are "other".

    Raises:
        SnapshotError: the snapshot is malformed, or ``device`` has nothing in it.
    """
    data = _validated(snapshot, "the snapshot")
    traces: List[List[Dict[str, Any]]] = data["device_traces"]
    devices = sorted({_segment_device(s) for s in data["segments"]}
                     | {d for d, entries in enumerate(traces) if entries})
    if device is not None:
        if device not in devices:
            have = ", ".join(map(str, devices)) or "none"
            raise SnapshotError(f"device {device} has no segments and no trace entries in this "
                                f"snapshot (devices with data: {have}); pick one of those "
                                f"(device=N, or --device N on the command line)")
        devices = [device]
    return [_analyze_device(d, [s for s in data["segments"] if _segment_device(s) == d],
                            traces[d] if d < len(traces) else [], top)
            for d in devices]


# ---------------------------------------------------------------------------
# Drawing (matplotlib)
# ---------------------------------------------------------------------------


def _matplotlib() -> Any:
    return import_matplotlib("rendering a memory snapshot")


def _site_colors(matplotlib: Any, labels: Sequence[str]) -> Dict[str, Any]:
    """A colour per top site, the same in both panels; "other" is grey."""
    cmap = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"]
    colors = {label: cmap(i % cmap.N) for i, label in enumerate(labels)}
    colors[OTHER] = "#9e9e9e"
    return colors


def _short(label: str, width: int = 58) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def _axis_unit(largest: int) -> Tuple[str, int]:
    """The binary unit that keeps the y axis' numbers readable for ``largest`` bytes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if largest >= 2 * scale:
            return unit, scale
    return "bytes", 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _draw_timeline(ax: Any, dev: DeviceMemory, colors: Mapping[str, Any]) -> None:
    ax.set_title(f"device {dev.device}: memory over time by allocation site", loc="left")
    if not dev.has_trace:
        ax.text(0.5, 0.5, "no trace recorded for this device\n(record one with "
                "torch.cuda.memory._record_memory_history() before the snapshot)\n"
                f"allocated at snapshot: {format_bytes(dev.allocated_now)}, "
                f"reserved: {format_bytes(dev.reserved_now)}",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    labels = list(dev.series)
    legend = [f"{_short(s.label)}  peak {format_bytes(s.peak_bytes)}" for s in dev.sites]
    if OTHER in dev.series:
        legend.append(f"other ({_plural(dev.other_sites, 'site')})")
    unit, scale = _axis_unit(max(dev.peak_reserved, dev.peak_allocated))
    ax.stackplot(dev.times, [[v / scale for v in dev.series[k]] for k in labels], labels=legend,
                 colors=[colors[k] for k in labels], step="post", alpha=0.85)
    ax.step(dev.times, [v / scale for v in dev.reserved], where="post", color="black",
            linewidth=1.2, linestyle="--", label="reserved (segments)")
    ax.plot([dev.peak_time], [dev.peak_allocated / scale], marker="v", color="crimson",
            linestyle="none", label=f"peak allocated {format_bytes(dev.peak_allocated)}")
    for i, oom in enumerate(dev.ooms):
        ax.axvline(oom["time"], color="red", linewidth=1.5,
                   label=None if i else f"OOM ({len(dev.ooms)})")
    ax.set_xlabel("time since the first trace entry (ms)" if dev.time_unit == "ms"
                  else "trace entry")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _draw_segments(ax: Any, dev: DeviceMemory, colors: Mapping[str, Any]) -> None:
    from matplotlib.patches import Patch

    shown = sorted(dev.segments, key=lambda s: -int(s["total_size"]))[:MAX_SEGMENT_BARS]
    shown.sort(key=lambda s: int(s.get("address", 0) or 0))
    hidden = len(dev.segments) - len(shown)
    title = f"device {dev.device}: segment layout at the snapshot ({_plural(len(dev.segments), 'segment')}"
    title += f", the largest {len(shown)} shown)" if hidden else ")"
    ax.set_title(title, loc="left")
    if not shown:
        ax.text(0.5, 0.5, "no segments: the allocator held no memory", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    site_labels = {s.label for s in dev.sites}
    ticks = []
    for y, seg in enumerate(shown):
        total = max(int(seg["total_size"]), 1)
        base = int(seg.get("address", 0) or 0)
        offset = base
        bars: Dict[Tuple[Any, str], List[Tuple[float, float]]] = {}
        for block in seg["blocks"]:
            address = int(block.get("address", offset))
            size = int(block["size"])
            state = block.get("state")
            if state == ALLOCATED or state in PENDING:
                label = _site_label(_site_key(block.get("frames")))
                color = colors[label] if label in site_labels else colors[OTHER]
                hatch = "////" if state in PENDING else ""
            else:
                color, hatch = "#ececec", ""
            # x is the share of the segment: segments differ in size by orders
            # of magnitude, and the point of the panel is how each one is filled.
            bars.setdefault((color, hatch), []).append(
                (100.0 * (address - base) / total, 100.0 * size / total))
            offset = address + size
        for (color, hatch), ranges in bars.items():
            ax.broken_barh(ranges, (y - 0.4, 0.8), facecolors=color, edgecolor="white",
                           linewidth=0.3, hatch=hatch or None)
        kind = seg.get("segment_type", "?")
        ticks.append(f"{int(base):#x} {format_bytes(seg['total_size'])} {kind} "
                     f"stream {seg.get('stream', 0)}")
    ax.set_yticks(range(len(shown)), labels=ticks, fontsize="x-small")
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("offset in the segment (% of its size)")
    handles = [Patch(facecolor="#ececec", edgecolor="#bbbbbb", label="inactive (free)"),
               Patch(facecolor="white", edgecolor="#555555", hatch="////",
                     label="pending free (waiting for streams)"),
               Patch(facecolor=colors[OTHER], label="allocated, other site")]
    if not dev.has_trace:  # no timeline above whose legend names the sites' colours
        handles += [Patch(facecolor=colors[s.label], label=_short(s.label)) for s in dev.sites]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize="small", frameon=False)


def _draw(devices: List[DeviceMemory], title: str) -> bytes:
    """The PNG of ``devices``: per device, the timeline above the segment layout."""
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure

    if not devices:
        fig = Figure(figsize=(FIGURE_WIDTH, 2.5), dpi=DPI)
        ax = fig.subplots()
        ax.text(0.5, 0.5, "empty snapshot: no segments and no trace entries",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        fig.suptitle(title)
    else:
        ratios: List[float] = []
        for dev in devices:
            bars = min(len(dev.segments), MAX_SEGMENT_BARS)
            ratios += [4.0 if dev.has_trace else 1.5, max(1.5, 0.28 * bars)]
        fig = Figure(figsize=(FIGURE_WIDTH, 1.2 + 1.1 * sum(ratios)), dpi=DPI, layout="constrained")
        axes = fig.subplots(len(ratios), 1, gridspec_kw={"height_ratios": ratios}, squeeze=False)
        for i, dev in enumerate(devices):
            colors = _site_colors(matplotlib, [s.label for s in dev.sites])
            _draw_timeline(axes[2 * i][0], dev, colors)
            _draw_segments(axes[2 * i + 1][0], dev, colors)
        fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

_e = escape


def _num(n: int) -> str:
    """Bytes as the exact count and, from 1 KiB on, in binary units."""
    return f"{int(n):,} B" + (f" ({format_bytes(n)})" if abs(int(n)) >= 1024 else "")


_table = table


def _stack_html(frames: Optional[Sequence[Frame]]) -> str:
    return f"<pre>{_e(format_frames(frames))}</pre>"


def _when(dev: DeviceMemory, index: int) -> str:
    if not dev.has_trace:
        return "at the snapshot"
    t = dev.times[index]
    return f"{t:.3f} ms" if dev.time_unit == "ms" else f"after trace entry {int(t)}"


def _segment_rows(dev: DeviceMemory) -> Iterable[List[str]]:
    for seg in sorted(dev.segments, key=lambda s: int(s.get("address", 0) or 0)):
        blocks = seg["blocks"]
        used = sum(int(b["size"]) for b in blocks if b.get("state") == ALLOCATED)
        pending = sum(int(b["size"]) for b in blocks if b.get("state") in PENDING)
        free = [int(b["size"]) for b in blocks if b.get("state") == INACTIVE]
        pool = seg.get("segment_pool_id", "")
        yield [_e(f"{int(seg.get('address', 0) or 0):#x}"), _num(seg["total_size"]), _num(used),
               _num(pending), _num(sum(free)), _e(format_bytes(max(free, default=0))),
               _e(len(blocks)), _e(seg.get("segment_type", "")), _e(seg.get("stream", "")),
               _e(tuple(pool) if isinstance(pool, (list, tuple)) else pool),
               _e("yes" if seg.get("is_expandable") else "no")]


def _device_html(dev: DeviceMemory) -> str:
    parts = [f"<h2>Device {dev.device}</h2>"]
    if dev.has_trace:
        peak_note = (f"the trace has {dev.trace_entries} entries; allocated bytes are the requested "
                     f"sizes of allocations from <code>alloc</code> until <code>free_completed</code>")
    else:
        peak_note = ("no trace was recorded for this device: the peak is the state at the snapshot "
                     "(record one with <code>torch.cuda.memory._record_memory_history()</code>)")
    parts.append(_table(["", "bytes", "when"], [
        ["peak allocated", _num(dev.peak_allocated), _e(_when(dev, dev.peak_index))],
        ["peak reserved", _num(dev.peak_reserved), _e(_when(dev, dev.peak_reserved_index))],
        ["allocated at the snapshot (block sizes)", _num(dev.allocated_now), ""],
        ["pending free at the snapshot", _num(dev.pending_now), ""],
        ["reserved at the snapshot", _num(dev.reserved_now), ""],
    ], numeric=(1,)))
    parts.append(f'<p class="note">{peak_note}.</p>')

    parts.append("<h3>Allocation sites with the highest peaks</h3>")
    if dev.sites:
        parts.append(_table(["site", "peak bytes", "stack (innermost first)"],
                            ([_e(s.label), _num(s.peak_bytes), _stack_html(s.frames)] for s in dev.sites),
                            numeric=(1,)))
        if dev.other_sites:
            parts.append(f'<p class="note">{dev.other_sites} more sites are drawn as "other".</p>')
    else:
        parts.append("<p>No allocations.</p>")

    live = dev.live_at_peak
    parts.append(f"<h3>Largest live allocations at the peak ({len(live)} live)</h3>")
    if live:
        parts.append(_table(["bytes", "address", "site", "stack (innermost first)"],
                            ([_num(a.size), _e(f"{a.address:#x}"), _e(a.site), _stack_html(a.frames)]
                             for a in live[:MAX_LIVE_ROWS]), numeric=(0,)))
        if len(live) > MAX_LIVE_ROWS:
            parts.append(f'<p class="note">{len(live) - MAX_LIVE_ROWS} smaller ones not listed.</p>')
    else:
        parts.append("<p>None.</p>")

    parts.append(f"<h3>Segments ({len(dev.segments)})</h3>")
    if dev.segments:
        parts.append(_table(["address", "size", "allocated", "pending free", "free", "largest free block",
                             "blocks", "type", "stream", "pool", "expandable"],
                            _segment_rows(dev), numeric=(1, 2, 3, 4, 5, 6)))
    else:
        parts.append("<p>None: the allocator held no memory when the snapshot was taken.</p>")

    parts.append(f"<h3>Out-of-memory events ({len(dev.ooms)})</h3>")
    if dev.ooms:
        parts.append(_table(
            ["when", "requested", "free on the device", "allocated then", "reserved then", "stream", "stack"],
            ([_e(_when(dev, o["index"] + 1)), _num(int(o.get("size", 0) or 0)),
              _num(int(o["device_free"])) if "device_free" in o else "?",
              _num(o["allocated"]), _num(o["reserved"]), _e(o.get("stream", "")),
              _stack_html(o.get("frames"))] for o in dev.ooms),
            numeric=(1, 2, 3, 4)))
    else:
        parts.append("<p>None in the trace.</p>")
    return "\n".join(parts)


def _page(devices: List[DeviceMemory], png: bytes, title: str) -> str:
    body = "\n".join(_device_html(d) for d in devices) or \
        "<p>The snapshot is empty: no segments and no trace entries.</p>"
    return page(title, png, "memory over time by allocation site, and segment layout", body)


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


@dataclass
class MemoryReport:
    """What :func:`render_snapshot` made: the PNG bytes, the HTML text, the
    files written (None when not asked for) and the per-device analysis."""

    png: bytes
    html: str
    devices: List[DeviceMemory]
    png_path: Optional[Path] = None
    html_path: Optional[Path] = None


def render_snapshot(snapshot_or_path: Union[Mapping[str, Any], list, str, os.PathLike],
                    html_path: Union[str, os.PathLike, None] = None,
                    png_path: Union[str, os.PathLike, None] = None, *,
                    device: Optional[int] = None, top: int = DEFAULT_TOP,
                    title: Optional[str] = None) -> MemoryReport:
    """Render a memory snapshot as a PNG and a self-contained HTML page.

    Args:
        snapshot_or_path: a snapshot (the dict ``torch.cuda.memory._snapshot()``
            returns) or the path of one pickled by ``_dump_snapshot``.
        html_path: where to write the HTML page (the PNG is inlined in it).
        png_path: where to write the PNG.
        device: only this device; by default every device in the snapshot.
        top: how many allocation sites, ranked by their own peak, get their
            own colour; the rest are drawn as "other".
        title: the page's and the picture's title (default: the file name).

    Returns:
        A :class:`MemoryReport` with the PNG and HTML (also when no path is
        given, e.g. to show in a notebook) and the analysis behind them.

    Raises:
        SnapshotError: the input is not a memory snapshot, or ``device`` has no data.
        ImportError: matplotlib is not installed (``pip install 'torch-npu-profiler[viz]'``).
    """
    if isinstance(snapshot_or_path, (str, os.PathLike)):
        snapshot = load_snapshot(snapshot_or_path)
        default_title = f"Memory snapshot {Path(snapshot_or_path).name}"
    else:
        snapshot = _validated(snapshot_or_path, "the snapshot")
        default_title = "Memory snapshot"
    title = title or default_title
    _matplotlib()  # before the analysis: a missing dependency is the first thing to say
    devices = analyze_snapshot(snapshot, device=device, top=top)
    png = _draw(devices, title)
    page = _page(devices, png, title)
    report = MemoryReport(png=png, html=page, devices=devices)
    if png_path is not None:
        report.png_path = Path(png_path)
        report.png_path.write_bytes(png)
    if html_path is not None:
        report.html_path = Path(html_path)
        report.html_path.write_text(page, encoding="utf-8")
    return report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_npu.profiler.memory_viz",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Render a memory snapshot as a self-contained HTML page and a PNG:\n"
                    "memory over time as a stacked area chart by allocation site, and the\n"
                    "layout of the allocator's segments, with tables of the peaks, the largest\n"
                    "live allocations at the peak, the segments and the OOM events.\n\n"
                    "SNAPSHOT is in torch.cuda's format: the pickle written by\n"
                    "torch.cuda.memory._dump_snapshot(path).",
        epilog=f"Needs matplotlib: {INSTALL_HINT}\n\n"
               "example:\n"
               "  python -m torch_npu.profiler.memory_viz snapshot.pickle -o memory.html --top 10")
    parser.add_argument("snapshot", metavar="SNAPSHOT", help="the pickled snapshot, e.g. snapshot.pickle")
    parser.add_argument("-o", "--output", metavar="HTML",
                        help="the HTML page to write (default: SNAPSHOT's name with .html, "
                             "in the current directory)")
    parser.add_argument("--png", metavar="PNG",
                        help="the PNG to write (default: the HTML path with .png)")
    parser.add_argument("--device", type=int, metavar="N",
                        help="render only device N (default: every device with data)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                        help=f"allocation sites with their own colour, ranked by peak bytes; "
                             f"the rest are 'other' (default: {DEFAULT_TOP})")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: render SNAPSHOT, print what was written; 0 on success,
    1 when the input cannot be rendered (the reason goes to stderr)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error("--top must be 0 or more")
    html_path = Path(args.output) if args.output else Path(Path(args.snapshot).stem + ".html")
    png_path = Path(args.png) if args.png else html_path.with_suffix(".png")
    try:
        report = render_snapshot(args.snapshot, html_path, png_path, device=args.device, top=args.top)
    except (SnapshotError, OSError, ImportError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {html_path} and {png_path}")
    for dev in report.devices:
        print(f"device {dev.device}: peak allocated {format_bytes(dev.peak_allocated)}, "
              f"peak reserved {format_bytes(dev.peak_reserved)}, {len(dev.segments)} segments, "
              f"{dev.trace_entries} trace entries, {len(dev.ooms)} OOM events")
    if not report.devices:
        print("the snapshot is empty: no segments and no trace entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
