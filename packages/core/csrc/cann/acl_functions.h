// The CANN runtime functions torch-npu calls, as one X-macro list.
//
// The list is the single place a signature is written: the runtime loader
// (npu/impl/AclInterface.cpp) expands it into function pointers resolved with
// dlsym from libascendcl.so or from the simulator, and the simulator expands
// it to check that it defines every function with the exact signature.
//
//   X(return_type, name, (parameter list), (argument names))
#pragma once

#include "acl_types.h"

// Functions every backend must provide.
#define TORCH_NPU_ACL_REQUIRED_FUNCTIONS(X)                                    \
  X(aclError, aclInit, (const char* configPath), (configPath))                 \
  X(aclError, aclFinalize, (), ())                                             \
  X(aclError, aclrtSetDevice, (int32_t deviceId), (deviceId))                  \
  X(aclError, aclrtResetDevice, (int32_t deviceId), (deviceId))                \
  X(aclError, aclrtGetDevice, (int32_t * deviceId), (deviceId))                \
  X(aclError, aclrtGetDeviceCount, (uint32_t * count), (count))                \
  X(aclError, aclrtSynchronizeDevice, (), ())                                  \
  X(const char*, aclrtGetSocName, (), ())                                      \
  X(const char*, aclGetRecentErrMsg, (), ())                                   \
  X(aclError, aclrtGetVersion,                                                 \
    (int32_t * majorVersion, int32_t * minorVersion, int32_t * patchVersion),  \
    (majorVersion, minorVersion, patchVersion))                                \
  X(aclError, aclrtMalloc,                                                     \
    (void** devPtr, size_t size, aclrtMemMallocPolicy policy),                 \
    (devPtr, size, policy))                                                    \
  X(aclError, aclrtFree, (void* devPtr), (devPtr))                             \
  X(aclError, aclrtMallocHost, (void** hostPtr, size_t size), (hostPtr, size)) \
  X(aclError, aclrtFreeHost, (void* hostPtr), (hostPtr))                       \
  X(aclError, aclrtMemcpy,                                                     \
    (void* dst, size_t destMax, const void* src, size_t count,                 \
     aclrtMemcpyKind kind),                                                    \
    (dst, destMax, src, count, kind))                                          \
  X(aclError, aclrtMemcpyAsync,                                                \
    (void* dst, size_t destMax, const void* src, size_t count,                 \
     aclrtMemcpyKind kind, aclrtStream stream),                                \
    (dst, destMax, src, count, kind, stream))                                  \
  X(aclError, aclrtMemset,                                                     \
    (void* devPtr, size_t maxCount, int32_t value, size_t count),              \
    (devPtr, maxCount, value, count))                                          \
  X(aclError, aclrtMemsetAsync,                                                \
    (void* devPtr, size_t maxCount, int32_t value, size_t count,               \
     aclrtStream stream),                                                      \
    (devPtr, maxCount, value, count, stream))                                  \
  X(aclError, aclrtGetMemInfo,                                                 \
    (aclrtMemAttr attr, size_t * free, size_t * total), (attr, free, total))   \
  X(aclError, aclrtPointerGetAttributes,                                       \
    (const void* ptr, aclrtPtrAttributes* attributes), (ptr, attributes))      \
  X(aclError, aclrtCreateStream, (aclrtStream * stream), (stream))             \
  X(aclError, aclrtCreateStreamWithConfig,                                     \
    (aclrtStream * stream, uint32_t priority, uint32_t flag),                  \
    (stream, priority, flag))                                                  \
  X(aclError, aclrtDestroyStream, (aclrtStream stream), (stream))              \
  X(aclError, aclrtSynchronizeStream, (aclrtStream stream), (stream))          \
  X(aclError, aclrtStreamQuery,                                                \
    (aclrtStream stream, aclrtStreamStatus * status), (stream, status))        \
  X(aclError, aclrtStreamWaitEvent, (aclrtStream stream, aclrtEvent event),    \
    (stream, event))                                                           \
  X(aclError, aclrtDeviceGetStreamPriorityRange,                               \
    (int32_t * leastPriority, int32_t * greatestPriority),                     \
    (leastPriority, greatestPriority))                                         \
  X(aclError, aclrtCreateEventWithFlag, (aclrtEvent * event, uint32_t flag),   \
    (event, flag))                                                             \
  X(aclError, aclrtDestroyEvent, (aclrtEvent event), (event))                  \
  X(aclError, aclrtRecordEvent, (aclrtEvent event, aclrtStream stream),        \
    (event, stream))                                                           \
  X(aclError, aclrtQueryEventStatus,                                           \
    (aclrtEvent event, aclrtEventRecordedStatus * status), (event, status))    \
  X(aclError, aclrtSynchronizeEvent, (aclrtEvent event), (event))              \
  X(aclError, aclrtEventElapsedTime,                                           \
    (float* ms, aclrtEvent startEvent, aclrtEvent endEvent),                   \
    (ms, startEvent, endEvent))                                                \
  X(aclError, aclrtGetDeviceInfo,                                              \
    (uint32_t deviceId, aclrtDevAttr attr, int64_t * value),                   \
    (deviceId, attr, value))

