"""Replays run the dedicated kernels' work items from prepared CPU kernels
(Note [Prepared kernels of replayed work], ops csrc/PreparedCall.h): from
the second replay on, an item calls its op's kernel object as its first run
left it. These tests change the static inputs' values between replays (same
addresses) and check each replay against eager npu (the same CPU kernels:
equal) and the CPU, for each kind of op that takes that path, and that the
prepared path was the one taken (torch_npu.ops.execution_counters())."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch

import torch_npu

pytestmark = pytest.mark.skipif(
    not torch_npu._C._npu_is_capture_supported(),
    reason="the emulated CANN release has no model capture (8.1.RC1 and later)")

Inputs = Callable[[int], Sequence[torch.Tensor]]


def _counters() -> dict[str, int]:
    torch.npu.synchronize()
    return torch_npu.ops.execution_counters()


def _check_replays(fn: Callable[..., torch.Tensor], make_inputs: Inputs, replays: int = 4) -> dict[str, int]:
    """Captures `fn` on npu copies of make_inputs(0), then before each replay
    fills them with make_inputs(k); returns the change of the replay counters."""
    static = [t.npu() for t in make_inputs(0)]
    fn(*static)  # warm up outside the capture (lazy state, verified signatures)
    torch.npu.synchronize()
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = fn(*static)
    before = _counters()
    for k in range(1, replays + 1):
        values = make_inputs(k)
        for s, v in zip(static, values):
            s.copy_(v)
        graph.replay()
        eager = fn(*[v.npu() for v in values]).cpu()
        assert torch.equal(out.cpu(), eager), f"replay {k} differs from eager npu"
        torch.testing.assert_close(out.cpu(), fn(*values))
    after = _counters()
    return {key: after[key] - before[key] for key in ("replay_kernels", "replay_aliases", "replay_kernels_dropped")}


def _randn(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32) -> Inputs:
    def make(k: int) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(k)
        return [torch.randn(shape, generator=gen).to(dtype) for shape in shapes]
    return make


def test_pointwise_with_scalars():
    def fn(x):
        y = (x * 1.5 + 0.25 - 2).clamp(-1.0, 1.0)
        return torch.sigmoid(y).pow(2) / 3
    counts = _check_replays(fn, _randn((6, 5)))
    assert counts["replay_kernels"] == 7  # mul, add, sub, clamp, sigmoid, pow, div


def test_broadcasting_and_non_contiguous_operands():
    def fn(a, b, c):
        return (a + b) * c.t()[:, ::2] - a.expand(4, 3)
    counts = _check_replays(fn, _randn((4, 1), (1, 3), (6, 4)))
    assert counts["replay_kernels"] == 3


def test_in_place_items_read_the_values_of_each_replay():
    def fn(x, y):
        y.mul_(2).add_(x, alpha=0.5)
        return y
    counts = _check_replays(fn, _randn((3, 4), (3, 4)))
    assert counts["replay_kernels"] == 2


def test_type_promotion_of_a_device_input_is_not_kept_from_the_first_run():
    # On the CPU the iterator casts the int input to float when it is built:
    # a kept iterator would add the first run's values (PreparedCall.h).
    def make(k: int) -> list[torch.Tensor]:
        return [torch.arange(6, dtype=torch.int32).reshape(2, 3) * (k + 1), torch.full((2, 3), 0.5 * k)]
    counts = _check_replays(lambda i, f: i + f, make)
    assert counts == {"replay_kernels": 0, "replay_aliases": 1, "replay_kernels_dropped": 0}


def test_reduced_precision_scalar_kernels_that_change_their_iterator():
    # The CPU's bfloat16 mul by a scalar removes the scalar operand from the
    # iterator it runs: the item gives its kernel object up after that run.
    counts = _check_replays(lambda x: x * 3.0, _randn((8,), dtype=torch.bfloat16))
    assert counts["replay_kernels"] == 1
    assert counts["replay_kernels_dropped"] == 1


def test_reductions():
    def fn(x):
        return x.sum(1) + x.mean(0, keepdim=True).t().squeeze(1)
    counts = _check_replays(fn, _randn((5, 5)))
    assert counts["replay_kernels"] >= 3  # sum, mean, add


def test_matrix_products_and_softmax():
    def fn(a, b, bias, batch):
        h = torch.nn.functional.linear(a, b, bias)  # addmm
        return torch.softmax(h @ b, dim=-1).sum() + torch.bmm(batch, batch.transpose(1, 2)).sum()
    counts = _check_replays(fn, _randn((4, 6), (6, 6), (6,), (2, 3, 5)))
    assert counts["replay_kernels"] >= 4  # addmm, mm, _softmax, bmm


def test_a_training_step_replays_like_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    ref.load_state_dict(model.state_dict())
    model = model.npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = torch.zeros(4, 8, device="npu"), torch.zeros(4, dtype=torch.long, device="npu")

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        step()  # warm up: gradients exist before the capture
    torch.npu.current_stream().wait_stream(side)
    # Undo the warm-up step on the reference too.
    ref_loss = torch.nn.functional.cross_entropy(ref(x.cpu()), y.cpu())
    ref_loss.backward()
    ref_opt.step()
    ref_opt.zero_grad(set_to_none=False)
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        loss = step()
    for k in range(5):
        gen = torch.Generator().manual_seed(k)
        xb, yb = torch.randn(4, 8, generator=gen), torch.randint(0, 3, (4,), generator=gen)
        x.copy_(xb)
        y.copy_(yb)
        graph.replay()
        ref_loss = torch.nn.functional.cross_entropy(ref(xb), yb)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=False)
        torch.testing.assert_close(loss.cpu(), ref_loss.detach())
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach())


def test_replays_on_two_streams_at_once_leave_the_items_usable():
    # Replays of one graph on two streams at once race on its memory (their
    # results are not defined), but each item's prepared kernel is used by
    # one thread at a time: a later replay is right.
    x = torch.randn(64, device="npu")
    fn = lambda t: (t * 1.5 + 0.5).clamp_min(0.0) - 0.25  # noqa: E731
    fn(x)
    torch.npu.synchronize()
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = fn(x)
    streams = [torch.npu.Stream(), torch.npu.Stream()]
    for s in streams:
        s.wait_stream(torch.npu.current_stream())
    for _ in range(50):
        for s in streams:
            with torch.npu.stream(s):
                graph.replay()
    torch.npu.synchronize()
    value = torch.randn(64)
    x.copy_(value)
    graph.replay()
    assert torch.equal(out.cpu(), fn(value.npu()).cpu())
