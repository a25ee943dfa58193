#include "core/serving.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace gpuledger {
namespace {

bool ParseDouble(std::string_view s, double& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc() && p == s.data() + s.size()) return true;
  if (s == "inf") {
    out = INFINITY;
    return true;
  }
  return false;
}

}  // namespace

std::string EncodeHistogram(const CumulativeHistogram& h) {
  if (h.empty()) return {};
  std::string out = fmt::format("{};{};", h.sum, h.total);
  for (size_t i = 0; i < h.le.size(); ++i) {
    out += fmt::format("{}{}:{}", i ? "," : "", std::isinf(h.le[i]) ? "inf" : fmt::format("{}", h.le[i]),
                       h.count[i]);
  }
  return out;
}

bool DecodeHistogram(std::string_view text, CumulativeHistogram& out) {
  out = {};
  if (text.empty()) return true;
  size_t a = text.find(';'), b = a == std::string_view::npos ? a : text.find(';', a + 1);
  if (b == std::string_view::npos) return false;
  if (!ParseDouble(text.substr(0, a), out.sum) || !ParseDouble(text.substr(a + 1, b - a - 1), out.total)) {
    return false;
  }
  std::string_view rest = text.substr(b + 1);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t colon = item.find(':');
    double le = 0, count = 0;
    if (colon == std::string_view::npos || !ParseDouble(item.substr(0, colon), le) ||
        !ParseDouble(item.substr(colon + 1), count)) {
      return false;
    }
    out.le.push_back(le);
    out.count.push_back(count);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return true;
}

}  // namespace gpuledger
