// torch_npu._C: the Python bindings of the npu runtime. The public API is the
// Python package torch_npu.npu (torch.npu); these are its private building
// blocks and keep to plain values (ints, tuples, dicts).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "aten/NPUFormat.h"
#include "python/Activity.h"
#include "python/ActivityHostOps.h"
#include "python/Graphs.h"
#include "python/Ipc.h"
#include "python/MemorySnapshot.h"
#include "python/Mstx.h"
#include "python/Memory.h"
#include "python/RaceCheck.h"
#include "npu/impl/AclInterface.h"
#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGenerator.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUHostAllocator.h"
#include "npu/SyncDebugMode.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/OpenMPThreads.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

// Clock of the simulated device, for torch.npu._sleep(cycles).
constexpr int64_t kSimulatedCyclesPerMs = 1000000;

using c10::CachingAllocator::DurationStat;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;

py::dict stat_dict(const Stat& stat) {
  py::dict d;
  d["current"] = stat.current;
  d["peak"] = stat.peak;
  d["allocated"] = stat.allocated;
  d["freed"] = stat.freed;
  return d;
}

py::dict stat_array_dict(const StatArray& stats) {
  static const char* const kTypes[] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (size_t i = 0; i < stats.size(); ++i) {
    d[kTypes[i]] = stat_dict(stats[i]);
  }
  return d;
}

py::dict duration_dict(const DurationStat& stat) {
  py::dict d;
  d["total"] = stat.total;
  d["max"] = stat.max;
  d["min"] = stat.min;
  d["count"] = stat.count;
  return d;
}

