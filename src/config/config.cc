#include "config/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "core/amortization.h"
#include "core/time.h"

namespace gpuledger::config {

Where::Where(std::string file, int64_t line, std::string table)
    : file_(std::move(file)), line_(line), table_(std::move(table)) {}

void Where::SetLine(std::string_view key, int64_t line) {
  sources_[std::string(key)] = fmt::format("{}:{}", file_, line);
}

void Where::SetFlag(std::string_view key, std::string flag) { sources_[std::string(key)] = std::move(flag); }

std::string Where::Of(std::string_view key) const {
  std::string dotted = table_.empty() ? std::string(key) : fmt::format("{}.{}", table_, key);
  auto it = sources_.find(key);
  if (it == sources_.end()) return dotted;
  if (it->second.starts_with("--")) return it->second;
  return fmt::format("{}: {}", it->second, dotted);
}

std::string Where::Table() const {
  std::string name = array_ ? fmt::format("[[{}]]", table_) : fmt::format("[{}]", table_);
  if (file_.empty()) return name;
  return fmt::format("{}:{}: {}", file_, line_, name);
}

std::string Where::Source(std::string_view key) const {
  auto it = sources_.find(key);
  return it == sources_.end() ? std::string() : it->second;
}

namespace {

// An alert sink's or route's URL: http:// or https://.
bool IsHttpUrl(std::string_view url) { return url.starts_with("http://") || url.starts_with("https://"); }

int64_t LineOf(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

// The node's value if it is exactly a T (no conversion), else InvalidArgument(`want`).
template <typename T>
Result<T> Exact(const toml::node& n, const char* want) {
  auto v = n.value_exact<T>();
  if (!v) return InvalidArgument(want);
  return *v;
}

// Reads the keys of one table, each with the grammar of its kind. Every error names
// FILE:LINE of the value and the dotted key; every key read has its line in `where`.
class Reader {
 public:
  Reader(const std::string& file, const toml::table& table, Where& where) : file_(file), table_(table), where_(where) {}

  // Fails naming the first key of the table (in file order) that is not in `known`.
  Status Known(std::initializer_list<std::string_view> known) const {
    const toml::node* first = nullptr;
    std::string first_key;
    for (auto&& [key, node] : table_) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      if (first == nullptr || LineOf(node) < LineOf(*first)) {
        first = &node;
        first_key = std::string(key.str());
      }
    }
    if (first == nullptr) return Status::Ok();
    std::string names;
    for (std::string_view k : known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
    return Fail(*first, first_key, fmt::format("unknown key (known here: {})", names));
  }

  // Reads `key` when the table has it: `parse(node)` gives the value, or the error's text
  // (FILE:LINE and the key are put before it).
  template <typename T, typename Parse>
  Status Value(std::string_view key, std::optional<T>& out, Parse parse) const {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    Result<T> v = parse(*n);
    if (!v.ok()) return Fail(*n, key, v.status().message());
    out = std::move(v).value();
    return Status::Ok();
  }

  Status String(std::string_view key, std::optional<std::string>& out) const {
    return Value(key, out, [](const toml::node& n) { return Exact<std::string>(n, "want a string"); });
  }

  Status String(std::string_view key, std::string& out) const {
    std::optional<std::string> v;
    GPULEDGER_RETURN_IF_ERROR(String(key, v));
    Overlay(v, out);
    return Status::Ok();
  }

  Status Bool(std::string_view key, std::optional<bool>& out) const {
    return Value(key, out, [](const toml::node& n) { return Exact<bool>(n, "want true or false"); });
  }

  Status PositiveInteger(std::string_view key, std::optional<int64_t>& out) const {
    return Value(key, out, [](const toml::node& n) -> Result<int64_t> {
      auto v = n.value_exact<int64_t>();
      if (!v || *v <= 0) return InvalidArgument("want a positive integer");
      return *v;
    });
  }

  // A duration string such as "500ms", "30s" or "1h30m" (core's ParseDuration).
  Status Duration(std::string_view key, std::optional<int64_t>& out_ms) const {
    return Value(key, out_ms, [](const toml::node& n) -> Result<int64_t> {
      GPULEDGER_ASSIGN_OR_RETURN(std::string text,
                                 Exact<std::string>(n, "want a duration string such as \"30s\" or \"500ms\""));
      return ParseDuration(text);
    });
  }

  // An integer of bytes, or a string with a unit ("512MiB").
  Status ByteSize(std::string_view key, std::optional<uint64_t>& out) const {
    return Value(key, out, [](const toml::node& n) -> Result<uint64_t> {
      if (auto v = n.value_exact<int64_t>()) {
        if (*v <= 0) return InvalidArgument("want a positive size");
        return static_cast<uint64_t>(*v);
      }
      GPULEDGER_ASSIGN_OR_RETURN(std::string text,
                                 Exact<std::string>(n, "want a number of bytes or a size string such as \"512MiB\""));
      return ParseByteSize(text);
    });
  }

  Status Capacity(std::string_view key, std::optional<CapacityType>& out) const {
    return Value(key, out, [](const toml::node& n) -> Result<CapacityType> {
      GPULEDGER_ASSIGN_OR_RETURN(std::string text, Exact<std::string>(n, "want a string: reserved, on-demand or spot"));
      return ParseCapacityType(text);
    });
  }

  // An RFC 3339 instant; `out_ms` keeps its value when the key is absent.
  Status Instant(std::string_view key, int64_t& out_ms) const {
    std::optional<int64_t> t;
    GPULEDGER_RETURN_IF_ERROR(Value(key, t, [](const toml::node& n) -> Result<int64_t> {
      GPULEDGER_ASSIGN_OR_RETURN(std::string text,
                                 Exact<std::string>(n, "want an RFC 3339 string such as \"2026-01-01T00:00:00Z\""));
      return ParseTime(text);
    }));
    Overlay(t, out_ms);
    return Status::Ok();
  }

  // A ratio in 0..1 (an integer 0 or 1 too).
  Status Ratio(const toml::node& n, std::string_view key, double& out) const {
    Note(key, n);
    auto v = n.value<double>();
    if (!v || !(*v >= 0 && *v <= 1)) return Fail(n, key, "want a ratio in 0..1");
    out = *v;
    return Status::Ok();
  }

  // A share: a percentage string ("65%") or a ratio in 0..1.
  Status Percent(std::string_view key, std::optional<double>& out) const {
    return Value(key, out, [](const toml::node& n) -> Result<double> {
      if (auto text = n.value_exact<std::string>()) return ParsePercent(*text);
      auto v = n.value<double>();
      if (!v || !(*v >= 0 && *v <= 1)) return InvalidArgument("want a percentage such as \"65%\" or a ratio in 0..1");
      return *v;
    });
  }

  // A string that `parse` turns into a T (an enum's name).
  template <typename T, typename Parse>
  Status Named(std::string_view key, std::optional<T>& out, Parse parse) const {
    return Value(key, out, [&](const toml::node& n) -> Result<T> {
      GPULEDGER_ASSIGN_OR_RETURN(std::string text, Exact<std::string>(n, "want a string"));
      return parse(text);
    });
  }

  // Named, over a default: `out` keeps its value when the key is absent.
  template <typename T, typename Parse>
  Status NamedOver(std::string_view key, T& out, Parse parse) const {
    std::optional<T> v;
    GPULEDGER_RETURN_IF_ERROR(Named(key, v, parse));
    Overlay(v, out);
    return Status::Ok();
  }

  // Whether the table has `key`.
  bool Has(std::string_view key) const { return table_.get(key) != nullptr; }

  // "FILE:LINE: TABLE.KEY: what" for a key the table has. REQUIRES: Has(key).
  Status FailKey(std::string_view key, std::string_view what) const { return Fail(*table_.get(key), key, what); }

  // An amount of money: a decimal string, never a float.
  Status Amount(const toml::node& n, std::string_view key, Money& out) const {
    Note(key, n);
    auto m = Exact<std::string>(n, "want a decimal string such as \"2.49\" (money never goes through a float)");
    Result<Money> amount = m.ok() ? Money::Parse(*m) : Result<Money>(m.status());
    if (!amount.ok()) return Fail(n, key, amount.status().message());
    out = *amount;
    return Status::Ok();
  }

  Status StringList(std::string_view key, std::vector<std::string>& out) const {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const toml::array* a = n->as_array();
    if (a == nullptr) return Fail(*n, key, "want a list of strings");
    for (const toml::node& item : *a) {
      auto v = item.value_exact<std::string>();
      if (!v) return Fail(item, key, "want a list of strings");
      out.push_back(*v);
    }
    return Status::Ok();
  }

  // The sub-table `key`, or null when absent. Fails when `key` is not a table.
  Result<const toml::table*> SubTable(std::string_view key) const {
    const toml::node* n = Get(key);
    if (n == nullptr) return static_cast<const toml::table*>(nullptr);
    const toml::table* t = n->as_table();
    if (t == nullptr) return Fail(*n, key, "want a table");
    return t;
  }

  // Calls fn(table, line) for each table of the array of tables `key`.
  template <typename Fn>
  Status EachTable(std::string_view key, Fn fn) const {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const toml::array* a = n->as_array();
    if (a == nullptr) return Fail(*n, key, fmt::format("want [[{}]] tables", Dotted(key)));
    for (const toml::node& item : *a) {
      const toml::table* t = item.as_table();
      if (t == nullptr) return Fail(item, key, fmt::format("want [[{}]] tables", Dotted(key)));
      GPULEDGER_RETURN_IF_ERROR(fn(*t, LineOf(item)));
    }
    return Status::Ok();
  }

  Status Fail(const toml::node& n, std::string_view key, std::string_view what) const {
    return InvalidArgument(fmt::format("{}:{}: {}: {}", file_, LineOf(n), Dotted(key), what));
  }

  std::string Dotted(std::string_view key) const {
    const std::string& table = where_.table();
    return table.empty() ? std::string(key) : fmt::format("{}.{}", table, key);
  }

 private:
  const toml::node* Get(std::string_view key) const {
    const toml::node* n = table_.get(key);
    if (n != nullptr) Note(key, *n);
    return n;
  }
  void Note(std::string_view key, const toml::node& n) const { where_.SetLine(key, LineOf(n)); }

  const std::string& file_;
  const toml::table& table_;
  Where& where_;
};

Result<toml::table> ParseFile(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description()));
  }
}

