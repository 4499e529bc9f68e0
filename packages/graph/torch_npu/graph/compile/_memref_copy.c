/* memrefCopy, the function MLIR's lowering of memref.copy calls when source
 * or target is not contiguous (Note [Strided copies run in our own memrefCopy],
 * _runtime.py). Its ABI is MLIR's: two unranked memrefs, each a rank and a
 * pointer to a ranked descriptor {allocated, aligned, offset, sizes[rank],
 * strides[rank]}, offsets and strides in elements of elem_size bytes. */

#include <stdint.h>
#include <string.h>

typedef struct {
  int64_t rank;
  void* descriptor;
} UnrankedMemRef;

typedef struct {
  char* allocated;
  char* aligned;
  int64_t offset;
  int64_t sizes_and_strides[]; /* sizes[rank], then strides[rank] */
} MemRefDescriptor;

/* The ranks Inductor's kernels reach are small; a deeper memref would be a
 * bug upstream, and copying nothing is not an option, so it traps. */
#define MAX_RANK 64

void memrefCopy(int64_t elem_size, UnrankedMemRef* src, UnrankedMemRef* dst) {
  const int64_t rank = src->rank;
  const MemRefDescriptor* s = (const MemRefDescriptor*)src->descriptor;
  const MemRefDescriptor* d = (const MemRefDescriptor*)dst->descriptor;
  const int64_t* sizes = s->sizes_and_strides;
  const int64_t* src_strides = s->sizes_and_strides + rank;
  const int64_t* dst_strides = d->sizes_and_strides + rank;
  if (rank > MAX_RANK) {
    __builtin_trap();
  }
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    count *= sizes[i];
  }
  if (count == 0) {
    return;
  }
  int64_t index[MAX_RANK] = {0};
  int64_t src_at = s->offset;
  int64_t dst_at = d->offset;
  for (int64_t n = 0; n < count; ++n) {
    memcpy(d->aligned + dst_at * elem_size, s->aligned + src_at * elem_size, (size_t)elem_size);
    /* The next index in row-major order: the last dimension moves fastest;
     * a dimension that wraps around steps back to its start. */
    for (int64_t i = rank - 1; i >= 0; --i) {
      if (++index[i] < sizes[i]) {
        src_at += src_strides[i];
        dst_at += dst_strides[i];
        break;
      }
      src_at -= src_strides[i] * (sizes[i] - 1);
      dst_at -= dst_strides[i] * (sizes[i] - 1);
      index[i] = 0;
    }
  }
}
