#include "server/api.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>

#include "ledger/attribution.h"
#include "ledger/focus_lines.h"
#include "ledger/mfu.h"
#include "ledger/rightsizing.h"
#include "ledger/serving.h"
#include "report/focus.h"
#include "report/experiments_format.h"
#include "report/usage_format.h"
#include "report/weekly.h"
#include "server/pages.h"
#include "store/store.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;

HttpReply JsonReply(const json& j) { return {200, "application/json", j.dump(2) + "\n"}; }

Result<report::Format> FormatFrom(const QueryParams& p) {
  return report::ParseFormat(Param(p, "format", "json"));
}

// The required period=YYYY-MM of a monthly query; a missing or bad one names the parameter.
Result<TimeRange> PeriodFrom(const QueryParams& p) {
  std::string text = Param(p, "period");
  if (text.empty()) return InvalidArgument("give period=YYYY-MM");
  auto period = ParseMonth(text);
  if (!period.ok()) return period.status().WithContext("period");
  return period;
}

std::string ContentType(report::Format f) {
  switch (f) {
    case report::Format::kJson: return "application/json";
    case report::Format::kCsv: return "text/csv; charset=utf-8";
    case report::Format::kTable: return "text/plain; charset=utf-8";
  }
  return "text/plain";
}

}  // namespace

ledger::Scope ScopeOf(const Principal& who) {
  if (who.role == Role::kAdmin) return ledger::Scope::All();
  return ledger::Scope::Teams({who.teams.begin(), who.teams.end()});
}