// [[price]] tables; the list as a whole must make a valid price book.
Result<std::vector<PriceEntry>> ReadPrices(const std::string& file, const Reader& root) {
  std::vector<PriceEntry> out;
  std::vector<Where> wheres;
  GPULEDGER_RETURN_IF_ERROR(root.EachTable("price", [&](const toml::table& t, int64_t line) -> Status {
    Where where(file, line, "price");
    where.MarkArray();
    Reader r(file, t, where);
    if (const toml::node* currency = t.get("currency")) {
      return r.Fail(*currency, "currency",
                    "unknown key here: the currency is the whole price book's, set once as [prices] "
                    "currency = \"EUR\" (ISO 4217) or [prices] unit = \"GPU credits\"");
    }
    GPULEDGER_RETURN_IF_ERROR(
        r.Known({"model", "pool", "type", "per_gpu_hour", "purchase", "gpus", "from", "to"}));
    PriceEntry e{.model = "*", .pool = "*"};
    GPULEDGER_RETURN_IF_ERROR(r.String("model", e.model));
    GPULEDGER_RETURN_IF_ERROR(r.String("pool", e.pool));
    std::optional<CapacityType> type;
    GPULEDGER_RETURN_IF_ERROR(r.Capacity("type", type));
    const toml::node* price = t.get("per_gpu_hour");
    const toml::node* purchase = t.get("purchase");
    // A purchase is reserved capacity: reserved unless said otherwise, and only that.
    if (purchase != nullptr && !type) type = CapacityType::kReserved;
    Overlay(type, e.capacity_type);
    if (price != nullptr && purchase != nullptr) {
      return r.Fail(*purchase, "purchase", "give per_gpu_hour or purchase (spread over from..to), not both");
    }
    if (price == nullptr && purchase == nullptr) {
      return InvalidArgument(fmt::format("{}: per_gpu_hour is required, a decimal string such as \"2.49\" "
                                         "(or purchase, an amount spread over from..to)",
                                         where.Table()));
    }
    if (price != nullptr && t.get("gpus") != nullptr) {
      return r.FailKey("gpus", "only with purchase: how many GPUs the purchase covers");
    }
    if (price != nullptr) {
      GPULEDGER_RETURN_IF_ERROR(r.Amount(*price, "per_gpu_hour", e.per_gpu_hour));
      if (e.per_gpu_hour < Money()) return r.Fail(*price, "per_gpu_hour", "a price cannot be negative");
    }
    for (auto [key, target] : {std::pair{"from", &e.valid.begin_ms}, std::pair{"to", &e.valid.end_ms}}) {
      GPULEDGER_RETURN_IF_ERROR(r.Instant(key, *target));
      if (*target != kForever && *target % kMsPerHour != 0) {
        return r.Fail(*t.get(key), key, "prices change on whole UTC hours (want e.g. \"2026-01-01T00:00:00Z\")");
      }
    }
    if (e.valid.empty()) {
      const toml::node* to = t.get("to");
      if (to == nullptr) return InvalidArgument(fmt::format("{}: empty validity range", where.Table()));
      return r.Fail(*to, "to", "must be after from");
    }
    if (purchase != nullptr) {
      if (e.capacity_type != CapacityType::kReserved) {
        return r.FailKey("type", "a purchase is reserved capacity: type = \"reserved\" (or leave type out)");
      }
      for (const char* key : {"from", "to"}) {
        if (t.get(key) == nullptr) {
          return r.Fail(*purchase, "purchase", fmt::format("a purchase needs its term: give {} too", key));
        }
      }
      Money amount;
      GPULEDGER_RETURN_IF_ERROR(r.Amount(*purchase, "purchase", amount));
      std::optional<int64_t> gpus;
      GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("gpus", gpus));
      auto per_hour = AmortizedPerGpuHour(amount, gpus.value_or(1), e.valid);
      if (!per_hour.ok()) return r.Fail(*purchase, "purchase", per_hour.status().message());
      e.per_gpu_hour = *per_hour;
    }
    out.push_back(std::move(e));
    wheres.push_back(std::move(where));
    return Status::Ok();
  }));
  // What is left to check involves several entries (two for the same key that overlap):
  // the first prefix of the list that fails names the entry that broke it.
  for (size_t i = 0; i < out.size(); ++i) {
    auto book = PriceBook::Create({out.begin(), out.begin() + static_cast<ptrdiff_t>(i) + 1});
    if (!book.ok()) return book.status().WithContext(wheres[i].Table());
  }
  return out;
}