// Functions a backend may lack (older CANN releases); callers check for null
// and report which CANN version introduced the feature.
#define TORCH_NPU_ACL_OPTIONAL_FUNCTIONS(X)                                    \
  X(aclError, aclsysGetCANNVersion,                                            \
    (aclCANNPackageName name, aclCANNPackageVersion * version),                \
    (name, version))                                                           \
  X(aclError, aclrtReserveMemAddress,                                          \
    (void** virPtr, size_t size, size_t alignment, void* expectPtr,            \
     uint64_t flags),                                                          \
    (virPtr, size, alignment, expectPtr, flags))                               \
  X(aclError, aclrtReleaseMemAddress, (void* virPtr), (virPtr))                \
  X(aclError, aclrtMallocPhysical,                                             \
    (aclrtDrvMemHandle * handle, size_t size,                                  \
     const aclrtPhysicalMemProp* prop, uint64_t flags),                        \
    (handle, size, prop, flags))                                               \
  X(aclError, aclrtFreePhysical, (aclrtDrvMemHandle handle), (handle))         \
  X(aclError, aclrtMapMem,                                                     \
    (void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,       \
     uint64_t flags),                                                          \
    (virPtr, size, offset, handle, flags))                                     \
  X(aclError, aclrtUnmapMem, (void* virPtr), (virPtr))                         \
  X(aclError, aclrtMemGetAllocationGranularity,                                \
    (aclrtPhysicalMemProp * prop, aclrtMemGranularityOptions option,           \
     size_t * granularity),                                                    \
    (prop, option, granularity))                                               \
  X(aclError, aclrtDeviceCanAccessPeer,                                        \
    (int32_t * canAccessPeer, int32_t deviceId, int32_t peerDeviceId),         \
    (canAccessPeer, deviceId, peerDeviceId))                                   \
  X(aclError, aclrtGetDeviceUtilizationRate,                                   \
    (int32_t deviceId, aclrtUtilizationInfo * utilizationInfo),                \
    (deviceId, utilizationInfo))                                               \
  X(aclError, aclmdlRICaptureBegin,                                            \
    (aclrtStream stream, aclmdlRICaptureMode mode), (stream, mode))            \
  X(aclError, aclmdlRICaptureGetInfo,                                          \
    (aclrtStream stream, aclmdlRICaptureStatus * status, aclmdlRI * modelRI),  \
    (stream, status, modelRI))                                                 \
  X(aclError, aclmdlRICaptureEnd, (aclrtStream stream, aclmdlRI * modelRI),    \
    (stream, modelRI))                                                         \
  X(aclError, aclmdlRIExecuteAsync, (aclmdlRI modelRI, aclrtStream stream),    \
    (modelRI, stream))                                                         \
  X(aclError, aclmdlRIDestroy, (aclmdlRI modelRI), (modelRI))                  \
  X(aclError, aclmdlRIDebugJsonPrint,                                          \
    (aclmdlRI modelRI, const char* path, uint32_t flags), (modelRI, path, flags)) \
  X(aclError, aclrtIpcMemGetExportKey,                                         \
    (void* devPtr, size_t size, char* key, size_t len, uint64_t flags),        \
    (devPtr, size, key, len, flags))                                           \
  X(aclError, aclrtIpcMemImportByKey,                                          \
    (void** devPtr, const char* key, uint64_t flags), (devPtr, key, flags))    \
  X(aclError, aclrtIpcMemSetImportPid,                                         \
    (const char* key, int32_t* pid, size_t num), (key, pid, num))              \
  X(aclError, aclrtIpcMemClose, (const char* key), (key))                      \
  X(aclError, aclrtDeviceGetBareTgid, (int32_t * pid), (pid))                 \
  X(aclError, aclrtIpcGetEventHandle,                                          \
    (aclrtEvent event, aclrtIpcEventHandle * handle), (event, handle))         \
  X(aclError, aclrtIpcOpenEventHandle,                                         \
    (aclrtIpcEventHandle handle, aclrtEvent * event), (handle, event))

#ifdef __cplusplus
extern "C" {
#endif

#define TORCH_NPU_DECLARE_ACL_FUNCTION(ret, name, params, args) ret name params;
TORCH_NPU_ACL_REQUIRED_FUNCTIONS(TORCH_NPU_DECLARE_ACL_FUNCTION)
TORCH_NPU_ACL_OPTIONAL_FUNCTIONS(TORCH_NPU_DECLARE_ACL_FUNCTION)
#undef TORCH_NPU_DECLARE_ACL_FUNCTION

#ifdef __cplusplus
} // extern "C"
#endif
