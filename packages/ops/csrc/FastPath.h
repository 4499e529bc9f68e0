// Dedicated (unboxed) npu kernels for structured ATen ops: the fast path.
//
// The generic executor (DeviceOpExecutor) handles every op, but boxing the
// arguments, looking up cached meta results and building the work item cost
// several microseconds per call, more than a small op costs on the CPU.
// Structured ops (the TensorIterator pointwise family, comparisons, sum,
// mean, ...) describe their outputs with a C++ meta function, so a kernel for
// them can do what PyTorch's own CPU kernel does on the host:
//
// 1. run the op's meta function (at::meta::structured_*) on the npu tensors:
//    broadcasting, type promotion, argument checks (raised at the call, as on
//    the CPU) and the output's sizes and strides, exactly as the CPU computes
//    them;
// 2. allocate fresh outputs from the npu caching allocator (in-place and out=
//    forms check or resize their argument instead, as the CPU does);
// 3. queue one work item on the current stream that calls the CPU kernel
//    (at::cpu::*_outf / at::cpu::*_) on CPU aliases of the device memory.
//
// Arguments the fast path does not handle (host tensors other than 0-dim
// scalars, tensors on different devices, tensors with the conjugate or
// negative bit) go to the generic executor unchanged.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "CallVerification.h"
#include "CaptureChecks.h"
#include "DeviceArgument.h"
#include "DeviceChecks.h"
#include "DeviceOpExecutor.h"
#include "ExecutionCounters.h"
#include "KernelAllocator.h"
#include "LaunchSite.h"
#include "PreparedCall.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/WorkAccesses.h"

namespace torch_npu_ops::fast {

// --- Which calls take the fast path -----------------------------------------

// Calls `f` on each defined tensor among a kernel's arguments (tensors and
// present optional tensors); other arguments are skipped.
template <typename F, typename... Args>
void for_each_tensor_argument(F&& f, const Args&... args) {
  const auto visit = [&f](const auto& arg) {
    using Arg = std::decay_t<decltype(arg)>;
    if constexpr (std::is_same_v<Arg, at::Tensor>) {
      if (arg.defined()) {
        f(arg);
      }
    } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
      if (arg.has_value() && arg->defined()) {
        f(*arg);
      }
    }
  };
  (visit(args), ...);
}

// The npu device of a kernel's arguments, or nullopt for what only the
// generic executor handles.
template <typename... Args>
std::optional<c10::Device> fast_path_device(const Args&... args) {
  std::optional<c10::Device> device;
  bool ok = true;
  for_each_tensor_argument(
      [&](const at::Tensor& t) {
        const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
        if (impl->is_conj() || impl->is_neg()) {
          ok = false;
        } else if (impl->device_type() == c10::DeviceType::PrivateUse1) {
          if (!device.has_value()) {
            device = impl->device();
          } else if (*device != impl->device()) {
            ok = false; // the generic executor raises the device-mismatch error
          }
        } else {
          // 0-dim host tensors are scalars (Python numbers wrapped by the
          // argument parser, or tensors like CUDA allows): their value is
          // captured.
          ok &= impl->device_type() == c10::DeviceType::CPU && impl->dim() == 0;
        }
      },
      args...);
  return ok ? device : std::nullopt;
}

// Whether Op takes 0-dim host tensors in its positional arguments, as CUDA
// does (Note [Host scalars only where CUDA takes them]).
template <typename Op>
bool op_takes_host_scalars() {
  static const bool takes = host_scalars_allowed(Op::name, Op::overload_name);
  return takes;
}

// Whether a kernel of Op with these arguments leaves them to the generic
// executor: not on the fast path, or a host scalar Op refuses (the executor
// raises CUDA's device-mismatch error).
template <typename Op, typename... Args>
bool host_scalars_refused(const Args&... args) {
  if (op_takes_host_scalars<Op>()) {
    return false;
  }
  bool host = false;
  for_each_tensor_argument([&](const at::Tensor& t) { host |= !t.device().is_privateuseone(); }, args...);
  return host;
}

