#include "npu/NPUAllocatorConfig.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

namespace c10_npu::NPUCachingAllocator {
namespace {

constexpr size_t kMiB = 1024 * 1024;
// max_split_size_mb must exceed the 1-10 MiB requests' segment size (20
// MiB), or those segments could never be split.
constexpr size_t kMinMaxSplitSizeMb = 20;
constexpr size_t kMaxBaseAddrAlignedKb = 16;
constexpr size_t kOneGiB = 1024 * kMiB;

constexpr const char* kKeys =
    "expandable_segments, max_split_size_mb, garbage_collection_threshold, "
    "roundup_power2_divisions, base_addr_aligned_kb, page_size, segment_size_mb, large_segment_size_mb";
// Segment sizes beyond this many MiB (1 TiB) are certainly a typo.
constexpr uint64_t kMaxSegmentSizeMb = 1024 * 1024;

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) {
    return "";
  }
  const auto last = text.find_last_not_of(" \t\n\r");
  return text.substr(first, last - first + 1);
}

// Splits at `separator` outside brackets, so a list value stays whole.
std::vector<std::string> split_top_level(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (const char c : text) {
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      --depth;
    }
    if (c == separator && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

// Digits only: stoul would take "12abc" or "-1".
std::optional<uint64_t> parse_unsigned(const std::string& text) {
  if (text.empty() || text.size() > 19) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::optional<double> parse_double(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

bool is_power_of_two(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

// One rule for every message: where the text came from, the key, what it
// accepts and what it got.
[[noreturn]] void bad_value(const std::string& source, const std::string& key, const std::string& accepted,
                            const std::string& got) {
  TORCH_CHECK(false, source, ": bad value for ", key, ": expected ", accepted, ", got '", got, "'");
}

void parse_roundup_divisions(const std::string& source, const std::string& value,
                             AllocatorSettings::Divisions& divisions) {
  constexpr const char* kKey = "roundup_power2_divisions";
  constexpr const char* kAccepted =
      "0 (off) or a power of two, or a list such as [256:1,512:2,>:8] of ascending power-of-two "
      "MiB sizes (or '>' last) each with 0 or a power of two";
  if (value.front() != '[') {
    const auto d = parse_unsigned(value);
    if (!d || (*d != 0 && !is_power_of_two(*d)) || *d > std::numeric_limits<uint32_t>::max()) {
      bad_value(source, kKey, kAccepted, value);
    }
    divisions.fill(static_cast<uint32_t>(*d));
    return;
  }
  if (value.back() != ']' || value.size() < 3) {
    bad_value(source, kKey, kAccepted, value);
  }
  AllocatorSettings::Divisions parsed = divisions;
  size_t next_bit = 0; // the first size bit the next entry covers
  bool closed = false; // after '>', nothing may follow
  for (const std::string& raw : split_top_level(value.substr(1, value.size() - 2), ',')) {
    const std::string entry = trim(raw);
    const auto colon = entry.find(':');
    if (closed || colon == std::string::npos) {
      bad_value(source, kKey, kAccepted, value);
    }
    const std::string bound = trim(entry.substr(0, colon));
    const auto d = parse_unsigned(trim(entry.substr(colon + 1)));
    if (!d || (*d != 0 && !is_power_of_two(*d)) || *d > std::numeric_limits<uint32_t>::max()) {
      bad_value(source, kKey, kAccepted, value);
    }
    size_t end_bit = parsed.size(); // '>': every larger size
    if (bound == ">") {
      closed = true;
    } else {
      const auto mib = parse_unsigned(bound);
      if (!mib || !is_power_of_two(*mib) || *mib > (uint64_t{1} << 40)) {
        bad_value(source, kKey, kAccepted, value);
      }
      // Requests below `mib` MiB: sizes whose top bit is below its bit.
      end_bit = static_cast<size_t>(std::countr_zero(*mib * kMiB));
      if (end_bit <= next_bit) {
        bad_value(source, kKey, kAccepted, value); // not ascending
      }
    }
    for (size_t bit = next_bit; bit < end_bit; ++bit) {
      parsed[bit] = static_cast<uint32_t>(*d);
    }
    next_bit = end_bit;
  }
  divisions = parsed;
}

void apply_entry(const std::string& source, const std::string& key, const std::string& value,
                 AllocatorSettings& s) {
  if (key == "expandable_segments") {
    if (value != "True" && value != "False") {
      bad_value(source, key, "True or False", value);
    }
    s.expandable_segments = value == "True";
  } else if (key == "max_split_size_mb") {
    const auto mb = parse_unsigned(value);
    if (!mb || *mb <= kMinMaxSplitSizeMb || *mb > AllocatorSettings::kUnlimited / kMiB) {
      bad_value(source, key, "an integer number of MiB greater than 20", value);
    }
    s.max_split_size = static_cast<size_t>(*mb) * kMiB;
  } else if (key == "garbage_collection_threshold") {
    const auto t = parse_double(value);
    if (!t || *t <= 0.0 || *t >= 1.0) {
      bad_value(source, key, "a number strictly between 0.0 and 1.0", value);
    }
    s.garbage_collection_threshold = *t;
  } else if (key == "roundup_power2_divisions") {
    parse_roundup_divisions(source, value, s.roundup_power2_divisions);
  } else if (key == "base_addr_aligned_kb") {
    const auto kb = parse_unsigned(value);
    if (!kb || *kb > kMaxBaseAddrAlignedKb) {
      bad_value(source, key, "an integer number of KiB from 0 to 16", value);
    }
    s.base_addr_aligned_kb = static_cast<size_t>(*kb);
  } else if (key == "page_size") {
    if (value != "1g") {
      bad_value(source, key, "1g (huge pages of 1 GiB; the only size torch_npu supports)", value);
    }
    s.page_size = kOneGiB;
  } else if (key == "segment_size_mb" || key == "large_segment_size_mb") {
    const auto mb = parse_unsigned(value);
    if (!mb || *mb == 0 || *mb > kMaxSegmentSizeMb) {
      bad_value(source, key, "an integer number of MiB from 1 to 1048576", value);
    }
    (key == "segment_size_mb" ? s.segment_size : s.large_segment_size) = static_cast<size_t>(*mb) * kMiB;
  } else {
    TORCH_CHECK(false, source, ": unknown key '", key, "' (in '", key, ":", value, "'); the keys are ", kKeys);
  }
}

// An empty variable counts as unset (`PYTORCH_ALLOC_CONF= python ...`).
const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::mutex& settings_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Guarded by settings_mutex(); empty until the environment was read.
std::optional<AllocatorSettings>& current() {
  static std::optional<AllocatorSettings> settings;
  return settings;
}

const AllocatorSettings& current_locked() {
  auto& settings = current();
  if (!settings) {
    // A malformed environment raises here, and again at the next use:
    // nothing is stored until it parses.
    const char* name = nonempty_env("PYTORCH_NPU_ALLOC_CONF") == nullptr && nonempty_env("PYTORCH_ALLOC_CONF") != nullptr
        ? "PYTORCH_ALLOC_CONF"
        : "PYTORCH_NPU_ALLOC_CONF";
    settings = AllocatorConfig::parse(AllocatorConfig::environment_config(), AllocatorSettings(), name);
  }
  return *settings;
}

} // namespace

uint32_t AllocatorSettings::divisions_for(size_t size) const {
  return size == 0 ? 0 : roundup_power2_divisions[static_cast<size_t>(std::bit_width(size)) - 1];
}

AllocatorSettings AllocatorConfig::parse(const std::string& config, const AllocatorSettings& base,
                                         const std::string& source) {
  AllocatorSettings s = base;
  for (const std::string& raw : split_top_level(config, ',')) {
    const std::string entry = trim(raw);
    if (entry.empty()) {
      continue; // "a:1," or an empty variable
    }
    const auto colon = entry.find(':');
    TORCH_CHECK(colon != std::string::npos, source, ": '", entry,
                "' is not of the form key:value; the keys are ", kKeys);
    const std::string key = trim(entry.substr(0, colon));
    const std::string value = trim(entry.substr(colon + 1));
    TORCH_CHECK(!key.empty(), source, ": '", entry, "' has no key before ':'; the keys are ", kKeys);
    TORCH_CHECK(!value.empty(), source, ": '", entry, "' gives key '", key, "' no value");
    apply_entry(source, key, value, s);
  }
  const bool split_or_gc =
      s.max_split_size != AllocatorSettings::kUnlimited || s.garbage_collection_threshold > 0.0;
  TORCH_CHECK(!(s.expandable_segments && split_or_gc), source,
              ": expandable_segments:True cannot be combined with max_split_size_mb or "
              "garbage_collection_threshold (as in torch_npu); the settings would be "
              "expandable_segments:True with max_split_size_mb ",
              s.max_split_size == AllocatorSettings::kUnlimited ? std::string("unset")
                                                                  : std::to_string(s.max_split_size / kMiB),
              " and garbage_collection_threshold ", s.garbage_collection_threshold);
  return s;
}

AllocatorSettings AllocatorConfig::settings() {
  std::lock_guard<std::mutex> lock(settings_mutex());
  return current_locked();
}

AllocatorSettings AllocatorConfig::update(const std::string& config) {
  std::lock_guard<std::mutex> lock(settings_mutex());
  AllocatorSettings parsed =
      parse(config, current_locked(), "torch.npu.memory._set_allocator_settings");
  current() = parsed;
  return parsed;
}

std::string AllocatorConfig::environment_config() {
  const char* npu = nonempty_env("PYTORCH_NPU_ALLOC_CONF");
  const char* generic = nonempty_env("PYTORCH_ALLOC_CONF");
  if (npu != nullptr && generic != nullptr) {
    TORCH_CHECK(std::string(npu) == generic, "PYTORCH_NPU_ALLOC_CONF ('", npu, "') and PYTORCH_ALLOC_CONF ('",
                generic, "') are both set and differ; set one of them, or both to the same value");
  }
  return npu != nullptr ? npu : (generic != nullptr ? generic : "");
}

} // namespace c10_npu::NPUCachingAllocator
