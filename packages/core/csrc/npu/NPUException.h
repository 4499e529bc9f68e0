// Turning CANN error codes into c10::Error exceptions with useful messages.
#pragma once

#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include "cann/acl_types.h"
#include "npu/Macros.h"

namespace c10_npu {

// Throws a c10::Error for a failed acl call: the runtime's own recent message,
// the error name and code, and the call that failed.
[[noreturn]] TORCH_NPU_API void throw_acl_error(
    aclError error, const char* call, const char* file, int line);

// Logs (instead of throwing) a failed acl call; for destructors.
TORCH_NPU_API void warn_acl_error(aclError error, const char* call);

} // namespace c10_npu

#define NPU_CHECK(EXPR)                                                    \
  do {                                                                     \
    const aclError __npu_err = (EXPR);                                     \
    if (C10_UNLIKELY(__npu_err != ACL_SUCCESS)) {                          \
      ::c10_npu::throw_acl_error(__npu_err, #EXPR, __FILE__, __LINE__);    \
    }                                                                      \
  } while (0)

#define NPU_WARN_IF_ERROR(EXPR)                                            \
  do {                                                                     \
    const aclError __npu_err = (EXPR);                                     \
    if (C10_UNLIKELY(__npu_err != ACL_SUCCESS)) {                          \
      ::c10_npu::warn_acl_error(__npu_err, #EXPR);                         \
    }                                                                      \
  } while (0)
