"""torch.npu.NPUGraph, torch.npu.graph and torch.accelerator.Graph on npu:
capture and replay, random numbers per replay, captures across streams,
pools, and what a capture refuses (graphs.py; Note [Stream capture] in core's
NPUGraphsUtils.h)."""

from __future__ import annotations

import json

import pytest
import torch

import torch_npu

pytestmark = pytest.mark.skipif(
    not torch_npu._C._npu_is_capture_supported(),
    reason="the emulated CANN release has no model capture (8.1.RC1 and later)")


def test_replay_recomputes_from_the_static_inputs():
    g = torch.npu.NPUGraph()
    x = torch.zeros(8, device="npu")
    with torch.npu.graph(g):
        y = torch.relu(x * 2 - 3).sum(0, keepdim=True) + x.mean()
    for _ in range(3):
        value = torch.randn(8)
        x.copy_(value)
        g.replay()
        torch.testing.assert_close(y.cpu(), torch.relu(value * 2 - 3).sum(0, keepdim=True) + value.mean())


def test_the_api_torch_npu_users_call_is_installed():
    for name in ("NPUGraph", "graph", "make_graphed_callables", "graph_pool_handle",
                 "is_current_stream_capturing"):
        assert getattr(torch.npu, name) is getattr(torch_npu.graph, name)
    assert torch.npu.graphs is torch_npu.graph.graphs
    assert not torch.npu.is_current_stream_capturing()
    seen = []
    g = torch.npu.NPUGraph()
    x = torch.ones(2, device="npu")
    with torch.npu.graph(g):
        seen.append(torch.npu.is_current_stream_capturing())
        x.add_(1)
    assert seen == [True]
    assert not torch.npu.is_current_stream_capturing()


def test_capture_nothing_runs_until_replay_and_in_place_work_accumulates():
    x = torch.zeros(4, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x.add_(1)
    assert torch.equal(x.cpu(), torch.zeros(4))
    for _ in range(5):
        g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 5.0))


def test_random_ops_draw_new_numbers_at_each_replay_equal_to_eager():
    def draw():
        return torch.rand(5, device="npu") + torch.randn(3, 2, device="npu").sum() * 0

    torch.npu.manual_seed(123)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = draw()
    replays = []
    for _ in range(3):
        g.replay()
        replays.append(out.cpu().clone())
    assert not torch.equal(replays[0], replays[1])
    assert not torch.equal(replays[1], replays[2])
    # The same ops run eagerly from the same generator state draw the same
    # numbers: the capture reserved nothing, each replay its own slice.
    torch.npu.manual_seed(123)
    eager = [draw().cpu() for _ in range(3)]
    for r, e in zip(replays, eager):
        torch.testing.assert_close(r, e)