namespace {

json JobJson(const Job& j) {
  json o = {{"id", j.id},           {"team", j.team}, {"project", j.project},
            {"experiment", j.experiment}, {"user", j.user}, {"kind", JobKindName(j.kind)},
            {"pool", j.pool},       {"priority", j.priority}, {"requested_gpus", j.requested_gpus}};
  if (!j.requested_mig_profile.empty()) o["requested_mig_profile"] = j.requested_mig_profile;
  if (j.submit_ms) o["submit"] = FormatTime(*j.submit_ms);
  if (j.start_ms) o["start"] = FormatTime(*j.start_ms);
  if (j.end_ms) o["end"] = FormatTime(*j.end_ms);
  // As kept, even empty: "none now" is not "never reported" (then absent).
  if (j.labels) o["labels"] = json(*j.labels);
  if (j.annotations) o["annotations"] = json(*j.annotations);
  return o;
}

json OptionalNumber(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

std::string Param(const QueryParams& p, const std::string& key, std::string fallback) {
  auto it = p.find(key);
  return it == p.end() ? fallback : it->second;
}

Result<int64_t> CountParam(const QueryParams& p, const std::string& key, int64_t fallback, int64_t min,
                           int64_t max) {
  auto it = p.find(key);
  if (it == p.end()) return fallback;
  const std::string& text = it->second;
  int64_t v = 0;
  bool digits = !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) v = std::stoll(text);
  if (!digits || v < min || v > max) {
    return InvalidArgument(fmt::format("{} \"{}\": want a whole number within {}..{}", key, text, min, max));
  }
  return v;
}

// The most jobs one /jobs answer lists (a page; `next` names where the next begins).
constexpr int64_t kMaxJobsPerPage = 5'000;

Result<TimeRange> WindowFrom(const QueryParams& p, int64_t now_ms, int64_t data_end_ms) {
  std::string window = Param(p, "window"), from = Param(p, "from"), to = Param(p, "to");
  if (!window.empty()) {
    if (!from.empty() || !to.empty()) return InvalidArgument("give either window or from/to, not both");
    GPULEDGER_ASSIGN_OR_RETURN(int64_t length, ParseDuration(window));
    return ledger::TrailingWindow(now_ms, data_end_ms, length);
  }
  if (from.empty()) return InvalidArgument("give window (e.g. 7d) or from and to (RFC 3339)");
  GPULEDGER_ASSIGN_OR_RETURN(int64_t begin, ParseTime(from));
  int64_t end = now_ms;
  if (!to.empty()) {
    auto parsed = ParseTime(to);
    if (!parsed.ok()) return parsed.status().WithContext("to");
    end = *parsed;
  }
  if (end <= begin) return InvalidArgument("to must be after from");
  return TimeRange{begin, end};
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kResourceExhausted: return 413;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

HttpReply ErrorReply(int http_status, std::string_view code, std::string_view message) {
  json j = {{"error", code}, {"message", message}};
  // Messages may quote hostile input: dump() escapes it, replacing invalid UTF-8.
  return {http_status, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"};
}

HttpReply ErrorReply(const Status& status) {
  return ErrorReply(HttpStatusFor(status.code()), StatusCodeName(status.code()), status.message());
}

HttpReply FleetReply(const QueryContext& q) {
  auto fleet = q.ledger.FleetNow(q.now_ms);
  if (!fleet.ok()) return ErrorReply(fleet.status());
  json out = json::object();
  out["now"] = FormatTime(q.now_ms);
  json list = json::array();
  std::map<std::string, int64_t> by_state;
  int64_t gpus = 0, slices = 0;
  for (const ledger::DeviceNow& n : *fleet) {
    const Device& d = n.record.device;
    (d.is_mig() ? slices : gpus) += 1;
    json o = {{"uuid", d.uuid},
              {"node", d.node},
              {"model", d.model},
              {"memory_mib", d.memory_mib},
              {"pool", d.pool},
              {"capacity_type", CapacityTypeName(d.capacity_type)}};
    if (d.is_mig()) {
      o["parent"] = d.parent_uuid;
      o["mig_profile"] = d.mig_profile;
      o["share"] = fmt::format("{}/{}", d.share.num, d.share.den);
    }
    if (n.record.last_sample_ms > 0) o["last_sample"] = FormatTime(n.record.last_sample_ms);
    o["staleness_limit_seconds"] = n.staleness_limit_ms / kMsPerSecond;
    o["index"] = n.gpu_index;
    if (n.slice_index) o["slice_index"] = *n.slice_index;
    o["idle_since"] = n.idle_since_ms ? json(FormatTime(*n.idle_since_ms)) : json(nullptr);
    o["idle_seconds"] = n.idle_since_ms ? json((q.now_ms - *n.idle_since_ms) / kMsPerSecond) : json(nullptr);
    if (n.idle_since_clipped) o["idle_since_clipped"] = true;
    o["idle_cost"] = n.idle_cost.ToString();
    if (!n.idle_priced) o["idle_unpriced"] = true;
    json holder_list = json::array();
    for (const ledger::Holder& h : n.holders) {
      if (q.who.MaySeeTeam(h.job.team)) {
        holder_list.push_back({{"job", h.job.id},
                               {"team", h.job.team},
                               {"project", h.job.project},
                               {"user", h.job.user},
                               {"kind", JobKindName(h.job.kind)},
                               {"since", FormatTime(h.since_ms)}});
      } else {
        holder_list.push_back({{"job", nullptr}, {"team", nullptr}, {"hidden", true}});
      }
    }
    o["holders"] = holder_list;
    std::string state(ledger::DeviceStateName(n.state));
    o["state"] = state;
    ++by_state[state];
    if (n.last) {
      const Sample& last = *n.last;
      o["health"] = HealthName(last.health);
      o["activity"] = {{"ratio", OptionalNumber(last.ActivityRatio())},
                       {"source", last.activity_source() == ActivitySource::kSmActive ? "sm_active" : "gpu_util"},
                       {"sm_active", OptionalNumber(last.sm_active)},
                       {"sm_occupancy", OptionalNumber(last.sm_occupancy)},
                       {"tensor_active", OptionalNumber(last.tensor_active)},
                       {"dram_active", OptionalNumber(last.dram_active)},
                       {"gpu_util", OptionalNumber(last.gpu_util)},
                       {"fb_used_mib", OptionalNumber(last.fb_used_mib)},
                       {"power_watts", OptionalNumber(last.power_watts)}};
    } else {
      o["health"] = nullptr;
      o["activity"] = nullptr;
    }
    list.push_back(std::move(o));
  }
  out["devices"] = std::move(list);
  out["totals"] = {{"gpus", gpus}, {"mig_slices", slices}, {"by_state", by_state}};
  report::AddCurrencyJson(out, q.ledger.options().currency);  // of each idle cost
  return JsonReply(out);
}

HttpReply UsageReply(const QueryContext& q, const QueryParams& params) {
  auto page = PageFrom(params, "usage", q.who, {"window", "from", "to", "by"});
  if (!page.ok()) return ErrorReply(page.status());
  auto window = WindowFrom(params, q.now_ms, q.data_end_ms);
  if (!window.ok()) return ErrorReply(window.status());
  auto by = ledger::ParseDimensions(Param(params, "by", "team"));
  if (!by.ok()) return ErrorReply(by.status());
  auto format = FormatFrom(params);
  if (!format.ok()) return ErrorReply(format.status());
  // Bounded before any work. By hour, the ledger attributes every hour of the window
  // over every device: only the hours that hold data are asked for.
  bool hourly = std::find(by->begin(), by->end(), ledger::Dimension::kHour) != by->end();
  TimeRange work = *window;
  if (hourly && !DataWindow(q, *window).empty()) work = DataWindow(q, *window);
  // A later page covers the first page's window, wherever the data have moved since.
  if (page->after) work = page->after->window;
  std::vector<ledger::Dimension> dims = *by;
  if (q.who.role != Role::kAdmin && std::find(dims.begin(), dims.end(), ledger::Dimension::kTeam) == dims.end()) {
    dims.push_back(ledger::Dimension::kTeam);  // ScopedUsage groups a viewer's rows by team too
  }
  auto cost = EstimateCost(q, work, dims);
  if (!cost.ok()) return ErrorReply(cost.status());
  if (Status st = CheckCost(q, *cost, true); !st.ok()) return ErrorReply(st);
  auto r = q.ledger.ScopedUsage(work, *by, ScopeOf(q.who));
  if (!r.ok()) return ErrorReply(r.status());
  r->requested = *window;
  auto cut = CutPage(*page, UsageDigest(*r), r->window, r->rows.size());
  if (!cut.ok()) return ErrorReply(cut.status());
  // The page's rows; the total stays the whole answer's.
  r->rows.erase(r->rows.begin() + static_cast<std::ptrdiff_t>(cut->end), r->rows.end());
  r->rows.erase(r->rows.begin(), r->rows.begin() + static_cast<std::ptrdiff_t>(cut->begin));
  // Grouped by pool, each row carries the target it is held to.
  bool by_pool = std::find(by->begin(), by->end(), ledger::Dimension::kPool) != by->end();
  const Goals* goals = by_pool ? q.goals : nullptr;
  HttpReply reply{200, ContentType(*format), {}};
  if (*format == report::Format::kJson) {
    json out = report::UsageJson(*r, goals);
    AddPageJson(out, *page, *cut);
    reply.body = out.dump(2) + "\n";
  } else {
    reply.body = report::RenderUsage(*r, *format, goals);
  }
  // Every format carries the cursor in a header too (CSV and text have no place for it).
  if (!cut->next.empty()) reply.headers.emplace_back(std::string(kNextPageHeader), cut->next);
  return reply;
}

namespace {

json PeriodJson(const ledger::ClosedPeriod& p) {
  return {{"month", p.month}, {"from", FormatTime(p.range.begin_ms)}, {"to", FormatTime(p.range.end_ms)},
          {"closed_at", FormatTime(p.closed_at_ms)}, {"closed_by", p.closed_by}};
}

}  // namespace

HttpReply PeriodsReply(const QueryContext& q) {
  auto closed = q.ledger.ClosedPeriods();
  if (!closed.ok()) return ErrorReply(closed.status());
  json out = {{"closed", json::array()}};
  for (const auto& p : *closed) out["closed"].push_back(PeriodJson(p));
  return {200, "application/json", out.dump() + "\n"};
}

HttpReply ClosePeriodReply(const QueryContext& q, const std::string& month) {
  auto closed = q.ledger.ClosePeriod(month, q.who.name);
  if (!closed.ok()) return ErrorReply(closed.status().code() == StatusCode::kInvalidArgument
                                          ? closed.status().WithContext("month")
                                          : closed.status());
  return {200, "application/json", PeriodJson(*closed).dump() + "\n"};
}

HttpReply ChargebackReply(const QueryContext& q, const QueryParams& params) {
  auto period = PeriodFrom(params);
  if (!period.ok()) return ErrorReply(period.status());
  auto format = FormatFrom(params);
  if (!format.ok()) return ErrorReply(format.status());
  std::string share = Param(params, "share_idle", "false");
  if (share != "true" && share != "false") {
    return ErrorReply(InvalidArgument(fmt::format("share_idle \"{}\": want true or false", share)));
  }
  auto r = q.ledger.Chargeback(*period, share == "true");
  if (!r.ok()) return ErrorReply(r.status());
  if (q.who.role != Role::kAdmin) {
    // A viewer sees its teams' lines; the fleet's total stays.
    std::erase_if(r->lines, [&](const ledger::ChargebackLine& l) { return l.capacity || !q.who.MaySeeTeam(l.team); });
  }
  return {200, ContentType(*format), report::RenderChargeback(*r, *format)};
}

HttpReply FocusReply(const QueryContext& q, const QueryParams& params) {
  auto period = PeriodFrom(params);
  if (!period.ok()) return ErrorReply(period.status());
  auto e = ledger::FocusLines(q.ledger, *period, ScopeOf(q.who));
  if (!e.ok()) return ErrorReply(e.status());
  return {200, ContentType(report::Format::kCsv), report::RenderFocusCsv(*e)};
}

HttpReply ExperimentsReply(const QueryContext& q, const QueryParams& params) {
  auto period = PeriodFrom(params);
  if (!period.ok()) return ErrorReply(period.status());
  auto format = FormatFrom(params);
  if (!format.ok()) return ErrorReply(format.status());
  auto r = ledger::Experiments(q.ledger, *period, ScopeOf(q.who), Param(params, "team"));
  if (!r.ok()) return ErrorReply(r.status());
  return {200, ContentType(*format), report::RenderExperiments(*r, *format)};
}

HttpReply JobsReply(const QueryContext& q, const QueryParams& params) {
  auto limit = CountParam(params, "limit", kMaxJobsPerPage, 1, kMaxJobsPerPage);
  if (!limit.ok()) return ErrorReply(limit.status());
  const std::string after = Param(params, "after");
  auto jobs = q.ledger.Jobs();
  if (!jobs.ok()) return ErrorReply(jobs.status());
  std::vector<const Job*> visible;
  for (const auto& j : *jobs) {
    if (q.who.MaySeeTeam(j.team) && j.id > after) visible.push_back(&j);
  }
  // Pages in job id order: `next` is the cursor (`after=`) of the next page, when there is one.
  auto by_id = [](const Job* a, const Job* b) { return a->id < b->id; };
  auto n = static_cast<size_t>(*limit);
  bool more = visible.size() > n;
  if (more) {
    std::nth_element(visible.begin(), visible.begin() + static_cast<std::ptrdiff_t>(n), visible.end(), by_id);
    visible.resize(n);
  }
  std::sort(visible.begin(), visible.end(), by_id);
  json list = json::array();
  for (const Job* j : visible) list.push_back(JobJson(*j));
  json out = {{"jobs", list}};
  out["next"] = more ? json(visible.back()->id) : json(nullptr);
  return JsonReply(out);
}

// The job `job_id` if the principal may see it. Another team's job answers exactly as
// an unknown one: its existence is not told.
Result<Job> VisibleJob(const QueryContext& q, const std::string& job_id) {
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, q.ledger.Jobs());
  for (auto& j : jobs) {
    if (j.id == job_id && q.who.MaySeeTeam(j.team)) return std::move(j);
  }
  return NotFound("no such job (or not one this token may see)");
}

HttpReply JobReply(const QueryContext& q, const std::string& job_id) {
  auto found = VisibleJob(q, job_id);
  if (!found.ok()) return ErrorReply(found.status());
  auto allocs = q.ledger.AllocationsOf(job_id);
  if (!allocs.ok()) return ErrorReply(allocs.status());
  json timeline = json::array();
  int64_t begin = kForever, end = 0;
  for (const auto& a : *allocs) {
    json o = {{"device", a.device_uuid}, {"from", FormatTime(a.from_ms)}};
    o["to"] = a.to_ms ? json(FormatTime(*a.to_ms)) : json(nullptr);
    timeline.push_back(std::move(o));
    begin = std::min(begin, a.from_ms);
    end = std::max(end, a.to_ms.value_or(q.now_ms));
  }
  auto changed = q.ledger.JobChanges(job_id);
  if (!changed.ok()) return ErrorReply(changed.status());
  json changes = json::array();
  for (const store::JobChange& c : *changed) {
    changes.push_back({{"at", FormatTime(c.at_ms)}, {"batch_id", c.batch_id}, {"sender", c.sender},
                       {"field", c.field}, {"from", c.old_value}, {"to", c.new_value}});
  }
  json out = {{"job", JobJson(*found)}, {"allocations", timeline}, {"changes", changes}};
  report::AddCurrencyJson(out, q.ledger.options().currency);
  if (begin < end) {
    auto r = q.ledger.Usage({begin, end}, {ledger::Dimension::kJob, ledger::Dimension::kDevice});
    if (!r.ok()) return ErrorReply(r.status());
    json per_device = json::array();
    ledger::UsageRow total;
    for (const ledger::UsageRow& row : r->rows) {
      if (row.no_job || row.key[0] != job_id) continue;
      json buckets = json::object();
      json cost = json::object();
      for (Bucket b : kAllBuckets) {
        buckets[std::string(BucketName(b))] = row.gpu_hours(b);
        cost[std::string(BucketName(b))] = row.cost[static_cast<size_t>(b)].ToString();
      }
      per_device.push_back({{"device", row.key[1]}, {"gpu_hours", buckets}, {"cost", cost}});
      total.Add(row);
    }
    json buckets = json::object(), cost = json::object();
    for (Bucket b : kAllBuckets) {
      buckets[std::string(BucketName(b))] = total.gpu_hours(b);
      cost[std::string(BucketName(b))] = total.cost[static_cast<size_t>(b)].ToString();
    }
    out["window"] = {{"from", FormatTime(begin)}, {"to", FormatTime(end)}};
    out["devices"] = per_device;
    out["gpu_hours"] = buckets;
    out["cost"] = cost;
    out["total_cost"] = total.total_cost().ToString();
    out["allocated_efficiency"] = total.allocated_efficiency();
    json causes = json::object();
    for (IdleCause c : kAllIdleCauses) {
      causes[std::string(IdleCauseName(c))] = {{"gpu_hours", total.idle_cause_gpu_hours(c)},
                                               {"cost", total.idle_cause_cost[static_cast<size_t>(c)].ToString()}};
    }
    out["idle_causes"] = causes;
    auto series = JobSeriesJson(q, job_id, {begin, end});
    if (!series.ok()) return ErrorReply(series.status());
    out["series"] = std::move(*series);
    auto activity = JobActivityJson(q, job_id, {begin, end});
    if (!activity.ok()) return ErrorReply(activity.status());
    out["activity"] = std::move(*activity);
  }
  return JsonReply(out);
}

HttpReply WasteReply(const QueryContext& q, const QueryParams& params) {
  QueryParams p = params;
  if (p.find("window") == p.end() && p.find("from") == p.end()) p["window"] = "7d";
  auto window = WindowFrom(p, q.now_ms, q.data_end_ms);
  if (!window.ok()) return ErrorReply(window.status());
  auto limit = CountParam(p, "limit", 10, 1, kMaxWasteItems);
  if (!limit.ok()) return ErrorReply(limit.status());
  auto r = q.ledger.TopWaste(*window, static_cast<size_t>(*limit));
  if (!r.ok()) return ErrorReply(r.status());
  json list = json::array();
  for (const auto& w : *r) {
    json o = {{"what", w.what}, {"bucket", BucketName(w.bucket)}, {"gpu_hours", w.gpu_hours}, {"cost", w.cost.ToString()}};
    if (w.bucket == Bucket::kAllocatedIdle) {
      json causes = json::object();
      for (IdleCause c : kAllIdleCauses) {
        causes[std::string(IdleCauseName(c))] = w.idle_cause_cost[static_cast<size_t>(c)].ToString();
      }
      o["idle_causes"] = causes;
    }
    list.push_back(std::move(o));
  }
  json out = {{"window", {{"from", FormatTime(window->begin_ms)}, {"to", FormatTime(window->end_ms)}}},
              {"waste", list}};
  report::AddCurrencyJson(out, q.ledger.options().currency);
  return JsonReply(out);
}

HttpReply RecommendationsReply(const QueryContext& q, const QueryParams& params) {
  QueryParams with_default = params;
  if (!params.count("window") && !params.count("from")) with_default["window"] = "30d";
  auto window = WindowFrom(with_default, q.now_ms, q.data_end_ms);
  if (!window.ok()) return ErrorReply(window.status());
  std::string team = Param(params, "team");
  if (!team.empty() && !q.who.MaySeeTeam(team)) {
    return ErrorReply(NotFound("no such team (or not one this token may see)"));
  }
  auto recs = ledger::Recommend(q.ledger, *window, team);
  if (!recs.ok()) return ErrorReply(recs.status());
  std::erase_if(*recs, [&](const ledger::Recommendation& r) { return !q.who.MaySeeTeam(r.team); });
  return {200, "application/json", report::RecommendationsJson(*recs, *window)};
}

HttpReply JobMfuReply(const QueryContext& q, const std::string& job_id, const QueryParams& params) {
  auto found = VisibleJob(q, job_id);
  if (!found.ok()) return ErrorReply(found.status());
  QueryParams with_default = params;
  if (!params.count("window") && !params.count("from")) with_default["window"] = "7d";
  auto window = WindowFrom(with_default, q.now_ms, q.data_end_ms);
  if (!window.ok()) return ErrorReply(window.status());
  auto recompute = ledger::ParseRecompute(Param(params, "recompute"));
  if (!recompute.ok()) return ErrorReply(recompute.status());
  auto e = ledger::JobMfu(q.ledger, job_id, *window, *recompute);
  if (!e.ok()) return ErrorReply(e.status());
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return JsonReply({{"job", job_id},
                    {"window", {{"from", FormatTime(window->begin_ms)}, {"to", FormatTime(window->end_ms)}}},
                    {"gpu_hours", e->gpu_hours},
                    {"mfu", opt(e->mfu)},
                    {"achieved_flops", opt(e->achieved_flops)},
                    {"basis", e->basis},
                    {"recompute", std::string(ledger::RecomputeName(e->recompute))},
                    {"hfu", opt(e->hfu)},
                    {"hfu_note", "hardware FLOPs utilization: counts the recomputed activations; not MFU"},
                    {"hardware_estimate", opt(e->hardware_estimate)},
                    {"hardware_estimate_note", "tensor-pipe activity x peak: an estimate, not MFU"}});
}

HttpReply JobServingReply(const QueryContext& q, const std::string& job_id,
                          const QueryParams& params) {
  auto found = VisibleJob(q, job_id);
  if (!found.ok()) return ErrorReply(found.status());
  QueryParams with_default = params;
  if (!params.count("window") && !params.count("from")) with_default["window"] = "24h";
  auto window = WindowFrom(with_default, q.now_ms, q.data_end_ms);
  if (!window.ok()) return ErrorReply(window.status());
  auto reports = ledger::JobServing(q.ledger, job_id, *window);
  if (!reports.ok()) return ErrorReply(reports.status());
  return {200, "application/json", report::ServingJson(job_id, *reports)};
}

Result<Goals> ReportGoals(const QueryContext& q, const QueryParams& params) {
  Goals goals = q.goals != nullptr ? *q.goals : Goals{};
  std::string target = Param(params, "target");
  if (!target.empty()) {
    char* end = nullptr;
    double v = std::strtod(target.c_str(), &end);
    if (end == target.c_str() || *end != '\0' || !(v >= 0 && v <= 1)) {
      return InvalidArgument(fmt::format("target \"{}\": want a ratio in 0..1", target));
    }
    goals.fleet_target = v;
    goals.fleet_target_source = "the request's target parameter";
  }
  return goals;
}

HttpReply WeeklyReportReply(const QueryContext& q, const QueryParams& params,
                            const std::vector<ObjectiveSpec>& objectives) {
  std::string week_name = Param(params, "week", IsoWeekOf(q.now_ms - 7 * kMsPerDay));
  auto week = ParseIsoWeek(week_name);
  if (!week.ok()) return ErrorReply(week.status().WithContext("week"));
  report::WeeklyOptions options;
  auto goals = ReportGoals(q, params);
  if (!goals.ok()) return ErrorReply(goals.status());
  options.goals = *goals;
  options.objectives = objectives;
  auto html = report::RenderWeeklyReport(q.ledger, *week, options);
  if (!html.ok()) return ErrorReply(html.status());
  return {200, "text/html; charset=utf-8", *html};
}

}  // namespace gpuledger::server