// The nested form of torch.cuda.memory_stats (flattened in Python).
py::dict memory_stats(c10::DeviceIndex device) {
  const auto stats = NPUCachingAllocator::getDeviceStats(device);
  py::dict d;
  d["num_alloc_retries"] = stats.num_alloc_retries;
  d["num_ooms"] = stats.num_ooms;
  d["num_sync_all_streams"] = stats.num_sync_all_streams;
  d["num_device_alloc"] = stats.num_device_alloc;
  d["num_device_free"] = stats.num_device_free;
  d["max_split_size"] = stats.max_split_size;
  d["oversize_allocations"] = stat_dict(stats.oversize_allocations);
  d["oversize_segments"] = stat_dict(stats.oversize_segments);
  d["allocation"] = stat_array_dict(stats.allocation);
  d["segment"] = stat_array_dict(stats.segment);
  d["active"] = stat_array_dict(stats.active);
  d["inactive_split"] = stat_array_dict(stats.inactive_split);
  d["allocated_bytes"] = stat_array_dict(stats.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(stats.reserved_bytes);
  d["active_bytes"] = stat_array_dict(stats.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(stats.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(stats.requested_bytes);
  return d;
}

py::dict host_memory_stats() {
  const auto stats = NPUHostAllocator::get()->get_stats();
  py::dict d;
  d["active_requests"] = stat_dict(stats.active_requests);
  d["active_bytes"] = stat_dict(stats.active_bytes);
  d["allocations"] = stat_dict(stats.allocations);
  d["allocated_bytes"] = stat_dict(stats.allocated_bytes);
  d["host_alloc_time"] = duration_dict(stats.host_alloc_time);
  d["host_free_time"] = duration_dict(stats.host_free_time);
  d["num_host_alloc"] = stats.num_host_alloc;
  d["num_host_free"] = stats.num_host_free;
  return d;
}

py::dict backend_info() {
  const auto& info = acl::backend_info();
  py::dict d;
  d["backend"] = info.backend == acl::Backend::Simulator ? "simulator" : "cann";
  d["library"] = info.library;
  d["cann_version"] = info.cann_version;
  d["description"] = info.description;
  return d;
}

py::dict device_properties(c10::DeviceIndex device) {
  check_device_index(device);
  const auto& api = acl::api();
  auto attribute = [&](aclrtDevAttr attr) -> int64_t {
    int64_t value = 0;
    if (api.aclrtGetDeviceInfo(static_cast<uint32_t>(device), attr, &value) != ACL_SUCCESS) {
      api.aclGetRecentErrMsg();
      return -1;
    }
    return value;
  };
  py::dict d;
  const char* soc = api.aclrtGetSocName();
  d["name"] = soc != nullptr ? soc : "unknown";
  d["total_memory"] = attribute(ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE);
  d["cube_core_num"] = attribute(ACL_DEV_ATTR_CUBE_CORE_NUM);
  d["vector_core_num"] = attribute(ACL_DEV_ATTR_VECTOR_CORE_NUM);
  d["L2_cache_size"] = attribute(ACL_DEV_ATTR_L2_CACHE_SIZE);
  return d;
}

// aclrtDeviceCanAccessPeer, for torch.npu.can_device_access_peer.
bool can_device_access_peer(c10::DeviceIndex device, c10::DeviceIndex peer) {
  check_device_index(device);
  check_device_index(peer);
  const auto& api = acl::api();
  TORCH_CHECK(api.aclrtDeviceCanAccessPeer != nullptr,
              "torch.npu.can_device_access_peer: the CANN runtime in use has no aclrtDeviceCanAccessPeer");
  int32_t can_access = 0;
  NPU_CHECK(api.aclrtDeviceCanAccessPeer(&can_access, device, peer));
  return can_access != 0;
}

// aclrtGetDeviceUtilizationRate, for torch.npu.utilization: the busier of
// the cube and vector units, in percent.
int64_t utilization(c10::DeviceIndex device) {
  check_device_index(device);
  const auto& api = acl::api();
  TORCH_CHECK(api.aclrtGetDeviceUtilizationRate != nullptr,
              "torch.npu.utilization: the CANN runtime in use has no aclrtGetDeviceUtilizationRate");
  aclrtUtilizationInfo info{};
  NPU_CHECK(api.aclrtGetDeviceUtilizationRate(device, &info));
  return std::max(info.cubeUtilization, info.vectorUtilization);
}

py::object generator(const at::Generator& gen) {
  return py::reinterpret_steal<py::object>(THPGenerator_Wrap(gen));
}

NPUStream unpack_stream(int64_t stream_id, c10::DeviceIndex device_index) {
  check_device_index(device_index);
  return NPUStream::unpack3(stream_id, device_index, c10::DeviceType::PrivateUse1);
}

py::tuple pack_stream(const NPUStream& stream) {
  return py::make_tuple(stream.id(), stream.device_index());
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_npu._C: private bindings of the npu runtime";

  m.def("_backend_info", &backend_info);
  m.def("_init", &lazy_init);
  m.def("_is_initialized", &is_initialized);
  m.def("_is_in_bad_fork", &is_in_bad_fork);
  m.def("_get_device_count", &device_count);
  m.def("_get_device", &current_device);
  m.def("_set_device", &set_device);
  m.def("_exchange_device", &exchange_device);
  m.def("_check_device_index", &check_device_index);
  m.def("_is_device_initialized", &is_device_initialized);
  m.def("_synchronize", &device_synchronize, py::call_guard<py::gil_scoped_release>());
  m.def("_get_device_properties", &device_properties);
  m.def("_can_device_access_peer", &can_device_access_peer);
  m.def("_utilization", &utilization);
  m.def("_launch_blocking", &launch_blocking);
  // The library serving CANN's runtime API here (libascendcl.so or the
  // simulator), for code that calls it directly (tests make streams there).
  m.def("_runtime_library", &runtime_library);
  m.def("_set_sync_debug_mode", [](int mode) { set_sync_debug_mode(static_cast<SyncDebugMode>(mode)); });
  m.def("_get_sync_debug_mode", [] { return static_cast<int>(get_sync_debug_mode()); });

  // Streams are (stream_id, device_index) pairs, as in torch.Stream.
  m.def("_get_current_stream", [](c10::DeviceIndex d) { return pack_stream(getCurrentNPUStream(d)); });
  m.def("_get_default_stream", [](c10::DeviceIndex d) { return pack_stream(getDefaultNPUStream(d)); });
  m.def("_get_stream_from_pool", [](int priority, c10::DeviceIndex d) {
    return pack_stream(getStreamFromPool(priority, d));
  });
  m.def("_get_stream_from_external", [](uintptr_t handle, c10::DeviceIndex d) {
    return pack_stream(getStreamFromExternal(reinterpret_cast<aclrtStream>(handle), d));
  });
  m.def("_set_current_stream", [](int64_t id, c10::DeviceIndex d) {
    setCurrentNPUStream(unpack_stream(id, d));
  });
  m.def("_stream_priority", [](int64_t id, c10::DeviceIndex d) { return unpack_stream(id, d).priority(); });
  m.def("_stream_priority_range", [] { return NPUStream::priority_range(); });
  m.def("_stream_handle", [](int64_t id, c10::DeviceIndex d) {
    return reinterpret_cast<uintptr_t>(unpack_stream(id, d).stream());
  });

  // Events: torch.Event.event_id is the runtime's event handle.
  m.def(
      "_event_elapsed_time",
      [](uintptr_t start, uintptr_t end) {
        float ms = 0;
        NPU_CHECK(acl::api().aclrtEventElapsedTime(
            &ms, reinterpret_cast<aclrtEvent>(start), reinterpret_cast<aclrtEvent>(end)));
        return ms;
      },
      py::call_guard<py::gil_scoped_release>());

  // Device memory.
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", [](c10::DeviceIndex d) { NPUCachingAllocator::get()->resetPeakStats(d); });
  m.def("_reset_accumulated_memory_stats", [](c10::DeviceIndex d) {
    NPUCachingAllocator::get()->resetAccumulatedStats(d);
  });
  m.def("_empty_cache", [] { NPUCachingAllocator::emptyCache(); }, py::call_guard<py::gil_scoped_release>());
  m.def("_mem_get_info", [](c10::DeviceIndex d) { return NPUCachingAllocator::get()->getMemoryInfo(d); });
  m.def("_set_memory_fraction", [](double fraction, c10::DeviceIndex d) {
    NPUCachingAllocator::get()->set_memory_fraction(fraction, d);
  });
  m.def("_get_memory_fraction", [](c10::DeviceIndex d) { return NPUCachingAllocator::get()->get_memory_fraction(d); });

  // Pinned host memory.
  // Note [Private pools] (NPUCachingAllocator.h), as torch._C's _cuda_*Pool
  // functions: what NPUGraph capture and MemPool contexts allocate from.
  m.def("_npu_graph_pool_handle", [] { return NPUCachingAllocator::graph_pool_handle(); });
  m.def("_npu_beginAllocateCurrentStreamToPool", [](c10::DeviceIndex device, c10::MempoolId_t id) {
    const aclrtStream stream = getCurrentNPUStream(device).stream();
    NPUCachingAllocator::beginAllocateToPool(device, id, [stream](aclrtStream s) { return s == stream; });
  });
  m.def("_npu_beginAllocateToPool", [](c10::DeviceIndex device, c10::MempoolId_t id) {
    NPUCachingAllocator::beginAllocateToPool(device, id, [](aclrtStream) { return true; });
  });
  m.def("_npu_endAllocateToPool", &NPUCachingAllocator::endAllocateToPool);
  m.def("_npu_releasePool", &NPUCachingAllocator::releasePool, py::call_guard<py::gil_scoped_release>());
  m.def("_npu_createOrIncrefPool", &NPUCachingAllocator::createOrIncrefPool);
  // torch.npu.caching_allocator_alloc/delete: raw memory on a stream.
  m.def("_npu_caching_allocator_alloc", [](size_t size, c10::DeviceIndex device, int64_t stream_id) {
    const NPUGuard guard(device);
    const NPUStream stream = NPUStream::unpack3(stream_id, device, c10::DeviceType::PrivateUse1);
    return reinterpret_cast<uintptr_t>(NPUCachingAllocator::get()->raw_alloc_with_stream(size, stream.stream()));
  });
  m.def("_npu_caching_allocator_delete", [](uintptr_t ptr) {
    NPUCachingAllocator::get()->raw_delete(reinterpret_cast<void*>(ptr));
  });
  m.def("_npu_privatePoolIds", &NPUCachingAllocator::privatePoolIds);
  m.def("_npu_emptyCachePool", [](c10::MempoolId_t id) { NPUCachingAllocator::get()->emptyCache(id); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_host_memory_stats", &host_memory_stats);
  m.def("_host_empty_cache", [] { NPUHostAllocator::get()->empty_cache(); });
  m.def("_host_reset_peak_memory_stats", [] { NPUHostAllocator::get()->reset_peak_stats(); });
  m.def("_host_reset_accumulated_memory_stats", [] { NPUHostAllocator::get()->reset_accumulated_stats(); });

  // Testing and benchmarking aids (like torch.cuda._sleep, which counts
  // device clock cycles; the simulated device's clock is nominally 1 GHz).
  m.def("_sleep_cycles_per_ms", [] { return kSimulatedCyclesPerMs; });
  m.def("_sleep", [](int64_t cycles) {
    TORCH_CHECK(cycles >= 0, "torch.npu._sleep: cycles must be >= 0, got ", cycles);
    const double ms = static_cast<double>(cycles) / static_cast<double>(kSimulatedCyclesPerMs);
    launch_host_work(getCurrentNPUStream(), "torch_npu._sleep", [ms] {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    });
  });
  c10_npu::python::bind_activity(m);
  c10_npu::python::bind_activity_host_ops(m);
  c10_npu::python::bind_mstx(m);
  c10_npu::python::bind_graphs(m);
  c10_npu::python::bind_memory_snapshot(m);
  c10_npu::python::bind_memory(m);
  c10_npu::python::bind_ipc(m);
  c10_npu::python::bind_race_check(m);
  // Note [Device work items run many times], tested: every launch runs its
  // item this many times (1: normal).
  m.def("_set_work_runs_for_testing", &set_work_runs_for_testing);
  // Note [OpenMP teams of the host and device threads], tested.
  m.def("_openmp_waits_adjustable", &openmp_waits_adjustable);
  m.def("_reset_openmp_release_for_testing", &reset_openmp_release_for_testing);
  m.def("_set_waits_for_device_for_testing", &set_waits_for_device_for_testing);
  m.def("_openmp_waits_throttled", &openmp_waits_throttled);
  m.def("_set_cpu_contention_for_testing", &set_cpu_contention_for_testing,
        py::call_guard<py::gil_scoped_release>());
  // Where the host reaches device memory on the simulator (device address +
  // offset; 0 without the checker). Benchmarks use it to time a host memcpy
  // between the very pages an npu copy uses.
  m.def("_host_access_offset", [] { return static_cast<int64_t>(host_access_offset()); });
  m.def(
      "_bench_allocator_pair_ns",
      [](int64_t iterations, int64_t nbytes) {
        // Mean time of one cached raw_alloc + raw_delete pair on the current
        // stream, after one warm-up pair has filled the cache.
        auto* allocator = NPUCachingAllocator::get();
        allocator->raw_delete(allocator->raw_alloc(static_cast<size_t>(nbytes)));
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < iterations; ++i) {
          allocator->raw_delete(allocator->raw_alloc(static_cast<size_t>(nbytes)));
        }
        const auto elapsed = std::chrono::steady_clock::now() - start;
        return std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(iterations);
      },
      py::call_guard<py::gil_scoped_release>());

  // Storage formats (torch_npu.get_npu_format / npu_format_cast).
  m.def("_npu_formats", &npu_formats);
  m.def("_get_npu_format", [](const at::Tensor& t) { return get_npu_format(t); });
  m.def("_set_npu_format", [](const at::Tensor& t, int64_t format) { set_npu_format(t, format); });

  // Generators.
  m.def("_default_generator", [](c10::DeviceIndex d) { return generator(getDefaultNPUGenerator(d)); });
}

} // namespace c10_npu::python
