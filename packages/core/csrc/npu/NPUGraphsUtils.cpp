#include "npu/NPUGraphsUtils.h"

#include <atomic>

#include <c10/util/Exception.h>

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {

static_assert(static_cast<int>(CaptureStatus::Active) == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
static_assert(static_cast<int>(CaptureStatus::Invalidated) == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
static_assert(static_cast<int>(CaptureMode::Relaxed) == ACL_MODEL_RI_CAPTURE_MODE_RELAXED);

namespace {

std::atomic<int> g_captures_underway{0};

const acl::AclApi& capture_api() {
  const auto& api = acl::api();
  TORCH_CHECK(
      is_capture_supported(),
      "Capturing NPU work into a graph needs CANN 8.1.RC1 or later (aclmdlRICaptureBegin); the "
      "loaded runtime (", acl::backend_info().library, ", CANN ", acl::backend_info().cann_version,
      ") does not have it. Install a newer CANN toolkit.");
  return api;
}

} // namespace

bool captures_underway() {
  return g_captures_underway.load(std::memory_order_relaxed) != 0;
}

bool is_capture_supported() {
  // The functions may exist and still be refused by the release (the
  // simulator emulating a CANN older than 8.1.RC1): ask once.
  static const bool supported = [] {
    const auto& api = acl::api();
    if (api.aclmdlRICaptureBegin == nullptr || api.aclmdlRICaptureGetInfo == nullptr ||
        api.aclmdlRICaptureEnd == nullptr || api.aclmdlRIExecuteAsync == nullptr ||
        api.aclmdlRIDestroy == nullptr) {
      return false;
    }
    const NPUStream stream = getCurrentNPUStream();
    ensure_device_context(stream.device_index());
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    aclmdlRI model = nullptr;
    const aclError err = api.aclmdlRICaptureGetInfo(stream.stream(), &status, &model);
    if (err != ACL_SUCCESS) {
      api.aclGetRecentErrMsg(); // consumed: the answer is "no"
    }
    return err == ACL_SUCCESS;
  }();
  return supported;
}

CaptureStatus stream_capture_status(const NPUStream& stream) {
  const auto& api = acl::api();
  if (api.aclmdlRICaptureGetInfo == nullptr) {
    return CaptureStatus::None;
  }
  ensure_device_context(stream.device_index());
  aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  aclmdlRI model = nullptr;
  const aclError err = api.aclmdlRICaptureGetInfo(stream.stream(), &status, &model);
  if (err == ACL_ERROR_RT_FEATURE_NOT_SUPPORT) {
    api.aclGetRecentErrMsg(); // consumed: an emulated release without capture
    return CaptureStatus::None;
  }
  NPU_CHECK(err);
  return static_cast<CaptureStatus>(status);
}

aclmdlRI stream_capture_model(aclrtStream stream) {
  const auto& api = acl::api();
  if (api.aclmdlRICaptureGetInfo == nullptr) {
    return nullptr;
  }
  aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  aclmdlRI model = nullptr;
  const aclError err = api.aclmdlRICaptureGetInfo(stream, &status, &model);
  if (err == ACL_ERROR_RT_FEATURE_NOT_SUPPORT) {
    api.aclGetRecentErrMsg();
    return nullptr;
  }
  NPU_CHECK(err);
  return status == ACL_MODEL_RI_CAPTURE_STATUS_NONE ? nullptr : model;
}

CaptureStatus current_stream_capture_status() {
  return stream_capture_status(getCurrentNPUStream());
}

void capture_begin(const NPUStream& stream, CaptureMode mode) {
  const auto& api = capture_api();
  ensure_device_context(stream.device_index());
  NPU_CHECK(api.aclmdlRICaptureBegin(stream.stream(), static_cast<aclmdlRICaptureMode>(mode)));
  g_captures_underway.fetch_add(1, std::memory_order_relaxed);
}

aclmdlRI capture_end(const NPUStream& stream) {
  const auto& api = capture_api();
  ensure_device_context(stream.device_index());
  aclmdlRI model = nullptr;
  const aclError err = api.aclmdlRICaptureEnd(stream.stream(), &model);
  if (err != ACL_ERROR_RT_STREAM_NOT_CAPTURED && err != ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED) {
    g_captures_underway.fetch_sub(1, std::memory_order_relaxed); // ended, successfully or not
  }
  NPU_CHECK(err);
  return model;
}

void model_execute(aclmdlRI model, const NPUStream& stream) {
  const auto& api = capture_api();
  ensure_device_context(stream.device_index());
  NPU_CHECK(api.aclmdlRIExecuteAsync(model, stream.stream()));
  if (launch_blocking()) {
    stream.synchronize();
  }
}

void model_debug_dump(aclmdlRI model, const std::string& path) {
  const auto& api = capture_api();
  TORCH_CHECK(
      api.aclmdlRIDebugJsonPrint != nullptr, "debug_dump needs aclmdlRIDebugJsonPrint, which the "
      "loaded runtime (", acl::backend_info().library, ") lacks.");
  NPU_CHECK(api.aclmdlRIDebugJsonPrint(model, path.c_str(), 0));
}

void model_destroy(aclmdlRI model) {
  NPU_CHECK(capture_api().aclmdlRIDestroy(model));
}

} // namespace c10_npu
