// torch_npu._C's allocator-settings functions (npu/NPUAllocatorConfig.h),
// what torch.npu.memory._set_allocator_settings calls.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_memory(pybind11::module_& m);

} // namespace c10_npu::python
