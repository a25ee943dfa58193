#include "objectives/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ledger/objective_inputs.h"

namespace gpuledger::objectives {

using ledger::UsageRow;

namespace {

// What a utilization objective counts of a usage row.
Measured FromRow(const ObjectiveSpec& spec, const UsageRow& row, int64_t covered_ms) {
  Measured m;
  auto ticks = [&](Bucket b) { return static_cast<double>(row.gpu_ticks_ms[static_cast<size_t>(b)]); };
  m.good = ticks(Bucket::kActive);
  m.total = spec.measure == UtilizationMeasure::kEffective ? static_cast<double>(row.total_ticks_ms())
                                                           : ticks(Bucket::kActive) + ticks(Bucket::kAllocatedIdle);
  m.cost = row.total_cost();
  m.covered_ms = covered_ms;
  return m;
}

// `a` x `num` / `den`, exactly, rounded half up; 0 when den is 0. REQUIRES: all >= 0.
Money Scale(Money a, int64_t num, int64_t den) {
  if (den <= 0) return Money();
  CostNumerator n = static_cast<CostNumerator>(a.micros()) * num;
  return Money::FromMicros(static_cast<int64_t>((2 * n + den) / (2 * static_cast<CostNumerator>(den))));
}

class LedgerSourceImpl final : public ObjectiveSource {
 public:
  explicit LedgerSourceImpl(ledger::Ledger& ledger) : ledger_(ledger) {}

  Result<Measured> Measure(const ObjectiveSpec& spec, const TimeRange& window) override {
    if (spec.kind == ObjectiveKind::kAvailability) {
      GPULEDGER_ASSIGN_OR_RETURN(AvailabilityReport r, Availability(spec, window));
      return Measured{.good = r.all.gpus_in_time, .total = r.all.gpus, .covered_ms = window.length_ms()};
    }
    GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, Data());
    TimeRange covered = window.Intersect({data.first_ms, data.end_ms});
    GPULEDGER_ASSIGN_OR_RETURN(UsageRow row, ledger::ScopeUsage(ledger_, spec.scope, window));
    return FromRow(spec, row, covered.length_ms());
  }

  Result<AvailabilityReport> Availability(const ObjectiveSpec& spec, const TimeRange& window) override {
    if (!jobs_) {
      GPULEDGER_ASSIGN_OR_RETURN(std::vector<Job> jobs, ledger_.Jobs());
      jobs_ = std::move(jobs);
    }
    return JudgeAvailability(*jobs_, spec.scope, window, window.end_ms, spec.start_within_ms);
  }

 private:
  Result<ledger::DataSpan> Data() {
    if (!data_) {
      GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan d, ledger_.Data());
      data_ = d;
    }
    return *data_;
  }

  ledger::Ledger& ledger_;
  std::optional<std::vector<Job>> jobs_;
  std::optional<ledger::DataSpan> data_;
};

class HourlySourceImpl final : public ObjectiveSource {
 public:
  HourlySourceImpl(ledger::Ledger& ledger, const TimeRange& history)
      : ledger_(ledger), history_{FloorTo(history.begin_ms, kMsPerHour), history.end_ms} {}

  Result<Measured> Measure(const ObjectiveSpec& spec, const TimeRange& window) override {
    if (spec.kind == ObjectiveKind::kAvailability) return live_.Measure(spec, window);
    GPULEDGER_ASSIGN_OR_RETURN(const Series* series, SeriesOf(spec.scope));
    // The hours the window overlaps.
    int64_t begin = FloorTo(window.begin_ms, kMsPerHour);
    int64_t end = FloorTo(window.end_ms + kMsPerHour - 1, kMsPerHour);
    UsageRow sum;
    for (auto it = series->hours.lower_bound(begin); it != series->hours.end() && it->first < end; ++it) {
      sum.Add(it->second);
    }
    TimeRange covered = TimeRange{begin, end}.Intersect({series->data.first_ms, series->data.end_ms});
    return FromRow(spec, sum, covered.length_ms());
  }

  Result<AvailabilityReport> Availability(const ObjectiveSpec& spec, const TimeRange& window) override {
    return live_.Availability(spec, window);
  }

 private:
  struct Series {
    std::map<int64_t, UsageRow> hours;
    ledger::DataSpan data;
  };

  Result<const Series*> SeriesOf(const ObjectiveScope& scope) {
    std::string key = scope.ToString();
    auto it = series_.find(key);
    if (it != series_.end()) return &it->second;
    Series s;
    GPULEDGER_ASSIGN_OR_RETURN(s.data, ledger_.Data());
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<ledger::ScopeHour> hours, ledger::ScopeHours(ledger_, scope, history_));
    for (ledger::ScopeHour& h : hours) s.hours[h.hour_ms] = std::move(h.usage);
    return &series_.emplace(key, std::move(s)).first->second;
  }

  ledger::Ledger& ledger_;
  TimeRange history_;
  LedgerSourceImpl live_{ledger_};
  std::map<std::string, Series> series_;
};

}  // namespace