def test_dropout_in_a_graph_masks_differently_per_replay():
    x = torch.ones(1000, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = torch.nn.functional.dropout(x, p=0.5)
    g.replay()
    first = y.cpu().clone()
    g.replay()
    second = y.cpu().clone()
    assert set(first.unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(first, second)


def test_registered_generator_and_unregistered_generator():
    gen = torch.Generator(device="npu")
    gen.manual_seed(7)
    g = torch.npu.NPUGraph()
    g.register_generator_state(gen)
    with torch.npu.graph(g):
        out = torch.rand(4, device="npu", generator=gen)
    g.replay()
    first = out.cpu().clone()
    g.replay()
    assert not torch.equal(first, out.cpu())
    gen.manual_seed(7)
    torch.testing.assert_close(first, torch.rand(4, device="npu", generator=gen).cpu())

    other = torch.Generator(device="npu")
    g2 = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="register_generator_state"):
        with torch.npu.graph(g2):
            torch.rand(4, device="npu", generator=other)
    torch.rand(4, device="npu", generator=other)  # usable outside
    with pytest.raises(TypeError, match="torch.Generator"):
        g2.register_generator_state(3)
    with pytest.raises(RuntimeError, match="npu generator"):
        g2.register_generator_state(torch.Generator())


def test_capture_across_streams_fork_and_join():
    x = torch.arange(6.0, device="npu")
    g = torch.npu.NPUGraph()
    side = torch.npu.Stream()
    with torch.npu.graph(g):
        a = x * 2
        side.wait_stream(torch.npu.current_stream())  # fork
        with torch.npu.stream(side):
            b = x + 100
            b.mul_(3)
        torch.npu.current_stream().wait_stream(side)  # join
        c = a + b
    path = None
    for _ in range(2):
        value = torch.randn(6)
        x.copy_(value)
        g.replay()
        torch.testing.assert_close(c.cpu(), value * 2 + (value + 100) * 3)
    del path
    assert not torch.npu.is_current_stream_capturing()
    # The side stream captures no more: its work runs at once.
    with torch.npu.stream(side):
        d = x + 1
    torch.npu.current_stream().wait_stream(side)
    torch.testing.assert_close(d.cpu(), x.cpu() + 1)


def test_a_stream_that_does_not_join_back_fails_the_capture(tmp_path):
    x = torch.ones(3, device="npu")
    g = torch.npu.NPUGraph()
    side = torch.npu.Stream()
    with pytest.raises(RuntimeError, match="UNJOINED|join back"):
        with torch.npu.graph(g):
            y = x * 2
            side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(side):
                y.add_(1)
    # Both streams work normally afterwards, and the graph can capture again.
    with torch.npu.stream(side):
        z = x + 1
    torch.npu.current_stream().wait_stream(side)
    torch.testing.assert_close(z.cpu(), torch.full((3,), 2.0))
    with torch.npu.graph(g):
        w = x * 5
    g.replay()
    torch.testing.assert_close(w.cpu(), torch.full((3,), 5.0))


@pytest.mark.parametrize("offending", ["synchronize", "item", "cpu", "nonzero", "empty_cache"])
def test_what_needs_the_host_to_wait_invalidates_the_capture(offending):
    x = torch.randn(5, device="npu")
    g = torch.npu.NPUGraph()
    calls = {
        "synchronize": torch.npu.synchronize,
        "item": lambda: x.sum().item(),
        "cpu": lambda: x.cpu(),
        "nonzero": lambda: torch.nonzero(x),
        "empty_cache": torch.npu.empty_cache,
    }
    with pytest.raises(RuntimeError, match="capture") as info:
        with torch.npu.graph(g):
            y = x + 1
            calls[offending]()
    assert "ACL_ERROR_RT_STREAM_CAPTURED" in str(info.value) or "invalidated" in str(info.value)
    assert not torch.npu.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    # The stream, the graph object and the device are usable again.
    with torch.npu.graph(g):
        y = x + 1
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)


def test_misuse_is_refused_with_a_message():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="without a capture_begin"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.pool()
    with pytest.raises(ValueError, match="capture_error_mode"):
        torch.npu.graph(g, capture_error_mode="strict")
    x = torch.zeros(2, device="npu")
    with torch.npu.graph(g):
        x.add_(1)
    with pytest.raises(RuntimeError, match="already owns a captured graph"):
        with torch.npu.graph(g):
            pass
    g.reset()
    with torch.npu.graph(g):
        x.add_(2)
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((2,), 2.0))


def test_graphs_share_a_pool_and_release_it_on_reset():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    before = torch.npu.memory_reserved()
    x = torch.randn(256, 256, device="npu")
    g1, g2 = torch.npu.NPUGraph(), torch.npu.NPUGraph()
    with torch.npu.graph(g1):
        y = x * 2
    with torch.npu.graph(g2, pool=g1.pool()):
        z = y + 1
    assert g2.pool() == g1.pool()
    x.fill_(1.0)
    g1.replay()
    g2.replay()
    torch.testing.assert_close(z.cpu(), torch.full((256, 256), 3.0))
    del y, z
    g1.reset()
    g2.reset()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() <= before + x.untyped_storage().nbytes() + 2 * 1024 * 1024


def test_shared_pool_handle_and_capture_modes():
    handle = torch.npu.graph_pool_handle()
    assert isinstance(handle, tuple) and handle[0] == 0
    x = torch.ones(3, device="npu")
    outs = []
    graphs = []
    for mode in ("global", "thread_local", "relaxed"):
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=handle, capture_error_mode=mode):
            outs.append(x * len(outs))
        graphs.append(g)
    for g in graphs:
        g.replay()
    for i, out in enumerate(outs):
        torch.testing.assert_close(out.cpu(), torch.full((3,), float(i)))


