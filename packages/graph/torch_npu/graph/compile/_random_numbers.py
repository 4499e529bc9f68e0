"""Random numbers inside npu kernels (Note [Random numbers of a kernel])."""

from __future__ import annotations

import math
from typing import Any

import torch

aten = torch.ops.aten
prims = torch.ops.prims

# Note [Random numbers of a kernel]
# Inductor compiles torch.rand, randn, randint and everything built on them
# (dropout, bernoulli) into three prims: inductor_seeds draws one int64 seed
# per random op of the graph from the device's generator (an extern kernel,
# so torch.npu.manual_seed makes a compiled step reproducible),
# inductor_lookup_seed picks one of them, and inductor_random /
# inductor_randint turn a seed into a tensor of numbers inside the fused
# kernel. torch-mlir has no lowering for these prims, so every kernel of a
# compiled dropout ran its ops eagerly with a fallback warning (GPT-2, T5,
# BERT in training).
#
# A program computes the numbers itself, counter based, as Inductor's GPU
# kernels do with Philox: element i of the result is a function of (seed,
# i) only, so blocks of a split kernel agree and nothing is carried between
# launches. The function is two rounds of a 32-bit integer finaliser (the
# xorshift-multiply "lowbias32" constants, whose avalanche is near ideal),
# keyed by a hash of the seed's two halves, computed in int64 with the bits
# above 32 masked off. 24 of its bits make a float32 uniform in [0, 1) (every
# value a multiple of 2^-24, as torch.rand's float32 numbers are); normals
# take a second round for a second uniform and the Box-Muller transform.
# The numbers differ from eager's (Philox on CUDA, the CPU generator here),
# as compiled random numbers do on every device; their distribution is what
# tests check.
#
# Part of a kernel's cache key (_mlir.REWRITES): a change to the functions
# below must change RANDOM_FORMS_VERSION.
RANDOM_FORMS_VERSION = 1

_MASK = 0xFFFFFFFF
_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)
_UNIT = 2.0 ** -24


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x >> bits for x >= 0, as a floor division: torch-mlir cannot lower
    bitwise_right_shift by a number, and LLVM turns the division by a power
    of two into shifts."""
    return aten.div.Tensor_mode(x, 2 ** bits, rounding_mode="floor")


def _mix(x: torch.Tensor) -> torch.Tensor:
    """The 32-bit finaliser of int64 values in [0, 2^32), result in the same
    range (products wrap in int64; their low 32 bits are exact)."""
    x = aten.bitwise_xor.Tensor(x, _shift_right(x, 16))
    x = aten.bitwise_and.Scalar(aten.mul.Tensor(x, _MULTIPLIERS[0]), _MASK)
    x = aten.bitwise_xor.Tensor(x, _shift_right(x, 15))
    x = aten.bitwise_and.Scalar(aten.mul.Tensor(x, _MULTIPLIERS[1]), _MASK)
    return aten.bitwise_xor.Tensor(x, _shift_right(x, 16))


def _bits(size: list[int], seed: torch.Tensor, device: torch.device) -> torch.Tensor:
    """32 random bits (int64 in [0, 2^32)) per element of ``size``, from a
    0-d int64 seed."""
    low = aten.bitwise_and.Scalar(seed, _MASK)
    high = aten.bitwise_and.Scalar(_shift_right(seed, 32), _MASK)
    key = _mix(aten.bitwise_xor.Tensor(low, _mix(high)))
    numel = math.prod(size)
    positions = prims.iota.default(max(numel, 1), start=0, step=1, dtype=torch.int64, device=device,
                                   requires_grad=False)
    bits = _mix(aten.bitwise_and.Scalar(aten.add.Tensor(_mix(aten.bitwise_and.Scalar(positions, _MASK)), key), _MASK))
    if numel == 0:
        bits = aten.slice.Tensor(bits, 0, 0, 0)
    return aten.view.default(bits, list(size))


def _unit(bits: torch.Tensor, offset: int) -> torch.Tensor:
    """float32 multiples of 2^-24 from the top 24 of 32 bits, plus ``offset``
    steps: [0, 1) for 0, (0, 1] for 1."""
    top = _shift_right(bits, 8)
    if offset:
        top = aten.add.Tensor(top, offset)
    return aten.mul.Tensor(aten._to_copy.default(top, dtype=torch.float32), _UNIT)


def uniform(size: list[int], seed: torch.Tensor, device: torch.device) -> torch.Tensor:
    """float32 numbers uniform in [0, 1) (torch.rand)."""
    return _unit(_bits(size, seed, device), 0)


def normal(size: list[int], seed: torch.Tensor, device: torch.device) -> torch.Tensor:
    """float32 standard normal numbers (torch.randn), by Box-Muller."""
    first = _bits(size, seed, device)
    second = _mix(aten.bitwise_and.Scalar(aten.add.Tensor(first, 0x5BD1E995), _MASK))
    radius = aten.sqrt.default(aten.mul.Tensor(aten.log.default(_unit(first, 1)), -2.0))
    return aten.mul.Tensor(radius, aten.cos.default(aten.mul.Tensor(_unit(second, 0), 2.0 * math.pi)))


def integers(low: int, high: int, size: list[int], seed: torch.Tensor, device: torch.device) -> torch.Tensor:
    """int64 numbers in [low, high) (torch.randint)."""
    return aten.add.Tensor(aten.remainder.Scalar(_bits(size, seed, device), high - low), low)


def scope() -> dict[str, Any]:
    """The functions programs call for random numbers."""
    return {"_npu_uniform": uniform, "_npu_normal": normal, "_npu_integers": integers}


def random_call(node: Any, args: list[str]) -> str | None:
    """The source computing a random prim's value in the program (Note
    [Random numbers of a kernel]), else None (shapes known at run time
    only, which the fallback handles)."""
    target = node.target
    if target is prims.inductor_lookup_seed.default:
        return f"torch.ops.aten.select.int({args[0]}, 0, {args[1]})"
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or not all(isinstance(d, int) for d in value.shape):
        return None
    size = list(value.shape)
    if target is prims.inductor_random.default:
        mode = node.args[2]
        function = {"rand": "_npu_uniform", "randn": "_npu_normal"}.get(mode)
        return None if function is None else f"{function}({size}, {args[1]}, _device)"
    if target is prims.inductor_randint.default:
        low, high = node.args[0], node.args[1]
        if not isinstance(low, int) or not isinstance(high, int):
            return None
        return f"_npu_integers({low}, {high}, {size}, {args[3]}, _device)"
    return None
