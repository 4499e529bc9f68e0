#include "range_allocator.h"

namespace npu_sim {

RangeAllocator::RangeAllocator(uint64_t capacity, uint64_t base)
    : capacity_(capacity), base_(base) {
  if (capacity > 0) {
    insertFree(base, capacity);
  }
}

void RangeAllocator::insertFree(uint64_t offset, uint64_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void RangeAllocator::eraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

std::optional<uint64_t> RangeAllocator::allocate(uint64_t size, uint64_t alignment) {
  if (size == 0 || size > capacity_) {
    return std::nullopt;
  }
  for (auto it = by_size_.lower_bound({size, 0}); it != by_size_.end(); ++it) {
    const uint64_t block_offset = it->second;
    const uint64_t block_size = it->first;
    const uint64_t aligned = (block_offset + alignment - 1) & ~(alignment - 1);
    if (aligned < block_offset || aligned - block_offset > block_size - size) {
      continue; // the aligned start leaves too little room in this block
    }
    eraseFree(by_offset_.find(block_offset));
    if (aligned > block_offset) {
      insertFree(block_offset, aligned - block_offset);
    }
    const uint64_t end = aligned + size;
    if (end < block_offset + block_size) {
      insertFree(end, block_offset + block_size - end);
    }
    return aligned;
  }
  return std::nullopt;
}

bool RangeAllocator::allocateAt(uint64_t offset, uint64_t size) {
  if (size == 0 || offset < base_ || offset - base_ >= capacity_ ||
      size > capacity_ - (offset - base_)) {
    return false;
  }
  auto it = by_offset_.upper_bound(offset);
  if (it == by_offset_.begin()) {
    return false;
  }
  --it;
  const uint64_t block_offset = it->first;
  const uint64_t block_size = it->second;
  if (offset + size > block_offset + block_size) {
    return false;
  }
  eraseFree(it);
  if (offset > block_offset) {
    insertFree(block_offset, offset - block_offset);
  }
  if (offset + size < block_offset + block_size) {
    insertFree(offset + size, block_offset + block_size - offset - size);
  }
  return true;
}

void RangeAllocator::release(uint64_t offset, uint64_t size) {
  uint64_t start = offset;
  uint64_t end = offset + size;
  auto next = by_offset_.lower_bound(offset);
  if (next != by_offset_.end() && next->first == end) {
    end += next->second;
    auto victim = next++;
    eraseFree(victim);
  }
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      eraseFree(prev);
    }
  }
  insertFree(start, end - start);
}

uint64_t RangeAllocator::largestFree() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

} // namespace npu_sim
