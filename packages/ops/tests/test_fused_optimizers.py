"""torch_npu.optim: torch_npu's fused optimizers, on npu and on the CPU.

The optimizers with a torch.optim twin must give its parameters bit for bit
after every step. The others are checked against per-tensor reference
implementations written here from the published algorithms (as torch_npu
defines them).
"""

from __future__ import annotations

import copy
import inspect
import io
import math

import pytest
import torch
import torch.nn as nn
from torch.optim.optimizer import required

import torch_npu
from torch_npu.optim import (
    NpuFusedAdadelta,
    NpuFusedAdam,
    NpuFusedAdamP,
    NpuFusedAdamW,
    NpuFusedBertAdam,
    NpuFusedLamb,
    NpuFusedOptimizerBase,
    NpuFusedRMSprop,
    NpuFusedRMSpropTF,
    NpuFusedSGD,
)

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
DEVICES = ["npu", "cpu"]
STEPS = 5


# -- a small model and its training data -----------------------------------------


def mlp(dtype: torch.dtype = torch.float32, device: str = "npu") -> nn.Sequential:
    """A 2-layer MLP with fixed initial weights."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3)).to(device, dtype)


def backward(model: nn.Module, step: int, scale: float = 1.0) -> torch.Tensor:
    """Computes the gradients of the model's loss on the batch of ``step``."""
    p = next(model.parameters())
    generator = torch.Generator().manual_seed(100 + step)
    x = torch.randn(8, 6, generator=generator).to(p.device, p.dtype)
    y = torch.randn(8, 3, generator=generator).to(p.device)
    loss = (model(x).float() - y).pow(2).mean() * scale
    loss.backward()
    return loss.detach()


def two_groups(model: nn.Sequential, first: dict, second: dict) -> list:
    """Param groups: the first layer with the options ``first``, the last one with ``second``."""
    return [{"params": list(model[0].parameters()), **first},
            {"params": list(model[2].parameters()), **second}]


def with_fp16_eps(cls, defaults: dict, dtype: torch.dtype) -> dict:
    # eps=1e-8 is 0 in float16 (1e-6 is subnormal), and a squared gradient
    # that underflows to 0 then gives NaN or huge steps, with torch.optim as
    # well: a float16 run needs an eps float16 can hold.
    name = "e" if cls is NpuFusedBertAdam else "eps"
    if dtype == torch.float16 and name in inspect.signature(cls).parameters and name not in defaults:
        return {**defaults, name: 1e-4}
    return defaults


