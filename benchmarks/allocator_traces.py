"""Realistic allocation traces replayed on the npu caching allocator.

    python benchmarks/allocator_traces.py [--quick | --soak STEPS]

Each trace runs in a fresh process per allocator setting (PYTORCH_NPU_ALLOC_CONF)
and allocates only (no kernels), so the figures are the allocator's:

- llm: training steps of a small transformer whose sequence length changes
  every step (activations kept for the backward pass, freed in reverse,
  attention scores quadratic in the length);
- kv-cache: inference whose key/value caches grow by one token at a time
  (each step allocates the longer cache and frees the shorter one), up to
  256 tokens of batch 1 (peak 8 MiB), and kv-cache-large, up to 1024 tokens
  of batch 4 (8 caches of 16 MiB, peak 143 MiB);
- small: many small tensors of random sizes freed in random order.

Reported per trace and setting: peak reserved / peak requested bytes (how
much the allocator holds beyond what tensors asked for; the memory issue's
target with expandable segments is <= 1.05), the floor of that ratio for
memory taken in 2 MiB granules (peak requested rounded up to 2 MiB: what a
trace whose peak is a few MiB cannot go below), allocations per second, and
the soak: reserved bytes after 10% and after 100% of the steps (flat means
no growth). Expandable segments: Note [Expandable segments] in
NPUCachingAllocator.h.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CODE = r"""
import json, random, sys, time
import torch, torch_npu
trace, steps = sys.argv[1], int(sys.argv[2])
rng = random.Random(0)
MiB = 1 << 20
dev = "npu"

def empty(nbytes):
    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=dev)

allocs = 0
reserved_at = {}
start = time.perf_counter()
if trace == "llm":
    hidden, heads, layers, batch = 512, 8, 6, 4
    weights = [empty(hidden * hidden * 4 * 4) for _ in range(layers)]
    for step in range(steps):
        seq = rng.randint(128, 1024)
        saved = []
        for _ in range(layers):
            saved.append(empty(batch * seq * hidden * 4))              # layer input
            saved.append(empty(batch * heads * seq * seq * 2))         # attention scores (bf16)
            saved.append(empty(batch * seq * hidden * 4 * 4))          # MLP activation
            allocs += 3
        grads = []
        for t in reversed(saved):
            grads.append(empty(t.numel() // 2))
            allocs += 1
            del t
            if len(grads) > 2:
                grads.pop(0)
        saved.clear()
        grads.clear()
        if step + 1 in (steps // 10, steps):
            reserved_at[step + 1] = torch.npu.memory_reserved()
elif trace in ("kv-cache", "kv-cache-large"):
    hidden, layers = 1024, 8
    batch, tokens = (1, 256) if trace == "kv-cache" else (4, 1024)
    for step in range(steps):
        caches = [empty(2 * batch * hidden * 2) for _ in range(layers)]
        for token in range(2, tokens + 1):
            for i in range(layers):
                longer = empty(2 * batch * token * hidden * 2)
                caches[i] = longer
                allocs += 1
        caches.clear()
        if step + 1 in (max(steps // 10, 1), steps):
            reserved_at[step + 1] = torch.npu.memory_reserved()
elif trace == "small":
    live = []
    for step in range(steps):
        for _ in range(200):
            live.append(empty(rng.randint(1 << 10, 100 << 10)))
            allocs += 1
        rng.shuffle(live)
        del live[: len(live) // 2]
        if step + 1 in (steps // 10, steps):
            reserved_at[step + 1] = torch.npu.memory_reserved()
torch.npu.synchronize()
elapsed = time.perf_counter() - start
stats = torch.npu.memory_stats()
print(json.dumps({
    "peak_reserved": stats["reserved_bytes.all.peak"],
    "peak_requested": stats["requested_bytes.all.peak"],
    "allocs_per_s": allocs / elapsed,
    "reserved_at": reserved_at,
}))
"""

SETTINGS = {
    "default": "",
    "max_split_size_mb:128": "max_split_size_mb:128",
    "expandable_segments": "expandable_segments:True",
}


GRANULE = 2 << 20  # segments and expandable chunks are multiples of 2 MiB


def run(trace: str, steps: int, conf: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env["PYTORCH_NPU_ALLOC_CONF"] = conf
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE, trace, str(steps)],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--soak", type=int, metavar="STEPS",
                        help="only the llm trace, this many steps (10000 for the memory issue's soak), "
                             "default allocator and expandable segments")
    args = parser.parse_args()
    if args.soak:
        print(f"llm soak of {args.soak} steps")
        for name in ("default", "expandable_segments"):
            r = run("llm", args.soak, SETTINGS[name])
            at = {int(k): int(v) >> 20 for k, v in r["reserved_at"].items()}
            print(f"{name:24s} reserved/requested {r['peak_reserved'] / max(r['peak_requested'], 1):.3f}  "
                  f"reserved at step {min(at)}: {at[min(at)]} MiB, at step {max(at)}: {at[max(at)]} MiB  "
                  f"allocs/s {r['allocs_per_s']:.0f}")
        return
    steps = {"llm": 100, "kv-cache": 4, "kv-cache-large": 1, "small": 1000} if args.quick else \
        {"llm": 1000, "kv-cache": 20, "kv-cache-large": 3, "small": 10000}
    print(f"{'trace':16s}{'setting':24s}{'reserved/requested':>20s}{'2MiB floor':>12s}{'allocs/s':>12s}"
          "  soak: reserved at 10% -> 100%")
    for trace, n in steps.items():
        for name, conf in SETTINGS.items():
            r = run(trace, n, conf)
            ratio = r["peak_reserved"] / max(r["peak_requested"], 1)
            soak = " -> ".join(f"{int(v) / (1 << 20):.0f} MiB" for _, v in sorted(r["reserved_at"].items(),
                                                                               key=lambda kv: int(kv[0])))
            # The least any allocator mapping 2 MiB granules can reserve.
            floor = -(-r["peak_requested"] // GRANULE) * GRANULE / max(r["peak_requested"], 1)
            print(f"{trace:16s}{name:24s}{ratio:>20.3f}{floor:>12.3f}{r['allocs_per_s']:>12.0f}  {soak}")
    print("target with expandable segments: reserved/requested <= 1.05 on every trace")


if __name__ == "__main__":
    main()
