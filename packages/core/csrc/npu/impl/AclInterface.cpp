#include "npu/impl/AclInterface.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include <c10/util/Exception.h>

namespace c10_npu::detail {
// WorkAccesses.cpp: follows the simulator's NPU_SIM_RACE_CHECK.
void adopt_runtime_race_check(const acl::AclApi& api);
} // namespace c10_npu::detail

namespace c10_npu::acl {
namespace {

std::string own_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_library_dir), &info) == 0 ||
      info.dli_fname == nullptr) {
    return ".";
  }
  std::string path(info.dli_fname);
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string requested_backend() {
  const char* env = std::getenv("TORCH_NPU_BACKEND");
  std::string value = env ? env : "auto";
  TORCH_CHECK(
      value == "auto" || value == "simulator" || value == "cann",
      "TORCH_NPU_BACKEND=", value,
      " is not understood: use 'auto' (CANN when installed, else the "
      "simulator), 'cann' or 'simulator'.");
  return value;
}

template <typename Fn>
void resolve(void* handle, const char* name, Fn& slot, bool required,
             const std::string& library) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  TORCH_CHECK(
      slot != nullptr || !required, "The NPU runtime library ", library,
      " lacks the function ", name,
      ". It is too old or not CANN's libascendcl.so; install a CANN toolkit "
      "that torch-npu supports (see COMPATIBILITY.en.md) or set "
      "TORCH_NPU_BACKEND=simulator.");
}

struct Loaded {
  AclApi api;
  BackendInfo info;
};

