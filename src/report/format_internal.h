// Helpers the report library's renderings share (internal to the report library).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/currency.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::report {

// "62.5%": a ratio as a percentage with one decimal.
std::string Percent(double ratio);
// "12.3": GPU-hours with one decimal.
std::string Hours(double h);
// The heading of a table's money column: "cost EUR", "cost GPU credits", or
// "cost (unnamed unit)" when no currency was set.
std::string CostHeading(std::string_view what, const Currency& c);
// [{"model", "pool", "capacity_type", "gpu_hours"}]: what had no price.
nlohmann::json UnpricedJson(const std::vector<ledger::UnpricedCapacity>& unpriced);
// " (asked until X; the data ends there)" when the window was cut at the data's end.
std::string WindowNote(const TimeRange& window, const TimeRange& requested);

}  // namespace gpuledger::report
