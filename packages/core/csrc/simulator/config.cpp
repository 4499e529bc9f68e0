#include "config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util.h"

namespace npu_sim {
namespace {

constexpr uint32_t kDefaultDeviceCount = 8;
constexpr uint32_t kMaxDeviceCount = 64;
constexpr uint64_t kDefaultCapacity = 16 * kGiB;
constexpr uint64_t kMaxCapacity = 64 * kTiB;
constexpr const char* kDefaultCannVersion = "9.0.0";
constexpr const char* kDefaultSocName = "Ascend910B3";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::optional<uint64_t> parseUnsigned(std::string_view s) {
  s = trim(s);
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  return value;
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value;
}

uint32_t readDeviceCount() {
  const char* text = env("NPU_SIM_DEVICE_COUNT");
  if (text == nullptr) {
    return kDefaultDeviceCount;
  }
  auto value = parseUnsigned(text);
  if (!value || *value > kMaxDeviceCount) {
    std::fprintf(stderr,
                 "[npu_sim] NPU_SIM_DEVICE_COUNT='%s' is invalid: expected an integer "
                 "from 0 to %u; using the default %u.\n",
                 text, kMaxDeviceCount, kDefaultDeviceCount);
    return kDefaultDeviceCount;
  }
  return static_cast<uint32_t>(*value);
}

uint64_t readCapacity() {
  const char* text = env("NPU_SIM_DEVICE_MEMORY");
  if (text == nullptr) {
    return kDefaultCapacity;
  }
  auto value = parseByteSize(text);
  uint64_t rounded = 0;
  if (!value || *value < kPageSize || *value > kMaxCapacity ||
      !roundUp(*value, kPageSize, &rounded)) {
    std::fprintf(stderr,
                 "[npu_sim] NPU_SIM_DEVICE_MEMORY='%s' is invalid: expected a byte count "
                 "from 4KiB to 64TiB with an optional suffix K, M, G, T, KiB, MiB, GiB "
                 "or TiB (powers of 1024), e.g. 16GiB or 512M; using the default 16GiB.\n",
                 text);
    return kDefaultCapacity;
  }
  return rounded;
}

CannVersion readCannVersion() {
  const char* text = env("NPU_SIM_CANN_VERSION");
  if (text != nullptr) {
    if (auto v = CannVersion::parse(trim(text))) {
      return *v;
    }
    std::fprintf(stderr,
                 "[npu_sim] NPU_SIM_CANN_VERSION='%s' is invalid: expected "
                 "MAJOR.MINOR.RELEASE such as 8.3.RC1, 8.5.0 or 9.0.0; using the "
                 "default %s.\n",
                 text, kDefaultCannVersion);
  }
  return *CannVersion::parse(kDefaultCannVersion);
}

// ASCEND_RT_VISIBLE_DEVICES="2,0,5": logical 0 -> physical 2, and so on.
// Unset or empty: every physical device, in order.
std::vector<int32_t> readVisibleDevices(uint32_t physical_count) {
  std::vector<int32_t> ids;
  const char* text = env("ASCEND_RT_VISIBLE_DEVICES");
  if (text == nullptr || trim(text).empty()) {
    for (uint32_t i = 0; i < physical_count; ++i) {
      ids.push_back(static_cast<int32_t>(i));
    }
    return ids;
  }
  std::string_view rest(text);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item =
        trim(rest.substr(0, comma == std::string_view::npos ? rest.size() : comma));
    auto id = parseUnsigned(item);
    if (!id || *id >= physical_count) {
      std::fprintf(stderr,
                   "[npu_sim] ASCEND_RT_VISIBLE_DEVICES: ignoring '%.*s' (not a device "
                   "id from 0 to %d).\n",
                   static_cast<int>(item.size()), item.data(),
                   static_cast<int>(physical_count) - 1);
    } else if (std::find(ids.begin(), ids.end(), static_cast<int32_t>(*id)) != ids.end()) {
      std::fprintf(stderr,
                   "[npu_sim] ASCEND_RT_VISIBLE_DEVICES: ignoring duplicate id %llu.\n",
                   static_cast<unsigned long long>(*id));
    } else {
      ids.push_back(static_cast<int32_t>(*id));
    }
    if (comma == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  return ids;
}

// Note [Device heap kind]
// aclrtMalloc memory is either private anonymous memory with transparent
// huge pages ("private") or the device's memfd mapped MAP_SHARED
// ("shared"), which other processes can map: the simulated HCCL's ranks
// then read each other's device buffers through such a mapping, with plain
// copies (Note [Direct collectives], collective_comm.cpp), where private
// memory leaves them cross-memory attach (process_vm_readv, about half the
// speed of a memcpy on large buffers). Shared memory uses 4 KiB pages here
// (shmem huge pages are usually off), which single-process work pays for:
// measured on the 2-CPU development machine, a warm memcpy of 256 MiB took
// 28.3 ms between memfd buffers against 21.4 ms between huge pages (equal
// at 4 and 64 MiB), and the first touch of a fresh 64 MiB allocation
// 94-109 ms against 47 ms (256 MiB: 400-460 ms against 136-400 ms). So the
// heap is shared only for a process that is a rank of a multi-process job
// as launchers describe it (WORLD_SIZE or LOCAL_WORLD_SIZE above 1:
// torchrun, torch.distributed's launchers), and private otherwise;
// NPU_SIM_DEVICE_HEAP=shared|private overrides that. Read when the
// configuration is (the first simulator call), so a launcher's variables
// count only when set before it. Ranks that no launcher describes
// (torch.multiprocessing.spawn sets no WORLD_SIZE; a hand-rolled
// multiprocessing job) start private, so the first HCCL communicator of
// two or more ranks made on a device makes its heap shared then
// (DeviceMemory::shareHeap, from Communicator::publishHeap): that a
// process joins such a communicator is the surest sign that it is a rank,
// and it comes before any collective reads a peer. The switch drains the
// device and copies the live allocations into the memfd once (their
// addresses stay), like an IPC export; it is skipped when
// NPU_SIM_DEVICE_HEAP names the kind, when NPU_SIM_HCCL_TRANSPORT asks for
// less than mapped, and during a graph capture on the device, where such a
// rank keeps its private heap and runs direct collectives over
// cross-memory attach. With the checker on the heap is always the memfd
// (the checker maps device memory twice).
bool launchedAsRank() {
  for (const char* name : {"WORLD_SIZE", "LOCAL_WORLD_SIZE"}) {
    const char* text = env(name);
    auto value = text != nullptr ? parseUnsigned(trim(text)) : std::nullopt;
    if (value && *value > 1) {
      return true;
    }
  }
  return false;
}

// The heap kind NPU_SIM_DEVICE_HEAP names (true: shared), or none when it
// is unset, empty or invalid (the launcher's variables decide then).
std::optional<bool> readNamedHeapKind() {
  const char* text = env("NPU_SIM_DEVICE_HEAP");
  if (text == nullptr || trim(text).empty()) {
    return std::nullopt;
  }
  const std::string_view v = trim(text);
  if (equalsIgnoreCase(v, "shared")) {
    return true;
  }
  if (equalsIgnoreCase(v, "private")) {
    return false;
  }
  std::fprintf(stderr,
               "[npu_sim] NPU_SIM_DEVICE_HEAP='%s' is invalid: expected shared or private; "
               "using %s.\n",
               text, launchedAsRank() ? "shared (this process is a rank of a multi-process job)"
                                      : "private");
  return std::nullopt;
}

// An on/off switch: 1/on/true or 0/off/false (case-insensitive).
bool readSwitch(const char* name, const char* what) {
  const char* text = env(name);
  if (text == nullptr) {
    return false;
  }
  const std::string_view v = trim(text);
  if (v.empty() || v == "0" || equalsIgnoreCase(v, "off") || equalsIgnoreCase(v, "false")) {
    return false;
  }
  if (v == "1" || equalsIgnoreCase(v, "on") || equalsIgnoreCase(v, "true")) {
    return true;
  }
  std::fprintf(stderr, "[npu_sim] %s='%s' is invalid: expected 1 or 0; the %s stays off.\n",
               name, text, what);
  return false;
}

// Whether ATEN_CPU_CAPABILITY lets the simulator's host code use AVX-512
// (Note [Bulk copies bypass the cache], bulk_copy.cpp). The variable is
// PyTorch's (it caps the vector width of ATen's CPU kernels): `default` and
// `avx2` cap the simulator's too, which is also how tests reach the narrower
// code on machines that have AVX-512. PyTorch itself reports values it does
// not know, so any other value leaves the choice to the CPU, silently.
bool readWideVectors() {
  const char* text = env("ATEN_CPU_CAPABILITY");
  if (text == nullptr) {
    return true;
  }
  const std::string_view v = trim(text);
  return !equalsIgnoreCase(v, "default") && !equalsIgnoreCase(v, "avx2");
}

// NPU_SIM_STREAM_PAGES (Note [Page streams follow the CPU], bulk_copy.cpp):
// 0 when unset or invalid, which leaves the choice to the CPU.
uint32_t readStreamPages() {
  const char* text = env("NPU_SIM_STREAM_PAGES");
  if (text == nullptr) {
    return 0;
  }
  char* end = nullptr;
  const long pages = std::strtol(text, &end, 10);
  if (end == text || !trim(end).empty() || pages < 1 || pages > 8) {
    std::fprintf(stderr,
                 "[npu_sim] NPU_SIM_STREAM_PAGES='%s' is invalid: expected an integer from 1 to "
                 "8; the CPU decides.\n",
                 text);
    return 0;
  }
  return static_cast<uint32_t>(pages);
}

std::string compactBytes(uint64_t bytes) {
  std::string s = formatBytes(bytes);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

Config load() {
  Config c;
  c.physical_device_count = readDeviceCount();
  c.physical_ids = readVisibleDevices(c.physical_device_count);
  c.device_count = static_cast<uint32_t>(c.physical_ids.size());
  c.capacity = readCapacity();
  c.checker = readSwitch("NPU_SIM_CHECKER", "memory checker");
  const std::optional<bool> named_heap = readNamedHeapKind();
  c.shared_heap = c.checker || named_heap.value_or(launchedAsRank());
  c.heap_kind_fixed = c.checker || named_heap.has_value();
  c.race_check = readSwitch("NPU_SIM_RACE_CHECK", "stream race detector");
  c.wide_vectors = readWideVectors();
  c.stream_pages = readStreamPages();
  c.cann_version = readCannVersion();
  const char* soc = env("NPU_SIM_SOC_NAME");
  c.soc_name = std::string(soc && !trim(soc).empty() ? trim(soc) : kDefaultSocName) +
      " (simulated)";
  c.description = strFormat(
      "backend=simulator devices=%u capacity=%s checker=%s race_check=%s cann=%s soc=%s",
      c.device_count, compactBytes(c.capacity).c_str(), c.checker ? "on" : "off",
      c.race_check ? "on" : "off",
      c.cann_version.text.c_str(), c.soc_name.c_str());
  if (c.device_count != c.physical_device_count) {
    std::string ids;
    for (int32_t id : c.physical_ids) {
      if (!ids.empty()) {
        ids += ',';
      }
      ids += std::to_string(id);
    }
    c.description += " visible=";
    c.description += ids.empty() ? std::string("none") : ids;
  }
  return c;
}

} // namespace

std::optional<uint64_t> parseByteSize(std::string_view text) {
  text = trim(text);
  size_t digits = 0;
  bool seen_dot = false;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) ||
          (text[digits] == '.' && !seen_dot))) {
    seen_dot |= text[digits] == '.';
    ++digits;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  const std::string number(text.substr(0, digits));
  const std::string_view suffix = trim(text.substr(digits));
  uint64_t multiplier = 1;
  if (!suffix.empty()) {
    static const struct {
      const char* name;
      uint64_t value;
    } kSuffixes[] = {
        {"B", 1},           {"K", kKiB},   {"KB", kKiB},   {"KiB", kKiB},
        {"M", kMiB},        {"MB", kMiB},  {"MiB", kMiB},  {"G", kGiB},
        {"GB", kGiB},       {"GiB", kGiB}, {"T", kTiB},    {"TB", kTiB},
        {"TiB", kTiB},
    };
    bool found = false;
    for (const auto& s : kSuffixes) {
      if (equalsIgnoreCase(suffix, s.name)) {
        multiplier = s.value;
        found = true;
        break;
      }
    }
    if (!found) {
      return std::nullopt;
    }
  }
  if (!seen_dot) {
    auto value = parseUnsigned(number);
    if (!value || (multiplier > 1 && *value > UINT64_MAX / multiplier)) {
      return std::nullopt;
    }
    return *value * multiplier;
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  const double bytes = std::floor(value * static_cast<double>(multiplier));
  if (bytes >= 1.8e19) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(bytes);
}

const Config& config() {
  // Thread-safe one-time initialisation; never destroyed (threads still
  // running at exit may read it).
  static const Config* const instance = new Config(load());
  return *instance;
}

} // namespace npu_sim
