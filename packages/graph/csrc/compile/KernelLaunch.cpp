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
//
// A kernel split along its outermost dimension (Note [Outer-dimension split
// of MLIR kernels], _outer_split.py) comes as blocks: a function per block
// compiled for the block's row count, and which tensors are split. Each
// block's call gets descriptors whose data pointers start at its first row.
// The blocks run inside the one work item through at::parallel_for, that is
// on the OpenMP team of the stream's worker thread: the team eager ATen
// kernels on that stream use, whose idle threads libgomp keeps spinning, so
// handing a block over costs no wake-up. The item completes after all of
// them (stream order is unchanged). This module is compiled with -fopenmp
// and linked against torch's own libgomp (CMakeLists.txt): a second OpenMP
// runtime would keep a team of its own beside torch's, its threads competing
// with torch's for the CPUs. Built without OpenMP (torch ships no libgomp),
// at::parallel_for runs the blocks one after another, and
// RUNS_BLOCKS_IN_PARALLEL tells Python not to split kernels at all.
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
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
  // For a split tensor, its rows (dimension 0) per outer row of the kernel
  // and the bytes they take; 0 for a tensor that is not split.
  int64_t rows_per_outer_row = 0;
  int64_t row_bytes = 0;
  std::vector<int64_t> sizes_and_strides;
};

// One call of a split kernel: its function and its rows.
struct Block {
  uintptr_t fn;
  int64_t first_row;
  int64_t rows;
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
  // One block covering every row when the kernel is not split.
  std::vector<Block> blocks;
  std::vector<Descriptor> descriptors;

  // Calls block `b`'s function on its rows. Descriptors are built per run,
  // from the captured data only.
  void run_block(const Block& b, intptr_t offset) const {
    std::vector<std::vector<int64_t>> memrefs(descriptors.size());
    std::array<void*, kMaxArgs> args{};
    for (size_t i = 0; i < descriptors.size(); ++i) {
      const auto& d = descriptors[i];
      auto& m = memrefs[i];
      const int64_t host =
          d.device_address == 0 ? 0 : d.device_address + offset + b.first_row * d.row_bytes;
      m.reserve(3 + d.sizes_and_strides.size());
      m.push_back(host);
      m.push_back(host);
      m.push_back(0);
      m.insert(m.end(), d.sizes_and_strides.begin(), d.sizes_and_strides.end());
      if (d.row_bytes != 0) {
        m[3] = b.rows * d.rows_per_outer_row; // sizes[0]
      }
      args[i] = m.data();
    }
    kCallers[descriptors.size()](reinterpret_cast<void*>(b.fn), args.data());
  }

  void operator()() const {
    const intptr_t offset = c10_npu::host_access_offset();
    if (blocks.size() == 1) {
      run_block(blocks[0], offset);
      return;
    }
    run_blocks_parallel(offset);
  }

  // One block per task of at::parallel_for (grain 1): with T threads in the
  // team each takes ceil(blocks / T) consecutive blocks, and Python makes no
  // more blocks than torch.get_num_threads(). at::parallel_for runs the
  // blocks inline when the caller is already inside a parallel region or
  // torch may use one thread, and rethrows a block's exception here.
  void run_blocks_parallel(intptr_t offset) const {
    at::parallel_for(0, static_cast<int64_t>(blocks.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        run_block(blocks[i], offset);
      }
    });
  }
};

void launch_kernel(
    const std::string& name,
    uintptr_t fn,
    const std::vector<at::Tensor>& tensors,
    size_t num_inputs,
    int64_t stream_id,
    c10::DeviceIndex device_index,
    const std::vector<std::tuple<uintptr_t, int64_t, int64_t>>& blocks,
    const std::vector<int64_t>& split) {
  TORCH_CHECK(fn != 0 || !blocks.empty(), "launch_kernel: kernel ", name, " has no function address");
  TORCH_CHECK(
      tensors.size() <= kMaxArgs, "launch_kernel: kernel ", name, " takes ", tensors.size(),
      " tensors; at most ", kMaxArgs, " are supported");
  TORCH_CHECK(
      blocks.empty() || split.size() == tensors.size(), "launch_kernel: kernel ", name,
      " is split in blocks but gives the rows per outer row of ", split.size(), " of its ",
      tensors.size(), " tensors");
  KernelWork work;
  if (blocks.empty()) {
    work.blocks.push_back(Block{fn, 0, 0});
  }
  for (const auto& [block_fn, first_row, rows] : blocks) {
    TORCH_CHECK(block_fn != 0, "launch_kernel: a block of kernel ", name, " has no function address");
    work.blocks.push_back(Block{block_fn, first_row, rows});
  }
  work.descriptors.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    TORCH_CHECK(
        t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device_index,
        "launch_kernel: kernel ", name, " got a tensor on ", t.device(), ", expected npu:", device_index);
    Descriptor d;
    d.device_address = reinterpret_cast<int64_t>(t.data_ptr());
    if (!blocks.empty() && split[i] != 0) {
      TORCH_CHECK(
          t.dim() >= 1 && t.is_contiguous(), "launch_kernel: split tensor ", i, " of kernel ", name,
          " must be contiguous with a row dimension");
      d.rows_per_outer_row = split[i];
      d.row_bytes = split[i] * t.stride(0) * static_cast<int64_t>(t.element_size());
    }
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
#ifdef _OPENMP
  m.attr("RUNS_BLOCKS_IN_PARALLEL") = true;
#else
  m.attr("RUNS_BLOCKS_IN_PARALLEL") = false;
#endif
  m.def("launch_kernel", &launch_kernel, py::arg("name"), py::arg("fn"), py::arg("tensors"),
        py::arg("num_inputs"), py::arg("stream_id"), py::arg("device_index"),
        py::arg("blocks") = std::vector<std::tuple<uintptr_t, int64_t, int64_t>>{},
        py::arg("split") = std::vector<int64_t>{},
        "Launches kernel `fn` on `tensors` (inputs, then outputs) as device work on the stream; "
        "with `blocks` ((fn, first row, rows) each), as one call per block of rows; `split` gives "
        "each tensor's rows per outer row, 0 for a tensor passed whole (Note [Outer-dimension "
        "split of MLIR kernels]).");
}
