// Finding the out= overload of a functional op.
//
// Running a functional CPU kernel on device work would allocate its result
// in host memory and then copy it into the npu output: twice the memory
// traffic. The out= overload writes straight into the npu output instead.
#pragma once

#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

namespace torch_npu_ops {

// The overload of `op` that takes the same arguments followed by one
// `Tensor(a!) out` per return, if `op` is functional and has one with a CPU
// kernel.
std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op);

// The reverse: the functional overload whose out= overload `out_op` is, if
// any (abs for abs.out).
std::optional<c10::OperatorHandle> functional_variant(const c10::OperatorHandle& out_op);

// Stops out_variant from offering an out= overload for `op` (its out= kernel
// cannot write into fixed-size device outputs).
void deny_out_variant(const c10::OperatorHandle& op);

// Watches an out= kernel run on outputs the executor sized itself (on the
// running thread, while alive). A kernel that resizes them uses them as
// scratch space: mse_loss.out resizes its scalar output to the input's shape
// before it reduces into it, warning that "an output ... was resized". The
// user called the functional op, which warns about nothing, so the warning
// is dropped here and resized() says the op should not run out= again.
// Every other warning goes on to the handler that was in place.
class ResizedOutputWatch final : public c10::WarningHandler {
 public:
  ResizedOutputWatch() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~ResizedOutputWatch() override {
    c10::WarningUtils::set_warning_handler(previous_);
  }
  ResizedOutputWatch(const ResizedOutputWatch&) = delete;
  ResizedOutputWatch& operator=(const ResizedOutputWatch&) = delete;

  void process(const c10::Warning& warning) override;
  bool resized() const {
    return resized_;
  }

 private:
  c10::WarningHandler* previous_;
  bool resized_ = false;
};

} // namespace torch_npu_ops
