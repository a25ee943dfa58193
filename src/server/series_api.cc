// The query API's time series and overview endpoints, which the dashboard draws:
// /info, /series, /heatmap, /budgets and a job's hourly series. Every figure comes from
// Ledger::Usage grouped by hour, so the series add up to /usage for the same window.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include "ledger/job_activity.h"
#include "ledger/targets.h"
#include "report/usage_format.h"
#include "server/api.h"
#include "server/pages.h"
#include "store/store.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;
using ledger::Dimension;

HttpReply Json(const json& j) { return {200, "application/json", j.dump(1) + "\n"}; }

constexpr int64_t kMaxSteps = 10'000;

// The steps of a series: [t0 + i*step, t0 + (i+1)*step) for i < n, t0 the window's
// first hour.
struct StepAxis {
  int64_t t0 = 0;
  int64_t step_ms = kMsPerHour;
  int64_t n = 0;

  size_t Index(int64_t hour_ms) const { return static_cast<size_t>((hour_ms - t0) / step_ms); }
  json Times() const {
    json t = json::array();
    for (int64_t i = 0; i < n; ++i) t.push_back((t0 + i * step_ms) / kMsPerSecond);
    return t;
  }
};

// The window (default `fallback`, e.g. 7d) and the step (default 1h, a whole number of
// hours) of a series request; `pinned`, when not null, is the window instead (a later
// page's: its first page's window).
Result<std::pair<TimeRange, StepAxis>> WindowAndSteps(const QueryParams& params, const QueryContext& q,
                                                      const std::string& fallback, const TimeRange* pinned = nullptr) {
  QueryParams p = params;
  if (!p.count("window") && !p.count("from")) p["window"] = fallback;
  GPULEDGER_ASSIGN_OR_RETURN(TimeRange asked, WindowFrom(p, q.now_ms, q.data_end_ms));
  // Only the hours that hold data have steps: a window from 2000 to 2199 is the data's
  // span, and one that misses the data has none.
  TimeRange window = pinned != nullptr ? *pinned : DataWindow(q, asked);
  auto step = ParseDuration(Param(p, "step", "1h"));
  if (!step.ok()) return step.status().WithContext("step");
  if (*step <= 0 || *step % kMsPerHour != 0) {
    return InvalidArgument(fmt::format("step \"{}\": want a whole number of hours, e.g. 1h or 1d",
                                       Param(p, "step")));
  }
  StepAxis axis;
  axis.t0 = FloorTo(window.begin_ms, kMsPerHour);
  axis.step_ms = *step;
  axis.n = window.empty() ? 0 : (window.end_ms - axis.t0 + *step - 1) / *step;
  if (axis.n > kMaxSteps) {
    return InvalidArgument(fmt::format("{} steps of {} in the window: at most {}; use a longer step",
                                       axis.n, Param(p, "step", "1h"), kMaxSteps));
  }
  return std::pair{window, axis};
}

// Buckets per step of one group.
struct Series {
  std::vector<std::array<int64_t, kBucketCount>> ticks;
  std::vector<std::array<Money, kBucketCount>> cost;
  Money total_cost;

  explicit Series(size_t n) : ticks(n), cost(n) {}
  void Add(size_t i, const ledger::UsageRow& row) {
    for (size_t b = 0; b < kBucketCount; ++b) {
      ticks[i][b] += row.gpu_ticks_ms[b];
      cost[i][b] += row.cost[b];
    }
    total_cost += row.total_cost();
  }
};

double Hours(int64_t ticks) {
  return static_cast<double>(ticks) / static_cast<double>(kShareScale * kMsPerHour);
}

json SeriesJson(const Series& s) {
  json hours = json::object(), cost = json::object();
  for (Bucket b : kAllBuckets) {
    json h = json::array(), c = json::array();
    for (size_t i = 0; i < s.ticks.size(); ++i) {
      h.push_back(Hours(s.ticks[i][static_cast<size_t>(b)]));
      c.push_back(s.cost[i][static_cast<size_t>(b)].ToString());
    }
    hours[std::string(BucketName(b))] = std::move(h);
    cost[std::string(BucketName(b))] = std::move(c);
  }
  json eff = json::array(), alloc = json::array();
  for (const auto& t : s.ticks) {
    int64_t total = 0;
    for (int64_t v : t) total += v;
    int64_t held = t[0] + t[1];
    eff.push_back(total ? json(static_cast<double>(t[0]) / static_cast<double>(total)) : json(nullptr));
    alloc.push_back(held ? json(static_cast<double>(t[0]) / static_cast<double>(held)) : json(nullptr));
  }
  return {{"gpu_hours", std::move(hours)},
          {"cost", std::move(cost)},
          {"effective_utilization", std::move(eff)},
          {"allocated_efficiency", std::move(alloc)}};
}

