// The extern "C" CANN runtime entry points. Thin: each forwards to
// npu_sim::impl under guarded(). Including acl_functions.h makes the
// compiler check every definition against the contract's signature.
#pragma GCC visibility push(default)
#include "acl_functions.h"
#pragma GCC visibility pop

#include "api_guard.h"
#include "api_impl.h"

using npu_sim::guarded;
namespace impl = npu_sim::impl;

// Every function of the contract must be defined here: a missing one fails
// the link of this check (-Wl,--no-undefined keeps it from being deferred).
#define NPU_SIM_TAKE_ADDRESS(ret, name, params, args) reinterpret_cast<void*>(&::name),
[[maybe_unused]] __attribute__((used)) static void* const kEveryAclFunction[] = {
    TORCH_NPU_ACL_REQUIRED_FUNCTIONS(NPU_SIM_TAKE_ADDRESS)
    TORCH_NPU_ACL_OPTIONAL_FUNCTIONS(NPU_SIM_TAKE_ADDRESS)};
#undef NPU_SIM_TAKE_ADDRESS

extern "C" {

// ---- initialisation and devices ----

NPU_SIM_EXPORT aclError aclInit(const char* configPath) {
  return guarded("aclInit", [&] { return impl::init(configPath); });
}

NPU_SIM_EXPORT aclError aclFinalize() {
  return guarded("aclFinalize", [&] { return impl::finalize(); });
}

NPU_SIM_EXPORT aclError aclrtSetDevice(int32_t deviceId) {
  return guarded("aclrtSetDevice", [&] { return impl::setDevice(deviceId); });
}

NPU_SIM_EXPORT aclError aclrtResetDevice(int32_t deviceId) {
  return guarded("aclrtResetDevice", [&] { return impl::resetDevice(deviceId); });
}

NPU_SIM_EXPORT aclError aclrtGetDevice(int32_t* deviceId) {
  return guarded("aclrtGetDevice", [&] { return impl::getDevice(deviceId); });
}

NPU_SIM_EXPORT aclError aclrtGetDeviceCount(uint32_t* count) {
  return guarded("aclrtGetDeviceCount", [&] { return impl::getDeviceCount(count); });
}

NPU_SIM_EXPORT aclError aclrtSynchronizeDevice() {
  return guarded("aclrtSynchronizeDevice", [&] { return impl::synchronizeDevice(); });
}

NPU_SIM_EXPORT const char* aclrtGetSocName() {
  return impl::socName();
}

NPU_SIM_EXPORT const char* aclGetRecentErrMsg() {
  return npu_sim::takeRecentError();
}

NPU_SIM_EXPORT aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion,
                                        int32_t* patchVersion) {
  return guarded("aclrtGetVersion",
                 [&] { return impl::getVersion(majorVersion, minorVersion, patchVersion); });
}

NPU_SIM_EXPORT aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr,
                                           int64_t* value) {
  return guarded("aclrtGetDeviceInfo", [&] { return impl::getDeviceInfo(deviceId, attr, value); });
}

NPU_SIM_EXPORT aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId,
                                                 int32_t peerDeviceId) {
  return guarded("aclrtDeviceCanAccessPeer",
                 [&] { return impl::deviceCanAccessPeer(canAccessPeer, deviceId, peerDeviceId); });
}

NPU_SIM_EXPORT aclError aclrtGetDeviceUtilizationRate(int32_t deviceId,
                                                      aclrtUtilizationInfo* utilizationInfo) {
  return guarded("aclrtGetDeviceUtilizationRate",
                 [&] { return impl::getDeviceUtilizationRate(deviceId, utilizationInfo); });
}

// ---- model capture ----

NPU_SIM_EXPORT aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  return guarded("aclmdlRICaptureBegin", [&] { return impl::captureBegin(stream, mode); });
}

NPU_SIM_EXPORT aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status,
                                               aclmdlRI* modelRI) {
  return guarded("aclmdlRICaptureGetInfo", [&] { return impl::captureGetInfo(stream, status, modelRI); });
}

NPU_SIM_EXPORT aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI) {
  return guarded("aclmdlRICaptureEnd", [&] { return impl::captureEnd(stream, modelRI); });
}

NPU_SIM_EXPORT aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char* path, uint32_t flags) {
  return guarded("aclmdlRIDebugJsonPrint", [&] { return impl::modelDebugJsonPrint(modelRI, path, flags); });
}

