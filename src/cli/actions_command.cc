// `gpuledger actions`: the interventions' audit log (ledger/actions.h) as a table, JSON
// or CSV (report::RenderActions). Rendering only: the decisions are the ledger's.
#include <fmt/format.h>

#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "ledger/actions.h"
#include "report/actions_format.h"

namespace gpuledger::cli {
namespace {

struct ActionsOpts {
  WindowOptions window;
  std::string rule, outcome, format = "table";
  std::vector<std::string> teams;
  int64_t limit = ledger::kDefaultActionsPage;
  std::string after;
};

int Actions(const CommonOptions& common, const ActionsOpts& o) {
  SystemClock clock;
  auto format = report::ParseFormat(o.format);
  if (!format.ok()) return Fail(format.status().WithContext("--format"));
  auto ledger = OpenLedger(common, clock);
  if (!ledger.ok()) return Fail(ledger.status());
  auto window = ResolveWindow(o.window, ledger->get(), clock);
  if (!window.ok()) return Fail(window.status());
  ledger::ActionQuery query{.range = *window, .rule = o.rule, .outcome = o.outcome};
  // Without --to, up to the latest decision (the loop decides where the data ends, which a
  // trailing window's whole hours may leave out).
  if (o.window.to.empty()) query.range.end_ms = kForever;
  if (!o.teams.empty()) query.teams = std::set<std::string>(o.teams.begin(), o.teams.end());
  auto page = ledger::ActionsPage(**ledger, query, o.after, o.limit);
  if (!page.ok()) return Fail(page.status().WithContext(o.limit < 1 || o.limit > ledger::kMaxActionsPage ? "--limit" : "--after"));
  auto prices = (*ledger)->Prices();
  if (!prices.ok()) return Fail(prices.status());
  std::string out = report::RenderActions(page->actions, *window, *format, prices->currency());
  std::fwrite(out.data(), 1, out.size(), stdout);
  // Standard error, so that the CSV or JSON on standard output stays whole.
  if (!page->next.empty()) {
    std::fprintf(stderr, "more decisions: the next page is --after '%s' (%zu shown, --limit %lld)\n", page->next.c_str(),
                 page->actions.size(), static_cast<long long>(o.limit));
  }
  return 0;
}

}  // namespace

void AddActionsCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  auto o = std::make_shared<ActionsOpts>();
  CLI::App* sub = app.add_subcommand(
      "actions", "The interventions' audit log: every decision of the [[intervention]] rules, taken or not, with its "
                 "evidence, result and the money per hour it frees");
  AddCommonOptions(*sub, common);
  AddWindowOptions(*sub, o->window, "7d");
  sub->add_option("--rule", o->rule, "only this rule's decisions");
  sub->add_option("--outcome", o->outcome, "only these: proposed, taken, warned or skipped")
      ->check(CLI::IsMember({"proposed", "taken", "warned", "skipped"}));
  sub->add_option("--team", o->teams, "only these teams' jobs (repeat for several)");
  sub->add_option("--format", o->format, "table, json or csv")->capture_default_str();
  sub->add_option("--limit", o->limit,
                  fmt::format("at most this many decisions, oldest first (1..{})", ledger::kMaxActionsPage))
      ->capture_default_str();
  sub->add_option("--after", o->after, "the page after this cursor (what the previous page named)");
  out.push_back({sub, [o, &common]() -> int { return Actions(common, *o); }});
}

}  // namespace gpuledger::cli
