"""Checks of hyper-parameters shared by the fused optimizers' constructors.

An optimizer declares its checks as a table of :class:`Rule` (the common
ones are the constants below) and :func:`check_hyper_parameters` runs them
in the table's order, so the first bad value reported is the one torch_npu
reports. Every check raises ``ValueError`` whose message starts as torch_npu's
and torch.optim's do (``Invalid learning rate: -1``), so code matching on
those messages keeps working, and then says which optimizer wanted what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Mapping, Tuple

from torch.optim.optimizer import required

__all__: list = []


@dataclass(frozen=True)
class Rule:
    """The constraint on one hyper-parameter and the message that explains a violation.

    Attributes:
        name: the hyper-parameter (a key of the optimizer's defaults).
        holds: ``True`` for an acceptable value; it must be ``False`` for NaN,
            so write it as a comparison that NaN fails (``v >= 0.0``).
        message: a ``str.format`` template of the ``ValueError`` message, with
            ``{value!r}`` and ``{owner}`` (the optimizer's class name).
        off: values that switch the feature off and are accepted as they are
            (BERT Adam's ``warmup=-1``).
    """

    name: str
    holds: Callable[[Any], bool]
    message: str
    off: Tuple[Any, ...] = ()

    def check(self, owner: str, value: Any) -> Any:
        """Raises ``ValueError`` unless ``value`` is acceptable; returns it (normalized)."""
        if not self.holds(value):
            raise ValueError(self.message.format(value=value, owner=owner))
        return value


def non_negative(name: str, description: str) -> Rule:
    """``value >= 0``, reported as ``Invalid <description>: <value>``."""
    return Rule(name, lambda value: value >= 0.0, f"Invalid {description}: {{value!r}}. {{owner}} needs {name} >= 0.")


def fraction(name: str, description: str, *, one_allowed: bool, label: str = "", off: Tuple[Any, ...] = ()) -> Rule:
    """``0 <= value < 1`` (``<= 1`` with ``one_allowed``); ``label`` names it in the message (default: ``name``)."""
    interval = "[0, 1]" if one_allowed else "[0, 1)"
    holds = (lambda value: 0.0 <= value <= 1.0) if one_allowed else (lambda value: 0.0 <= value < 1.0)
    return Rule(name, holds, f"Invalid {description}: {{value!r}}. {{owner}} needs {label or name} in {interval}.", off)


class _BetasRule(Rule):
    """Adam-style ``betas``: a pair of numbers in [0, 1), normalized to a tuple."""

    def __init__(self) -> None:
        super().__init__("betas", lambda value: True, "")

    def check(self, owner: str, value: Any) -> Tuple[float, float]:
        try:
            beta1, beta2 = value
        except (TypeError, ValueError):
            raise ValueError(
                f"Invalid betas: {value!r}. {owner} needs a pair (beta1, beta2), e.g. (0.9, 0.999)."
            ) from None
        for index, beta in enumerate((beta1, beta2)):
            fraction(f"betas[{index}]", f"beta parameter at index {index}", one_allowed=False).check(owner, beta)
        # A tuple, whatever sequence came in: the param groups and the state
        # dict then look like torch.optim's.
        return (beta1, beta2)


#: The checks several optimizers share.
LR = non_negative("lr", "learning rate")
EPS = non_negative("eps", "epsilon value")
WEIGHT_DECAY = non_negative("weight_decay", "weight_decay value")
MOMENTUM = non_negative("momentum", "momentum value")
BETAS: Rule = _BetasRule()


def check_hyper_parameters(owner: str, values: Mapping[str, Any], rules: Iterable[Rule]) -> Dict[str, Any]:
    """Runs ``rules`` in order on ``values`` and returns a copy with the normalized values.

    A value that is torch.optim's ``required`` placeholder (no default lr) or
    one of its rule's ``off`` values is not checked: torch.optim itself
    rejects a param group that lacks a required value.

    Raises:
        ValueError: from the first rule that a value breaks.
    """
    checked = dict(values)
    for rule in rules:
        value = checked[rule.name]
        if value is required or value in rule.off:
            continue
        checked[rule.name] = rule.check(owner, value)
    return checked
