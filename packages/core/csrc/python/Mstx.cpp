#include "python/Mstx.h"

#include <optional>
#include <string>

#include <pybind11/stl.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "npu/NPUMstx.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

// Streams cross as torch.npu.Stream's (stream_id, device_index); -1 for
// none (host only).
std::optional<NPUStream> stream_of(int64_t stream_id, int64_t device) {
  if (device < 0) {
    return std::nullopt;
  }
  return NPUStream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device), c10::DeviceType::PrivateUse1);
}

} // namespace

void bind_mstx(py::module_& m) {
  m.def(
      "_mstx_mark",
      [](const std::string& message, int64_t stream_id, int64_t device, const std::string& domain) {
        mstx::mark(message, stream_of(stream_id, device), domain);
      },
      py::arg("message"), py::arg("stream_id"), py::arg("device"), py::arg("domain"));
  m.def(
      "_mstx_range_start",
      [](const std::string& message, int64_t stream_id, int64_t device, const std::string& domain) {
        return mstx::range_start(message, stream_of(stream_id, device), domain);
      },
      py::arg("message"), py::arg("stream_id"), py::arg("device"), py::arg("domain"));
  m.def("_mstx_range_end", &mstx::range_end, py::arg("range_id"), py::arg("domain"));
  m.def(
      "_mstx_range_push",
      [](const std::string& message, int64_t stream_id, int64_t device, const std::string& domain) {
        return mstx::range_push(message, stream_of(stream_id, device), domain);
      },
      py::arg("message"), py::arg("stream_id"), py::arg("device"), py::arg("domain"));
  m.def("_mstx_range_pop", &mstx::range_pop, py::arg("domain"));
  // PyTorch's PrivateUse1 profiler stubs, called as torch's profilers call
  // them: tests check that they reach mstx.
  m.def("_privateuse1_stubs_mark", [](const std::string& name) {
    torch::profiler::impl::privateuse1Stubs()->mark(name.c_str());
  });
  m.def("_privateuse1_stubs_range_push", [](const std::string& name) {
    torch::profiler::impl::privateuse1Stubs()->rangePush(name.c_str());
  });
  m.def("_privateuse1_stubs_range_pop", []() { torch::profiler::impl::privateuse1Stubs()->rangePop(); });
}

} // namespace c10_npu::python