// The digest of a series answer (pages.h): its window, every group's key and figures in
// order, and the fleet's.
uint64_t SeriesDigest(const TimeRange& window, const std::vector<const std::pair<const std::vector<std::string>, Series>*>& order,
                      const Series& total) {
  Digest d;
  d.Add(window.begin_ms).Add(window.end_ms).Add(static_cast<int64_t>(order.size()));
  auto add = [&](const Series& s) {
    for (size_t i = 0; i < s.ticks.size(); ++i) {
      for (size_t b = 0; b < kBucketCount; ++b) d.Add(s.ticks[i][b]).Add(s.cost[i][b].micros());
    }
  };
  for (const auto* g : order) {
    for (const std::string& k : g->first) d.Add(k);
    add(g->second);
  }
  add(total);
  return d.value();
}

// Parses the hour keys of a report grouped by hour first, once per distinct hour. A
// report's rows come mostly hour by hour: the latest key is compared before the hash.
class HourKeys {
 public:
  Result<int64_t> Of(const std::string& key) {
    if (last_ != nullptr && last_->first == key) return last_->second;
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      GPULEDGER_ASSIGN_OR_RETURN(int64_t t, ParseTime(key));
      it = cache_.emplace(key, t).first;
    }
    last_ = &*it;
    return it->second;
  }

 private:
  std::unordered_map<std::string, int64_t> cache_;
  const std::pair<const std::string, int64_t>* last_ = nullptr;  // stable: a node of cache_
};

// The dimensions to ask Usage for: the hour first, then (for a viewer, who sees only
// its teams) the team, then `by`. `at` receives each of `by`'s positions in the key.
std::vector<Dimension> HourlyDimensions(const QueryContext& q, const std::vector<Dimension>& by,
                                        std::vector<size_t>& at) {
  std::vector<Dimension> dims = {Dimension::kHour};
  if (q.who.role != Role::kAdmin) dims.push_back(Dimension::kTeam);
  for (Dimension d : by) {
    auto it = std::find(dims.begin(), dims.end(), d);
    if (it == dims.end()) {
      dims.push_back(d);
      it = dims.end() - 1;
    }
    at.push_back(static_cast<size_t>(it - dims.begin()));
  }
  return dims;
}

// Whether a row of a report from HourlyDimensions is the caller's to see in detail.
bool Visible(const QueryContext& q, const ledger::UsageRow& row) {
  return q.who.role == Role::kAdmin || (!row.no_job && q.who.MaySeeTeam(row.key[1]));
}

json WindowJson(const TimeRange& w) { return {{"from", FormatTime(w.begin_ms)}, {"to", FormatTime(w.end_ms)}}; }

}  // namespace

HttpReply InfoReply(const QueryContext& q) {
  auto data = q.ledger.Data();
  if (!data.ok()) return ErrorReply(data.status());
  int64_t from = data->first_ms, to = data->end_ms;
  std::set<std::string> teams;
  if (q.who.role == Role::kAdmin) {
    auto jobs = q.ledger.Jobs();
    if (!jobs.ok()) return ErrorReply(jobs.status());
    for (const auto& j : *jobs) teams.insert(j.team);
  } else {
    teams.insert(q.who.teams.begin(), q.who.teams.end());
  }
  json budgets = json::object();
  json pools = json::object();
  json sources = json::object();
  double fleet_target = 0.6;
  std::string fleet_source(Goals::kDefaultSource);
  if (q.goals != nullptr) {
    fleet_target = q.goals->fleet_target;
    fleet_source = q.goals->fleet_target_source;
    for (const auto& [pool, t] : q.goals->pool_targets) {
      pools[pool] = t;
      sources[pool] = q.goals->TargetSourceFor(pool);
    }
    for (const auto& [team, amount] : q.goals->monthly_budgets) {
      if (q.who.MaySeeTeam(team)) budgets[team] = amount.ToString();
    }
  }
  json out = {{"now", FormatTime(q.now_ms)},
              {"role", RoleName(q.who.role)},
              {"name", q.who.name},
              {"teams", teams},
              {"data", {{"from", from ? json(FormatTime(from)) : json(nullptr)},
                        {"to", to ? json(FormatTime(to)) : json(nullptr)}}},
              // Where each target was set (FILE:LINE of the server's config, or the default).
              {"targets", {{"fleet", fleet_target}, {"pools", pools},
                           {"sources", {{"fleet", fleet_source}, {"pools", sources}}}}},
              {"budgets", budgets},
              {"refresh_seconds", q.refresh_ms / kMsPerSecond}};
  // The price book's currency, for every money figure the dashboard shows: "EUR", a
  // unit's name, or null (an unnamed unit, which the dashboard says).
  report::AddCurrencyJson(out, q.ledger.options().currency);
  out["currency_label"] = q.ledger.options().currency.Label();
  return Json(out);
}

