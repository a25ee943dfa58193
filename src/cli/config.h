// The options every command shares, and the wiring from gpuledger.toml (config::Load,
// docs/configuration.md) to the ledger: the store's path, the ledger's options, the price
// book. Flags override the file's keys.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "core/goals.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "store/store.h"

namespace gpuledger::cli {

using Config = config::Config;

// Options every command shares, filled by CLI11 before the command runs.
struct CommonOptions {
  std::string config_path;
  std::string db_path;
};

// Reads --config when one was given; else a Config whose every value is its default (and
// whose targets say so).
Result<Config> LoadCommonConfig(const CommonOptions& common);

// The [ledger] section over the ledger's defaults.
ledger::LedgerOptions LedgerOptionsFrom(const config::LedgerSection& section);

// $GPULEDGER_DB, else $XDG_DATA_HOME/gpuledger/ledger.db, else
// ~/.local/share/gpuledger/ledger.db.
std::string DefaultDbPath();

// The store a command opens: --db, else the config's db, else DefaultDbPath().
std::string StorePath(const CommonOptions& common, const Config& config);

// Loads the config (if any), lets `--db` override it, opens the store (creating its
// folder) and applies the config's price book and its currency ([prices]). The clock is the system's.
// `store_options` chooses the store's durability (the server asks for FULL).
Result<std::unique_ptr<ledger::Ledger>> OpenLedger(const CommonOptions& common, const Clock& clock,
                                                   Config* config_out = nullptr,
                                                   const store::SqliteOptions& store_options = {});

// Writes to stderr which targets a command judges by and where each was set
// (Goals::Describe), so that two commands that disagree show why.
void PrintTargets(const Goals& goals);

}  // namespace gpuledger::cli
