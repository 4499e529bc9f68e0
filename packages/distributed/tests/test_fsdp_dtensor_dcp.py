"""What torch builds on the hccl backend: FSDP2, DTensor, tensor parallel, DCP.

Each test runs one Python process per rank (test_process_group_hccl.run_ranks)
and checks values against single-process computations of the same model on
the CPU (same seed, same data), or against what torch documents. The ranks
assert and print; the test compares what they print.
"""

from __future__ import annotations

import textwrap

from test_process_group_hccl import run_ranks


def program(*parts: str) -> str:
    """Joins pieces of a rank's program, each dedented on its own."""
    return "\n".join(textwrap.dedent(part) for part in parts)


# The model the FSDP2 and DCP tests share: small enough to be quick, two
# Linear layers so that there is a per-layer fully_shard and a root one.
MLP = """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))

def shard(model, mesh):
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model

def max_difference(a, b):
    return (a.detach().cpu().float() - b.detach().cpu().float()).abs().max().item()
"""


def test_fsdp2_training_matches_single_process_training(tmp_path):
    outputs = run_ranks(tmp_path, program(MLP, """
        import copy
        from torch.distributed.tensor import DTensor, Shard

        mesh = init_device_mesh("npu", (world,))
        reference = make_mlp()
        model = shard(copy.deepcopy(reference).npu(), mesh)
        # Parameters are DTensors sharded on dim 0 over the npu mesh.
        weight = model[0].weight
        assert isinstance(weight, DTensor) and weight.placements == (Shard(0),), weight
        assert weight.to_local().device.type == "npu" and weight.to_local().shape == (16 // world, 8)

        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        ref_opt = torch.optim.Adam(reference.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(1)
        for step in range(4):
            x = torch.randn(8, 8, generator=g)
            y = torch.randn(8, 4, generator=g)
            # Reference: the whole batch in one process, on the CPU.
            ref_opt.zero_grad()
            ref_loss = torch.nn.functional.mse_loss(reference(x), y)
            ref_loss.backward()
            ref_opt.step()
            # FSDP2: each rank takes its part of the batch; gradients are
            # reduce-scattered (averaged) into the sharded parameters.
            part = slice(8 // world * rank, 8 // world * (rank + 1))
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[part].npu()), y[part].npu())
            loss.backward()
            opt.step()
            loss = loss.detach()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            assert abs(loss.item() - ref_loss.item()) < 1e-5, (step, loss.item(), ref_loss.item())
            print("loss", step, "ok")
        full = {name: value.full_tensor() for name, value in model.state_dict().items()}
        worst = max(max_difference(full[name], value) for name, value in reference.state_dict().items())
        assert worst < 1e-5, worst
        # The training moved the parameters (so the comparison means something).
        assert max_difference(full["0.weight"], make_mlp()[0].weight) > 1e-3
        print("parameters ok")

        # Mixed precision: bfloat16 parameters in forward and backward
        # (all-gathered in bfloat16), gradients reduce-scattered in float32.
        # The reference: the same bfloat16 model on the CPU, each rank's part
        # of the batch on its own, the gradients averaged in float32.
        from torch.distributed.fsdp import MixedPrecisionPolicy

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        model = make_mlp().npu()
        for layer in (model[0], model[2], model):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
        low = make_mlp().bfloat16()
        x = torch.randn(8, 8, generator=g).bfloat16()
        part = slice(8 // world * rank, 8 // world * (rank + 1))
        out = model(x[part].npu())
        assert out.dtype == torch.bfloat16 and torch.equal(out.cpu(), low(x[part])), out
        out.float().sum().backward()
        expected = {}
        for r in range(world):
            low.zero_grad()
            low(x[8 // world * r:8 // world * (r + 1)]).float().sum().backward()
            for name, p in low.named_parameters():
                expected[name] = expected.get(name, 0) + p.grad.float() / world
        for name, p in model.named_parameters():
            assert p.dtype == torch.float32 and p.grad.dtype == torch.float32, name
            assert max_difference(p.grad.full_tensor(), expected[name]) < 1e-6, name
        print("mixed precision ok")
        dist.destroy_process_group()
    """))
    for out in outputs:
        assert out.split() == ["loss", "0", "ok", "loss", "1", "ok", "loss", "2", "ok",
                               "loss", "3", "ok", "parameters", "ok", "mixed", "precision", "ok"], out


