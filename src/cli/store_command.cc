#include <fmt/format.h>

#include <chrono>

#include "cli/commands.h"
#include "store/copy.h"
#include "store/pg_store.h"

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

  struct CopyOpts {
    std::string to, to_file;
  };
  auto copy_opts = std::make_shared<CopyOpts>();
  CLI::App* copy = store->add_subcommand(
      "copy", "Copy this SQLite store into an empty PostgreSQL database, for several servers on it "
              "(docs/deploy.md): every row in one transaction, or nothing; stop the server first");
  AddCommonOptions(*copy, common);
  copy->add_option("--to", copy_opts->to, "the database: a postgresql:// URL");
  copy->add_option("--to-file", copy_opts->to_file,
                   "read the database's URL from this file, so that a password is not on the command line")
      ->excludes(copy->get_option("--to"));
  out.push_back({copy, [copy_opts, &common]() -> int {
                   std::string to = copy_opts->to;
                   if (!copy_opts->to_file.empty()) {
                     auto url = ReadSecretFile(copy_opts->to_file, "--to-file");
                     if (!url.ok()) return Fail(url.status());
                     to = std::move(*url);
                   }
                   if (to.empty()) return Fail(InvalidArgument("store copy: say where to, with --to or --to-file"));
                   auto config = LoadCommonConfig(common);
                   if (!config.ok()) return Fail(config.status());
                   const std::string from = StorePath(common, *config);
                   const std::string shown = store::StoreDisplayName(to);
                   std::printf("copying %s into %s\n", from.c_str(), shown.c_str());
                   std::fflush(stdout);
                   auto start = std::chrono::steady_clock::now();
                   auto last = start;
                   int64_t total = 0;
                   auto copied = store::CopySqliteIntoPostgres(from, to, [&](const store::CopiedTable& t) {
                     auto now = std::chrono::steady_clock::now();
                     std::printf("  %-20s %12lld rows  %7.1f s\n", t.name.c_str(), static_cast<long long>(t.rows),
                                 std::chrono::duration<double>(now - last).count());
                     std::fflush(stdout);
                     last = now;
                     total += t.rows;
                   });
                   if (!copied.ok()) return Fail(copied.status().WithContext("store copy: nothing was copied"));
                   std::printf("copied %lld rows of %zu tables in %.1f s; point the servers at %s ([store] url)\n",
                               static_cast<long long>(total), copied->size(),
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                               shown.c_str());
                   return 0;
                 }});
}

void AddPeriodCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  CLI::App* period = app.add_subcommand(
      "period", "Billing periods: close a month to freeze its chargeback; later changes to it are "
                "booked as corrections in the first open month");
  period->require_subcommand(1);
  auto month = std::make_shared<std::string>();
  auto by = std::make_shared<std::string>("local");
  CLI::App* close = period->add_subcommand("close", "Close a month (YYYY-MM) that is over; months close in order");
  AddCommonOptions(*close, common);
  close->add_option("month", *month, "the month, e.g. 2026-11")->required();
  close->add_option("--by", *by, "who closes it (recorded with the period)")->capture_default_str();
  out.push_back({close, [month, by, &common]() -> int {
                   SystemClock clock;
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto closed = (*ledger)->ClosePeriod(*month, *by);
                   if (!closed.ok()) return Fail(closed.status());
                   std::printf("closed %s at %s by %s: `chargeback --period %s` answers as it does now\n",
                               closed->month.c_str(), FormatTime(closed->closed_at_ms).c_str(),
                               closed->closed_by.c_str(), closed->month.c_str());
                   return 0;
                 }});
  CLI::App* list = period->add_subcommand("list", "The closed months");
  AddCommonOptions(*list, common);
  out.push_back({list, [&common]() -> int {
                   SystemClock clock;
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto closed = (*ledger)->ClosedPeriods();
                   if (!closed.ok()) return Fail(closed.status());
                   if (closed->empty()) std::printf("no billing period is closed\n");
                   for (const auto& p : *closed) {
                     std::printf("%s  closed %s by %s\n", p.month.c_str(), FormatTime(p.closed_at_ms).c_str(),
                                 p.closed_by.c_str());
                   }
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
