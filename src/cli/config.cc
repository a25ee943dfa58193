#include "cli/config.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "store/pg_store.h"

namespace gpuledger::cli {

Result<Config> LoadCommonConfig(const CommonOptions& common) {
  if (common.config_path.empty()) return Config{};
  return config::Load(common.config_path);
}

ledger::LedgerOptions LedgerOptionsFrom(const config::LedgerSection& section) {
  ledger::LedgerOptions options;
  config::Overlay(section.staleness_limit_ms, options.staleness_override_ms);
  config::Overlay(section.max_future_skew_ms, options.max_future_skew_ms);
  config::Overlay(section.retire_after_ms, options.retire_after_ms);
  config::Overlay(section.raw_retention_ms, options.raw_retention_ms);
  return options;
}

std::string StorePath(const CommonOptions& common, const Config& config) {
  if (!common.db_path.empty()) return common.db_path;
  return config.db_path.value_or(DefaultDbPath());
}

std::string DefaultDbPath() {
  if (const char* env = std::getenv("GPULEDGER_DB"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return (std::filesystem::path(xdg) / "gpuledger" / "ledger.db").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".local/share/gpuledger/ledger.db").string();
}

Result<std::unique_ptr<ledger::Ledger>> OpenLedger(const CommonOptions& common, const Clock& clock,
                                                   Config* config_out,
                                                   const store::SqliteOptions& store_options) {
  GPULEDGER_ASSIGN_OR_RETURN(Config config, LoadCommonConfig(common));
  if (!common.db_path.empty()) config.db_path = common.db_path;
  std::string db_path = StorePath(common, config);
  if (!store::IsPostgresUrl(db_path)) {
    std::error_code ec;
    auto parent = std::filesystem::path(db_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  }
  store::OpenOptions store_opts{.sqlite = store_options};
  if (config.ledger.store_max_bytes) {
    store_opts.sqlite.max_size_bytes = static_cast<int64_t>(*config.ledger.store_max_bytes);
  }
  if (config.day_cache_bytes) {
    store_opts.sqlite.day_cache_bytes = store_opts.pg.day_cache_bytes = *config.day_cache_bytes;
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto store, store::Open(db_path, store_opts));
  ledger::LedgerOptions options = LedgerOptionsFrom(config.ledger);
  options.currency = config.currency.value_or(Currency());
  auto ledger = std::make_unique<ledger::Ledger>(std::move(store), clock, std::move(options));
  if (config.prices) {
    GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, PriceBook::Create(*config.prices));
    GPULEDGER_RETURN_IF_ERROR(ledger->SetPrices(book));
  }
  if (config_out) *config_out = std::move(config);
  return ledger;
}

void PrintTargets(const Goals& goals) { std::fprintf(stderr, "%s\n", goals.Describe().c_str()); }

}  // namespace gpuledger::cli