def test_accelerator_graph_captures_npu_work():
    x = torch.zeros(4, device="npu")
    stream = torch.npu.Stream()
    graph = torch.accelerator.Graph()
    with torch.npu.stream(stream), graph:
        x += 1
    graph.replay()
    graph.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))
    graph.reset()


def test_debug_dump_describes_the_model(tmp_path):
    x = torch.zeros(4, device="npu")
    g = torch.npu.NPUGraph()
    side = torch.npu.Stream()
    with torch.npu.graph(g):
        y = x + 1
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            z = y * 2
        torch.npu.current_stream().wait_stream(side)
    path = tmp_path / "graph.json"
    g.debug_dump(str(path))
    dump = json.loads(path.read_text())
    assert dump["lanes"] == 2
    kinds = [item["kind"] for item in dump["items"]]
    names = [item.get("name") for item in dump["items"]]
    assert "aten::add" in names and "aten::mul" in names
    assert kinds.count("event_record") >= 2 and kinds.count("event_wait") >= 2
    del z


def test_replay_of_a_training_step_gives_eager_losses():
    torch.manual_seed(0)
    model_cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(20)]

    def eager_losses(device: str) -> list[float]:
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
        model.load_state_dict(model_cpu.state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for xb, yb in data:
            opt.zero_grad(set_to_none=False)
            loss = torch.nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).npu()
    model.load_state_dict(model_cpu.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    static_x = torch.zeros(8, 16, device="npu")
    static_y = torch.zeros(8, 4, device="npu")
    # Warm up on a side stream (grads exist before the capture), as for CUDA graphs.
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(model(static_x), static_y).backward()
        for p in model.parameters():
            p.grad.zero_()
    torch.npu.current_stream().wait_stream(side)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_loss = torch.nn.functional.mse_loss(model(static_x), static_y)
        static_loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    # The capture ran nothing: the parameters are still the initial ones.
    losses = []
    for xb, yb in data:
        static_x.copy_(xb)
        static_y.copy_(yb)
        g.replay()
        losses.append(static_loss.item())
    expected = eager_losses("cpu")
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=1e-5, atol=1e-6)
    assert eager_losses("npu") == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_make_graphed_callables_trains_like_eager():
    torch.manual_seed(1)
    reference = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 3))
    head = torch.nn.Linear(3, 1)
    data = [(torch.randn(6, 12), torch.randn(6, 1)) for _ in range(10)]

    def train(graphed: bool) -> list[float]:
        body = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 3)).npu()
        body.load_state_dict(reference.state_dict())
        last = torch.nn.Linear(3, 1).npu()
        last.load_state_dict(head.state_dict())
        if graphed:
            sample = torch.randn(6, 12, device="npu", requires_grad=False)
            body = torch.npu.make_graphed_callables(body, (sample,))
            sample3 = torch.randn(6, 3, device="npu", requires_grad=True)
            last = torch.npu.make_graphed_callables(last, (sample3,))
        params = list(body.parameters()) + list(last.parameters())
        opt = torch.optim.SGD(params, lr=0.05)
        losses = []
        for xb, yb in data:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(last(body(xb.npu())), yb.npu())
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    assert train(True) == pytest.approx(train(False), rel=1e-5, abs=1e-6)


def test_make_graphed_callables_on_a_function_and_eval_mode():
    # A function's parameters are its arguments (closures are constants to it).
    w = torch.randn(4, 4, device="npu", requires_grad=True)

    def fn(x, w):
        return (x @ w).tanh()

    x = torch.randn(3, 4, device="npu", requires_grad=True)
    graphed = torch.npu.make_graphed_callables(fn, (x, w.detach().clone().requires_grad_()))
    value = torch.randn(3, 4, device="npu", requires_grad=True)
    out = graphed(value, w)
    out.sum().backward()
    ref_value = value.detach().clone().requires_grad_()
    ref_w = w.detach().clone().requires_grad_()
    ref = (ref_value @ ref_w).tanh()
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach().cpu())
    torch.testing.assert_close(value.grad.cpu(), ref_value.grad.cpu())
    torch.testing.assert_close(w.grad.cpu(), ref_w.grad.cpu())

    module = torch.nn.Linear(4, 2).npu()
    graphed_module = torch.npu.make_graphed_callables(module, (torch.randn(5, 4, device="npu"),))
    graphed_module.eval()
    other_shape = torch.randn(7, 4, device="npu")  # eval runs the module's own forward
    torch.testing.assert_close(graphed_module(other_shape).cpu(),
                               torch.nn.functional.linear(other_shape, module.weight, module.bias).detach().cpu())

    with pytest.raises(TypeError, match="tuple"):
        torch.npu.make_graphed_callables(fn, x)
    with pytest.raises(ValueError, match="npu tensors"):
        torch.npu.make_graphed_callables(fn, (torch.randn(3, 4), w))


