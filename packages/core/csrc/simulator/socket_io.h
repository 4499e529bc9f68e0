// TCP plumbing of the simulated HCCL between machines (Note [Socket
// transport], socket_transport.cpp): listening, connecting and moving bytes
// with deadlines, and the addresses HCCL_IF_IP chooses.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace npu_sim {

using SocketClock = std::chrono::steady_clock;

// Where a TCP listener is reached: a dotted IPv4 address and a port (0: none).
struct SocketAddress {
  char ip[16] = {};
  uint16_t port = 0;
};

// "a.b.c.d:port".
std::string addressText(const SocketAddress& a);
// `in` into the fixed-size field `out` (truncated, NUL-terminated), and back.
void copyString(char* out, size_t size, const std::string& in);
std::string fixedString(const char* in, size_t size);

// `seconds` from now; time_point::max() for infinity.
SocketClock::time_point deadlineAfter(double seconds);
// Milliseconds to wait in poll() before looking again (at most 100).
int pollMillis(SocketClock::time_point deadline);

// HCCL_IF_IP, as real HCCL reads it: the address to listen and be reached
// at; empty when unset (or not an IPv4 address, which is said once).
std::string interfaceAddress();
// An IPv4 address other machines may reach this one at: the first
// non-loopback interface that is up, else the loopback address.
std::string hostAddress();

// HCCL_IF_BASE_PORT, as real HCCL reads it: where a rank table's rank 0
// listens for its peers (Note [Socket transport]); 60000 when unset.
uint16_t basePort();

// A listening TCP socket on HCCL_IF_IP (else every address), on port
// `*port`, or one the kernel picks (0), which `*port` then gets; -1 with
// `why` on failure.
int listenSocket(int backlog, uint16_t* port, std::string* why);
void setNoDelay(int fd);
void setNonBlocking(int fd, bool on);
// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool waitFor(int fd, short events, SocketClock::time_point deadline);
// Writes or reads all `bytes` before `deadline`, whatever the socket's
// blocking mode. Returns 0, or an errno (ETIMEDOUT; ECONNRESET for an early
// end of file).
int sendAll(int fd, const void* data, size_t bytes, SocketClock::time_point deadline);
int receiveAll(int fd, void* data, size_t bytes, SocketClock::time_point deadline);
// Connects to `to` before `deadline`, retrying while nobody listens yet.
// Returns the socket, or -1 with the last errno in `error`.
int connectTo(const SocketAddress& to, SocketClock::time_point deadline, int* error);

} // namespace npu_sim
