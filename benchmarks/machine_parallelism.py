"""Does this machine run two threads in parallel, all the time?

    python benchmarks/machine_parallelism.py [--samples 200]

The npu benchmarks need two CPUs: the simulated device's work runs on a
thread of its own beside the host thread. This probe, with no torch in it,
times the same spin loop on one thread and on two threads at once (a small
C program, compiled with the system's C compiler), and prints how often
two threads took about as long as one (parallel) and how often about twice
as long (the VM gave its two vCPUs one CPU's time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile

PROBE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* spin(void* arg) {
  volatile uint64_t x = 0;
  const uint64_t n = *(const uint64_t*)arg;
  for (uint64_t i = 0; i < n; i++) x += i;
  return NULL;
}

int main(int argc, char** argv) {
  uint64_t n = 4000000;
  const int samples = atoi(argv[1]);
  for (int s = 0; s < samples; s++) {
    double t0 = now();
    spin(&n);
    double one = now() - t0;
    pthread_t a, b;
    t0 = now();
    pthread_create(&a, NULL, spin, &n);
    pthread_create(&b, NULL, spin, &n);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%f\n", (now() - t0) / one);
  }
  return 0;
}
"""


def probe(samples: int) -> list[float]:
    """Two-thread time / one-thread time of the same spin loop, per sample."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("machine_parallelism: no C compiler found (set CC)")
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
        with open(source, "w") as f:
            f.write(PROBE)
        subprocess.run([cc, "-O1", "-pthread", source, "-o", binary], check=True)
        out = subprocess.run([binary, str(samples)], check=True, capture_output=True, text=True).stdout
    return [float(line) for line in out.split()]


def summary(ratios: list[float]) -> str:
    """How many samples ran two threads in parallel, and how many on one CPU's time."""
    parallel = sum(r < 1.4 for r in ratios)
    serial = sum(r >= 1.7 for r in ratios)
    return (f"two threads / one thread over {len(ratios)} samples: median {statistics.median(ratios):.2f}; "
            f"parallel (< 1.4) {parallel}, one CPU's time (>= 1.7) {serial}, between {len(ratios) - parallel - serial}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    print(summary(probe(args.samples)))


if __name__ == "__main__":
    main()
