// gpuledger.toml into each subsystem's options (docs/configuration.md lists every key).
//
// One reader for the whole file, one grammar per kind of value (durations as
// core's ParseDuration reads them, byte sizes, money as a decimal string, ratios, RFC 3339
// times), one error format: "FILE:LINE: TABLE.KEY: what is wrong", where LINE is the line
// of the offending value itself (of the table's header when a required key is missing).
// Unknown keys are errors in every table. The file is read whole: a command that uses one
// section still refuses a mistake in another, so that a typo never passes silently.
//
// The sections are plain structs of values; a key absent from the file is an empty
// optional, so that each subsystem keeps its own defaults and overlays what was set
// (config::Overlay). Values whose grammar belongs to a subsystem (a token's role and hash,
// a scrape target's kind and URL) are passed on as text with their origin, so that the
// subsystem's own parser can name FILE:LINE too (Where::Of).
//
// toml++ stays inside config.cc: no toml++ type appears here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/goals.h"
#include "core/model.h"
#include "core/objective.h"
#include "core/price_book.h"
#include "core/quota.h"
#include "core/status.h"

namespace gpuledger::config {

// Where the values of one table came from, so that an error raised after reading (by a
// subsystem, or by a check across keys) still points at the value. Copyable, cheap.
class Where {
 public:
  Where() = default;
  // `table` is the dotted table name ("agent", "server.token"); `line` its header's line
  // (0 for the file's root table).
  Where(std::string file, int64_t line, std::string table);

  // Records that `key`'s value sits on `line` of the file.
  void SetLine(std::string_view key, int64_t line);
  // Records that the flag `flag` (e.g. "--interval") set `key` after the file was read.
  void SetFlag(std::string_view key, std::string flag);

  // "FILE:LINE: TABLE.KEY" for a key read from the file, "FLAG" for a key a flag set,
  // "TABLE.KEY" for a key left at its default.
  std::string Of(std::string_view key) const;
  // "FILE:LINE: [TABLE]" (for an array of tables "[[TABLE]]"), or "[TABLE]" with no file.
  std::string Table() const;
  // "FILE:LINE" of `key`'s value, the flag that set it, or "" when it kept its default.
  std::string Source(std::string_view key) const;

  // Marks the table as one entry of an array of tables ("[[TABLE]]").
  void MarkArray() { array_ = true; }
  const std::string& table() const { return table_; }

