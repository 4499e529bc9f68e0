#include "LaunchSite.h"

#include <atomic>

namespace torch_npu_ops {
namespace {

std::atomic<LaunchSiteCapture> g_capture{nullptr};

} // namespace

c10_npu::LaunchSite capture_launch_site() {
  const LaunchSiteCapture capture = g_capture.load(std::memory_order_acquire);
  return capture != nullptr ? capture() : nullptr;
}

void set_launch_site_capture(LaunchSiteCapture capture) {
  g_capture.store(capture, std::memory_order_release);
}

} // namespace torch_npu_ops
