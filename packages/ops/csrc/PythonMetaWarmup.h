// Whether the generic executor can run torch's Python meta kernels without
// paying their one-time imports on the launching thread.
//
// Note [Python meta kernels and the first op]
// The executor shapes an op's outputs with its meta kernel, and torch makes
// the Python meta kernels the active ones for nearly every op. The first of
// them to run imports torch.fx.experimental.symbolic_shapes (sympy, ~0.4 s,
// through torch._check) or torch._dynamo (~1 s, through the decompositions'
// _disable_dynamo): a user's first convolution or cross_entropy on npu took
// a second where the CPU or CUDA take a millisecond (they run no meta
// kernel). The process's first device use (the runtime's initialisation,
// c10_npu::call_after_init; typically a model moved to npu) therefore starts
// those imports on a background thread (torch_npu/ops/_meta_warmup.py), so
// that they overlap the script's own setup (optimizer, data loader); the
// first executor op starts them if nothing did. Until they are done, the
// executor runs ops synchronously (their CPU kernel gives the shapes), and
// from then on asynchronously with meta kernels as usual.
#pragma once

namespace torch_npu_ops {

// True once the imports are done (or turned off); the first call starts
// them. Cheap after that: one atomic load.
bool meta_kernels_ready();

// Called by the warm-up thread when the imports are done (or failed: the
// first meta kernel then imports them itself, as before).
void set_meta_kernels_ready();

// What meta_kernels_ready's first call runs to start the imports; it calls
// set_meta_kernels_ready when they are done (at once if it cannot start
// them). torch_npu.ops._C installs the Python one
// (python/PythonMetaWarmupStart.cpp); without one (a C++ program, which has
// no Python meta kernels) the meta kernels are ready at once.
using MetaWarmupStarter = void (*)();
void set_meta_warmup_starter(MetaWarmupStarter starter);

} // namespace torch_npu_ops
