#include "PythonMetaWarmup.h"

#include <Python.h>

#include <atomic>
#include <mutex>

namespace torch_npu_ops {
namespace {

std::atomic<bool> g_ready{false};

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() != 0 && Py_IsFinalizing() == 0;
#else
  return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0;
#endif
}

// Starts the Python warm-up (see the Note), which calls
// set_meta_kernels_ready when done: at once when it has nothing to do.
void start_warmup() {
  if (!interpreter_usable()) {
    set_meta_kernels_ready(); // no Python, no Python meta kernels to wait for
    return;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* module = PyImport_ImportModule("torch_npu.ops._meta_warmup");
  PyObject* result = module != nullptr ? PyObject_CallMethod(module, "start", nullptr) : nullptr;
  if (result == nullptr) {
    PyErr_Clear();
    set_meta_kernels_ready(); // could not start: behave as before
  }
  Py_XDECREF(result);
  Py_XDECREF(module);
  PyGILState_Release(gil);
}

} // namespace

bool meta_kernels_ready() {
  if (g_ready.load(std::memory_order_acquire)) {
    return true;
  }
  static std::once_flag started;
  std::call_once(started, start_warmup);
  return g_ready.load(std::memory_order_acquire);
}

void set_meta_kernels_ready() {
  g_ready.store(true, std::memory_order_release);
}

} // namespace torch_npu_ops
