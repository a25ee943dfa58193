// The monthly review: one self-contained HTML page (inline CSS, no scripts, nothing
// fetched), printable to PDF like the weekly one, for the 30-minute monthly review of ML
// leads and finance. Every figure is the ledger's (Usage, Chargeback, TopWaste,
// Recommend, JudgeQuotas, Actions, Experiments) or the objectives engine's (Evaluate);
// the report renders them and computes no business figure of its own. Its spend is
// Ledger::Chargeback's total for the month, so it agrees with `gpuledger chargeback
// --period` to the micro-unit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/goals.h"
#include "core/objective.h"
#include "core/quota.h"
#include "core/status.h"
#include "core/time.h"
#include "core/workload.h"
#include "ledger/ledger.h"

namespace gpuledger::report {

// Replays a recorded workload in the simulator's what-if and returns its document
// (sim::RenderWhatIfJson's JSON). Injected by the CLI, as the server's /api/v1/whatif
// is: the report library does not link the simulator.
using WhatIfReplay = std::function<Result<std::string>(const Workload&)>;

struct MonthlyOptions {
  // The fleet's and each pool's utilization target (the config's [targets]).
  Goals goals;
  // The config's [[objective]]s, judged at the month's end (or where its data ends).
  std::vector<ObjectiveSpec> objectives;
  // The config's quotas and budgets ([[quota]], [budgets]): the month's monthly ones and
  // the quarter's quarterly ones, judged by ledger::JudgeQuotas.
  std::vector<QuotaSpec> quotas;
  size_t recommendations = 5;  // the advice the report leads with (ledger::TopAdvice's order)
  size_t waste_items = 5;      // the largest sources of waste listed
  // The what-if section's replay over the month's recorded jobs; none: the section says
  // it was not run.
  WhatIfReplay what_if;
  std::string title = "GPU monthly review";
};

// Renders the review of `month` (ParseMonth("2026-11")): KPIs, the top advice by money,
// utilization and spend month over month and over the quarter, each team's budget and
// quota against actual, SLO attainment and the actions taken with the money per hour
// they freed, the largest sources of waste, cost per experiment as a distribution per
// team, and the what-if on the month's recorded jobs with its assumptions. Fails when
// the ledger cannot answer; a what-if that cannot run is said in its section instead.
Result<std::string> RenderMonthlyReport(ledger::Ledger& ledger, const TimeRange& month,
                                        const MonthlyOptions& options = {});

}  // namespace gpuledger::report
