// Device memory shared between processes: the exports and imports behind
// aclrtIpcMemGetExportKey / aclrtIpcMemImportByKey / aclrtIpcMemClose.
//
// Note [IPC memory]
// A simulated device's memory is a memfd (device_memory.h), so another
// process of the machine can map the very same pages: sharing is mapping,
// never copying. An export is a small descriptor memfd of the exporting
// process listing what it shares, as (memfd descriptor, offset, size)
// pieces of its device memfds plus the export flags and the importers
// allowed by aclrtIpcMemSetImportPid. The key names it:
//
//   npusim-ipc-<exporter pid>-<descriptor fd>-<64-bit nonce, hex>
//
// An importer opens /proc/<pid>/fd/<fd> of the descriptor and of each
// device memfd it lists, and maps the pieces one after the other into a
// new reservation of its current device's virtual-memory window, so the
// imported pointer is device memory of that device to every API (copies,
// kernels, pointer attributes, the checker). The kernel allows opening
// another process's descriptors through /proc only to the same user
// (ptrace read access), so a key is useless to other users; they get an
// error saying so. The nonce makes a key of an exited process whose pid
// and descriptor number were reused fail as unknown instead of mapping
// someone else's memory. After mapping, the importer checks that the
// descriptor is still the one it read: an export closed meanwhile fails
// the import rather than leaving it mapped to freed memory.
//
// aclrtMalloc memory is private anonymous memory when the checker is off
// (transparent huge pages; device_memory.cpp). Exporting such an
// allocation first drains its device, copies its pages into the memfd
// pages of the same offset (the range allocator reserved them for it
// already) and maps the memfd there instead; the allocation stays
// shareable until aclrtFree, which puts anonymous memory back.
//
// Lifetimes follow CANN's rules, which the simulator cannot enforce across
// processes: the exporter must keep the memory allocated while any
// importer uses it. Freeing it (aclrtFree, aclrtFreePhysical) or
// aclrtIpcMemClose in the exporter revokes the key for later imports;
// existing imports keep their mapping, which then aliases whatever the
// device's memory holds at that place (a use after free, as on hardware).
// The pid check of aclrtIpcMemSetImportPid is done by the importing
// simulator, not by a kernel: it keeps honest programs honest, while the
// same-user rule above is what actually protects the memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acl_types.h"
#include "device_memory.h"

namespace npu_sim::ipc {

// A random, non-zero nonce for a key or handle.
uint64_t newNonce();

// Registers an export of `pieces` (descriptors of this process; `lead` is
// the exported pointer's offset in the first page, `size` the exported
// bytes) and returns its key.
aclError exportMemory(const std::vector<SharedPiece>& pieces, uint64_t lead, uint64_t size,
                      uint64_t flags, std::string* key);

// Maps what `key` shares into `memory` (the importer's current device) and
// returns the imported pointer.
aclError importMemory(DeviceMemory& memory, const char* key, void** devPtr);

// Adds importers allowed to import this process's export `key`.
aclError setImportPids(const char* key, const int32_t* pids, size_t count);

// In an importer: unmaps the memory imported with `key`. In the exporter:
// revokes `key` (later imports fail; existing ones are not affected).
aclError closeKey(const char* key);

// Revokes every export of this process sharing pages of
// [offset, offset + size) of memfd `fd`: that memory is being freed.
void revokeExports(int fd, uint64_t offset, uint64_t size);

} // namespace npu_sim::ipc
