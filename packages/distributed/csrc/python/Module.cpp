// torch_npu.distributed._C: the Python binding of ProcessGroupHCCL, a
// subclass of torch.distributed's C++ Backend type.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "ProcessGroupHCCL.h"
#include "npu/HcclInterface.h"
#include "npu/NPUFunctions.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  // The base class's Python type is registered by torch.distributed.
  py::module_::import("torch._C._distributed_c10d");

  py::class_<c10d_npu::ProcessGroupHCCL, c10d::Backend,
             c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL>>(
      m, "ProcessGroupHCCL",
      "The hccl backend of torch.distributed: collectives between npu devices, run as "
      "device work on a communicator stream of each device.")
      .def(py::init<c10::intrusive_ptr<c10d::Store>, int, int, std::chrono::milliseconds, std::string>(),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout") = std::chrono::milliseconds(30 * 60 * 1000), py::arg("rank_table") = "",
           py::call_guard<py::gil_scoped_release>())
      .def("all_gather_into_tensor_uneven",
           &c10d_npu::ProcessGroupHCCL::allgather_into_tensor_uneven, py::arg("output"),
           py::arg("input"), py::arg("output_split_sizes"),
           "Rank r's input fills output_split_sizes[r] rows of the output (all of them if "
           "the list is empty, split evenly).",
           py::call_guard<py::gil_scoped_release>())
      .def("reduce_scatter_tensor_uneven",
           &c10d_npu::ProcessGroupHCCL::reduce_scatter_tensor_uneven, py::arg("output"),
           py::arg("input"), py::arg("input_split_sizes"), py::arg("op"),
           "Rank r gets the reduction of every rank's input_split_sizes[r] rows for it.",
           py::call_guard<py::gil_scoped_release>())
      .def("_rebuild_communicators", &c10d_npu::ProcessGroupHCCL::rebuild_communicators,
           py::arg("reason"), py::call_guard<py::gil_scoped_release>())
      .def("_check_communicator_usable", &c10d_npu::ProcessGroupHCCL::check_communicator_usable,
           py::arg("device"), py::call_guard<py::gil_scoped_release>());

  m.def("hccl_library", [] {
    // Loads HCCL (or says what is missing) and names the runtime it came with.
    c10_npu::hccl::api();
    return c10_npu::runtime_library();
  });
}