// [prices] currency = "EUR" (ISO 4217) or unit = "GPU credits": exactly one of them.
Status ReadPricesSection(const std::string& file, const toml::table& t, int64_t line, Config& c) {
  Where where(file, line, "prices");
  Reader r(file, t, where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"currency", "unit"}));
  const toml::node* code = t.get("currency");
  const toml::node* unit = t.get("unit");
  if (code != nullptr && unit != nullptr) {
    const toml::node& later = LineOf(*code) > LineOf(*unit) ? *code : *unit;
    return r.Fail(later, &later == code ? "currency" : "unit",
                  "set currency (an ISO 4217 code) or unit (an internal unit's name), not both");
  }
  if (code == nullptr && unit == nullptr) {
    return InvalidArgument(fmt::format("{}: want currency = \"EUR\" (ISO 4217) or unit = \"GPU credits\"",
                                       where.Table()));
  }
  const char* key = code != nullptr ? "currency" : "unit";
  std::optional<Currency> currency;
  GPULEDGER_RETURN_IF_ERROR(r.Value(key, currency, [&](const toml::node& n) -> Result<Currency> {
    GPULEDGER_ASSIGN_OR_RETURN(std::string text, Exact<std::string>(n, "want a string"));
    return code != nullptr ? Currency::Iso4217(text) : Currency::Unit(text);
  }));
  c.currency = std::move(currency);
  c.currency_source = where.Source(key);
  return Status::Ok();
}

// [targets] fleet = 0.6, pools = { serving = 0.4 }
Status ReadTargets(const std::string& file, const toml::table& t, int64_t line, Goals& goals) {
  Where where(file, line, "targets");
  Reader r(file, t, where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"fleet", "pools"}));
  if (const toml::node* fleet = t.get("fleet")) {
    GPULEDGER_RETURN_IF_ERROR(r.Ratio(*fleet, "fleet", goals.fleet_target));
    goals.fleet_target_source = where.Source("fleet");
  }
  GPULEDGER_ASSIGN_OR_RETURN(const toml::table* pools, r.SubTable("pools"));
  if (pools == nullptr) return Status::Ok();
  Where pools_where(file, LineOf(*t.get("pools")), "targets.pools");
  Reader p(file, *pools, pools_where);
  for (auto&& [pool, n] : *pools) {
    std::string name(pool.str());
    GPULEDGER_RETURN_IF_ERROR(p.Ratio(n, name, goals.pool_targets[name]));
    goals.pool_target_sources[name] = pools_where.Source(name);
  }
  return Status::Ok();
}

// [budgets] nlp = "40000.00": each team's budget per calendar month.
Status ReadBudgets(const std::string& file, const toml::table& t, int64_t line, Goals& goals) {
  Where where(file, line, "budgets");
  Reader r(file, t, where);
  for (auto&& [team, n] : t) {
    Money amount;
    GPULEDGER_RETURN_IF_ERROR(r.Amount(n, team.str(), amount));
    if (amount.micros() <= 0) return r.Fail(n, team.str(), "a budget must be a positive amount");
    goals.monthly_budgets[std::string(team.str())] = amount;
  }
  return Status::Ok();
}

// [store] url = "postgresql://...": where the store is, as `db` says it (not both);
// day_cache_size: the memory for whole days' day rows.
Status ReadStore(const std::string& file, const toml::table& t, int64_t line, Config& c) {
  Where where(file, line, "store");
  Reader r(file, t, where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"url", "day_cache_size"}));
  if (c.db_path && t.get("url") != nullptr) {
    return r.Fail(*t.get("url"), "url", "the store is given twice: keep either the top-level db or [store] url");
  }
  GPULEDGER_RETURN_IF_ERROR(r.ByteSize("day_cache_size", c.day_cache_bytes));
  return r.String("url", c.db_path);
}

