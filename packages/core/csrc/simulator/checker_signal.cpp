#include "checker_signal.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "address_space.h"
#include "runtime.h"

namespace npu_sim {
namespace {

// Read by the handler: written once before it is installed.
AddressLayout g_layout;
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

// initial-exec TLS: reading it in a signal handler never allocates (the
// default model for a dlopen()ed library may call __tls_get_addr).
__thread const char* tls_work_name __attribute__((tls_model("initial-exec"))) = nullptr;

// ---- async-signal-safe formatting into a fixed buffer ----
struct Buffer {
  char data[1024];
  size_t len = 0;

  void add(const char* s) {
    while (*s != '\0' && len < sizeof(data)) {
      data[len++] = *s++;
    }
  }
  void addHex(uintptr_t v) {
    char digits[2 + 16];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[v & 0xf];
      v >>= 4;
    } while (v != 0);
    add("0x");
    while (n > 0 && len < sizeof(data)) {
      data[len++] = digits[--n];
    }
  }
  void addDec(uint64_t v) {
    char digits[20];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0 && len < sizeof(data)) {
      data[len++] = digits[--n];
    }
  }
  void flush() {
    size_t done = 0;
    while (done < len) {
      const ssize_t n = write(STDERR_FILENO, data + done, len - done);
      if (n <= 0) {
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
};

void describeFault(int sig, uintptr_t address) {
  Buffer b;
  const bool device_address = g_layout.inDeviceRange(address);
  const uintptr_t device_view = device_address ? address : address - g_layout.access_delta;
  const uint32_t device = g_layout.windowOf(device_view);
  const uint64_t offset = g_layout.windowOffset(device_view);
  const char* work = tls_work_name;
  if (sig == SIGBUS) {
    b.add("NPU simulator: the host ran out of memory backing device memory at ");
    b.addHex(device_view);
    b.add(" (npu:");
    b.addDec(device);
    b.add("). Free device memory or lower the workload.\n");
  } else if (!device_address) {
    b.add("NPU simulator memory checker: device work");
    if (work != nullptr) {
      b.add(" '");
      b.add(work);
      b.add("'");
    }
    b.add(" accessed NPU device memory at ");
    b.addHex(device_view);
    b.add(" (npu:");
    b.addDec(device);
    b.add(", window offset ");
    b.addHex(offset);
    b.add(") that is not allocated or not mapped (freed memory, or virtual memory "
          "without aclrtMapMem).\n");
  } else if (work != nullptr) {
    b.add("NPU simulator memory checker: device work '");
    b.add(work);
    b.add("' read or wrote NPU device memory at ");
    b.addHex(address);
    b.add(" (npu:");
    b.addDec(device);
    b.add(", window offset ");
    b.addHex(offset);
    b.add(") through its device address. Device work must add "
          "npuSimGetHostAccessOffset() to device addresses.\n");
  } else {
    b.add("NPU simulator memory checker: host code read or wrote NPU device memory at ");
    b.addHex(address);
    b.add(" (npu:");
    b.addDec(device);
    b.add(", window offset ");
    b.addHex(offset);
    b.add("). Device memory is only accessible to device work on a stream. Copy the "
          "tensor to the host first (tensor.cpu()), or run without NPU_SIM_CHECKER=1 to "
          "disable this check.\n");
  }
  b.flush();
}

void callPrevious(const struct sigaction& previous, int sig, siginfo_t* info, void* context) {
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) {
      previous.sa_sigaction(sig, info, context);
    }
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
      previous.sa_handler != nullptr) {
    previous.sa_handler(sig);
  }
}

void restoreDefault(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

bool previousIsDefault(const struct sigaction& previous) {
  return (previous.sa_flags & SA_SIGINFO) == 0 &&
      (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN);
}

void onFault(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const struct sigaction& previous = sig == SIGBUS ? g_previous_bus : g_previous_segv;
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (g_layout.inDeviceRange(address) || g_layout.inAccessRange(address)) {
    describeFault(sig, address);
    // The fault is fatal. Default disposition first, so that returning
    // re-executes the access and kills the process with the signal; a
    // previous handler (Python's faulthandler prints the traceback) runs
    // before that.
    restoreDefault(sig);
    callPrevious(previous, sig, info, context);
    errno = saved_errno;
    return;
  }
  // Not ours: behave as if we were not installed.
  if (previousIsDefault(previous)) {
    restoreDefault(sig);
  } else {
    callPrevious(previous, sig, info, context);
  }
  errno = saved_errno;
}

} // namespace

void installCheckerSignalHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_layout = Runtime::get().layout();
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
  });
}

void setSignalWorkContext(const char* work_name) {
  tls_work_name = work_name;
}

} // namespace npu_sim
