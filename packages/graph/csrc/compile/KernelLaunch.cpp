// torch_npu.graph.compile._launch: launches a compiled MLIR kernel as device work
// on an npu stream.
//
// A kernel is a host function with MLIR's C interface
// (`_mlir_ciface_<name>`, llvm.emit_c_interface): one pointer to a ranked
// memref descriptor per argument, inputs then outputs (the outputs became
// arguments through buffer-results-to-out-params). The descriptors are
// built here from the tensors' device addresses, sizes and strides, captured
// as plain data (no tensor references, as the ops package's kernels do: the
// caching allocator reuses memory in stream order, so memory freed after the
// launch is not handed out before the work has run). At run time each
// address is turned into the address device work may dereference
// (c10_npu::host_access). Running does not consume the captured
// descriptors: see Note [Device work items run many times].
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Stream.h>

#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/WorkAccesses.h"

namespace py = pybind11;

namespace {

// MLIR passes every argument as a pointer; the launcher supports kernels of
// up to kMaxArgs tensors (Python checks it first, with a clear message).
constexpr size_t kMaxArgs = 32;

// One tensor's memref descriptor as MLIR lays it out:
// {allocated, aligned, offset, sizes[rank], strides[rank]}, all 64-bit.
struct Descriptor {
  int64_t device_address = 0;
  std::vector<int64_t> sizes_and_strides;
};

template <size_t... I>
void call_with(void* fn, void* const* args, std::index_sequence<I...>) {
  using Fn = void (*)(decltype((void)I, static_cast<void*>(nullptr))...);
  reinterpret_cast<Fn>(fn)(args[I]...);
}

template <size_t N>
void call_n(void* fn, void* const* args) {
  call_with(fn, args, std::make_index_sequence<N>{});
}

using Caller = void (*)(void*, void* const*);

template <size_t... N>
constexpr std::array<Caller, sizeof...(N)> make_callers(std::index_sequence<N...>) {
  return {&call_n<N>...};
}

constexpr auto kCallers = make_callers(std::make_index_sequence<kMaxArgs + 1>{});

// Work names must outlive the work items (NPUWork.h wants static storage):
// kernel names are few, so they are interned for the process's lifetime.
const char* intern_name(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

struct KernelWork {
  void* fn;
  std::vector<Descriptor> descriptors;

  void operator()() const {
    const intptr_t offset = c10_npu::host_access_offset();
    // Built per run, from the captured data only.
    std::vector<std::vector<int64_t>> memrefs(descriptors.size());
    std::array<void*, kMaxArgs> args{};
    for (size_t i = 0; i < descriptors.size(); ++i) {
      const auto& d = descriptors[i];
      auto& m = memrefs[i];
      const int64_t host = d.device_address == 0 ? 0 : d.device_address + offset;
      m.reserve(3 + d.sizes_and_strides.size());
      m.push_back(host);
      m.push_back(host);
      m.push_back(0);
      m.insert(m.end(), d.sizes_and_strides.begin(), d.sizes_and_strides.end());
      args[i] = m.data();
    }
    kCallers[descriptors.size()](fn, args.data());
  }
};

void launch_kernel(
    const std::string& name,
    uintptr_t fn,
    const std::vector<at::Tensor>& tensors,
    size_t num_inputs,
    int64_t stream_id,
    c10::DeviceIndex device_index) {
  TORCH_CHECK(fn != 0, "launch_kernel: kernel ", name, " has no function address");
  TORCH_CHECK(
      tensors.size() <= kMaxArgs, "launch_kernel: kernel ", name, " takes ", tensors.size(),
      " tensors; at most ", kMaxArgs, " are supported");
  KernelWork work{reinterpret_cast<void*>(fn), {}};
  work.descriptors.reserve(tensors.size());
  for (const auto& t : tensors) {
    TORCH_CHECK(
        t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device_index,
        "launch_kernel: kernel ", name, " got a tensor on ", t.device(), ", expected npu:", device_index);
    Descriptor d;
    d.device_address = reinterpret_cast<int64_t>(t.data_ptr());
    for (auto s : t.sizes()) {
      d.sizes_and_strides.push_back(s);
    }
    for (auto s : t.strides()) {
      d.sizes_and_strides.push_back(s);
    }
    work.descriptors.push_back(std::move(d));
  }
  const auto stream = c10_npu::NPUStream::unpack3(
      static_cast<c10::StreamId>(stream_id), device_index, c10::DeviceType::PrivateUse1);
  // Note [Stream race detection]: the kernel reads its inputs and writes its
  // outputs (the tensors after the first num_inputs).
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      accesses.add(tensors[i], i >= num_inputs);
    }
  }
  c10_npu::launch_host_work(stream, intern_name(name), std::move(work));
}

} // namespace

PYBIND11_MODULE(_launch, m) {
  m.doc() = "Launches MLIR-compiled kernels as device work on npu streams.";
  m.attr("MAX_KERNEL_ARGS") = kMaxArgs;
  m.def("launch_kernel", &launch_kernel, py::arg("name"), py::arg("fn"), py::arg("tensors"),
        py::arg("num_inputs"), py::arg("stream_id"), py::arg("device_index"));
}
