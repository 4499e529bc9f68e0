"""ctypes bindings of libnpu_sim.so for the simulator tests.

Shared by the in-process tests (through conftest.py) and by the scripts the
tests run in subprocesses, so it only depends on the standard library.
"""

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)

# ---- CANN values (acl_types.h) ----
ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_RT_FAILURE = 500003
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006
ACL_ERROR_RT_AICORE_EXCEPTION = 507015
PARAM_ERRORS = (ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_PARAM_INVALID)

ACL_EVENT_SYNC = 0x1
ACL_EVENT_TIME_LINE = 0x8
ACL_EVENT_IPC = 0x40

ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
ACL_STREAM_STATUS_COMPLETE = 0
ACL_STREAM_STATUS_NOT_READY = 1

H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4

ACL_HBM_MEM = 1

ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 1
IPC_KEY_LEN = 65
ACL_MEM_LOCATION_TYPE_HOST = 0
ACL_MEM_LOCATION_TYPE_DEVICE = 1
ACL_MEM_LOCATION_TYPE_UNREGISTERED = 2

ACL_DEV_ATTR_CUBE_CORE_NUM = 102
ACL_DEV_ATTR_VECTOR_CORE_NUM = 201
ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301
ACL_DEV_ATTR_L2_CACHE_SIZE = 302

MiB = 1 << 20
GiB = 1 << 30
GRANULARITY = 2 * MiB


class MemLocation(Structure):
    _fields_ = [("id", c_uint32), ("type", c_int)]


class IpcEventHandle(Structure):
    _fields_ = [("reserved", c_char * 64)]


class PtrAttributes(Structure):
    _fields_ = [("location", MemLocation), ("pageSize", c_uint32), ("rsv", c_uint32 * 4)]


class PhysicalMemProp(Structure):
    _fields_ = [
        ("handleType", c_int),
        ("allocationType", c_int),
        ("memAttr", c_int),
        ("location", MemLocation),
        ("reserve", c_uint64),
    ]


class CANNPackageVersion(Structure):
    _fields_ = [
        ("version", c_char * 128),
        ("majorVersion", c_char * 64),
        ("minorVersion", c_char * 64),
        ("releaseVersion", c_char * 64),
        ("patchVersion", c_char * 64),
        ("reserved", c_char * 128),
    ]


RUN_FN = CFUNCTYPE(c_int, c_void_p)
RELEASE_FN = CFUNCTYPE(None, c_void_p)


class NpuSimWork(Structure):
    _fields_ = [("name", c_char_p), ("run", RUN_FN), ("release", RELEASE_FN), ("ctx", c_void_p),
                ("flags", c_uint32)]


class ActivityRecord(Structure):
    _fields_ = [("name", c_char_p), ("kind", ctypes.c_uint32), ("deviceId", c_int32), ("stream", c_void_p),
                ("workId", c_uint64), ("correlationId", c_uint64), ("startNs", ctypes.c_int64),
                ("endNs", ctypes.c_int64), ("bytes", c_uint64), ("rankCount", ctypes.c_uint32),
                ("rank", ctypes.c_uint32), ("peerRank", c_int32), ("waitNs", ctypes.c_int64),
                ("syncNs", ctypes.c_int64)]


class NpuSimMemAccess(Structure):
    _fields_ = [("ptr", c_void_p), ("bytes", c_size_t), ("write", c_uint32)]


# Returns a `const char*` (as an address: a c_char_p result would leak).
SITE_FN = CFUNCTYPE(c_void_p)


class UtilizationInfo(ctypes.Structure):
    _fields_ = [("cubeUtilization", c_int32), ("vectorUtilization", c_int32),
                ("aicpuUtilization", c_int32), ("memoryUtilization", c_int32),
                ("utilizationExtend", c_void_p)]


NPU_SIM_WORK_AWAITED = 0x1
NPU_SIM_WORK_UNTRACED = 0x2


