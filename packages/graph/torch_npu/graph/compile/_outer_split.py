"""Splitting a kernel's work along its outermost dimension across threads.

Note [Outer-dimension split of MLIR kernels]
MLIR kernels have no parallel loops (the toolchain ships neither OpenMP's
nor the async runtime's library; _mlir.py), so a kernel would run on the one
thread of its stream's worker while eager's ATen kernels use torch's
intra-op threads. A kernel whose outputs' row block j (rows along the
outermost dimension, N of them) depends only on row block j of the inputs
that have that dimension, and on the other inputs whole, is instead compiled
for a block of rows and called once per block, from several threads.

Which kernels: the program is traced to aten ops on meta tensors and every
value is classified as "whole" (it depends on no split input) or "split"
with ``m`` rows per outer row (its dimension 0 has N * m rows, and its
row block j depends only on row block j of the split inputs). An input is
split with m rows per outer row when it has N * m rows (N: the outputs'
dimension 0, which all outputs share) and two or more dimensions (a
matmul's (N * m, k) result read through a view), or N rows; if the rules
below fail with that choice, only inputs with N rows are split (a weight
may have a multiple of N rows). A split operand is allowed only by:

- pointwise ops (``torch.Tag.pointwise``): every split operand has the
  output's rank and dimension 0; every whole tensor operand broadcasts
  along dimension 0 (lower rank, or size 1 there);
- reductions and softmax over dimensions other than 0;
- views that keep rows in blocks: reshapes whose result has a multiple of
  N rows (a reshape keeps the row-major order, so block j is the same run
  of elements before and after), and permutes, transposes, (un)squeezes,
  slices, selects and expands that leave dimension 0 in place;
- dtype conversions and copies.

Any other use of a split value, an output that is not split with one row per
outer row, or a program whose replay at the block size does not give the
expected shapes leaves the kernel unsplit (one call, as before). The rules
are structural, so a kernel is split or not for all values alike.

How it runs: the N rows are cut into T = min(torch.get_num_threads(), N)
blocks of ceil(N / T) or floor(N / T) rows. For each of those (at most two)
block sizes the traced program is replayed with its reshapes' and expands'
row counts scaled, and compiled as a kernel of its own: its cache key is
that of the block's geometry plus the split (Note [MLIR kernel cache]). The
launcher (KernelLaunch.cpp) calls the block kernels with descriptors whose
data pointers start at the block's first row, all inside the one work item,
through at::parallel_for: on the OpenMP team of the stream's worker thread,
the same team (and libgomp, torch's own: the launcher is built with
-fopenmp and linked against it) that eager ATen kernels on that stream use.
libgomp keeps that team's idle threads spinning between parallel regions
while they do not outnumber the CPUs, so handing a block over costs no
wake-up; an earlier launcher ran blocks on helper tasks of torch's inter-op
pool (at::launch), a separate thread woken through a condition variable
that competed with the spinning OpenMP worker, and the split then cost the
benchmark's training step about 0.5 ms instead of saving time. The item
completes only after every block, so stream order is unchanged; inside a
parallel region, or with one thread, at::parallel_for runs the blocks in
turn. No more blocks than torch.get_num_threads() are made, and none when
the launcher was built without OpenMP (_launch.RUNS_BLOCKS_IN_PARALLEL).
Kernels with fewer than MIN_SPLIT_ELEMENTS output elements are not split:
handing a block to another thread costs more than it saves there (measured
on 2 CPUs with the OpenMP launcher: a pointwise kernel of 16384 elements
took 8-9 us split and 5.4 us whole; at 32768 both took 10-13 us).
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.fx

# Below this many output elements a kernel runs as one call.
MIN_SPLIT_ELEMENTS = 1 << 15

aten = torch.ops.aten

# Reductions and softmaxes -> the position of their dim argument; no dims
# (None or []) means every dimension, rows included.
_REDUCTIONS = {
    aten.sum.dim_IntList: 1,
    aten.mean.dim: 1,
    aten.amax.default: 1,
    aten.amin.default: 1,
    aten.var.correction: 1,
    aten.prod.dim_int: 1,
    aten.any.dim: 1,
    aten.any.dims: 1,
    aten.all.dim: 1,
    aten.all.dims: 1,
    aten.logsumexp.default: 1,
    aten._softmax.default: 1,
    aten._log_softmax.default: 1,
    aten._softmax_backward_data.default: 2,
    aten._log_softmax_backward_data.default: 2,
}
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
_SAME_ROWS = {
    aten.clone.default, aten.alias.default, aten._to_copy.default, aten.detach.default,
    torch.ops.prims.convert_element_type.default,
}


class Unsplittable(Exception):
    """The kernel's rows cannot be computed block by block."""


