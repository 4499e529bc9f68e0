// The simulator's virtual address space.
//
// At start one range is reserved (PROT_NONE, MAP_NORESERVE: costs no
// memory) for all devices and split into per-device windows:
//
//   window d = [heap: heap_size][vmm: 4 * heap_size]
//
// The heap part maps the device's whole memfd once, so aclrtMalloc only
// picks an offset. The VMM part is handed out by aclrtReserveMemAddress.
//
// With the memory checker on, a second range of the same size (the access
// window) is reserved right after it: every real mapping goes to
// `device address + access_delta` there and the device addresses stay
// PROT_NONE, so host code touching device memory faults while the
// simulator's own copies and device work use the translated address.
#pragma once

#include <cstdint>
#include <string>

namespace npu_sim {

struct AddressLayout {
  uintptr_t device_base = 0;  // start of window 0
  uint64_t heap_size = 0;     // per device, multiple of 2 MiB
  uint64_t vmm_size = 0;      // per device, 4 * heap_size
  uint64_t window_size = 0;   // heap_size + vmm_size
  uint32_t device_count = 0;
  uint64_t total = 0;         // device_count * window_size
  intptr_t access_delta = 0;  // 0 unless the checker is on
  bool checker = false;

  bool inDeviceRange(uintptr_t p) const {
    return p - device_base < total; // unsigned wrap rejects p < base
  }
  bool inAccessRange(uintptr_t p) const {
    return checker && p - (device_base + access_delta) < total;
  }
  // Window index of an address in the device range.
  uint32_t windowOf(uintptr_t p) const {
    return static_cast<uint32_t>((p - device_base) / window_size);
  }
  uint64_t windowOffset(uintptr_t p) const {
    return (p - device_base) % window_size;
  }
  uintptr_t heapBase(uint32_t device) const {
    return device_base + device * window_size;
  }
  uintptr_t vmmBase(uint32_t device) const {
    return heapBase(device) + heap_size;
  }
  uintptr_t toHost(uintptr_t device_address) const {
    return device_address + access_delta;
  }
};

// Reserves the ranges; false with a message when the address space is too
// small for the configuration.
bool reserveAddressSpace(uint32_t device_count, uint64_t capacity, bool checker,
                         AddressLayout* layout, std::string* error);

// Maps [fd_offset, fd_offset + size) of `fd` read-write where the host
// accesses device range [device_address, +size) (the device address itself,
// or its access-window alias under the checker).
bool mapDeviceRange(const AddressLayout& layout, uintptr_t device_address, uint64_t size,
                    int fd, uint64_t fd_offset, std::string* error);

// Makes that host-access range inaccessible again (PROT_NONE), keeping the
// address space reserved.
bool unmapDeviceRange(const AddressLayout& layout, uintptr_t device_address, uint64_t size,
                      std::string* error);

} // namespace npu_sim
