// Errors at the call: the first launch of each kind of call waits for its
// kernel and raises the kernel's own error there.
//
// Note [Errors at the call]
// Meta kernels check shapes and argument combinations, but only the CPU
// kernel knows which dtypes it supports ("not implemented for 'Half'") and
// checks some argument values (uniform_'s bounds, reductions over empty
// dims). Run as device work, such an error used to surface at the next
// synchronization, as a RuntimeError naming the device work: code that
// probes support with try/except (PyTorch's own test_dtypes, error_inputs,
// user fallbacks) saw success. The CPU raises at the call, so npu does: the
// first launch of a call signature (the op, its tensors' dtypes, ranks and
// empty dimensions, and the arguments that are checked by value; see
// CallSignature) runs the kernel with the host waiting, and rethrows the
// kernel's exception itself (its type and message, as on the CPU). Once a
// signature ran cleanly, its launches are queued as usual. Only errors that
// depend on the data (an index out of range) can then surface later, at a
// synchronization that names the op and the Python line that launched it.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include <c10/util/Exception.h>

namespace torch_npu_ops {

// A 64-bit digest of a call signature, built field by field.
class CallSignature {
 public:
  explicit CallSignature(const void* op) : hash_(mix(0x9E3779B97F4A7C15ULL, reinterpret_cast<uintptr_t>(op))) {}
  void add(uint64_t value) {
    hash_ = mix(hash_, value);
  }
  uint64_t digest() const {
    return hash_;
  }

 private:
  static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 31);
  }
  uint64_t hash_;
};

// Where a verified launch's kernel leaves its exception, and the warnings
// it emitted, for the host: on the worker thread they would go to the
// process's stderr, not to Python's warnings; raised on the host they do.
struct CallVerification {
  std::exception_ptr error;
  std::vector<c10::Warning> warnings;
};

// While alive on a thread: collects the warnings emitted there into a
// verification (see above).
class CollectWarnings final : public c10::WarningHandler {
 public:
  explicit CollectWarnings(CallVerification& verification)
      : verification_(verification), previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~CollectWarnings() override {
    c10::WarningUtils::set_warning_handler(previous_);
  }
  CollectWarnings(const CollectWarnings&) = delete;
  CollectWarnings& operator=(const CollectWarnings&) = delete;
  void process(const c10::Warning& warning) override {
    verification_.warnings.push_back(warning);
  }

 private:
  CallVerification& verification_;
  c10::WarningHandler* previous_;
};

// A fresh verification slot when the signature has not run cleanly yet (or
// every launch must be checked: ASCEND_LAUNCH_BLOCKING=1), else null.
std::shared_ptr<CallVerification> verification_for(uint64_t signature);

// After the launch: waits for the kernel (`synchronize`), then rethrows its
// exception, or records the signature as clean.
template <typename Sync>
void finish_verification(const std::shared_ptr<CallVerification>& verification, uint64_t signature,
                         const Sync& synchronize);

// Records `signature` as having run cleanly.
void mark_verified(uint64_t signature);

// `body` as device work that leaves its exception in `verification` (when
// there is one) instead of failing the work.
template <typename Body>
auto verified_work(std::shared_ptr<CallVerification> verification, Body body) {
  return [verification = std::move(verification), body = std::move(body)]() mutable {
    if (verification == nullptr) {
      body();
      return;
    }
    const CollectWarnings warnings(*verification);
    try {
      body();
    } catch (...) {
      verification->error = std::current_exception();
    }
  };
}

template <typename Sync>
void finish_verification(const std::shared_ptr<CallVerification>& verification, uint64_t signature,
                         const Sync& synchronize) {
  synchronize();
  for (const c10::Warning& warning : verification->warnings) {
    c10::warn(warning); // on the host: Python's warnings
  }
  if (verification->error) {
    std::rethrow_exception(verification->error);
  }
  mark_verified(signature);
}

} // namespace torch_npu_ops
