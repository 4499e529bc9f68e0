// torch_npu._C's host-op correlation functions (npu/NPUHostOpActivity.h),
// for the profiler plugin and tests.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_activity_host_ops(pybind11::module_& m);

} // namespace c10_npu::python
