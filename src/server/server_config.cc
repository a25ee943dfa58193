#include "server/server_config.h"

#include <fmt/format.h>

#include <set>

#include "wire/prometheus/labels.h"

namespace gpuledger::server {
namespace {

// A value the server parses with its own grammar: the failure names the value's FILE:LINE.
template <typename T>
Result<T> Checked(Result<T> parsed, const config::Where& where, std::string_view key) {
  if (!parsed.ok()) return parsed.status().WithContext(where.Of(key));
  return parsed;
}

Result<TokenEntry> TokenFrom(const config::TokenTable& t) {
  TokenEntry e;
  e.name = t.name;
  GPULEDGER_ASSIGN_OR_RETURN(e.role, Checked(ParseRole(t.role), t.where, "role"));
  GPULEDGER_RETURN_IF_ERROR(ParseTokenHash(t.hash, e).WithContext(t.where.Of("hash")));
  e.teams = t.teams;
  e.nodes = t.nodes;
  if (e.role == Role::kViewer && e.teams.empty()) {
    return InvalidArgument(fmt::format("{}: a viewer token needs teams = [...]", t.where.Table()));
  }
  if (e.role != Role::kAgent && !e.nodes.empty()) {
    return InvalidArgument(fmt::format("{}: only an agent token is bound to nodes", t.where.Of("nodes")));
  }
  for (const std::string& n : e.nodes) {
    if (n.empty() || n.find_first_not_of('*') == std::string::npos) {
      return InvalidArgument(fmt::format("{}: \"{}\" binds to no node or to every node; leave nodes out for that",
                                         t.where.Of("nodes"), n));
    }
  }
  return e;
}

Result<ScrapeTarget> ScrapeFrom(const config::ScrapeTable& t) {
  ScrapeTarget target;
  target.url = t.url;
  GPULEDGER_RETURN_IF_ERROR(Checked(SplitHttpUrl(t.url), t.where, "url").status());
  config::Overlay(t.interval_ms, target.interval_ms);
  config::Overlay(t.timeout_ms, target.timeout_ms);
  if (t.kind) {
    GPULEDGER_ASSIGN_OR_RETURN(target.kind, Checked(ParseScrapeKind(*t.kind), t.where, "kind"));
  }
  config::Overlay(t.job, target.job);
  if (target.kind == ScrapeKind::kDcgm && t.job) {
    return InvalidArgument(fmt::format(
        "{}: only for kind = \"serving\" or \"progress\" (a DCGM target's jobs come from its labels)",
        t.where.Of("job")));
  }
  if (target.kind != ScrapeKind::kDcgm && target.job.empty()) {
    return InvalidArgument(fmt::format("{}: kind \"{}\" needs job = \"<job id>\"", t.where.Table(),
                                       ScrapeKindName(target.kind)));
  }
  for (auto [key, from, to] : {std::tuple{"tokens_metric", &t.tokens_metric, &target.progress_metrics.tokens},
                               std::tuple{"model_flops_metric", &t.model_flops_metric,
                                          &target.progress_metrics.model_flops}}) {
    if (!from->has_value()) continue;
    if (target.kind != ScrapeKind::kProgress) {
      return InvalidArgument(fmt::format("{}: only for kind = \"progress\"", t.where.Of(key)));
    }
    *to = **from;
    if (!to->empty() && !prometheus::IsValidMetricName(*to)) {
      return InvalidArgument(fmt::format("{}: \"{}\" is not a metric name", t.where.Of(key), *to));
    }
  }
  if (target.kind == ScrapeKind::kProgress && target.progress_metrics.tokens.empty() &&
      target.progress_metrics.model_flops.empty()) {
    return InvalidArgument(
        fmt::format("{}: kind \"progress\" needs tokens_metric or model_flops_metric", t.where.Table()));
  }
  return target;
}

}  // namespace

Status ApplyServerConfig(const config::ServerSection& s, ServerOptions& o) {
  config::Overlay(s.listen, o.listen);
  config::Overlay(s.insecure, o.insecure);
  config::Overlay(s.max_body_bytes, o.limits.max_body_bytes);
  config::Overlay(s.max_samples_per_batch, o.limits.max_samples_per_batch);
  config::Overlay(s.threads, o.threads);
  config::Overlay(s.max_sample_age_ms, o.limits.max_sample_age_ms);
  config::Overlay(s.read_timeout_ms, o.read_timeout_ms);
  config::Overlay(s.write_timeout_ms, o.write_timeout_ms);
  config::Overlay(s.header_timeout_ms, o.header_timeout_ms);
  config::Overlay(s.body_timeout_ms, o.body_timeout_ms);
  config::Overlay(s.max_threads, o.max_threads);
  config::Overlay(s.max_connections_per_address, o.max_connections_per_address);
  config::Overlay(s.keep_alive_max_requests, o.keep_alive_max_requests);
  config::Overlay(s.keep_alive_timeout_ms, o.keep_alive_timeout_ms);
  config::Overlay(s.settle_interval_ms, o.settle_interval_ms);
  if (s.settle_days == false) o.settle_interval_ms = 0;
  config::Overlay(s.max_concurrent_decompressions, o.max_concurrent_decompressions);
  config::Overlay(s.max_device_hours, o.query_limits.max_device_hours);
  config::Overlay(s.max_rows, o.query_limits.max_rows);
  config::Overlay(s.max_series_cells, o.query_limits.max_series_cells);
  config::Overlay(s.max_heatmap_cells, o.query_limits.max_heatmap_cells);
  config::Overlay(s.max_rows_in_flight, o.query_limits.max_rows_in_flight);
  config::Overlay(s.max_job_sample_device_hours, o.query_limits.max_job_sample_device_hours);
  if (o.max_threads < o.threads) {
    return InvalidArgument(fmt::format("{}: max_threads ({}) is below threads ({})", s.where.Table(), o.max_threads,
                                       o.threads));
  }
  config::Overlay(s.remote_write_pool, o.prometheus.pool);
  config::Overlay(s.remote_write_capacity_type, o.prometheus.capacity_type);
  config::Overlay(s.remote_write_hold_timeout_ms, o.prometheus.hold_timeout_ms);

  for (const config::LabelRuleTable& t : s.label_rules) {
    prometheus::LabelRule r;
    r.label = t.label;
    r.match = t.regex ? prometheus::LabelRule::Match::kRegex : prometheus::LabelRule::Match::kEquals;
    r.pattern = t.regex ? *t.regex : t.equals.value_or("");
    r.team = t.team;
    r.project = t.project;
    o.prometheus.mapping.rules.push_back(std::move(r));
    // Each rule on its own, so that a bad regex names its table.
    prometheus::DcgmMappingConfig one;
    one.rules = {o.prometheus.mapping.rules.back()};
    GPULEDGER_RETURN_IF_ERROR(
        prometheus::DcgmMapper::Create(one).status().WithContext(t.where.Of(t.regex ? "regex" : "equals")));
  }
  std::set<std::string> names;
  for (const config::TokenTable& t : s.tokens) {
    if (t.name.empty() || !names.insert(t.name).second) {
      return InvalidArgument(fmt::format("{}: needs a unique name", t.where.Table()));
    }
    GPULEDGER_ASSIGN_OR_RETURN(TokenEntry e, TokenFrom(t));
    o.tokens.push_back(std::move(e));
  }
  // One target per job and kind: two progress targets would count the same work twice,
  // and two replicas' snapshots of one model would interleave into one series.
  std::set<std::pair<ScrapeKind, std::string>> bound_jobs;
  for (const config::ScrapeTable& t : s.scrapes) {
    GPULEDGER_ASSIGN_OR_RETURN(ScrapeTarget target, ScrapeFrom(t));
    if (target.kind != ScrapeKind::kDcgm && !bound_jobs.insert({target.kind, target.job}).second) {
      return InvalidArgument(fmt::format("{}: job \"{}\" has a {} target already (one per job: {})", t.where.Of("job"),
                                         target.job, ScrapeKindName(target.kind),
                                         target.kind == ScrapeKind::kProgress
                                             ? "export the job's total from one endpoint"
                                             : "give each replica its own job"));
    }
    o.scrape_targets.push_back(std::move(target));
  }
  return prometheus::DcgmMapper::Create(o.prometheus.mapping).status();
}

}  // namespace gpuledger::server
