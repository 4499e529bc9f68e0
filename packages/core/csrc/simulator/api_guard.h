// Keeps C++ exceptions from crossing the extern "C" boundary: every entry
// point runs its implementation through guarded(), which turns an
// exception into an error code with a message.
#pragma once

#include <cxxabi.h>

#include <exception>
#include <new>

#include "acl_types.h"
#include "errors.h"

namespace npu_sim {

template <typename Fn>
aclError guarded(const char* api, Fn&& fn) {
  try {
    return fn();
  } catch (abi::__forced_unwind&) {
    throw; // thread cancellation / pthread_exit must unwind on
  } catch (const std::bad_alloc&) {
    return fail(ACL_ERROR_BAD_ALLOC, "%s: the host is out of memory", api);
  } catch (const std::exception& e) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: internal error: %s", api, e.what());
  } catch (...) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, "%s: internal error", api);
  }
}

} // namespace npu_sim

// Marks a definition as exported despite -fvisibility=hidden.
#define NPU_SIM_EXPORT __attribute__((visibility("default")))
