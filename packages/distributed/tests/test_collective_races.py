"""The simulator's stream race detector sees collectives (Note [Stream race detection]).

A collective reads its send buffer and writes its receive buffer as device
work on the process group's stream; a tensor written on another stream
without an order before the collective is reported at the collective's
launch, naming both; with ``wait_stream`` it is silent.
"""

from __future__ import annotations

from test_process_group_hccl import run_ranks


def test_a_collective_racing_with_a_kernel_is_reported(tmp_path):
    outputs = run_ranks(tmp_path, """
        from torch_npu.npu import _race_check
        t = torch.full((1000,), 1.0, device="npu")
        dist.all_reduce(t)
        t.add_(1)
        torch.npu.synchronize()  # first calls done (they wait for their kernels)
        _race_check.set_enabled(True)
        side = torch.npu.Stream()
        with torch.npu.stream(side):
            t.add_(1)
        torch.npu.current_stream().wait_stream(side)
        dist.all_reduce(t)  # ordered after the write: silent
        torch.npu.synchronize()
        print(t[0].item())
        with torch.npu.stream(side):
            t.add_(1)
        try:
            dist.all_reduce(t)  # nothing orders it after the write on `side`
        except RuntimeError as e:
            print(str(e).splitlines()[0])
        torch.npu.synchronize()
        dist.destroy_process_group()
    """)
    for out in outputs:
        ordered, race = out.splitlines()
        assert ordered == "8.0"
        assert "NPU stream race (read-after-write)" in race
        assert "'HcclAllReduce'" in race and "'aten::add_'" in race
