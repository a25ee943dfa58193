#include "ledger/actions.h"

#include <fmt/format.h>

#include <array>
#include <algorithm>
#include <string_view>

#include "core/objective.h"
#include "ledger/store_access.h"
#include "store/actions.h"

namespace gpuledger::ledger {
namespace {

constexpr std::array<std::string_view, 4> kOutcomes = {"proposed", "taken", "warned", "skipped"};

Status CheckAction(const RecordedAction& a, size_t i) {
  auto bad = [&](std::string_view field, std::string_view why) {
    return InvalidArgument(fmt::format("action {} (decision {:?}): {} {}", i, a.decision_id, field, why));
  };
  if (a.decision_id.empty()) return bad("decision_id", "is empty");
  if (a.rule.empty()) return bad("rule", "is empty");
  if (a.job.empty()) return bad("job", "is empty");
  if (auto parsed = ParseInterventionAction(a.action); !parsed.ok()) {
    return bad("action", fmt::format("is unknown ({})", parsed.status().message()));
  }
  if (std::find(kOutcomes.begin(), kOutcomes.end(), a.outcome) == kOutcomes.end()) {
    return bad("outcome", fmt::format("{:?} is none of proposed, taken, warned, skipped", a.outcome));
  }
  if (a.per_hour_freed.micros() < 0) return bad("per_hour_freed", "is negative");
  return Status::Ok();
}

RecordedAction FromRecord(store::ActionRecord&& r) {
  return RecordedAction{.decision_id = std::move(r.decision_id), .at_ms = r.at_ms, .rule = std::move(r.rule),
                        .job = std::move(r.job_key), .team = std::move(r.team), .action = std::move(r.action),
                        .outcome = std::move(r.outcome), .enforce = r.enforce, .evidence = std::move(r.evidence),
                        .reason = std::move(r.reason), .result = std::move(r.result),
                        .per_hour_freed = Money::FromMicros(r.per_hour_freed_micros)};
}

}  // namespace

Result<size_t> RecordActions(Ledger& ledger, const std::vector<RecordedAction>& actions) {
  std::vector<store::ActionRecord> rows;
  rows.reserve(actions.size());
  for (size_t i = 0; i < actions.size(); ++i) {
    const RecordedAction& a = actions[i];
    GPULEDGER_RETURN_IF_ERROR(CheckAction(a, i));
    rows.push_back(store::ActionRecord{.decision_id = a.decision_id, .at_ms = a.at_ms, .rule = a.rule,
                                       .job_key = a.job, .team = a.team, .action = a.action, .outcome = a.outcome,
                                       .enforce = a.enforce, .evidence = a.evidence, .reason = a.reason,
                                       .result = a.result, .per_hour_freed_micros = a.per_hour_freed.micros()});
  }
  if (rows.empty()) return size_t{0};
  GPULEDGER_ASSIGN_OR_RETURN(store::ActionLog * log, store::ActionLogOf(internal_StoreOf(ledger)));
  return log->RecordActions(rows);
}

Result<std::vector<RecordedAction>> Actions(Ledger& ledger, const ActionQuery& query) {
  GPULEDGER_ASSIGN_OR_RETURN(store::ActionLog * log, store::ActionLogOf(internal_StoreOf(ledger)));
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<store::ActionRecord> rows, log->ActionsIn(query.range));
  std::vector<RecordedAction> out;
  for (store::ActionRecord& r : rows) {
    if (query.teams && !query.teams->contains(r.team)) continue;
    if (!query.rule.empty() && r.rule != query.rule) continue;
    if (!query.outcome.empty() && r.outcome != query.outcome) continue;
    out.push_back(FromRecord(std::move(r)));
  }
  return out;
}

Result<ActionPage> ActionsPage(Ledger& ledger, const ActionQuery& query, const std::string& after, int64_t limit) {
  if (limit < 1 || limit > kMaxActionsPage) {
    return InvalidArgument(fmt::format("limit {}: want a whole number within 1..{}", limit, kMaxActionsPage));
  }
  store::ActionSelection selection{.range = query.range, .rule = query.rule, .outcome = query.outcome,
                                   .limit = limit + 1};  // one more tells whether a next page exists
  if (query.teams) selection.teams = std::vector<std::string>(query.teams->begin(), query.teams->end());
  if (!after.empty()) {
    // "AT_MS:DECISION_ID", as `next` writes it.
    size_t colon = after.find(':');
    std::string_view at = std::string_view(after).substr(0, colon);
    bool digits = colon != std::string::npos && !at.empty() && at.size() <= 18 &&
                  at.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits || colon + 1 == after.size()) {
      return InvalidArgument(fmt::format("after \"{}\": not a cursor a page gave (want the `next` of the previous page)",
                                         after.substr(0, 80)));
    }
    selection.after = std::make_pair(std::stoll(std::string(at)), after.substr(colon + 1));
  }
  GPULEDGER_ASSIGN_OR_RETURN(store::ActionLog * log, store::ActionLogOf(internal_StoreOf(ledger)));
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<store::ActionRecord> rows, log->SelectActions(selection));
  ActionPage page;
  bool more = static_cast<int64_t>(rows.size()) > limit;
  if (more) rows.resize(static_cast<size_t>(limit));
  for (store::ActionRecord& r : rows) page.actions.push_back(FromRecord(std::move(r)));
  if (more) page.next = fmt::format("{}:{}", page.actions.back().at_ms, page.actions.back().decision_id);
  return page;
}

ActionTotals TotalActions(const std::vector<RecordedAction>& actions) {
  ActionTotals t;
  for (const RecordedAction& a : actions) {
    if (a.outcome == "taken") {
      ++t.taken;
      t.freed_per_hour += a.per_hour_freed;
    } else if (a.outcome == "proposed") {
      ++t.proposed;
      t.proposed_per_hour += a.per_hour_freed;
    } else if (a.outcome == "warned") {
      ++t.warned;
    } else {
      ++t.skipped;
    }
  }
  return t;
}

Result<Lease> HoldLease(Ledger& ledger, const std::string& name, const std::string& holder, int64_t now_ms,
                        int64_t ttl_ms) {
  if (name.empty() || holder.empty()) return InvalidArgument("a lease needs a name and a holder");
  if (ttl_ms <= 0) return InvalidArgument(fmt::format("lease {}: ttl {} ms, want more than 0", name, ttl_ms));
  GPULEDGER_ASSIGN_OR_RETURN(store::ActionLog * log, store::ActionLogOf(internal_StoreOf(ledger)));
  GPULEDGER_ASSIGN_OR_RETURN(store::Lease l, log->HoldLease(name, holder, now_ms, ttl_ms));
  return Lease{.holder = std::move(l.holder), .expires_ms = l.expires_ms};
}

Status ReleaseLease(Ledger& ledger, const std::string& name, const std::string& holder) {
  GPULEDGER_ASSIGN_OR_RETURN(store::ActionLog * log, store::ActionLogOf(internal_StoreOf(ledger)));
  return log->ReleaseLease(name, holder);
}

}  // namespace gpuledger::ledger
