#include "server/actions_api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "ledger/actions.h"
#include "report/actions_format.h"
#include "server/pages.h"

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
  auto limit = CountParam(params, "limit", ledger::kDefaultActionsPage, 1, ledger::kMaxActionsPage);
  if (!limit.ok()) return ErrorReply(limit.status());
  auto page = ledger::ActionsPage(q.ledger, query, Param(params, "after"), *limit);
  if (!page.ok()) return ErrorReply(page.status());
  auto prices = q.ledger.Prices();
  if (!prices.ok()) return ErrorReply(prices.status());
  std::string body = report::RenderActions(page->actions, query.range, *format, prices->currency());
  const char* type = *format == report::Format::kJson  ? "application/json"
                     : *format == report::Format::kCsv ? "text/csv; charset=utf-8"
                                                       : "text/plain; charset=utf-8";
  if (*format == report::Format::kJson) {
    // The page's place: `next` is the cursor of the next page (after=), null on the last.
    nlohmann::json out = nlohmann::json::parse(body);
    out["limit"] = *limit;
    out["next"] = page->next.empty() ? nlohmann::json(nullptr) : nlohmann::json(page->next);
    body = out.dump(2) + "\n";
  }
  HttpReply reply{200, type, std::move(body)};
  // Every format carries the cursor in a header too (CSV and text have no place for it).
  if (!page->next.empty()) reply.headers.emplace_back(std::string(kNextPageHeader), page->next);
  return reply;
}

}  // namespace gpuledger::server