HttpReply SeriesReply(const QueryContext& q, const QueryParams& params) {
  auto page = PageFrom(params, "series", q.who, {"window", "from", "to", "by", "step"});
  if (!page.ok()) return ErrorReply(page.status());
  auto wa = WindowAndSteps(params, q, "7d", page->after ? &page->after->window : nullptr);
  if (!wa.ok()) return ErrorReply(wa.status());
  // Named references, not a structured binding: lambdas below use them (clang 14 refuses
  // to capture a binding, and CI's fuzz build compiles this with clang).
  const TimeRange& window = wa->first;
  const StepAxis& axis = wa->second;
  std::vector<Dimension> by;
  if (std::string text = Param(params, "by"); !text.empty()) {
    auto parsed = ledger::ParseDimensions(text);
    if (!parsed.ok()) return ErrorReply(parsed.status().WithContext("by"));
    by = *parsed;
    if (std::find(by.begin(), by.end(), Dimension::kHour) != by.end()) {
      return ErrorReply(InvalidArgument("by: a series is already by time; group by anything but hour"));
    }
  }
  std::vector<size_t> at;
  std::vector<Dimension> dims = HourlyDimensions(q, by, at);
  // Bounded before any work: the ledger's device-hours, and the answer's groups x steps.
  auto cost = EstimateCost(q, window, dims);
  if (!cost.ok()) return ErrorReply(cost.status());
  if (Status st = CheckCost(q, *cost, false); !st.ok()) return ErrorReply(st);
  if (!by.empty()) {
    auto answer = EstimateCost(q, window, by);
    if (!answer.ok()) return ErrorReply(answer.status());
    int64_t cells = answer->groups * axis.n;
    if (cells > LimitsOf(q).max_series_cells) {
      return ErrorReply(Status(StatusCode::kResourceExhausted,
                               fmt::format("up to {} groups x {} steps = {} cells is over the limit of {} cells "
                                           "per series (max_series_cells); use a longer step or a shorter window",
                                           answer->groups, axis.n, cells, LimitsOf(q).max_series_cells)));
    }
  }

  size_t n = static_cast<size_t>(axis.n);
  Series total(n);
  std::map<std::vector<std::string>, Series> groups;
  HourKeys hours;
  Status st = ForEachHourlyRow(q, window, dims, *cost, [&](const ledger::UsageRow& row) -> Status {
    GPULEDGER_ASSIGN_OR_RETURN(int64_t h, hours.Of(row.key[0]));
    size_t i = axis.Index(h);
    total.Add(i, row);  // the fleet's, whoever asks
    if (by.empty() || !Visible(q, row)) return Status::Ok();
    std::vector<std::string> key;
    for (size_t k : at) key.push_back(row.key[k]);
    groups.try_emplace(key, n).first->second.Add(i, row);
    return Status::Ok();
  });
  if (!st.ok()) return ErrorReply(st);
  std::vector<const std::pair<const std::vector<std::string>, Series>*> order;
  for (const auto& g : groups) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->second.total_cost > b->second.total_cost; });
  // A page of the groups (pages.h); the fleet's total is on every page.
  auto cut = CutPage(*page, SeriesDigest(window, order, total), window, order.size());
  if (!cut.ok()) return ErrorReply(cut.status());

  bool by_pool = by.size() == 1 && by[0] == Dimension::kPool;
  double fleet_target = q.goals ? q.goals->fleet_target : 0.6;
  json list = json::array();
  for (size_t i = cut->begin; i < cut->end; ++i) {
    const auto* g = order[i];
    json o = SeriesJson(g->second);
    o["key"] = g->first;
    o["target"] = by_pool && q.goals ? json(q.goals->TargetFor(g->first[0])) : json(nullptr);
    list.push_back(std::move(o));
  }
  json t = SeriesJson(total);
  t["key"] = std::vector<std::string>(by.size(), "(total)");
  t["target"] = fleet_target;
  json names = json::array();
  for (Dimension d : by) names.push_back(ledger::DimensionName(d));
  json out = WindowJson(window);
  out["step_seconds"] = axis.step_ms / kMsPerSecond;
  out["by"] = names;
  out["times"] = axis.Times();
  report::AddCurrencyJson(out, q.ledger.options().currency);
  out["total"] = std::move(t);
  out["groups"] = std::move(list);
  AddPageJson(out, *page, *cut);
  HttpReply reply = Json(out);
  if (!cut->next.empty()) reply.headers.emplace_back(std::string(kNextPageHeader), cut->next);
  return reply;
}

