#include "SharedStorages.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include "IValueTensors.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {
namespace {

template <typename F>
void for_each_npu_storage(const std::vector<c10::IValue>& args, const F& f) {
  for (const auto& arg : args) {
    for_each_tensor(arg, [&](const at::Tensor& t) {
      if (t.defined() && t.device().is_privateuseone() && t.layout() == c10::kStrided && t.has_storage()) {
        f(t.storage().unsafeGetStorageImpl());
      }
    });
  }
}

} // namespace

bool shares_npu_storage(const std::vector<c10::IValue>& args) {
  std::vector<const c10::StorageImpl*> seen;
  bool shared = false;
  for_each_npu_storage(args, [&](const c10::StorageImpl* s) {
    for (const auto* other : seen) {
      shared |= other == s;
    }
    seen.push_back(s);
  });
  return shared;
}

void storage_sharing_pattern(const std::vector<c10::IValue>& args, std::vector<uint32_t>& out) {
  std::vector<const c10::StorageImpl*> seen;
  for_each_npu_storage(args, [&](const c10::StorageImpl* s) {
    uint32_t ordinal = 0;
    while (ordinal < seen.size() && seen[ordinal] != s) {
      ++ordinal;
    }
    if (ordinal == seen.size()) {
      seen.push_back(s);
    }
    out.push_back(ordinal);
  });
}

at::Tensor SharedStorages::view(const at::Tensor& t) {
  const c10::Storage& npu_storage = t.storage();
  auto it = storages_.find(npu_storage.unsafeGetStorageImpl());
  if (it == storages_.end()) {
    const size_t nbytes = npu_storage.nbytes();
    c10::Storage storage;
    if (device_ == c10::DeviceType::CPU) {
      void* host = npu_storage.data() == nullptr ? nullptr : c10_npu::host_access(const_cast<void*>(npu_storage.data()));
      // Not owning: the npu storage keeps the memory (the work item that
      // uses this view runs before the memory can be reused, in stream order).
      storage = c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                             c10::DataPtr(host, c10::Device(c10::DeviceType::CPU)),
                             resizable_ ? c10::GetCPUAllocator() : nullptr, resizable_);
    } else {
      // Resizable: a meta kernel resizes its empty out= arguments (the CPU
      // views of those are not shared: see view()).
      storage = c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                             c10::DataPtr(nullptr, c10::Device(c10::DeviceType::Meta)),
                             c10::GetAllocator(c10::DeviceType::Meta), /*resizable=*/true);
    }
    it = storages_.emplace(npu_storage.unsafeGetStorageImpl(), std::move(storage)).first;
  }
  const c10::DispatchKeySet keys =
      device_ == c10::DeviceType::CPU ? c10::DispatchKeySet(c10::DispatchKey::CPU) : c10::DispatchKeySet(c10::DispatchKey::Meta);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(it->second), keys, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  at::Tensor view(std::move(impl));
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

} // namespace torch_npu_ops
