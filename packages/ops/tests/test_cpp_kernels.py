"""A C++ program (no Python) that links torch_npu::torch_npu_ops
(find_package(TorchNPUOps)) runs ATen ops on npu with this package's
kernels, from torch_npu::init_npu on (Note [The C++ runtime without Python])."""

from __future__ import annotations

import subprocess

import torch_npu.ops
from torch_npu.utils.cmake_build import build_cmake_project

PROGRAM = r"""
#include <cstdio>

#include <ATen/ATen.h>

#include "libs/init_npu.h"

// Prints "<name>: ok" when the npu result equals the CPU's.
void check(const char* name, const at::Tensor& npu, const at::Tensor& cpu) {
  const bool same = npu.device().is_privateuseone() && npu.cpu().allclose(cpu, 1e-5, 1e-6);
  std::printf("%s: %s\n", name, same ? "ok" : "mismatch");
}

int main() {
  try {
    torch_npu::init_npu("npu:1");
    const at::Tensor a = at::arange(12, at::kFloat).reshape({3, 4});
    const at::Tensor b = at::linspace(-1, 1, 12).reshape({3, 4});
    const at::Tensor na = a.to(at::Device("npu:1"));
    const at::Tensor nb = b.to(at::Device("npu:1"));
    check("pointwise and reduction", (na * nb + na).sum(1), (a * b + a).sum(1));
    check("matmul", at::matmul(na, nb.t()), at::matmul(a, b.t()));
    check("softmax", at::softmax(na, 1), at::softmax(a, 1));
    check("data-dependent shape", at::nonzero(na > 3), at::nonzero(a > 3));
    check("generic executor", at::cumsum(nb, 0), at::cumsum(b, 0));
    torch_npu::finalize_npu();
  } catch (const c10::Error& e) {
    std::printf("error: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
"""

CMAKELISTS = """
cmake_minimum_required(VERSION 3.22)
project(npu_kernels_user CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(TorchNPUOps REQUIRED)
add_executable(npu_kernels_user main.cpp)
target_link_libraries(npu_kernels_user PRIVATE torch_npu::torch_npu_ops)
"""


def test_cpp_program_linking_the_ops_library_runs_npu_kernels(tmp_path):
    (tmp_path / "main.cpp").write_text(PROGRAM)
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    # Only this package's prefix: its config finds core's beside it.
    program = build_cmake_project(tmp_path, tmp_path / "build", [torch_npu.ops.cmake_prefix_path],
                                  "npu_kernels_user")
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "pointwise and reduction: ok",
        "matmul: ok",
        "softmax: ok",
        "data-dependent shape: ok",
        "generic executor: ok",
    ]
