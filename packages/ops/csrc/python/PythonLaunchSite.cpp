#include "python/PythonLaunchSite.h"

#include <Python.h>
#include <frameobject.h>

#include <string>
#include <string_view>
#include <unordered_map>

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

// Taking the GIL while the interpreter finalises ends a non-main thread.
bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Whether this thread is inside Python code (has a frame). Reads only this
// thread's own state, which no other thread changes, so it needs no GIL:
// autograd's device threads keep a Python thread state for their Python
// hooks but launch backward ops from C++, and must not queue for the GIL
// (behind another thread running Python) for every op to find no line.
bool in_python_code(PyThreadState* thread) {
#if PY_VERSION_HEX >= 0x030D0000
  return thread->current_frame != nullptr;
#elif PY_VERSION_HEX >= 0x030B0000
  return thread->cframe != nullptr && thread->cframe->current_frame != nullptr;
#else
  return thread->frame != nullptr;
#endif
}

int last_instruction(PyFrameObject* frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyFrame_GetLasti(frame);
#else
  return frame->f_lasti;
#endif
}

// What a code object contributes to launch sites. The cache holds a strong
// reference to each code object it knows, so that a key is never a freed
// code object's recycled address.
struct CodeSites {
  bool library = false;
  std::unordered_map<int, c10_npu::LaunchSite> by_instruction;
};

class SiteCache {
 public:
  // Entries are bounded: a program that keeps creating code (exec in a
  // loop) starts over rather than holding all of it alive. Work items keep
  // their own reference to the sites they name.
  static constexpr size_t kMaxCodeObjects = 4096;

  CodeSites& entry(PyCodeObject* code) {
    auto it = codes_.find(code);
    if (it != codes_.end()) {
      return it->second;
    }
    if (codes_.size() >= kMaxCodeObjects) {
      clear();
    }
    Py_INCREF(code);
    CodeSites& sites = codes_[code];
    sites.library = is_library_file(filename(code));
    return sites;
  }

  static c10_npu::LaunchSite site(CodeSites& sites, PyFrameObject* frame, PyCodeObject* code) {
    c10_npu::LaunchSite& site = sites.by_instruction[last_instruction(frame)];
    if (site == nullptr) {
      site = std::make_shared<const std::string>(
          std::string(filename(code)) + ":" + std::to_string(PyFrame_GetLineNumber(frame)));
    }
    return site;
  }

 private:
  static const char* filename(PyCodeObject* code) {
    const char* name = PyUnicode_AsUTF8(code->co_filename);
    if (name == nullptr) {
      PyErr_Clear();
      return "<unknown>";
    }
    return name;
  }

  void clear() {
    for (auto& [code, sites] : codes_) {
      Py_DECREF(code);
    }
    codes_.clear();
  }

  std::unordered_map<PyCodeObject*, CodeSites> codes_;
};

// Guarded by the GIL. Never destroyed: it holds Python objects, which must
// not be released after the interpreter has finalised.
SiteCache& site_cache() {
  static auto* cache = new SiteCache();
  return *cache;
}

} // namespace

c10_npu::LaunchSite capture_python_launch_site() {
  // Threads outside Python code have no line: no GIL to take.
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    return nullptr;
  }
  PyThreadState* thread = PyGILState_GetThisThreadState();
  if (thread == nullptr || !in_python_code(thread)) {
    return nullptr;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  SiteCache& cache = site_cache();
  c10_npu::LaunchSite innermost;
  c10_npu::LaunchSite site;
  PyFrameObject* frame = PyEval_GetFrame(); // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr && site == nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame); // new reference
    CodeSites& sites = cache.entry(code);
    if (!sites.library) {
      site = SiteCache::site(sites, frame, code);
    } else if (innermost == nullptr) {
      innermost = SiteCache::site(sites, frame, code);
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame); // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return site != nullptr ? site : innermost;
}

} // namespace torch_npu_ops
