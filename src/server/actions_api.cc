#include "server/actions_api.h"

#include <fmt/format.h>

#include <set>

#include "ledger/actions.h"
#include "report/actions_format.h"

namespace gpuledger::server {

HttpReply ActionsReply(const QueryContext& q, const QueryParams& params) {
  auto format = report::ParseFormat(Param(params, "format", "json"));
  if (!format.ok()) return ErrorReply(format.status().WithContext("format"));
  ledger::ActionQuery query{.rule = Param(params, "rule"), .outcome = Param(params, "outcome")};
  if (!query.outcome.empty() && query.outcome != "proposed" && query.outcome != "taken" && query.outcome != "warned" &&
      query.outcome != "skipped") {
    return ErrorReply(InvalidArgument(
        fmt::format("outcome \"{}\": want one of proposed, taken, warned, skipped", query.outcome)));
  }
  if (Param(params, "from").empty() && Param(params, "to").empty()) {
    auto length = ParseDuration(Param(params, "window", "7d"));
    if (!length.ok()) return ErrorReply(length.status().WithContext("window"));
    int64_t end = (q.data_end_ms > 0 ? std::min(q.now_ms, q.data_end_ms) : q.now_ms) + 1;
    query.range = {end - *length, end};
  } else {
    auto window = WindowFrom(params, q.now_ms, q.data_end_ms);
    if (!window.ok()) return ErrorReply(window.status());
    // Both ends included: the loop decides at the data's end, where a window ends.
    query.range = {window->begin_ms, window->end_ms + 1};
  }
  if (q.who.role != Role::kAdmin) query.teams = std::set<std::string>(q.who.teams.begin(), q.who.teams.end());
  auto actions = ledger::Actions(q.ledger, query);
  if (!actions.ok()) return ErrorReply(actions.status());
  auto prices = q.ledger.Prices();
  if (!prices.ok()) return ErrorReply(prices.status());
  std::string body = report::RenderActions(*actions, query.range, *format, prices->currency());
  const char* type = *format == report::Format::kJson  ? "application/json"
                     : *format == report::Format::kCsv ? "text/csv; charset=utf-8"
                                                       : "text/plain; charset=utf-8";
  return {200, type, std::move(body)};
}

}  // namespace gpuledger::server