NPU_SIM_EXPORT aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  return guarded("aclmdlRIExecuteAsync", [&] { return impl::modelExecuteAsync(modelRI, stream); });
}

NPU_SIM_EXPORT aclError aclmdlRIDestroy(aclmdlRI modelRI) {
  return guarded("aclmdlRIDestroy", [&] { return impl::modelDestroy(modelRI); });
}

NPU_SIM_EXPORT aclError aclsysGetCANNVersion(aclCANNPackageName name,
                                             aclCANNPackageVersion* version) {
  return guarded("aclsysGetCANNVersion", [&] { return impl::getCannVersion(name, version); });
}

// ---- memory ----

NPU_SIM_EXPORT aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return guarded("aclrtMalloc", [&] { return impl::mallocDevice(devPtr, size, policy); });
}

NPU_SIM_EXPORT aclError aclrtFree(void* devPtr) {
  return guarded("aclrtFree", [&] { return impl::freeDevice(devPtr); });
}

NPU_SIM_EXPORT aclError aclrtMallocHost(void** hostPtr, size_t size) {
  return guarded("aclrtMallocHost", [&] { return impl::mallocHost(hostPtr, size); });
}

NPU_SIM_EXPORT aclError aclrtFreeHost(void* hostPtr) {
  return guarded("aclrtFreeHost", [&] { return impl::freeHost(hostPtr); });
}

NPU_SIM_EXPORT aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  return guarded("aclrtGetMemInfo", [&] { return impl::getMemInfo(attr, free, total); });
}

NPU_SIM_EXPORT aclError aclrtPointerGetAttributes(const void* ptr,
                                                  aclrtPtrAttributes* attributes) {
  return guarded("aclrtPointerGetAttributes",
                 [&] { return impl::pointerGetAttributes(ptr, attributes); });
}

NPU_SIM_EXPORT aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                    aclrtMemcpyKind kind) {
  return guarded("aclrtMemcpy", [&] { return impl::memcpySync(dst, destMax, src, count, kind); });
}

NPU_SIM_EXPORT aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                         size_t count, aclrtMemcpyKind kind,
                                         aclrtStream stream) {
  return guarded("aclrtMemcpyAsync",
                 [&] { return impl::memcpyAsync(dst, destMax, src, count, kind, stream); });
}

NPU_SIM_EXPORT aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value,
                                    size_t count) {
  return guarded("aclrtMemset", [&] { return impl::memsetSync(devPtr, maxCount, value, count); });
}

NPU_SIM_EXPORT aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                         size_t count, aclrtStream stream) {
  return guarded("aclrtMemsetAsync",
                 [&] { return impl::memsetAsync(devPtr, maxCount, value, count, stream); });
}

// ---- virtual memory ----

NPU_SIM_EXPORT aclError aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                               void* expectPtr, uint64_t flags) {
  return guarded("aclrtReserveMemAddress", [&] {
    return impl::reserveMemAddress(virPtr, size, alignment, expectPtr, flags);
  });
}

NPU_SIM_EXPORT aclError aclrtReleaseMemAddress(void* virPtr) {
  return guarded("aclrtReleaseMemAddress", [&] { return impl::releaseMemAddress(virPtr); });
}

NPU_SIM_EXPORT aclError aclrtMallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                                            const aclrtPhysicalMemProp* prop, uint64_t flags) {
  return guarded("aclrtMallocPhysical",
                 [&] { return impl::mallocPhysical(handle, size, prop, flags); });
}

NPU_SIM_EXPORT aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  return guarded("aclrtFreePhysical", [&] { return impl::freePhysical(handle); });
}

NPU_SIM_EXPORT aclError aclrtMapMem(void* virPtr, size_t size, size_t offset,
                                    aclrtDrvMemHandle handle, uint64_t flags) {
  return guarded("aclrtMapMem",
                 [&] { return impl::mapMem(virPtr, size, offset, handle, flags); });
}

NPU_SIM_EXPORT aclError aclrtUnmapMem(void* virPtr) {
  return guarded("aclrtUnmapMem", [&] { return impl::unmapMem(virPtr); });
}

