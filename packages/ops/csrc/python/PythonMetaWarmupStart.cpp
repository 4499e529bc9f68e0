#include <Python.h>

#include "python/PythonMetaWarmupStart.h"

#include "PythonMetaWarmup.h"

namespace torch_npu_ops {
namespace {

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() != 0 && Py_IsFinalizing() == 0;
#else
  return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0;
#endif
}

} // namespace

// Starts the Python warm-up (see the Note), which calls
// set_meta_kernels_ready when done: at once when it has nothing to do.
void start_python_meta_warmup() {
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

} // namespace torch_npu_ops