def assert_close_to_reference(actual: torch.Tensor, expected: torch.Tensor, message: str = "") -> None:
    """float32: assert_close's defaults. bfloat16/float16: within two units in the last place at
    the tensor's scale, as two correct orders of rounding ops may differ by that much in a step."""
    atol = None
    if expected.dtype != torch.float32:
        atol = 2 * torch.finfo(expected.dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(actual, expected, atol=atol, rtol=None if atol is None else 0.0,
                               msg=(lambda m: f"{message}: {m}") if message else None)


def cpu_params(model: nn.Module) -> list:
    return [p.detach().cpu().clone() for p in model.parameters()]


# -- the optimizers with a torch.optim twin: the same bits ---------------------------

TWIN_CASES = [
    pytest.param(NpuFusedSGD, torch.optim.SGD, {"lr": 0.1},
                 {"momentum": 0.9, "weight_decay": 0.01}, {"momentum": 0.9, "nesterov": True},
                 id="sgd-momentum-nesterov"),
    pytest.param(NpuFusedSGD, torch.optim.SGD, {"lr": 0.1},
                 {}, {"lr": 0.05, "momentum": 0.5, "dampening": 0.1, "weight_decay": 0.1},
                 id="sgd-plain-dampening"),
    pytest.param(NpuFusedAdam, torch.optim.Adam, {"lr": 1e-2},
                 {"weight_decay": 0.1}, {"betas": (0.8, 0.99), "amsgrad": True}, id="adam"),
    pytest.param(NpuFusedAdamW, torch.optim.AdamW, {"lr": 1e-2},
                 {"weight_decay": 0.1}, {"weight_decay": 0.0, "amsgrad": True}, id="adamw"),
    pytest.param(NpuFusedRMSprop, torch.optim.RMSprop, {"lr": 1e-2},
                 {"momentum": 0.9, "centered": True}, {"alpha": 0.9, "weight_decay": 0.1}, id="rmsprop"),
    pytest.param(NpuFusedAdadelta, torch.optim.Adadelta, {},
                 {"weight_decay": 0.1}, {"lr": 0.5, "rho": 0.5}, id="adadelta"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fused_cls,torch_cls,defaults,first,second", TWIN_CASES)
def test_same_parameters_as_torch_optim_after_every_step(fused_cls, torch_cls, defaults, first, second,
                                                         dtype, device):
    defaults = with_fp16_eps(fused_cls, defaults, dtype)
    model = mlp(dtype, device)
    optimizer = fused_cls(two_groups(model, first, second), **defaults)
    # torch.optim's multi-tensor implementation (which "fused" stands for) on
    # the CPU; for float32 its for-loop implementation gives the same bits.
    twins = []
    for foreach in ([True, False] if dtype == torch.float32 else [True]):
        twin = copy.deepcopy(model).cpu()
        twins.append((twin, torch_cls(two_groups(twin, first, second), foreach=foreach, **defaults)))
    initial = cpu_params(model)

    for step in range(STEPS):
        optimizer.zero_grad()
        backward(model, step)
        for twin, twin_optimizer in twins:
            for p, q in zip(model.parameters(), twin.parameters()):
                q.grad = p.grad.detach().cpu().clone()
            twin_optimizer.step()
        optimizer.step()
        for twin, _ in twins:
            for p, q in zip(model.parameters(), twin.parameters()):
                assert torch.equal(p.detach().cpu(), q.detach()), f"step {step}: {p.shape}"

    final = cpu_params(model)
    assert all(torch.isfinite(p.float()).all() for p in final)
    assert not any(torch.equal(a, b) for a, b in zip(initial, final))


# -- per-tensor reference implementations of the others -------------------------------


@torch.no_grad()
def reference_lamb(groups, state, *, adam=False, use_global_grad_norm=False):
    divisor = None
    if use_global_grad_norm:
        total = math.sqrt(sum(p.grad.float().pow(2).sum().item() for g in groups for p in g["params"]))
        if total > 1:
            divisor = total
    for group in groups:
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            grad = p.grad if divisor is None else p.grad / divisor
            s = state.setdefault(p, {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)})
            s["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
            s["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            update = s["exp_avg"] / s["exp_avg_sq"].sqrt().add(group["eps"])
            if group["weight_decay"] != 0:
                update.add_(p, alpha=group["weight_decay"])
            ratio = 1.0
            if not adam:
                weight_norm = min(p.float().norm().item(), 10.0)
                update_norm = update.float().norm().item()
                ratio = 1.0 if weight_norm == 0 or update_norm == 0 else weight_norm / update_norm
            p.add_(update, alpha=-group["lr"] * ratio)


def bert_schedule(name, x, warmup):
    if x < warmup:
        return x / warmup
    if name == "warmup_cosine":
        return 0.5 * (1.0 + math.cos(math.pi * x))
    if name == "warmup_constant":
        return 1.0
    if name == "warmup_linear":
        return max((x - 1.0) / (warmup - 1.0), 0.0)
    assert name == "warmup_poly"
    return max(1.0 - x, 0.0) ** 0.5


@torch.no_grad()
def reference_bert_adam(groups, state):
    for group in groups:
        for p in group["params"]:
            s = state.setdefault(p, {"step": 0, "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": torch.zeros_like(p)})
            if group["max_grad_norm"] > 0:
                coefficient = group["max_grad_norm"] / (p.grad.float().norm().item() + 1e-6)
                if coefficient < 1:
                    p.grad.mul_(coefficient)
            grad = p.grad
            s["exp_avg"].mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
            s["exp_avg_sq"].mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
            update = s["exp_avg"] / (s["exp_avg_sq"].sqrt() + group["e"])
            if group["weight_decay"] > 0:
                update += group["weight_decay"] * p
            lr = group["lr"]
            if group["t_total"] != -1:
                lr *= bert_schedule(group["schedule"], s["step"] / group["t_total"], group["warmup"])
            p.add_(-(lr * update))
            s["step"] += 1


@torch.no_grad()
def reference_rmsprop_tf(groups, state):
    for group in groups:
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        for p in group["params"]:
            s = state.setdefault(p, {"square_avg": torch.ones_like(p), "grad_avg": torch.zeros_like(p),
                                     "momentum_buffer": torch.zeros_like(p)})
            grad = p.grad
            if group["weight_decay"] != 0:
                if group["decoupled_decay"]:
                    p.add_(p, alpha=-group["weight_decay"])
                else:
                    grad = grad.add(p, alpha=group["weight_decay"])
            square_avg, grad_avg, buffer = s["square_avg"], s["grad_avg"], s["momentum_buffer"]
            square_avg.add_(grad * grad - square_avg, alpha=1 - alpha)
            if group["centered"]:
                grad_avg.add_(grad - grad_avg, alpha=1 - alpha)
                denominator = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(eps).sqrt()
            else:
                denominator = square_avg.add(eps).sqrt()
            if momentum > 0 and group["lr_in_momentum"]:
                buffer.mul_(momentum).addcdiv_(grad, denominator, value=lr)
                p.sub_(buffer)
            elif momentum > 0:
                buffer.mul_(momentum).addcdiv_(grad, denominator)
                p.add_(buffer, alpha=-lr)
            else:
                p.addcdiv_(grad, denominator, value=-lr)


@torch.no_grad()
def reference_adamp(groups, state, projections=None):
    views = (("channel", lambda x: x.reshape(x.shape[0], -1)), ("layer", lambda x: x.reshape(1, -1)))
    for group in groups:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            grad = p.grad
            s = state.setdefault(p, {"step": 0, "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": torch.zeros_like(p)})
            s["step"] += 1
            t = s["step"]
            s["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
            s["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denominator = s["exp_avg_sq"].sqrt() / math.sqrt(1 - beta2 ** t) + eps
            if group["nesterov"]:
                perturb = (beta1 * s["exp_avg"] + (1 - beta1) * grad) / denominator
            else:
                perturb = s["exp_avg"] / denominator
            ratio, used = 1.0, "none"
            if p.dim() > 1:
                for name, view in views:
                    pv, gv = view(p.float()), view(grad.float())
                    cosine = (pv * gv).sum(1).abs() / (gv.norm(dim=1) + eps) / (pv.norm(dim=1) + eps)
                    if cosine.max().item() < group["delta"] / math.sqrt(pv.shape[1]):
                        unit = pv / (pv.norm(dim=1, keepdim=True) + eps)
                        pert = view(perturb.float())
                        pert = pert - unit * (unit * pert).sum(dim=1, keepdim=True)
                        perturb = pert.reshape(p.shape).to(p.dtype)
                        ratio, used = group["wd_ratio"], name
                        break
            if projections is not None:
                projections.append(used)
            if weight_decay > 0:
                p.mul_(1 - lr * weight_decay * ratio)
            p.add_(perturb, alpha=-lr / (1 - beta1 ** t))


REFERENCE_CASES = [
    pytest.param(NpuFusedLamb, reference_lamb, {"lr": 1e-2}, {"weight_decay": 0.01}, {}, {}, id="lamb"),
    pytest.param(NpuFusedLamb, reference_lamb, {"lr": 1e-2}, {"weight_decay": 0.01}, {},
                 {"weight_scale": 40.0}, id="lamb-weight-norm-over-10"),
    pytest.param(NpuFusedLamb, reference_lamb, {"lr": 1e-2, "adam": True}, {}, {"weight_decay": 0.1},
                 {}, id="lamb-adam"),
    pytest.param(NpuFusedLamb, reference_lamb, {"lr": 1e-2, "use_global_grad_norm": True},
                 {"weight_decay": 0.01}, {"betas": (0.8, 0.9)}, {"scale": 100.0, "global_norm_above_1": True},
                 id="lamb-global-norm"),
    pytest.param(NpuFusedLamb, reference_lamb, {"lr": 1e-2, "use_global_grad_norm": True},
                 {}, {}, {"scale": 0.01, "global_norm_above_1": False}, id="lamb-global-norm-under-1"),
    pytest.param(NpuFusedBertAdam, reference_bert_adam, {"lr": 1e-2}, {}, {"weight_decay": 0.0},
                 {}, id="bert-adam-constant-lr"),
    # t_total=3: the 5 steps go through warmup, decay and past the end.
    *[pytest.param(NpuFusedBertAdam, reference_bert_adam,
                   {"lr": 5e-2, "warmup": 0.4, "t_total": 3, "schedule": schedule, "max_grad_norm": 0.01},
                   {}, {"max_grad_norm": -1, "b1": 0.8}, {}, id=f"bert-adam-{schedule}")
      for schedule in ("warmup_linear", "warmup_cosine", "warmup_constant", "warmup_poly")],
    pytest.param(NpuFusedRMSpropTF, reference_rmsprop_tf, {"lr": 1e-2},
                 {"momentum": 0.9, "centered": True}, {"weight_decay": 0.1}, {}, id="rmsprop-tf"),
    pytest.param(NpuFusedRMSpropTF, reference_rmsprop_tf, {"lr": 1e-2, "momentum": 0.9},
                 {"lr_in_momentum": False, "weight_decay": 0.1, "decoupled_decay": True},
                 {"centered": True, "alpha": 0.5}, {}, id="rmsprop-tf-pytorch-momentum-decoupled"),
    pytest.param(NpuFusedAdamP, reference_adamp, {"lr": 1e-2, "weight_decay": 0.1}, {},
                 {"nesterov": True}, {}, id="adamp"),
    pytest.param(NpuFusedAdamP, reference_adamp, {"lr": 1e-2, "weight_decay": 0.1, "delta": 10.0},
                 {"wd_ratio": 0.5}, {"nesterov": True}, {}, id="adamp-projected"),
]


def extra_options(optimizer) -> dict:
    """LAMB's options that torch_npu keeps on the optimizer, not in the param groups."""
    if isinstance(optimizer, NpuFusedLamb):
        return {"adam": optimizer.adam, "use_global_grad_norm": optimizer.use_global_grad_norm}
    return {}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fused_cls,reference,defaults,first,second,training", REFERENCE_CASES)
def test_same_parameters_as_the_reference_implementation(fused_cls, reference, defaults, first, second,
                                                         training, dtype, device):
    defaults = with_fp16_eps(fused_cls, defaults, dtype)
    model = mlp(dtype, device)
    if training.get("weight_scale"):  # the case is about a weight of norm > 10
        with torch.no_grad():
            model[0].weight.mul_(training["weight_scale"])
        assert model[0].weight.float().norm() > 10
    twin = copy.deepcopy(model)
    optimizer = fused_cls(two_groups(model, first, second), **defaults)
    # The hyper-parameters as the optimizer resolved them (the constructors'
    # defaults are checked in test_constructor_signatures_are_torch_npus).
    reference_groups = [dict(group, params=list(layer.parameters()))
                        for group, layer in zip(optimizer.param_groups, (twin[0], twin[2]))]
    reference_state: dict = {}
    initial = cpu_params(model)

    for step in range(STEPS):
        optimizer.zero_grad()
        loss = backward(model, step, training.get("scale", 1.0))
        for p, q in zip(model.parameters(), twin.parameters()):
            q.grad = p.grad.detach().clone()
        if dtype != torch.float32:
            # In low precision each step starts from the optimizer's parameters and
            # state, so that the rounding differences of earlier steps do not add up.
            with torch.no_grad():
                for p, q in zip(model.parameters(), twin.parameters()):
                    q.copy_(p)
                    for key, value in reference_state.get(q, {}).items():
                        if torch.is_tensor(value) and key in optimizer.state[p]:
                            value.copy_(optimizer.state[p][key])
        if "global_norm_above_1" in training:  # the case is about large (or small) gradients
            global_norm = math.sqrt(sum(p.grad.float().pow(2).sum().item() for p in model.parameters()))
            assert (global_norm > 1) == training["global_norm_above_1"], (global_norm, loss)
        reference(reference_groups, reference_state, **extra_options(optimizer))
        optimizer.step()
        for p, q in zip(model.parameters(), twin.parameters()):
            assert_close_to_reference(p.detach(), q.detach(), f"step {step}, {tuple(p.shape)}")
            # BERT Adam clips the gradients in place; the others leave them alone.
            assert_close_to_reference(p.grad, q.grad, f"step {step}, gradient of {tuple(p.shape)}")
            for key, value in reference_state[q].items():
                if key in optimizer.state[p] and torch.is_tensor(value):
                    assert_close_to_reference(optimizer.state[p][key], value, f"step {step}, {key}")
                elif key == "step":
                    assert optimizer.state[p]["step"].item() == value

    final = cpu_params(model)
    assert all(torch.isfinite(p.float()).all() for p in final)
    assert not any(torch.equal(a, b) for a, b in zip(initial, final))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fused_cls,reference,defaults,first,second,training", REFERENCE_CASES)
def test_same_parameters_on_npu_as_on_the_cpu(fused_cls, reference, defaults, first, second, training, dtype):
    """The same gradients give the same bits on npu as on the CPU."""
    defaults = with_fp16_eps(fused_cls, defaults, dtype)
    models = {device: mlp(dtype, device) for device in DEVICES}
    optimizers = {device: fused_cls(two_groups(model, first, second), **defaults)
                  for device, model in models.items()}
    for step in range(STEPS):
        backward(models["cpu"], step, training.get("scale", 1.0))
        for p, q in zip(models["cpu"].parameters(), models["npu"].parameters()):
            q.grad = p.grad.to("npu")
        for optimizer in optimizers.values():
            optimizer.step()
            optimizer.zero_grad()
        for p, q in zip(models["cpu"].parameters(), models["npu"].parameters()):
            assert torch.equal(q.cpu(), p), f"step {step}"


@pytest.mark.parametrize("device", DEVICES)
def test_adamp_projects_per_channel_per_layer_or_not_at_all(device):
    """Gradients made to hit each branch of AdamP's projection."""
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(4, 8, device=device)) for _ in range(3)]
    params.append(nn.Parameter(torch.randn(4, device=device)))
    twins = [nn.Parameter(p.detach().clone()) for p in params]
    optimizer = NpuFusedAdamP(params, lr=1e-2, weight_decay=0.1)
    reference_groups = [dict(optimizer.param_groups[0], params=twins)]
    reference_state: dict = {}
    for _ in range(3):
        w = [p.detach() for p in params]
        noise = torch.randn(4, 8, device=device)
        # Rows orthogonal to the weight's rows: the per-channel test fires.
        channel = noise - (noise * w[0]).sum(1, keepdim=True) / (w[0] * w[0]).sum(1, keepdim=True) * w[0]
        # One row parallel, one anti-parallel so that the whole-tensor dot
        # product is 0: only the per-layer test fires.
        layer = noise - (noise * w[1]).sum(1, keepdim=True) / (w[1] * w[1]).sum(1, keepdim=True) * w[1]
        layer[0] = w[1][0]
        layer[1] = -w[1][1] * (w[1][0] @ w[1][0]) / (w[1][1] @ w[1][1])
        grads = [channel, layer, w[2].clone(), torch.randn(4, device=device)]
        for p, q, g in zip(params, twins, grads):
            p.grad, q.grad = g.clone(), g.clone()
        projections: list = []
        reference_adamp(reference_groups, reference_state, projections)
        optimizer.step()
        assert projections == ["channel", "layer", "none", "none"]
        for p, q in zip(params, twins):
            assert_close_to_reference(p.detach(), q.detach())


# -- the public API --------------------------------------------------------------------


def test_all_names_are_exported():
    assert sorted(torch_npu.optim.__all__) == sorted([
        "NpuFusedOptimizerBase", "NpuFusedSGD", "NpuFusedAdadelta", "NpuFusedLamb", "NpuFusedAdam",
        "NpuFusedAdamW", "NpuFusedAdamP", "NpuFusedBertAdam", "NpuFusedRMSprop", "NpuFusedRMSpropTF"])
    assert issubclass(NpuFusedOptimizerBase, torch.optim.Optimizer)
    for name in torch_npu.optim.__all__:
        assert issubclass(getattr(torch_npu.optim, name), NpuFusedOptimizerBase)


#: torch_npu's constructor signatures: (parameter name, default) after params.
SIGNATURES = {
    NpuFusedSGD: [("lr", required), ("momentum", 0.0), ("dampening", 0.0), ("weight_decay", 0.0),
                  ("nesterov", False)],
    NpuFusedAdadelta: [("lr", 1.0), ("rho", 0.9), ("eps", 1e-6), ("weight_decay", 0)],
    NpuFusedLamb: [("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-6), ("weight_decay", 0),
                   ("adam", False), ("use_global_grad_norm", False)],
    NpuFusedAdam: [("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8), ("weight_decay", 0),
                   ("amsgrad", False)],
    NpuFusedAdamW: [("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8), ("weight_decay", 1e-2),
                    ("amsgrad", False)],
    NpuFusedAdamP: [("lr", 1e-3), ("betas", (0.9, 0.999)), ("eps", 1e-8), ("weight_decay", 0),
                    ("delta", 0.1), ("wd_ratio", 0.1), ("nesterov", False)],
    NpuFusedBertAdam: [("lr", required), ("warmup", -1), ("t_total", -1), ("schedule", "warmup_linear"),
                       ("b1", 0.9), ("b2", 0.999), ("e", 1e-6), ("weight_decay", 0.01),
                       ("max_grad_norm", 1.0)],
    NpuFusedRMSprop: [("lr", 1e-2), ("alpha", 0.99), ("eps", 1e-8), ("weight_decay", 0), ("momentum", 0),
                      ("centered", False)],
    NpuFusedRMSpropTF: [("lr", 1e-2), ("alpha", 0.9), ("eps", 1e-10), ("weight_decay", 0),
                        ("momentum", 0.0), ("centered", False), ("decoupled_decay", False),
                        ("lr_in_momentum", True)],
}


@pytest.mark.parametrize("cls", list(SIGNATURES), ids=lambda cls: cls.__name__)
def test_constructor_signatures_are_torch_npus(cls):
    parameters = list(inspect.signature(cls).parameters.values())
    assert parameters[0].name == "params"
    assert [(p.name, p.default) for p in parameters[1:]] == SIGNATURES[cls]
    if required not in [default for _, default in SIGNATURES[cls]]:
        optimizer = cls(mlp().parameters())
        expected = {name: default for name, default in SIGNATURES[cls]
                    if name not in ("adam", "use_global_grad_norm")}
        assert optimizer.defaults == expected


BAD_HYPER_PARAMETERS = [
    (NpuFusedSGD, {"lr": -0.1}, "Invalid learning rate"),
    (NpuFusedSGD, {"lr": 0.1, "momentum": -0.9}, "Invalid momentum value"),
    (NpuFusedSGD, {"lr": 0.1, "weight_decay": -1}, "Invalid weight_decay value"),
    (NpuFusedSGD, {"lr": 0.1, "nesterov": True}, "Nesterov momentum requires a momentum"),
    (NpuFusedSGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "nesterov": True},
     "zero dampening"),
    (NpuFusedSGD, {}, "required optimization parameter lr"),
    (NpuFusedAdam, {"lr": -1e-3}, "Invalid learning rate"),
    (NpuFusedAdam, {"eps": -1e-8}, "Invalid epsilon value"),
    (NpuFusedAdam, {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0"),
    (NpuFusedAdam, {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1"),
    (NpuFusedAdam, {"betas": (0.9,)}, "Invalid betas"),
    (NpuFusedAdam, {"weight_decay": -0.1}, "Invalid weight_decay value"),
    (NpuFusedAdamW, {"lr": float("nan")}, "Invalid learning rate"),
    (NpuFusedAdamW, {"betas": (-0.1, 0.999)}, "Invalid beta parameter at index 0"),
    (NpuFusedAdamW, {"weight_decay": -0.01}, "Invalid weight_decay value"),
    (NpuFusedAdadelta, {"lr": -1.0}, "Invalid learning rate"),
    (NpuFusedAdadelta, {"rho": 1.5}, "Invalid rho value"),
    (NpuFusedAdadelta, {"eps": -1e-6}, "Invalid epsilon value"),
    (NpuFusedAdadelta, {"weight_decay": -1}, "Invalid weight_decay value"),
    (NpuFusedRMSprop, {"lr": -1e-2}, "Invalid learning rate"),
    (NpuFusedRMSprop, {"eps": -1}, "Invalid epsilon value"),
    (NpuFusedRMSprop, {"momentum": -1}, "Invalid momentum value"),
    (NpuFusedRMSprop, {"weight_decay": -1}, "Invalid weight_decay value"),
    (NpuFusedRMSprop, {"alpha": -0.5}, "Invalid alpha value"),
    (NpuFusedRMSpropTF, {"lr": -1e-2}, "Invalid learning rate"),
    (NpuFusedRMSpropTF, {"eps": -1}, "Invalid epsilon value"),
    (NpuFusedRMSpropTF, {"momentum": -1}, "Invalid momentum value"),
    (NpuFusedRMSpropTF, {"weight_decay": -1}, "Invalid weight_decay value"),
    (NpuFusedRMSpropTF, {"alpha": -0.5}, "Invalid alpha value"),
    (NpuFusedLamb, {"lr": -1e-3}, "Invalid learning rate"),
    (NpuFusedLamb, {"betas": (1.5, 0.999)}, "Invalid beta parameter at index 0"),
    (NpuFusedLamb, {"betas": (0.9, 1.0)}, "Invalid beta parameter at index 1"),
    (NpuFusedLamb, {"eps": -1e-6}, "Invalid epsilon value"),
    (NpuFusedLamb, {"weight_decay": -0.1}, "Invalid weight_decay value"),
    (NpuFusedBertAdam, {"lr": -1e-3}, "Invalid learning rate"),
    (NpuFusedBertAdam, {"lr": 1e-3, "warmup": 1.0}, "Invalid warmup"),
    (NpuFusedBertAdam, {"lr": 1e-3, "warmup": -0.5}, "Invalid warmup"),
    (NpuFusedBertAdam, {"lr": 1e-3, "schedule": "warmup_exp"}, "Invalid schedule parameter"),
    (NpuFusedBertAdam, {"lr": 1e-3, "b1": 1.0}, "Invalid b1 parameter"),
    (NpuFusedBertAdam, {"lr": 1e-3, "b2": -0.1}, "Invalid b2 parameter"),
    (NpuFusedBertAdam, {"lr": 1e-3, "e": -1e-6}, "Invalid epsilon value"),
    (NpuFusedBertAdam, {"lr": 1e-3, "t_total": 0}, "Invalid t_total"),
    (NpuFusedBertAdam, {"lr": 1e-3, "weight_decay": -0.01}, "Invalid weight_decay value"),
    (NpuFusedBertAdam, {}, "required optimization parameter lr"),
    (NpuFusedAdamP, {"lr": -1e-3}, "Invalid learning rate"),
    (NpuFusedAdamP, {"betas": (0.9, 2.0)}, "Invalid beta parameter at index 1"),
    (NpuFusedAdamP, {"eps": -1}, "Invalid epsilon value"),
    (NpuFusedAdamP, {"weight_decay": -1}, "Invalid weight_decay value"),
    (NpuFusedAdamP, {"delta": -0.1}, "Invalid delta value"),
    (NpuFusedAdamP, {"wd_ratio": -0.1}, "Invalid wd_ratio value"),
]


@pytest.mark.parametrize("cls,kwargs,message", BAD_HYPER_PARAMETERS,
                         ids=[f"{c.__name__}-{'-'.join(k) or 'no-lr'}-{i}"
                              for i, (c, k, _) in enumerate(BAD_HYPER_PARAMETERS)])
def test_bad_hyper_parameters_raise_value_error(cls, kwargs, message):
    with pytest.raises(ValueError, match=message) as error:
        cls(mlp().parameters(), **kwargs)
    if "required" not in message:  # the message says which optimizer and what it needs
        assert cls.__name__ in str(error.value)


#: One bad value per checked hyper-parameter kind and the whole message it must raise
#: (checkpointed training scripts and user code match on these).
EXACT_MESSAGES = [
    *[(cls, {"lr": -1.0}, f"Invalid learning rate: -1.0. {cls.__name__} needs lr >= 0.")
      for cls in SIGNATURES],
    (NpuFusedAdam, {"betas": [0.9, 1.0]},
     "Invalid beta parameter at index 1: 1.0. NpuFusedAdam needs betas[1] in [0, 1)."),
    (NpuFusedLamb, {"betas": 0.9},
     "Invalid betas: 0.9. NpuFusedLamb needs a pair (beta1, beta2), e.g. (0.9, 0.999)."),
    (NpuFusedAdadelta, {"rho": 1.5}, "Invalid rho value: 1.5. NpuFusedAdadelta needs rho in [0, 1]."),
    (NpuFusedRMSpropTF, {"alpha": -0.5}, "Invalid alpha value: -0.5. NpuFusedRMSpropTF needs alpha >= 0."),
    (NpuFusedAdamP, {"wd_ratio": -0.1}, "Invalid wd_ratio value: -0.1. NpuFusedAdamP needs wd_ratio >= 0."),
    (NpuFusedSGD, {"lr": 0.1, "nesterov": True},
     "Nesterov momentum requires a momentum and zero dampening: NpuFusedSGD got momentum=0.0, "
     "dampening=0.0; use momentum > 0 and dampening=0, or nesterov=False."),
    (NpuFusedBertAdam, {"lr": 0.1, "warmup": 1.0},
     "Invalid warmup: 1.0. NpuFusedBertAdam needs warmup (or -1 for no warmup) in [0, 1)."),
    (NpuFusedBertAdam, {"lr": 0.1, "schedule": "linear"},
     "Invalid schedule parameter: 'linear'. NpuFusedBertAdam knows warmup_constant, warmup_cosine, "
     "warmup_linear, warmup_poly."),
    (NpuFusedBertAdam, {"lr": 0.1, "t_total": 0},
     "Invalid t_total: 0. NpuFusedBertAdam needs the number of training steps (> 0), or -1 for a "
     "constant learning rate."),
    (NpuFusedBertAdam, {"lr": 0.1, "e": -1.0}, "Invalid epsilon value: -1.0. NpuFusedBertAdam needs e >= 0."),
    # Several bad values: the first check in torch_npu's order reports.
    (NpuFusedBertAdam, {"lr": 0.1, "b1": 1.0, "warmup": 2.0, "weight_decay": -1.0},
     "Invalid warmup: 2.0. NpuFusedBertAdam needs warmup (or -1 for no warmup) in [0, 1)."),
    (NpuFusedRMSprop, {"alpha": -1.0, "momentum": -1.0},
     "Invalid momentum value: -1.0. NpuFusedRMSprop needs momentum >= 0."),
    (NpuFusedSGD, {"lr": -0.1, "nesterov": True},
     "Invalid learning rate: -0.1. NpuFusedSGD needs lr >= 0."),
]


@pytest.mark.parametrize("cls,kwargs,message", EXACT_MESSAGES,
                         ids=[f"{c.__name__}-{'-'.join(k)}-{i}" for i, (c, k, _) in enumerate(EXACT_MESSAGES)])
def test_bad_hyper_parameter_messages_are_exact(cls, kwargs, message):
    with pytest.raises(ValueError) as error:
        cls(mlp().parameters(), **kwargs)
    assert str(error.value) == message


ALL_OPTIMIZERS = [
    (NpuFusedSGD, {"lr": 0.1, "momentum": 0.9}),
    (NpuFusedAdam, {"lr": 1e-2, "weight_decay": 0.1, "amsgrad": True}),
    (NpuFusedAdamW, {"lr": 1e-2}),
    (NpuFusedRMSprop, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    (NpuFusedAdadelta, {"weight_decay": 0.1}),
    (NpuFusedLamb, {"lr": 1e-2, "use_global_grad_norm": True}),
    (NpuFusedBertAdam, {"lr": 1e-2, "warmup": 0.1, "t_total": 10, "max_grad_norm": 0.1}),
    (NpuFusedRMSpropTF, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    (NpuFusedAdamP, {"lr": 1e-2, "weight_decay": 0.1, "delta": 10.0}),
]
ALL_IDS = [cls.__name__ for cls, _ in ALL_OPTIMIZERS]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls,kwargs", ALL_OPTIMIZERS, ids=ALL_IDS)
def test_sparse_gradients_raise(cls, kwargs, device):
    dense = nn.Linear(4, 4).to(device)
    embedding = nn.Embedding(10, 4, sparse=True).to(device)
    optimizer = cls([{"params": dense.parameters()}, {"params": embedding.parameters()}], **kwargs)
    dense(embedding(torch.tensor([1, 2], device=device))).sum().backward()
    before = [p.detach().cpu().clone() for p in dense.parameters()]
    with pytest.raises(RuntimeError, match=f"{cls.__name__} does not support sparse gradients.*"
                                           r"shape \(10, 4\) in param group 1.*SparseAdam"):
        optimizer.step()
    # Nothing was updated, not even the group before the sparse one.
    assert all(torch.equal(a, p.detach().cpu()) for a, p in zip(before, dense.parameters()))


@pytest.mark.parametrize("cls,kwargs", ALL_OPTIMIZERS, ids=ALL_IDS)
def test_state_dict_round_trip_continues_identically(cls, kwargs):
    model = mlp()
    optimizer = cls(two_groups(model, {}, {"lr": 5e-3}), **kwargs)
    for step in range(2):
        optimizer.zero_grad()
        backward(model, step)
        optimizer.step()
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)

    resumed_model = copy.deepcopy(model)
    resumed = cls(two_groups(resumed_model, {}, {"lr": 5e-3}), **kwargs)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    # Without the state the next steps differ: the check below means something.
    fresh_model = copy.deepcopy(model)
    fresh = cls(two_groups(fresh_model, {}, {"lr": 5e-3}), **kwargs)

    for step in range(2, STEPS):
        for m, o in ((model, optimizer), (resumed_model, resumed), (fresh_model, fresh)):
            o.zero_grad()
            backward(m, step)
            o.step()
        for p, q in zip(model.parameters(), resumed_model.parameters()):
            assert torch.equal(p.cpu(), q.cpu()), f"step {step}"
    assert not all(torch.equal(p.cpu(), q.cpu()) for p, q in zip(model.parameters(), fresh_model.parameters()))


#: The per-parameter state of each ALL_OPTIMIZERS entry after a step, in its order:
#: the state_dict layout checkpoints (and torch.optim twins) depend on.
STATE_KEYS = {
    NpuFusedSGD: ["momentum_buffer"],
    NpuFusedAdam: ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
    NpuFusedAdamW: ["step", "exp_avg", "exp_avg_sq"],
    NpuFusedRMSprop: ["step", "square_avg", "momentum_buffer", "grad_avg"],
    NpuFusedAdadelta: ["step", "square_avg", "acc_delta"],
    NpuFusedLamb: ["step", "exp_avg", "exp_avg_sq"],
    NpuFusedBertAdam: ["step", "exp_avg", "exp_avg_sq"],
    NpuFusedRMSpropTF: ["step", "square_avg", "momentum_buffer", "grad_avg"],
    NpuFusedAdamP: ["step", "exp_avg", "exp_avg_sq"],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls,kwargs", ALL_OPTIMIZERS, ids=ALL_IDS)
def test_state_dict_layout_after_one_step(cls, kwargs, device):
    model = mlp(device=device)
    optimizer = cls(two_groups(model, {}, {"lr": 5e-3}), **kwargs)
    backward(model, 0)
    model[2].bias.grad = None  # a parameter without a gradient gets no state
    optimizer.step()
    state_dict = optimizer.state_dict()
    params = list(model.parameters())
    assert sorted(state_dict["state"]) == [0, 1, 2]
    for index, state in state_dict["state"].items():
        assert list(state) == STATE_KEYS[cls]
        for name, value in state.items():
            if name == "step":  # on the host, as torch.optim keeps it without capturable
                assert value.device.type == "cpu" and value.dtype == torch.float32 and value.dim() == 0
                assert value.item() == 1.0
            else:
                assert (value.shape, value.dtype, value.device) == (
                    params[index].shape, params[index].dtype, params[index].device)
    assert [group["params"] for group in state_dict["param_groups"]] == [[0, 1], [2, 3]]
    expected_options = sorted(optimizer.defaults)
    assert all(sorted(set(group) - {"params"}) == expected_options for group in state_dict["param_groups"])


@pytest.mark.parametrize("cls,option,names", [
    (NpuFusedAdam, {"amsgrad": True}, ["max_exp_avg_sq"]),
    (NpuFusedRMSprop, {"momentum": 0.9, "centered": True}, ["momentum_buffer", "grad_avg"]),
    (NpuFusedRMSpropTF, {"momentum": 0.9, "centered": True}, ["momentum_buffer", "grad_avg"]),
], ids=lambda value: value.__name__ if isinstance(value, type) else None)
def test_an_option_turned_on_later_adds_its_state(cls, option, names):
    model = mlp()
    optimizer = cls(model.parameters(), lr=1e-2)
    backward(model, 0)
    optimizer.step()
    before = {name: list(optimizer.state[p]) for name, p in model.named_parameters()}
    optimizer.param_groups[0].update(option)
    optimizer.step()
    for name, p in model.named_parameters():
        assert list(optimizer.state[p]) == before[name] + names
        assert optimizer.state[p]["step"].item() == 2.0


@pytest.mark.parametrize("cls,kwargs", ALL_OPTIMIZERS, ids=ALL_IDS)
def test_deep_copy_of_model_and_optimizer_continues_identically(cls, kwargs):
    model = mlp()
    optimizer = cls(model.parameters(), **kwargs)
    for step in range(2):
        optimizer.zero_grad()
        backward(model, step)
        optimizer.step()
    copied_model, copied_optimizer = copy.deepcopy((model, optimizer))
    for step in range(2, STEPS):
        for m, o in ((model, optimizer), (copied_model, copied_optimizer)):
            o.zero_grad()
            backward(m, step)
            o.step()
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), copied_model.parameters()))


def test_adamw_continues_from_a_torch_optim_adamw_state_dict():
    """The state is torch.optim.AdamW's: switching optimizers mid-training changes nothing."""
    model = mlp()
    twin = copy.deepcopy(model)
    torch_optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-2, foreach=True)
    for step in range(2):
        torch_optimizer.zero_grad()
        backward(twin, step)
        torch_optimizer.step()
    model.load_state_dict(twin.state_dict())
    optimizer = NpuFusedAdamW(model.parameters(), lr=1e-2)
    # A copy: loading keeps tensors that are already on the right device, and
    # the two optimizers must not share their state.
    optimizer.load_state_dict(copy.deepcopy(torch_optimizer.state_dict()))
    for step in range(2, STEPS):
        for m, o in ((model, optimizer), (twin, torch_optimizer)):
            o.zero_grad()
            backward(m, step)
            o.step()
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf], ids=str)
@pytest.mark.parametrize("max_norm", [1e-2, 1e3], ids=["clipped", "unclipped"])
def test_clip_grad_norm_fused_is_clip_grad_norm(max_norm, norm_type, device):
    model = mlp(torch.float32, device)
    optimizer = NpuFusedSGD(two_groups(model, {}, {"momentum": 0.9}), lr=0.1)
    backward(model, 0)
    twin, cpu_twin = copy.deepcopy(model), copy.deepcopy(model).cpu()  # deepcopy leaves .grad out
    for p, q, r in zip(model.parameters(), twin.parameters(), cpu_twin.parameters()):
        q.grad, r.grad = p.grad.clone(), p.grad.cpu().clone()

    total = optimizer.clip_grad_norm_fused_(max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(twin.parameters(), max_norm, norm_type)
    cpu_expected = torch.nn.utils.clip_grad_norm_(cpu_twin.parameters(), max_norm, norm_type)

    assert total.device == expected.device and torch.equal(total, expected)
    torch.testing.assert_close(total.cpu(), cpu_expected)
    for p, q, r in zip(model.parameters(), twin.parameters(), cpu_twin.parameters()):
        assert torch.equal(p.grad, q.grad)
        torch.testing.assert_close(p.grad.cpu(), r.grad)
    norm_after = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()], norm_type)
    if max_norm < total.item():
        torch.testing.assert_close(norm_after.item(), max_norm, rtol=1e-4, atol=0)
    else:
        assert torch.equal(norm_after, total)


def test_clip_grad_norm_fused_without_gradients_is_zero():
    optimizer = NpuFusedAdamW(mlp().parameters())
    assert torch.equal(optimizer.clip_grad_norm_fused_(1.0), torch.tensor(0.0))


@pytest.mark.parametrize("cls,kwargs", ALL_OPTIMIZERS, ids=ALL_IDS)
def test_zero_grad_zeroes_in_place_or_sets_to_none(cls, kwargs):
    model = mlp()
    optimizer = cls(model.parameters(), **kwargs)
    backward(model, 0)
    grads = [p.grad for p in model.parameters()]
    optimizer.zero_grad()  # torch_npu's default: in place
    assert all(p.grad is g and not g.any() for p, g in zip(model.parameters(), grads))
    backward(model, 1)
    optimizer.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in model.parameters())
    optimizer.step()  # no gradients: nothing to do


def test_step_with_closure_returns_the_loss_and_updates_like_without():
    model, twin = mlp(), mlp()
    optimizer = NpuFusedAdam(model.parameters(), lr=1e-2)
    twin_optimizer = NpuFusedAdam(twin.parameters(), lr=1e-2)

    def closure():
        optimizer.zero_grad()
        return backward(model, 0)

    with torch.no_grad():  # the closure still computes gradients
        loss = optimizer.step(closure)
    twin_optimizer.zero_grad()
    twin_loss = backward(twin, 0)
    twin_optimizer.step()
    assert torch.equal(loss, twin_loss)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))


def test_huggingface_trainer_adamw_torch_npu_fused_trains():
    """What Trainer(optim="adamw_torch_npu_fused") builds, with its linear warmup schedule."""
    model = mlp()
    twin = copy.deepcopy(model).cpu()

    def hf_groups(m):
        decay = [p for name, p in m.named_parameters() if not name.endswith("bias")]
        no_decay = [p for name, p in m.named_parameters() if name.endswith("bias")]
        return [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]

    optimizer = NpuFusedAdamW(hf_groups(model), lr=5e-5, betas=(0.9, 0.999), eps=1e-8)
    twin_optimizer = torch.optim.AdamW(hf_groups(twin), lr=5e-5, betas=(0.9, 0.999), eps=1e-8)
    schedules = [torch.optim.lr_scheduler.LambdaLR(o, lambda step: min(1.0, (step + 1) / 3))
                 for o in (optimizer, twin_optimizer)]
    losses = []
    for _ in range(10):
        optimizer.zero_grad()
        losses.append(backward(model, 0).item())  # one batch, learnt step by step
        for p, q in zip(model.parameters(), twin.parameters()):
            q.grad = p.grad.cpu()
        optimizer.step()
        twin_optimizer.step()
        for schedule in schedules:
            schedule.step()
        assert all(torch.equal(p.cpu(), q) for p, q in zip(model.parameters(), twin.parameters()))
    assert optimizer.param_groups[0]["lr"] == 5e-5
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses


# -- get_combined_params / get_combined_grads -------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_combined_params_and_grads_are_the_memory_of_the_parameters(device):
    model = mlp(torch.float32, device)
    optimizer = NpuFusedAdamW(two_groups(model, {}, {"weight_decay": 0.0}), lr=1e-2)
    twin = copy.deepcopy(model).cpu()
    twin_optimizer = torch.optim.AdamW(two_groups(twin, {}, {"weight_decay": 0.0}), lr=1e-2)
    assert optimizer.get_combined_params() == [None, None, None]  # no gradients yet

    backward(model, 0)
    params, grads = optimizer.get_combined_params(), optimizer.get_combined_grads()
    assert params[1:] == [None, None] and grads[1:] == [None, None]
    flat_params, flat_grads = params[0], grads[0]
    numel = sum(p.numel() for p in model.parameters())
    assert flat_params.shape == flat_grads.shape == (numel,)
    assert torch.equal(flat_params, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert torch.equal(flat_grads, torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    assert torch.equal(flat_params.cpu(), torch.cat([p.reshape(-1) for p in twin.parameters()]))

    # Both ways: an in-place op on a flat tensor changes the parameters and
    # gradients, and backward/step write into the flat tensors.
    flat_grads.mul_(0.5)
    bias = model[2].bias
    assert torch.equal(bias.grad, flat_grads[-3:])
    for step in range(1, 4):
        for p, q in zip(model.parameters(), twin.parameters()):
            q.grad = p.grad.cpu()
        optimizer.step()
        twin_optimizer.step()
        assert torch.equal(flat_params[-3:], bias.detach())
        assert all(torch.equal(p.cpu(), q) for p, q in zip(model.parameters(), twin.parameters()))
        optimizer.zero_grad()
        assert not flat_grads.any()
        backward(model, step)
        assert torch.equal(flat_grads[-3:], bias.grad)
        assert optimizer.get_combined_grads()[0] is flat_grads
        assert optimizer.get_combined_params()[0] is flat_params

    with torch.no_grad():
        flat_params.zero_()
    assert not any(p.any() for p in model.parameters())

    # Gradients set to None and recreated by backward: a new flat tensor.
    optimizer.zero_grad(set_to_none=True)
    backward(model, 0)
    new_flat_grads = optimizer.get_combined_grads()[0]
    assert new_flat_grads is not flat_grads
    new_flat_grads.zero_()
    assert not any(p.grad.any() for p in model.parameters())


def test_combined_tensors_are_per_dtype_in_torch_npus_order():
    params = [nn.Parameter(torch.randn(3, device="npu", dtype=dtype))
              for dtype in (torch.bfloat16, torch.float32, torch.float16, torch.float32)]
    params.append(nn.Parameter(torch.randn(2, device="npu")))  # never gets a gradient
    optimizer = NpuFusedSGD(params, lr=0.1)
    for p in params[:4]:
        p.grad = torch.randn_like(p)
    combined = optimizer.get_combined_params()
    grads = optimizer.get_combined_grads()
    assert [t.dtype for t in combined] == [torch.float32, torch.float16, torch.bfloat16]
    assert torch.equal(combined[0], torch.cat([params[1], params[3]]).detach())
    assert torch.equal(grads[0], torch.cat([params[1].grad, params[3].grad]))
    assert torch.equal(combined[2], params[0].detach()) and torch.equal(grads[1], params[2].grad)
    combined[2].fill_(1.0)
    assert torch.equal(params[0].detach(), torch.ones(3, device="npu", dtype=torch.bfloat16))


def test_combined_tensors_need_one_device_and_a_supported_dtype():
    on_two_devices = [nn.Parameter(torch.randn(2)), nn.Parameter(torch.randn(2, device="npu"))]
    optimizer = NpuFusedSGD(on_two_devices, lr=0.1)
    for p in on_two_devices:
        p.grad = torch.ones_like(p)
    with pytest.raises(RuntimeError, match="several devices"):
        optimizer.get_combined_params()

    double = nn.Parameter(torch.randn(2, device="npu", dtype=torch.float64))
    optimizer = NpuFusedSGD([double], lr=0.1)
    double.grad = torch.ones_like(double)
    with pytest.raises(TypeError, match="float64"):
        optimizer.get_combined_grads()
