#include "ResultCopy.h"

#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace torch_npu_ops {
namespace {

// Below this, one memcpy on the calling thread: the threads cost more.
constexpr int64_t kLargeCopyBytes = 1 << 20;
// Each thread copies whole chunks of this size.
constexpr int64_t kChunkBytes = 64 * 1024;

void copy_chunk(char* dst, const char* src, int64_t bytes) {
#if defined(__x86_64__)
  // Streaming stores need 16-byte aligned destinations: copy the unaligned
  // head and the tail normally.
  const int64_t head = std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  const int64_t vectors = bytes / 64 * 4;
  auto* d = reinterpret_cast<__m128i*>(dst);
  const auto* s = reinterpret_cast<const __m128i*>(src);
  for (int64_t i = 0; i < vectors; i += 4) {
    const __m128i a = _mm_loadu_si128(s + i);
    const __m128i b = _mm_loadu_si128(s + i + 1);
    const __m128i c = _mm_loadu_si128(s + i + 2);
    const __m128i e = _mm_loadu_si128(s + i + 3);
    _mm_stream_si128(d + i, a);
    _mm_stream_si128(d + i + 1, b);
    _mm_stream_si128(d + i + 2, c);
    _mm_stream_si128(d + i + 3, e);
  }
  // Streaming stores are weakly ordered: complete them before anything the
  // work does next (or a later item on another thread) reads the output.
  _mm_sfence();
  std::memcpy(dst + vectors * 16, src + vectors * 16, bytes - vectors * 16);
#else
  std::memcpy(dst, src, bytes);
#endif
}

} // namespace

void copy_result(const at::Tensor& dst, const at::Tensor& src) {
  // Same bytes in the same order: contiguity ignores dimensions of size 1,
  // whose strides copy_ does not (it copies nonzero's (n, 1) result, strides
  // (1, n), with a blocked transpose). Tensors whose bits are not their
  // values (the conjugate and negative views, and the zero tensors of
  // autograd, which have no memory) take copy_.
  const bool plain = src.layout() == c10::kStrided && dst.scalar_type() == src.scalar_type() &&
      dst.sizes().equals(src.sizes()) && dst.is_contiguous() && src.is_contiguous() && !src.is_conj() &&
      !src.is_neg() && !src._is_zerotensor() && !dst.is_conj() && !dst.is_neg() && !dst._is_zerotensor();
  if (!plain) {
    dst.copy_(src);
    return;
  }
  const int64_t bytes = static_cast<int64_t>(dst.nbytes());
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.const_data_ptr());
  if (bytes < kLargeCopyBytes) {
    if (bytes > 0) {
      std::memcpy(d, s, bytes);
    }
    return;
  }
  const int64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * kChunkBytes;
    copy_chunk(d + first, s + first, std::min(end * kChunkBytes, bytes) - first);
  });
}

} // namespace torch_npu_ops
