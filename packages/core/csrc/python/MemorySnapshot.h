// torch_npu._C's memory history and snapshot functions (the caching
// allocator's recordHistory and snapshot), in torch.cuda's snapshot format.
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_memory_snapshot(pybind11::module_& m);

} // namespace c10_npu::python
