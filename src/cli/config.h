// The TOML configuration file and the options every command shares. Flags override
// the file's keys; docs/configuration.md lists them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/goals.h"
#include "core/price_book.h"
#include "core/status.h"
#include "ledger/ledger.h"

namespace gpuledger::cli {

struct Config {
  std::string db_path;  // empty: the default in the user's data directory
  ledger::LedgerOptions ledger;
  int64_t raw_retention_ms = 0;  // 0: keep raw samples forever
  std::optional<std::vector<PriceEntry>> prices;
  Goals goals;  // [targets] and [budgets]
};

// Reads a TOML config. Errors name the file, line and key.
Result<Config> LoadConfig(const std::string& path);

// Parses a price list in the config's [[price]] format from a TOML file.
Result<std::vector<PriceEntry>> LoadPriceFile(const std::string& path);

// $GPULEDGER_DB, else $XDG_DATA_HOME/gpuledger/ledger.db, else
// ~/.local/share/gpuledger/ledger.db.
std::string DefaultDbPath();

// Options every command shares, filled by CLI11 before the command runs.
struct CommonOptions {
  std::string config_path;
  std::string db_path;
};

// Loads the config (if any), lets `--db` override it, opens the store (creating its
// folder) and applies the config's price book. The clock is the system's.
// `store_options` chooses the store's durability (the server asks for FULL).
Result<std::unique_ptr<ledger::Ledger>> OpenLedger(const CommonOptions& common, const Clock& clock,
                                                   Config* config_out = nullptr,
                                                   const store::SqliteOptions& store_options = {});

}  // namespace gpuledger::cli
