"""Kernels return each result in a value of its own.

Note [Results that fold into one]
Two outputs of a program that MLIR proves equal become one value: the ELU
and CELU of one tensor are exp(x * 1.0) and exp(x) once Inductor's
decompositions are imported (alpha is 1.0), the multiplication folds away,
and the canonicalisation in linalg-fuse-elementwise-ops merges the two
generics' identical results, so the kernel's function returns one tensor
twice. buffer-results-to-out-params then crashed the process with a
segmentation fault, which no exception can catch: compiling
``(F.elu(x), F.celu(x))`` killed it. So the fusion passes run first
(``_mlir.PIPELINE_FUSION``) and each result returned again is then returned
as a copy (``linalg.copy`` into a new tensor), which the passes after treat
like any other result; the copy is one more loop, for a kernel that would
otherwise not run at all.
"""

from __future__ import annotations

from typing import Any


def copy_repeated_results(module: Any) -> int:
    """Makes every result a function of ``module`` returns more than once a
    copy at its later places (inside the module's context); returns how
    many copies it made."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith, linalg, tensor

    copies = 0
    for op in module.body.operations:
        if op.operation.name != "func.func" or not op.regions[0].blocks:
            continue
        block = op.regions[0].blocks[0]
        returned = list(block.operations)[-1].operation
        if returned.name != "func.return":
            continue
        seen: list[Any] = []
        for i, value in enumerate(list(returned.operands)):
            if not any(value == s for s in seen):
                seen.append(value)
                continue
            with ir.InsertionPoint(returned), returned.location:
                shaped = ir.RankedTensorType(value.type)
                sizes = [tensor.dim(value, arith.constant(ir.IndexType.get(), d)) if shaped.is_dynamic_dim(d)
                         else shaped.shape[d] for d in range(shaped.rank)]
                empty = tensor.empty(sizes, shaped.element_type)
                returned.operands[i] = linalg.copy(value, outs=[empty])
            copies += 1
    return copies