Status ReadLedger(const std::string& file, const toml::table& t, int64_t line, LedgerSection& s) {
  s.where = Where(file, line, "ledger");
  Reader r(file, t, s.where);
  GPULEDGER_RETURN_IF_ERROR(
      r.Known({"staleness_limit", "max_future_skew", "raw_retention", "retire_after", "store_max_size"}));
  GPULEDGER_RETURN_IF_ERROR(r.ByteSize("store_max_size", s.store_max_bytes));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("retire_after", s.retire_after_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("staleness_limit", s.staleness_limit_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("max_future_skew", s.max_future_skew_ms));
  return r.Duration("raw_retention", s.raw_retention_ms);
}

Status ReadServer(const std::string& file, const toml::table& t, int64_t line, ServerSection& s) {
  s.present = true;
  s.where = Where(file, line, "server");
  Reader r(file, t, s.where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"listen", "insecure", "max_body_bytes", "max_samples_per_batch",
                                     "max_sample_age", "read_timeout", "write_timeout", "threads",
                                     "header_timeout", "body_timeout", "max_threads", "max_connections_per_address",
                                     "keep_alive_max_requests", "keep_alive_timeout", "max_concurrent_decompressions",
                                     "settle_interval", "settle_days", "query_limits", "remote_write", "label_rule", "token", "scrape"}));
  GPULEDGER_RETURN_IF_ERROR(r.String("listen", s.listen));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("insecure", s.insecure));
  GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("max_body_bytes", s.max_body_bytes));
  GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("max_samples_per_batch", s.max_samples_per_batch));
  GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("threads", s.threads));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("max_sample_age", s.max_sample_age_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("read_timeout", s.read_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("write_timeout", s.write_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("header_timeout", s.header_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("body_timeout", s.body_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("keep_alive_timeout", s.keep_alive_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("settle_interval", s.settle_interval_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("settle_days", s.settle_days));
  for (auto [key, field] : {std::pair{"max_threads", &s.max_threads},
                            {"max_connections_per_address", &s.max_connections_per_address},
                            {"keep_alive_max_requests", &s.keep_alive_max_requests},
                            {"max_concurrent_decompressions", &s.max_concurrent_decompressions}}) {
    GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger(key, *field));
  }
  GPULEDGER_ASSIGN_OR_RETURN(const toml::table* limits, r.SubTable("query_limits"));
  if (limits != nullptr) {
    Where where(file, LineOf(*t.get("query_limits")), "server.query_limits");
    Reader q(file, *limits, where);
    GPULEDGER_RETURN_IF_ERROR(
        q.Known({"max_device_hours", "max_rows", "max_series_cells", "max_heatmap_cells", "max_rows_in_flight",
                 "max_job_sample_device_hours"}));
    for (auto [key, field] : {std::pair{"max_device_hours", &s.max_device_hours}, {"max_rows", &s.max_rows},
                              {"max_series_cells", &s.max_series_cells}, {"max_heatmap_cells", &s.max_heatmap_cells},
                              {"max_rows_in_flight", &s.max_rows_in_flight},
                              {"max_job_sample_device_hours", &s.max_job_sample_device_hours}}) {
      GPULEDGER_RETURN_IF_ERROR(q.PositiveInteger(key, *field));
    }
  }

  GPULEDGER_ASSIGN_OR_RETURN(const toml::table* rw, r.SubTable("remote_write"));
  if (rw != nullptr) {
    s.remote_write_where = Where(file, LineOf(*t.get("remote_write")), "server.remote_write");
    Reader w(file, *rw, s.remote_write_where);
    GPULEDGER_RETURN_IF_ERROR(w.Known({"pool", "capacity_type", "hold_timeout"}));
    GPULEDGER_RETURN_IF_ERROR(w.String("pool", s.remote_write_pool));
    GPULEDGER_RETURN_IF_ERROR(w.Capacity("capacity_type", s.remote_write_capacity_type));
    GPULEDGER_RETURN_IF_ERROR(w.Duration("hold_timeout", s.remote_write_hold_timeout_ms));
  }
  // Each entry of an array of tables: its own Where, its keys checked.
  auto entry = [&](const char* name, int64_t at) {
    Where where(file, at, fmt::format("server.{}", name));
    where.MarkArray();
    return where;
  };
  GPULEDGER_RETURN_IF_ERROR(r.EachTable("label_rule", [&](const toml::table& tt, int64_t at) -> Status {
    LabelRuleTable rule{.where = entry("label_rule", at)};
    Reader e(file, tt, rule.where);
    GPULEDGER_RETURN_IF_ERROR(e.Known({"label", "equals", "regex", "team", "project"}));
    GPULEDGER_RETURN_IF_ERROR(e.String("label", rule.label));
    GPULEDGER_RETURN_IF_ERROR(e.String("equals", rule.equals));
    GPULEDGER_RETURN_IF_ERROR(e.String("regex", rule.regex));
    GPULEDGER_RETURN_IF_ERROR(e.String("team", rule.team));
    GPULEDGER_RETURN_IF_ERROR(e.String("project", rule.project));
    if (rule.label.empty() || rule.equals.has_value() == rule.regex.has_value()) {
      return InvalidArgument(fmt::format("{}: needs label and one of equals or regex", rule.where.Table()));
    }
    s.label_rules.push_back(std::move(rule));
    return Status::Ok();
  }));
  GPULEDGER_RETURN_IF_ERROR(r.EachTable("token", [&](const toml::table& tt, int64_t at) -> Status {
    TokenTable token{.where = entry("token", at)};
    Reader e(file, tt, token.where);
    GPULEDGER_RETURN_IF_ERROR(e.Known({"name", "role", "hash", "teams", "nodes"}));
    GPULEDGER_RETURN_IF_ERROR(e.String("name", token.name));
    GPULEDGER_RETURN_IF_ERROR(e.String("role", token.role));
    GPULEDGER_RETURN_IF_ERROR(e.String("hash", token.hash));
    GPULEDGER_RETURN_IF_ERROR(e.StringList("teams", token.teams));
    GPULEDGER_RETURN_IF_ERROR(e.StringList("nodes", token.nodes));
    s.tokens.push_back(std::move(token));
    return Status::Ok();
  }));
  return r.EachTable("scrape", [&](const toml::table& tt, int64_t at) -> Status {
    ScrapeTable scrape{.where = entry("scrape", at)};
    Reader e(file, tt, scrape.where);
    GPULEDGER_RETURN_IF_ERROR(
        e.Known({"url", "interval", "timeout", "kind", "job", "tokens_metric", "model_flops_metric"}));
    GPULEDGER_RETURN_IF_ERROR(e.String("url", scrape.url));
    GPULEDGER_RETURN_IF_ERROR(e.Duration("interval", scrape.interval_ms));
    GPULEDGER_RETURN_IF_ERROR(e.Duration("timeout", scrape.timeout_ms));
    GPULEDGER_RETURN_IF_ERROR(e.String("kind", scrape.kind));
    GPULEDGER_RETURN_IF_ERROR(e.String("job", scrape.job));
    GPULEDGER_RETURN_IF_ERROR(e.String("tokens_metric", scrape.tokens_metric));
    GPULEDGER_RETURN_IF_ERROR(e.String("model_flops_metric", scrape.model_flops_metric));
    s.scrapes.push_back(std::move(scrape));
    return Status::Ok();
  });
}

Status ReadKubernetes(const std::string& file, const toml::table& t, int64_t line, KubernetesSection& s) {
  s.where = Where(file, line, "agent.kubernetes");
  Reader r(file, t, s.where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"enabled", "pod_resources_socket", "api_server", "token_file", "ca_file",
                                     "stale_after", "job", "team", "project", "experiment", "user", "keep",
                                     "kind"}));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("enabled", s.enabled));
  for (auto [key, field] : {std::pair{"pod_resources_socket", &s.pod_resources_socket},
                            {"api_server", &s.api_server}, {"token_file", &s.token_file}, {"ca_file", &s.ca_file}}) {
    GPULEDGER_RETURN_IF_ERROR(r.String(key, *field));
  }
  GPULEDGER_RETURN_IF_ERROR(r.Duration("stale_after", s.stale_after_ms));
  for (auto [key, field] : {std::pair{"job", &s.job}, {"team", &s.team}, {"project", &s.project},
                            {"experiment", &s.experiment}, {"user", &s.user}, {"keep", &s.keep}}) {
    std::vector<std::string> list;
    GPULEDGER_RETURN_IF_ERROR(r.StringList(key, list));
    if (t.get(key) != nullptr) *field = std::move(list);
  }
  if (t.get("kind") == nullptr) return Status::Ok();
  s.kinds.emplace();
  return r.EachTable("kind", [&](const toml::table& tt, int64_t at) -> Status {
    KubernetesKindTable rule{.where = Where(file, at, "agent.kubernetes.kind")};
    rule.where.MarkArray();
    Reader e(file, tt, rule.where);
    GPULEDGER_RETURN_IF_ERROR(e.Known({"kind", "when", "equals"}));
    GPULEDGER_RETURN_IF_ERROR(e.String("kind", rule.kind));
    GPULEDGER_RETURN_IF_ERROR(e.String("when", rule.when));
    GPULEDGER_RETURN_IF_ERROR(e.String("equals", rule.equals));
    if (rule.kind.empty() || rule.when.empty()) {
      return InvalidArgument(fmt::format("{}: needs kind and when", rule.where.Table()));
    }
    s.kinds->push_back(std::move(rule));
    return Status::Ok();
  });
}

Status ReadAgent(const std::string& file, const toml::table& t, int64_t line, AgentSection& s) {
  s.where = Where(file, line, "agent");
  Reader r(file, t, s.where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"server_url", "token", "token_file", "node", "pool", "capacity_type",
                                     "interval", "push_interval", "spool_dir", "spool_size", "listen",
                                     "mapping_file", "hpc_job_mapping_dir", "nvml_library", "proc_root",
                                     "slurm", "scontrol", "exposition_labels", "kubernetes"}));
  for (auto [key, field] : {std::pair{"server_url", &s.server_url}, {"token", &s.token},
                            {"token_file", &s.token_file}, {"node", &s.node}, {"pool", &s.pool},
                            {"spool_dir", &s.spool_dir}, {"listen", &s.listen}, {"mapping_file", &s.mapping_file},
                            {"hpc_job_mapping_dir", &s.hpc_job_mapping_dir}, {"nvml_library", &s.nvml_library},
                            {"proc_root", &s.proc_root}, {"scontrol", &s.scontrol},
                            {"exposition_labels", &s.exposition_labels}}) {
    GPULEDGER_RETURN_IF_ERROR(r.String(key, *field));
  }
  GPULEDGER_RETURN_IF_ERROR(r.Capacity("capacity_type", s.capacity_type));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("interval", s.interval_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("push_interval", s.push_interval_ms));
  GPULEDGER_RETURN_IF_ERROR(r.ByteSize("spool_size", s.spool_max_bytes));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("slurm", s.slurm));
  GPULEDGER_ASSIGN_OR_RETURN(const toml::table* kt, r.SubTable("kubernetes"));
  if (kt == nullptr) return Status::Ok();
  return ReadKubernetes(file, *kt, LineOf(*t.get("kubernetes")), s.kubernetes);
}


