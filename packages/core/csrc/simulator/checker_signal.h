// The memory checker's fault reporting (NPU_SIM_CHECKER=1).
//
// Device addresses are PROT_NONE under the checker, so host code that
// dereferences one faults. The SIGSEGV/SIGBUS handler installed here
// recognises faults inside the simulator's address ranges, explains them
// on stderr with async-signal-safe calls only, gives a previously
// installed handler (e.g. Python's faulthandler) the chance to add its
// traceback, and lets the process die of the signal. Faults elsewhere go
// to the previous handler unchanged.
#pragma once

namespace npu_sim {

// Idempotent; called at device initialisation when the checker is on.
void installCheckerSignalHandler();

// Names the device work running on the calling worker thread (null: none),
// so that a fault inside device work is reported as such.
void setSignalWorkContext(const char* work_name);

} // namespace npu_sim