def test_npugraphs_backend_trains_like_eager_and_recaptures_per_shape(monkeypatch):
    replays = []
    original_replay = torch.npu.NPUGraph.replay
    monkeypatch.setattr(torch.npu.NPUGraph, "replay", lambda self: replays.append(self) or original_replay(self))
    torch.manual_seed(3)
    reference = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Dropout(0.0),
                                    torch.nn.Linear(20, 1))
    batches = [torch.randn(n, 10) for n in (4, 4, 4, 6, 6, 4)]

    def train(compiled: bool) -> list[float]:
        model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Dropout(0.0),
                                    torch.nn.Linear(20, 1)).npu()
        model.load_state_dict(reference.state_dict())
        step_model = torch.compile(model, backend="npugraphs", dynamic=False) if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for xb in batches:
            opt.zero_grad()
            loss = step_model(xb.npu()).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    torch._dynamo.reset()
    assert train(True) == pytest.approx(train(False), rel=1e-5, abs=1e-6)
    # Batches 2, 3 and 6 replay the batch-of-4 graphs (forward and backward);
    # batch 5 replays the batch-of-6 ones.
    assert len(replays) == 8
    assert len({id(g) for g in replays}) == 4
    torch._dynamo.reset()  # the compiled code holds the graphs and their memory


def test_work_on_a_stream_outside_the_capture_may_not_use_its_memory():
    x = torch.ones(4, device="npu")
    g = torch.npu.NPUGraph()
    other = torch.npu.Stream()
    with pytest.raises(RuntimeError, match="graph capture underway allocated"):
        with torch.npu.graph(g):
            y = x * 2
            with torch.npu.stream(other):
                y + 1  # `other` did not join: y holds nothing before a replay
    with pytest.raises(RuntimeError, match="graph capture underway allocated"):
        with torch.npu.graph(g):
            y = x * 2
            with torch.npu.stream(other):
                torch.cumsum(y, 0)  # the generic executor checks too
    # Joined, the same work is part of the graph.
    with torch.npu.graph(g):
        y = x * 2
        other.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(other):
            z = y + 1
        torch.npu.current_stream().wait_stream(other)
    g.replay()
    assert torch.equal(z.cpu(), torch.full((4,), 3.0))
    # After the capture, its memory is the graph's outputs, usable anywhere.
    with torch.npu.stream(other):
        w = z * 2
    torch.npu.current_stream().wait_stream(other)
    assert torch.equal(w.cpu(), torch.full((4,), 6.0))


def test_a_mem_pool_is_not_a_capture():
    pool = torch.npu.MemPool()
    other = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    x = torch.ones(3, device="npu")
    with torch.npu.use_mem_pool(pool):
        t = torch.full((3,), 4.0, device="npu")
    with torch.npu.graph(g):
        y = x + 1
        with torch.npu.stream(other):
            u = t * 2  # memory of a MemPool, not of the capture: allowed
    torch.npu.synchronize()
    assert torch.equal(u.cpu(), torch.full((3,), 8.0))
    g.replay()
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))


@pytest.mark.skipif(torch.npu.device_count() < 2, reason="needs two npu devices")
def test_capture_and_replay_on_another_device():
    with torch.npu.device(1):
        x = torch.ones(3, device="npu:1")
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, stream=torch.npu.Stream(device=1)):
            y = x * 3
    assert y.device == torch.device("npu:1")
    g.replay()  # from device 0: the graph replays on its own device
    assert torch.equal(y.cpu(), torch.full((3,), 3.0))
    torch.testing.assert_close(g.pool()[0], 0)


def test_accelerator_graph_keep_graph_and_instantiate():
    x = torch.zeros(2, device="npu")
    graph = torch.accelerator.Graph(keep_graph=True)
    with torch.npu.stream(torch.npu.Stream()), graph:
        x.add_(3)
    graph.instantiate()
    graph.replay()
    assert torch.equal(x.cpu(), torch.full((2,), 3.0))


