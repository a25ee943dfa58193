#include <fmt/format.h>

#include <chrono>

#include "cli/commands.h"

namespace gpuledger::cli {

std::string StoreCheckText(const store::StoreCheck& check) {
  if (check.ok()) return "the store is sound";
  std::string out = fmt::format("the store is damaged: {} problem{}", check.problems.size(),
                                check.problems.size() == 1 ? "" : "s");
  if (!check.tables.empty()) out += fmt::format(" in {}", fmt::join(check.tables, ", "));
  for (const std::string& p : check.problems) out += "\n  " + p;
  return out;
}

void AddStoreCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  CLI::App* store = app.add_subcommand("store", "Look after the store itself");
  store->require_subcommand(1);
  auto quick = std::make_shared<bool>(false);
  CLI::App* check = store->add_subcommand(
      "check", "Check the store's integrity: every table and index (PRAGMA integrity_check), or "
               "with --quick the structure only, as `serve` does at start-up; exit 1 when damaged");
  AddCommonOptions(*check, common);
  check->add_flag("--quick", *quick, "the cheaper structural check (PRAGMA quick_check)");
  out.push_back({check, [quick, &common]() -> int {
                   SystemClock clock;
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto start = std::chrono::steady_clock::now();
                   auto result = (*ledger)->CheckStore(!*quick);
                   if (!result.ok()) return Fail(result.status());
                   double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                   std::printf("%s (%s check, %.1f s)\n", StoreCheckText(*result).c_str(), *quick ? "quick" : "full",
                               seconds);
                   return result->ok() ? 0 : 1;
                 }});
}

}  // namespace gpuledger::cli
