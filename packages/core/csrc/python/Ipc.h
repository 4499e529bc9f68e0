// torch_npu._C's functions for sharing npu storages between processes
// (Note [npu tensors between processes], torch_npu/multiprocessing/reductions.py).
#pragma once

#include <pybind11/pybind11.h>

namespace c10_npu::python {

void bind_ipc(pybind11::module_& m);

} // namespace c10_npu::python
