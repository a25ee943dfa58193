#include "cli/config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <toml++/toml.h>

#include "store/store.h"

namespace gpuledger::cli {
namespace {

std::string Where(const std::string& path, const toml::node& n) {
  const auto& src = n.source();
  return fmt::format("{}:{}", path, src.begin.line);
}

Result<int64_t> DurationKey(const std::string& path, const toml::table& t, const char* key) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return int64_t{0};
  auto s = n->value<std::string>();
  if (!s) return InvalidArgument(fmt::format("{}: {}: want a duration string such as \"30s\"", Where(path, *n), key));
  auto d = ParseDuration(*s);
  if (!d.ok()) return InvalidArgument(fmt::format("{}: {}: {}", Where(path, *n), key, d.status().message()));
  return *d;
}

Result<std::vector<PriceEntry>> Prices(const std::string& path, const toml::array& arr) {
  std::vector<PriceEntry> out;
  for (const toml::node& item : arr) {
    const toml::table* t = item.as_table();
    if (t == nullptr) return InvalidArgument(fmt::format("{}: [[price]] must be a table", Where(path, item)));
    PriceEntry e;
    auto text = [&](const char* key, std::string fallback) -> Result<std::string> {
      const toml::node* n = t->get(key);
      if (n == nullptr) return fallback;
      auto v = n->value<std::string>();
      if (!v) return InvalidArgument(fmt::format("{}: {}: want a string", Where(path, *n), key));
      return *v;
    };
    GPULEDGER_ASSIGN_OR_RETURN(e.model, text("model", "*"));
    GPULEDGER_ASSIGN_OR_RETURN(e.pool, text("pool", "*"));
    GPULEDGER_ASSIGN_OR_RETURN(std::string type, text("type", "on-demand"));
    auto ct = ParseCapacityType(type);
    if (!ct.ok()) return ct.status().WithContext(Where(path, item));
    e.capacity_type = *ct;
    // A price is a string ("2.49") so that it never passes through a float.
    const toml::node* p = t->get("per_gpu_hour");
    if (p == nullptr || !p->is_string()) {
      return InvalidArgument(fmt::format(
          "{}: per_gpu_hour: want a decimal string such as \"2.49\" (money never goes through a "
          "float)",
          Where(path, item)));
    }
    auto money = Money::Parse(*p->value<std::string>());
    if (!money.ok()) return money.status().WithContext(Where(path, *p));
    e.per_gpu_hour = *money;
    for (auto [key, target] : {std::pair{"from", &e.valid.begin_ms}, std::pair{"to", &e.valid.end_ms}}) {
      const toml::node* n = t->get(key);
      if (n == nullptr) continue;
      auto s = n->value<std::string>();
      auto parsed = s ? ParseTime(*s) : Result<int64_t>(InvalidArgument("want an RFC 3339 string"));
      if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}: {}", Where(path, *n), key));
      *target = *parsed;
    }
    out.push_back(e);
  }
  auto book = PriceBook::Create(out);
  if (!book.ok()) return book.status().WithContext(path);
  return out;
}

Result<toml::table> ParseFile(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line,
                                       e.source().begin.column, e.description()));
  }
}

Result<double> Ratio(const std::string& path, const toml::node& n, std::string_view key) {
  auto v = n.value<double>();
  if (!v || !(*v >= 0 && *v <= 1)) {
    return InvalidArgument(fmt::format("{}: {}: want a ratio in 0..1", Where(path, n), key));
  }
  return *v;
}

// [targets] fleet = 0.6, pools = { serving = 0.4 }
Status Targets(const std::string& path, const toml::node& node, Goals& goals) {
  const toml::table* t = node.as_table();
  if (t == nullptr) return InvalidArgument(fmt::format("{}: [targets] must be a table", Where(path, node)));
  for (auto&& [key, n] : *t) {
    std::string k(key.str());
    if (k == "fleet") {
      GPULEDGER_ASSIGN_OR_RETURN(goals.fleet_target, Ratio(path, n, "targets.fleet"));
    } else if (k == "pools") {
      const toml::table* pools = n.as_table();
      if (pools == nullptr) {
        return InvalidArgument(fmt::format("{}: targets.pools: want a table of pool = ratio", Where(path, n)));
      }
      for (auto&& [pool, pn] : *pools) {
        GPULEDGER_ASSIGN_OR_RETURN(goals.pool_targets[std::string(pool.str())],
                                   Ratio(path, pn, fmt::format("targets.pools.{}", pool.str())));
      }
    } else {
      return InvalidArgument(fmt::format("{}: targets.{}: unknown key (want fleet or pools)", Where(path, n), k));
    }
  }
  return Status::Ok();
}

