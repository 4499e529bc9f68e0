// The call of an op's CPU kernel made from the npu call: its arguments and
// the dispatcher state it runs in.
//
// The generic executor runs the CPU kernel as device work, possibly long
// after the host returned and possibly many times (a captured graph replays
// its items). So the kernel's arguments are made on the host at launch, from
// the npu ones, as values that stay right whatever the host does next: npu
// tensors become CPU aliases of their memory, host tensors copies, npu
// generators CPU generators seeded from the npu generator's counter. Each
// run then builds its own stack from them (as_stack), which leaves them as
// they were (Note [Device work items run many times],
// packages/core/csrc/npu/NPUWork.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace torch_npu_ops {

// The dispatcher state a CPU kernel runs in, on whichever thread runs the
// work (the stream's worker, or a synchronizing host thread; see
// c10_npu::WorkFlags::Awaited): what the CPU gives it below autograd, with the
// caller's grad mode. The host's own state (autocast, Python modes) stays
// out: they see the npu op, not the CPU ops inside its kernel.
struct BelowAutograd {
  explicit BelowAutograd(bool grad_enabled)
      : dispatch_keys(c10::default_included_set,
                      c10::default_excluded_set | c10::autograd_dispatch_keyset_with_ADInplaceOrView),
        grad_mode(grad_enabled) {}
  c10::impl::ForceDispatchKeyGuard dispatch_keys;
  c10::AutoGradMode grad_mode;
};

// Takes the op's arguments off the stack.
std::vector<c10::IValue> pop_arguments(const c10::FunctionSchema& schema, torch::jit::Stack* stack);

// The arguments of the CPU kernel: npu tensors as CPU aliases of their
// memory, host tensors copied (the host may change them before the work
// runs), npu devices as CPU, npu generators as CPU generators seeded from the
// npu generator. The work holds no reference to npu storage: as on CUDA,
// memory freed by the host is reused in stream order, so queued work never
// inflates memory use. `resizable_shared`: the CPU storages of shared npu
// storages may be resized (SharedStorages' `resizable`).
std::vector<c10::IValue> cpu_arguments(
    const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args, c10::Device device,
    bool resizable_shared = false);

// A kernel's stack from a work item's first `count` arguments (all by
// default): copied, never moved out, and each generator a fresh copy of the
// one made at launch (Note [Device work items run many times]: the item may
// run again, and the kernel advances the generator it gets).
torch::jit::Stack as_stack(const std::vector<c10::IValue>& args, size_t count = SIZE_MAX);

// What decides whether the CPU kernel of a call can fail (Note [Errors at
// the call]): the op; each tensor's dtype, layout, rank, which of its dimensions
// are empty, and its memory order
// (contiguous, channels-last, or otherwise: kernels refuse by it); and
// the arguments checked by value (booleans, strings, dtypes, floating-point
// scalars such as uniform_'s bounds, random_'s integer bounds), other
// integers by sign. Sizes and integer
// values are left out: the meta kernel checks shapes and dims, and keying on
// them would verify every new shape again (the few kernel checks that
// compare sizes are made on the host: ArgumentChecks.cpp). So are the hyper-parameters of the optimizer kernels
// (_fused_*, _foreach_*), which change every step.
uint64_t call_signature(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

} // namespace torch_npu_ops
