// The JSON query API's handlers, free of HTTP types: each takes the request's query
// parameters and the authenticated principal and returns the reply. server.cc routes to
// them (each query reads its own snapshot: no lock of the server's). Internal to the server library.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>

#include "actuators/actuators.h"
#include "core/goals.h"
#include "core/objective.h"
#include "core/quota.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/auth.h"
#include "server/query_limits.h"

namespace gpuledger::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type
};

using QueryParams = std::map<std::string, std::string>;

// The HTTP status for a failed Status, and a JSON body {"error": code, "message": ...}.
int HttpStatusFor(StatusCode code);
HttpReply ErrorReply(const Status& status);
HttpReply ErrorReply(int http_status, std::string_view code, std::string_view message);

// The query parameter `key`, or `fallback` when absent.
std::string Param(const QueryParams& p, const std::string& key, std::string fallback = {});
// The query parameter `key` as a whole number within min..max, or `fallback` when absent;
// anything else ("-1", "5abc", "") is refused naming the parameter.
Result<int64_t> CountParam(const QueryParams& p, const std::string& key, int64_t fallback, int64_t min,
                           int64_t max);
// The most items /waste answers with.
inline constexpr int64_t kMaxWasteItems = 1'000;
// The window a query names: window=7d (whole hours ending where the data ends:
// ledger::TrailingWindow), or from= and to= (RFC 3339; to defaults to now). The ledger
// then cuts every window where the data ends.
Result<TimeRange> WindowFrom(const QueryParams& p, int64_t now_ms, int64_t data_end_ms);

// What a principal may see, as the ledger scopes it: an admin every team, a viewer its own.
ledger::Scope ScopeOf(const Principal& who);

struct QueryContext {
  ledger::Ledger& ledger;
  const Principal& who;
  int64_t now_ms = 0;
  int64_t staleness_override_ms = 0;
  const Goals* goals = nullptr;  // never null when routed by the server
  int64_t refresh_ms = 30'000;   // the dashboard's refresh interval
  int64_t data_end_ms = 0;       // Ledger::Data().end_ms when the request began; 0: none
  int64_t data_first_ms = 0;     // Ledger::Data().first_ms when the request began; 0: none
  const QueryLimits* limits = nullptr;  // the server's; null: the defaults
  const std::vector<QuotaSpec>* quotas = nullptr;  // the server's; null: none
};

// GET /api/v1/fleet: every GPU and slice, its holders, last activity and health.
HttpReply FleetReply(const QueryContext& q);
// GET /api/v1/usage?window=7d | from=&to=, by=team,project, format=json|csv|table.
HttpReply UsageReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/chargeback?period=YYYY-MM, share_idle=true, format=json|csv|table.
HttpReply ChargebackReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/focus?period=YYYY-MM: the month's FOCUS 1.2 CSV (report/focus.h), a viewer's
// teams' rows only.
HttpReply FocusReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/experiments?period=YYYY-MM, team=T, format=json|csv|table: cost per
// experiment per team (ledger::Experiments), a viewer's teams only.
HttpReply ExperimentsReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/jobs: the jobs the principal may see.
// GET /api/v1/jobs: `limit` (1..5000, default 5000) jobs in id order after `after`; `next`.
HttpReply JobsReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/periods: the closed billing periods. POST /api/v1/periods/{month}/close:
// closes one (admin), freezing its chargeback (ledger::Ledger::ClosePeriod).
HttpReply PeriodsReply(const QueryContext& q);
HttpReply ClosePeriodReply(const QueryContext& q, const std::string& month);
// GET /api/v1/jobs/{id}: one job, its allocations (the timeline), buckets and cost.
HttpReply JobReply(const QueryContext& q, const std::string& job_id);
// GET /api/v1/recommendations?window=30d&team=T: right-sizing advice for the jobs the
// principal may see.
HttpReply RecommendationsReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/jobs/{id}/mfu?window=7d: MFU from the job's progress reports, or the
// labelled hardware estimate.
HttpReply JobMfuReply(const QueryContext& q, const std::string& job_id, const QueryParams& params);
// GET /api/v1/jobs/{id}/serving?window=24h: the serving job's engine pressure.
HttpReply JobServingReply(const QueryContext& q, const std::string& job_id,
                          const QueryParams& params);
