// The Python line that launched an op, for device-work error messages.
//
// Finding it needs the GIL and a walk of the Python stack: far too costly
// for every launch (the host releases the GIL while an op runs, and a tiny
// op costs about a microsecond). It is therefore looked up only when the
// error is raised at the call: under ASCEND_LAUNCH_BLOCKING=1, where every
// launch synchronises, and for ops the host waits for anyway. Errors of
// asynchronous work say how to get it (c10_npu::set_device_work_error).
#pragma once

#include <string>

#include <c10/util/Exception.h>

namespace torch_npu_ops {

// "file.py:12" of the innermost Python frame outside torch's own packages
// (the user's line), or "" when the calling thread runs no Python code.
std::string python_launch_site();

// Adds "launched from file.py:12" to a device-work error raised at the call.
void add_launch_site(c10::Error& error);

} // namespace torch_npu_ops
