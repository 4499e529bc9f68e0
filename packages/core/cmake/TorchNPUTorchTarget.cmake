# Defines torch_npu::torch: torch's C++ headers and libraries, taken from the
# installed torch Python package, as torch.utils.cpp_extension does.
#
# Why not find_package(Torch): the CMake package of a CUDA build of torch
# insists on finding the CUDA toolkit, even for a CPU-only extension such as
# this one (and torch-npu must build against the CUDA wheels of PyPI too).
#
# Input: TORCH_NPU_TORCH_DIR (the torch package directory, holding include/
# and lib/) and TORCH_NPU_TORCH_CXX11_ABI (0 or 1, torch._C._GLIBCXX_USE_CXX11_ABI).
# Output: the imported target torch_npu::torch and TORCH_NPU_TORCH_PYTHON_LIBRARY.
if(TARGET torch_npu::torch)
  return()
endif()
if(NOT EXISTS "${TORCH_NPU_TORCH_DIR}/include/ATen/ATen.h")
  message(FATAL_ERROR
    "torch's C++ headers are not in ${TORCH_NPU_TORCH_DIR}/include: set "
    "TORCH_NPU_TORCH_DIR to the directory of the installed torch package "
    "(python -c \"import torch, os; print(os.path.dirname(torch.__file__))\")")
endif()
set(_torch_npu_torch_libs "")
foreach(_name torch torch_cpu c10)
  find_library(_torch_npu_lib_${_name} ${_name} PATHS "${TORCH_NPU_TORCH_DIR}/lib"
               NO_DEFAULT_PATH REQUIRED)
  list(APPEND _torch_npu_torch_libs "${_torch_npu_lib_${_name}}")
endforeach()
find_library(TORCH_NPU_TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_NPU_TORCH_DIR}/lib"
             NO_DEFAULT_PATH)
add_library(torch_npu::torch INTERFACE IMPORTED)
set_target_properties(torch_npu::torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES
    "${TORCH_NPU_TORCH_DIR}/include;${TORCH_NPU_TORCH_DIR}/include/torch/csrc/api/include"
  INTERFACE_LINK_LIBRARIES "${_torch_npu_torch_libs}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${TORCH_NPU_TORCH_CXX11_ABI}"
  INTERFACE_COMPILE_FEATURES cxx_std_20)
