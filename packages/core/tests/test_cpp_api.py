"""Core's C++ runtime is usable from other C++ code (plugins, libtorch
programs): find_package(TorchNPUCore) and link torch_npu::torch_npu_core."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import torch

import torch_npu

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


def test_libtorch_program_links_core_runtime(tmp_path):
    (tmp_path / "main.cpp").write_text(PROGRAM)
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent(CMAKELISTS))
    cmake = shutil.which("cmake", path=f"{sys.prefix}/bin") or shutil.which("cmake")
    assert cmake, "cmake is a test requirement (./dev installs it)"
    prefix = f"{torch_npu.cmake_prefix_path};{torch.utils.cmake_prefix_path}"
    build = tmp_path / "build"
    configure = subprocess.run(
        [cmake, "-S", str(tmp_path), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_BUILD_TYPE=Release"] + (["-G", "Ninja"] if shutil.which("ninja", path=f"{sys.prefix}/bin") else []),
        capture_output=True, text=True,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    compiled = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    run = subprocess.run([str(build / "npu_cpp_user")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "devices=8 stream_device=1 ptr_device=1 priority=-1 reserved=2097152"