def test_dtensor_redistribute_and_random_ops(tmp_path):
    outputs = run_ranks(tmp_path, """
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
        import torch.distributed.tensor as dtensor

        mesh = init_device_mesh("npu", (world,))
        full = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        rows = distribute_tensor(full.npu(), mesh, [Shard(0)])
        assert rows.to_local().device.type == "npu"
        assert torch.equal(rows.to_local().cpu(), full[2 * rank:2 * rank + 2])
        replicated = rows.redistribute(mesh, [Replicate()])      # all_gather
        assert torch.equal(replicated.to_local().cpu(), full)
        columns = replicated.redistribute(mesh, [Shard(1)])      # local chunk
        assert torch.equal(columns.to_local().cpu(), full[:, 3 * rank:3 * rank + 3])
        assert torch.equal(rows.redistribute(mesh, [Shard(1)]).to_local().cpu(), columns.to_local().cpu())
        assert torch.equal(columns.full_tensor().cpu(), full)
        # Partial -> Replicate is an all_reduce.
        summed = (rows.redistribute(mesh, [Replicate()]) * 1).sum(dim=0)
        assert torch.equal(summed.full_tensor().cpu(), full.sum(dim=0))
        # An op on DTensors computes the same as on the full tensor.
        product = rows @ distribute_tensor(full.t().contiguous().npu(), mesh, [Replicate()])
        assert torch.equal(product.full_tensor().cpu(), full @ full.t())
        print("redistribute ok")

        # Random ops (torch's OffsetBasedRNGTracker on the npu generator's
        # Philox state). What torch documents: with the same seed on every
        # rank, shards of a sharded DTensor get different values, a
        # replicated DTensor the same values on every rank; the result is
        # reproducible. How: rank r's shard is drawn from the device
        # generator with its offset moved by (shard index * local numel),
        # and afterwards every rank's offset moves past the whole tensor.
        def gathered(local):
            parts = [torch.empty_like(local) for _ in range(world)]
            dist.all_gather(parts, local)
            return [p.cpu() for p in parts]

        torch.manual_seed(5)
        start = torch.npu.get_rng_state()
        sharded = dtensor.rand((8, 4), device_mesh=mesh, placements=[Shard(0)])
        after = torch.npu.get_rng_state()
        shards = gathered(sharded.to_local())
        assert not torch.equal(shards[0], shards[1]), shards
        first = sharded.full_tensor().cpu()
        assert torch.equal(first, torch.cat(shards))
        offset = start[8:].view(torch.int64).item()
        assert after[8:].view(torch.int64).item() == offset + 32, (start, after)
        assert torch.equal(after[:8], start[:8])
        # The shard is what the device generator draws at the shifted offset.
        shifted = start.clone()
        shifted[8:] = torch.tensor([offset + rank * 16], dtype=torch.int64).view(torch.uint8)
        torch.npu.set_rng_state(shifted)
        assert torch.equal(torch.rand(4, 4, device="npu").cpu(), shards[rank])

        torch.manual_seed(5)
        again = dtensor.rand((8, 4), device_mesh=mesh, placements=[Shard(0)])
        assert torch.equal(again.full_tensor().cpu(), first)
        # The next draw continues past the first one.
        following = dtensor.rand((8, 4), device_mesh=mesh, placements=[Shard(0)])
        assert not torch.equal(following.full_tensor().cpu(), first)

        torch.manual_seed(5)
        replicated = dtensor.rand((8, 4), device_mesh=mesh, placements=[Replicate()])
        copies = gathered(replicated.to_local())
        assert torch.equal(copies[0], copies[1])
        # An in-place random op on a sharded DTensor (parameter init).
        torch.manual_seed(7)
        weight = distribute_tensor(torch.zeros(6, 4).npu(), mesh, [Shard(0)])
        torch.nn.init.uniform_(weight, -1.0, 1.0)
        shards = gathered(weight.to_local())
        assert not torch.equal(shards[0], shards[1])
        assert all(((s >= -1) & (s <= 1)).all() for s in shards)
        print("random ok")
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.split() == ["redistribute", "ok", "random", "ok"], out


def test_tensor_parallel_mlp_matches_the_unsharded_model(tmp_path):
    outputs = run_ranks(tmp_path, """
        import copy
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)

        mesh = init_device_mesh("npu", (world,))
        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))
        model = parallelize_module(copy.deepcopy(reference).npu(), mesh,
                                   {"0": ColwiseParallel(), "2": RowwiseParallel()})
        assert model[0].weight.placements == (Shard(0),) and model[2].weight.placements == (Shard(1),)
        assert model[2].bias.placements == (Replicate(),)
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
        target = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
        out = model(x.npu())
        expected = reference(x)
        assert (out.cpu() - expected).abs().max().item() < 1e-5
        torch.nn.functional.mse_loss(out, target.npu()).backward()
        torch.nn.functional.mse_loss(expected, target).backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            grad = p.grad.full_tensor().cpu()
            assert (grad - q.grad).abs().max().item() < 1e-5, name
            assert q.grad.abs().max().item() > 0, name
        print("tp ok")
        dist.destroy_process_group()
    """)
    assert outputs == ["tp ok\n"] * 2


def test_fsdp2_over_tensor_parallel_on_a_2d_mesh_matches_single_process_training(tmp_path):
    # 4 ranks as a (dp=2, tp=2) mesh: the DeviceMesh's sub-groups are hccl
    # groups of 2; FSDP2 shards the TP shards again over "dp".
    outputs = run_ranks(tmp_path, """
        import copy
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import Shard
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)

        mesh = init_device_mesh("npu", (2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))
        model = parallelize_module(copy.deepcopy(reference).npu(), mesh["tp"],
                                   {"0": ColwiseParallel(), "2": RowwiseParallel()})
        fully_shard(model, mesh=mesh["dp"])
        assert model[0].weight.placements[1] == Shard(0) and model[0].weight.to_local().shape == (4, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        part = slice(4 * mesh.get_local_rank("dp"), 4 * mesh.get_local_rank("dp") + 4)
        for step in range(3):
            x = torch.randn(8, 8, generator=g)
            y = torch.randn(8, 6, generator=g)
            ref_opt.zero_grad()
            torch.nn.functional.mse_loss(reference(x), y).backward()
            ref_opt.step()
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[part].npu()), y[part].npu()).backward()
            opt.step()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert (p.full_tensor().cpu() - q.detach()).abs().max().item() < 1e-5, name
        print("2d ok")
        dist.destroy_process_group()
    """, world=4)
    assert outputs == ["2d ok\n"] * 4


# Saves a 2-rank FSDP2 model and its Adam state with DCP, and the same state
# gathered into full tensors with torch.save, for the loaders to compare with.
DCP_SAVE = MLP + """
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

