#include "npu/NPUHostOpActivity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include "npu/NPUActivity.h"

namespace c10_npu::activity {
namespace {

std::atomic<uint64_t> g_next_correlation_id{1};
std::mutex g_mutex;
std::vector<HostOp> g_host_ops;
thread_local std::optional<at::CallbackHandle> tls_handle;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t os_thread_id() {
  thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

struct OpContext : at::ObserverContext {
  uint64_t correlation_id = 0;
  int64_t start_ns = 0;
};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  auto context = std::make_unique<OpContext>();
  context->correlation_id = g_next_correlation_id.fetch_add(1, std::memory_order_relaxed);
  push_correlation_id(context->correlation_id);
  context->start_ns = now_ns();
  return context;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  const int64_t end_ns = now_ns();
  auto* context = static_cast<OpContext*>(ctx);
  // An op that ends on another thread than it started (async ops) left its id
  // on the starting thread's stack; pop only what this thread pushed.
  try {
    pop_correlation_id();
  } catch (const c10::Error&) {
    return;
  }
  HostOp op{fn.name(), context->correlation_id, at::RecordFunction::currentThreadId(),
            os_thread_id(), context->start_ns, end_ns};
  std::lock_guard lock(g_mutex);
  g_host_ops.push_back(std::move(op));
}

} // namespace

void record_host_ops(bool on) {
  if (on) {
    TORCH_CHECK(!tls_handle.has_value(), "host-op recording is already on in this thread");
    TORCH_CHECK(is_available(), "host-op recording needs device activity records, which the loaded runtime does not have");
    tls_handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  } else {
    TORCH_CHECK(
        tls_handle.has_value(),
        "host-op recording is off in this thread: turn it off on the thread that turned it on");
    at::removeCallback(*tls_handle);
    tls_handle.reset();
  }
}

bool recording_host_ops() {
  return tls_handle.has_value();
}

std::vector<HostOp> flush_host_ops() {
  std::lock_guard lock(g_mutex);
  std::vector<HostOp> out;
  out.swap(g_host_ops);
  return out;
}

} // namespace c10_npu::activity
