// torch_npu._C's device-activity functions (npu/NPUActivity.h), for the
// profiler plugin and tests.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_activity(pybind11::module_& m);

} // namespace c10_npu::python