HttpReply HeatmapReply(const QueryContext& q, const QueryParams& params) {
  auto wa = WindowAndSteps(params, q, "7d");
  if (!wa.ok()) return ErrorReply(wa.status());
  // Named references, not a structured binding: lambdas below use them (clang 14 refuses
  // to capture a binding, and CI's fuzz build compiles this with clang).
  const TimeRange& window = wa->first;
  const StepAxis& axis = wa->second;
  auto fleet = q.ledger.FleetNow(q.now_ms);
  if (!fleet.ok()) return ErrorReply(fleet.status());
  const int64_t max_cells = LimitsOf(q).max_heatmap_cells;
  if (static_cast<int64_t>(fleet->size()) * axis.n > max_cells) {
    return ErrorReply(Status(StatusCode::kResourceExhausted, fmt::format(
        "{} devices x {} steps is more than a heatmap holds ({} cells, max_heatmap_cells); use a longer step",
        fleet->size(), axis.n, max_cells)));
  }
  std::vector<size_t> at;
  std::vector<Dimension> dims = HourlyDimensions(q, {Dimension::kDevice}, at);
  auto cost = EstimateCost(q, window, dims);
  if (!cost.ok()) return ErrorReply(cost.status());
  if (Status st = CheckCost(q, *cost, false); !st.ok()) return ErrorReply(st);

  // Per device and step: active time, and the time it is measured against (an admin:
  // all time in service; a viewer: its jobs' time on the device), what of it was
  // monitored at all, and (an admin's) its time in each bucket: held-idle from unallocated.
  struct Cell {
    int64_t active = 0, base = 0, monitored = 0;
    std::array<int64_t, kBucketCount> buckets{};
  };
  size_t n = static_cast<size_t>(axis.n);
  std::unordered_map<std::string, std::vector<Cell>> cells;
  HourKeys hours;
  bool admin = q.who.role == Role::kAdmin;
  Status st = ForEachHourlyRow(q, window, dims, *cost, [&](const ledger::UsageRow& row) -> Status {
    if (!Visible(q, row)) return Status::Ok();
    GPULEDGER_ASSIGN_OR_RETURN(int64_t h, hours.Of(row.key[0]));
    auto& v = cells[row.key[at[0]]];
    if (v.empty()) v.resize(n);
    Cell& c = v[axis.Index(h)];
    const auto& t = row.gpu_ticks_ms;
    c.active += t[static_cast<size_t>(Bucket::kActive)];
    int64_t idle = t[static_cast<size_t>(Bucket::kAllocatedIdle)];
    if (admin) {
      int64_t all = 0;
      for (int64_t x : t) all += x;
      for (size_t b = 0; b < kBucketCount; ++b) c.buckets[b] += t[b];
      c.base += all;
      c.monitored += all - t[static_cast<size_t>(Bucket::kUnmonitored)];
    } else {
      c.base += t[static_cast<size_t>(Bucket::kActive)] + idle;
      c.monitored = c.base;
    }
    return Status::Ok();
  });
  if (!st.ok()) return ErrorReply(st);

  // Node, then each GPU followed by its slices.
  std::unordered_map<int64_t, const ledger::DeviceNow*> by_id;
  for (const auto& dn : *fleet) by_id[dn.record.id] = &dn;
  std::vector<const ledger::DeviceNow*> order;
  for (const auto& dn : *fleet) order.push_back(&dn);
  auto sort_key = [&](const ledger::DeviceNow* dn) {
    const store::DeviceRecord& d = dn->record;
    const store::DeviceRecord& gpu = d.parent_id && by_id.count(d.parent_id) ? by_id[d.parent_id]->record : d;
    return std::tuple(d.device.node, gpu.device.uuid, d.parent_id != 0, d.device.uuid);
  };
  std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) { return sort_key(a) < sort_key(b); });

  json list = json::array();
  for (const ledger::DeviceNow* dn : order) {
    const store::DeviceRecord* d = &dn->record;
    auto it = cells.find(d->device.uuid);
    if (!admin && it == cells.end()) continue;  // a viewer sees the devices its teams held
    json values = json::array();
    json allocated = json::array();
    json mostly = json::array();
    auto percent = [](int64_t part, int64_t whole) { return (200 * part + whole) / (2 * whole); };  // half up
    for (size_t i = 0; i < n; ++i) {
      const Cell* c = it == cells.end() ? nullptr : &it->second[i];
      if (c == nullptr || c->monitored == 0 || c->base == 0) {
        values.push_back(nullptr);
      } else {
        values.push_back(percent(c->active, c->base));
      }
      if (!admin) continue;
      // The share of the time in service held by jobs, and the bucket that held at least
      // half of it when that was no job's (unallocated, unavailable, unmonitored).
      if (c == nullptr || c->base == 0) {
        allocated.push_back(nullptr);
        mostly.push_back(nullptr);
        continue;
      }
      allocated.push_back(percent(c->buckets[static_cast<size_t>(Bucket::kActive)] +
                                      c->buckets[static_cast<size_t>(Bucket::kAllocatedIdle)],
                                  c->base));
      json most = nullptr;
      for (Bucket b : {Bucket::kUnallocated, Bucket::kUnavailable, Bucket::kUnmonitored}) {
        if (2 * c->buckets[static_cast<size_t>(b)] >= c->base) {
          most = BucketName(b);
          break;
        }
      }
      mostly.push_back(std::move(most));
    }
    json held = json::array();
    int64_t others = 0;
    for (const ledger::Holder& h : dn->holders) {
      const Job* j = &h.job;
      if (q.who.MaySeeTeam(j->team)) {
        held.push_back(j->id);
      } else {
        ++others;
      }
    }
    json o = {{"uuid", d->device.uuid}, {"node", d->device.node},  {"model", d->device.model},
              {"pool", d->device.pool}, {"values", std::move(values)}, {"holders", std::move(held)}};
    o["mig_profile"] = d->device.is_mig() ? json(d->device.mig_profile) : json(nullptr);
    o["parent"] = d->device.is_mig() ? json(d->device.parent_uuid) : json(nullptr);
    if (admin) {
      o["allocated"] = std::move(allocated);
      o["mostly"] = std::move(mostly);
    }
    if (others) o["held_by_other_teams"] = others;
    list.push_back(std::move(o));
  }
  json out = WindowJson(window);
  out["step_seconds"] = axis.step_ms / kMsPerSecond;
  out["times"] = axis.Times();
  out["value"] = admin ? "effective utilization, percent of time in service"
                       : "your jobs' allocated efficiency on the device, percent";
  out["devices"] = std::move(list);
  return Json(out);
}