// The op's device made current (only if it is not: switching costs), and the
// stream the work goes to.
class DeviceScope {
 public:
  explicit DeviceScope(c10::Device device)
      : guard_(device.index() == c10_npu::current_device() ? std::nullopt : std::optional<c10::Device>(device)),
        stream_(c10_npu::getCurrentNPUStream(device.index())) {}

  const c10_npu::NPUStream& stream() const {
    return stream_;
  }

 private:
  c10_npu::OptionalNPUGuard guard_;
  c10_npu::NPUStream stream_;
};

// --- Outputs: the structured kernel's set_output, for npu ---------------------

// A fresh npu tensor from the caching allocator (without a dispatcher round
// trip through aten::empty_strided; the op's device is current).
at::Tensor allocate_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options);

// As RegisterCPU's resize_out: out= arguments are resized (and then
// restrided to the meta function's strides) only if their shape differs.
void resize_out(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                const c10::TensorOptions& options);

// As RegisterCPU's check_inplace.
void check_inplace(const at::Tensor& self, c10::IntArrayRef sizes, const c10::TensorOptions& options);

// The three ways a structured kernel's output comes to be, as in the
// generated CPU kernels: a fresh tensor, the in-place argument, an out=
// argument. TensorIterator-based metas must also record the output in the
// iterator (the base class's set_output_raw_strided), after it exists.
enum class OutputKind { Fresh, Inplace, Out };

