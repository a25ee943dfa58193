#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"

namespace gpuledger::cli {

void AddCommonOptions(CLI::App& sub, CommonOptions& common) {
  sub.add_option("--config", common.config_path, "TOML configuration file")
      ->check(CLI::ExistingFile);
  sub.add_option("--db", common.db_path,
                 "the embedded store (default: $GPULEDGER_DB or ~/.local/share/gpuledger/ledger.db)");
}

Result<TimeRange> LastWholeHours(const std::string& window, const Clock& clock) {
  GPULEDGER_ASSIGN_OR_RETURN(int64_t length, ParseDuration(window));
  return ledger::TrailingWindow(clock.NowMs(), length);
}

int Fail(const Status& status) {
  std::fprintf(stderr, "gpuledger: %s\n", status.message().c_str());
  return 1;
}

}  // namespace gpuledger::cli