HttpReply BudgetsReply(const QueryContext& q, const QueryParams& params) {
  std::string period_text = Param(params, "period", FormatTime(q.now_ms).substr(0, 7));
  auto month = ParseMonth(period_text);
  if (!month.ok()) return ErrorReply(month.status().WithContext("period"));
  static const Goals kNone;
  auto r = ledger::JudgeMonthlyBudgets(q.ledger, q.goals ? *q.goals : kNone, *month, q.now_ms, ScopeOf(q.who));
  if (!r.ok()) return ErrorReply(r.status());
  json teams = json::array();
  for (const ledger::BudgetStatus& s : r->teams) {
    teams.push_back({{"team", s.team},
                     {"budget", s.budget.ToString()},
                     {"spent", s.spent.ToString()},
                     {"burn", s.burn},
                     {"projected", s.projected ? json(s.projected->ToString()) : json(nullptr)}});
  }
  json out = {{"period", period_text},
              {"from", FormatTime(r->to_date.begin_ms)},
              {"to", FormatTime(r->to_date.end_ms)},
              {"elapsed", r->elapsed},
              {"teams", std::move(teams)}};
  report::AddCurrencyJson(out, q.ledger.options().currency);
  return Json(out);
}

Result<json> JobSeriesJson(const QueryContext& q, const std::string& job_id, const TimeRange& span) {
  TimeRange window = span.Intersect({FloorTo(span.end_ms, kMsPerHour) - 30 * kMsPerDay, span.end_ms});
  const std::vector<Dimension> dims = {Dimension::kHour, Dimension::kJob};
  GPULEDGER_ASSIGN_OR_RETURN(QueryCost cost, EstimateCost(q, window, dims));
  // On a fleet too large for 30 days within the budget, the job's latest hours that fit.
  if (int64_t max = LimitsOf(q).max_device_hours; cost.device_hours() > max && cost.devices > 0) {
    int64_t hours = std::max<int64_t>(1, max / cost.devices);
    int64_t end_hour = FloorTo(window.end_ms + kMsPerHour - 1, kMsPerHour);
    window.begin_ms = std::max(window.begin_ms, end_hour - hours * kMsPerHour);
    GPULEDGER_ASSIGN_OR_RETURN(cost, EstimateCost(q, window, dims));
  }
  GPULEDGER_RETURN_IF_ERROR(CheckCost(q, cost, false));
  StepAxis axis{FloorTo(window.begin_ms, kMsPerHour), kMsPerHour, 0};
  axis.n = (window.end_ms - axis.t0 + kMsPerHour - 1) / kMsPerHour;
  Series s(static_cast<size_t>(axis.n));
  HourKeys hours;
  GPULEDGER_RETURN_IF_ERROR(ForEachHourlyRow(q, window, dims, cost, [&](const ledger::UsageRow& row) -> Status {
    if (row.no_job || row.key[1] != job_id) return Status::Ok();
    GPULEDGER_ASSIGN_OR_RETURN(int64_t h, hours.Of(row.key[0]));
    s.Add(axis.Index(h), row);
    return Status::Ok();
  }));
  json o = SeriesJson(s);
  o["from"] = FormatTime(window.begin_ms);
  o["to"] = FormatTime(window.end_ms);
  o["step_seconds"] = 3600;
  o["times"] = axis.Times();
  return o;
}

