#include "python/Ipc.h"

#include <unistd.h>

#include <cstring>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/impl/AclInterface.h"

namespace py = pybind11;

namespace c10_npu::python {
namespace {

const acl::AclApi& ipc_api(const char* what) {
  const auto& api = acl::api();
  TORCH_CHECK(api.aclrtIpcMemGetExportKey != nullptr && api.aclrtIpcMemImportByKey != nullptr &&
                  api.aclrtIpcMemClose != nullptr,
              what, " needs CANN's IPC memory functions (aclrtIpcMemGetExportKey, aclrtIpcMemImportByKey, "
              "aclrtIpcMemClose), which CANN has since 8.3.RC1; the loaded runtime (",
              acl::backend_info().library, ", CANN ", acl::backend_info().cann_version, ") does not have them");
  return api;
}

// Exports the memory of `tensor`'s storage: (key, bytes the key shares,
// offset of the storage's data in them). The key shares the base
// allocation (getBaseAllocation), so that every block of a segment shares
// one export mechanism, as CUDA's handles do.
py::tuple share_storage(const at::Tensor& tensor) {
  const auto& api = ipc_api("Sharing an npu tensor with another process");
  const c10::Storage& storage = tensor.storage();
  TORCH_CHECK(storage.device_type() == c10::DeviceType::PrivateUse1, "_npu_ipc_share_storage: ", storage.device(),
              " is not an npu device");
  TORCH_CHECK(storage.nbytes() > 0, "_npu_ipc_share_storage: the storage is empty");
  char* data = static_cast<char*>(storage.data_ptr().get());
  size_t base_size = 0;
  void* base = NPUCachingAllocator::getBaseAllocation(storage.data_ptr(), &base_size);
  if (base == nullptr) { // not the caching allocator's: share the storage alone
    base = data;
    base_size = storage.nbytes();
  }
  char key[ACL_IPC_MEM_KEY_LEN] = {};
  {
    py::gil_scoped_release no_gil; // may wait for the device (Note [IPC memory] of the simulator)
    const NPUGuard guard(storage.device());
    ensure_device_context(storage.device().index());
    NPU_CHECK(api.aclrtIpcMemGetExportKey(base, base_size, key, sizeof(key),
                                          ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION));
  }
  return py::make_tuple(py::bytes(key), base_size, data - static_cast<char*>(base));
}

// What an imported storage's deleter releases.
struct ImportedMemory {
  std::string key;
  c10::DeviceIndex device;
  size_t offset; // of the storage's data in the imported memory
  std::mutex mutex;
  // One per message that delivered the storage; closed last, each tells
  // its sender that this process released the memory.
  std::vector<int> release_fds;
};

void release_imported(void* context) {
  auto* imported = static_cast<ImportedMemory*>(context);
  try {
    // Work queued on the memory must finish before it is unmapped.
    const NPUGuard guard(c10::Device(c10::DeviceType::PrivateUse1, imported->device));
    ensure_device_context(imported->device);
    NPU_WARN_IF_ERROR(acl::api().aclrtSynchronizeDevice());
    NPU_WARN_IF_ERROR(acl::api().aclrtIpcMemClose(imported->key.c_str()));
  } catch (const std::exception& e) {
    TORCH_WARN("releasing an npu tensor received from another process failed: ", e.what());
  }
  for (int fd : imported->release_fds) {
    close(fd);
  }
  delete imported;
}

ImportedMemory* imported_memory(const c10::Storage& storage) {
  const c10::DataPtr& data = storage.data_ptr();
  return data.get_deleter() == &release_imported ? static_cast<ImportedMemory*>(data.get_context()) : nullptr;
}

// The storages this process imported, by key: a key arriving again (a
// storage sent twice, or forwarded by another receiver) gets the same
// storage, as CUDA's received handles do; each import is mapped once.
struct ImportCache {
  std::mutex mutex;
  std::unordered_map<std::string, c10::weak_intrusive_ptr<c10::StorageImpl>> storages;
};

ImportCache& import_cache() {
  static auto* cache = new ImportCache(); // leaked: storages may die in static destructors
  return *cache;
}

at::Tensor bytes_of(c10::Storage storage, c10::DeviceIndex device) {
  const auto nbytes = static_cast<int64_t>(storage.nbytes());
  at::Tensor bytes = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
  bytes.set_(std::move(storage), 0, {nbytes}, {1});
  return bytes;
}

// Imports `key` on `device` and returns a 1-D uint8 tensor over `nbytes`
// bytes at `offset` of it, owning the import: freeing its storage closes
// the import and then `release_fd`. A key this process holds already gives
// that storage, which then also owns `release_fd`. Takes over `release_fd`
// also when it fails (closing it).
at::Tensor open_storage(const std::string& key, c10::DeviceIndex device, size_t offset, size_t nbytes,
                        int release_fd) {
  c10::intrusive_ptr<c10::StorageImpl> cached;
  {
    ImportCache& cache = import_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (auto it = cache.storages.begin(); it != cache.storages.end();) {
      it = it->second.expired() ? cache.storages.erase(it) : std::next(it);
    }
    if (auto it = cache.storages.find(key); it != cache.storages.end()) {
      cached = it->second.lock();
    }
  }
  if (cached) {
    c10::Storage storage(std::move(cached));
    ImportedMemory* imported = imported_memory(storage);
    const bool same = imported != nullptr && imported->offset == offset && storage.nbytes() == nbytes;
    if (!same) {
      close(release_fd);
      TORCH_CHECK(false, "_npu_ipc_open_storage: key ", key, " arrived again for another range of its memory");
    }
    {
      std::lock_guard<std::mutex> lock(imported->mutex);
      imported->release_fds.push_back(release_fd);
    }
    return bytes_of(std::move(storage), device);
  }
  void* base = nullptr;
  try {
    const auto& api = ipc_api("Receiving an npu tensor from another process");
    check_device_index(device);
    py::gil_scoped_release no_gil;
    const NPUGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    ensure_device_context(device);
    NPU_CHECK(api.aclrtIpcMemImportByKey(&base, key.c_str(), ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT));
  } catch (...) {
    if (release_fd >= 0) {
      close(release_fd);
    }
    throw;
  }
  // From here on the storage's deleter owns the import and release_fd.
  auto* imported = new ImportedMemory{key, device, offset, {}, {release_fd}};
  c10::DataPtr data(static_cast<char*>(base) + offset, imported, &release_imported,
                    c10::Device(c10::DeviceType::PrivateUse1, device));
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), /*allocator=*/nullptr,
                       /*resizable=*/false);
  {
    ImportCache& cache = import_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.storages.insert_or_assign(key, c10::weak_intrusive_ptr<c10::StorageImpl>(storage.getWeakStorageImpl()));
  }
  return bytes_of(std::move(storage), device);
}

