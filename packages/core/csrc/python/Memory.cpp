#include "python/Memory.h"

#include <pybind11/stl.h>

#include <string>

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "npu/NPUAllocatorConfig.h"
#include "npu/NPUCachingAllocator.h"
#include "npu/NPUPluggableAllocator.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

using NPUCachingAllocator::AllocatorSettings;

// Plain values, so that tests can compare them: sizes in bytes (None when
// unlimited or unset) and the divisions per size bit.
py::dict settings_dict(const AllocatorSettings& s) {
  py::dict d;
  d["expandable_segments"] = s.expandable_segments;
  d["max_split_size"] = s.max_split_size == AllocatorSettings::kUnlimited ? py::object(py::none())
                                                                          : py::int_(s.max_split_size);
  d["garbage_collection_threshold"] = s.garbage_collection_threshold;
  d["roundup_power2_divisions"] = std::vector<uint32_t>(s.roundup_power2_divisions.begin(),
                                                        s.roundup_power2_divisions.end());
  d["base_addr_aligned_kb"] = s.base_addr_aligned_kb;
  d["page_size"] = s.page_size == 0 ? py::object(py::none()) : py::int_(s.page_size);
  d["segment_size"] = s.segment_size == 0 ? py::object(py::none()) : py::int_(s.segment_size);
  d["large_segment_size"] = s.large_segment_size;
  return d;
}

} // namespace

void bind_memory(py::module_& m) {
  // Wrapped so that warnings reach Python's warnings module instead of
  // stderr.
  m.def("_npu_set_allocator_settings", torch::wrap_pybind_function_no_gil(&NPUCachingAllocator::setAllocatorSettings));
  // torch_npu.erase_stream; the stream as torch.Stream's (id, device index,
  // device type).
  m.def("_npu_erase_stream", [](const at::Tensor& tensor, int64_t stream_id, int64_t device_index,
                                int64_t device_type) {
    const c10::Stream stream = c10::Stream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device_index),
                                                    static_cast<c10::DeviceType>(device_type));
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "erase_stream: ", stream,
                " is not an npu stream");
    NPUCachingAllocator::eraseStream(tensor.storage().data_ptr(), NPUStream(stream));
  });
  // Note [Pluggable allocators]: the functions' addresses, from ctypes.
  py::class_<NPUCachingAllocator::NPUAllocator, std::shared_ptr<NPUCachingAllocator::NPUAllocator>>(
      m, "_NPUAllocator");
  m.def("_npu_customAllocator", [](uintptr_t alloc_fn, uintptr_t free_fn) {
    return std::shared_ptr<NPUCachingAllocator::NPUAllocator>(std::make_shared<NPUCachingAllocator::PluggableAllocator>(
        reinterpret_cast<NPUCachingAllocator::PluggableAllocFn>(alloc_fn),
        reinterpret_cast<NPUCachingAllocator::PluggableFreeFn>(free_fn)));
  });
  m.def("_npu_changeCurrentAllocator", &NPUCachingAllocator::changeCurrentAllocator);
  m.def("_npu_allocator_settings", [] { return settings_dict(NPUCachingAllocator::AllocatorConfig::settings()); });
  // Parses over the defaults and changes nothing: what a configuration
  // string would give.
  m.def("_npu_parse_allocator_settings", [](const std::string& config) {
    return settings_dict(NPUCachingAllocator::AllocatorConfig::parse(config, AllocatorSettings(), "allocator settings"));
  });
}

} // namespace c10_npu::python
