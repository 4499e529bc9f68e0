"""Checks of hyper-parameters shared by the fused optimizers' constructors.

Every check raises ``ValueError`` whose message starts as torch_npu's and
torch.optim's do (``Invalid learning rate: -1``), so code matching on those
messages keeps working, and then says which optimizer wanted what.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__: list = []


def require_non_negative(owner: str, description: str, value: Any, name: str) -> None:
    """Raises ``ValueError`` unless ``value >= 0`` (NaN is rejected too)."""
    if not value >= 0.0:
        raise ValueError(f"Invalid {description}: {value!r}. {owner} needs {name} >= 0.")


def require_positive(owner: str, description: str, value: Any, name: str) -> None:
    """Raises ``ValueError`` unless ``value > 0`` (NaN is rejected too)."""
    if not value > 0.0:
        raise ValueError(f"Invalid {description}: {value!r}. {owner} needs {name} > 0.")


def require_fraction(owner: str, description: str, value: Any, name: str, *, one_allowed: bool) -> None:
    """Raises ``ValueError`` unless ``0 <= value < 1`` (``<= 1`` with ``one_allowed``)."""
    ok = 0.0 <= value <= 1.0 if one_allowed else 0.0 <= value < 1.0
    if not ok:
        interval = "[0, 1]" if one_allowed else "[0, 1)"
        raise ValueError(f"Invalid {description}: {value!r}. {owner} needs {name} in {interval}.")


def require_betas(owner: str, betas: Sequence[float]) -> tuple[float, float]:
    """Checks Adam-style ``betas`` (two numbers in [0, 1)) and returns them as a tuple."""
    try:
        beta1, beta2 = betas
    except (TypeError, ValueError):
        raise ValueError(
            f"Invalid betas: {betas!r}. {owner} needs a pair (beta1, beta2), e.g. (0.9, 0.999)."
        ) from None
    for index, beta in enumerate((beta1, beta2)):
        require_fraction(owner, f"beta parameter at index {index}", beta, f"betas[{index}]", one_allowed=False)
    return (beta1, beta2)