// GET /api/v1/reports/weekly?week=2026-W48&target=0.6 (admin): the weekly HTML report.
// `objectives`: the config's, for the report's SLO section (report::WeeklyOptions).
HttpReply WeeklyReportReply(const QueryContext& q, const QueryParams& params,
                            const std::vector<ObjectiveSpec>& objectives = {});
// The goals a report request is judged against: the server's, with `target` (a ratio in
// 0..1) as the fleet's target when given; a bad one is refused naming it.
Result<Goals> ReportGoals(const QueryContext& q, const QueryParams& params);
class WhatIfService;  // server/whatif_api.h
// GET /api/v1/reports/monthly?month=2026-11 (default: the month the data end in)&target=0.6
// (admin): the monthly review's
// HTML (report::RenderMonthlyReport), judged against the server's objectives and quotas;
// its what-if section replayed by `what_if` (none: the section says it was not run).
HttpReply MonthlyReportReply(const QueryContext& q, const QueryParams& params,
                             const std::vector<ObjectiveSpec>& objectives, WhatIfService* what_if);
// GET /api/v1/info: the server's time, the caller's role and teams, the span of the
// recorded data, targets, the caller's teams' budgets, the dashboard's refresh.
HttpReply InfoReply(const QueryContext& q);
// GET /api/v1/series?window=7d | from=&to=, by=pool, step=1h: the buckets per step, per
// group and for the fleet, in GPU-hours and money, with effective utilization and the
// target. Adds up to /api/v1/usage for the same window and grouping.
HttpReply SeriesReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/heatmap?window=7d | from=&to=, step=1h: every GPU and slice's effective
// utilization per step (a viewer: its own jobs' activity on the devices they held).
HttpReply HeatmapReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/budgets?period=YYYY-MM (default: this month): each budgeted team's spend
// to date, burn and projection.
HttpReply BudgetsReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/quotas?period=2026-11|2026-Q4 (default: the period the data ends in): each
// quota the caller may see (a viewer: its teams' team quotas), judged by
// ledger::JudgeQuotas, as report::QuotasJson writes it. A bad period is 400.
HttpReply QuotasReply(const QueryContext& q, const QueryParams& params);
// GET /api/v1/quotas/drift?refresh=1 (admin): each hard quota's Slurm account limit against
// what Slurm enforces, read with `sacctmgr` through `slurm` (single flight, reused for
// SlurmLimitsCache::kDefaultTtlMs unless an admin asks refresh=1; never pushing):
// {"drift": bool, "read_at", "accounts": [{"account", "quota_gpu_minutes",
// "slurm_gpu_minutes", "state", "source"}], "left_out": [...]}. A viewer sees its teams'
// accounts and no left_out; its refresh=1 is 403. 501 when `slurm` is null; sacctmgr
// failing is 503.
class SlurmLimitsCache;  // server/slurm_limits_cache.h
HttpReply QuotaDriftReply(const QueryContext& q, SlurmLimitsCache* slurm, const QueryParams& params);
// A job's hourly series over `span` (its life, clipped to its last 30 days, and to its
// latest hours that fit the query budget on a fleet too large for 30 days):
// {"from","to","step_seconds","times","gpu_hours","cost","effective_utilization",...}.
Result<nlohmann::json> JobSeriesJson(const QueryContext& q, const std::string& job_id, const TimeRange& span);
// A job's activity finer than the hour over `life` up to the data end: steps of 1, 2, 5,
// 10, 15 or 30 minutes, the finest that draws it in 360 steps (a longer life: its latest 360),
// from the raw samples of the job's own GPUs (ledger::JobActivityOf), at most
// QueryLimits::max_job_sample_device_hours of them (its latest steps that fit):
// {"from","to","requested","step_seconds","times","gpu_hours":{"active","allocated_idle"},
//  "allocated_efficiency","device_hours_read"}.
Result<nlohmann::json> JobActivityJson(const QueryContext& q, const std::string& job_id, const TimeRange& life);
// GET /api/v1/waste?window=7d&limit=10 (admin): the largest sources of waste.
HttpReply WasteReply(const QueryContext& q, const QueryParams& params);

}  // namespace gpuledger::server
