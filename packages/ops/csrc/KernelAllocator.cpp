#include "KernelAllocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {
namespace {

thread_local KernelAllocationScope* tls_scope = nullptr;

// Memory handed out by scopes, by host-access address: device-work memory
// (null flag) or lent output memory (the flag its deleter sets). Kernels
// free some buffers with the allocator's raw deleter (oneDNN's, through
// raw_allocate / raw_deallocate), which gets only the address: this map
// tells whose it is.
std::mutex g_mutex;
std::unordered_map<void*, bool*> g_handed_out;

c10::DeleterFnPtr g_base_raw_deleter = nullptr;

void* device_address(void* host) {
  return reinterpret_cast<void*>(reinterpret_cast<intptr_t>(host) - c10_npu::host_access_offset());
}

void free_device_work(void* host) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_handed_out.erase(host);
  }
  c10_npu::NPUCachingAllocator::free_device_work_memory(device_address(host));
}

// The memory is an npu output's: nothing to free. Lent memory freed after
// its scope ended is no longer registered (the scope reported it as kept).
void release_lent(void* host) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_handed_out.find(host);
  if (it != g_handed_out.end() && it->second != nullptr) {
    *it->second = true;
  }
}

void raw_delete(void* data) {
  bool* lent_flag = nullptr;
  bool handed_out = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const auto it = g_handed_out.find(data);
    if (it != g_handed_out.end()) {
      handed_out = true;
      lent_flag = it->second;
      if (lent_flag != nullptr) {
        *lent_flag = true;
      }
    }
  }
  if (!handed_out) {
    g_base_raw_deleter(data);
  } else if (lent_flag == nullptr) {
    free_device_work(data);
  }
}

class KernelAllocator final : public c10::Allocator {
 public:
  explicit KernelAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    KernelAllocationScope* scope = tls_scope;
    return scope == nullptr ? base_->allocate(n) : scope->allocate(n);
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return g_base_raw_deleter == nullptr ? nullptr : &raw_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

} // namespace

void install_kernel_allocator() {
  static const bool installed = [] {
    c10::Allocator* base = c10::GetCPUAllocator();
    g_base_raw_deleter = base->raw_deleter();
    // Never destroyed: CPU tensors may outlive every other static.
    auto* wrapper = new KernelAllocator(base);
    // Priority 1 wraps PyTorch's default allocator (priority 0). If another
    // library installed one with a higher priority, it is left alone and
    // kernels allocate host memory.
    c10::SetCPUAllocator(wrapper, /*priority=*/1);
    return c10::GetCPUAllocator() == wrapper;
  }();
  (void)installed;
}

KernelAllocationScope::KernelAllocationScope() : previous_(tls_scope) {
  tls_scope = this;
}

KernelAllocationScope::~KernelAllocationScope() {
  end();
}

void KernelAllocationScope::end() {
  if (active_) {
    active_ = false;
    tls_scope = previous_;
  }
}

c10::DataPtr KernelAllocationScope::allocate(size_t bytes) {
  const int64_t index = next_index_++;
  if (lender_ != nullptr) {
    c10::DataPtr lent = lender_->lend(index, bytes);
    if (lent.get() != nullptr) {
      return lent;
    }
  }
  if (device_ < 0) {
    device_ = c10_npu::running_work_device();
  }
  void* device = c10_npu::NPUCachingAllocator::allocate_device_work_memory(device_, bytes);
  void* host = device == nullptr ? nullptr : c10_npu::host_access(device);
  if (host != nullptr) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_handed_out.emplace(host, nullptr);
  }
  if (lender_ != nullptr) {
    lender_->allocated(index, bytes, host);
  }
  return c10::DataPtr(host, host, &free_device_work, c10::Device(c10::DeviceType::CPU));
}

c10::DataPtr lend_memory(void* data, bool* released) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_handed_out[data] = released;
  }
  return c10::DataPtr(data, data, &release_lent, c10::Device(c10::DeviceType::CPU));
}

bool forget_lent(void* data) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_handed_out.find(data);
  if (it == g_handed_out.end() || it->second == nullptr) {
    return true;
  }
  const bool released = *it->second;
  g_handed_out.erase(it);
  return released;
}

bool in_device_work_memory(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &free_device_work;
}

} // namespace torch_npu_ops
