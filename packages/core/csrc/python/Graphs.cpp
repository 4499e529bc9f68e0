#include "python/Graphs.h"

#include <cstdint>

#include "npu/NPUGraphsUtils.h"
#include "npu/NPUStream.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

// Streams cross as torch.npu.Stream's (stream_id, device_index); models as
// their handle's integer value.
NPUStream stream_of(int64_t stream_id, int64_t device) {
  return NPUStream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device), c10::DeviceType::PrivateUse1);
}

aclmdlRI model_of(uintptr_t handle) {
  return reinterpret_cast<aclmdlRI>(handle);
}

} // namespace

void bind_graphs(py::module_& m) {
  m.def("_npu_is_capture_supported", &is_capture_supported);
  m.def("_npu_capture_status", [](int64_t stream_id, int64_t device) {
    return static_cast<int>(stream_capture_status(stream_of(stream_id, device)));
  });
  // mode: 0 global, 1 thread_local, 2 relaxed (torch.cuda.graph's
  // capture_error_mode).
  m.def("_npu_capture_begin", [](int64_t stream_id, int64_t device, int mode) {
    capture_begin(stream_of(stream_id, device), static_cast<CaptureMode>(mode));
  });
  m.def("_npu_capture_end", [](int64_t stream_id, int64_t device) {
    return reinterpret_cast<uintptr_t>(capture_end(stream_of(stream_id, device)));
  });
  m.def("_npu_model_execute", [](uintptr_t model, int64_t stream_id, int64_t device) {
    model_execute(model_of(model), stream_of(stream_id, device));
  });
  // Waits for the model's replays to finish first.
  m.def("_npu_model_destroy", [](uintptr_t model) { model_destroy(model_of(model)); },
        py::call_guard<py::gil_scoped_release>());
}

} // namespace c10_npu::python
