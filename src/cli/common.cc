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

int Fail(const Status& status) {
  std::fprintf(stderr, "gpuledger: %s\n", status.message().c_str());
  return 1;
}

}  // namespace gpuledger::cli
