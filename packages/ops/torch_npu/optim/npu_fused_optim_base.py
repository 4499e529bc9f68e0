"""NpuFusedOptimizerBase: what every fused optimizer of torch_npu.optim shares."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.optim.optimizer import Optimizer, ParamsT

from ._combined_tensors import combined_grads, combined_params
from ._tensor_lists import Initialiser, group_by_device_and_dtype
from ._validation import Rule, check_hyper_parameters

__all__ = ["NpuFusedOptimizerBase"]


class NpuFusedOptimizerBase(Optimizer):
    """Base class of the fused optimizers (a :class:`torch.optim.Optimizer`).

    "Fused" means multi-tensor: a step updates a param group with
    ``torch._foreach_*`` ops, each taking all the group's tensors at once, so
    that a backend with multi-tensor kernels (as CUDA has) launches one
    kernel per op for the whole group instead of one per parameter and op.
    (torch-npu's npu has no multi-tensor kernels yet: it runs a
    ``_foreach_*`` op as one device op per tensor.) The optimizers work on npu
    tensors (their main use) and on CPU tensors, for float32, bfloat16 and
    float16 parameters; their state lives next to the parameters, in their
    dtype, as in torch.optim, and ``state_dict()``/``load_state_dict()`` work
    as for any torch optimizer.

    A subclass implements :meth:`_step_group`, which updates the parameters
    of one param group that have gradients, and declares what the base class
    does for it: :attr:`_hyper_parameter_rules` (the constructor's checks)
    and :attr:`_options_added_later` (param-group defaults for old pickles).
    :meth:`_state_lists` creates and gathers its per-parameter state.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        default: the default hyper-parameters of every param group
            (torch.optim.Optimizer's ``defaults``).

    Raises:
        ValueError: a value of ``default`` breaks one of the subclass's
            :attr:`_hyper_parameter_rules`.
    """

    #: The checks of the constructor's hyper-parameters, run in this order
    #: (the first bad value is the one reported, as in torch_npu).
    _hyper_parameter_rules: ClassVar[Sequence[Rule]] = ()

    #: Param-group options that came after the first release, with the
    #: value that means the old behaviour: an optimizer pickled before they
    #: existed gets them on unpickling, as torch.optim does for its options.
    _options_added_later: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, params: ParamsT, default: Dict[str, Any]) -> None:
        default = self._check_hyper_parameters(default)
        super().__init__(params, default)
        self._combined_params = combined_params()
        self._combined_grads = combined_grads()

    def _check_hyper_parameters(self, default: Dict[str, Any]) -> Dict[str, Any]:
        """Runs :attr:`_hyper_parameter_rules`; returns ``default`` with normalized values (betas as a tuple).

        A subclass with checks no rule expresses (several values at once)
        extends this, after the rules, to keep torch_npu's order of checks.
        """
        return check_hyper_parameters(type(self).__name__, default, self._hyper_parameter_rules)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for name, value in self._options_added_later.items():
                group.setdefault(name, value)
        # load_state_dict() comes here too: it keeps the flat tensors (they
        # are checked on use); an unpickled or copied optimizer has none yet.
        if not hasattr(self, "_combined_params"):
            self._combined_params = combined_params()
            self._combined_grads = combined_grads()

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Performs one optimization step over every param group.

        Parameters whose ``.grad`` is ``None`` are left alone (and get no
        state).

        Args:
            closure: re-evaluates the model and returns the loss; it runs
                with gradients enabled before the update.

        Returns:
            The closure's loss, or ``None`` without a closure.

        Raises:
            RuntimeError: a parameter has a sparse gradient (then no
                parameter is changed).
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Checked for all groups first, so that an error leaves every
        # parameter as it was.
        self._check_no_sparse_grads()
        self._step_groups()
        return loss

    def _step_groups(self) -> None:
        """Updates every param group; an optimizer whose update needs all groups first overrides this."""
        for group, params, grads in self._groups_with_grads():
            self._step_group(group, params, grads)

    def _groups_with_grads(self) -> Iterator[Tuple[Dict[str, Any], List[Tensor], List[Tensor]]]:
        """Each param group with its parameters that have a gradient and their gradients.

        Groups without any gradient are skipped. A group's lists are made
        when it comes up, after the groups before it were updated.
        """
        for group in self.param_groups:
            params, grads = self._params_with_grads(group)
            if params:
                yield group, params, grads

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        """Updates ``params`` (those of ``group`` with a gradient, never none) from ``grads``.

        ``torch.no_grad`` is on.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement _step_group(group, params, grads), the update of "
            "one param group, to be used as a subclass of NpuFusedOptimizerBase."
        )

    def _state_lists(
        self,
        params: Sequence[Tensor],
        initial: Mapping[str, Initialiser],
        optional: Optional[Mapping[str, Initialiser]] = None,
    ) -> Dict[str, List[Tensor]]:
        """The state tensors of ``params`` by name, each list aligned with ``params``; creates them first.

        A parameter without state gets every ``initial`` entry, in that order
        (the order of its entries in the state dict). ``optional`` holds the
        entries a group option asks for now (such as ``max_exp_avg_sq`` for
        ``amsgrad``): each is created when a parameter lacks it, also one that
        has had state since before the option was turned on.

        Returns:
            For every name of ``initial`` and ``optional``, the list of that
            state entry of each parameter.
        """
        optional = optional or {}
        lists: Dict[str, List[Tensor]] = {name: [] for name in (*initial, *optional)}
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                for name, make in initial.items():
                    state[name] = make(p)
            for name, make in optional.items():
                if name not in state:
                    state[name] = make(p)
            for name, values in lists.items():
                values.append(state[name])
        return lists

    def _check_no_sparse_grads(self) -> None:
        """Raises RuntimeError naming the first parameter with a sparse gradient."""
        for group_index, group in enumerate(self.param_groups):
            for p in group["params"]:
                if p.grad is not None and p.grad.is_sparse:
                    raise RuntimeError(
                        f"{type(self).__name__} does not support sparse gradients, but a parameter of "
                        f"shape {tuple(p.shape)} in param group {group_index} has a sparse .grad. Give it "
                        "a dense gradient (e.g. nn.Embedding(..., sparse=False)), or optimize it with "
                        "torch.optim.SparseAdam in a separate optimizer."
                    )

    @staticmethod
    def _params_with_grads(group: Dict[str, Any]) -> Tuple[List[Tensor], List[Tensor]]:
        """The parameters of ``group`` that have a gradient, and their gradients."""
        params = [p for p in group["params"] if p.grad is not None]
        return params, [p.grad for p in params]

    def _all_params_with_grads(self) -> List[Tensor]:
        return [p for group in self.param_groups for p in group["params"] if p.grad is not None]

    @torch.no_grad()
    def zero_grad(self, set_to_none: bool = False) -> None:
        """Resets the gradients of all parameters of the optimizer.

        Args:
            set_to_none: ``False`` (the default, as in torch_npu) zeroes the
                gradients in place, with one multi-tensor op per device and
                dtype, keeping their memory (and the flat tensor of
                :meth:`get_combined_grads`). ``True`` sets them to ``None``,
                which frees their memory; the next :meth:`get_combined_grads`
                then builds a new flat tensor.
        """
        dense: List[Tensor] = []
        for p in self._all_params_with_grads():
            if set_to_none:
                p.grad = None
                continue
            # As torch.optim does: a gradient that is part of a graph
            # (backward with create_graph=True) is cut from it before zeroing.
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            if p.grad.is_sparse:
                p.grad.zero_()
            else:
                dense.append(p.grad)
        for (grads,) in group_by_device_and_dtype(dense).values():
            torch._foreach_zero_(grads)

    def clip_grad_norm_fused_(self, max_norm: float, norm_type: float = 2.0) -> Tensor:
        """Clips the gradients of all parameters of the optimizer by their total norm.

        The same as :func:`torch.nn.utils.clip_grad_norm_` over every
        parameter of every param group that has a gradient: the norm is
        taken over all gradients together, as if they were concatenated, and
        if it exceeds ``max_norm`` every gradient is scaled in place by
        ``max_norm / (total_norm + 1e-6)``. On npu it uses multi-tensor ops,
        as torch.nn.utils.clip_grad_norm_ does there.

        Args:
            max_norm: the largest allowed total norm.
            norm_type: the p of the p-norm; ``inf`` for the largest absolute value.

        Returns:
            The total norm of the gradients before clipping (a 0-dim tensor;
            ``tensor(0.)`` if no parameter has a gradient).
        """
        params = self._all_params_with_grads()
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)

    def get_combined_params(self) -> List[Optional[Tensor]]:
        """One flat tensor per dtype that *is* the memory of the parameters.

        Covers every parameter of every param group that has a gradient (in
        param-group order), grouped by dtype: the list is
        ``[float32, float16, bfloat16]``, with ``None`` for a dtype no such
        parameter has (indices 0 and 1 are torch_npu's). The parameters are
        re-pointed to slices of the flat tensors (their values are kept; a
        non-contiguous parameter becomes contiguous, and one that shared
        memory with another tensor stops sharing it), so in-place ops on a
        flat tensor change the parameters and the
        optimizer's updates show in the flat tensor. Element ``i`` of
        ``get_combined_params()[k]`` is the parameter element whose gradient
        is element ``i`` of ``get_combined_grads()[k]``.

        Call it again after the set of parameters with gradients changed, or
        after a parameter was given new memory (``p.data = ...``,
        ``module.to(...)``): a new flat tensor is then built.

        Raises:
            RuntimeError: the parameters are on several devices.
            TypeError: a parameter is neither float32, float16 nor bfloat16.
        """
        return self._combined_params.get(self._all_params_with_grads())

    def get_combined_grads(self) -> List[Optional[Tensor]]:
        """One flat tensor per dtype that *is* the memory of the gradients.

        The counterpart of :meth:`get_combined_params` for ``.grad`` (same
        parameters, order and layout). ``backward`` accumulates into the
        existing gradients in place, so the flat tensors keep seeing new
        gradients as long as they are zeroed with ``zero_grad()`` (not set
        to ``None``); after ``zero_grad(set_to_none=True)`` or an assignment
        to ``p.grad``, call this again to get a new flat tensor.

        Raises:
            RuntimeError: the parameters are on several devices.
            TypeError: a gradient is neither float32, float16 nor bfloat16.
        """
        return self._combined_grads.get(self._all_params_with_grads())
