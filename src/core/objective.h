// What an objective and an intervention rule are, as the config states them
// (docs/objectives.md): plain data, read by config::Load from [[objective]] and
// [[intervention]] and judged by src/objectives. Ratios are 0..1; durations are
// milliseconds; money is core/money.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger {

enum class ObjectiveKind : uint8_t { kUtilization, kAvailability, kBudget };
std::string_view ObjectiveKindName(ObjectiveKind k);  // "utilization", ...
Result<ObjectiveKind> ParseObjectiveKind(std::string_view text);

// What part of the fleet an objective covers: "fleet", "pool:NAME", "team:NAME", "kind:NAME".
struct ObjectiveScope {
  enum class Of : uint8_t { kFleet, kPool, kTeam, kKind };
  Of of = Of::kFleet;
  std::string name;  // empty for the fleet
  std::string ToString() const;
  bool operator==(const ObjectiveScope&) const = default;
};
// Fails naming the text; a kind: scope must name a job kind (training, serving, ...).
Result<ObjectiveScope> ParseObjectiveScope(std::string_view text);

// What a utilization objective measures: active / capacity, or active / allocated.
enum class UtilizationMeasure : uint8_t { kEffective, kAllocatedEfficiency };
std::string_view UtilizationMeasureName(UtilizationMeasure m);  // "effective", "allocated_efficiency"
Result<UtilizationMeasure> ParseUtilizationMeasure(std::string_view text);

// "65%", "99.5%" -> 0.65, 0.995. A number and a percent sign, 0..100. Fails naming the text.
Result<double> ParsePercent(std::string_view text);

struct ObjectiveSpec {
  std::string name;
  ObjectiveKind kind = ObjectiveKind::kUtilization;
  ObjectiveScope scope;
  UtilizationMeasure measure = UtilizationMeasure::kEffective;  // utilization only
  // The share of good that the objective promises, 0 < target < 1: of capacity active
  // (utilization), of requested GPUs started within `start_within_ms` (availability); for
  // a budget, the share of the monthly budget the team may spend (it may be 1).
  double target = 0;
  int64_t window_ms = 7 * kMsPerDay;  // rolling
  int64_t interval_ms = kMsPerMinute;  // how often `serve` evaluates it
  int64_t start_within_ms = 10 * kMsPerMinute;  // availability: the bound on a request's wait
  // budget: the team's budget per calendar month; empty: the config's [budgets] entry.
  std::optional<Money> monthly_budget;
  std::string source;  // "FILE:LINE" of its [[objective]] header
};

// What an intervention rule does, safest first.
enum class InterventionAction : uint8_t { kNotify, kHold, kReprioritize, kStop, kRequeue };
std::string_view InterventionActionName(InterventionAction a);  // "notify", "hold", ...
Result<InterventionAction> ParseInterventionAction(std::string_view text);

struct InterventionRule {
  std::string name;
  InterventionAction action = InterventionAction::kNotify;
  bool enforce = false;  // mode = "enforce"; the default, "dry-run", only records decisions
  // Act only while this objective (its name) has an alert firing; empty: always.
  std::string objective;
  // Selector: each non-empty field must match the job's.
  std::optional<JobKind> kind;
  std::string pool;
  std::string team;
  // Evidence for an idle job: every sample of every device it holds under `idle_below`
  // activity (a sample with no process at all counts as idle) for the last `idle_for`.
  double idle_below = 0.05;
  int64_t idle_for_ms = kMsPerHour;
  // reprioritize: the priority given to a pending job that fits the idle GPUs.
  int32_t raise_to = 1000;
  // Safety.
  int64_t grace_ms = 30 * kMsPerMinute;  // warning before a stop (hold, stop, requeue)
  // Jobs exempt: "team:NAME", "project:NAME", "user:NAME", "job:ID" (the job's recorded
  // attributes), "label:KEY=VALUE", "label:KEY" (the label present, any value),
  // "annotation:KEY=VALUE", "annotation:KEY" (the scheduler metadata the agent kept,
  // Job::labels and ::annotations). ParseExemption checks an entry.
  std::vector<std::string> exempt;
  int32_t max_actions_per_hour = 10;
  int64_t staleness_limit_ms = 10 * kMsPerMinute;  // never act on data older than this
  int64_t cooldown_ms = 6 * kMsPerHour;            // at most one action per job per cooldown
  std::string source;                              // "FILE:LINE" of its [[intervention]] header
};

// One exemption entry (InterventionRule::exempt), parsed.
struct Exemption {
  enum class Of : uint8_t { kTeam, kProject, kUser, kJob, kLabel, kAnnotation };
  Of of = Of::kJob;
  std::string name;                  // the attribute's value, or the label's (annotation's) key
  std::optional<std::string> value;  // a label's (annotation's) value; absent: any value
};

// Parses an entry; kInvalidArgument naming the entry and the forms when it is none of them.
Result<Exemption> ParseExemption(std::string_view entry);

// Whether `exempt` entries (as in InterventionRule::exempt) exempt `job`; the first entry
// that did, as written, or "". Entries that do not parse exempt nothing (config checks them).
std::string ExemptionOf(const std::vector<std::string>& exempt, const Job& job);

}  // namespace gpuledger