template <typename Meta, OutputKind kKind>
struct NpuMeta final : Meta {
  NpuMeta() = default;
  // In-place and out= forms: the argument that receives the result.
  explicit NpuMeta(const at::Tensor& argument) : argument_(&argument) {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    set_output(i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    set_output(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override {
    return kKind == OutputKind::Fresh ? output : *argument_;
  }

  at::Tensor output; // OutputKind::Fresh: the tensor allocated for the result

 private:
  void set_output(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::TensorOptions options) {
    if constexpr (kKind == OutputKind::Fresh) {
      output = allocate_output(sizes, strides, options);
    } else if constexpr (kKind == OutputKind::Inplace) {
      check_inplace(*argument_, sizes, options);
    } else {
      // Strides of an out= argument that differ from the meta function's are
      // left alone: the CPU kernel on the worker handles them (with a proxy)
      // as it does for a host out= argument.
      resize_out(*argument_, sizes, strides, options);
    }
    if constexpr (kIsTensorIterator<Meta>) {
      this->at::TensorIteratorBase::set_output_raw_strided(i, sizes, strides, options);
    }
  }
  const at::Tensor* argument_ = nullptr; // borrowed for the call
};

// --- The device work ------------------------------------------------------------

// Calls `Fn::call` with the CPU view of the captured arguments. One
// allocation (the work item) per op; the CPU aliases live on the worker.
// An item that runs again (a captured graph's, replayed) keeps what its runs
// share: Note [Prepared kernels of replayed work] (PreparedCall.h).
template <typename Fn, typename... Captures>
struct DeviceWork {
  std::tuple<Captures...> args;
  c10_npu::LaunchSite site; // named in the error message, if captured
  // Set for a call whose kernel the host waits for (Note [Errors at the
  // call]): the kernel's exception goes there, to be raised at the call.
  std::shared_ptr<CallVerification> verification;
  uint64_t signature; // Note [Warnings of queued work]
  // Runs so far (up to 2), and from the second one on what they reuse.
  // `preparing_or_running`: a thread builds or uses `prepared` (replays of
  // one graph on two streams at once may run an item twice at once; the
  // second then runs the ordinary way rather than share it).
  std::atomic<uint8_t> runs{0};
  std::atomic<bool> preparing_or_running{false};
  std::unique_ptr<PreparedCall<Fn, Captures...>> prepared;

  void operator()() {
    if (verification == nullptr) {
      const DeferWarnings warnings(signature);
      const uint8_t earlier = runs.load(std::memory_order_relaxed);
      if (earlier < 2) {
        runs.store(static_cast<uint8_t>(earlier + 1), std::memory_order_relaxed);
      }
      if (earlier >= 1 && !preparing_or_running.exchange(true, std::memory_order_acquire)) {
        const struct Done {
          std::atomic<bool>& flag;
          ~Done() {
            flag.store(false, std::memory_order_release);
          }
        } done{preparing_or_running};
        if (prepared == nullptr) {
          // Before the allocation scope: whatever preparing allocates (the
          // iterator's copies of host scalars) lives with the item, in host
          // memory.
          prepared = std::make_unique<PreparedCall<Fn, Captures...>>(args);
        }
        const KernelAllocationScope allocations;
        prepared->run();
        return;
      }
      // Whatever the kernel allocates is device memory (KernelAllocator.h).
      const KernelAllocationScope allocations;
      run(std::index_sequence_for<Captures...>());
      return;
    }
    const KernelAllocationScope allocations;
    const CollectWarnings warnings(*verification);
    try {
      run(std::index_sequence_for<Captures...>());
    } catch (...) {
      verification->error = std::current_exception();
    }
  }

 private:
  template <size_t... I>
  void run(std::index_sequence<I...>) {
    std::tuple<decltype(materialize(std::get<I>(args)))...> cpu_args(materialize(std::get<I>(args))...);
    Fn::call(std::get<I>(cpu_args)...);
  }
};

// The CPU kernels of the fast path's ops fail at run time only for integer
// arithmetic (division by zero, integers to negative powers): their meta
// functions raise every other error at the call. Only such launches pay for
// capturing the Python line (LaunchSite.h); under ASCEND_LAUNCH_BLOCKING=1,
// where the cost does not matter, all do.
template <typename... Args>
c10_npu::LaunchSite launch_site_if_work_can_fail(const Args&... args) {
  bool integer = false;
  for_each_tensor_argument(
      [&](const at::Tensor& t) { integer |= c10::isIntegralType(t.scalar_type(), /*includeBool=*/true); }, args...);
  return integer || c10_npu::launch_blocking() ? capture_launch_site() : nullptr;
}

// What decides whether a fast-path kernel can fail for a call: the op; its
// tensors' dtypes, ranks and emptiness; its options (div's rounding mode:
// the overloads share a name) and the types of its scalars (Note [Errors at
// the call]; the meta function checked the rest).
template <typename... T>
uint64_t call_signature(const char* name, const T&... args) {
  CallSignature signature(name);
  const auto add_tensor = [&](const at::Tensor& t) {
    signature.add((static_cast<uint64_t>(t.scalar_type()) << 32) | (static_cast<uint64_t>(t.dim()) << 1) |
                  (t.numel() == 0 ? 1 : 0));
  };
  const auto visit = [&](const auto& arg) {
    using Arg = std::decay_t<decltype(arg)>;
    if constexpr (std::is_same_v<Arg, at::Tensor>) {
      arg.defined() ? add_tensor(arg) : signature.add(0x7F);
    } else if constexpr (std::is_same_v<Arg, std::optional<at::Tensor>>) {
      arg.has_value() && arg->defined() ? add_tensor(*arg) : signature.add(0x7F);
    } else if constexpr (std::is_same_v<Arg, std::optional<std::string_view>>) {
      signature.add(arg.has_value() ? std::hash<std::string_view>()(*arg) : 0x22);
    } else if constexpr (std::is_same_v<Arg, bool>) {
      signature.add(0x33 + (arg ? 1 : 0));
    } else if constexpr (std::is_same_v<Arg, c10::Scalar>) {
      signature.add(0x50 + static_cast<uint64_t>(arg.type()));
    }
  };
  (visit(args), ...);
  return signature.digest();
}

// The arguments of a launch its kernel writes: bit i for argument i (a
// tensor). It reads its other tensor arguments.
using WrittenArgs = uint64_t;

// Note [Stream race detection] (the simulator's race_detector.h).
template <typename... T>
void declare_accesses(c10_npu::WorkAccessScope& accesses, WrittenArgs written, const T&... args) {
  size_t position = 0;
  const auto visit = [&](const auto& arg) {
    const bool write = ((written >> position++) & 1) != 0;
    for_each_tensor_argument([&](const at::Tensor& t) { accesses.add(t, write); }, arg);
  };
  (visit(args), ...);
}

// Whether kernel `Fn` writes its first tensor argument (an in-place
// kernel, CallInplace) rather than its last (an out= kernel).
template <typename Fn>
struct WritesFirstArgument : std::false_type {};

// Queues kernel `Fn` on `args`, declaring that it writes the arguments in
// `written` (Note [Stream race detection]).
template <typename Fn, typename... T>
void launch_writing(const c10_npu::NPUStream& stream, const char* name, WrittenArgs written, const T&... args) {
  static_assert(sizeof...(T) <= 64);
  using Work = DeviceWork<Fn, Captured<T>...>;
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    declare_accesses(accesses, written, args...);
  }
  if (C10_UNLIKELY(c10_npu::captures_underway())) {
    std::vector<at::Tensor> tensors;
    for_each_tensor_argument([&](const at::Tensor& t) { tensors.push_back(t); }, args...);
    check_use_beside_capture(name, stream, tensors);
  }
  const uint64_t signature = call_signature(name, args...);
  std::shared_ptr<CallVerification> verification = verification_for(signature);
  // An exception from the work becomes the device-work error of `name`,
  // reported by the next synchronising call (at once under
  // ASCEND_LAUNCH_BLOCKING=1).
  c10_npu::launch_recycled_work<Work>(
      stream, name, c10_npu::WorkFlags::None, std::tuple<Captured<T>...>(capture(args)...),
      launch_site_if_work_can_fail(args...), verification, signature);
  count_fast_path();
  if (verification != nullptr) {
    // Note [Stream race detection]: a device would not wait here.
    finish_verification(verification, signature, [&] { c10_npu::synchronize_unordered(stream); });
  }
}

// As launch_writing, for a kernel that writes its out= argument (the last)
// or, in place, its first.
template <typename Fn, typename... T>
void launch(const c10_npu::NPUStream& stream, const char* name, const T&... args) {
  constexpr WrittenArgs kWritten =
      WritesFirstArgument<Fn>::value ? WrittenArgs{1} : WrittenArgs{1} << (sizeof...(T) - 1);
  launch_writing<Fn>(stream, name, kWritten, args...);
}

// The CPU kernels, as static functions of `Cpu` (see PointwiseKernels.cpp).
// `Native`: the op's CPU kernel class (at::native::structured_*), or void;
// replayed items run it directly (Note [Prepared kernels of replayed work]).
template <typename Cpu, typename NativeKernel = void>
struct CallOut {
  using Native = NativeKernel;
  static constexpr bool kInplace = false;
  template <typename... A>
  static void call(A&&... a) {
    Cpu::out(std::forward<A>(a)...);
  }
};
template <typename Cpu, typename NativeKernel = void>
struct CallInplace {
  using Native = NativeKernel;
  static constexpr bool kInplace = true;
  template <typename... A>
  static void call(A&&... a) {
    Cpu::inplace(std::forward<A>(a)...);
  }
};

// --- The kernels ----------------------------------------------------------------

// Op: the at::_ops struct of the overload; Meta: its at::meta::structured_*
// class; Cpu: its CPU kernels; Native: its CPU kernel class (derived from
// Meta; void if not given), for replays (CallOut).
template <typename Op, typename Meta, typename Cpu, typename Native = void, typename Schema = typename Op::schema>
struct Functional;

template <typename Op, typename Meta, typename Cpu, typename Native, typename... Args>
struct Functional<Op, Meta, Cpu, Native, at::Tensor(Args...)> {
  static_assert(std::is_void_v<Native> || std::is_base_of_v<Meta, Native>);

  static at::Tensor call(Args... args) {
    const auto device = fast_path_device(args...);
    if (!device.has_value() || host_scalars_refused<Op>(args...)) {
      return at::native::call_fallback_fn<&run_on_npu, Op>::call(args...);
    }
    const DeviceScope scope(*device);
    NpuMeta<Meta, OutputKind::Fresh> meta;
    meta.meta(meta_arg(args)...);
    at::Tensor out = std::move(meta.output);
    launch<CallOut<Cpu, Native>>(scope.stream(), Op::name, args..., out);
    return out;
  }
};

template <typename Op, typename Meta, typename Cpu, typename Native = void, typename Schema = typename Op::schema>
struct Inplace;

template <typename Op, typename Meta, typename Cpu, typename Native, typename... Rest>
struct Inplace<Op, Meta, Cpu, Native, at::Tensor&(at::Tensor&, Rest...)> {
  static_assert(std::is_void_v<Native> || std::is_base_of_v<Meta, Native>);

  static at::Tensor& call(at::Tensor& self, Rest... rest) {
    const auto device = fast_path_device(self, rest...);
    if (!device.has_value() || self.device().type() != c10::DeviceType::PrivateUse1 ||
        host_scalars_refused<Op>(rest...)) {
      return at::native::call_fallback_fn<&run_on_npu, Op>::call(self, rest...);
    }
    const DeviceScope scope(*device);
    NpuMeta<Meta, OutputKind::Inplace> meta(self);
    meta.meta(self, meta_arg(rest)...);
    launch<CallInplace<Cpu, Native>>(scope.stream(), Op::name, self, rest...);
    return self;
  }
};

template <typename Op, typename Meta, typename Cpu, typename Native = void, typename Schema = typename Op::schema>
struct Out;

template <typename Op, typename Meta, typename Cpu, typename Native, typename... Args>
struct Out<Op, Meta, Cpu, Native, at::Tensor&(Args...)> {
  static_assert(std::is_void_v<Native> || std::is_base_of_v<Meta, Native>);

  static at::Tensor& call(Args... args) {
    auto refs = std::forward_as_tuple(args...);
    at::Tensor& out = std::get<sizeof...(Args) - 1>(refs);
    const auto device = fast_path_device(args...);
    if (!device.has_value() || out.device().type() != c10::DeviceType::PrivateUse1 ||
        host_scalars_refused<Op>(args...)) {
      return at::native::call_fallback_fn<&run_on_npu, Op>::call(args...);
    }
    const DeviceScope scope(*device);
    NpuMeta<Meta, OutputKind::Out> meta(out);
    run_meta(meta, refs, std::make_index_sequence<sizeof...(Args) - 1>());
    launch<CallOut<Cpu, Native>>(scope.stream(), Op::name, args...);
    return out;
  }

 private:
  template <typename M, typename Refs, size_t... I>
  static void run_meta(M& meta, Refs& refs, std::index_sequence<I...>) {
    meta.meta(meta_arg(std::get<I>(refs))...);
  }
};

// An in-place kernel writes its first argument (launch).
template <typename... P>
struct WritesFirstArgument<CallInplace<P...>> : std::true_type {};

// --- Registration -----------------------------------------------------------------

// "add.Tensor" from at::_ops::add_Tensor.
template <typename Op>
std::string schema_name() {
  std::string name = Op::name;
  name = name.substr(name.find("::") + 2);
  if (Op::overload_name[0] != '\0') {
    name += '.';
    name += Op::overload_name;
  }
  return name;
}

template <typename Kernel, typename Op>
void register_kernel(torch::Library& m) {
  m.impl(schema_name<Op>().c_str(), TORCH_FN(Kernel::call));
}

} // namespace torch_npu_ops::fast

// --- The CPU kernels a fast-path kernel calls -------------------------------

// Declares `name##_cpu` with the out= form of the CPU kernel of `name`
// (arguments, then out), as the device work calls it.
#define TORCH_NPU_OPS_CPU_OUT_KERNEL(name)         \
  struct name##_cpu {                              \
    template <typename... A>                       \
    static void out(A&&... a) {                    \
      at::cpu::name##_outf(std::forward<A>(a)...); \
    }                                              \
  }

// The same with the in-place form too.
#define TORCH_NPU_OPS_CPU_KERNELS(name)            \
  struct name##_cpu {                              \
    template <typename... A>                       \
    static void out(A&&... a) {                    \
      at::cpu::name##_outf(std::forward<A>(a)...); \
    }                                              \
    template <typename... A>                       \
    static void inplace(A&&... a) {                \
      at::cpu::name##_(std::forward<A>(a)...);     \
    }                                              \
  }
