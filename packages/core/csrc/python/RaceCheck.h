// torch_npu._C's switch of the simulator's stream race detector
// (npu/WorkAccesses.h, Note [Stream race detection]).
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_race_check(pybind11::module_& m);

} // namespace c10_npu::python
