"""Collectives on tensors that are not whole contiguous buffers.

The list forms of all_gather (outputs), reduce_scatter (inputs) and
all_to_all copy their tensors through a packed buffer, so any strides do, as
with gloo and NCCL (columns of a matrix, say); the forms HCCL reads or writes
in place refuse non-contiguous tensors with a clear error. Views with a
storage offset and empty tensors work everywhere, leaving the rest of the
storage alone.
"""

from __future__ import annotations

from test_process_group_hccl import run_ranks


def test_strided_list_forms_views_and_empty_tensors(tmp_path):
    outputs = run_ranks(tmp_path, """
        def check(name, got, expected):
            assert torch.equal(got.cpu(), expected), (name, got, expected)

        # all_gather into the columns of a matrix.
        buf = torch.zeros(3, world, device="npu")
        dist.all_gather(list(buf.unbind(1)), torch.arange(3.0, device="npu") + 10 * rank)
        check("all_gather columns", buf, torch.stack([torch.arange(3.0) + 10 * r for r in range(world)], 1))
        # ... and complex columns (carried as pairs of reals).
        cbuf = torch.zeros(2, world, dtype=torch.complex64, device="npu")
        mine = torch.complex(torch.full((2,), float(rank)), torch.ones(2))
        dist.all_gather(list(cbuf.unbind(1)), mine.npu())
        check("complex columns", cbuf, torch.stack([torch.complex(torch.full((2,), float(r)), torch.ones(2))
                                                    for r in range(world)], 1))
        # reduce_scatter from the columns of a matrix.
        src = (torch.arange(3.0 * world).reshape(3, world) + 10 * rank).npu()
        out = torch.empty(3, device="npu")
        dist.reduce_scatter(out, list(src.unbind(1)))
        expected = sum(torch.arange(3.0 * world).reshape(3, world)[:, rank] + 10 * r for r in range(world))
        check("reduce_scatter columns", out, expected)
        # all_to_all between columns.
        src = (torch.arange(3.0 * world).reshape(3, world) + 100 * rank).npu()
        dst = torch.zeros(3, world, device="npu")
        dist.all_to_all(list(dst.unbind(1)), list(src.unbind(1)))
        check("all_to_all columns", dst,
              torch.stack([torch.arange(3.0 * world).reshape(3, world)[:, rank] + 100 * r for r in range(world)], 1))

        # In-place forms: a clear refusal, before anything is queued.
        for name, call in [("allreduce", lambda t: dist.all_reduce(t)),
                           ("broadcast", lambda t: dist.broadcast(t, 0)),
                           ("send", lambda t: dist.send(t, (rank + 1) % world))]:
            try:
                call(torch.zeros(4, 6, device="npu").t())
                raise AssertionError(name + " accepted a transposed tensor")
            except ValueError as e:
                assert "must be contiguous" in str(e), e

        # Views with a storage offset: only the view changes.
        base = torch.full((10,), -1.0, device="npu")
        view = base[3:7]
        view.fill_(rank + 1.0)
        dist.all_reduce(view)
        check("offset all_reduce", base, torch.tensor([-1.0] * 3 + [world * (world + 1) / 2] * 4 + [-1.0] * 3))
        base = torch.full((2 * world + 2,), -1.0, device="npu")
        dist.all_gather_into_tensor(base[1:-1], torch.full((2,), float(rank), device="npu"))
        check("offset all_gather_into_tensor", base,
              torch.tensor([-1.0] + [float(r) for r in range(world) for _ in range(2)] + [-1.0]))
        # Empty tensors.
        empty = torch.empty(0, device="npu")
        dist.all_reduce(empty)
        parts = [torch.empty(0, device="npu") for _ in range(world)]
        dist.all_gather(parts, empty)
        dist.broadcast(empty, 0)
        gathered = torch.empty(0, device="npu")
        dist.all_gather_into_tensor(gathered, empty)
        assert empty.numel() == 0 and all(p.numel() == 0 for p in parts) and gathered.numel() == 0
        print("layouts ok")
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.split() == ["layouts", "ok"], out
