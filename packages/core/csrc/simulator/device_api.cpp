// Initialisation, devices, versions and device information.
#include <cstring>

#include "api_impl.h"
#include "config.h"
#include "device.h"
#include "errors.h"
#include "model.h"
#include "runtime.h"
#include "stream.h"
#include "util.h"

namespace npu_sim::impl {
namespace {

// What aclrtGetVersion reports.
constexpr int32_t kAclMajor = 1;
constexpr int32_t kAclMinor = 17;
constexpr int32_t kAclPatch = 0;

// aclrtGetDeviceInfo values of the emulated Ascend910B3.
constexpr int64_t kCubeCores = 24;
constexpr int64_t kVectorCores = 48;
constexpr int64_t kL2CacheBytes = 192 * static_cast<int64_t>(kMiB);

void copyString(char* dst, size_t size, const std::string& src) {
  std::strncpy(dst, src.c_str(), size - 1);
  dst[size - 1] = '\0';
}

} // namespace

aclError init(const char* /*configPath: CANN's JSON options; none apply*/) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclInit"); err != ACL_SUCCESS) {
    return err;
  }
  if (rt.acl_initialized.exchange(true)) {
    return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized");
  }
  return ACL_SUCCESS;
}

aclError finalize() {
  // Drains every device (like CANN, which resets them) but keeps memory,
  // streams and events: other threads may still hold them.
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclFinalize"); err != ACL_SUCCESS) {
    return err;
  }
  for (uint32_t d = 0; d < rt.deviceCount(); ++d) {
    if (aclError err = rt.device(d).drain("aclFinalize", nullptr); err != ACL_SUCCESS) {
      return err;
    }
  }
  rt.acl_initialized.store(false);
  return ACL_SUCCESS;
}

aclError setDevice(int32_t deviceId) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtSetDevice"); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  if (aclError err = rt.deviceById(deviceId, "aclrtSetDevice", &device); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = device->ensureInitialized(); err != ACL_SUCCESS) {
    return err;
  }
  setCurrentDevice(deviceId);
  return ACL_SUCCESS;
}

aclError resetDevice(int32_t deviceId) {
  // Drains the device's streams. Memory, streams and the thread's current
  // device stay: the device remains initialised (other threads may use it),
  // and unreported device-work failures stay pending.
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtResetDevice"); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  if (aclError err = rt.deviceById(deviceId, "aclrtResetDevice", &device); err != ACL_SUCCESS) {
    return err;
  }
  return device->drain("aclrtResetDevice", nullptr);
}

aclError getDevice(int32_t* deviceId) {
  if (deviceId == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");
  }
  const int32_t id = currentDevice();
  if (id < 0) {
    return fail(ACL_ERROR_RT_CONTEXT_NULL,
                "aclrtGetDevice: this thread has no current device: call aclrtSetDevice "
                "first");
  }
  *deviceId = id;
  return ACL_SUCCESS;
}

aclError getDeviceCount(uint32_t* count) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtGetDeviceCount"); err != ACL_SUCCESS) {
    return err;
  }
  if (count == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
  }
  *count = rt.deviceCount();
  return ACL_SUCCESS;
}

aclError synchronizeDevice() {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtSynchronizeDevice"); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice("aclrtSynchronizeDevice", &device); err != ACL_SUCCESS) {
    return err;
  }
  if (Model* model = captureOnDevice(device->id())) {
    return refuseDuringCapture(model, "aclrtSynchronizeDevice",
                               "synchronising with the device of a capturing stream");
  }
  std::shared_ptr<WorkError> error;
  if (aclError err = device->drain("aclrtSynchronizeDevice", &error); err != ACL_SUCCESS) {
    return err;
  }
  return reportWorkError(error);
}

const char* socName() {
  return config().soc_name.c_str();
}

aclError getVersion(int32_t* major, int32_t* minor, int32_t* patch) {
  if (major == nullptr || minor == nullptr || patch == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: an output pointer is null");
  }
  *major = kAclMajor;
  *minor = kAclMinor;
  *patch = kAclPatch;
  return ACL_SUCCESS;
}

aclError getDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t* value) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtGetDeviceInfo"); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  if (aclError err = rt.deviceById(deviceId, "aclrtGetDeviceInfo", &device);
      err != ACL_SUCCESS) {
    return err;
  }
  if (value == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceInfo: value is null");
  }
  switch (attr) {
    case ACL_DEV_ATTR_CUBE_CORE_NUM:
      *value = kCubeCores;
      return ACL_SUCCESS;
    case ACL_DEV_ATTR_VECTOR_CORE_NUM:
      *value = kVectorCores;
      return ACL_SUCCESS;
    case ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:
      *value = static_cast<int64_t>(rt.config().capacity);
      return ACL_SUCCESS;
    case ACL_DEV_ATTR_L2_CACHE_SIZE:
      *value = kL2CacheBytes;
      return ACL_SUCCESS;
  }
  return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "aclrtGetDeviceInfo: attribute %d is not supported by the simulator",
              static_cast<int>(attr));
}

aclError getCannVersion(aclCANNPackageName name, aclCANNPackageVersion* version) {
  if (version == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: version is null");
  }
  if (static_cast<int>(name) < ACL_PKG_NAME_CANN || static_cast<int>(name) > ACL_PKG_NAME_DRIVER) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclsysGetCANNVersion: unknown package %d",
                static_cast<int>(name));
  }
  // Every package of the emulated installation has the emulated version.
  const CannVersion& v = config().cann_version;
  std::memset(version, 0, sizeof(*version));
  copyString(version->version, sizeof(version->version), v.text);
  copyString(version->majorVersion, sizeof(version->majorVersion), std::to_string(v.major));
  copyString(version->minorVersion, sizeof(version->minorVersion), std::to_string(v.minor));
  copyString(version->releaseVersion, sizeof(version->releaseVersion), v.releasePart());
  copyString(version->patchVersion, sizeof(version->patchVersion), std::to_string(v.patch));
  return ACL_SUCCESS;
}

aclError deviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  const char* api = "aclrtDeviceCanAccessPeer";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  Device* peer = nullptr;
  if (aclError err = rt.deviceById(deviceId, api, &device); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = rt.deviceById(peerDeviceId, api, &peer); err != ACL_SUCCESS) {
    return err;
  }
  if (canAccessPeer == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: canAccessPeer is null", api);
  }
  // Every simulated device's memory lives in this process's address space,
  // so each reaches every other; a device is not its own peer (as on CANN).
  *canAccessPeer = deviceId != peerDeviceId ? 1 : 0;
  return ACL_SUCCESS;
}

aclError getDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo* utilizationInfo) {
  const char* api = "aclrtGetDeviceUtilizationRate";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  Device* device = nullptr;
  if (aclError err = rt.deviceById(deviceId, api, &device); err != ACL_SUCCESS) {
    return err;
  }
  if (utilizationInfo == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: utilizationInfo is null", api);
  }
  // Device work runs on host threads: the share of time it ran is both the
  // cube and the vector units' utilization. There is no AI CPU, and memory
  // bandwidth is not modelled.
  const int32_t busy = device->utilizationPercent();
  utilizationInfo->cubeUtilization = busy;
  utilizationInfo->vectorUtilization = busy;
  utilizationInfo->aicpuUtilization = 0;
  utilizationInfo->memoryUtilization = -1;
  return ACL_SUCCESS;
}

const char* describe() {
  return config().description.c_str();
}

} // namespace npu_sim::impl