Loaded load() {
  const std::string requested = requested_backend();
  void* handle = nullptr;
  std::string library;
  Backend backend = Backend::Simulator;
  std::string cann_error;

  if (requested != "simulator") {
    // RTLD_GLOBAL: CANN's own libraries resolve symbols across each other.
    handle = dlopen("libascendcl.so", RTLD_NOW | RTLD_GLOBAL);
    if (handle != nullptr) {
      library = "libascendcl.so";
      backend = Backend::Cann;
    } else {
      const char* err = dlerror();
      cann_error = err ? err : "unknown error";
    }
  }
  TORCH_CHECK(
      handle != nullptr || requested != "cann",
      "TORCH_NPU_BACKEND=cann, but CANN's runtime libascendcl.so could not be "
      "loaded (", cann_error, "). Install the CANN toolkit and driver and "
      "source its environment (`source /usr/local/Ascend/ascend-toolkit/"
      "set_env.sh`) so that libascendcl.so is on LD_LIBRARY_PATH, or unset "
      "TORCH_NPU_BACKEND to use the embedded NPU simulator.");
  if (handle == nullptr) {
    library = own_library_dir() + "/libnpu_sim.so";
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* err = handle ? nullptr : dlerror();
    TORCH_CHECK(
        handle != nullptr, "The embedded NPU simulator ", library,
        " could not be loaded (", err ? err : "unknown error",
        "). The torch-npu-core installation is broken: reinstall it.");
    backend = Backend::Simulator;
  }

  Loaded loaded;
#define TORCH_NPU_RESOLVE_REQUIRED(ret, name, params, args) \
  resolve(handle, #name, loaded.api.name, true, library);
#define TORCH_NPU_RESOLVE_OPTIONAL(ret, name, params, args) \
  resolve(handle, #name, loaded.api.name, false, library);
  TORCH_NPU_ACL_REQUIRED_FUNCTIONS(TORCH_NPU_RESOLVE_REQUIRED)
  TORCH_NPU_ACL_OPTIONAL_FUNCTIONS(TORCH_NPU_RESOLVE_OPTIONAL)
#undef TORCH_NPU_RESOLVE_REQUIRED
#undef TORCH_NPU_RESOLVE_OPTIONAL
  const bool simulator = backend == Backend::Simulator;
  resolve(handle, "npuSimLaunchWork", loaded.api.npuSimLaunchWork, simulator, library);
  resolve(handle, "npuSimSetWorkError", loaded.api.npuSimSetWorkError, simulator, library);
  resolve(handle, "npuSimGetHostAccessOffset", loaded.api.npuSimGetHostAccessOffset, simulator, library);
  resolve(handle, "npuSimStreamGetDevice", loaded.api.npuSimStreamGetDevice, simulator, library);
  resolve(handle, "npuSimDescribe", loaded.api.npuSimDescribe, simulator, library);
  resolve(handle, "npuSimActivityEnable", loaded.api.npuSimActivityEnable, simulator, library);
  resolve(handle, "npuSimActivityPushCorrelationId", loaded.api.npuSimActivityPushCorrelationId, simulator, library);
  resolve(handle, "npuSimActivityPopCorrelationId", loaded.api.npuSimActivityPopCorrelationId, simulator, library);
  resolve(handle, "npuSimActivityFlush", loaded.api.npuSimActivityFlush, simulator, library);
  resolve(handle, "npuSimLaunchWorkWithAccesses", loaded.api.npuSimLaunchWorkWithAccesses, simulator, library);
  resolve(handle, "npuSimRaceCheckEnable", loaded.api.npuSimRaceCheckEnable, simulator, library);
  resolve(handle, "npuSimRaceCheckEnabled", loaded.api.npuSimRaceCheckEnabled, simulator, library);
  resolve(handle, "npuSimRaceCheckSetSiteProvider", loaded.api.npuSimRaceCheckSetSiteProvider, simulator, library);
  resolve(handle, "npuSimSynchronizeStreamUnordered", loaded.api.npuSimSynchronizeStreamUnordered, simulator, library);
  c10_npu::detail::adopt_runtime_race_check(loaded.api);

  loaded.info.backend = backend;
  loaded.info.library = library;
  if (loaded.api.aclsysGetCANNVersion != nullptr) {
    aclCANNPackageVersion version{};
    if (loaded.api.aclsysGetCANNVersion(ACL_PKG_NAME_CANN, &version) == ACL_SUCCESS) {
      loaded.info.cann_version = version.version;
    }
  }
  if (loaded.info.cann_version.empty()) {
    loaded.info.cann_version = "unknown";
  }
  loaded.info.description = simulator && loaded.api.npuSimDescribe
      ? loaded.api.npuSimDescribe()
      : "CANN " + loaded.info.cann_version + " (" + library + ")";
  return loaded;
}

const Loaded& loaded() {
  // A function-local static: thread-safe, and a failed load is retried on
  // the next call with the same clear error.
  static const Loaded instance = load();
  return instance;
}

} // namespace

const AclApi& api() {
  return loaded().api;
}

const BackendInfo& backend_info() {
  return loaded().info;
}

bool is_simulator() {
  return loaded().info.backend == Backend::Simulator;
}

const char* error_name(aclError error) {
  switch (error) {
    case ACL_SUCCESS: return "ACL_SUCCESS";
    case ACL_ERROR_RT_CAPTURE_DEPENDENCY: return "ACL_ERROR_RT_CAPTURE_DEPENDENCY";
    case ACL_ERROR_RT_STREAM_CAPTURED: return "ACL_ERROR_RT_STREAM_CAPTURED";
    case ACL_ERROR_RT_EVENT_CAPTURED: return "ACL_ERROR_RT_EVENT_CAPTURED";
    case ACL_ERROR_RT_STREAM_NOT_CAPTURED: return "ACL_ERROR_RT_STREAM_NOT_CAPTURED";
    case ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED: return "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED";
    case ACL_ERROR_RT_STREAM_UNJOINED: return "ACL_ERROR_RT_STREAM_UNJOINED";
    case ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED: return "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED";
    case ACL_ERROR_INVALID_PARAM: return "ACL_ERROR_INVALID_PARAM";
    case ACL_ERROR_UNINITIALIZE: return "ACL_ERROR_UNINITIALIZE";
    case ACL_ERROR_REPEAT_INITIALIZE: return "ACL_ERROR_REPEAT_INITIALIZE";
    case ACL_ERROR_BAD_ALLOC: return "ACL_ERROR_BAD_ALLOC";
    case ACL_ERROR_INVALID_DEVICE: return "ACL_ERROR_INVALID_DEVICE";
    case ACL_ERROR_FEATURE_UNSUPPORTED: return "ACL_ERROR_FEATURE_UNSUPPORTED";
    case ACL_ERROR_RT_FAILURE: return "ACL_ERROR_RT_FAILURE";
    case ACL_ERROR_RT_PARAM_INVALID: return "ACL_ERROR_RT_PARAM_INVALID";
    case ACL_ERROR_RT_INVALID_DEVICEID: return "ACL_ERROR_RT_INVALID_DEVICEID";
    case ACL_ERROR_RT_CONTEXT_NULL: return "ACL_ERROR_RT_CONTEXT_NULL";
    case ACL_ERROR_RT_INVALID_MEMORY_TYPE: return "ACL_ERROR_RT_INVALID_MEMORY_TYPE";
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT: return "ACL_ERROR_RT_FEATURE_NOT_SUPPORT";
    case ACL_ERROR_RT_MEMORY_ALLOCATION: return "ACL_ERROR_RT_MEMORY_ALLOCATION";
    case ACL_ERROR_RT_NO_DEVICE: return "ACL_ERROR_RT_NO_DEVICE";
    case ACL_ERROR_RT_RESOURCE_ALLOC_FAIL: return "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL";
    case ACL_ERROR_RT_DEVICE_OOM: return "ACL_ERROR_RT_DEVICE_OOM";
    case ACL_ERROR_RT_INTERNAL_ERROR: return "ACL_ERROR_RT_INTERNAL_ERROR";
    case ACL_ERROR_RT_STREAM_NOT_COMPLETE: return "ACL_ERROR_RT_STREAM_NOT_COMPLETE";
    case ACL_ERROR_RT_EVENT_NOT_COMPLETE: return "ACL_ERROR_RT_EVENT_NOT_COMPLETE";
    case ACL_ERROR_RT_AICORE_EXCEPTION: return "ACL_ERROR_RT_AICORE_EXCEPTION";
    default: return "unknown CANN error";
  }
}

} // namespace c10_npu::acl
