#include "python/MemorySnapshot.h"

#include <string>
#include <unordered_map>
#include <vector>

#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include "npu/NPUCachingAllocator.h"

namespace py = pybind11;

// libtorch_python's symbolizer (torch/csrc/profiler/python/
// combined_traceback.h, which needs nlohmann/json, a header torch's wheels
// do not ship): each traceback as a list of {"filename", "line", "name"}.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
} // namespace torch

namespace c10_npu::python {
namespace {

namespace alloc = c10_npu::NPUCachingAllocator;

// The stacks recordHistory gathers: Python (and TorchScript) frames, or
// also C++ frames (stacks="all", as torch.cuda's).
std::shared_ptr<c10::GatheredContext> gather_python() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}
std::shared_ptr<c10::GatheredContext> gather_all() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

// Symbolises every stack a snapshot holds in one call (frames are shared
// between stacks), then hands out each one's list of frame dicts.
class Frames {
 public:
  void add(const std::shared_ptr<c10::GatheredContext>& context) {
    auto* traceback = dynamic_cast<torch::CapturedTraceback*>(context.get());
    if (traceback != nullptr && index_.emplace(traceback, tracebacks_.size()).second) {
      tracebacks_.push_back(traceback);
    }
  }
  void symbolize() {
    symbolized_ = torch::py_symbolize(tracebacks_);
  }
  py::object of(const std::shared_ptr<c10::GatheredContext>& context) const {
    auto* traceback = dynamic_cast<torch::CapturedTraceback*>(context.get());
    auto it = index_.find(traceback);
    return it == index_.end() ? py::list() : symbolized_.at(it->second);
  }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::unordered_map<torch::CapturedTraceback*, size_t> index_;
  std::vector<py::object> symbolized_;
};

const char* action_name(alloc::TraceEntry::Action action) {
  switch (action) {
    case alloc::TraceEntry::ALLOC: return "alloc";
    case alloc::TraceEntry::FREE_REQUESTED: return "free_requested";
    case alloc::TraceEntry::FREE_COMPLETED: return "free_completed";
    case alloc::TraceEntry::SEGMENT_ALLOC: return "segment_alloc";
    case alloc::TraceEntry::SEGMENT_FREE: return "segment_free";
    case alloc::TraceEntry::SEGMENT_MAP: return "segment_map";
    case alloc::TraceEntry::SEGMENT_UNMAP: return "segment_unmap";
    case alloc::TraceEntry::OOM: return "oom";
  }
  return "unknown";
}

py::dict snapshot_dict() {
  alloc::SnapshotInfo info;
  {
    py::gil_scoped_release no_gil;
    info = alloc::snapshot();
  }
  Frames frames;
  for (const auto& segment : info.segments) {
    frames.add(segment.context_when_allocated);
    for (const auto& block : segment.blocks) {
      frames.add(block.context_when_allocated);
    }
  }
  for (const auto& trace : info.device_traces) {
    for (const auto& entry : trace) {
      frames.add(entry.context);
    }
  }
  frames.symbolize();

  py::list segments;
  for (const auto& segment : info.segments) {
    py::dict s;
    s["device"] = static_cast<int>(segment.device);
    s["address"] = segment.address;
    s["total_size"] = segment.total_size;
    s["allocated_size"] = segment.allocated_size;
    s["active_size"] = segment.active_size;
    s["requested_size"] = segment.requested_size;
    s["stream"] = reinterpret_cast<uintptr_t>(segment.stream);
    s["segment_type"] = segment.is_large ? "large" : "small";
    s["segment_pool_id"] = py::make_tuple(segment.owner_private_pool_id.first, segment.owner_private_pool_id.second);
    s["is_expandable"] = segment.is_expandable;
    s["frames"] = frames.of(segment.context_when_allocated);
    py::list blocks;
    uintptr_t address = segment.address;
    for (const auto& block : segment.blocks) {
      py::dict b;
      b["address"] = address;
      b["size"] = block.size;
      b["requested_size"] = block.requested_size;
      b["state"] = block.allocated ? "active_allocated" : block.active ? "active_pending_free" : "inactive";
      b["frames"] = frames.of(block.context_when_allocated);
      blocks.append(std::move(b));
      address += block.size;
    }
    s["blocks"] = std::move(blocks);
    segments.append(std::move(s));
  }
  py::list device_traces;
  for (const auto& trace : info.device_traces) {
    py::list entries;
    for (const auto& entry : trace) {
      py::dict e;
      e["action"] = action_name(entry.action);
      e["addr"] = entry.addr;
      e["size"] = entry.size;
      e["stream"] = reinterpret_cast<uintptr_t>(entry.stream);
      e["time_us"] = entry.time_us;
      e["frames"] = frames.of(entry.context);
      if (entry.action == alloc::TraceEntry::OOM) {
        e["device_free"] = entry.addr;
      }
      entries.append(std::move(e));
    }
    device_traces.append(std::move(entries));
  }
  py::dict result;
  result["segments"] = std::move(segments);
  result["device_traces"] = std::move(device_traces);
  return result;
}

} // namespace

void bind_memory_snapshot(py::module_& m) {
  // enabled: history on or off; context: "state", "alloc" or "all";
  // stacks: "python" or "all" (with C++ frames).
  m.def(
      "_npu_record_memory_history",
      [](bool enabled, const std::string& context, const std::string& stacks, size_t max_entries) {
        alloc::RecordContext when = alloc::RecordContext::ALL;
        if (context == "state") {
          when = alloc::RecordContext::STATE;
        } else if (context == "alloc") {
          when = alloc::RecordContext::ALLOC;
        } else if (context != "all") {
          when = alloc::RecordContext::NEVER;
        }
        TORCH_CHECK(stacks == "python" || stacks == "all",
                    "_record_memory_history: stacks must be 'python' or 'all', got '", stacks, "'");
        alloc::recordHistory(enabled, stacks == "all" ? &gather_all : &gather_python, max_entries, when);
      },
      py::arg("enabled"), py::arg("context"), py::arg("stacks"), py::arg("max_entries"));
  m.def("_npu_memory_snapshot", &snapshot_dict);
  // observer(device, requested, device_free, device_total), called before
  // torch.OutOfMemoryError is raised (torch.cuda's OOM observer).
  m.def("_npu_attach_out_of_memory_observer", [](py::function observer) {
    // Leaked on purpose: the allocator outlives the interpreter, and a
    // Python object must not be released without it.
    auto* held = new py::function(std::move(observer));
    alloc::attachOutOfMemoryObserver([held](c10::DeviceIndex device, size_t requested, size_t free, size_t total) {
      py::gil_scoped_acquire gil;
      try {
        (*held)(static_cast<int>(device), requested, free, total);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("torch_npu out-of-memory observer");
      }
    });
  });
}

} // namespace c10_npu::python
