// The Python line that launched an op, named in its device-work error
// message ("... (launched from train.py:42)") however late the error is
// reported.
//
// Captured at launch, while the launching thread's Python stack is frozen
// inside the op: the GIL, a walk to the innermost frame outside torch's own
// packages and a lookup in a cache of (code object, instruction) -> line
// (~0.15 us measured; the line table is decoded once per instruction). That
// is noise for the generic executor but a tenth of a tiny fast-path op, so
// the fast path captures only for launches whose kernel can fail at run
// time (see FastPath.h).
//
// Taking the GIL here is one more hand-off of the kind the op's return to
// Python makes anyway: while another thread runs Python it may wait for the
// switch interval, as that return does. Threads outside Python code
// (autograd's device threads running the backward) never take it.
//
// libtorch_npu_ops has no Python (C++ programs link it): the capture itself
// is python/PythonLaunchSite.cpp, in torch_npu.ops._C, which installs it here.
#pragma once

#include "npu/NPUWork.h"

namespace torch_npu_ops {

// "file.py:12" of the innermost Python frame outside torch's packages (or
// the innermost frame if all are torch's), or null when the calling thread
// runs no Python code (autograd's device threads, C++ programs).
c10_npu::LaunchSite capture_launch_site();

// Installs the function capture_launch_site calls (null: no launch sites).
using LaunchSiteCapture = c10_npu::LaunchSite (*)();
void set_launch_site_capture(LaunchSiteCapture capture);

} // namespace torch_npu_ops
