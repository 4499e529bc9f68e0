// The CPython side of LaunchSite.h: the Python line that launched an op,
// found as LaunchSite.h describes. Installed by torch_npu.ops._C
// (set_launch_site_capture) when the plugin loads in Python.
#pragma once

#include "npu/NPUWork.h"

namespace torch_npu_ops {

// "file.py:12" of the innermost Python frame outside torch's packages (or
// the innermost frame if all are torch's), or null when the calling thread
// runs no Python code (autograd's device threads).
c10_npu::LaunchSite capture_python_launch_site();

} // namespace torch_npu_ops