mesh = init_device_mesh("npu", (world,))
model = shard(make_mlp().npu(), mesh)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(2):
    model(torch.randn(8, 8, generator=torch.Generator().manual_seed(step)).npu()).sum().backward()
    opt.step()
    opt.zero_grad()
model_state, optim_state = get_state_dict(model, opt)
dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=CHECKPOINT)
full = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if rank == 0:
    torch.save(full, CHECKPOINT + ".full.pt")
dist.destroy_process_group()
print("saved")
"""

# A process without a process group (the single-process DCP loader).
PRELUDE_NO_GROUP = """\
import sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
torch.npu.set_device(0)
"""

# Compares a loaded (model, optim) state with the saved full tensors.
DCP_COMPARE = """
def compare(model_state, optim_state, expected_model, expected_optim):
    def value(t):
        return t.full_tensor() if hasattr(t, "full_tensor") else t
    for name, expected in expected_model.items():
        assert torch.equal(value(model_state[name]).cpu(), expected), name
    assert sorted(optim_state["state"]) == sorted(expected_optim["state"])
    for name, state in expected_optim["state"].items():
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(value(optim_state["state"][name][key]).cpu(), state[key].cpu()), (name, key)
    assert optim_state["param_groups"][0]["lr"] == expected_optim["param_groups"][0]["lr"]