// (key, offset) of a storage this process imported, to forward to another
// process; None for memory of this process.
py::object imported_key(const at::Tensor& tensor) {
  ImportedMemory* imported = imported_memory(tensor.storage());
  if (imported == nullptr) {
    return py::none();
  }
  return py::make_tuple(py::bytes(imported->key), imported->offset);
}

// ---- interprocess events (torch.npu.Event(interprocess=True)) ----

const acl::AclApi& ipc_event_api(const char* what) {
  const auto& api = acl::api();
  TORCH_CHECK(api.aclrtIpcGetEventHandle != nullptr && api.aclrtIpcOpenEventHandle != nullptr, what,
              " needs CANN's IPC event functions (aclrtIpcGetEventHandle, aclrtIpcOpenEventHandle), which CANN "
              "has since 8.5.0; the loaded runtime (",
              acl::backend_info().library, ", CANN ", acl::backend_info().cann_version, ") does not have them");
  return api;
}

aclrtEvent as_event(uintptr_t event) {
  return reinterpret_cast<aclrtEvent>(event);
}

uintptr_t create_ipc_event(c10::DeviceIndex device) {
  ipc_event_api("An interprocess npu event");
  check_device_index(device);
  const NPUGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  ensure_device_context(device);
  aclrtEvent event = nullptr;
  NPU_CHECK(acl::api().aclrtCreateEventWithFlag(&event, ACL_EVENT_IPC));
  return reinterpret_cast<uintptr_t>(event);
}

