#include "core/goals.h"

#include <fmt/format.h>

namespace gpuledger {

std::string Goals::Describe() const {
  std::string out = fmt::format("targets: fleet {:g}% ({})", fleet_target * 100, fleet_target_source);
  for (const auto& [pool, target] : pool_targets) {
    out += fmt::format("; pool {} {:g}% ({})", pool, target * 100, TargetSourceFor(pool));
  }
  return out;
}

}  // namespace gpuledger
