// All-reduce across processes from C++, without Python: torch_npu's libtorch
// API (torch_npu::init_npu / finalize_npu) and c10d_npu::ProcessGroupHCCL.
//
//   cpp_allreduce <rank> <world size> [<store host> [<store port>]]
//
// or with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set as torchrun sets
// them. Rank 0 serves the c10d TCPStore the ranks meet at. Each rank fills a
// tensor on npu:<rank> with rank + 1, all-reduces it (sum) and checks that
// every element is 1 + 2 + ... + world size. Exit status 0 when it is.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "distributed/ProcessGroupHCCL.h"
#include "libs/init_npu.h"
#include "npu/NPUFunctions.h"

namespace {

struct LaunchConfig {
  int rank = 0;
  int world_size = 0;
  std::string store_host = "127.0.0.1";
  std::uint16_t store_port = 29500;
};

// The positional argument `position`, else the environment variable `name`,
// else `fallback` (nullptr: the setting is required).
std::string setting(int argc, char** argv, int position, const char* name,
                    const char* fallback) {
  if (argc > position) {
    return argv[position];
  }
  if (const char* value = std::getenv(name)) {
    return value;
  }
  if (fallback != nullptr) {
    return fallback;
  }
  throw std::invalid_argument(std::string("missing ") + name +
                              ": usage: cpp_allreduce <rank> <world size> [<store host> "
                              "[<store port>]], or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT");
}

int to_int(const std::string& text, const char* what) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw std::invalid_argument(std::string(what) + " must be an integer, got '" + text + "'");
  }
  return value;
}

LaunchConfig parse(int argc, char** argv) {
  LaunchConfig config;
  config.rank = to_int(setting(argc, argv, 1, "RANK", nullptr), "the rank");
  config.world_size = to_int(setting(argc, argv, 2, "WORLD_SIZE", nullptr), "the world size");
  config.store_host = setting(argc, argv, 3, "MASTER_ADDR", "127.0.0.1");
  const int port = to_int(setting(argc, argv, 4, "MASTER_PORT", "29500"), "the store port");
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    throw std::invalid_argument("the rank must be in [0, world size) and the world size at least 1");
  }
  if (port < 1 || port > 65535) {
    throw std::invalid_argument("the store port must be in [1, 65535]");
  }
  config.store_port = static_cast<std::uint16_t>(port);
  return config;
}

int run(const LaunchConfig& config) {
  // One device per rank, as torchrun's LOCAL_RANK would pick.
  torch_npu::init_npu("npu:" + std::to_string(config.rank % c10_npu::device_count()));
  const c10::Device device(c10::DeviceType::PrivateUse1, c10_npu::current_device());

  c10d::TCPStoreOptions store_options;
  store_options.port = config.store_port;
  store_options.isServer = config.rank == 0;
  store_options.numWorkers = config.world_size;
  store_options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>(config.store_host, store_options);
  auto group = c10::make_intrusive<c10d_npu::ProcessGroupHCCL>(
      store, config.rank, config.world_size, std::chrono::seconds(60));

  std::vector<at::Tensor> tensors{
      at::full({1024}, config.rank + 1, at::TensorOptions().dtype(at::kFloat).device(device))};
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  group->allreduce(tensors, sum)->wait();
  // The copy to the host waits for the collective (the current stream waits for it).
  const at::Tensor result = tensors[0].cpu();

  const float expected = config.world_size * (config.world_size + 1) / 2.0f;
  const bool correct = result.eq(expected).all().item<bool>();
  std::printf("rank %d on %s: all_reduce sum = %g (expected %g): %s\n", config.rank,
              device.str().c_str(), result[0].item<float>(), expected,
              correct ? "ok" : "WRONG");
  std::fflush(stdout);

  // The communicators and the memory go before the runtime does.
  tensors.clear();
  group.reset();
  torch_npu::finalize_npu();
  return correct ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "cpp_allreduce: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpp_allreduce: %s\n", e.what());
  }
  return 2;
}
