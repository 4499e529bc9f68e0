// torch_npu._C's mstx functions (npu/NPUMstx.h), behind torch_npu.npu.mstx.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_mstx(pybind11::module_& m);

} // namespace c10_npu::python
