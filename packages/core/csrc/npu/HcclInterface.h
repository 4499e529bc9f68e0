// HCCL, CANN's collective communication library, as a table of function
// pointers resolved at run time from the backend the runtime loaded (see
// AclInterface.h): CANN's libhccl.so, or the embedded simulator, which
// implements HCCL between processes on one machine. Core only resolves the
// library; the hccl process group lives in the torch-npu-distributed plugin.
#pragma once

#include <string>

#include "cann/hccl_functions.h"
#include "npu/Macros.h"

namespace c10_npu::hccl {

struct HcclApi {
#define TORCH_NPU_HCCL_POINTER(ret, name, params, args) ret(*name) params = nullptr;
  TORCH_NPU_HCCL_FUNCTIONS(TORCH_NPU_HCCL_POINTER)
#undef TORCH_NPU_HCCL_POINTER
};

// Loads HCCL on first call (after the runtime). Throws a c10::Error that says
// what to install when it is missing.
TORCH_NPU_API const HcclApi& api();

// "HCCL_E_TIMEOUT (timeout): <the runtime's recent error message>", for
// error messages; takes the calling thread's recent runtime message.
TORCH_NPU_API std::string describe_error(HcclResult code);

// A communicator configuration with its header filled in and no field set
// (HcclCommInitRootInfoConfig then behaves as HcclCommInitRootInfo).
TORCH_NPU_API HcclCommConfig default_comm_config();

// Name of an HCCL result code, e.g. "HCCL_E_PARA".
TORCH_NPU_API const char* result_name(HcclResult code);

} // namespace c10_npu::hccl
