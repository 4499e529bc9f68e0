// torch_npu.graph.compile._launch: launches a compiled MLIR kernel as device work
// on an npu stream.
//
// A kernel is a host function with MLIR's C interface
// (`_mlir_ciface_<name>`, llvm.emit_c_interface): one pointer to a ranked
// memref descriptor per argument, inputs then outputs (the outputs became
// arguments through buffer-results-to-out-params). It is called through
// the packed wrapper MLIR's ExecutionEngine adds to every function
// (`_mlir__mlir_ciface_<name>(void** args)`, args[i] pointing at argument
// i): one C signature for any number of tensors, so a fused group is never
// refused for its argument count (a fixed-arity call took at most 32, and
// RWKV's larger groups ran eagerly). The descriptors are
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
//
// Note [Armed launchers of MLIR kernels]
// The wrapper code calls a kernel once per fused group per step, and the
// host time of that call adds to every step: the general path (Python
// works out the geometry, picks the variant, makes inputs contiguous, then
// launch_kernel converts a tensor list and builds descriptors from
// heap-allocated vectors) cost several times an eager op's launch, and
// made compiled training steps slower than eager ones. So once a kernel
// ran through that path as one call on contiguous tensors, its Launcher is
// armed with that variant: the function, each tensor's dtype, sizes and
// strides, the size symbols and torch's thread count. A later call whose
// arguments match all of them exactly (which every call of a static-shape
// graph does) is launched by Launcher::launch in one crossing from Python:
// the descriptors' sizes and strides are packed once, at arming, and the
// work item (recycled memory, NPUWork.h) carries only the tensors' device
// addresses. Anything else (another geometry, a non-contiguous tensor, a
// split kernel) returns false and takes the general path, which re-arms.
// With no stream given, the kernel runs on the device's current stream,
// which is what the wrapper code's stream lookup returned.
#include <ATen/Parallel.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
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

// Most kernels take few tensors: their argument arrays stay on the stack.
constexpr size_t kInlineArgs = 32;

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

// Calls a kernel's packed wrapper with one memref descriptor per tensor.
void call_packed(uintptr_t fn, void* const* descriptors, size_t count) {
  // The packed wrapper reads argument i from *args[i]: here a descriptor's
  // address.
  c10::SmallVector<void*, kInlineArgs> args(count);
  for (size_t i = 0; i < count; ++i) {
    args[i] = const_cast<void**>(descriptors + i);
  }
  reinterpret_cast<void (*)(void**)>(fn)(args.data());
}

// Launches run as blocks of rows, by either path (kernel_stats()'s
// "split_launches").
std::atomic<int64_t> split_launch_count{0};

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
    c10::SmallVector<void*, kInlineArgs> args(descriptors.size());
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
    call_packed(b.fn, args.data(), args.size());
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

// The stream a kernel runs on: the one the wrapper code names, or else the
// device's current stream.
c10_npu::NPUStream kernel_stream(std::optional<int64_t> stream_id, c10::DeviceIndex device_index) {
  if (!stream_id.has_value()) {
    return c10_npu::getCurrentNPUStream(device_index);
  }
  return c10_npu::NPUStream::unpack3(
      static_cast<c10::StreamId>(*stream_id), device_index, c10::DeviceType::PrivateUse1);
}

void launch_kernel(
    const std::string& name,
    uintptr_t fn,
    const std::vector<at::Tensor>& tensors,
    size_t num_inputs,
    std::optional<int64_t> stream_id,
    c10::DeviceIndex device_index,
    const std::vector<std::tuple<uintptr_t, int64_t, int64_t>>& blocks,
    const std::vector<int64_t>& split) {
  TORCH_CHECK(fn != 0 || !blocks.empty(), "launch_kernel: kernel ", name, " has no function address");
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
  const auto stream = kernel_stream(stream_id, device_index);
  // Note [Stream race detection]: the kernel reads its inputs and writes its
  // outputs (the tensors after the first num_inputs).
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      accesses.add(tensors[i], i >= num_inputs);
    }
  }
  c10_npu::launch_host_work(stream, intern_name(name), std::move(work));
  if (!blocks.empty()) {
    ++split_launch_count;
  }
}

// What an armed Launcher launches (Note [Armed launchers of MLIR kernels]):
// immutable once built, shared by the work items launched with it.
struct ArmedVariant {
  // One block covering every row when the kernel is not split (rows 0:
  // the packed sizes stand).
  std::vector<Block> blocks;
  bool split = false;
  // Per tensor, for a split kernel: rows (dimension 0) per outer row and
  // the bytes they take; 0 for a tensor passed whole.
  std::vector<int64_t> rows_per_outer_row;
  std::vector<int64_t> row_bytes;
  c10::DeviceIndex device_index = 0;
  int num_threads = 0;
  std::vector<c10::ScalarType> dtypes;
  std::vector<std::vector<int64_t>> sizes;
  std::vector<std::vector<int64_t>> strides;
  std::vector<int64_t> symbols;
  // The tensors' memref descriptors back to back, their addresses left 0,
  // and where each starts.
  std::vector<int64_t> memrefs;
  std::vector<size_t> memref_starts;
};

