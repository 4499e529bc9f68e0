#include "python/Activity.h"

#include <pybind11/stl.h>

#include "npu/NPUActivity.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

const char* kind_name(activity::Kind kind) {
  switch (kind) {
    case activity::Kind::Kernel: return "kernel";
    case activity::Kind::Memcpy: return "memcpy";
    case activity::Kind::Memset: return "memset";
    case activity::Kind::Mstx: return "mstx";
  }
  return "unknown";
}

py::list flush_records() {
  std::vector<activity::Record> records;
  {
    py::gil_scoped_release no_gil;
    records = activity::flush();
  }
  py::list out;
  for (const auto& r : records) {
    py::dict d;
    d["name"] = r.name;
    d["kind"] = kind_name(r.kind);
    d["device"] = static_cast<int>(r.device);
    d["stream"] = reinterpret_cast<uintptr_t>(r.stream);
    d["work_id"] = r.work_id;
    d["correlation_id"] = r.correlation_id;
    d["start_ns"] = r.start_ns;
    d["end_ns"] = r.end_ns;
    d["bytes"] = r.bytes;
    d["domain"] = r.domain;
    d["tid"] = r.thread_id;
    d["rank_count"] = r.rank_count;
    d["rank"] = r.rank;
    d["peer_rank"] = r.peer_rank;
    d["wait_ns"] = r.wait_ns;
    d["sync_ns"] = r.sync_ns;
    out.append(std::move(d));
  }
  return out;
}

} // namespace

void bind_activity(py::module_& m) {
  m.def("_activity_is_available", &activity::is_available);
  m.def("_activity_enable", &activity::enable, py::arg("on"));
  m.def("_activity_is_enabled", &activity::is_enabled);
  m.def("_activity_push_correlation_id", &activity::push_correlation_id, py::arg("id"));
  m.def("_activity_pop_correlation_id", &activity::pop_correlation_id);
  // A list of dicts: name, kind ("kernel", "memcpy", "memset", "mstx"),
  // device, stream (the runtime's handle, as NPUStream.npu_stream; 0 for
  // host-side mstx records), work_id, correlation_id, start_ns and end_ns
  // (CLOCK_MONOTONIC), bytes, domain and tid (mstx records: the mstx domain
  // and the calling thread's native id; "" and 0 otherwise), rank_count,
  // rank and peer_rank (collectives: the communicator's size, this rank and
  // the point-to-point peer or -1; 0, 0, -1 otherwise).
  m.def("_activity_flush", &flush_records);
  // Note [Kineto correlation for torch_npu.profiler]
  m.def("_activity_forward_kineto_correlation", &activity::forward_kineto_correlation, py::arg("on"));
  m.def("_activity_kineto_plugin_registered", &activity::kineto_plugin_registered);
}

} // namespace c10_npu::python
