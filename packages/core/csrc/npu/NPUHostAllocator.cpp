#include "npu/NPUHostAllocator.h"

#include <cstring>

#include "npu/NPUEvent.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::NPUHostAllocator {
namespace {

struct NPUHostAllocatorImpl
    : public at::CachingHostAllocatorImpl<NPUStream, NPUEvent> {
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    lazy_init();
    const aclError err = acl::api().aclrtMallocHost(ptr, size);
    if (err == ACL_ERROR_RT_MEMORY_ALLOCATION || err == ACL_ERROR_BAD_ALLOC) {
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "Pinned host memory exhausted: tried to allocate ",
          c10::CachingAllocator::format_size(size),
          ". Free pinned tensors you no longer need or call torch.npu.empty_cache().");
    }
    NPU_CHECK(err);
  }

  void free_block(at::HostBlock<NPUStream>* block) override {
    NPU_CHECK(acl::api().aclrtFreeHost(block->ptr_));
  }

  void record_stream(std::optional<std::vector<NPUEvent>>& events, NPUStream stream) override {
    if (!events.has_value()) {
      events.emplace();
    }
    events->emplace_back();
    events->back().record(stream);
  }

  bool query_event(NPUEvent& event) override {
    return event.query();
  }

  NPUStream get_current_stream() const override {
    return getCurrentNPUStream();
  }

  bool stream_is_capturing(NPUStream /*stream*/) const override {
    return false;
  }
};

void raw_local_deleter(void* ptr);

struct NPUHostAllocatorInterface final
    : public at::CachingHostAllocatorInterface<NPUHostAllocatorImpl, raw_local_deleter> {};

// Leaked on purpose: pinned tensors may outlive static destruction order.
NPUHostAllocatorInterface* const g_host_allocator = new NPUHostAllocatorInterface();

void raw_local_deleter(void* ptr) {
  g_host_allocator->free(ptr);
}

struct RegisterHostAllocator {
  RegisterHostAllocator() {
    at::setHostAllocator(c10::DeviceType::PrivateUse1, g_host_allocator);
  }
} g_register_host_allocator;

} // namespace

at::HostAllocator* get() {
  return g_host_allocator;
}

bool record_event(void* ptr, void* ctx, const NPUStream& stream) {
  return g_host_allocator->record_event(ptr, ctx, stream.unwrap());
}

bool is_pinned_ptr(const void* ptr) {
  if (ptr == nullptr) {
    return false;
  }
  aclrtPtrAttributes attributes{};
  if (acl::api().aclrtPointerGetAttributes(ptr, &attributes) != ACL_SUCCESS) {
    acl::api().aclGetRecentErrMsg();
    return false;
  }
  return attributes.location.type == ACL_MEM_LOCATION_TYPE_HOST;
}

} // namespace c10_npu::NPUHostAllocator
