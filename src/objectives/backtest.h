// The backtest: what the objectives and rules would have done over the ledger's history
// (`gpuledger slo backtest`, docs/objectives.md). It steps through the window (hourly by
// default), judges every objective at each step from the hour rollups (HourlySource: an
// alert window shorter than an hour reads as the hour it ends in), records when each alert
// would have fired and resolved, and runs the rules as if enforced from a fresh history,
// on what was known at each step. A job a rule stops is stopped for the rest of the
// replay; the GPU-hours and money freed are its GPUs' from the action to the end of its
// allocation as recorded (or the window's end), at its GPUs' price per hour then.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/money.h"
#include "core/objective.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "objectives/burn_rate.h"
#include "objectives/evaluate.h"
#include "objectives/interventions.h"

namespace gpuledger::objectives {

struct AlertEpisode {
  std::string objective;
  BurnWindow window;
  int64_t fired_ms = 0;
  std::optional<int64_t> resolved_ms;  // empty: still firing at the window's end
  double peak_burn = 0;                // the long window's highest burn while it fired
};

struct ObjectiveSummary {
  std::string name;
  int64_t steps = 0;
  int64_t steps_met = 0;     // steps at which the objective met its target over its window
  int64_t steps_firing = 0;  // steps with an alert firing
  std::optional<ObjectiveStatus> last;  // at the last step
};

struct FreedCapacity {
  Decision decision;
  int64_t until_ms = 0;  // the allocation's recorded end, or the window's end
  double gpu_hours = 0;
  Money money;
};

// One rule's part of a backtest.
struct RuleSummary {
  std::string name;
  int64_t proposed = 0;  // actions the rule would have taken
  int64_t warned = 0;    // owners warned before a stop
  int64_t skipped = 0;   // held back by a safety rule
  int64_t jobs = 0;      // distinct jobs acted on
  double gpu_hours_freed = 0;
  Money money_freed;
};

// One objective and alert window's part of a backtest.
struct AlertSummary {
  std::string objective;
  BurnWindow window;
  int64_t episodes = 0;
  int64_t firing_ms = 0;  // in all, up to the window's end for one still firing
  double peak_burn = 0;
};

struct BacktestReport {
  TimeRange window;
  int64_t step_ms = 0;
  std::vector<ObjectiveSummary> objectives;  // in config order
  std::vector<AlertEpisode> alerts;          // by fire time
  std::vector<AlertSummary> alert_summary;   // by objective (config order), then window
  std::vector<RuleSummary> rules;            // in config order
  std::vector<Decision> decisions;           // proposed and warned (not skips), by time
  int64_t skipped = 0;                       // decisions a safety rule held back
  std::vector<FreedCapacity> freed;          // the stops, with what each freed
  double gpu_hours_freed = 0;
  Money money_freed;
};

// Replays [window.begin + step, window.end] at each `step_ms`. REQUIRES: step_ms > 0, a
// whole number of hours.
Result<BacktestReport> Backtest(ledger::Ledger& ledger, const std::vector<ObjectiveSpec>& objectives,
                                const std::vector<InterventionRule>& rules, const TimeRange& window, int64_t step_ms);

}  // namespace gpuledger::objectives
