#include "server/server_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <set>

#include "wire/prometheus/labels.h"

namespace gpuledger::server {
namespace {

std::string Where(const std::string& path, const toml::node& n) {
  return fmt::format("{}:{}", path, n.source().begin.line);
}

Status CheckKeys(const std::string& path, const std::string& table_name, const toml::table& t,
                 std::initializer_list<std::string_view> allowed) {
  for (auto&& [k, n] : t) {
    if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end()) {
      return InvalidArgument(fmt::format("{}: {}.{}: unknown key", Where(path, n), table_name, k.str()));
    }
  }
  return Status::Ok();
}

// Reads string key `key` of `t` into `out` when present.
Status Text(const std::string& path, const toml::table& t, const char* key, std::string& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value<std::string>();
  if (!v) return InvalidArgument(fmt::format("{}: {}: want a string", Where(path, *n), key));
  out = *v;
  return Status::Ok();
}

Status Duration(const std::string& path, const toml::table& t, const char* key, int64_t& out_ms) {
  std::string text;
  GPULEDGER_RETURN_IF_ERROR(Text(path, t, key, text));
  if (text.empty()) return Status::Ok();
  auto d = ParseDuration(text);
  if (!d.ok()) return InvalidArgument(fmt::format("{}: {}: {}", Where(path, *t.get(key)), key, d.status().message()));
  out_ms = *d;
  return Status::Ok();
}

template <typename T>
Status Integer(const std::string& path, const toml::table& t, const char* key, T& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value<int64_t>();
  if (!v || *v <= 0) return InvalidArgument(fmt::format("{}: {}: want a positive integer", Where(path, *n), key));
  out = static_cast<T>(*v);
  return Status::Ok();
}

template <typename Fn>
Status EachTable(const std::string& path, const toml::table& t, const char* key, Fn fn) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const toml::array* a = n->as_array();
  if (a == nullptr) return InvalidArgument(fmt::format("{}: use [[server.{}]] tables", Where(path, *n), key));
  for (const toml::node& item : *a) {
    const toml::table* it = item.as_table();
    if (it == nullptr) return InvalidArgument(fmt::format("{}: [[server.{}]] must be a table", Where(path, item), key));
    GPULEDGER_RETURN_IF_ERROR(fn(*it, Where(path, item)));
  }
  return Status::Ok();
}

}  // namespace

