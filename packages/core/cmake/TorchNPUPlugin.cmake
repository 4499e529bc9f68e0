# The `plugin` component of core's CMake package: what every compiled plugin
# of torch-npu-core (torch-npu-ops, torch-npu-distributed, ...) sets up the
# same way. A plugin's CMakeLists.txt asks for it with
#
#   find_package(TorchNPUCore REQUIRED COMPONENTS plugin)
#
# and then declares only its own targets:
#
#   torch_npu_add_plugin_library(<target> INSTALL_DIR <dir> SOURCES ...
#                                [INCLUDE_DIRS ...] [LINK_LIBRARIES ...]
#                                [EXPORT <export-set>])
#   torch_npu_add_plugin_module(<target> INSTALL_DIR <dir> SOURCES ...
#                               [INCLUDE_DIRS ...] [LINK_LIBRARIES ...] [TORCH_PYTHON])
#   torch_npu_plugin_build_info(INSTALL_DIR <dir>)
#
# INSTALL_DIR is where the file goes in the wheel, relative to site-packages
# (e.g. torch_npu/ops). Included by TorchNPUCoreConfig.cmake in the caller's
# scope, so the pybind11 package found here is the caller's.
include_guard(DIRECTORY)

if(NOT TARGET Python::Module)
  find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
endif()
# The pybind11 of the build environment (it must be the version torch
# bundles, which the build requirements pin) and the torch the plugin is
# built against, whose version is baked into the plugin.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import pybind11, torch; print(pybind11.get_cmake_dir() + ';' + torch.__version__.split('+')[0])"
  OUTPUT_VARIABLE _torch_npu_plugin_env OUTPUT_STRIP_TRAILING_WHITESPACE
  COMMAND_ERROR_IS_FATAL ANY)
list(GET _torch_npu_plugin_env 0 pybind11_DIR)
list(GET _torch_npu_plugin_env 1 TORCH_NPU_PLUGIN_BUILT_WITH_TORCH)
find_package(pybind11 CONFIG REQUIRED)

# The settings every target of a plugin shares with core's own: C++20 (torch's
# CMake config asks for it), PIC, and no interprocedural optimisation
# (pybind11 turns LTO on by default; the links then take minutes on 2 cores).
function(torch_npu_plugin_target_defaults target)
  set_target_properties(${target} PROPERTIES
    CXX_STANDARD 20
    CXX_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON
    INTERPROCEDURAL_OPTIMIZATION OFF)
  target_compile_options(${target} PRIVATE -Wall -Wno-unused-parameter)
endfunction()

