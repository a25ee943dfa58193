// What a quota is, as the config states it (docs/quotas.md): plain data, read by
// config::Load from [[quota]] (and from [budgets], each entry a soft monthly budget) and
// judged by ledger/quotas.h.
//
// Rule. A quota holds one owner (a team or a project) to a GPU-hour quota, a money
// budget, or both, over each calendar month or quarter (UTC). A soft quota alerts; a hard
// one is also pushed into the scheduler, which enforces GPU time, so a hard quota always
// has a GPU-hour quota. GPU-hours are whole numbers (Slurm counts GPU-minutes); money is
// core/money.h's; ratios are 0..1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/money.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger {

enum class QuotaPeriod : uint8_t { kMonth, kQuarter };
std::string_view QuotaPeriodName(QuotaPeriod p);  // "month", "quarter"
Result<QuotaPeriod> ParseQuotaPeriod(std::string_view text);

enum class QuotaMode : uint8_t { kSoft, kHard };
std::string_view QuotaModeName(QuotaMode m);  // "soft", "hard"
Result<QuotaMode> ParseQuotaMode(std::string_view text);

// The calendar month or quarter (UTC) that `t_ms` falls in.
TimeRange QuotaPeriodContaining(QuotaPeriod p, int64_t t_ms);
// "2026-11" for a month, "2026-Q4" for a quarter. REQUIRES: `range` is such a period.
std::string QuotaPeriodLabel(QuotaPeriod p, const TimeRange& range);
// "2026-11" or "2026-Q4" -> the period. Fails naming the text.
Result<std::pair<QuotaPeriod, TimeRange>> ParseQuotaPeriodLabel(std::string_view text);

struct QuotaSpec {
  enum class Owner : uint8_t { kTeam, kProject };
  Owner owner = Owner::kTeam;
  std::string name;  // the team's or the project's
  QuotaPeriod period = QuotaPeriod::kMonth;
  QuotaMode mode = QuotaMode::kSoft;
  // GPU-hours per period (the jobs' active and allocated-idle time).
  std::optional<int64_t> gpu_hours;
  std::optional<Money> budget;  // money per period (the jobs' direct cost)
  // When set, the quota counts only devices of this pool and this GPU model: both its
  // GPU-hours and its money.
  std::string pool;
  std::string model;
  // Shares of the quota at which an alert fires, ascending; "projected to exceed" is
  // always judged besides.
  std::vector<double> alert_at{0.5, 0.8, 1.0};
  std::string source;  // "FILE:LINE" of its [[quota]] header, or of the [budgets] entry

  // "team:nlp", "project:llm".
  std::string OwnerLabel() const;
  // "team:nlp month gpu_hours pool:training model:H200": what tells two quotas apart.
  std::string Label() const;
};

}  // namespace gpuledger
