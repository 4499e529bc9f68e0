// Nested npu tensors (torch.nested with the strided layout, NestedTensorImpl).
//
// Note [Nested npu tensors]
// PyTorch takes nested tensors on every device its fast paths accept, and
// those accept PrivateUse1: nn.TransformerEncoder in inference, given a
// src_key_padding_mask, packs its input with torch._nested_tensor_from_mask
// and runs every layer on the nested tensor (_transformer_encoder_layer_fwd,
// _native_multi_head_attention, to_padded_tensor), as it does on CUDA. A
// nested npu tensor is PyTorch's own NestedTensorImpl whose buffer (its
// storage) is npu memory; its metadata (nested sizes, strides and storage
// offsets) are host tensors, as on every device. Its view ops (transpose,
// unbind, select, narrow, chunk, view, ...), metadata getters and copy_ run
// the CPU's nested kernel on the npu tensor itself: a view is metadata over
// the same buffer, the getters return the host metadata, copy_ copies buffer
// to buffer with the dense copy_ (NestedExecution.cpp). Its other ops run the CPU's
// nested kernels as device work (run_nested_on_npu), which see it through
// `nested_with_buffer`: the same nested tensor over a CPU alias of the
// buffer. Nested results have data-dependent buffer sizes, so the host waits
// for them (the synchronous path); the metadata a kernel made are copied to
// host memory on the worker before the host reads them
// (`nested_with_host_metadata`), since the kernel made them in device-work
// memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace torch_npu_ops {

inline bool is_nested(const at::Tensor& t) {
  return t.defined() && t.is_nested();
}

// The storage of the nested tensor `t` as a 1-d tensor: all of its memory.
at::Tensor nested_buffer(const at::Tensor& t);

// A nested tensor with `t`'s metadata over `buffer(nested_buffer(t))`, a
// contiguous 1-d tensor of as many elements, on any device. Reads no values
// of the buffer: safe on the host for a buffer that aliases device memory.
at::Tensor nested_with_buffer(const at::Tensor& t, const std::function<at::Tensor(const at::Tensor&)>& buffer);

// `t` with copies of its metadata made now (in host memory, where no
// KernelAllocationScope is active), sharing its buffer.
at::Tensor nested_with_host_metadata(const at::Tensor& t);

// Registers the nested npu kernel (DeviceOpExecutor.h's run_nested_on_npu)
// for every op with a nested CPU kernel. Once, after the ops are loaded.
void install_nested_kernels();

} // namespace torch_npu_ops