py::bytes ipc_event_handle(uintptr_t event) {
  const auto& api = ipc_event_api("Event.ipc_handle()");
  aclrtIpcEventHandle handle{};
  NPU_CHECK(api.aclrtIpcGetEventHandle(as_event(event), &handle));
  return py::bytes(handle.reserved, sizeof(handle.reserved));
}

uintptr_t open_ipc_event(c10::DeviceIndex device, const std::string& bytes) {
  const auto& api = ipc_event_api("Event.from_ipc_handle()");
  check_device_index(device);
  TORCH_CHECK(bytes.size() == ACL_IPC_EVENT_HANDLE_SIZE, "Event.from_ipc_handle: a handle has ",
              ACL_IPC_EVENT_HANDLE_SIZE, " bytes, got ", bytes.size());
  aclrtIpcEventHandle handle{};
  std::memcpy(handle.reserved, bytes.data(), sizeof(handle.reserved));
  const NPUGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  ensure_device_context(device);
  aclrtEvent event = nullptr;
  NPU_CHECK(api.aclrtIpcOpenEventHandle(handle, &event));
  return reinterpret_cast<uintptr_t>(event);
}

NPUStream stream_of(int64_t stream_id, c10::DeviceIndex device) {
  check_device_index(device);
  return NPUStream::unpack3(stream_id, device, c10::DeviceType::PrivateUse1);
}

} // namespace

void bind_ipc(py::module_& m) {
  m.def("_npu_ipc_share_storage", &share_storage);
  m.def("_npu_ipc_open_storage", &open_storage);
  m.def("_npu_ipc_imported_key", &imported_key);
  // Interprocess events: raw runtime handles, owned by torch.npu.Event.
  m.def("_npu_ipc_event_create", &create_ipc_event);
  m.def("_npu_ipc_event_handle", &ipc_event_handle);
  m.def("_npu_ipc_event_open", &open_ipc_event);
  m.def("_npu_ipc_event_record", [](uintptr_t event, int64_t stream_id, c10::DeviceIndex device) {
    const NPUStream stream = stream_of(stream_id, device);
    const NPUGuard guard(stream.device());
    ensure_device_context(device);
    NPU_CHECK(acl::api().aclrtRecordEvent(as_event(event), stream.stream()));
  });
  m.def("_npu_ipc_event_wait", [](uintptr_t event, int64_t stream_id, c10::DeviceIndex device) {
    const NPUStream stream = stream_of(stream_id, device);
    const NPUGuard guard(stream.device());
    ensure_device_context(device);
    NPU_CHECK(acl::api().aclrtStreamWaitEvent(stream.stream(), as_event(event)));
  });
  m.def("_npu_ipc_event_query", [](uintptr_t event) {
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    NPU_CHECK(acl::api().aclrtQueryEventStatus(as_event(event), &status));
    return status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
  });
  m.def(
      "_npu_ipc_event_synchronize",
      [](uintptr_t event) { NPU_CHECK(acl::api().aclrtSynchronizeEvent(as_event(event))); },
      py::call_guard<py::gil_scoped_release>());
  m.def("_npu_ipc_event_destroy", [](uintptr_t event) { NPU_WARN_IF_ERROR(acl::api().aclrtDestroyEvent(as_event(event))); });
  m.def("_npu_ipc_close", [](const std::string& key) {
    const auto& api = ipc_api("Releasing a shared npu tensor");
    NPU_CHECK(api.aclrtIpcMemClose(key.c_str()));
  });
}

} // namespace c10_npu::python
