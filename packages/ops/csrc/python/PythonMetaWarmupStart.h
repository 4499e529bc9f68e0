// The CPython side of PythonMetaWarmup.h (Note [Python meta kernels and the
// first op]): starts torch_npu.ops._meta_warmup's imports on a background
// thread. Installed by torch_npu.ops._C with set_meta_warmup_starter.
#pragma once

namespace torch_npu_ops {

void start_python_meta_warmup();

} // namespace torch_npu_ops
