// What a fast-path work item (FastPath.h) builds once and reuses when it
// runs again: Note [Prepared kernels of replayed work].
//
// Note [Prepared kernels of replayed work]
// A work item that runs more than once is an item of a captured graph (Note
// [Device work items run many times], core's NPUWork.h): each replay runs it
// on the same device addresses, with the same sizes, strides and dtypes and
// the same captured scalars; only the values in device memory change (and a
// random op's generator offset, which its kernel reads when it runs). The
// ordinary run of a fast-path item wraps the memory as CPU tensors and calls
// the CPU kernel: the structured op's meta function, a TensorIterator built
// from scratch (shape, type promotion, strides, overlap checks), output
// checks, then the loop. For 64 elements that is ~2 us, of which the loop is
// a few dozen ns. So from its second run on, an item keeps a PreparedCall:
//
// - the CPU aliases of its arguments, built once;
// - when the kernel names its op's CPU kernel class (the `Native` argument of
//   FastPath.h's kernels, e.g. at::native::structured_mul_out), that kernel
//   object after its meta function ran on the aliases. For TensorIterator
//   ops this is the configured iterator, so a run is the kernel's impl():
//   the op's DispatchStub, straight to the loop. For the others (matmul,
//   softmax, reductions) a run skips the meta function.
//
// A prepared kernel object is kept only if its impl() computes exactly what
// the ordinary call computes; otherwise the item runs the ordinary CPU
// kernel on the kept aliases:
//
// - the output already has the meta function's sizes and dtype (and its
//   strides, when the kernel asks for exact strides): else the CPU kernel
//   would resize it or compute into a proxy and copy back;
// - the iterator holds no temporary copy of a device argument. On the CPU,
//   type promotion and output casts copy operands when the iterator is built
//   (and cast outputs back after the loop); a kept input copy would hold the
//   values of the run that built it. Copies of captured host scalars are
//   fine: their value is part of the capture;
// - impl() leaves its iterator as meta() built it. A few CPU kernels remove
//   a scalar operand from the iterator they run (reduced-precision mul/div
//   by a scalar); that is checked after every run (operand count and data
//   pointers), and an item whose iterator changed drops it (the run that
//   changed it computed the right result) and runs the ordinary way after.
//
// A PreparedCall is built and used by one thread at a time: a graph's
// replays on one stream run in order, and an item run again while another
// thread runs it (one graph replayed on two streams at once, which races on
// the graph's memory anyway) runs the ordinary way (FastPath.h's
// DeviceWork).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>
#include <c10/util/SmallVector.h>

#include "DeviceArgument.h"
#include "ExecutionCounters.h"

namespace torch_npu_ops::fast {

// Meta functions (and impl functions) take optional Scalars by reference
// (OptionalScalarRef), as the generated CPU kernels pass them.
template <typename T>
const T& meta_arg(const T& v) {
  return v;
}
inline at::OptionalScalarRef meta_arg(const std::optional<c10::Scalar>& v) {
  return v.has_value() ? at::OptionalScalarRef(&*v) : at::OptionalScalarRef();
}

template <typename Meta>
constexpr bool kIsTensorIterator = std::is_base_of_v<at::TensorIteratorBase, Meta>;

// An op's CPU kernel object (`Native`: its at::native::structured_* class)
// bound to an existing output, as RegisterCPU's out= and in-place wrappers
// bind it, minus resizing and proxies: when those would be needed,
// reusable() is false.
template <typename Native>
class PreparedStructured final : public Native {
 public:
  explicit PreparedStructured(const at::Tensor& output) : output_(output) {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    bind(i, sizes, strides, /*exact_strides=*/true, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    bind(i, sizes, strides, /*exact_strides=*/false, options);
  }
  const at::Tensor& maybe_get_output(int64_t /*i*/) override {
    return output_;
  }

  // After meta(): whether impl() alone computes what the ordinary call
  // would. `host_scalars`: the aliases of captured host scalars.
  bool reusable(c10::ArrayRef<const c10::TensorImpl*> host_scalars) {
    if (!output_matches_) {
      return false;
    }
    if constexpr (kIsTensorIterator<Native>) {
      for (const at::OperandInfo& op : this->operands_) {
        const at::TensorBase& original = op.original_tensor_base();
        if (original.defined() &&
            (op.is_output ||
             std::find(host_scalars.begin(), host_scalars.end(), original.unsafeGetTensorImpl()) ==
                 host_scalars.end())) {
          return false;
        }
      }
      for (int i = 0; i < this->ntensors(); ++i) {
        data_.push_back(this->data_ptr(i));
      }
    }
    return true;
  }

  // After impl(): whether the iterator is still as meta() built it.
  bool unchanged() const {
    if constexpr (kIsTensorIterator<Native>) {
      if (this->ntensors() != static_cast<int>(data_.size())) {
        return false;
      }
      for (int i = 0; i < this->ntensors(); ++i) {
        if (this->data_ptr(i) != data_[i]) {
          return false;
        }
      }
    }
    return true;
  }

 private:
  void bind(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides, bool exact_strides,
            c10::TensorOptions options) {
    const c10::TensorImpl* out = output_.unsafeGetTensorImpl();
    output_matches_ &= i == 0 && out->sizes() == sizes && out->dtype() == options.dtype() &&
        (!exact_strides || out->strides() == strides);
    if constexpr (kIsTensorIterator<Native>) {
      this->at::TensorIteratorBase::set_output_raw_strided(i, sizes, strides, options);
    }
  }

  const at::Tensor& output_; // the PreparedCall's alias of the output
  bool output_matches_ = true;
  c10::SmallVector<void*, 4> data_; // the iterator's operands after meta()
};

// Fn: the work's kernel (FastPath.h's CallOut / CallInplace, or a kernel
// struct of its own with a static call()); `Fn::Native`, if Fn has it and it
// is not void, is the op's CPU kernel class.
template <typename Fn, typename = void>
struct NativeOf {
  using type = void;
  static constexpr bool kInplace = false;
};
template <typename Fn>
struct NativeOf<Fn, std::void_t<typename Fn::Native>> {
  using type = typename Fn::Native;
  static constexpr bool kInplace = Fn::kInplace;
};

struct NoPreparedKernel {};

template <typename Fn, typename... Captures>
class PreparedCall {
 public:
  using Native = typename NativeOf<Fn>::type;
  static constexpr size_t kArgs = sizeof...(Captures);

