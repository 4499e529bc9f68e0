#include "npu/HcclInterface.h"

#include <dlfcn.h>

#include <cstring>

#include <c10/util/Exception.h>

#include "npu/impl/AclInterface.h"

namespace c10_npu::hccl {
namespace {

HcclApi load() {
  const auto& runtime = acl::backend_info();
  void* handle = nullptr;
  std::string library;
  if (acl::is_simulator()) {
    // The simulator is one library: its HCCL functions sit beside the
    // runtime's, which is already loaded.
    library = runtime.library;
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  } else {
    library = "libhccl.so";
    handle = dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  const char* error = handle ? nullptr : dlerror();
  TORCH_CHECK(
      handle != nullptr, "HCCL, CANN's collective communication library (", library,
      "), could not be loaded (", error ? error : "unknown error",
      "). It is part of the CANN toolkit: source its environment "
      "(`source /usr/local/Ascend/ascend-toolkit/set_env.sh`) so that libhccl.so "
      "is on LD_LIBRARY_PATH, or set TORCH_NPU_BACKEND=simulator to use the "
      "embedded simulator's HCCL.");
  HcclApi api;
#define TORCH_NPU_RESOLVE_HCCL(ret, name, params, args)                                 \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));               \
  TORCH_CHECK(api.name != nullptr, "The HCCL library ", library, " lacks the function ", \
              #name, ". Install a CANN toolkit that torch-npu supports (see "          \
              "COMPATIBILITY.en.md).");
  TORCH_NPU_HCCL_FUNCTIONS(TORCH_NPU_RESOLVE_HCCL)
#undef TORCH_NPU_RESOLVE_HCCL
  return api;
}

} // namespace

const HcclApi& api() {
  static const HcclApi instance = load();
  return instance;
}

HcclCommConfig default_comm_config() {
  HcclCommConfig config{};
  const HcclCommConfigHeader header{sizeof(HcclCommConfig), HCCL_COMM_CONFIG_MAGIC_WORD,
                                    HCCL_COMM_CONFIG_VERSION, 0};
  static_assert(sizeof header <= sizeof config.reserved);
  std::memcpy(config.reserved, &header, sizeof header);
  config.hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
  config.hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
  config.hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
  config.hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
  config.hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
  config.hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
  config.hcclSymWinMaxMemSizePerRank = 16; // HCCL's default stride, GiB
  return config;
}

const char* result_name(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS: return "HCCL_SUCCESS";
    case HCCL_E_PARA: return "HCCL_E_PARA";
    case HCCL_E_PTR: return "HCCL_E_PTR";
    case HCCL_E_MEMORY: return "HCCL_E_MEMORY";
    case HCCL_E_INTERNAL: return "HCCL_E_INTERNAL";
    case HCCL_E_NOT_SUPPORT: return "HCCL_E_NOT_SUPPORT";
    case HCCL_E_NOT_FOUND: return "HCCL_E_NOT_FOUND";
    case HCCL_E_UNAVAIL: return "HCCL_E_UNAVAIL";
    case HCCL_E_SYSCALL: return "HCCL_E_SYSCALL";
    case HCCL_E_TIMEOUT: return "HCCL_E_TIMEOUT";
    case HCCL_E_OPEN_FILE_FAILURE: return "HCCL_E_OPEN_FILE_FAILURE";
    case HCCL_E_TCP_CONNECT: return "HCCL_E_TCP_CONNECT";
    case HCCL_E_ROCE_CONNECT: return "HCCL_E_ROCE_CONNECT";
    case HCCL_E_TCP_TRANSFER: return "HCCL_E_TCP_TRANSFER";
    case HCCL_E_ROCE_TRANSFER: return "HCCL_E_ROCE_TRANSFER";
    case HCCL_E_RUNTIME: return "HCCL_E_RUNTIME";
    case HCCL_E_DRV: return "HCCL_E_DRV";
    case HCCL_E_PROFILING: return "HCCL_E_PROFILING";
    case HCCL_E_CCE: return "HCCL_E_CCE";
    case HCCL_E_NETWORK: return "HCCL_E_NETWORK";
    case HCCL_E_AGAIN: return "HCCL_E_AGAIN";
    case HCCL_E_REMOTE: return "HCCL_E_REMOTE";
    case HCCL_E_SUSPENDING: return "HCCL_E_SUSPENDING";
    case HCCL_E_OPRETRY_FAIL: return "HCCL_E_OPRETRY_FAIL";
    case HCCL_E_OOM: return "HCCL_E_OOM";
  }
  return "unknown HcclResult";
}

std::string describe_error(HcclResult code) {
  std::string text = result_name(code);
  text += " (";
  text += api().HcclGetErrorString(code);
  text += ")";
  const char* recent = acl::api().aclGetRecentErrMsg();
  if (recent != nullptr && *recent != '\0') {
    text += ": ";
    text += recent;
  }
  return text;
}

} // namespace c10_npu::hccl
