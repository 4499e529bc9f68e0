// torch_npu._C's stream-capture functions (npu/NPUGraphsUtils.h), what
// torch.npu.NPUGraph (torch-npu-graph) calls.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_graphs(pybind11::module_& m);

} // namespace c10_npu::python
