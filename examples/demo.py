"""A tour of torch-npu: devices, copies, streams and events, memory stats.

Run with ``./dev demo`` (or ``.venv/bin/python examples/demo.py``). Without an
Ascend NPU it runs on torch-npu's embedded simulator. It uses only the public
API of Ascend's torch_npu (the same names as torch.cuda), so it runs
unchanged on a real NPU.
"""

import time

import torch
import torch_npu

MiB = 1 << 20


def section(title):
    print()
    print(f"== {title} " + "=" * max(0, 66 - len(title)))


def mib(n_bytes):
    return f"{n_bytes / MiB:9.2f} MiB"


def check(label, ok):
    print(f"  {label:<52} {'ok' if ok else 'MISMATCH'}")
    if not ok:
        raise SystemExit(f"demo failed: {label}")


def show_devices():
    section("Devices")
    print(f"  torch {torch.__version__}, torch_npu {getattr(torch_npu, '__version__', '?')}")
    print(f"  torch.npu.is_available(): {torch.npu.is_available()}")
    count = torch.npu.device_count()
    print(f"  torch.npu.device_count(): {count}")
    for i in range(count):
        props = torch.npu.get_device_properties(i)
        print(f"  npu:{i}  {torch.npu.get_device_name(i)}  total memory {mib(props.total_memory)}")
    return count


def copies(count):
    section("Copies: host -> device, device -> host, device -> device")
    x = torch.randn(256, 256)

    d = x.npu()  # H2D
    print(f"  x.npu() -> device {d.device}, shape {tuple(d.shape)}, dtype {d.dtype}")
    check("H2D then D2H (x.npu().cpu()) round-trips", torch.equal(d.cpu(), x))

    h2d = torch.empty(256, 256, device="npu")
    h2d.copy_(x)  # H2D into an existing device tensor
    check("H2D with copy_ into torch.empty(device='npu')", torch.equal(h2d.cpu(), x))

    d2d = torch.empty_like(d)
    d2d.copy_(d)  # D2D on the same device
    check("D2D on npu:0 (empty_like + copy_)", torch.equal(d2d.cpu(), x))

    if count > 1:
        other = d.to("npu:1")  # D2D between devices
        print(f"  d.to('npu:1') -> device {other.device}")
        check("D2D npu:0 -> npu:1", torch.equal(other.cpu(), x))
    else:
        print("  (one device: skipping the copy between devices)")


def streams_and_events():
    section("Streams and events")
    n = 4 * MiB // 4  # 4 MiB of float32
    src = torch.arange(n, dtype=torch.float32).npu()
    dst = torch.empty_like(src)

    side = torch.npu.Stream()
    copied = torch.npu.Event()
    print(f"  default stream: {torch.npu.current_stream()}")
    print(f"  side stream:    {side}")

    # The side stream must not start before src's H2D copy on the default
    # stream is done, and the default stream must not read dst before the
    # side stream has written it: two waits, each ordered by an event.
    ready = torch.npu.Event()
    ready.record()  # on the default stream
    side.wait_event(ready)
    with torch.npu.stream(side):
        print(f"  inside torch.npu.stream(side): current stream is {torch.npu.current_stream()}")
        dst.copy_(src)  # D2D, enqueued on the side stream
        copied.record()  # on the current stream, i.e. side
    torch.npu.current_stream().wait_event(copied)

    result = dst.cpu()  # D2H on the default stream, after the side copy
    check("copy on a side stream, ordered by an event", torch.equal(result, src.cpu()))
    print(f"  event.query() after the wait: {copied.query()}")

    section("Event timing")
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    repeats = 8
    t0 = time.perf_counter()
    start.record()
    for _ in range(repeats):
        dst.copy_(src)
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    ms = start.elapsed_time(end)
    moved = repeats * src.numel() * src.element_size()
    print(f"  {repeats} D2D copies of {mib(src.numel() * src.element_size()).strip()}: "
          f"{ms:.3f} ms by events ({wall_ms:.3f} ms wall clock)")
    if ms > 0:
        print(f"  device-to-device bandwidth: {moved / (ms / 1e3) / 2**30:.2f} GiB/s")
    torch.npu.synchronize()


def memory_stats():
    section("Memory (caching allocator)")

    def report(label):
        free, total = torch.npu.mem_get_info()
        print(f"  {label:<28} allocated {mib(torch.npu.memory_allocated())}"
              f"  reserved {mib(torch.npu.memory_reserved())}"
              f"  peak {mib(torch.npu.max_memory_allocated())}")
        return free, total

    report("start")
    blocks = [torch.empty(16 * MiB // 4, device="npu") for _ in range(4)]
    report("after 4 x 16 MiB")
    del blocks
    report("after freeing them")
    print("  (freed blocks stay reserved by the caching allocator for reuse)")
    free, total = torch.npu.mem_get_info()
    print(f"  torch.npu.mem_get_info(): free {mib(free)} of {mib(total)}")


def train_small_model(steps=30):
    section("Training a small CNN on npu (torch-npu-ops)")
    try:
        import torch_npu.ops  # noqa: F401
    except ImportError as error:
        print(f"  skipped: {error}")
        return
    import time

    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, 10),
    ).npu()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # A learnable synthetic task: the label is the brightest of 10 patches.
    g = torch.Generator().manual_seed(0)
    images = torch.randn(64, 3, 20, 20, generator=g)
    labels = images[:, 0].reshape(64, 10, 40).mean(-1).argmax(-1)
    images, labels = images.npu(), labels.npu()
    torch.npu.reset_peak_memory_stats()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == 1:
            torch.npu.synchronize()
            elapsed = (time.perf_counter() - start) / step
            print(f"  step {step:3d}  loss {loss.item():.4f}  {elapsed * 1e3:6.2f} ms/step"
                  f"  allocated {mib(torch.npu.memory_allocated())}"
                  f"  peak {mib(torch.npu.max_memory_allocated())}")
    accuracy = (model(images).argmax(-1) == labels).float().mean().item()
    print(f"  training accuracy after {steps} steps: {accuracy:.0%}")
    print(f"  ops by execution path: {torch_npu.ops.execution_counters()}")


def main():
    print("torch-npu demo")
    if not torch.npu.is_available():
        raise SystemExit("torch.npu is not available")
    count = show_devices()
    copies(count)
    streams_and_events()
    memory_stats()
    train_small_model()
    torch.npu.synchronize()
    section("Done")
    print("  all checks passed; details: python -m torch_npu.utils.collect_env")


if __name__ == "__main__":
    main()
