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
//
// Note [Verified calls run the functional kernel]
// The executor runs a functional op through its out= overload where it has
// one (OutVariants.h), writing straight into the npu outputs. Some out=
// kernels lack checks of their functional kernel: max() and min() of an
// empty tensor raise on the CPU ("Expected reduction dim to be specified"),
// while max.unary_out / min.unary_out reduce to -inf / inf. Once the
// Python meta kernels were active (torch._dynamo imported), torch.max of an
// empty npu tensor returned -inf. A verified call (the first of its
// signature, whose empty dimensions it records) therefore runs the
// functional kernel and copies its results, so that its checks raise at
// the call as on the CPU; once the signature ran cleanly, its calls write
// through the out= overload again.
//
// Note [Warnings of queued work]
// A CPU kernel's warnings (TORCH_WARN) go to the warning handler of the
// thread it runs on. A queued kernel runs on the stream's worker, whose
// handler prints to stderr: Python's warnings machinery (filters,
// warnings.catch_warnings, pytest.warns, -W error) never saw them, where on
// the CPU each call warns. Two mechanisms bring them to the host:
// - A signature whose verified run warned is not recorded as clean (its
//   warnings are raised at the call, as its errors are), so its next call is
//   verified again, as long as it warns. Warnings that follow from the
//   signature (var's "degrees of freedom is <= 0" for a shape, deprecated
//   arguments) are therefore raised at every call, as on the CPU, at the
//   cost of waiting for those calls only. A warning the kernel gives once per
//   process (TORCH_WARN_ONCE) leaves its signature clean from the next call.
// - A queued kernel that warns all the same (the warning depends on what the
//   signature leaves out: sizes, values) leaves the warning in a process-wide
//   list (DeferWarnings), and its signature is verified again from its next
//   call. The next launch of an op by the host re-issues the listed
//   warnings, with their message and type, to Python's warnings: one op
//   late, attributed to that op's line. Beyond kMaxDeferredWarnings pending
//   ones, they go to stderr as before.
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

// While alive on a thread running queued work of `signature` (no
// verification): defers the warnings emitted there to the host (Note
// [Warnings of queued work]).
class DeferWarnings final : public c10::WarningHandler {
 public:
  explicit DeferWarnings(uint64_t signature)
      : signature_(signature), previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~DeferWarnings() override {
    c10::WarningUtils::set_warning_handler(previous_);
  }
  DeferWarnings(const DeferWarnings&) = delete;
  DeferWarnings& operator=(const DeferWarnings&) = delete;
  void process(const c10::Warning& warning) override;

 private:
  uint64_t signature_;
  c10::WarningHandler* previous_;
};

// Re-issues the deferred warnings on the calling (host) thread, and has
// their signatures verified again. Cheap when there are none (one load).
void reissue_deferred_warnings();

// A fresh verification slot when the signature has not run cleanly yet (or
// every launch must be checked: ASCEND_LAUNCH_BLOCKING=1), else null. First
// re-issues deferred warnings (Note [Warnings of queued work]).
std::shared_ptr<CallVerification> verification_for(uint64_t signature);

// After the launch: waits for the kernel (`synchronize`), re-issues its
// warnings, then rethrows its exception, or records the signature as clean
// if it did not warn.
template <typename Sync>
void finish_verification(const std::shared_ptr<CallVerification>& verification, uint64_t signature,
                         const Sync& synchronize);

// Records `signature` as having run cleanly.
void mark_verified(uint64_t signature);

// `body` as device work that leaves its exception in `verification` (when
// there is one) instead of failing the work; without one, its warnings are
// deferred to the host.
template <typename Body>
auto verified_work(std::shared_ptr<CallVerification> verification, uint64_t signature, Body body) {
  return [verification = std::move(verification), signature, body = std::move(body)]() mutable {
    if (verification == nullptr) {
      const DeferWarnings warnings(signature);
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
  if (verification->warnings.empty()) {
    mark_verified(signature); // one that warns is verified again next time
  }
}

} // namespace torch_npu_ops
