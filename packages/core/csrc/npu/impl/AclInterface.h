// The CANN runtime as a table of function pointers, resolved at run time.
//
// Nothing in torch-npu links against CANN: the functions come from CANN's
// libascendcl.so where it is installed, and from the embedded simulator
// (libnpu_sim.so) otherwise, so the same code path runs on both.
// TORCH_NPU_BACKEND=simulator|cann|auto picks one explicitly.
#pragma once

#include <string>

#include "cann/acl_functions.h"
#include "cann/npu_sim_ext.h"
#include "npu/Macros.h"

namespace c10_npu::acl {

struct AclApi {
#define TORCH_NPU_ACL_POINTER(ret, name, params, args) ret(*name) params = nullptr;
  TORCH_NPU_ACL_REQUIRED_FUNCTIONS(TORCH_NPU_ACL_POINTER)
  TORCH_NPU_ACL_OPTIONAL_FUNCTIONS(TORCH_NPU_ACL_POINTER)
  // Simulator extensions; null on real CANN.
  decltype(&::npuSimLaunchWork) npuSimLaunchWork = nullptr;
  decltype(&::npuSimSetWorkError) npuSimSetWorkError = nullptr;
  decltype(&::npuSimGetHostAccessOffset) npuSimGetHostAccessOffset = nullptr;
  decltype(&::npuSimStreamGetDevice) npuSimStreamGetDevice = nullptr;
  decltype(&::npuSimDescribe) npuSimDescribe = nullptr;
  decltype(&::npuSimActivityEnable) npuSimActivityEnable = nullptr;
  decltype(&::npuSimActivityPushCorrelationId) npuSimActivityPushCorrelationId = nullptr;
  decltype(&::npuSimActivityPopCorrelationId) npuSimActivityPopCorrelationId = nullptr;
  decltype(&::npuSimActivityFlush) npuSimActivityFlush = nullptr;
  decltype(&::npuSimLaunchWorkWithAccesses) npuSimLaunchWorkWithAccesses = nullptr;
  decltype(&::npuSimRaceCheckEnable) npuSimRaceCheckEnable = nullptr;
  decltype(&::npuSimRaceCheckEnabled) npuSimRaceCheckEnabled = nullptr;
  decltype(&::npuSimRaceCheckSetSiteProvider) npuSimRaceCheckSetSiteProvider = nullptr;
  decltype(&::npuSimSynchronizeStreamUnordered) npuSimSynchronizeStreamUnordered = nullptr;
#undef TORCH_NPU_ACL_POINTER
};

enum class Backend { Simulator, Cann };

struct BackendInfo {
  Backend backend;
  std::string library;      // path of the loaded runtime library
  std::string cann_version; // CANN version reported (emulated on the simulator)
  std::string description;
};

// The loaded runtime; loads it on first call. Throws a c10::Error that says
// how to install CANN or use the simulator when the requested backend is
// missing. Loading starts no threads and touches no device.
TORCH_NPU_API const AclApi& api();
TORCH_NPU_API const BackendInfo& backend_info();
TORCH_NPU_API bool is_simulator();

// Name of a CANN error code, e.g. "ACL_ERROR_RT_MEMORY_ALLOCATION".
TORCH_NPU_API const char* error_name(aclError error);

} // namespace c10_npu::acl