_SIGNATURES = {
    "aclInit": (c_int, [c_char_p]),
    "aclFinalize": (c_int, []),
    "aclrtSetDevice": (c_int, [c_int32]),
    "aclrtResetDevice": (c_int, [c_int32]),
    "aclrtGetDevice": (c_int, [POINTER(c_int32)]),
    "aclrtGetDeviceCount": (c_int, [POINTER(c_uint32)]),
    "aclrtSynchronizeDevice": (c_int, []),
    "aclrtGetSocName": (c_char_p, []),
    "aclGetRecentErrMsg": (c_char_p, []),
    "aclrtGetVersion": (c_int, [POINTER(c_int32)] * 3),
    "aclrtMalloc": (c_int, [POINTER(c_void_p), c_size_t, c_int]),
    "aclrtFree": (c_int, [c_void_p]),
    "aclrtMallocHost": (c_int, [POINTER(c_void_p), c_size_t]),
    "aclrtFreeHost": (c_int, [c_void_p]),
    "aclrtMemcpy": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t, c_int]),
    "aclrtMemcpyAsync": (c_int, [c_void_p, c_size_t, c_void_p, c_size_t, c_int, c_void_p]),
    "aclrtMemset": (c_int, [c_void_p, c_size_t, c_int32, c_size_t]),
    "aclrtMemsetAsync": (c_int, [c_void_p, c_size_t, c_int32, c_size_t, c_void_p]),
    "aclrtGetMemInfo": (c_int, [c_int, POINTER(c_size_t), POINTER(c_size_t)]),
    "aclrtPointerGetAttributes": (c_int, [c_void_p, POINTER(PtrAttributes)]),
    "aclrtCreateStream": (c_int, [POINTER(c_void_p)]),
    "aclrtCreateStreamWithConfig": (c_int, [POINTER(c_void_p), c_uint32, c_uint32]),
    "aclrtDestroyStream": (c_int, [c_void_p]),
    "aclrtSynchronizeStream": (c_int, [c_void_p]),
    "aclrtStreamQuery": (c_int, [c_void_p, POINTER(c_int)]),
    "aclrtStreamWaitEvent": (c_int, [c_void_p, c_void_p]),
    "aclrtDeviceGetStreamPriorityRange": (c_int, [POINTER(c_int32), POINTER(c_int32)]),
    "aclrtCreateEventWithFlag": (c_int, [POINTER(c_void_p), c_uint32]),
    "aclrtDestroyEvent": (c_int, [c_void_p]),
    "aclrtRecordEvent": (c_int, [c_void_p, c_void_p]),
    "aclrtQueryEventStatus": (c_int, [c_void_p, POINTER(c_int)]),
    "aclrtSynchronizeEvent": (c_int, [c_void_p]),
    "aclrtEventElapsedTime": (c_int, [POINTER(c_float), c_void_p, c_void_p]),
    "aclrtGetDeviceInfo": (c_int, [c_uint32, c_int, POINTER(c_int64)]),
    "aclsysGetCANNVersion": (c_int, [c_int, POINTER(CANNPackageVersion)]),  # cann-reach: not a question
    "aclrtReserveMemAddress": (c_int, [POINTER(c_void_p), c_size_t, c_size_t, c_void_p, c_uint64]),
    "aclrtReleaseMemAddress": (c_int, [c_void_p]),
    "aclrtMallocPhysical": (c_int, [POINTER(c_void_p), c_size_t, POINTER(PhysicalMemProp), c_uint64]),
    "aclrtFreePhysical": (c_int, [c_void_p]),
    "aclrtMapMem": (c_int, [c_void_p, c_size_t, c_size_t, c_void_p, c_uint64]),
    "aclrtUnmapMem": (c_int, [c_void_p]),
    "aclrtMemGetAllocationGranularity": (c_int, [POINTER(PhysicalMemProp), c_int, POINTER(c_size_t)]),
    "aclrtDeviceCanAccessPeer": (c_int, [POINTER(c_int32), c_int32, c_int32]),
    "aclrtIpcMemGetExportKey": (c_int, [c_void_p, c_size_t, c_char_p, c_size_t, c_uint64]),
    "aclrtIpcMemImportByKey": (c_int, [POINTER(c_void_p), c_char_p, c_uint64]),
    "aclrtIpcMemSetImportPid": (c_int, [c_char_p, POINTER(c_int32), c_size_t]),
    "aclrtIpcMemClose": (c_int, [c_char_p]),
    "aclrtDeviceGetBareTgid": (c_int, [POINTER(c_int32)]),
    "aclrtIpcGetEventHandle": (c_int, [c_void_p, POINTER(IpcEventHandle)]),
    "aclrtIpcOpenEventHandle": (c_int, [IpcEventHandle, POINTER(c_void_p)]),
    "aclrtGetDeviceUtilizationRate": (c_int, [c_int32, POINTER(UtilizationInfo)]),
    "npuSimLaunchWork": (c_int, [c_void_p, POINTER(NpuSimWork), POINTER(c_uint64)]),
    "npuSimSetWorkError": (None, [c_char_p]),
    "npuSimGetHostAccessOffset": (c_int, [POINTER(ctypes.c_ssize_t)]),
    "npuSimStreamGetDevice": (c_int, [c_void_p, POINTER(c_int32)]),
    "npuSimDescribe": (c_char_p, []),
    "aclmdlRICaptureBegin": (c_int, [c_void_p, c_int]),
    "aclmdlRICaptureGetInfo": (c_int, [c_void_p, POINTER(c_int), POINTER(c_void_p)]),
    "aclmdlRICaptureEnd": (c_int, [c_void_p, POINTER(c_void_p)]),
    "aclmdlRIExecuteAsync": (c_int, [c_void_p, c_void_p]),
    "aclmdlRIDestroy": (c_int, [c_void_p]),
    "aclmdlRIDebugJsonPrint": (c_int, [c_void_p, c_char_p, ctypes.c_uint32]),
    "npuSimActivityEnable": (c_int, [c_int]),
    "npuSimActivityPushCorrelationId": (c_int, [ctypes.c_uint64]),
    "npuSimActivityPopCorrelationId": (c_int, [POINTER(ctypes.c_uint64)]),
    "npuSimActivityFlush": (c_int, [c_void_p, ctypes.c_size_t, POINTER(ctypes.c_size_t)]),
    "npuSimLaunchWorkWithAccesses": (c_int, [c_void_p, POINTER(NpuSimWork), POINTER(NpuSimMemAccess),
                                             c_size_t, POINTER(c_uint64)]),
    "npuSimRaceCheckEnable": (c_int, [c_int]),
    "npuSimRaceCheckEnabled": (c_int, [POINTER(c_int)]),
    "npuSimRaceCheckSetSiteProvider": (c_int, [c_void_p]),
    "npuSimSynchronizeStreamUnordered": (c_int, [c_void_p]),
    # HCCL (hccl_functions.h); HcclComm and aclrtStream are pointers
    "HcclGetRootInfo": (c_int, [c_void_p]),
    "HcclCommInitRootInfo": (c_int, [c_uint32, c_void_p, c_uint32, POINTER(c_void_p)]),
    "HcclCommInitRootInfoConfig": (c_int, [c_uint32, c_void_p, c_uint32, c_void_p,
                                           POINTER(c_void_p)]),
    "HcclCommInitClusterInfo": (c_int, [c_char_p, c_uint32, POINTER(c_void_p)]),
    "HcclCommInitClusterInfoConfig": (c_int, [c_char_p, c_uint32, c_void_p, POINTER(c_void_p)]),
    "HcclCommDestroy": (c_int, [c_void_p]),
    "HcclGetRankSize": (c_int, [c_void_p, POINTER(c_uint32)]),
    "HcclGetRankId": (c_int, [c_void_p, POINTER(c_uint32)]),
    "HcclGetCommAsyncError": (c_int, [c_void_p, POINTER(c_int)]),
    "HcclGetErrorString": (c_char_p, [c_int]),
    "HcclAllReduce": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "HcclBroadcast": (c_int, [c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p]),
    "HcclReduce": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_uint32, c_void_p, c_void_p]),
    "HcclAllGather": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_void_p, c_void_p]),
    "HcclReduceScatter": (c_int, [c_void_p, c_void_p, c_uint64, c_int, c_int, c_void_p, c_void_p]),
    "HcclBarrier": (c_int, [c_void_p, c_void_p]),
    "HcclSend": (c_int, [c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p]),
    "HcclRecv": (c_int, [c_void_p, c_uint64, c_int, c_uint32, c_void_p, c_void_p]),
    "HcclBatchSendRecv": (c_int, [c_void_p, c_uint32, c_void_p, c_void_p]),
    "HcclAlltoAll": (c_int, [c_void_p, c_uint64, c_int, c_void_p, c_uint64, c_int, c_void_p,
                             c_void_p]),
    "HcclAlltoAllV": (c_int, [c_void_p, c_void_p, c_void_p, c_int, c_void_p, c_void_p, c_void_p,
                              c_int, c_void_p, c_void_p]),
    "npuSimHcclCommIsDirect": (c_int, [c_void_p, c_void_p]),
    "npuSimHcclCommTransport": (c_int, [c_void_p, c_void_p]),
    "npuSimHcclCommUsesSockets": (c_int, [c_void_p, c_void_p]),
}

