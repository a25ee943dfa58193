// GET /api/v1/reports/monthly (server/api.h): the monthly review, rendered by the report
// library; the what-if section's replay is the server's injected one.
#include <fmt/format.h>

#include "report/monthly.h"
#include "server/api.h"
#include "server/whatif_api.h"

namespace gpuledger::server {

HttpReply MonthlyReportReply(const QueryContext& q, const QueryParams& params,
                             const std::vector<ObjectiveSpec>& objectives, WhatIfService* what_if) {
  // The default: the month the data end in (this month when there is none yet).
  std::string month_name =
      Param(params, "month", FormatTime(q.data_end_ms > 0 ? q.data_end_ms - 1 : q.now_ms).substr(0, 7));
  auto month = ParseMonth(month_name);
  if (!month.ok()) return ErrorReply(month.status().WithContext("month"));
  auto goals = ReportGoals(q, params);
  if (!goals.ok()) return ErrorReply(goals.status());
  report::MonthlyOptions options;
  options.goals = *goals;
  options.objectives = objectives;
  if (q.quotas != nullptr) options.quotas = *q.quotas;
  if (what_if != nullptr) options.what_if = [what_if](const Workload& w) { return what_if->Replay(w); };
  auto html = report::RenderMonthlyReport(q.ledger, *month, options);
  if (!html.ok()) return ErrorReply(html.status());
  return {200, "text/html; charset=utf-8", *html};
}

}  // namespace gpuledger::server