# The RPATH of a library installed to <install_dir>: core's runtime
# (torch_npu/lib), torch's libraries (torch/lib), and the install
# directories of the plugin's own libraries it links, all relative to
# $ORIGIN so that the wheel works wherever site-packages is.
function(_torch_npu_plugin_rpath out install_dir)
  # Any absolute stand-in for site-packages does for relative paths.
  set(site "/site-packages")
  set(rpath "")
  foreach(dir IN LISTS ARGN ITEMS torch_npu/lib torch/lib)
    file(RELATIVE_PATH rel "${site}/${install_dir}" "${site}/${dir}")
    if(rel STREQUAL "")
      list(APPEND rpath "$ORIGIN")
    else()
      list(APPEND rpath "$ORIGIN/${rel}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES rpath)
  set(${out} "${rpath}" PARENT_SCOPE)
endfunction()

# The install directories of the plugin's own libraries among `libraries`.
function(_torch_npu_plugin_library_dirs out)
  set(dirs "")
  foreach(lib IN LISTS ARGN)
    if(TARGET ${lib})
      get_target_property(dir ${lib} TORCH_NPU_INSTALL_DIR)
      if(dir)
        list(APPEND dirs "${dir}")
      endif()
    endif()
  endforeach()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

# A shared library of the plugin that C++ users may link too (its
# INCLUDE_DIRS are public), e.g. libtorch_npu_distributed. With EXPORT the
# installed library joins that export set, for the plugin's own CMake
# package (install(EXPORT ...)); its INCLUDE_DIRS must then name the
# installed headers with $<INSTALL_INTERFACE:...>.
function(torch_npu_add_plugin_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "INSTALL_DIR;EXPORT" "SOURCES;INCLUDE_DIRS;LINK_LIBRARIES")
  if(NOT arg_INSTALL_DIR OR NOT arg_SOURCES)
    message(FATAL_ERROR "torch_npu_add_plugin_library(${target}) needs INSTALL_DIR and SOURCES")
  endif()
  add_library(${target} SHARED ${arg_SOURCES})
  target_include_directories(${target} PUBLIC ${arg_INCLUDE_DIRS})
  target_link_libraries(${target} PUBLIC torch_npu::torch_npu_core ${arg_LINK_LIBRARIES})
  torch_npu_plugin_target_defaults(${target})
  _torch_npu_plugin_library_dirs(own_dirs ${arg_LINK_LIBRARIES})
  _torch_npu_plugin_rpath(rpath "${arg_INSTALL_DIR}" ${own_dirs})
  set_target_properties(${target} PROPERTIES
    INSTALL_RPATH "${rpath}"
    TORCH_NPU_INSTALL_DIR "${arg_INSTALL_DIR}")
  if(arg_EXPORT)
    install(TARGETS ${target} EXPORT ${arg_EXPORT} LIBRARY DESTINATION "${arg_INSTALL_DIR}")
  else()
    install(TARGETS ${target} LIBRARY DESTINATION "${arg_INSTALL_DIR}")
  endif()
endfunction()

# The plugin's Python extension module (pybind11), e.g. torch_npu/ops/_C.
# TORCH_PYTHON links libtorch_python, which bindings of torch's own pybind11
# types (c10d's Backend, Stream, ...) need.
function(torch_npu_add_plugin_module target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "TORCH_PYTHON" "INSTALL_DIR" "SOURCES;INCLUDE_DIRS;LINK_LIBRARIES")
  if(NOT arg_INSTALL_DIR OR NOT arg_SOURCES)
    message(FATAL_ERROR "torch_npu_add_plugin_module(${target}) needs INSTALL_DIR and SOURCES")
  endif()
  # NO_EXTRAS: no LTO and no stripping (see torch_npu_plugin_target_defaults).
  pybind11_add_module(${target} MODULE NO_EXTRAS ${arg_SOURCES})
  target_include_directories(${target} PRIVATE ${arg_INCLUDE_DIRS})
  set(libraries torch_npu::torch_npu_core ${arg_LINK_LIBRARIES})
  if(arg_TORCH_PYTHON)
    if(NOT TORCH_NPU_TORCH_PYTHON_LIBRARY)
      message(FATAL_ERROR "libtorch_python not found in ${TORCH_NPU_TORCH_DIR}/lib")
    endif()
    list(APPEND libraries "${TORCH_NPU_TORCH_PYTHON_LIBRARY}")
  endif()
  target_link_libraries(${target} PRIVATE ${libraries})
  torch_npu_plugin_target_defaults(${target})
  _torch_npu_plugin_library_dirs(own_dirs ${arg_LINK_LIBRARIES})
  _torch_npu_plugin_rpath(rpath "${arg_INSTALL_DIR}" ${own_dirs})
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "${rpath}")
  install(TARGETS ${target} LIBRARY DESTINATION "${arg_INSTALL_DIR}")
endfunction()

# <INSTALL_DIR>/_build_info.py: the core and torch versions this build is
# for, which the plugin checks at import (torch_npu._plugins.check_plugin_build)
# before it loads its extension: a plugin built against another core or torch
# minor release would fail with an undefined symbol, or worse, not fail.
function(torch_npu_plugin_build_info)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "INSTALL_DIR" "")
  if(NOT arg_INSTALL_DIR)
    message(FATAL_ERROR "torch_npu_plugin_build_info() needs INSTALL_DIR")
  endif()
  set(file "${CMAKE_CURRENT_BINARY_DIR}/_build_info.py")
  file(CONFIGURE OUTPUT "${file}" CONTENT [=[
# Generated by CMake at build time; do not edit.
# What this build of @PROJECT_NAME@ was compiled against: checked at import
# (torch_npu._plugins.check_plugin_build) before the extension loads.
BUILT_WITH_CORE = "@TorchNPUCore_VERSION@"
BUILT_WITH_TORCH = "@TORCH_NPU_PLUGIN_BUILT_WITH_TORCH@"
]=] @ONLY)
  install(FILES "${file}" DESTINATION "${arg_INSTALL_DIR}")
endfunction()
