// aclrtIpcMem*: device memory shared between processes (Note [IPC memory],
// ipc_memory.h).
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "api_impl.h"
#include "device.h"
#include "errors.h"
#include "event.h"
#include "ipc_event.h"
#include "feature_gates.h"
#include "ipc_memory.h"
#include "model.h"
#include "runtime.h"

namespace npu_sim::impl {
namespace {

aclError ipcEntry(const char* api) {
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  return requireFeature(Feature::kIpcMemory, api);
}

aclError checkKey(const char* api, const char* key) {
  if (key == nullptr || key[0] == '\0') {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: key is %s", api, key == nullptr ? "null" : "empty");
  }
  return ACL_SUCCESS;
}

} // namespace

aclError ipcMemGetExportKey(void* devPtr, size_t size, char* key, size_t len, uint64_t flags) {
  const char* api = "aclrtIpcMemGetExportKey";
  if (aclError err = ipcEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (devPtr == nullptr || size == 0 || key == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s", api,
                devPtr == nullptr ? "devPtr is null"
                                  : (size == 0 ? "size is 0" : "key is null"));
  }
  if (len < ACL_IPC_MEM_KEY_LEN) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: the key buffer has %zu bytes; it needs %d (pass len = %d)", api, len,
                ACL_IPC_MEM_KEY_LEN, ACL_IPC_MEM_KEY_LEN);
  }
  if (flags != ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT &&
      flags != ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: unknown flags 0x%llx (ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT or "
                "ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)",
                api, static_cast<unsigned long long>(flags));
  }
  Runtime& rt = Runtime::get();
  const AddressLayout& layout = rt.layout();
  const uintptr_t p = reinterpret_cast<uintptr_t>(devPtr);
  if (!layout.inDeviceRange(p)) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %p is not device memory%s", api, devPtr,
                layout.inAccessRange(p)
                    ? " (it is a host-access alias: pass the device address)"
                    : "");
  }
  DeviceMemory& memory = rt.windowMemory(p);
  if (memory.exportNeedsSharedPages(p)) {
    // The allocation's pages move to shareable memory: no device work may
    // write them meanwhile (Note [IPC memory]).
    Device& device = rt.device(memory.device());
    if (Model* model = captureOnDevice(device.id())) {
      return refuseDuringCapture(model, api, "exporting memory of a capturing device");
    }
    if (aclError err = device.drain(api, nullptr); err != ACL_SUCCESS) {
      return err;
    }
  }
  std::vector<SharedPiece> pieces;
  uint64_t lead = 0;
  if (aclError err = memory.exportPieces(p, size, &pieces, &lead); err != ACL_SUCCESS) {
    return err;
  }
  std::string made;
  if (aclError err = ipc::exportMemory(pieces, lead, size, flags, &made); err != ACL_SUCCESS) {
    return err;
  }
  std::memcpy(key, made.c_str(), made.size() + 1);
  return ACL_SUCCESS;
}

aclError ipcMemImportByKey(void** devPtr, const char* key, uint64_t flags) {
  const char* api = "aclrtIpcMemImportByKey";
  if (aclError err = ipcEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (devPtr == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is null", api);
  }
  if (aclError err = checkKey(api, key); err != ACL_SUCCESS) {
    return err;
  }
  // Peer access changes nothing: every simulated device reaches every other.
  if (flags != ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT &&
      flags != ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: unknown flags 0x%llx (ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT or "
                "ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)",
                api, static_cast<unsigned long long>(flags));
  }
  Device* device = nullptr;
  if (aclError err = Runtime::get().currentDevice(api, &device); err != ACL_SUCCESS) {
    return err;
  }
  return ipc::importMemory(device->memory(), key, devPtr);
}

aclError ipcMemSetImportPid(const char* key, int32_t* pid, size_t num) {
  const char* api = "aclrtIpcMemSetImportPid";
  if (aclError err = ipcEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = checkKey(api, key); err != ACL_SUCCESS) {
    return err;
  }
  if (pid == nullptr || num == 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s", api,
                pid == nullptr ? "pid is null" : "num is 0");
  }
  return ipc::setImportPids(key, pid, num);
}

aclError ipcMemClose(const char* key) {
  const char* api = "aclrtIpcMemClose";
  if (aclError err = ipcEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = checkKey(api, key); err != ACL_SUCCESS) {
    return err;
  }
  return ipc::closeKey(key);
}

aclError deviceGetBareTgid(int32_t* pid) {
  if (pid == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceGetBareTgid: pid is null");
  }
  // No virtual machine between the simulator and its host: the pid is it.
  *pid = static_cast<int32_t>(getpid());
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Events (Note [IPC events], ipc_event.h)

aclError ipcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle* handle) {
  const char* api = "aclrtIpcGetEventHandle";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = requireFeature(Feature::kIpcEvent, api); err != ACL_SUCCESS) {
    return err;
  }
  Event* e = Event::fromHandle(event);
  if (e == nullptr || handle == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s", api,
                handle == nullptr ? "handle is null" : "event is not a live event");
  }
  if (e->isOpened()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: the event was opened from another process; get the handle in the process "
                "that created it",
                api);
  }
  if ((e->flags() & ACL_EVENT_IPC) == 0) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: the event was not created with ACL_EVENT_IPC (aclrtCreateEventWithFlag)",
                api);
  }
  std::string text;
  if (aclError err = e->exportState(&text); err != ACL_SUCCESS) {
    return err;
  }
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, text.c_str(), std::min(text.size(), sizeof(handle->reserved) - 1));
  return ACL_SUCCESS;
}

aclError ipcOpenEventHandle(const aclrtIpcEventHandle& handle, aclrtEvent* event) {
  const char* api = "aclrtIpcOpenEventHandle";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = requireFeature(Feature::kIpcEvent, api); err != ACL_SUCCESS) {
    return err;
  }
  if (event == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: event is null", api);
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice(api, &device); err != ACL_SUCCESS) {
    return err;
  }
  char text[sizeof(handle.reserved) + 1] = {};
  std::memcpy(text, handle.reserved, sizeof(handle.reserved));
  IpcEventState* state = nullptr;
  if (aclError err = IpcEventState::open(text, &state); err != ACL_SUCCESS) {
    return err;
  }
  *event = Event::opened(state)->handle();
  return ACL_SUCCESS;
}

} // namespace npu_sim::impl
