#include <fmt/format.h>

#include "cli/commands.h"
#include "report/usage_format.h"

namespace gpuledger::cli {

void AddPricesCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  auto file = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "prices", "Show the price book, or replace it with the [[price]] tables of a TOML file");
  AddCommonOptions(*sub, common);
  sub->add_option("--set", *file, "TOML file with [[price]] tables")->check(CLI::ExistingFile);
  out.push_back({sub, [file, &common]() -> int {
                   SystemClock clock;
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   if (!file->empty()) {
                     auto entries = config::LoadPriceFile(*file);
                     if (!entries.ok()) return Fail(entries.status());
                     auto book = PriceBook::Create(*entries);
                     if (!book.ok()) return Fail(book.status());
                     Status st = (*ledger)->SetPrices(*book);
                     if (!st.ok()) return Fail(st);
                   }
                   auto book = (*ledger)->Prices();
                   if (!book.ok()) return Fail(book.status());
                   std::printf("Prices per GPU-hour, %s\n", report::CurrencyNote(book->currency()).c_str());
                   std::printf("%-28s %-12s %-10s %14s  %-22s %s\n", "model", "pool", "type",
                               "per GPU-hour", "from", "to");
                   for (const PriceEntry& e : book->entries()) {
                     std::printf("%-28s %-12s %-10s %14s  %-22s %s\n", e.model.c_str(),
                                 e.pool.c_str(), std::string(CapacityTypeName(e.capacity_type)).c_str(),
                                 e.per_gpu_hour.ToString().c_str(),
                                 e.valid.begin_ms ? FormatTime(e.valid.begin_ms).c_str() : "-",
                                 e.valid.end_ms < kForever ? FormatTime(e.valid.end_ms).c_str() : "-");
                   }
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
