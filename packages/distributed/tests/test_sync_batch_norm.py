"""torch.nn.SyncBatchNorm on npu over the hccl backend.

SyncBatchNorm is made of five aten ops with CUDA kernels only
(batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt,
batch_norm_backward_reduce, batch_norm_backward_elemt); torch-npu-ops
composes them of npu ops (SyncBatchNormKernels.cpp). A SyncBatchNorm over
the ranks' pieces of a batch must compute what one BatchNorm computes over
the whole batch in one process (gloo cannot be the reference: torch's
SyncBatchNorm refuses CPU modules).
"""

from __future__ import annotations

from test_process_group_hccl import run_ranks


def test_sync_batch_norm_matches_batch_norm_over_the_whole_batch(tmp_path):
    # Uneven pieces (rank 0 has more rows), an empty piece, 2-D and 4-D
    # inputs, channels-last, no affine parameters and bfloat16.
    outputs = run_ranks(tmp_path, """
        import copy

        def compare(rows, shape, dtype=torch.float32, affine=True, channels_last=False):
            torch.manual_seed(0)
            norm = torch.nn.BatchNorm2d if len(shape) == 3 else torch.nn.BatchNorm1d
            reference = norm(shape[0], affine=affine, momentum=0.3)
            if affine:
                with torch.no_grad():
                    reference.weight.uniform_(0.5, 1.5)
                    reference.bias.uniform_(-1, 1)
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(
                torch.nn.Sequential(copy.deepcopy(reference))).npu().to(dtype)
            g = torch.Generator().manual_seed(1)
            full = torch.randn(sum(rows), *shape, generator=g) * 3 + 1
            grad = torch.randn(sum(rows), *shape, generator=g)
            start = sum(rows[:rank])
            mine = slice(start, start + rows[rank])
            x = full[mine].npu().to(dtype)
            if channels_last:
                x = x.to(memory_format=torch.channels_last)
            x.requires_grad_()
            full.requires_grad_()
            y = model(x)
            (y.float() * grad[mine].npu()).sum().backward()
            expected = reference(full)
            (expected * grad).sum().backward()
            # torch gives a rank without rows no input gradient.
            x_grad = x.grad if x.grad is not None else torch.zeros_like(x)
            assert y.dtype == dtype and x_grad.dtype == dtype, (y.dtype, x_grad.dtype)
            assert model[0].running_mean.dtype == dtype
            # Each rank's weight and bias gradients are its share (DDP sums them).
            pairs = [("output", y, expected[mine]), ("input gradient", x_grad, full.grad[mine]),
                     ("running mean", model[0].running_mean, reference.running_mean),
                     ("running var", model[0].running_var, reference.running_var)]
            if affine:
                for p in (model[0].weight, model[0].bias):
                    if p.grad is None:  # a rank with no rows has no share
                        p.grad = torch.zeros_like(p)
                    dist.all_reduce(p.grad)
                pairs += [("weight gradient", model[0].weight.grad, reference.weight.grad),
                          ("bias gradient", model[0].bias.grad, reference.bias.grad)]
            tolerance = 1e-4 if dtype == torch.float32 else 5e-2
            for name, got, want in pairs:
                worst = (got.detach().cpu().float() - want.detach().float()).abs().max().item() if want.numel() else 0.0
                assert worst < tolerance, (rows, shape, dtype, name, worst)

        compare([4, 2], (5,))
        compare([3, 3], (3, 4, 5))
        compare([2, 2], (3, 4, 5), affine=False)
        compare([2, 4], (3, 4, 5), channels_last=True)
        compare([4, 0], (5,))
        compare([6, 4], (5,), dtype=torch.bfloat16)
        print("sync batch norm ok")
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.split() == ["sync", "batch", "norm", "ok"], out


def test_ddp_with_sync_batch_norm_matches_single_process_training(tmp_path):
    outputs = run_ranks(tmp_path, """
        import copy
        from torch.nn.parallel import DistributedDataParallel as DDP

        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                        torch.nn.Tanh(), torch.nn.Linear(8, 2))
        model = DDP(torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(reference)).npu(),
                    device_ids=[rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        for step in range(3):
            x = torch.randn(8, 6, generator=g)
            y = torch.randn(8, 2, generator=g)
            ref_opt.zero_grad()
            torch.nn.functional.mse_loss(reference(x), y).backward()
            ref_opt.step()
            half = slice(4 * rank, 4 * rank + 4)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[half].npu()), y[half].npu()).backward()
            opt.step()
        ours = model.module.state_dict()
        worst = max((ours[name].detach().cpu().float() - value.float()).abs().max().item()
                    for name, value in reference.state_dict().items())
        print(worst < 1e-5, worst)
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.startswith("True "), out
