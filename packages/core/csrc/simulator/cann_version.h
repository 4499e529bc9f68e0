// CANN version numbers ("8.3.RC1", "8.5.0", "9.0.0") and their ordering.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace npu_sim {

struct CannVersion {
  int major = 0;
  int minor = 0;
  bool release_candidate = false; // third part is "RCn"
  int third = 0;                  // n of "RCn", or the release number
  int patch = 0;                  // optional fourth numeric part
  std::string text;               // as written

  // Accepts MAJOR.MINOR.(RCn|N)[.PATCH], case-insensitive "rc".
  static std::optional<CannVersion> parse(std::string_view text);

  // Release candidates come before the release of the same MAJOR.MINOR:
  // 8.0.RC1 < 8.0.RC2 < 8.0.0 < 8.0.1 < 8.1.RC1.
  auto key() const {
    return std::make_tuple(major, minor, release_candidate ? 0 : 1, third, patch);
  }
  friend bool operator==(const CannVersion& a, const CannVersion& b) {
    return a.key() == b.key();
  }
  friend auto operator<=>(const CannVersion& a, const CannVersion& b) {
    return a.key() <=> b.key();
  }

  std::string releasePart() const; // "RC1" or "0"
};

} // namespace npu_sim
