// Objectives judged over the ledger: each objective's value over its window, its error
// budget, its four burn-rate alerts and the money at stake (docs/objectives.md). The CLI
// (`gpuledger slo status`), the server's loop and the backtest all call Evaluate; none of
// them judges an objective itself.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/money.h"
#include "core/objective.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "objectives/availability.h"
#include "objectives/burn_rate.h"

namespace gpuledger::objectives {

// What an objective counts over one window, before it is judged.
struct Measured {
  // Utilization: GPU-milliseconds x kShareScale active (good) of the measure's base
  // (total: capacity, or allocated time). Availability: requested GPUs started in time
  // (good) of those judged (total).
  double good = 0;
  double total = 0;
  // Utilization: the scope's cost over the window; budget: the team's spend.
  Money cost;
  // The part of the window the data covers (a window is cut where the data ends).
  int64_t covered_ms = 0;
};

// Where an objective's figures come from: the ledger now (LedgerSource), or the ledger's
// history hour by hour (HourlySource, for the backtest). Not thread-safe: one evaluation
// at a time per source.
class ObjectiveSource {
 public:
  virtual ~ObjectiveSource() = default;
  // What `spec` counts over `window`, as known at window.end_ms.
  virtual Result<Measured> Measure(const ObjectiveSpec& spec, const TimeRange& window) = 0;
  // The availability report of `spec` (kind availability) over `window` at window.end_ms.
  virtual Result<AvailabilityReport> Availability(const ObjectiveSpec& spec, const TimeRange& window) = 0;
};

// Reads the ledger at each call: Usage for the exact window, the jobs once.
std::unique_ptr<ObjectiveSource> LedgerSource(ledger::Ledger& ledger);

// Reads the ledger once, hour by hour over `history` (whole hours), per scope on first
// use: a window is the hours it overlaps, so a window shorter than an hour (the 5 and 30
// minute alert windows) reads as the hour it ends in. Availability stays exact.
std::unique_ptr<ObjectiveSource> HourlySource(ledger::Ledger& ledger, const TimeRange& history);

struct AlertStatus {
  BurnWindow window;
  double long_burn = 0;
  double short_burn = 0;
  bool firing = false;
  bool attainable = true;  // the factor is within what the objective can burn at all
};

struct ObjectiveStatus {
  ObjectiveSpec spec;
  int64_t at_ms = 0;  // the instant judged
  TimeRange window;   // the objective's window ending then
  Tally tally;        // over the window
  bool met = false;   // burned no more than its error budget over the window (burn <= 1)
  // 1 - burn over the window: the share of the error budget left (negative: overspent).
  double budget_left = 1;
  std::array<AlertStatus, kBurnWindows.size()> alerts{};
  // Utilization: the cost of the capacity that would have had to be active to meet the
  // target; budget: the month's spend at the window's pace beyond the target's share of
  // the budget. Zero when met; availability has none.
  Money at_stake;
  std::optional<AvailabilityReport> availability;  // kind availability

  bool firing() const;
  // The firing alert with the highest factor, if any.
  const AlertStatus* worst() const;
};

// `spec` judged at `at_ms` from `source`.
Result<ObjectiveStatus> Evaluate(const ObjectiveSpec& spec, ObjectiveSource& source, int64_t at_ms);

// The tally of `spec` for what `m` counted over a window of `window_ms` (the budget's
// month being `month_ms` long). Pure: the property tests hold it to its definition.
Tally TallyOf(const ObjectiveSpec& spec, const Measured& m, int64_t month_ms);

// The calendar month (UTC) that holds `t_ms`.
TimeRange MonthOf(int64_t t_ms);

}  // namespace gpuledger::objectives