  explicit PreparedCall(const std::tuple<Captures...>& args)
      : cpu_args_(materialize_all(args, std::index_sequence_for<Captures...>())) {
    if constexpr (!std::is_void_v<Native>) {
      prepare(args, std::index_sequence_for<Captures...>());
    }
    count_prepared(op_ != nullptr ? PreparedRuns::Kernel : PreparedRuns::Aliases);
  }
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  void run() {
    if constexpr (!std::is_void_v<Native>) {
      if (op_ != nullptr) {
        call_impl(std::index_sequence_for<Captures...>());
        if (!op_->unchanged()) {
          op_.reset();
          count_prepared(PreparedRuns::Dropped);
        }
        return;
      }
    }
    std::apply([](auto&... a) { Fn::call(a...); }, cpu_args_);
  }

 private:
  using CpuArgs = std::tuple<decltype(materialize(std::declval<const Captures&>()))...>;
  // In-place kernels write their first argument; out= kernels their last.
  static constexpr bool kInplace = NativeOf<Fn>::kInplace;
  static constexpr size_t kOutput = kInplace ? 0 : kArgs - 1;
  static constexpr size_t kMetaArgs = kInplace ? kArgs : kArgs - 1;
  using Op = typename std::conditional_t<std::is_void_v<Native>, std::type_identity<NoPreparedKernel>,
                                         std::type_identity<PreparedStructured<Native>>>::type;

  template <size_t... I>
  static CpuArgs materialize_all(const std::tuple<Captures...>& args, std::index_sequence<I...>) {
    return CpuArgs(materialize(std::get<I>(args))...);
  }

  template <size_t... I>
  void prepare(const std::tuple<Captures...>& args, std::index_sequence<I...>) {
    c10::SmallVector<const c10::TensorImpl*, 2> host_scalars;
    const auto note_host_scalar = [&](const auto& capture, const auto& alias) {
      using C = std::decay_t<decltype(capture)>;
      if constexpr (std::is_same_v<C, DeviceTensorArg>) {
        if (capture.is_host_scalar()) {
          host_scalars.push_back(alias.unsafeGetTensorImpl());
        }
      }
    };
    (note_host_scalar(std::get<I>(args), std::get<I>(cpu_args_)), ...);
    auto op = std::make_unique<Op>(std::get<kOutput>(cpu_args_));
    call_meta(*op, std::make_index_sequence<kMetaArgs>());
    if (op->reusable(host_scalars)) {
      op_ = std::move(op);
    }
  }

  template <size_t... I>
  void call_meta(Op& op, std::index_sequence<I...>) {
    op.meta(meta_arg(std::get<I>(cpu_args_))...);
  }

  template <size_t... I>
  void call_impl(std::index_sequence<I...>) {
    if constexpr (kInplace) {
      op_->impl(meta_arg(std::get<I>(cpu_args_))..., std::get<0>(cpu_args_));
    } else {
      op_->impl(meta_arg(std::get<I>(cpu_args_))...);
    }
  }

  CpuArgs cpu_args_;
  std::unique_ptr<Op> op_; // null: run Fn::call
};

} // namespace torch_npu_ops::fast