// [budgets] nlp = "40000.00": each team's budget per calendar month, a decimal string
// (money is never a float).
Status Budgets(const std::string& path, const toml::node& node, Goals& goals) {
  const toml::table* t = node.as_table();
  if (t == nullptr) return InvalidArgument(fmt::format("{}: [budgets] must be a table", Where(path, node)));
  for (auto&& [team, n] : *t) {
    auto text = n.value<std::string>();
    if (!text) {
      return InvalidArgument(fmt::format("{}: budgets.{}: want a decimal string such as \"40000.00\"",
                                         Where(path, n), team.str()));
    }
    auto amount = Money::Parse(*text);
    if (!amount.ok() || amount->micros() <= 0) {
      return InvalidArgument(fmt::format("{}: budgets.{}: \"{}\" is not a positive amount", Where(path, n),
                                         team.str(), *text));
    }
    goals.monthly_budgets[std::string(team.str())] = *amount;
  }
  return Status::Ok();
}

}  // namespace

Result<Config> LoadConfig(const std::string& path) {
  GPULEDGER_ASSIGN_OR_RETURN(toml::table t, ParseFile(path));
  Config c;
  for (auto&& [key, node] : t) {
    std::string k(key.str());
    if (k == "db") {
      auto v = node.value<std::string>();
      if (!v) return InvalidArgument(fmt::format("{}: db: want a path string", Where(path, node)));
      c.db_path = *v;
    } else if (k == "ledger") {
      const toml::table* l = node.as_table();
      if (l == nullptr) return InvalidArgument(fmt::format("{}: [ledger] must be a table", Where(path, node)));
      for (auto&& [lk, ln] : *l) {
        std::string name(lk.str());
        if (name != "staleness_limit" && name != "max_future_skew" && name != "raw_retention") {
          return InvalidArgument(fmt::format("{}: ledger.{}: unknown key", Where(path, ln), name));
        }
      }
      GPULEDGER_ASSIGN_OR_RETURN(c.ledger.staleness_override_ms, DurationKey(path, *l, "staleness_limit"));
      GPULEDGER_ASSIGN_OR_RETURN(int64_t skew, DurationKey(path, *l, "max_future_skew"));
      if (skew) c.ledger.max_future_skew_ms = skew;
      GPULEDGER_ASSIGN_OR_RETURN(c.raw_retention_ms, DurationKey(path, *l, "raw_retention"));
    } else if (k == "targets") {
      GPULEDGER_RETURN_IF_ERROR(Targets(path, node, c.goals));
    } else if (k == "budgets") {
      GPULEDGER_RETURN_IF_ERROR(Budgets(path, node, c.goals));
    } else if (k == "server") {
      // The server's table: read by server::LoadServerConfig (docs/server.md).
    } else if (k == "price") {
      const toml::array* a = node.as_array();
      if (a == nullptr) return InvalidArgument(fmt::format("{}: use [[price]] tables", Where(path, node)));
      GPULEDGER_ASSIGN_OR_RETURN(c.prices, Prices(path, *a));
    } else {
      return InvalidArgument(fmt::format("{}: {}: unknown key", Where(path, node), k));
    }
  }
  return c;
}

Result<std::vector<PriceEntry>> LoadPriceFile(const std::string& path) {
  GPULEDGER_ASSIGN_OR_RETURN(toml::table t, ParseFile(path));
  const toml::array* a = t["price"].as_array();
  if (a == nullptr) return InvalidArgument(fmt::format("{}: no [[price]] tables", path));
  return Prices(path, *a);
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
  Config config;
  if (!common.config_path.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(config, LoadConfig(common.config_path));
  }
  if (!common.db_path.empty()) config.db_path = common.db_path;
  if (config.db_path.empty()) config.db_path = DefaultDbPath();
  std::error_code ec;
  auto parent = std::filesystem::path(config.db_path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  GPULEDGER_ASSIGN_OR_RETURN(auto store, store::OpenSqliteStore(config.db_path, store_options));
  if (config.prices) {
    GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, PriceBook::Create(*config.prices));
    GPULEDGER_RETURN_IF_ERROR(store->SavePriceBook(book));
  }
  auto ledger = std::make_unique<ledger::Ledger>(std::move(store), clock, config.ledger);
  if (config_out) *config_out = config;
  return ledger;
}

}  // namespace gpuledger::cli