def test_reduce_overhead_mode_replays_npugraphs_and_trains_like_cpu(monkeypatch):
    from torch_npu.graph.compile._reduce_overhead import GraphedCompiledFn

    replays, captures, graphed = [], [], []
    original_replay, original_capture = torch.npu.NPUGraph.replay, GraphedCompiledFn._capture
    monkeypatch.setattr(torch.npu.NPUGraph, "replay", lambda self: replays.append(self) or original_replay(self))
    monkeypatch.setattr(GraphedCompiledFn, "_capture",
                        lambda self, inputs, lends: captures.append(self) or original_capture(self, inputs, lends))
    original_init = GraphedCompiledFn.__init__
    monkeypatch.setattr(GraphedCompiledFn, "__init__",
                        lambda self, *args: graphed.append(self) or original_init(self, *args))
    torch.manual_seed(5)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 2))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2))
    model.load_state_dict(reference.state_dict())
    model = model.npu()
    torch._dynamo.reset()
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(6):
        if step == 2:
            captured_in_two_steps = len(captures)
        x = torch.randn(4, 8)
        loss = compiled(x.npu()).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = reference(x).pow(2).mean()
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        torch.testing.assert_close(loss.cpu(), ref_loss.detach(), rtol=1e-5, atol=1e-6)
    # The running statistics (inputs the graph mutates) follow the CPU's.
    torch.testing.assert_close(model[1].running_mean.cpu(), reference[1].running_mean, rtol=1e-5, atol=1e-6)
    assert len(replays) >= 8  # steps after the first replay the forward and backward graphs
    # Note [Outputs of replays are lent, not copied]: from the second step
    # on, the forward replays one capture, and the backward finds what it
    # saved where it was at the backward's capture: nothing is captured
    # again, and nothing the backward reads is copied (Note [Static inputs
    # that move]).
    assert len(captures) == captured_in_two_steps <= 3
    assert len(graphed) == 2 and all(not g.moved_input_idxs for g in graphed)
    torch._dynamo.reset()


def test_reduce_overhead_outputs_that_are_kept_are_never_overwritten():
    # Note [Outputs of replays are lent, not copied]: outputs kept across
    # calls (collected, or a loss returned by the compiled function and kept
    # beyond the next step) keep their values.
    torch.manual_seed(0)
    weight = torch.randn(16, 16, device="npu", requires_grad=True)

    def fn(x):
        return (x @ weight).relu().sum(dim=1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, mode="reduce-overhead")
    xs = [torch.randn(8, 16, device="npu") for _ in range(6)]
    with torch.no_grad():
        kept = [compiled(x) for x in xs]
        expected = [fn(x) for x in xs]
    for got, want in zip(kept, expected):
        torch.testing.assert_close(got.cpu(), want.cpu())
    losses = []
    for x in xs:
        loss = compiled(x).mean()
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(torch.stack(losses).cpu(), torch.stack([fn(x).mean() for x in xs]).detach().cpu())
    torch.testing.assert_close(weight.grad.cpu(), sum(torch.autograd.grad(fn(x).mean(), weight)[0] for x in xs).cpu())
    torch._dynamo.reset()


def test_replays_are_checked_by_the_race_detector():
    # Note [Stream race detection]: each replayed item is checked as if it
    # were launched then, on the replay stream.
    from torch_npu.npu import _race_check

    warm = torch.ones(1024, device="npu")
    (warm * 2).sum()
    warm.add_(1)  # first calls wait for their kernels: these ops already ran
    x = torch.ones(1024, device="npu")
    g = torch.npu.NPUGraph()
    with _race_check.enabled():
        side = torch.npu.Stream()
        with torch.npu.graph(g):
            y = x * 2
        torch.npu.synchronize()
        g.replay()
        with torch.npu.stream(side), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::mul"):
            y.sum()  # the replay on the current stream writes y
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            x.add_(1)
        with pytest.raises(RuntimeError, match=r"read-after-write.*'aten::add_"):
            g.replay()  # reads x, which side wrote
        torch.npu.current_stream().wait_stream(side)
        g.replay()
        torch.npu.synchronize()
    assert torch.equal(y.cpu(), torch.full((1024,), 4.0))
