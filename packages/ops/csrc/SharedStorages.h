// Views of an op's npu arguments on the CPU (for its kernel) or the meta
// device (for its meta kernel) that share storages where the npu tensors do.
//
// Kernels and meta kernels check memory overlap between their arguments
// (an out= argument that overlaps an input is "unsupported operation" for
// gather, index_select, masked_select, ...; TensorIterator refuses partial
// overlap) by comparing storages. Separate views over the same npu memory
// would hide the overlap, and the kernel would silently compute garbage:
// when two arguments share an npu storage, their views share one storage
// too, and the kernel sees what it sees on the CPU. (When no storage is
// shared, each view simply gets its own, the cheap common case.)
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>

namespace torch_npu_ops {

// True if some npu storage holds more than one of the tensors in `args`.
bool shares_npu_storage(const std::vector<c10::IValue>& args);

// Appends to `out`, for each npu tensor of `args` in order, the ordinal of
// its storage among the storages met so far: calls that share storages the
// same way get the same sequence (part of cache keys and call signatures).
void storage_sharing_pattern(const std::vector<c10::IValue>& args, std::vector<uint32_t>& out);

class SharedStorages {
 public:
  // `resizable`: CPU storages a kernel may resize (moving them to new host
  // memory, for the synchronous path, which copies such results back).
  explicit SharedStorages(c10::DeviceType device, bool resizable = false) : device_(device), resizable_(resizable) {}

  // npu tensor `t` seen on this object's device (CPU: over t's memory, to be
  // dereferenced only in device work; Meta: without data), on the one
  // storage of that device that stands for t's npu storage. CPU views are
  // resizable only if constructed so: give a tensor without memory (an empty
  // out= the kernel resizes) its own CPU tensor instead.
  at::Tensor view(const at::Tensor& t);

 private:
  c10::DeviceType device_;
  bool resizable_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages_;
};

} // namespace torch_npu_ops