// [[objective]] tables (docs/objectives.md).
Status ReadObjectives(const std::string& file, const Reader& root, const Goals& goals, std::vector<ObjectiveSpec>& out) {
  return root.EachTable("objective", [&](const toml::table& t, int64_t line) -> Status {
    Where where(file, line, "objective");
    where.MarkArray();
    Reader r(file, t, where);
    GPULEDGER_RETURN_IF_ERROR(r.Known({"name", "kind", "scope", "measure", "target", "window", "interval",
                                       "start_within", "budget"}));
    ObjectiveSpec o;
    o.source = fmt::format("{}:{}", file, line);
    GPULEDGER_RETURN_IF_ERROR(r.String("name", o.name));
    std::optional<ObjectiveKind> kind;
    GPULEDGER_RETURN_IF_ERROR(r.Named("kind", kind, ParseObjectiveKind));
    if (o.name.empty() || !kind) {
      return InvalidArgument(fmt::format("{}: needs name and kind (utilization, availability or budget)", where.Table()));
    }
    o.kind = *kind;
    for (const ObjectiveSpec& other : out) {
      if (other.name == o.name) {
        return r.FailKey("name", fmt::format("\"{}\" names the objective at {} too", o.name, other.source));
      }
    }
    std::optional<ObjectiveScope> scope;
    GPULEDGER_RETURN_IF_ERROR(r.Named("scope", scope, ParseObjectiveScope));
    Overlay(scope, o.scope);
    std::optional<UtilizationMeasure> measure;
    GPULEDGER_RETURN_IF_ERROR(r.Named("measure", measure, ParseUtilizationMeasure));
    Overlay(measure, o.measure);
    std::optional<double> target;
    GPULEDGER_RETURN_IF_ERROR(r.Percent("target", target));
    std::optional<int64_t> window, interval, within;
    GPULEDGER_RETURN_IF_ERROR(r.Duration("window", window));
    GPULEDGER_RETURN_IF_ERROR(r.Duration("interval", interval));
    GPULEDGER_RETURN_IF_ERROR(r.Duration("start_within", within));
    Overlay(window, o.window_ms);
    Overlay(interval, o.interval_ms);
    Overlay(within, o.start_within_ms);
    // Keys that mean something for one kind only.
    auto only = [&](const char* key, ObjectiveKind k) -> Status {
      if (r.Has(key) && o.kind != k) {
        return r.FailKey(key, fmt::format("only objectives of kind {} have {}", ObjectiveKindName(k), key));
      }
      return Status::Ok();
    };
    GPULEDGER_RETURN_IF_ERROR(only("measure", ObjectiveKind::kUtilization));
    GPULEDGER_RETURN_IF_ERROR(only("start_within", ObjectiveKind::kAvailability));
    GPULEDGER_RETURN_IF_ERROR(only("budget", ObjectiveKind::kBudget));
    if (o.kind == ObjectiveKind::kBudget) {
      if (o.scope.of != ObjectiveScope::Of::kTeam) {
        return InvalidArgument(fmt::format("{}: a budget objective's scope is team:NAME", where.Table()));
      }
      o.target = target.value_or(1.0);
      if (r.Has("budget")) {
        Money budget;
        GPULEDGER_RETURN_IF_ERROR(r.Amount(*t.get("budget"), "budget", budget));
        if (budget.micros() <= 0) return r.FailKey("budget", "a budget must be a positive amount");
        o.monthly_budget = budget;
      } else if (auto it = goals.monthly_budgets.find(o.scope.name); it != goals.monthly_budgets.end()) {
        o.monthly_budget = it->second;
      } else {
        return InvalidArgument(fmt::format("{}: team {} has no budget: set budget here or in [budgets]",
                                           where.Table(), o.scope.name));
      }
      if (o.target <= 0) return r.FailKey("target", "a budget objective's target is the share of the budget the team may spend, above 0%");
    } else {
      if (!target) return InvalidArgument(fmt::format("{}: target is required, e.g. \"65%\"", where.Table()));
      o.target = *target;
      if (o.target <= 0 || o.target >= 1) {
        return r.FailKey("target", "must be above 0% and below 100% (100% leaves no error budget)");
      }
    }
    if (o.interval_ms > o.window_ms) return r.FailKey("interval", "is longer than the objective's window");
    out.push_back(std::move(o));
    return Status::Ok();
  });
}

