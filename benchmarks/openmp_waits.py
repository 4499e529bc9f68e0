"""How the device's OpenMP workers wait, seen in an eager training step
(Note [OpenMP teams of the host and device threads], core's
csrc/npu/OpenMPThreads.h): compile_npu.py's small-transformer step, eager,
in a fresh process per regime, runs alternating: "always" (the host team's
release at every launch, TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=1), "default"
(released while the host thread waits for the device, Note [Release the
team of a thread that waits for the device]), "never" (the throttle only,
TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=0), "libgomp" (neither,
TORCH_NPU_OPENMP_WAITS=0).

    .venv/bin/python benchmarks/openmp_waits.py [--regimes fresh,hostop,...] [--rounds N]

Regimes: fresh (nothing else); hostop (20 parallel CPU ops on the host
thread first); hostop_each (one more before every step); pointwise
(compile_npu.py's pointwise section first: its Inductor C++ kernel runs
parallel regions on the host thread, and its compilation runs the C++
compiler in other processes, so the waits stay throttled for the first
second of launches after it, which this regime times; add --no-throttle to
see the team's release alone); passive
(OMP_WAIT_POLICY=passive); busy (one competing `while 1: pass` process).
--no-throttle keeps the waits from being throttled however busy the CPUs
are (a testing switch): on a shared machine it shows in the context
switches whether the device's workers spin, though the wall times are then
those of spinning on busy CPUs.
Each line: the best and median step time of 7 runs of 5 steps, and the CPU
time and context switches per step of the process's threads named npu*
(the stream's worker and its OpenMP worker; libgomp's workers take their
creator's name). Other load on the machine moves the wall times: compare
the CPU columns too, and mind the load average printed with each line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REGIMES = ("fresh", "hostop", "hostop_each", "pointwise", "passive", "busy")


def _thread_cpu() -> dict[int, tuple[str, float, int]]:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
        except FileNotFoundError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick, switches)
    return out


def child(regime: str, no_throttle: bool) -> None:
    import contextlib
    import io

    import torch
    import torch_npu

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compile_npu import Block, pointwise

    if no_throttle:
        torch_npu._C._set_cpu_contention_for_testing(0)
    a, b = torch.randn(4 << 20), torch.randn(4 << 20)
    if regime.startswith("hostop"):
        for _ in range(20):
            a.add(b)
    elif regime == "pointwise":
        with contextlib.redirect_stdout(io.StringIO()):
            pointwise()
    torch.manual_seed(0)
    model = Block().to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, 128, device="npu")

    def step() -> None:
        if regime == "hostop_each":
            a.add(b)
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if regime == "busy" else None
    try:
        for _ in range(3):
            step()
        torch.npu.synchronize()
        before, times = _thread_cpu(), []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(5):
                step()
            torch.npu.synchronize()
            times.append((time.perf_counter() - start) / 5)
        after = _thread_cpu()
    finally:
        if busy is not None:
            busy.kill()
    cpu = switches = 0.0
    for tid, (name, used, count) in after.items():
        if name.startswith("npu"):
            _, used_before, count_before = before.get(tid, (name, 0.0, 0))
            cpu += used - used_before
            switches += count - count_before
    print(f"{min(times) * 1e3:8.2f} {statistics.median(times) * 1e3:8.2f} "
          f"{cpu / 35 * 1e3:8.2f} {switches / 35:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regimes", default=",".join(REGIMES))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-throttle", action="store_true",
                        help="never throttle the waits (a testing switch; see above)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.no_throttle)
        return
    print(f"{os.cpu_count()} CPUs; eager training step (ms): best, median; device threads' "
          "CPU ms and context switches per step")
    for _ in range(args.rounds):
        for regime in args.regimes.split(","):
            for waits, release, label in (("1", "1", "always  "), ("1", None, "default "), ("1", "0", "never   "),
                                          ("0", "0", "libgomp ")):
                env = dict(os.environ, TORCH_NPU_OPENMP_WAITS=waits)
                env.pop("TORCH_NPU_OPENMP_RELEASE_HOST_TEAM", None)
                if release is not None:
                    env["TORCH_NPU_OPENMP_RELEASE_HOST_TEAM"] = release
                if regime == "passive":
                    env["OMP_WAIT_POLICY"] = "passive"
                flags = ["--no-throttle"] if args.no_throttle else []
                out = subprocess.run([sys.executable, __file__, "--child", regime, *flags], env=env,
                                     capture_output=True, text=True, check=True).stdout.split()
                print(f"  {regime:<12} {label}  {out[0]:>8} {out[1]:>8}   cpu {out[2]:>7} "
                      f"ctxsw {out[3]:>7}   (load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
