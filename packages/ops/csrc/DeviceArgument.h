// What device work keeps of a kernel's arguments, and how it sees them again.
//
// The dedicated kernels (FastPath.h) capture every argument when they queue
// their work and rebuild the CPU kernel's arguments on the stream's worker.
// A tensor is captured as plain data: its device address and geometry (an
// npu tensor) or its value (a 0-dim host tensor, e.g. a Python number
// wrapped by the argument parser). Capturing never references npu storage:
// as in the generic executor, memory freed by the host is reused in stream
// order, so queued work does not keep intermediates alive. Everything else
// (Scalars, int lists, strings, optionals) is copied by value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/SmallVector.h>

namespace torch_npu_ops {

// A tensor argument of queued device work. Compact on purpose: the host
// writes it and the worker reads it on another core, so every cache line it
// spans moves between cores once per op. Sizes and strides of up to
// kInlineDims dimensions are stored inline, packed (sizes, then strides).
class DeviceTensorArg {
 public:
  DeviceTensorArg() = default;
  explicit DeviceTensorArg(const at::Tensor& t);

  // On the worker: a CPU tensor over the captured memory (an npu tensor's
  // host-access alias, or this object's copy of a host scalar), or an
  // undefined tensor. Valid while this object lives.
  at::Tensor materialize() const;

  // A 0-dim host tensor's value, captured at launch (fixed for the work's
  // lifetime, unlike device memory).
  bool is_host_scalar() const {
    return kind_ == Kind::HostScalar;
  }

 private:
  static constexpr int kInlineDims = 4;
  enum class Kind : uint8_t { Undefined, Device, HostScalar };

  const int64_t* geometry() const {
    return heap_geometry_ != nullptr ? heap_geometry_.get() : inline_;
  }

  void* data_ = nullptr; // device address of the first element
  Kind kind_ = Kind::Undefined;
  bool wrapped_number_ = false;
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  int8_t dim_ = 0;
  std::unique_ptr<int64_t[]> heap_geometry_; // more than kInlineDims dimensions
  // Sizes then strides; for a host scalar, its value (complex128 at most).
  alignas(16) int64_t inline_[2 * kInlineDims];
};

// capture(): host argument -> what the work stores.
inline DeviceTensorArg capture(const at::Tensor& t) {
  return DeviceTensorArg(t);
}
inline std::optional<DeviceTensorArg> capture(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<DeviceTensorArg>(DeviceTensorArg(*t)) : std::nullopt;
}
inline c10::SmallVector<int64_t, 5> capture(c10::IntArrayRef v) {
  return c10::SmallVector<int64_t, 5>(v.begin(), v.end());
}
inline std::optional<c10::SmallVector<int64_t, 5>> capture(at::OptionalIntArrayRef v) {
  return v.has_value() ? std::optional<c10::SmallVector<int64_t, 5>>(capture(*v)) : std::nullopt;
}
inline std::string capture(std::string_view s) {
  return std::string(s);
}
inline std::optional<std::string> capture(std::optional<std::string_view> s) {
  return s.has_value() ? std::optional<std::string>(std::string(*s)) : std::nullopt;
}
template <typename T>
  requires(std::is_trivially_copyable_v<T> || std::is_same_v<T, c10::Scalar> ||
           std::is_same_v<T, std::optional<c10::Scalar>>)
T capture(const T& v) {
  return v;
}

// materialize(): what the work stores -> the CPU kernel's argument.
inline at::Tensor materialize(const DeviceTensorArg& t) {
  return t.materialize();
}
inline std::optional<at::Tensor> materialize(const std::optional<DeviceTensorArg>& t) {
  return t.has_value() ? std::optional<at::Tensor>(t->materialize()) : std::nullopt;
}
inline c10::IntArrayRef materialize(const c10::SmallVector<int64_t, 5>& v) {
  return c10::IntArrayRef(v);
}
inline at::OptionalIntArrayRef materialize(const std::optional<c10::SmallVector<int64_t, 5>>& v) {
  return v.has_value() ? at::OptionalIntArrayRef(c10::IntArrayRef(*v)) : at::OptionalIntArrayRef();
}
inline std::string_view materialize(const std::string& s) {
  return s;
}
inline std::optional<std::string_view> materialize(const std::optional<std::string>& s) {
  return s.has_value() ? std::optional<std::string_view>(*s) : std::nullopt;
}
template <typename T>
  requires(std::is_trivially_copyable_v<T> || std::is_same_v<T, c10::Scalar> ||
           std::is_same_v<T, std::optional<c10::Scalar>>)
const T& materialize(const T& v) {
  return v;
}

template <typename T>
using Captured = decltype(capture(std::declval<const std::decay_t<T>&>()));

} // namespace torch_npu_ops
