#include "python/ActivityHostOps.h"

#include "npu/NPUHostOpActivity.h"

namespace py = pybind11;

namespace c10_npu::python {

void bind_activity_host_ops(py::module_& m) {
  m.def("_activity_record_host_ops", &activity::record_host_ops, py::arg("on"));
  m.def("_activity_recording_host_ops", &activity::recording_host_ops);
  // A list of dicts: name, correlation_id, thread_id (RecordFunction's, as
  // Kineto's start_thread_id), os_thread_id, start_ns and end_ns
  // (CLOCK_MONOTONIC), in the order the ops ended.
  m.def("_activity_flush_host_ops", [] {
    std::vector<activity::HostOp> ops;
    {
      py::gil_scoped_release no_gil;
      ops = activity::flush_host_ops();
    }
    py::list out;
    for (const auto& op : ops) {
      py::dict d;
      d["name"] = op.name;
      d["correlation_id"] = op.correlation_id;
      d["thread_id"] = op.thread_id;
      d["os_thread_id"] = op.os_thread_id;
      d["start_ns"] = op.start_ns;
      d["end_ns"] = op.end_ns;
      out.append(std::move(d));
    }
    return out;
  });
}

} // namespace c10_npu::python
