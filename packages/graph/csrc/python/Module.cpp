// torch_npu.graph._C: the Python binding of NPUGraph (torch.npu.NPUGraph
// derives from it) and the registration of NPUGraph with
// torch.accelerator.Graph.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>

#include "NPUGraph.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  torch_npu_graph::NPUGraph::register_with_accelerator();

  using torch_npu_graph::NPUGraph;
  py::class_<NPUGraph>(m, "_NPUGraph")
      .def(py::init([](bool keep_graph) {
             at::GraphImplArgs args;
             args.keep_graph = keep_graph;
             return std::make_unique<NPUGraph>(args);
           }),
           py::arg("keep_graph") = false)
      // mode: 0 global, 1 thread_local, 2 relaxed.
      .def("capture_begin",
           [](NPUGraph& self, std::optional<c10::MempoolId_t> pool, int mode) {
             self.capture_begin(pool.value_or(c10::MempoolId_t{0, 0}), static_cast<c10_npu::CaptureMode>(mode));
           },
           py::arg("pool") = std::nullopt, py::arg("mode") = 0)
      .def("capture_end", &NPUGraph::capture_end, py::call_guard<py::gil_scoped_release>())
      .def("instantiate", &NPUGraph::instantiate)
      .def("replay", &NPUGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &NPUGraph::reset, py::call_guard<py::gil_scoped_release>())
      .def("pool", &NPUGraph::pool)
      .def("enable_debug_mode", &NPUGraph::enable_debug_mode)
      .def("debug_dump", &NPUGraph::debug_dump, py::arg("path"))
      .def("register_generator_state",
           [](NPUGraph& self, py::handle generator) {
             TORCH_CHECK_TYPE(
                 THPGenerator_Check(generator.ptr()), "register_generator_state expects a torch.Generator, got ",
                 Py_TYPE(generator.ptr())->tp_name);
             self.register_generator_state(THPGenerator_Unwrap(generator.ptr()));
           },
           py::arg("generator"));
}