@dataclass
class SplitPlan:
    """How a kernel's N rows run as blocks."""

    rows: int
    blocks: list[tuple[int, int]]  # (first row, rows) per call
    split_inputs: list[int]  # rows per outer row; 0 for an input passed whole
    graph: torch.fx.GraphModule
    row_multiple: dict[torch.fx.Node, int]  # split values -> rows per outer row

    def block_program(self, rows: int, device: torch.device) -> Callable[..., Any]:
        """The program computing ``rows`` outer rows (split inputs sliced to
        them, whole inputs as they are)."""

        def program(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return _replay(self, inputs, rows, device)

        return program


def _dims(value: Any, ndim: int) -> list[int] | None:
    if value is None:
        return None
    dims = [value] if isinstance(value, int) else list(value)
    if not dims:
        return None
    return [d % max(ndim, 1) for d in dims]


def _meta(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _classify(node: torch.fx.Node, rows: int, multiple: dict[torch.fx.Node, int]) -> int | None:
    """Rows per outer row of ``node``'s value if split, None if whole; raises
    Unsplittable where the rules of the Note do not cover it."""
    operands = [a for a in node.all_input_nodes if isinstance(_meta(a), torch.Tensor)]
    split = [a for a in operands if a in multiple]
    if not split:
        return None
    out = _meta(node)
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] % rows != 0:
        raise Unsplittable(f"{node.format_node()} has no row dimension")
    op = node.target
    source = _meta(split[0])
    if torch.Tag.pointwise in getattr(op, "tags", ()):
        for a in operands:
            value = _meta(a)
            if a in multiple:
                if value.dim() != out.dim() or value.shape[0] != out.shape[0]:
                    raise Unsplittable(f"{node.format_node()} broadcasts a split operand")
            elif value.dim() == out.dim() and value.shape[0] != 1:
                raise Unsplittable(f"{node.format_node()} reads a whole operand by rows")
    elif op in _REDUCTIONS:
        position = _REDUCTIONS[op]
        dim = node.args[position] if len(node.args) > position else node.kwargs.get("dim")
        dims = _dims(dim, source.dim())
        if dims is None or 0 in dims or len(split) != len(operands):
            raise Unsplittable(f"{node.format_node()} reduces across rows")
    elif op in _RESHAPES or op in _SAME_ROWS:
        pass
    elif op is aten.expand.default:
        if out.dim() != source.dim() or out.shape[0] != source.shape[0]:
            raise Unsplittable(f"{node.format_node()} expands the rows")
    elif op is aten.permute.default:
        if node.args[1][0] % source.dim() != 0:
            raise Unsplittable(f"{node.format_node()} moves the rows")
    elif op is aten.transpose.int:
        if 0 in _dims(node.args[1:3], source.dim()):
            raise Unsplittable(f"{node.format_node()} moves the rows")
    elif op is aten.unsqueeze.default:
        if node.args[1] % (source.dim() + 1) == 0:
            raise Unsplittable(f"{node.format_node()} adds a dimension before the rows")
    elif op in (aten.squeeze.dim, aten.squeeze.dims, aten.select.int, aten.slice.Tensor):
        if 0 in (_dims(node.args[1] if len(node.args) > 1 else 0, source.dim()) or [0]):
            raise Unsplittable(f"{node.format_node()} changes the rows")
    else:
        raise Unsplittable(f"{node.format_node()} is not known to keep rows apart")
    if len(split) != len(operands) and op not in _REDUCTIONS and torch.Tag.pointwise not in getattr(op, "tags", ()):
        raise Unsplittable(f"{node.format_node()} mixes split and whole tensors")
    return out.shape[0] // rows


def plan_split(program: Callable[..., Any], inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
               symbols: Sequence[int], threads: int) -> SplitPlan | None:
    """The plan running the kernel as blocks of rows on up to ``threads``
    threads, or None when it runs as one call (Note [Outer-dimension split
    of MLIR kernels])."""
    if threads < 2 or not outputs or any(t.dim() == 0 for t in outputs):
        return None
    rows = outputs[0].shape[0]
    if rows < 2 or any(t.shape[0] != rows for t in outputs):
        return None
    if sum(t.numel() for t in outputs) < MIN_SPLIT_ELEMENTS:
        return None
    from torch.fx.experimental.proxy_tensor import make_fx

    meta = torch.device("meta")
    examples = [torch.empty(t.shape, dtype=t.dtype, device=meta) for t in inputs]
    # In a thread of its own, as the kernel's lowering (_mlir.get_kernel):
    # the caller may be inside a compiled region, whose dispatch modes are
    # thread-local and must not see this tracing.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            graph = pool.submit(make_fx(lambda *ts: tuple(program(*ts, *symbols, meta))), *examples).result()
        except Exception:
            return None
    # Which inputs are split: first also those with a multiple of N rows of
    # two or more dimensions (a matmul's (N * m, k) result read through a
    # view), then only those with N rows (when the first choice fails, e.g.
    # for a weight with as many rows as a multiple of N).
    for labels in (
        [t.shape[0] // rows if t.dim() >= 2 and t.shape[0] % rows == 0 else int(t.dim() >= 1 and t.shape[0] == rows)
         for t in inputs],
        [int(t.dim() >= 1 and t.shape[0] == rows) for t in inputs],
    ):
        multiple = _propagate(graph, rows, labels)
        if multiple is not None:
            split_inputs = labels
            break
    else:
        return None
    parts = min(threads, rows)
    base, extra = divmod(rows, parts)
    blocks, first = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        blocks.append((first, size))
        first += size
    plan = SplitPlan(rows, blocks, split_inputs, graph, multiple)
    # The replay must give each block its outputs' shapes; anything else is
    # a case the rules above missed.
    for size in {size for _, size in blocks}:
        block_inputs = [torch.empty((size * m, *t.shape[1:]) if m else t.shape, dtype=t.dtype, device=meta)
                        for t, m in zip(inputs, split_inputs)]
        try:
            results = _replay(plan, block_inputs, size, meta)
        except Exception:
            return None
        if [tuple(r.shape) for r in results] != [(size, *t.shape[1:]) for t in outputs]:
            return None
    return plan


def _propagate(graph: torch.fx.GraphModule, rows: int, labels: list[int]) -> dict[torch.fx.Node, int] | None:
    """Rows per outer row of every split value, given the inputs' (0: whole),
    or None when the rules do not cover the program."""
    multiple: dict[torch.fx.Node, int] = {}
    placeholders = iter(labels)
    try:
        for node in graph.graph.nodes:
            if node.op == "placeholder":
                m = next(placeholders)
                if m:
                    multiple[node] = m
            elif node.op == "call_function":
                m = _classify(node, rows, multiple)
                if m is not None:
                    multiple[node] = m
            elif node.op == "output":
                if any(multiple.get(r) != 1 for r in node.args[0]):
                    raise Unsplittable("an output is not computed row by row")
            else:
                raise Unsplittable(f"{node.format_node()} is not an op on the inputs")
    except Unsplittable:
        return None
    return multiple


def _replay(plan: SplitPlan, inputs: Sequence[torch.Tensor], rows: int, device: torch.device) -> tuple[Any, ...]:
    """Runs the traced program for ``rows`` outer rows on ``device``."""
    values: dict[torch.fx.Node, Any] = {}
    placeholders = iter(inputs)
    meta = torch.device("meta")

    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return values[a]
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        if isinstance(a, torch.device) and a == meta:
            return device
        return a

    for node in plan.graph.graph.nodes:
        if node.op == "placeholder":
            values[node] = next(placeholders)
        elif node.op == "call_function":
            args = list(arg(a) for a in node.args)
            kwargs = {k: arg(v) for k, v in node.kwargs.items()}
            m = plan.row_multiple.get(node)
            if m is not None and (node.target in _RESHAPES or node.target is aten.expand.default):
                args[1] = [rows * m, *_meta(node).shape[1:]]
            values[node] = node.target(*args, **kwargs)
        elif node.op == "output":
            return tuple(values[r] for r in node.args[0])
    raise AssertionError("a traced graph has an output node")
