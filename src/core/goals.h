// What the fleet is held to: an effective-utilization target for the fleet and, where
// it differs, a pool's own (serving keeps headroom on purpose, so its target is lower
// than training's), and each team's monthly budget. Read from the config's [targets]
// and [budgets] tables (docs/configuration.md); used by the weekly report, the server's
// API and the dashboard.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/money.h"

namespace gpuledger {

struct Goals {
  double fleet_target = 0.6;                      // 0..1
  std::map<std::string, double> pool_targets;     // pool -> 0..1
  std::map<std::string, Money> monthly_budgets;   // team -> budget per calendar month

  // The pool's own target, else the fleet's.
  double TargetFor(std::string_view pool) const {
    auto it = pool_targets.find(std::string(pool));
    return it == pool_targets.end() ? fleet_target : it->second;
  }
};

}  // namespace gpuledger
