"""Module.to / .npu() / .cpu() / param.data keep the Parameter objects, as on
CUDA (Note [Shallow-copy compatibility of npu tensors], csrc/aten/ShallowCopy.cpp)."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


def _dense(device="cpu"):
    return torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)


@pytest.mark.parametrize(
    "a, b",
    [
        ("cpu", "npu"),
        ("npu", "cpu"),
        ("npu", "npu"),
        ("npu:0", "npu:1"),
    ],
)
def test_dense_cpu_and_npu_tensors_are_shallow_copy_compatible(a, b):
    assert torch._has_compatible_shallow_copy_type(_dense(a), _dense(b))
    assert torch._has_compatible_shallow_copy_type(
        torch.nn.Parameter(_dense(a)), _dense(b).to(torch.bfloat16)
    )


def test_layouts_still_decide_compatibility():
    dense_cpu, dense_npu = _dense(), _dense("npu")
    coo_cpu, coo_npu = dense_cpu.to_sparse(), dense_cpu.to_sparse().npu()
    csr_cpu, csr_npu = dense_cpu.to_sparse_csr(), dense_cpu.to_sparse_csr().npu()
    # like CPU and CUDA: sparse with sparse, compressed with compressed
    assert torch._has_compatible_shallow_copy_type(coo_cpu, coo_npu)
    assert torch._has_compatible_shallow_copy_type(coo_npu, coo_cpu)
    assert torch._has_compatible_shallow_copy_type(csr_npu, csr_cpu)
    for x, y in [(dense_npu, coo_cpu), (coo_npu, dense_cpu), (dense_npu, csr_npu), (coo_npu, csr_npu),
                 (dense_cpu, coo_npu)]:
        assert not torch._has_compatible_shallow_copy_type(x, y)
        assert torch._has_compatible_shallow_copy_type(x, y) == torch._has_compatible_shallow_copy_type(
            x.cpu(), y.cpu()
        )


def test_inference_tensors_too():
    with torch.inference_mode():
        a, b = _dense(), _dense("npu")
    assert torch._has_compatible_shallow_copy_type(a, b)
    assert torch._has_compatible_shallow_copy_type(b, a)


def test_module_to_keeps_parameter_objects_and_buffers_move():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    params = list(model.parameters())
    ids = [id(p) for p in params]
    for conversion in (lambda m: m.to("npu"), lambda m: m.cpu(), lambda m: m.npu(),
                       lambda m: m.to(torch.float64), lambda m: m.to("npu:1", torch.float32)):
        conversion(model)
        assert [id(p) for p in model.parameters()] == ids
        assert all(isinstance(p, torch.nn.Parameter) and p.requires_grad for p in model.parameters())
    assert {p.device for p in model.parameters()} == {torch.device("npu", 1)}
    assert model[1].running_mean.device == torch.device("npu", 1)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_tied_and_shared_parameters_stay_shared():
    embedding = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = embedding.weight  # tied, as GPT-2's lm_head and wte
    model = torch.nn.ModuleDict({"embedding": embedding, "head": head})
    model.to("npu")
    assert model["head"].weight is model["embedding"].weight
    assert model["head"].weight.device.type == "npu"
    assert len(list(model.parameters())) == 1


def test_values_and_grads_move_with_the_parameter():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    reference = [p.detach().clone() for p in model.parameters()]
    model(torch.randn(5, 3)).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.npu()
    for p, value, grad in zip(model.parameters(), reference, grads):
        assert p.device.type == "npu" and p.grad.device.type == "npu"
        assert torch.equal(p.detach().cpu(), value) and torch.equal(p.grad.cpu(), grad)
    # backward on npu accumulates into the moved .grad
    model(torch.randn(5, 3, device="npu")).sum().backward()
    assert model.weight.grad.device.type == "npu"


def test_param_data_assignment_across_devices():
    p = torch.nn.Parameter(torch.zeros(2, 3))
    p.data = _dense("npu")
    assert p.device == torch.device("npu", 0) and p.requires_grad
    assert torch.equal(p.detach().cpu(), _dense())
    p.data = _dense()
    assert p.device.type == "cpu"
    # as on CUDA and CPU, .data may take another shape or floating dtype
    p.data = torch.ones(4, device="npu", dtype=torch.float64)
    assert p.shape == (4,) and p.dtype == torch.float64


def test_param_data_with_a_non_floating_tensor_is_an_error_and_changes_nothing():
    p = torch.nn.Parameter(torch.ones(2, device="npu"))
    with pytest.raises(RuntimeError, match="must be floating point or complex"):
        p.data = torch.ones(2, dtype=torch.int64, device="npu")
    assert p.dtype == torch.float32 and p.device.type == "npu"
    assert torch.equal(p.detach().cpu(), torch.ones(2))


def test_load_state_dict_keeps_parameters_and_device():
    source = torch.nn.Linear(3, 2)
    target = torch.nn.Linear(3, 2).npu()
    ids = [id(p) for p in target.parameters()]
    target.load_state_dict(source.state_dict())
    assert [id(p) for p in target.parameters()] == ids
    assert target.weight.device.type == "npu"
    assert torch.equal(target.weight.detach().cpu(), source.weight.detach())
    # assign=True takes the given tensors (their device), as on CPU and CUDA
    target.load_state_dict({k: v.npu() for k, v in source.state_dict().items()}, assign=True)
    assert target.weight.device.type == "npu"


def test_bad_device_leaves_the_module_unchanged():
    model = torch.nn.Linear(3, 2)
    before = [(id(p), p.device) for p in model.parameters()]
    with pytest.raises(RuntimeError, match="Invalid NPU device index npu:99"):
        model.to("npu:99")
    assert [(id(p), p.device) for p in model.parameters()] == before


def test_state_dict_from_a_device_this_machine_lacks_needs_map_location(python_subprocess, tmp_path):
    path = str(tmp_path / "state.pt")
    torch.save(torch.nn.Linear(2, 2).to("npu:3").state_dict(), path)
    code = f"""
        import torch, torch_npu
        model = torch.nn.Linear(2, 2)
        before = model.weight.detach().clone()
        try:
            torch.load({path!r})
        except RuntimeError as error:
            print("ERROR", error)
        print("UNCHANGED", torch.equal(model.weight.detach(), before))
        state = torch.load({path!r}, map_location="npu:0")
        print("DEVICE", state["weight"].device)
        state = torch.load({path!r}, map_location={{"npu:3": "cpu"}})
        model.load_state_dict(state)
        print("LOADED", model.weight.device)
    """
    result = python_subprocess(code, env={"NPU_SIM_DEVICE_COUNT": "2"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ERROR" in out and "npu:3" in out and "map_location" in out
    assert "UNCHANGED True" in out and "DEVICE npu:0" in out and "LOADED cpu" in out