std::unique_ptr<ObjectiveSource> LedgerSource(ledger::Ledger& ledger) {
  return std::make_unique<LedgerSourceImpl>(ledger);
}

std::unique_ptr<ObjectiveSource> HourlySource(ledger::Ledger& ledger, const TimeRange& history) {
  return std::make_unique<HourlySourceImpl>(ledger, history);
}

TimeRange MonthOf(int64_t t_ms) {
  auto month = ParseMonth(FormatTime(t_ms).substr(0, 7));
  return month.ok() ? *month : TimeRange{t_ms, t_ms + 30 * kMsPerDay};
}

Tally TallyOf(const ObjectiveSpec& spec, const Measured& m, int64_t month_ms) {
  if (spec.kind == ObjectiveKind::kBudget) {
    double budget = static_cast<double>(spec.monthly_budget.value_or(Money()).micros());
    return BudgetTally(static_cast<double>(m.cost.micros()), m.covered_ms, budget, spec.target, month_ms);
  }
  return RatioTally(m.good, m.total, spec.target);
}

bool ObjectiveStatus::firing() const {
  return std::any_of(alerts.begin(), alerts.end(), [](const AlertStatus& a) { return a.firing; });
}

const AlertStatus* ObjectiveStatus::worst() const {
  for (const AlertStatus& a : alerts) {
    if (a.firing) return &a;  // kBurnWindows is by descending factor
  }
  return nullptr;
}

Result<ObjectiveStatus> Evaluate(const ObjectiveSpec& spec, ObjectiveSource& source, int64_t at_ms) {
  ObjectiveStatus st;
  st.spec = spec;
  st.at_ms = at_ms;
  st.window = {at_ms - spec.window_ms, at_ms};
  int64_t month_ms = MonthOf(at_ms).length_ms();
  std::map<int64_t, Tally> by_length;  // each window length read once
  auto tally = [&](int64_t length_ms) -> Result<Tally> {
    auto it = by_length.find(length_ms);
    if (it != by_length.end()) return it->second;
    GPULEDGER_ASSIGN_OR_RETURN(Measured m, source.Measure(spec, {at_ms - length_ms, at_ms}));
    Tally t = TallyOf(spec, m, month_ms);
    by_length[length_ms] = t;
    if (length_ms == spec.window_ms) {
      // The money at stake over the objective's window.
      if (spec.kind == ObjectiveKind::kUtilization && t.has_data) {
        auto want = static_cast<int64_t>(std::llround(spec.target * m.total));
        auto good = static_cast<int64_t>(m.good);
        st.at_stake = Scale(m.cost, std::max<int64_t>(0, want - good), static_cast<int64_t>(m.total));
      } else if (spec.kind == ObjectiveKind::kBudget && m.covered_ms > 0) {
        Money projected = Scale(m.cost, month_ms, m.covered_ms);
        auto allowed = Money::FromMicros(static_cast<int64_t>(
            std::llround(spec.target * static_cast<double>(spec.monthly_budget.value_or(Money()).micros()))));
        st.at_stake = projected > allowed ? projected - allowed : Money();
      }
    }
    return t;
  };
  GPULEDGER_ASSIGN_OR_RETURN(st.tally, tally(spec.window_ms));
  double burn = st.tally.BurnRate();
  st.met = burn <= 1 + kBurnTolerance;
  st.budget_left = 1 - burn;
  double max_burn = spec.kind == ObjectiveKind::kBudget ? INFINITY : 1 / (1 - spec.target);
  for (size_t i = 0; i < kBurnWindows.size(); ++i) {
    AlertStatus& a = st.alerts[i];
    a.window = kBurnWindows[i];
    GPULEDGER_ASSIGN_OR_RETURN(Tally long_tally, tally(a.window.long_ms));
    GPULEDGER_ASSIGN_OR_RETURN(Tally short_tally, tally(a.window.short_ms));
    a.long_burn = long_tally.BurnRate();
    a.short_burn = short_tally.BurnRate();
    a.firing = Fires(a.window, a.long_burn, a.short_burn);
    a.attainable = a.window.factor <= max_burn * (1 + kBurnTolerance);
  }
  if (spec.kind == ObjectiveKind::kAvailability) {
    GPULEDGER_ASSIGN_OR_RETURN(AvailabilityReport r, source.Availability(spec, st.window));
    st.availability = std::move(r);
  }
  return st;
}

}  // namespace gpuledger::objectives
