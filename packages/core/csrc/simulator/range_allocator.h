// Best-fit allocator of [offset, offset + size) ranges inside
// [base, base + capacity) (offsets may be absolute addresses, so that
// alignment requests refer to real addresses),
// with coalescing of freed neighbours. Allocation and release are O(log n)
// in the number of free blocks. Used for physical ranges of a device's
// memfd and for virtual ranges of a device's VMM window.
//
// Not thread-safe: the owner holds its lock around calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace npu_sim {

class RangeAllocator {
 public:
  explicit RangeAllocator(uint64_t capacity = 0, uint64_t base = 0);

  // Smallest free block that fits `size` bytes starting at a multiple of
  // `alignment` (a power of two); ties go to the lowest offset. When every
  // offset handed out is already aligned (physical pages), the first
  // candidate fits, so the search is O(log n).
  std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment = 1);

  // Takes exactly [offset, offset + size) if it is free.
  bool allocateAt(uint64_t offset, uint64_t size);

  // Returns a range obtained from allocate/allocateAt.
  void release(uint64_t offset, uint64_t size);

  uint64_t capacity() const {
    return capacity_;
  }
  uint64_t largestFree() const;

 private:
  void insertFree(uint64_t offset, uint64_t size);
  void eraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t base_;
  std::map<uint64_t, uint64_t> by_offset_;              // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> by_size_;     // (size, offset)
};

} // namespace npu_sim