// [[intervention]] tables (docs/objectives.md); `objectives` are those already read.
Status ReadInterventions(const std::string& file, const Reader& root, const std::vector<ObjectiveSpec>& objectives,
                         const AlertingSection& alerting, std::vector<InterventionRule>& out) {
  return root.EachTable("intervention", [&](const toml::table& t, int64_t line) -> Status {
    Where where(file, line, "intervention");
    where.MarkArray();
    Reader r(file, t, where);
    GPULEDGER_RETURN_IF_ERROR(r.Known({"name", "action", "mode", "objective", "kind", "pool", "team", "idle_below",
                                       "idle_for", "raise_to", "grace", "exempt", "max_actions_per_hour",
                                       "staleness_limit", "cooldown"}));
    InterventionRule rule;
    rule.source = fmt::format("{}:{}", file, line);
    GPULEDGER_RETURN_IF_ERROR(r.String("name", rule.name));
    std::optional<InterventionAction> action;
    GPULEDGER_RETURN_IF_ERROR(r.Named("action", action, ParseInterventionAction));
    if (rule.name.empty() || !action) {
      return InvalidArgument(
          fmt::format("{}: needs name and action (notify, hold, reprioritize, stop or requeue)", where.Table()));
    }
    rule.action = *action;
    for (const InterventionRule& other : out) {
      if (other.name == rule.name) {
        return r.FailKey("name", fmt::format("\"{}\" names the intervention at {} too", rule.name, other.source));
      }
    }
    std::optional<bool> enforce;
    GPULEDGER_RETURN_IF_ERROR(r.Named("mode", enforce, [](const std::string& m) -> Result<bool> {
      if (m == "dry-run") return false;
      if (m == "enforce") return true;
      return InvalidArgument(fmt::format("mode \"{}\": want dry-run (the default) or enforce", m));
    }));
    Overlay(enforce, rule.enforce);
    GPULEDGER_RETURN_IF_ERROR(r.String("objective", rule.objective));

    if (!rule.objective.empty() &&
        std::none_of(objectives.begin(), objectives.end(),
                     [&](const ObjectiveSpec& o) { return o.name == rule.objective; })) {
      return r.FailKey("objective", fmt::format("no [[objective]] is named \"{}\"", rule.objective));
    }
    std::optional<JobKind> kind;
    GPULEDGER_RETURN_IF_ERROR(r.Named("kind", kind, ParseJobKind));
    rule.kind = kind;
    GPULEDGER_RETURN_IF_ERROR(r.String("pool", rule.pool));
    GPULEDGER_RETURN_IF_ERROR(r.String("team", rule.team));
    std::optional<double> idle_below;
    GPULEDGER_RETURN_IF_ERROR(r.Percent("idle_below", idle_below));
    Overlay(idle_below, rule.idle_below);
    std::optional<int64_t> raise_to, max_actions;
    GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("raise_to", raise_to));
    GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("max_actions_per_hour", max_actions));
    for (auto [key, v] : {std::pair{"raise_to", &raise_to}, {"max_actions_per_hour", &max_actions}}) {
      if (*v && **v > INT32_MAX) return r.FailKey(key, "too large");
    }
    Overlay(raise_to, rule.raise_to);
    Overlay(max_actions, rule.max_actions_per_hour);
    for (auto [key, field] : {std::pair{"idle_for", &rule.idle_for_ms}, {"grace", &rule.grace_ms},
                              {"staleness_limit", &rule.staleness_limit_ms}, {"cooldown", &rule.cooldown_ms}}) {
      std::optional<int64_t> v;
      GPULEDGER_RETURN_IF_ERROR(r.Duration(key, v));
      Overlay(v, *field);
    }
    // An enforced rule that tells the owner first (a notice, or the warning before a stop)
    // needs somewhere to send it: without one its stops would never follow a warning.
    bool warns = rule.action == InterventionAction::kHold || rule.action == InterventionAction::kStop ||
                 rule.action == InterventionAction::kRequeue;
    if (rule.enforce && !alerting.HasSink() && (rule.action == InterventionAction::kNotify || (warns && rule.grace_ms > 0))) {
      return r.FailKey("mode", fmt::format("an enforced {} rule tells the job's owner first, and [alerting] has no sink to "
                                           "carry it: add an [[alerting.route]], [[alerting.slack]], [[alerting.webhook]] "
                                           "or [[alerting.alertmanager]]",
                                           InterventionActionName(rule.action)));
    }
    GPULEDGER_RETURN_IF_ERROR(r.StringList("exempt", rule.exempt));
    for (const std::string& e : rule.exempt) {
      if (auto parsed = ParseExemption(e); !parsed.ok()) return r.FailKey("exempt", parsed.status().message());
    }
    out.push_back(std::move(rule));
    return Status::Ok();
  });
}