"""


def test_dcp_checkpoint_of_fsdp2_reloads_in_one_process_and_on_four_ranks(tmp_path):
    checkpoint = str(tmp_path / "checkpoint")
    save = tmp_path / "save"
    save.mkdir()
    assert run_ranks(save, program(f"CHECKPOINT = {checkpoint!r}", DCP_SAVE)) == ["saved\n"] * 2

    # One process, no process group: a plain npu model and optimizer.
    one = tmp_path / "one"
    one.mkdir()
    outputs = run_ranks(one, program(f"CHECKPOINT = {checkpoint!r}", MLP, DCP_COMPARE, """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).npu()
        opt = torch.optim.Adam(model.parameters(), lr=0.5)
        model_state, optim_state = get_state_dict(model, opt)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=CHECKPOINT, no_dist=True)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        assert model[0].weight.device.type == "npu"
        expected_model, expected_optim = torch.load(CHECKPOINT + ".full.pt")
        compare(*get_state_dict(model, opt), expected_model, expected_optim)
        print("one process ok")
    """), world=1, prelude=PRELUDE_NO_GROUP)
    assert outputs == ["one process ok\n"]

    # Four ranks: FSDP2 shards of another size.
    four = tmp_path / "four"
    four.mkdir()
    outputs = run_ranks(four, program(f"CHECKPOINT = {checkpoint!r}", MLP, DCP_COMPARE, """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        mesh = init_device_mesh("npu", (world,))
        model = shard(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                          torch.nn.Linear(16, 4)).npu(), mesh)
        assert model[0].weight.to_local().shape == (4, 8)
        opt = torch.optim.Adam(model.parameters(), lr=0.5)
        model_state, optim_state = get_state_dict(model, opt)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=CHECKPOINT)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        expected_model, expected_optim = torch.load(CHECKPOINT + ".full.pt")
        compare(*get_state_dict(model, opt), expected_model, expected_optim)
        print("four ranks ok")
        dist.destroy_process_group()
    """), world=4)
    assert outputs == ["four ranks ok\n"] * 4



# async_save needs a CPU backend next to hccl (torch asserts it, as with
# nccl): the ranks join with "cpu:gloo,npu:hccl".
PRELUDE_CPU_AND_NPU = """\
import os, sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("cpu:gloo,npu:hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)
"""


def test_dcp_async_save_keeps_the_state_of_the_call_while_training_goes_on(tmp_path):
    # async_save copies the npu shards to the CPU before it returns; the
    # training step taken while the files are written must not reach them.
    checkpoint = str(tmp_path / "checkpoint")
    save = tmp_path / "save"
    save.mkdir()
    outputs = run_ranks(save, program(f"CHECKPOINT = {checkpoint!r}", MLP, """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        mesh = init_device_mesh("npu", (world,))
        model = shard(make_mlp().npu(), mesh)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)

        def step(seed):
            model(torch.randn(8, 8, generator=torch.Generator().manual_seed(seed)).npu()).sum().backward()
            opt.step()
            opt.zero_grad()

        step(0)
        full = get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank == 0:
            torch.save(full, CHECKPOINT + ".full.pt")
        model_state, optim_state = get_state_dict(model, opt)
        future = dcp.async_save({"model": model_state, "optim": optim_state}, checkpoint_id=CHECKPOINT)
        step(1)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(100.0)
        future.result()
        print("saved")
        dist.destroy_process_group()
    """), prelude=PRELUDE_CPU_AND_NPU)
    assert outputs == ["saved\n"] * 2

    one = tmp_path / "one"
    one.mkdir()
    outputs = run_ranks(one, program(f"CHECKPOINT = {checkpoint!r}", MLP, DCP_COMPARE, """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model = make_mlp().npu()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        model_state, optim_state = get_state_dict(model, opt)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=CHECKPOINT, no_dist=True)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        expected_model, expected_optim = torch.load(CHECKPOINT + ".full.pt")
        compare(*get_state_dict(model, opt), expected_model, expected_optim)
        print("one process ok")
    """), world=1, prelude=PRELUDE_NO_GROUP)
    assert outputs == ["one process ok\n"]
