// aclrtMemcpy[Async] and aclrtMemset[Async].
//
// Arguments are validated on the calling thread (a bad pointer is an error
// code, never a crash); device addresses are translated to host-accessible
// ones (address + access delta) once, and the copy itself is one plain
// memcpy of the whole range, on the caller (synchronous forms, not ordered
// with streams, as on CANN) or on the stream's worker.
#include <cstring>

#include "api_impl.h"
#include "errors.h"
#include "model.h"
#include "race_detector.h"
#include "runtime.h"
#include "stream.h"
#include "util.h"

namespace npu_sim::impl {
namespace {

enum class Where { kHost, kDevice };

const char* kindName(aclrtMemcpyKind kind) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: return "ACL_MEMCPY_HOST_TO_HOST";
    case ACL_MEMCPY_HOST_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_DEVICE";
    case ACL_MEMCPY_DEVICE_TO_HOST: return "ACL_MEMCPY_DEVICE_TO_HOST";
    case ACL_MEMCPY_DEVICE_TO_DEVICE: return "ACL_MEMCPY_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_DEFAULT: return "ACL_MEMCPY_DEFAULT";
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE";
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE";
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE";
  }
  return "unknown";
}

// Classifies `p` and, for device memory, checks that [p, p + count) is
// live and returns its host-accessible address.
aclError locate(const char* api, const char* role, const void* p, size_t count, Where* where,
                void** host) {
  Runtime& rt = Runtime::get();
  const AddressLayout& layout = rt.layout();
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (layout.inDeviceRange(a)) {
    std::string why;
    if (!rt.windowMemory(a).checkRange(a, count, &why)) {
      return fail(ACL_ERROR_INVALID_PARAM, "%s: %s %p is not valid device memory for %zu "
                  "bytes: %s", api, role, p, count, why.c_str());
    }
    *where = Where::kDevice;
    *host = reinterpret_cast<void*>(layout.toHost(a));
    return ACL_SUCCESS;
  }
  if (layout.inAccessRange(a)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: %s %p is a host-access alias of device memory (device address + "
                "npuSimGetHostAccessOffset()); pass the device address",
                api, role, p);
  }
  *where = Where::kHost;
  *host = const_cast<void*>(p);
  return ACL_SUCCESS;
}

struct PreparedCopy {
  void* dst;
  const void* src;
  size_t count;
};

aclError prepareCopy(const char* api, void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind, PreparedCopy* out) {
  if (count > destMax) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds destMax %zu", api, count,
                destMax);
  }
  if (static_cast<unsigned>(kind) > ACL_MEMCPY_INTER_DEVICE_TO_DEVICE) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: unknown copy kind %d", api, static_cast<int>(kind));
  }
  out->count = count;
  if (count == 0) {
    out->dst = dst;
    out->src = src;
    return ACL_SUCCESS;
  }
  if (dst == nullptr || src == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is null", api, dst == nullptr ? "dst" : "src");
  }
  Where dst_where;
  Where src_where;
  void* dst_host = nullptr;
  void* src_host = nullptr;
  if (aclError err = locate(api, "dst", dst, count, &dst_where, &dst_host); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = locate(api, "src", src, count, &src_where, &src_host); err != ACL_SUCCESS) {
    return err;
  }
  Where want_dst = dst_where;
  Where want_src = src_where;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      want_dst = want_src = Where::kHost;
      break;
    case ACL_MEMCPY_HOST_TO_DEVICE:
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE:
      want_src = Where::kHost;
      want_dst = Where::kDevice;
      break;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      want_src = Where::kDevice;
      want_dst = Where::kHost;
      break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE:
      want_dst = want_src = Where::kDevice;
      break;
    case ACL_MEMCPY_DEFAULT:
      break; // inferred from the addresses
  }
  if (dst_where != want_dst || src_where != want_src) {
    const bool dst_wrong = dst_where != want_dst;
    const Where actual = dst_wrong ? dst_where : src_where;
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: kind %s, but %s %p is %s", api, kindName(kind), dst_wrong ? "dst" : "src",
                dst_wrong ? dst : src,
                actual == Where::kDevice ? "device memory" : "not device memory (a live "
                                                             "aclrtMalloc allocation is needed)");
  }
  out->dst = dst_host;
  out->src = src_host;
  return ACL_SUCCESS;
}