// The work item of an armed launch: the variant and the device addresses.
struct ArmedKernelWork {
  std::shared_ptr<const ArmedVariant> variant;
  c10::SmallVector<int64_t, kInlineArgs> addresses;
  c10_npu::LaunchSite site; // none: the wrapper code's line is not known here

  // Calls block `b`'s function on its rows, as KernelWork::run_block does.
  void run_block(const Block& b, intptr_t offset) const {
    const auto& v = *variant;
    c10::SmallVector<int64_t, 256> memrefs(v.memrefs.begin(), v.memrefs.end());
    c10::SmallVector<void*, kInlineArgs> args(v.memref_starts.size());
    for (size_t i = 0; i < v.memref_starts.size(); ++i) {
      int64_t* m = memrefs.data() + v.memref_starts[i];
      const int64_t host = addresses[i] == 0 ? 0 : addresses[i] + offset + b.first_row * v.row_bytes[i];
      m[0] = host; // allocated
      m[1] = host; // aligned
      if (v.row_bytes[i] != 0) {
        m[3] = b.rows * v.rows_per_outer_row[i]; // sizes[0]
      }
      args[i] = m;
    }
    call_packed(b.fn, args.data(), args.size());
  }

  void operator()() const {
    const intptr_t offset = c10_npu::host_access_offset();
    const auto& blocks = variant->blocks;
    if (blocks.size() == 1) {
      run_block(blocks[0], offset);
      return;
    }
    // As KernelWork::run_blocks_parallel.
    at::parallel_for(0, static_cast<int64_t>(blocks.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        run_block(blocks[i], offset);
      }
    });
  }
};

// A kernel's launch fast path (Note [Armed launchers of MLIR kernels]).
class Launcher {
 public:
  Launcher(std::string name, size_t num_inputs) : name_(intern_name(name)), num_inputs_(num_inputs) {}

  // Arms the launcher with `fn` compiled for these tensors (inputs, then
  // outputs), size symbols and thread count; or, for a split kernel, with
  // its `blocks` and each tensor's rows per outer row (`split`), as
  // launch_kernel takes them.
  void arm(
      uintptr_t fn,
      const std::vector<at::Tensor>& tensors,
      std::vector<int64_t> symbols,
      int num_threads,
      const std::vector<std::tuple<uintptr_t, int64_t, int64_t>>& blocks,
      const std::vector<int64_t>& split) {
    TORCH_CHECK(fn != 0 || !blocks.empty(), "Launcher.arm: kernel ", name_, " has no function address");
    TORCH_CHECK(!tensors.empty(), "Launcher.arm: kernel ", name_, " takes no tensors");
    TORCH_CHECK(
        blocks.empty() || split.size() == tensors.size(), "Launcher.arm: kernel ", name_,
        " is split in blocks but gives the rows per outer row of ", split.size(), " of its ", tensors.size(),
        " tensors");
    auto v = std::make_shared<ArmedVariant>();
    v->split = !blocks.empty();
    if (blocks.empty()) {
      v->blocks.push_back(Block{fn, 0, 0});
    }
    for (const auto& [block_fn, first_row, rows] : blocks) {
      TORCH_CHECK(block_fn != 0, "Launcher.arm: a block of kernel ", name_, " has no function address");
      v->blocks.push_back(Block{block_fn, first_row, rows});
    }
    v->device_index = tensors.back().device().index();
    v->num_threads = num_threads;
    v->symbols = std::move(symbols);
    for (const auto& t : tensors) {
      TORCH_CHECK(
          t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == v->device_index,
          "Launcher.arm: kernel ", name_, " got a tensor on ", t.device(), ", expected npu:", v->device_index);
      const int64_t rows_per_outer_row = blocks.empty() ? 0 : split[v->dtypes.size()];
      TORCH_CHECK(
          rows_per_outer_row == 0 || (t.dim() >= 1 && t.is_contiguous()), "Launcher.arm: split tensor ",
          v->dtypes.size(), " of kernel ", name_, " must be contiguous with a row dimension");
      v->rows_per_outer_row.push_back(rows_per_outer_row);
      v->row_bytes.push_back(
          rows_per_outer_row == 0 ? 0 : rows_per_outer_row * t.stride(0) * static_cast<int64_t>(t.element_size()));
      v->dtypes.push_back(t.scalar_type());
      v->sizes.emplace_back(t.sizes().begin(), t.sizes().end());
      v->strides.emplace_back(t.strides().begin(), t.strides().end());
      v->memref_starts.push_back(v->memrefs.size());
      v->memrefs.insert(v->memrefs.end(), {0, 0, 0});
      v->memrefs.insert(v->memrefs.end(), t.sizes().begin(), t.sizes().end());
      v->memrefs.insert(v->memrefs.end(), t.strides().begin(), t.strides().end());
    }
    variant_ = std::move(v);
  }