Status LoadServerConfig(const std::string& path, ServerOptions& o) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                                       e.description()));
  }
  const toml::node* node = root.get("server");
  if (node == nullptr) return Status::Ok();
  const toml::table* s = node->as_table();
  if (s == nullptr) return InvalidArgument(fmt::format("{}: [server] must be a table", Where(path, *node)));
  GPULEDGER_RETURN_IF_ERROR(CheckKeys(path, "server", *s,
                                      {"listen", "insecure", "max_body_bytes", "max_samples_per_batch",
                                       "max_sample_age", "read_timeout", "write_timeout", "threads",
                                       "remote_write", "label_rule", "token", "scrape"}));
  GPULEDGER_RETURN_IF_ERROR(Text(path, *s, "listen", o.listen));
  if (const toml::node* n = s->get("insecure")) {
    auto v = n->value<bool>();
    if (!v) return InvalidArgument(fmt::format("{}: insecure: want true or false", Where(path, *n)));
    o.insecure = *v;
  }
  GPULEDGER_RETURN_IF_ERROR(Integer(path, *s, "max_body_bytes", o.limits.max_body_bytes));
  GPULEDGER_RETURN_IF_ERROR(Integer(path, *s, "max_samples_per_batch", o.limits.max_samples_per_batch));
  GPULEDGER_RETURN_IF_ERROR(Integer(path, *s, "threads", o.threads));
  GPULEDGER_RETURN_IF_ERROR(Duration(path, *s, "max_sample_age", o.limits.max_sample_age_ms));
  GPULEDGER_RETURN_IF_ERROR(Duration(path, *s, "read_timeout", o.read_timeout_ms));
  GPULEDGER_RETURN_IF_ERROR(Duration(path, *s, "write_timeout", o.write_timeout_ms));

  if (const toml::node* n = s->get("remote_write")) {
    const toml::table* rw = n->as_table();
    if (rw == nullptr) return InvalidArgument(fmt::format("{}: [server.remote_write] must be a table", Where(path, *n)));
    GPULEDGER_RETURN_IF_ERROR(CheckKeys(path, "server.remote_write", *rw, {"pool", "capacity_type", "hold_timeout"}));
    GPULEDGER_RETURN_IF_ERROR(Text(path, *rw, "pool", o.prometheus.pool));
    std::string type;
    GPULEDGER_RETURN_IF_ERROR(Text(path, *rw, "capacity_type", type));
    if (!type.empty()) {
      auto ct = ParseCapacityType(type);
      if (!ct.ok()) return ct.status().WithContext(Where(path, *rw->get("capacity_type")));
      o.prometheus.capacity_type = *ct;
    }
    GPULEDGER_RETURN_IF_ERROR(Duration(path, *rw, "hold_timeout", o.prometheus.hold_timeout_ms));
  }
  GPULEDGER_RETURN_IF_ERROR(EachTable(path, *s, "label_rule", [&](const toml::table& t, const std::string& where) {
    GPULEDGER_RETURN_IF_ERROR(CheckKeys(path, "server.label_rule", t, {"label", "equals", "regex", "team", "project"}));
    prometheus::LabelRule r;
    std::string equals, regex;
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "label", r.label));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "equals", equals));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "regex", regex));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "team", r.team));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "project", r.project));
    if (r.label.empty() || (equals.empty() == regex.empty())) {
      return InvalidArgument(fmt::format("{}: [[server.label_rule]] needs label and one of equals or regex", where));
    }
    r.match = regex.empty() ? prometheus::LabelRule::Match::kEquals : prometheus::LabelRule::Match::kRegex;
    r.pattern = regex.empty() ? equals : regex;
    o.prometheus.mapping.rules.push_back(std::move(r));
    return Status::Ok();
  }));
  std::set<std::string> names;
  GPULEDGER_RETURN_IF_ERROR(EachTable(path, *s, "token", [&](const toml::table& t, const std::string& where) {
    GPULEDGER_RETURN_IF_ERROR(CheckKeys(path, "server.token", t, {"name", "role", "hash", "teams"}));
    TokenEntry e;
    std::string role, hash;
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "name", e.name));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "role", role));
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "hash", hash));
    if (e.name.empty() || !names.insert(e.name).second) {
      return InvalidArgument(fmt::format("{}: [[server.token]] needs a unique name", where));
    }
    auto r = ParseRole(role);
    if (!r.ok()) return r.status().WithContext(where);
    e.role = *r;
    GPULEDGER_RETURN_IF_ERROR(ParseTokenHash(hash, e).WithContext(where));
    if (const toml::node* n = t.get("teams")) {
      const toml::array* a = n->as_array();
      if (a == nullptr) return InvalidArgument(fmt::format("{}: teams: want a list of strings", where));
      for (const toml::node& team : *a) {
        auto v = team.value<std::string>();
        if (!v) return InvalidArgument(fmt::format("{}: teams: want a list of strings", where));
        e.teams.push_back(*v);
      }
    }
    if (e.role == Role::kViewer && e.teams.empty()) {
      return InvalidArgument(fmt::format("{}: a viewer token needs teams = [...]", where));
    }
    o.tokens.push_back(std::move(e));
    return Status::Ok();
  }));
  std::set<std::pair<ScrapeKind, std::string>> bound_jobs;
  GPULEDGER_RETURN_IF_ERROR(EachTable(path, *s, "scrape", [&](const toml::table& t, const std::string& where) {
    GPULEDGER_RETURN_IF_ERROR(CheckKeys(path, "server.scrape", t,
                                        {"url", "interval", "timeout", "kind", "job", "tokens_metric",
                                         "model_flops_metric"}));
    ScrapeTarget target;
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "url", target.url));
    auto split = SplitHttpUrl(target.url);
    if (!split.ok()) return split.status().WithContext(where);
    GPULEDGER_RETURN_IF_ERROR(Duration(path, t, "interval", target.interval_ms));
    GPULEDGER_RETURN_IF_ERROR(Duration(path, t, "timeout", target.timeout_ms));
    std::string kind;
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "kind", kind));
    if (!kind.empty()) {
      auto k = ParseScrapeKind(kind);
      if (!k.ok()) return k.status().WithContext(Where(path, *t.get("kind")));
      target.kind = *k;
    }
    GPULEDGER_RETURN_IF_ERROR(Text(path, t, "job", target.job));
    if (target.kind == ScrapeKind::kDcgm && t.get("job") != nullptr) {
      return InvalidArgument(fmt::format("{}: job: only for kind = \"serving\" or \"progress\" (a DCGM "
                                         "target's jobs come from its labels)",
                                         Where(path, *t.get("job"))));
    }
    if (target.kind != ScrapeKind::kDcgm && target.job.empty()) {
      return InvalidArgument(fmt::format("{}: [[server.scrape]] of kind \"{}\" needs job = \"<job id>\"", where,
                                         ScrapeKindName(target.kind)));
    }
    for (auto [key, name] : {std::pair{"tokens_metric", &target.progress_metrics.tokens},
                             std::pair{"model_flops_metric", &target.progress_metrics.model_flops}}) {
      const toml::node* n = t.get(key);
      if (n == nullptr) continue;
      if (target.kind != ScrapeKind::kProgress) {
        return InvalidArgument(fmt::format("{}: {}: only for kind = \"progress\"", Where(path, *n), key));
      }
      GPULEDGER_RETURN_IF_ERROR(Text(path, t, key, *name));
      if (!name->empty() && !prometheus::IsValidMetricName(*name)) {
        return InvalidArgument(fmt::format("{}: {}: \"{}\" is not a metric name", Where(path, *n), key, *name));
      }
    }
    if (target.kind == ScrapeKind::kProgress) {
      if (target.progress_metrics.tokens.empty() && target.progress_metrics.model_flops.empty()) {
        return InvalidArgument(
            fmt::format("{}: [[server.scrape]] of kind \"progress\" needs tokens_metric or model_flops_metric",
                        where));
      }
    }
    // One target per job and kind: two progress targets would count the same work twice,
    // and two replicas' snapshots of one model would interleave into one series.
    if (target.kind != ScrapeKind::kDcgm && !bound_jobs.insert({target.kind, target.job}).second) {
      return InvalidArgument(fmt::format("{}: job \"{}\" has a {} target already (one per job: {})",
                                         Where(path, *t.get("job")), target.job, ScrapeKindName(target.kind),
                                         target.kind == ScrapeKind::kProgress
                                             ? "export the job's total from one endpoint"
                                             : "give each replica its own job"));
    }
    o.scrape_targets.push_back(std::move(target));
    return Status::Ok();
  }));
  return prometheus::DcgmMapper::Create(o.prometheus.mapping).status().WithContext(
      fmt::format("{}: [[server.label_rule]]", path));
}

}  // namespace gpuledger::server