// [[quota]] tables (docs/quotas.md), then each [budgets] entry as a soft monthly budget of
// its team. A team's monthly budget set both ways is refused: one place says it.
Status ReadQuotas(const std::string& file, const toml::table& root_table, const Reader& root, const Goals& goals,
                  std::vector<QuotaSpec>& out) {
  GPULEDGER_RETURN_IF_ERROR(root.EachTable("quota", [&](const toml::table& t, int64_t line) -> Status {
    Where where(file, line, "quota");
    where.MarkArray();
    Reader r(file, t, where);
    GPULEDGER_RETURN_IF_ERROR(
        r.Known({"team", "project", "period", "mode", "gpu_hours", "pool", "model", "budget", "alert_at"}));
    QuotaSpec q;
    q.source = fmt::format("{}:{}", file, line);
    if (r.Has("team") && r.Has("project")) {
      return r.FailKey("project", "a quota holds one owner: set team or project, not both");
    }
    q.owner = r.Has("project") ? QuotaSpec::Owner::kProject : QuotaSpec::Owner::kTeam;
    GPULEDGER_RETURN_IF_ERROR(r.String(q.owner == QuotaSpec::Owner::kTeam ? "team" : "project", q.name));
    if (q.name.empty()) {
      return InvalidArgument(fmt::format("{}: needs team = \"NAME\" or project = \"NAME\"", where.Table()));
    }
    GPULEDGER_RETURN_IF_ERROR(r.NamedOver("period", q.period, ParseQuotaPeriod));
    GPULEDGER_RETURN_IF_ERROR(r.NamedOver("mode", q.mode, ParseQuotaMode));
    GPULEDGER_RETURN_IF_ERROR(r.PositiveInteger("gpu_hours", q.gpu_hours));
    GPULEDGER_RETURN_IF_ERROR(r.String("pool", q.pool));
    GPULEDGER_RETURN_IF_ERROR(r.String("model", q.model));
    if (r.Has("budget")) {
      Money budget;
      GPULEDGER_RETURN_IF_ERROR(r.Amount(*t.get("budget"), "budget", budget));
      if (budget.micros() <= 0) return r.FailKey("budget", "a budget must be a positive amount");
      q.budget = budget;
    }
    if (!q.gpu_hours && !q.budget) {
      return InvalidArgument(fmt::format("{}: needs gpu_hours (a whole number) or budget (a decimal string), or both",
                                         where.Table()));
    }
    if (q.mode == QuotaMode::kHard && !q.gpu_hours) {
      return r.FailKey("mode", "a hard quota needs gpu_hours: schedulers enforce GPU time, not money");
    }
    if (const toml::node* n = t.get("alert_at")) {
      const toml::array* a = n->as_array();
      if (a == nullptr || a->empty()) return r.Fail(*n, "alert_at", "want a list of percentages such as [\"50%\", \"80%\"]");
      q.alert_at.clear();
      for (const toml::node& item : *a) {
        auto text = item.value_exact<std::string>();
        Result<double> share = text ? ParsePercent(*text) : Result<double>(InvalidArgument("want a percentage string"));
        if (!share.ok()) return r.Fail(item, "alert_at", share.status().message());
        if (*share <= 0) return r.Fail(item, "alert_at", "a threshold must be above 0%");
        if (!q.alert_at.empty() && *share <= q.alert_at.back()) {
          return r.Fail(item, "alert_at", "thresholds go in ascending order, each once");
        }
        q.alert_at.push_back(*share);
      }
    }
    for (const QuotaSpec& other : out) {
      if (other.Label() == q.Label()) {
        return InvalidArgument(fmt::format("{}: {} is set at {} too", where.Table(), q.Label(), other.source));
      }
    }
    out.push_back(std::move(q));
    return Status::Ok();
  }));
  const toml::node* budgets = root_table.get("budgets");
  if (budgets == nullptr || budgets->as_table() == nullptr) return Status::Ok();
  for (auto&& [team, n] : *budgets->as_table()) {
    std::string source = fmt::format("{}:{}", file, LineOf(n));
    for (const QuotaSpec& q : out) {
      if (q.owner == QuotaSpec::Owner::kTeam && q.name == team.str() && q.period == QuotaPeriod::kMonth && q.budget) {
        return InvalidArgument(fmt::format("{}: budgets.{}: team {}'s monthly budget is set by the [[quota]] at {} too: keep one",
                                           source, team.str(), q.name, q.source));
      }
    }
    QuotaSpec q{.name = std::string(team.str()), .source = source};
    q.budget = goals.monthly_budgets.at(q.name);  // ReadBudgets read and checked it
    out.push_back(std::move(q));
  }
  return Status::Ok();
}


// [alerting] and its sinks.
Status ReadAlerting(const std::string& file, const toml::table& t, int64_t line, AlertingSection& s) {
  s.where = Where(file, line, "alerting");
  Reader r(file, t, s.where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"resend_interval", "alertmanager", "slack", "webhook", "route"}));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("resend_interval", s.resend_interval_ms));
  struct Sink {
    const char* name;
    const char* url_key;
    std::vector<AlertSinkTable>* out;
  };
  for (const Sink& sink : {Sink{"alertmanager", "url", &s.alertmanagers}, Sink{"slack", "webhook_url", &s.slack},
                           Sink{"webhook", "url", &s.webhooks}}) {
    GPULEDGER_RETURN_IF_ERROR(r.EachTable(sink.name, [&](const toml::table& tt, int64_t at) -> Status {
      AlertSinkTable table{.where = Where(file, at, fmt::format("alerting.{}", sink.name))};
      table.where.MarkArray();
      Reader e(file, tt, table.where);
      GPULEDGER_RETURN_IF_ERROR(e.Known({sink.url_key, "name"}));
      GPULEDGER_RETURN_IF_ERROR(e.String(sink.url_key, table.url));
      GPULEDGER_RETURN_IF_ERROR(e.String("name", table.name));
      if (!IsHttpUrl(table.url)) {
        if (!e.Has(sink.url_key)) {
          return InvalidArgument(fmt::format("{}: {} is required", table.where.Table(), sink.url_key));
        }
        return e.FailKey(sink.url_key, fmt::format("\"{}\": want an http:// or https:// URL", table.url));
      }
      sink.out->push_back(std::move(table));
      return Status::Ok();
    }));
  }
  return r.EachTable("route", [&](const toml::table& tt, int64_t at) -> Status {
    AlertRouteTable route{.where = Where(file, at, "alerting.route")};
    route.where.MarkArray();
    Reader e(file, tt, route.where);
    GPULEDGER_RETURN_IF_ERROR(e.Known({"team", "user", "slack", "webhook", "name"}));
    GPULEDGER_RETURN_IF_ERROR(e.String("team", route.team));
    GPULEDGER_RETURN_IF_ERROR(e.String("user", route.user));
    GPULEDGER_RETURN_IF_ERROR(e.String("slack", route.slack_url));
    GPULEDGER_RETURN_IF_ERROR(e.String("webhook", route.webhook_url));
    GPULEDGER_RETURN_IF_ERROR(e.String("name", route.name));
    if (route.team.empty() == route.user.empty()) {
      if (e.Has("user")) return e.FailKey("user", "a route is a team's or a user's: set team or user, not both");
      return InvalidArgument(fmt::format("{}: needs team = \"NAME\" or user = \"NAME\"", route.where.Table()));
    }
    if (route.slack_url.empty() && route.webhook_url.empty()) {
      return InvalidArgument(fmt::format("{}: needs slack = \"URL\" (an incoming webhook) or webhook = \"URL\", or both",
                                         route.where.Table()));
    }
    for (const char* key : {"slack", "webhook"}) {
      const std::string& url = std::string_view(key) == "slack" ? route.slack_url : route.webhook_url;
      if (e.Has(key) && !IsHttpUrl(url)) {
        return e.FailKey(key, fmt::format("\"{}\": want an http:// or https:// URL", url));
      }
    }
    const char* key = route.team.empty() ? "user" : "team";
    for (const AlertRouteTable& other : s.routes) {
      if (other.team == route.team && other.user == route.user) {
        return e.FailKey(key, fmt::format("{} \"{}\" is routed at {} too", key,
                                          route.team.empty() ? route.user : route.team, other.where.Source(key)));
      }
    }
    s.routes.push_back(std::move(route));
    return Status::Ok();
  });
}

}  // namespace