aclError prepareMemset(const char* api, void* devPtr, size_t maxCount, size_t count,
                       void** host) {
  if (count > maxCount) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds maxCount %zu", api, count,
                maxCount);
  }
  if (count == 0) {
    *host = devPtr;
    return ACL_SUCCESS;
  }
  if (devPtr == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is null", api);
  }
  Where where;
  return locate(api, "devPtr", devPtr, count, &where, host);
}

void copyBytes(const PreparedCopy& c) {
  const auto d = reinterpret_cast<uintptr_t>(c.dst);
  const auto s = reinterpret_cast<uintptr_t>(c.src);
  if (d < s + c.count && s < d + c.count) {
    std::memmove(c.dst, c.src, c.count);
  } else {
    std::memcpy(c.dst, c.src, c.count);
  }
}

} // namespace

aclError memcpySync(void* dst, size_t destMax, const void* src, size_t count,
                    aclrtMemcpyKind kind) {
  const char* api = "aclrtMemcpy";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (Model* model = globalCapture()) {
    return refuseDuringCapture(model, api, "a synchronous copy (in GLOBAL capture mode)");
  }
  PreparedCopy c;
  if (aclError err = prepareCopy(api, dst, destMax, src, count, kind, &c); err != ACL_SUCCESS) {
    return err;
  }
  if (c.count == 0) {
    return ACL_SUCCESS;
  }
  if (race::enabled()) {
    const npuSimMemAccess accesses[] = {{src, c.count, 0}, {dst, c.count, 1}};
    if (aclError err = race::hostAccess(api, accesses, 2); err != ACL_SUCCESS) {
      return err;
    }
  }
  copyBytes(c);
  return ACL_SUCCESS;
}

aclError memcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind, aclrtStream stream) {
  const char* api = "aclrtMemcpyAsync";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  PreparedCopy c;
  if (aclError err = prepareCopy(api, dst, destMax, src, count, kind, &c); err != ACL_SUCCESS) {
    return err;
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (c.count == 0) {
    return ACL_SUCCESS;
  }
  if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  const npuSimMemAccess accesses[] = {{src, c.count, 0}, {dst, c.count, 1}};
  const DeclaredAccesses declared{"memcpy", accesses, 2};
  const bool race_check = race::enabled();
  if (race_check && s->capture() == nullptr) {
    if (aclError err = race::launch(s, declared.name, accesses, 2); err != ACL_SUCCESS) {
      return err;
    }
  }
  // A capturing stream's model keeps the accesses for its replays.
  s->enqueue(CopyWork{c.dst, c.src, c.count}, race_check ? &declared : nullptr);
  return ACL_SUCCESS;
}

aclError memsetSync(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  const char* api = "aclrtMemset";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (Model* model = globalCapture()) {
    return refuseDuringCapture(model, api, "a synchronous memset (in GLOBAL capture mode)");
  }
  void* host = nullptr;
  if (aclError err = prepareMemset(api, devPtr, maxCount, count, &host); err != ACL_SUCCESS) {
    return err;
  }
  if (count == 0) {
    return ACL_SUCCESS;
  }
  if (race::enabled()) {
    const npuSimMemAccess access{devPtr, count, 1};
    if (aclError err = race::hostAccess(api, &access, 1); err != ACL_SUCCESS) {
      return err;
    }
  }
  std::memset(host, static_cast<unsigned char>(value), count);
  return ACL_SUCCESS;
}

aclError memsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                     aclrtStream stream) {
  const char* api = "aclrtMemsetAsync";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  void* host = nullptr;
  if (aclError err = prepareMemset(api, devPtr, maxCount, count, &host); err != ACL_SUCCESS) {
    return err;
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (count == 0) {
    return ACL_SUCCESS;
  }
  if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  const npuSimMemAccess access{devPtr, count, 1};
  const DeclaredAccesses declared{"memset", &access, 1};
  const bool race_check = race::enabled();
  if (race_check && s->capture() == nullptr) {
    if (aclError err = race::launch(s, declared.name, &access, 1); err != ACL_SUCCESS) {
      return err;
    }
  }
  // A capturing stream's model keeps the accesses for its replays.
  s->enqueue(MemsetWork{host, count, static_cast<unsigned char>(value)},
             race_check ? &declared : nullptr);
  return ACL_SUCCESS;
}

} // namespace npu_sim::impl
