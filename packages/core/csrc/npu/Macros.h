#pragma once

// Symbols of libtorch_npu_core that plugins and users' C++ may call.
#define TORCH_NPU_API __attribute__((visibility("default")))