Result<Config> Load(const std::string& path) {
  GPULEDGER_ASSIGN_OR_RETURN(toml::table root, ParseFile(path));
  Config c;
  c.file = path;
  c.where = Where(path, 0, "");
  Reader r(path, root, c.where);
  GPULEDGER_RETURN_IF_ERROR(r.Known({"db", "store", "ledger", "price", "prices", "targets", "budgets", "server",
                                     "agent", "objective", "intervention", "alerting", "quota"}));
  GPULEDGER_RETURN_IF_ERROR(r.String("db", c.db_path));
  struct Section {
    const char* name;
    std::function<Status(const toml::table&, int64_t)> read;
  };
  for (const Section& s : {
           Section{"store", [&](const toml::table& t, int64_t l) { return ReadStore(path, t, l, c); }},
           Section{"ledger", [&](const toml::table& t, int64_t l) { return ReadLedger(path, t, l, c.ledger); }},
           Section{"prices", [&](const toml::table& t, int64_t l) { return ReadPricesSection(path, t, l, c); }},
           Section{"targets", [&](const toml::table& t, int64_t l) { return ReadTargets(path, t, l, c.goals); }},
           Section{"budgets", [&](const toml::table& t, int64_t l) { return ReadBudgets(path, t, l, c.goals); }},
           Section{"server", [&](const toml::table& t, int64_t l) { return ReadServer(path, t, l, c.server); }},
           Section{"agent", [&](const toml::table& t, int64_t l) { return ReadAgent(path, t, l, c.agent); }},
           Section{"alerting", [&](const toml::table& t, int64_t l) { return ReadAlerting(path, t, l, c.alerting); }},
       }) {
    GPULEDGER_ASSIGN_OR_RETURN(const toml::table* t, r.SubTable(s.name));
    if (t != nullptr) GPULEDGER_RETURN_IF_ERROR(s.read(*t, LineOf(*root.get(s.name))));
  }
  if (root.get("price") != nullptr) {
    GPULEDGER_ASSIGN_OR_RETURN(c.prices, ReadPrices(path, r));
  }
  GPULEDGER_RETURN_IF_ERROR(ReadObjectives(path, r, c.goals, c.objectives));
  GPULEDGER_RETURN_IF_ERROR(ReadInterventions(path, r, c.objectives, c.alerting, c.interventions));
  GPULEDGER_RETURN_IF_ERROR(ReadQuotas(path, root, r, c.goals, c.quotas));
  return c;
}

Result<std::vector<PriceEntry>> LoadPriceFile(const std::string& path) {
  GPULEDGER_ASSIGN_OR_RETURN(toml::table root, ParseFile(path));
  Where where(path, 0, "");
  Reader r(path, root, where);
  if (const toml::node* section = root.get("prices")) {
    return r.Fail(*section, "prices",
                  "a price file holds [[price]] tables only: the currency is set in gpuledger.toml's "
                  "[prices] (docs/configuration.md)");
  }
  GPULEDGER_RETURN_IF_ERROR(r.Known({"price"}));
  if (root.get("price") == nullptr) return InvalidArgument(fmt::format("{}: no [[price]] tables", path));
  return ReadPrices(path, r);
}

Result<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr == text.data()) {
    return InvalidArgument(fmt::format("size \"{}\": want a number of bytes or e.g. \"512MiB\"", text));
  }
  std::string_view unit = text.substr(static_cast<size_t>(ptr - text.data()));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  struct Unit {
    std::string_view name;
    uint64_t factor;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"B", 1},
                                    {"KiB", uint64_t{1} << 10},
                                    {"MiB", uint64_t{1} << 20},
                                    {"GiB", uint64_t{1} << 30},
                                    {"TiB", uint64_t{1} << 40},
                                    {"KB", 1'000},
                                    {"MB", 1'000'000},
                                    {"GB", 1'000'000'000},
                                    {"TB", 1'000'000'000'000}};
  for (const Unit& u : kUnits) {
    if (unit == u.name) {
      if (n > UINT64_MAX / u.factor) return InvalidArgument(fmt::format("size \"{}\": too large", text));
      return n * u.factor;
    }
  }
  return InvalidArgument(
      fmt::format("size \"{}\": unknown unit \"{}\" (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", text, unit));
}

namespace {

// A TOML basic string: quotes and backslashes escaped, control characters as \uXXXX.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A key, bare when TOML allows it.
std::string Key(std::string_view k) {
  bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '-';
  });
  return bare ? std::string(k) : Quote(k);
}

// A ratio written so that it reads back as the same double.
std::string Ratio(double v) { return fmt::format("{}", v); }

}  // namespace

std::string WriteGoalsAndPrices(const Goals& goals, const std::vector<PriceEntry>& prices,
                                const std::string& db_path, const Currency& currency) {
  std::string out;
  if (!db_path.empty()) out += fmt::format("db = {}\n\n", Quote(db_path));
  if (currency.is_set()) {
    out += fmt::format("[prices]\n{} = {}\n\n", currency.kind() == Currency::Kind::kIso4217 ? "currency" : "unit",
                       Quote(currency.name()));
  }
  for (const PriceEntry& e : prices) {
    out += fmt::format("[[price]]\nmodel = {}\npool = {}\ntype = {}\nper_gpu_hour = {}\n", Quote(e.model),
                       Quote(e.pool), Quote(CapacityTypeName(e.capacity_type)), Quote(e.per_gpu_hour.ToString()));
    if (e.valid.begin_ms != 0) out += fmt::format("from = {}\n", Quote(FormatTime(e.valid.begin_ms)));
    if (e.valid.end_ms != kForever) out += fmt::format("to = {}\n", Quote(FormatTime(e.valid.end_ms)));
    out += "\n";
  }
  out += fmt::format("[targets]\nfleet = {}\n", Ratio(goals.fleet_target));
  if (!goals.pool_targets.empty()) {
    out += "[targets.pools]\n";
    for (const auto& [pool, target] : goals.pool_targets) out += fmt::format("{} = {}\n", Key(pool), Ratio(target));
  }
  if (!goals.monthly_budgets.empty()) {
    out += "\n[budgets]\n";
    for (const auto& [team, amount] : goals.monthly_budgets) {
      out += fmt::format("{} = {}\n", Key(team), Quote(amount.ToString()));
    }
  }
  return out;
}

}  // namespace gpuledger::config
