// Settings of the NPU caching allocator, apart from its mechanism (as
// c10/cuda's CUDAAllocatorConfig): parsed from PYTORCH_NPU_ALLOC_CONF (or
// PYTORCH_ALLOC_CONF) at the allocator's first use, and again for the keys
// torch.npu.memory._set_allocator_settings names at run time.
//
// Note [Allocator settings]
// The format is Ascend torch_npu's: comma-separated `key:value` entries.
//
//   expandable_segments:True|False      True: new memory of the default
//                                       pool grows one virtual range per
//                                       (stream, size class) instead of
//                                       taking new segments (Note
//                                       [Expandable segments],
//                                       NPUCachingAllocator.h).
//   max_split_size_mb:N                 N > 20 (MiB). Blocks of at least N
//                                       MiB are never split; requests below N
//                                       never take them, requests of at least
//                                       N take a cached one only if it is
//                                       less than 20 MiB larger (CUDA's
//                                       rule). Counted as oversize stats.
//   garbage_collection_threshold:T      0 < T < 1. Before a new segment, while
//                                       reserved memory exceeds T times the
//                                       allowed maximum (set with
//                                       set_per_process_memory_fraction;
//                                       without one there is no maximum and
//                                       nothing is collected), whole cached
//                                       segments are freed, least recently
//                                       freed first.
//   roundup_power2_divisions:D          D a power of two (0: off): requests round up
//   roundup_power2_divisions:[256:1,512:2,>:8]
//                                       to one of D equal steps between the
//                                       powers of two around them (D = 1:
//                                       the next power of two). The list
//                                       form gives D per size interval, keys
//                                       being ascending powers of two in MiB:
//                                       `256:1` covers requests below 256
//                                       MiB (from the previous key on), `>`
//                                       everything from the last key on; a
//                                       D of 0 keeps 512-byte rounding.
//   base_addr_aligned_kb:K              0..16 (KiB), default 16: blocks of
//                                       the large pool (requests above 1
//                                       MiB) are multiples of K KiB, so
//                                       they start at K-KiB-aligned
//                                       addresses (segments and expandable
//                                       chunks start on pages); 0 keeps the
//                                       small pool's 512 bytes.
//   page_size:1g                        large-pool segments (requests above
//                                       1 MiB) are whole multiples of 1 GiB
//                                       (huge pages on the device), and
//                                       expandable large-pool segments map
//                                       1 GiB chunks. Only `1g` is
//                                       accepted, as in torch_npu.
//   segment_size_mb:N                   N >= 1 (MiB): with expandable
//                                       segments, a large-pool segment
//                                       grows by at least N MiB at a time
//                                       (rounded up to the runtime's
//                                       granularity, 2 MiB). torch_npu's
//                                       key; its default is 20, ours the
//                                       granularity (maps no more than a
//                                       request needs).
//   large_segment_size_mb:N             N >= 1 (MiB), default 20: the fixed
//                                       segment a large-pool request below
//                                       10 MiB takes (at least the request
//                                       rounded up to 2 MiB).
//
// An unknown key or a bad value raises c10::Error naming the key and what
// it accepts, and leaves the settings as they were. Like torch_npu,
// max_split_size_mb and garbage_collection_threshold cannot be combined
// with expandable_segments:True. If both environment variables are set,
// they must agree.
//
// The allocator copies the settings into plain members (its hot path never
// parses or locks for them); setAllocatorSettings hands new ones to every
// device's allocator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "npu/Macros.h"

namespace c10_npu::NPUCachingAllocator {

struct TORCH_NPU_API AllocatorSettings {
  static constexpr size_t kUnlimited = std::numeric_limits<size_t>::max();
  // Indexed by floor(log2(request bytes)); 0: plain 512-byte rounding.
  using Divisions = std::array<uint32_t, 64>;

  bool expandable_segments = false;
  size_t max_split_size = kUnlimited; // bytes
  double garbage_collection_threshold = 0.0; // 0: off
  Divisions roundup_power2_divisions{};
  size_t base_addr_aligned_kb = 16;
  size_t page_size = 0; // bytes of a large-pool segment granule; 0: default
  size_t segment_size = 0; // bytes an expandable large-pool segment grows by at least; 0: granularity
  size_t large_segment_size = 20 * 1024 * 1024; // fixed segment of large-pool requests below 10 MiB

  // Divisions that apply to a request of `size` bytes.
  uint32_t divisions_for(size_t size) const;
};

class TORCH_NPU_API AllocatorConfig {
 public:
  // The current settings; the first call reads the environment (and raises
  // if it is malformed, again on every later call until it is fixed).
  static AllocatorSettings settings();

  // Convenience readers of settings().
  static bool expandable_segments() { return settings().expandable_segments; }
  static size_t max_split_size() { return settings().max_split_size; }
  static double garbage_collection_threshold() { return settings().garbage_collection_threshold; }
  static uint32_t roundup_power2_divisions(size_t size) { return settings().divisions_for(size); }
  static size_t base_addr_aligned_kb() { return settings().base_addr_aligned_kb; }
  static size_t page_size() { return settings().page_size; }

  // Parses `config` over `base` (keys it does not name keep their values).
  // `source` names where the text came from, for error messages. Changes
  // nothing.
  static AllocatorSettings parse(const std::string& config, const AllocatorSettings& base,
                                 const std::string& source);

  // Replaces the current settings by `config` parsed over them; on error
  // they stay as they were. Use setAllocatorSettings (NPUCachingAllocator.h)
  // to also reach the allocators that exist already.
  static AllocatorSettings update(const std::string& config);

  // The allocator configuration the environment gives ("" if none).
  static std::string environment_config();
};

} // namespace c10_npu::NPUCachingAllocator

namespace c10_npu::NPUCachingAllocator {

// torch.npu.memory._set_allocator_settings: parses `config` over the current
// settings (AllocatorConfig::update) and hands the result to the allocator
// of every device in use. Defined with the allocator.
TORCH_NPU_API void setAllocatorSettings(const std::string& config);

} // namespace c10_npu::NPUCachingAllocator
