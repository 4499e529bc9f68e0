// Implementations behind the extern "C" entry points (acl_api.cpp,
// sim_ext_api.cpp), grouped by subject:
//   device_api.cpp  init, devices, versions, device info
//   memory_api.cpp  device/host allocation, memory info, pointer attributes, VMM
//   ipc_api.cpp     device memory shared between processes (aclrtIpcMem*)
//   transfer.cpp    memcpy and memset, synchronous and on streams
//   stream_api.cpp  streams, events, launched work
// Each returns an aclError and sets the recent error message on failure.
#pragma once

#include <cstdint>

#include "acl_types.h"
#include "npu_sim_ext.h"

namespace npu_sim::impl {

// ---- device_api.cpp ----
aclError init(const char* configPath);
aclError finalize();
aclError setDevice(int32_t deviceId);
aclError resetDevice(int32_t deviceId);
aclError getDevice(int32_t* deviceId);
aclError getDeviceCount(uint32_t* count);
aclError synchronizeDevice();
const char* socName();
aclError getVersion(int32_t* major, int32_t* minor, int32_t* patch);
aclError getDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t* value);
aclError getCannVersion(aclCANNPackageName name, aclCANNPackageVersion* version);
aclError deviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId);
aclError getDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo* utilizationInfo);
const char* describe();

// ---- memory_api.cpp ----
aclError mallocDevice(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError freeDevice(void* devPtr);
aclError mallocHost(void** hostPtr, size_t size);
aclError freeHost(void* hostPtr);
aclError getMemInfo(aclrtMemAttr attr, size_t* free, size_t* total);
aclError pointerGetAttributes(const void* ptr, aclrtPtrAttributes* attributes);
aclError reserveMemAddress(void** virPtr, size_t size, size_t alignment, void* expectPtr,
                           uint64_t flags);
aclError releaseMemAddress(void* virPtr);
aclError mallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                        const aclrtPhysicalMemProp* prop, uint64_t flags);
aclError freePhysical(aclrtDrvMemHandle handle);
aclError mapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                uint64_t flags);
aclError unmapMem(void* virPtr);
aclError memGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                     aclrtMemGranularityOptions option, size_t* granularity);
aclError getHostAccessOffset(intptr_t* offset);

// ---- ipc_api.cpp ----
aclError ipcMemGetExportKey(void* devPtr, size_t size, char* key, size_t len, uint64_t flags);
aclError ipcMemImportByKey(void** devPtr, const char* key, uint64_t flags);
aclError ipcMemSetImportPid(const char* key, int32_t* pid, size_t num);
aclError ipcMemClose(const char* key);
aclError deviceGetBareTgid(int32_t* pid);
aclError ipcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle* handle);
aclError ipcOpenEventHandle(const aclrtIpcEventHandle& handle, aclrtEvent* event);

// ---- transfer.cpp ----
aclError memcpySync(void* dst, size_t destMax, const void* src, size_t count,
                    aclrtMemcpyKind kind);
aclError memcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind, aclrtStream stream);
aclError memsetSync(void* devPtr, size_t maxCount, int32_t value, size_t count);
aclError memsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                     aclrtStream stream);

// ---- stream_api.cpp ----
aclError createStream(aclrtStream* stream, uint32_t priority, uint32_t flag);
aclError destroyStream(aclrtStream stream);
// `ordersHost`: the race detector counts the wait (false:
// npuSimSynchronizeStreamUnordered).
aclError synchronizeStream(aclrtStream stream, bool ordersHost = true);
aclError streamQuery(aclrtStream stream, aclrtStreamStatus* status);
aclError streamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError streamPriorityRange(int32_t* leastPriority, int32_t* greatestPriority);
aclError streamGetDevice(aclrtStream stream, int32_t* deviceId);
aclError createEvent(aclrtEvent* event, uint32_t flag);
aclError destroyEvent(aclrtEvent event);
aclError recordEvent(aclrtEvent event, aclrtStream stream);
aclError queryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status);
aclError synchronizeEvent(aclrtEvent event);
aclError eventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent);
aclError launchWork(aclrtStream stream, const npuSimWork* work, uint64_t* workId);
// With declared accesses (Note [Stream race detection], race_detector.h).
aclError launchWork(aclrtStream stream, const npuSimWork* work, const npuSimMemAccess* accesses,
                    size_t count, uint64_t* workId);

// ---- model capture (capture_api.cpp) ----
aclError captureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
aclError captureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status, aclmdlRI* modelRI);
aclError captureEnd(aclrtStream stream, aclmdlRI* modelRI);
aclError modelExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
aclError modelDebugJsonPrint(aclmdlRI modelRI, const char* path, uint32_t flags);
aclError modelDestroy(aclmdlRI modelRI);

} // namespace npu_sim::impl
