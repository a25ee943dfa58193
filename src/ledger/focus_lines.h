// The lines of a FOCUS 1.2 export (docs/focus.md): which charges a month holds, at what
// price, for which resource, decided here so that report/focus.h only renders them.
//
// Rows. One line per GPU (or MIG slice), job, bucket and price: a job's active time on a
// device, its idle time on it by idle cause, and each device's time held by no job
// (unallocated, unavailable, unmonitored) as lines of their own, so that nothing is
// hidden. A month in which a price changes has a line per price (a line has one unit
// price). Corrections of closed months are lines with `correction` set, at the team and
// project granularity their chargeback lines have.
//
// Money. Every line's `cost` is a share of the same rounded atoms as Ledger::Usage and
// Ledger::Chargeback (ledger.h): the lines of a month sum to its chargeback's total to
// the micro-unit. A line split over price epochs gets its month cost apportioned over the
// epochs in proportion to their own costs (SplitMoney), so the split adds up exactly.
// The list cost is the unit price times the pricing quantity, exactly (list_cost_pico).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/currency.h"
#include "core/model.h"
#include "core/money.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

struct FocusLine {
  TimeRange charge_period;  // within the billing period (for a correction: the month corrected)
  // A correction of a closed month's charges (FOCUS ChargeClass "Correction"): what
  // changed since it was frozen, booked in the first open month, or, exported for a
  // closed month itself, what its live figures differ from its frozen ones.
  bool correction = false;
  std::string correction_for;  // the closed month a correction is for ("2026-11")
  std::string description;     // for people: "Active time of job j1 on GPU-1"

  // Who it is charged to: the job's team and project; empty on capacity held by no job.
  std::string team;
  std::string project;
  std::optional<Job> job;  // the job holding the device; empty on capacity lines and corrections

  // What was charged: a device's time in one bucket (and, for allocated_idle, one
  // cause). Corrections carry no device (device_uuid empty), only their bucket when they
  // correct a capacity line.
  std::string device_uuid;
  bool mig_slice = false;
  std::string model;
  std::string pool;
  CapacityType capacity_type = CapacityType::kOnDemand;
  std::optional<Bucket> bucket;
  std::optional<IdleCause> idle_cause;
  int64_t gpu_ticks_ms = 0;  // GPU-milliseconds x kShareScale
  double effective_utilization = 0;  // of the job's time on the device (active / held); 0 on capacity lines

  Money cost;  // billed = effective: the ledger's rounded cost
  // The price per GPU-hour the line was charged at (list = contracted: the price book
  // has one price per entry), from the entry `sku_price_id` names. Empty on corrections;
  // zero, with `unpriced`, where the price book had no price.
  std::optional<Money> unit_price;
  bool unpriced = false;
  std::string sku_id;        // the product: "<model>/<capacity type>"; empty on corrections
  std::string sku_price_id;  // the price book entry: "<model>/<pool>/<capacity type>@<from>"; empty if none

  // GPU-hours in micro-GPU-hours (1e-6 GPU-hour), rounded half up from gpu_ticks_ms:
  // FOCUS's PricingQuantity. Zero on corrections.
  int64_t pricing_quantity_micro_hours() const;
  // unit_price x pricing quantity exactly, in 1e-12 of the currency (micro x micro).
  CostNumerator list_cost_pico() const;
};

struct FocusExport {
  TimeRange billing_period;  // the month
  TimeRange window;          // the charge period of its own lines: the month up to where the data ends
  Currency currency;
  std::vector<FocusLine> lines;  // device lines by team, project, job, device, bucket; then corrections
  Money total;                   // the sum of the lines' costs
  std::vector<UnpricedCapacity> unpriced;  // what had no price (and so cost 0)
};

// The FOCUS lines of `month` as `scope` may see them (a viewer: its teams' lines only,
// no capacity lines). Fails as Ledger::Usage and Ledger::Chargeback fail. The month's
// chargeback and usage are read separately: a batch ingested between the two reads shows
// as a correction line of the difference rather than a mismatch.
Result<FocusExport> FocusLines(Ledger& ledger, const TimeRange& month, const Scope& scope);

}  // namespace gpuledger::ledger
