#include "util.h"

#include <cstdarg>
#include <cstdio>

namespace npu_sim {

std::string formatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKiB) {
    return strFormat("%llu B", static_cast<unsigned long long>(bytes));
  }
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024.0;
    ++unit;
  }
  return strFormat("%.2f %s", value, kUnits[unit]);
}

std::string vstrFormat(const char* fmt, va_list args) {
  char small[256];
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(small, sizeof(small), fmt, args);
  std::string out;
  if (n >= 0 && static_cast<size_t>(n) < sizeof(small)) {
    out.assign(small, static_cast<size_t>(n));
  } else if (n >= 0) {
    out.resize(static_cast<size_t>(n));
    std::vsnprintf(out.data(), out.size() + 1, fmt, copy);
  }
  va_end(copy);
  return out;
}

std::string strFormat(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vstrFormat(fmt, args);
  va_end(args);
  return out;
}

} // namespace npu_sim
