#include "cann_version.h"

#include <charconv>
#include <vector>

namespace npu_sim {
namespace {

bool parseInt(std::string_view s, int* out) {
  if (s.empty() || s.size() > 6) {
    return false;
  }
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && *out >= 0;
}

} // namespace

std::optional<CannVersion> CannVersion::parse(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  if (parts.size() != 3 && parts.size() != 4) {
    return std::nullopt;
  }
  CannVersion v;
  v.text = std::string(text);
  if (!parseInt(parts[0], &v.major) || !parseInt(parts[1], &v.minor)) {
    return std::nullopt;
  }
  std::string_view third = parts[2];
  if (third.size() > 2 && (third[0] == 'R' || third[0] == 'r') &&
      (third[1] == 'C' || third[1] == 'c')) {
    v.release_candidate = true;
    third.remove_prefix(2);
  }
  if (!parseInt(third, &v.third)) {
    return std::nullopt;
  }
  if (parts.size() == 4 && !parseInt(parts[3], &v.patch)) {
    return std::nullopt;
  }
  return v;
}

std::string CannVersion::releasePart() const {
  return (release_candidate ? "RC" : "") + std::to_string(third);
}

} // namespace npu_sim