 private:
  std::string file_;
  int64_t line_ = 0;
  std::string table_;
  bool array_ = false;
  std::map<std::string, std::string, std::less<>> sources_;  // key -> "FILE:LINE" or flag
};

// Copies a value the file set over a subsystem's default.
template <typename T, typename U>
void Overlay(const std::optional<T>& from_file, U& target) {
  if (from_file) target = static_cast<U>(*from_file);
}

// [ledger]
struct LedgerSection {
  std::optional<int64_t> staleness_limit_ms;
  std::optional<int64_t> max_future_skew_ms;
  std::optional<int64_t> raw_retention_ms;
  std::optional<int64_t> retire_after_ms;
  std::optional<uint64_t> store_max_bytes;  // store_max_size: a cap on the store's file
  Where where{"", 0, "ledger"};
};

// [[server.token]]: role and hash are checked by the server (server/auth.h).
struct TokenTable {
  std::string name;
  std::string role;
  std::string hash;
  std::vector<std::string> teams;
  std::vector<std::string> nodes;  // an agent's: the nodes it may report for
  Where where;
};

// [[server.label_rule]]: exactly one of equals or regex.
struct LabelRuleTable {
  std::string label;
  std::optional<std::string> equals;
  std::optional<std::string> regex;
  std::string team;
  std::string project;
  Where where;
};

// [[server.scrape]]: url, kind and the metric names are checked by the server.
struct ScrapeTable {
  std::string url;
  std::optional<int64_t> interval_ms;
  std::optional<int64_t> timeout_ms;
  std::optional<std::string> kind;
  std::optional<std::string> job;
  std::optional<std::string> tokens_metric;
  std::optional<std::string> model_flops_metric;
  Where where;
};

// [server], [server.remote_write] and the server's arrays of tables (docs/server.md).
struct ServerSection {
  bool present = false;  // the file has a [server] table
  std::optional<std::string> listen;
  std::optional<bool> insecure;
  std::optional<int64_t> max_body_bytes;
  std::optional<int64_t> max_samples_per_batch;
  std::optional<int64_t> threads;
  std::optional<int64_t> max_sample_age_ms;
  std::optional<int64_t> read_timeout_ms;
  std::optional<int64_t> write_timeout_ms;
  std::optional<int64_t> header_timeout_ms;
  std::optional<int64_t> body_timeout_ms;
  std::optional<int64_t> max_threads;
  std::optional<int64_t> max_connections_per_address;
  std::optional<int64_t> keep_alive_max_requests;
  std::optional<int64_t> keep_alive_timeout_ms;
  std::optional<int64_t> settle_interval_ms;  // how often a day that is over is looked for
  std::optional<bool> settle_days;            // false: days are never settled
  std::optional<int64_t> max_concurrent_decompressions;
  // [server.query_limits] (server/query_limits.h)
  std::optional<int64_t> max_device_hours;
  std::optional<int64_t> max_rows;
  std::optional<int64_t> max_series_cells;
  std::optional<int64_t> max_heatmap_cells;
  std::optional<int64_t> max_rows_in_flight;
  std::optional<int64_t> max_job_sample_device_hours;
  std::optional<std::string> remote_write_pool;
  std::optional<CapacityType> remote_write_capacity_type;
  std::optional<int64_t> remote_write_hold_timeout_ms;
  std::vector<LabelRuleTable> label_rules;
  std::vector<TokenTable> tokens;
  std::vector<ScrapeTable> scrapes;
  Where where{"", 0, "server"};
  Where remote_write_where{"", 0, "server.remote_write"};
};

// [agent] (docs/agent.md).
// [[agent.kubernetes.kind]]: the kind `kind` when the source `when` gives a value (equal
// to `equals` when set). Kinds and sources are checked by the agent (kube/pod_rules.h).
struct KubernetesKindTable {
  std::string kind;
  std::string when;
  std::optional<std::string> equals;
  Where where;
};

// [agent.kubernetes] (docs/agent.md): the kubelet's PodResources socket, the API server,
// and the pod rules; a rule list set here replaces that field's defaults.
struct KubernetesSection {
  std::optional<bool> enabled;
  std::optional<std::string> pod_resources_socket;
  std::optional<std::string> api_server;  // "none": kubelet facts only
  std::optional<std::string> token_file;
  std::optional<std::string> ca_file;
  std::optional<int64_t> stale_after_ms;
  std::optional<std::vector<std::string>> job, team, project, experiment, user;
  std::optional<std::vector<std::string>> keep;  // the labels and annotations jobs keep
  std::optional<std::vector<KubernetesKindTable>> kinds;
  Where where{"", 0, "agent.kubernetes"};
};

struct AgentSection {
  std::optional<std::string> server_url;
  std::optional<std::string> token;
  std::optional<std::string> token_file;
  std::optional<std::string> node;
  std::optional<std::string> pool;
  std::optional<CapacityType> capacity_type;
  std::optional<int64_t> interval_ms;
  std::optional<int64_t> push_interval_ms;
  std::optional<std::string> spool_dir;
  std::optional<uint64_t> spool_max_bytes;
  std::optional<std::string> listen;
  std::optional<std::string> mapping_file;
  std::optional<std::string> hpc_job_mapping_dir;
  std::optional<std::string> nvml_library;
  std::optional<std::string> proc_root;
  std::optional<bool> slurm;
  std::optional<std::string> scontrol;
  std::optional<std::string> exposition_labels;  // "dcgm" or "lint", checked by the agent
  KubernetesSection kubernetes;
  Where where{"", 0, "agent"};
};

// [[alerting.alertmanager]] url, [[alerting.slack]] webhook_url, [[alerting.webhook]] url:
// where alerts go (docs/objectives.md). The URL is checked by the sink (src/alerting).
struct AlertSinkTable {
  std::string url;
  std::optional<std::string> name;  // how counters and logs call it; default: the URL's host
  Where where;
};

// [[alerting.route]]: where the intervention rules' notices to the owners of one team's
// (or one user's) jobs go (docs/objectives.md, "Owner notices"): a Slack incoming webhook,
// a generic webhook, or both. Exactly one of team and user; no two routes for the same one.
struct AlertRouteTable {
  std::string team;  // empty when the route is a user's
  std::string user;
  std::string slack_url;    // `slack`; empty: none
  std::string webhook_url;  // `webhook`; empty: none
  std::optional<std::string> name;  // how counters and logs call its sinks; default: route-TEAM or route-USER
  Where where;
};

// [alerting]
struct AlertingSection {
  std::optional<int64_t> resend_interval_ms;  // how often a firing alert is sent again
  std::vector<AlertSinkTable> alertmanagers;
  std::vector<AlertSinkTable> slack;
  std::vector<AlertSinkTable> webhooks;
  std::vector<AlertRouteTable> routes;
  // Whether any sink is configured: an Alertmanager, a shared Slack or webhook, a route.
  bool HasSink() const { return !alertmanagers.empty() || !slack.empty() || !webhooks.empty() || !routes.empty(); }
  Where where{"", 0, "alerting"};
};

struct Config {
  std::string file;  // the file read; empty when there was none (every value its default)
  // `db`: the SQLite file, or a postgresql:// URL; `[store] url` says the same (one of the
  // two, not both). store::Open tells them apart.
  std::optional<std::string> db_path;
  // [store] day_cache_size: the memory each store (each replica) keeps whole days' day
  // rows in; absent, store::kDefaultDayCacheBytes.
  std::optional<uint64_t> day_cache_bytes;
  LedgerSection ledger;
  // [[price]]: checked as a price book (PriceBook::Create); absent: the store's book stays.
  std::optional<std::vector<PriceEntry>> prices;
  // [prices] currency = "EUR" (ISO 4217) or unit = "GPU credits": the whole book's
  // currency (core/currency.h); absent: an unnamed unit, said so on every figure.
  std::optional<Currency> currency;
  std::string currency_source;  // FILE:LINE of the key; empty when absent
  // [targets] and [budgets], each target with its source (Goals::TargetSourceFor).
  Goals goals;
  ServerSection server;
  AgentSection agent;
  // [[objective]] and [[intervention]] (docs/objectives.md), in file order, checked: names
  // unique, each kind's keys only where they mean something, an intervention's objective
  // one of the objectives. A budget objective without its own budget takes [budgets]'.
  std::vector<ObjectiveSpec> objectives;
  std::vector<InterventionRule> interventions;
  AlertingSection alerting;
  // [[quota]] (docs/quotas.md) in file order, then each [budgets] entry as a soft monthly
  // money budget of its team (its source the entry's FILE:LINE). No two alike
  // (QuotaSpec::Label), and no team's monthly budget set both ways.
  std::vector<QuotaSpec> quotas;
  Where where;  // the root table (db)
};

// Reads gpuledger.toml. On failure the message starts with "FILE:LINE" (of the value,
// or "FILE:LINE:COLUMN" for a TOML syntax error) and names the key.
Result<Config> Load(const std::string& path);

// Reads a file holding only [[price]] tables (`gpuledger prices set`), with the same
// rules as the config's [[price]]. Fails when the file has none.
Result<std::vector<PriceEntry>> LoadPriceFile(const std::string& path);

// "1GiB" -> 1073741824: a number of bytes with an optional unit B, KiB, MiB, GiB, TiB
// (or KB, MB, GB, TB as powers of 1000); a space may separate them. Fails naming the text.
Result<uint64_t> ParseByteSize(std::string_view text);

// Writes a config that Load reads back to the same values: `db` (when not empty), the
// [prices] (when `currency` is set), the [[price]], [targets] and [budgets] tables. The
// demo writes its fleet's this way, so that every command judging its targets can be
// given the same file.
std::string WriteGoalsAndPrices(const Goals& goals, const std::vector<PriceEntry>& prices,
                                const std::string& db_path = "", const Currency& currency = {});

}  // namespace gpuledger::config
