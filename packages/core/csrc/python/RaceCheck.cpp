#include "python/RaceCheck.h"

#include "npu/WorkAccesses.h"
#include "npu/impl/AclInterface.h"

namespace py = pybind11;

namespace c10_npu::python {

void bind_race_check(py::module_& m) {
  m.def("_npu_race_check_enabled", [] {
    acl::api(); // the runtime's NPU_SIM_RACE_CHECK is adopted when it loads
    return race_check_enabled();
  });
  m.def("_npu_set_race_check_enabled", &set_race_check_enabled, py::arg("enabled"));
}

} // namespace c10_npu::python