Result<json> JobActivityJson(const QueryContext& q, const std::string& job_id, const TimeRange& life) {
  // The finest step that draws the span in at most kMaxActivitySteps; a longer span shows
  // its latest steps at the coarsest (and, past the sample budget, fewer of them).
  constexpr int64_t kMaxActivitySteps = 360;
  // Nothing was measured after the data end: a running job's steps stop there.
  const TimeRange span{life.begin_ms, std::max(life.begin_ms, std::min(life.end_ms, q.data_end_ms > 0 ? q.data_end_ms : life.end_ms))};
  int64_t step = 0;
  for (int64_t minutes : {1, 2, 5, 10, 15, 30}) {
    step = minutes * kMsPerMinute;
    if ((span.length_ms() + step - 1) / step <= kMaxActivitySteps) break;
  }
  TimeRange window{FloorTo(span.begin_ms, step), FloorTo(span.end_ms + step - 1, step)};
  window.begin_ms = std::max(window.begin_ms, window.end_ms - kMaxActivitySteps * step);
  GPULEDGER_ASSIGN_OR_RETURN(
      ledger::JobActivity a, ledger::JobActivityOf(q.ledger, job_id, window, step, LimitsOf(q).max_job_sample_device_hours));
  json times = json::array(), active = json::array(), idle = json::array(), eff = json::array();
  for (size_t i = 0; i < a.times_ms.size(); ++i) {
    times.push_back(a.times_ms[i] / kMsPerSecond);
    active.push_back(Hours(a.active_ticks_ms[i]));
    idle.push_back(Hours(a.idle_ticks_ms[i]));
    int64_t held = a.active_ticks_ms[i] + a.idle_ticks_ms[i];
    eff.push_back(held ? json(static_cast<double>(a.active_ticks_ms[i]) / static_cast<double>(held)) : json(nullptr));
  }
  return json{{"from", FormatTime(a.window.begin_ms)},
              {"to", FormatTime(a.window.end_ms)},
              {"requested", WindowJson(a.requested)},
              {"step_seconds", step / kMsPerSecond},
              {"times", std::move(times)},
              {"gpu_hours", {{"active", std::move(active)}, {"allocated_idle", std::move(idle)}}},
              {"allocated_efficiency", std::move(eff)},
              {"device_hours_read", a.device_hours}};
}

}  // namespace gpuledger::server
