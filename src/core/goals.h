// What the fleet is held to: an effective-utilization target for the fleet and, where
// it differs, a pool's own (serving keeps headroom on purpose, so its target is lower
// than training's), and each team's monthly budget. Read from the config's [targets]
// and [budgets] tables (config::Load, docs/configuration.md); used by `usage --by pool`,
// the weekly report, the server's API and the dashboard, which all say which target they
// used and where it was set.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/money.h"

namespace gpuledger {

struct Goals {
  // The source of a target nobody set.
  static constexpr std::string_view kDefaultSource = "built-in default";

  double fleet_target = 0.6;                      // 0..1
  std::map<std::string, double> pool_targets;     // pool -> 0..1
  std::map<std::string, Money> monthly_budgets;   // team -> budget per calendar month
  // Where each target was set: "FILE:LINE" of its value in the config, a flag such as
  // "--target", or kDefaultSource. A pool without an entry has its target's source.
  std::string fleet_target_source{kDefaultSource};
  std::map<std::string, std::string> pool_target_sources;

  // The pool's own target, else the fleet's.
  double TargetFor(std::string_view pool) const {
    auto it = pool_targets.find(std::string(pool));
    return it == pool_targets.end() ? fleet_target : it->second;
  }
  // Where the target TargetFor(pool) returns was set.
  std::string TargetSourceFor(std::string_view pool) const {
    if (pool_targets.count(std::string(pool)) == 0) return fleet_target_source;
    auto it = pool_target_sources.find(std::string(pool));
    return it == pool_target_sources.end() ? std::string(kDefaultSource) : it->second;
  }
  // One line saying which targets apply and where each was set, e.g.
  // "targets: fleet 60% (gpuledger.toml:12); pool dev 30% (gpuledger.toml:13)".
  std::string Describe() const;
};

}  // namespace gpuledger
