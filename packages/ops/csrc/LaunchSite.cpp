#include "LaunchSite.h"

#include <Python.h>
#include <frameobject.h>

#include <string_view>

namespace torch_npu_ops {
namespace {

// Frames of torch, torch_npu and their submodules (torch.nn.functional's
// layer_norm, ...) are not where the user launched the op.
bool is_library_file(std::string_view filename) {
  for (const std::string_view package : {"/torch/", "/torch_npu/"}) {
    if (filename.find(package) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

std::string python_launch_site() {
  if (!Py_IsInitialized()) {
    return {};
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  std::string innermost;
  std::string site;
  PyFrameObject* frame = PyEval_GetFrame(); // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr && site.empty()) {
    PyCodeObject* code = PyFrame_GetCode(frame); // new reference
    const char* filename = PyUnicode_AsUTF8(code->co_filename);
    if (filename == nullptr) {
      PyErr_Clear();
      filename = "<unknown>";
    }
    std::string here = std::string(filename) + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    if (!is_library_file(filename)) {
      site = std::move(here);
    } else if (innermost.empty()) {
      innermost = std::move(here);
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame); // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return site.empty() ? innermost : site;
}

void add_launch_site(c10::Error& error) {
  const std::string site = python_launch_site();
  if (!site.empty()) {
    error.add_context("launched from " + site);
  }
}

} // namespace torch_npu_ops