  void disarm() {
    variant_.reset();
  }

  bool armed() const {
    return variant_ != nullptr;
  }

  // Launches the armed variant if `args` (tensors, then size symbols) match
  // it exactly; returns whether it did.
  bool launch(const py::tuple& args, std::optional<int64_t> stream_id) const {
    if (!variant_) {
      return false;
    }
    const ArmedVariant& v = *variant_;
    const size_t num_tensors = v.dtypes.size();
    if (static_cast<size_t>(PyTuple_GET_SIZE(args.ptr())) != num_tensors + v.symbols.size()) {
      return false;
    }
    c10::SmallVector<const at::Tensor*, kInlineArgs> tensors(num_tensors);
    c10::SmallVector<int64_t, kInlineArgs> addresses(num_tensors);
    for (size_t i = 0; i < num_tensors; ++i) {
      PyObject* obj = PyTuple_GET_ITEM(args.ptr(), i);
      if (!THPVariable_Check(obj)) {
        return false;
      }
      const at::Tensor& t = THPVariable_Unpack(obj);
      if (t.scalar_type() != v.dtypes[i] || t.device().type() != c10::DeviceType::PrivateUse1 ||
          t.device().index() != v.device_index || t.sizes() != c10::IntArrayRef(v.sizes[i]) ||
          t.strides() != c10::IntArrayRef(v.strides[i])) {
        return false;
      }
      tensors[i] = &t;
      addresses[i] = reinterpret_cast<int64_t>(t.data_ptr());
    }
    for (size_t i = 0; i < v.symbols.size(); ++i) {
      PyObject* obj = PyTuple_GET_ITEM(args.ptr(), num_tensors + i);
      if (!PyLong_CheckExact(obj)) {
        return false;
      }
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (overflow != 0 || value != v.symbols[i]) {
        return false;
      }
    }
    // The variant was chosen for this many threads (a split depends on it).
    if (at::get_num_threads() != v.num_threads) {
      return false;
    }
    const auto stream = kernel_stream(stream_id, v.device_index);
    // Note [Stream race detection], as launch_kernel declares them.
    c10_npu::WorkAccessScope accesses;
    if (C10_UNLIKELY(accesses.active())) {
      for (size_t i = 0; i < num_tensors; ++i) {
        accesses.add(*tensors[i], i >= num_inputs_);
      }
    }
    c10_npu::launch_recycled_work<ArmedKernelWork>(
        stream, name_, c10_npu::WorkFlags::None, variant_, addresses, c10_npu::LaunchSite{});
    if (v.split) {
      ++split_launch_count;
    }
    return true;
  }

 private:
  const char* name_;
  size_t num_inputs_;
  std::shared_ptr<const ArmedVariant> variant_;
};

} // namespace

PYBIND11_MODULE(_launch, m) {
  m.doc() = "Launches MLIR-compiled kernels as device work on npu streams.";
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
        "split of MLIR kernels]). A `stream_id` of None is the device's current stream.");
  m.def(
      "split_launches", [] { return split_launch_count.load(); },
      "Launches run as blocks of rows in this process (Note [Outer-dimension split of MLIR kernels]).");
  py::class_<Launcher>(
      m, "Launcher",
      "A kernel's launch fast path: armed with one compiled variant, launches calls whose tensors and "
      "size symbols match it exactly (Note [Armed launchers of MLIR kernels]).")
      .def(py::init<std::string, size_t>(), py::arg("name"), py::arg("num_inputs"))
      .def("arm", &Launcher::arm, py::arg("fn"), py::arg("tensors"), py::arg("symbols"), py::arg("num_threads"),
           py::arg("blocks") = std::vector<std::tuple<uintptr_t, int64_t, int64_t>>{},
           py::arg("split") = std::vector<int64_t>{},
           "Arms the launcher with function `fn` compiled for `tensors` (inputs, then outputs; their dtypes, "
           "sizes and strides), the size symbols and torch's thread count; `blocks` and `split` as "
           "launch_kernel takes them.")
      .def("disarm", &Launcher::disarm, "Forgets the armed variant.")
      .def_property_readonly("armed", &Launcher::armed)
      .def("launch", &Launcher::launch, py::arg("args"), py::arg("stream_id") = py::none(),
           "Launches the armed variant on `args` (tensors, then size symbols) on the stream (None: the "
           "current one) if they match it exactly; returns whether it did. Must be called with the GIL.");
}
