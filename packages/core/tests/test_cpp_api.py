"""Core's C++ runtime is usable from other C++ code (plugins, libtorch
programs): find_package(TorchNPUCore) and link torch_npu::torch_npu_core."""

from __future__ import annotations

import subprocess
import textwrap

import pytest
import torch

import torch_npu
from torch_npu.utils.cmake_build import CMakeBuildError, build_cmake_project

PROGRAM = r"""
#include <cstdio>

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUEvent.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUStream.h"

int main() {
  c10_npu::set_device(1);
  const c10_npu::NPUStream stream = c10_npu::getStreamFromPool(/*isHighPriority=*/true);
  auto* allocator = c10_npu::NPUCachingAllocator::get();
  void* ptr = allocator->raw_alloc_with_stream(1 << 20, stream.stream());
  // ATen asks the hooks which device a pointer belongs to (at::from_blob).
  const auto ptr_device = at::detail::getPrivateUse1Hooks().getDeviceFromPtr(
      static_cast<char*>(ptr) + 100);
  c10_npu::NPUEvent event(ACL_EVENT_TIME_LINE);
  event.record(stream);
  event.synchronize();
  allocator->raw_delete(ptr);
  const auto stats = c10_npu::NPUCachingAllocator::getDeviceStats(1);
  std::printf("devices=%d stream_device=%d ptr_device=%d priority=%d reserved=%lld\n",
              static_cast<int>(c10_npu::device_count()), static_cast<int>(stream.device_index()),
              static_cast<int>(ptr_device.index()),
              stream.priority(), static_cast<long long>(stats.reserved_bytes[0].current));
  return 0;
}
"""

CMAKELISTS = """
cmake_minimum_required(VERSION 3.22)
project(npu_cpp_user CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(TorchNPUCore REQUIRED)
add_executable(npu_cpp_user main.cpp)
target_link_libraries(npu_cpp_user PRIVATE torch_npu::torch_npu_core)
"""


# torch_npu::init_npu and finalize_npu (libs/init_npu.h): each case prints
# "<case>: ok" or the first line of its error.
INIT_PROGRAM = r"""
#include <cstdio>
#include <string>

#include <ATen/ATen.h>

#include "libs/init_npu.h"
#include "npu/NPUFunctions.h"

template <typename Case>
void attempt(const char* name, Case run_case) {
  try {
    run_case();
    std::printf("%s: ok\n", name);
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    std::printf("%s: %s\n", name, message.substr(0, message.find('\n')).c_str());
  }
}

int main() {
  attempt("not npu", [] { torch_npu::init_npu("cuda:0"); });
  attempt("not a device", [] { torch_npu::init_npu("npu:first"); });
  attempt("out of range", [] { torch_npu::init_npu("npu:99"); });
  attempt("cpu device", [] { torch_npu::init_npu(c10::Device(c10::kCPU)); });
  attempt("init", [] { torch_npu::init_npu("npu:2"); });
  std::printf("current device: %d\n", static_cast<int>(c10_npu::current_device()));
  attempt("index", [] { torch_npu::init_npu(1); });
  std::printf("current device: %d\n", static_cast<int>(c10_npu::current_device()));
  attempt("core kernels", [] {
    const auto x = at::full({2, 3}, 1.5, at::TensorOptions().device("npu:1"));
    TORCH_CHECK(x.t().cpu().equal(at::full({3, 2}, 1.5)), "wrong values");
  });
  attempt("ops kernel", [] {
    const auto x = at::ones({4}, at::TensorOptions().device("npu"));
    (void)at::mul(x, x);
  });
  attempt("finalize", [] { torch_npu::finalize_npu(); });
  attempt("finalize again", [] { torch_npu::finalize_npu(); });
  attempt("after finalize", [] { (void)at::ones({4}, at::TensorOptions().device("npu")); });
  attempt("init after finalize", [] { torch_npu::init_npu(0); });
  return 0;
}
"""


def _build(tmp_path, program: str, target: str):
    """Configures and builds `program` as `target` against the installed
    package; returns the executable."""
    (tmp_path / "main.cpp").write_text(program)
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent(CMAKELISTS).replace("npu_cpp_user", target))
    return build_cmake_project(tmp_path, tmp_path / "build",
                               [torch_npu.cmake_prefix_path, torch.utils.cmake_prefix_path], target)


def test_libtorch_program_links_core_runtime(tmp_path):
    program = _build(tmp_path, PROGRAM, "npu_cpp_user")
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "devices=8 stream_device=1 ptr_device=1 priority=-1 reserved=2097152"


def test_init_npu_and_finalize_npu(tmp_path):
    program = _build(tmp_path, INIT_PROGRAM, "npu_init_user")
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    results = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    assert results["not npu"] == ("torch_npu::init_npu: 'cuda:0' is not an npu device; "
                                  "expected 'npu' or 'npu:<index>' such as 'npu:0'.")
    assert results["not a device"].startswith(
        "torch_npu::init_npu: 'npu:first' is not a device string; expected 'npu' or 'npu:<index>'")
    assert results["out of range"].startswith("Invalid NPU device index npu:99: this process sees 8")
    assert results["cpu device"].startswith("torch_npu::init_npu: cpu is not an npu device")
    assert results["init"] == "ok"
    assert results["index"] == "ok"
    assert [line for line in run.stdout.splitlines() if line.startswith("current device")] == [
        "current device: 2", "current device: 1"]
    assert results["core kernels"] == "ok"
    # Note [The C++ runtime without Python]: this program does not link
    # torch-npu-ops' library, so it has core's kernels only.
    assert results["ops kernel"].startswith("The operator 'aten::mul.out' has no npu kernel")
    assert "a C++ program gets them by linking torch_npu::torch_npu_ops" in results["ops kernel"]
    assert results["finalize"] == "ok"
    assert results["finalize again"] == "ok"
    for case in ("after finalize", "init after finalize"):
        assert results[case].startswith(
            "The NPU runtime of this process was finalized (torch_npu::finalize_npu)"), case


def test_a_failing_cmake_step_raises_with_cmake_output(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.22)\nproject(p CXX)\n"
                                             "find_package(NoSuchPackageForNpu REQUIRED)\n")
    with pytest.raises(CMakeBuildError, match=r"configuring .* failed \(exit code 1\)(.|\n)*NoSuchPackageForNpu"):
        build_cmake_project(tmp_path, tmp_path / "build", [torch_npu.cmake_prefix_path], "p")