NPU_SIM_EXPORT aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                                         aclrtMemGranularityOptions option,
                                                         size_t* granularity) {
  return guarded("aclrtMemGetAllocationGranularity",
                 [&] { return impl::memGetAllocationGranularity(prop, option, granularity); });
}

// ---- IPC memory ----

NPU_SIM_EXPORT aclError aclrtIpcMemGetExportKey(void* devPtr, size_t size, char* key, size_t len,
                                                uint64_t flags) {
  return guarded("aclrtIpcMemGetExportKey",
                 [&] { return impl::ipcMemGetExportKey(devPtr, size, key, len, flags); });
}

NPU_SIM_EXPORT aclError aclrtIpcMemImportByKey(void** devPtr, const char* key, uint64_t flags) {
  return guarded("aclrtIpcMemImportByKey",
                 [&] { return impl::ipcMemImportByKey(devPtr, key, flags); });
}

NPU_SIM_EXPORT aclError aclrtIpcMemSetImportPid(const char* key, int32_t* pid, size_t num) {
  return guarded("aclrtIpcMemSetImportPid",
                 [&] { return impl::ipcMemSetImportPid(key, pid, num); });
}

NPU_SIM_EXPORT aclError aclrtIpcMemClose(const char* key) {
  return guarded("aclrtIpcMemClose", [&] { return impl::ipcMemClose(key); });
}

NPU_SIM_EXPORT aclError aclrtDeviceGetBareTgid(int32_t* pid) {
  return guarded("aclrtDeviceGetBareTgid", [&] { return impl::deviceGetBareTgid(pid); });
}

NPU_SIM_EXPORT aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle* handle) {
  return guarded("aclrtIpcGetEventHandle", [&] { return impl::ipcGetEventHandle(event, handle); });
}

NPU_SIM_EXPORT aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent* event) {
  return guarded("aclrtIpcOpenEventHandle",
                 [&] { return impl::ipcOpenEventHandle(handle, event); });
}

// ---- streams ----

NPU_SIM_EXPORT aclError aclrtCreateStream(aclrtStream* stream) {
  return guarded("aclrtCreateStream", [&] { return impl::createStream(stream, 0, 0); });
}

NPU_SIM_EXPORT aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority,
                                                    uint32_t flag) {
  return guarded("aclrtCreateStreamWithConfig",
                 [&] { return impl::createStream(stream, priority, flag); });
}

NPU_SIM_EXPORT aclError aclrtDestroyStream(aclrtStream stream) {
  return guarded("aclrtDestroyStream", [&] { return impl::destroyStream(stream); });
}

NPU_SIM_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream) {
  return guarded("aclrtSynchronizeStream", [&] { return impl::synchronizeStream(stream); });
}

NPU_SIM_EXPORT aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  return guarded("aclrtStreamQuery", [&] { return impl::streamQuery(stream, status); });
}

NPU_SIM_EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return guarded("aclrtStreamWaitEvent", [&] { return impl::streamWaitEvent(stream, event); });
}

NPU_SIM_EXPORT aclError aclrtDeviceGetStreamPriorityRange(int32_t* leastPriority,
                                                          int32_t* greatestPriority) {
  return guarded("aclrtDeviceGetStreamPriorityRange",
                 [&] { return impl::streamPriorityRange(leastPriority, greatestPriority); });
}

// ---- events ----

NPU_SIM_EXPORT aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  return guarded("aclrtCreateEventWithFlag", [&] { return impl::createEvent(event, flag); });
}

NPU_SIM_EXPORT aclError aclrtDestroyEvent(aclrtEvent event) {
  return guarded("aclrtDestroyEvent", [&] { return impl::destroyEvent(event); });
}

NPU_SIM_EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return guarded("aclrtRecordEvent", [&] { return impl::recordEvent(event, stream); });
}

NPU_SIM_EXPORT aclError aclrtQueryEventStatus(aclrtEvent event,
                                              aclrtEventRecordedStatus* status) {
  return guarded("aclrtQueryEventStatus", [&] { return impl::queryEventStatus(event, status); });
}

NPU_SIM_EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return guarded("aclrtSynchronizeEvent", [&] { return impl::synchronizeEvent(event); });
}

NPU_SIM_EXPORT aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent,
                                              aclrtEvent endEvent) {
  return guarded("aclrtEventElapsedTime",
                 [&] { return impl::eventElapsedTime(ms, startEvent, endEvent); });
}

} // extern "C"