# ---- HCCL values (hccl_types.h) ----
HCCL_SUCCESS = 0
HCCL_E_PARA = 1
HCCL_E_PTR = 2
HCCL_E_NOT_SUPPORT = 5
HCCL_E_TIMEOUT = 9
HCCL_E_REMOTE = 21
HCCL_ROOT_INFO_BYTES = 4108
HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN = 0, 1, 2, 3
HCCL_INT8, HCCL_INT16, HCCL_INT32, HCCL_FP16, HCCL_FP32, HCCL_INT64 = 0, 1, 2, 3, 4, 5
HCCL_UINT64, HCCL_UINT8, HCCL_UINT16, HCCL_UINT32, HCCL_FP64, HCCL_BFP16 = 6, 7, 8, 9, 10, 11
HCCL_INT128 = 12
HCCL_SEND, HCCL_RECV = 0, 1

# Every function of the contract (acl_functions.h, npu_sim_ext.h, hccl_functions.h).
CONTRACT_FUNCTIONS = sorted(_SIGNATURES)


def load(path):
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class AclError(RuntimeError):
    def __init__(self, api, code, message):
        super().__init__(f"{api} failed with {code}: {message}")
        self.code = code
        self.message = message


class Sim:
    """Thin convenience layer: raises AclError on failure."""

    def __init__(self, lib):
        self.lib = lib
        self._keep = []  # callbacks and names that queued work refers to

    def check(self, api, rc):
        if rc != ACL_SUCCESS:
            raise AclError(api, rc, self.err())
        return rc

    def err(self):
        return self.lib.aclGetRecentErrMsg().decode()

    # ---- devices ----
    def set_device(self, d):
        self.check("aclrtSetDevice", self.lib.aclrtSetDevice(d))

    def device_count(self):
        n = c_uint32()
        self.check("aclrtGetDeviceCount", self.lib.aclrtGetDeviceCount(byref(n)))
        return n.value

    def sync_device(self):
        self.check("aclrtSynchronizeDevice", self.lib.aclrtSynchronizeDevice())

    def mem_info(self):
        free, total = c_size_t(), c_size_t()
        self.check("aclrtGetMemInfo", self.lib.aclrtGetMemInfo(ACL_HBM_MEM, byref(free), byref(total)))
        return free.value, total.value

    def delta(self):
        d = ctypes.c_ssize_t()
        self.check("npuSimGetHostAccessOffset", self.lib.npuSimGetHostAccessOffset(byref(d)))
        return d.value

    # ---- memory ----
    def malloc(self, size):
        p = c_void_p()
        self.check("aclrtMalloc", self.lib.aclrtMalloc(byref(p), size, 0))
        return p.value

    def free(self, p):
        self.check("aclrtFree", self.lib.aclrtFree(p))

    def malloc_host(self, size):
        p = c_void_p()
        self.check("aclrtMallocHost", self.lib.aclrtMallocHost(byref(p), size))
        return p.value

    def free_host(self, p):
        self.check("aclrtFreeHost", self.lib.aclrtFreeHost(p))

    # ---- IPC memory ----
    def ipc_export(self, p, size, flags=ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION):
        key = ctypes.create_string_buffer(IPC_KEY_LEN)
        self.check("aclrtIpcMemGetExportKey",
                   self.lib.aclrtIpcMemGetExportKey(p, size, key, IPC_KEY_LEN, flags))
        return key.value

    def ipc_import(self, key):
        p = c_void_p()
        self.check("aclrtIpcMemImportByKey", self.lib.aclrtIpcMemImportByKey(byref(p), key, 0))
        return p.value

    def ipc_allow(self, key, *pids):
        arr = (c_int32 * len(pids))(*pids)
        self.check("aclrtIpcMemSetImportPid", self.lib.aclrtIpcMemSetImportPid(key, arr, len(pids)))

    def ipc_close(self, key):
        self.check("aclrtIpcMemClose", self.lib.aclrtIpcMemClose(key))

    def attrs(self, p):
        a = PtrAttributes()
        self.check("aclrtPointerGetAttributes", self.lib.aclrtPointerGetAttributes(p, byref(a)))
        return a.location.type, a.location.id

    def h2d(self, dst, data, stream=None, sync=False):
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        if sync:
            self.check("aclrtMemcpy", self.lib.aclrtMemcpy(dst, len(data), buf, len(data), H2D))
        else:
            self._keep.append(buf)
            self.check("aclrtMemcpyAsync",
                       self.lib.aclrtMemcpyAsync(dst, len(data), buf, len(data), H2D, stream))
        return buf

    def d2h(self, src, n, stream=None, sync=False):
        buf = ctypes.create_string_buffer(n)
        if sync:
            self.check("aclrtMemcpy", self.lib.aclrtMemcpy(buf, n, src, n, D2H))
        else:
            self.check("aclrtMemcpyAsync", self.lib.aclrtMemcpyAsync(buf, n, src, n, D2H, stream))
        return buf

    # ---- streams and events ----
    def create_stream(self, priority=0):
        s = c_void_p()
        self.check("aclrtCreateStreamWithConfig",
                   self.lib.aclrtCreateStreamWithConfig(byref(s), priority, 0))
        return s.value

    def destroy_stream(self, s):
        self.check("aclrtDestroyStream", self.lib.aclrtDestroyStream(s))

    def sync(self, s=None):
        self.check("aclrtSynchronizeStream", self.lib.aclrtSynchronizeStream(s))

    def query(self, s=None):
        st = c_int()
        self.check("aclrtStreamQuery", self.lib.aclrtStreamQuery(s, byref(st)))
        return st.value

    def create_event(self, flag=ACL_EVENT_TIME_LINE):
        e = c_void_p()
        self.check("aclrtCreateEventWithFlag", self.lib.aclrtCreateEventWithFlag(byref(e), flag))
        return e.value

    def record(self, e, s=None):
        self.check("aclrtRecordEvent", self.lib.aclrtRecordEvent(e, s))

    def wait_event(self, s, e):
        self.check("aclrtStreamWaitEvent", self.lib.aclrtStreamWaitEvent(s, e))

    def event_status(self, e):
        st = c_int()
        self.check("aclrtQueryEventStatus", self.lib.aclrtQueryEventStatus(e, byref(st)))
        return st.value

    def elapsed(self, a, b):
        ms = c_float()
        self.check("aclrtEventElapsedTime", self.lib.aclrtEventElapsedTime(byref(ms), a, b))
        return ms.value

    def launch(self, fn, stream=None, name=b"test_work", release=None, flags=0):
        """Runs fn() on the stream's worker; fn returns an int status."""
        run = RUN_FN(lambda ctx: fn())
        rel = RELEASE_FN(lambda ctx: release()) if release else RELEASE_FN()
        name_buf = ctypes.create_string_buffer(name)
        work = NpuSimWork(ctypes.cast(name_buf, c_char_p), run, rel, None, flags)
        self._keep.extend([run, rel, name_buf])
        wid = c_uint64()
        self.check("npuSimLaunchWork", self.lib.npuSimLaunchWork(stream, byref(work), byref(wid)))
        return wid.value

    def launch_accessing(self, stream, name, reads=(), writes=()):
        """Launches empty work declaring (ptr, bytes) ranges read and written
        (Note [Stream race detection])."""
        run = RUN_FN(lambda ctx: 0)
        name_buf = ctypes.create_string_buffer(name)
        work = NpuSimWork(ctypes.cast(name_buf, c_char_p), run, RELEASE_FN(), None, 0)
        ranges = [(p, n, 0) for p, n in reads] + [(p, n, 1) for p, n in writes]
        accesses = (NpuSimMemAccess * max(1, len(ranges)))(*ranges)
        self._keep.extend([run, name_buf])
        wid = c_uint64()
        self.check("npuSimLaunchWorkWithAccesses",
                   self.lib.npuSimLaunchWorkWithAccesses(stream, byref(work), accesses, len(ranges), byref(wid)))
        return wid.value


def flush_activity(sim):
    """The simulator's activity records so far, as (name, workId) pairs."""
    records = (ActivityRecord * 256)()
    count = ctypes.c_size_t()
    sim.check("npuSimActivityFlush", sim.lib.npuSimActivityFlush(records, 256, byref(count)))
    return [(records[i].name, records[i].workId) for i in range(count.value)]


def load_sim(path=None):
    return Sim(load(path or os.environ["NPU_SIM_LIBRARY"]))
