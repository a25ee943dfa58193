#include "sim/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/csv.h"
#include "core/time.h"

namespace gpuledger::sim {

std::string RunLabel(const SimResult& r, bool with_cluster) {
  std::string label = r.policy;
  if (!r.durations.empty() && r.durations != "oracle") label += ":" + r.durations;
  if (r.placement != "topology") label += "/" + r.placement;
  if (with_cluster) label += "@" + r.cluster;
  return label;
}

namespace {

bool ClustersDiffer(const std::vector<SimResult>& runs) {
  return std::any_of(runs.begin(), runs.end(), [&](const SimResult& r) { return r.cluster != runs.front().cluster; });
}

std::string Percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100.0); }

size_t SloMet(const SimResult& r) {
  return static_cast<size_t>(std::count_if(r.queues.begin(), r.queues.end(), [](const QueueSummary& q) { return q.slo_met; }));
}

// "+12%" / "-40%" for a change of a positive figure; "n/a" from zero.
std::string Change(double from, double to) {
  if (from == 0) return to == 0 ? "no change" : "from zero";
  const double pct = (to - from) / from * 100.0;
  if (std::fabs(pct) < 0.05) return "no change";
  return fmt::format("{:+.1f}%", pct);
}

}  // namespace

Result<OutputFormat> ParseOutputFormat(std::string_view text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  return InvalidArgument(fmt::format("unknown output '{}' (table, json, csv)", text));
}

std::string HumanDuration(int64_t ms) {
  if (ms < 0) return fmt::format("-{}", HumanDuration(-ms));
  if (ms < kMsPerSecond) return fmt::format("{}ms", ms);
  if (ms < kMsPerMinute) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
  const int64_t s = ms / kMsPerSecond;
  if (ms < kMsPerHour) return fmt::format("{}m {:02}s", s / 60, s % 60);
  if (ms < kMsPerDay) return fmt::format("{}h {:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d {}h", s / 86400, (s % 86400) / 3600);
}

std::string SloLabel(int64_t wait_ms) {
  // "10m" rather than "10m 00s": the wait limit is a setting, usually whole minutes.
  std::string wait = wait_ms > 0 && wait_ms % kMsPerMinute == 0 && wait_ms < kMsPerHour
                         ? fmt::format("{}m", wait_ms / kMsPerMinute)
                         : HumanDuration(wait_ms);
  return fmt::format("SLO (GPUs started within {})", wait);
}

std::string SloText(double granted_ratio, double target_ratio, bool met) {
  return fmt::format("{}, target {:g}%: {}", Percent(granted_ratio), target_ratio * 100.0, met ? "met" : "MISSED");
}

std::vector<std::string> DescribeDifferences(const std::vector<SimResult>& runs) {
  std::vector<std::string> out;
  if (runs.size() < 2) return out;
  const bool clusters = ClustersDiffer(runs);
  const SimResult& base = runs.front();
  for (size_t i = 1; i < runs.size(); ++i) {
    const SimResult& r = runs[i];
    if (r.wait.mean_ms == base.wait.mean_ms && r.wait.p95_ms == base.wait.p95_ms &&
        r.completion.mean_ms == base.completion.mean_ms && r.allocated_tick_ms == base.allocated_tick_ms &&
        r.makespan_ms == base.makespan_ms && r.cost == base.cost && r.preemptions == base.preemptions &&
        SloMet(r) == SloMet(base)) {
      out.push_back(fmt::format("{} against {}: no difference in waits, completion, utilization, makespan, cost, "
                                "preemptions or SLOs",
                                RunLabel(r, clusters), RunLabel(base, clusters)));
      continue;
    }
    std::string s = fmt::format("{} against {}: mean wait {} -> {} ({}), p95 wait {} -> {} ({}); "
                                "mean completion {} -> {} ({}); allocated utilization {} -> {} ({:+.1f} pts); "
                                "makespan {} -> {} ({}); cost {} -> {}; preemptions {} -> {}; "
                                "queues meeting the SLO {} -> {} of {}",
                                RunLabel(r, clusters), RunLabel(base, clusters),
                                HumanDuration(static_cast<int64_t>(base.wait.mean_ms)),
                                HumanDuration(static_cast<int64_t>(r.wait.mean_ms)), Change(base.wait.mean_ms, r.wait.mean_ms),
                                HumanDuration(base.wait.p95_ms), HumanDuration(r.wait.p95_ms),
                                Change(static_cast<double>(base.wait.p95_ms), static_cast<double>(r.wait.p95_ms)),
                                HumanDuration(static_cast<int64_t>(base.completion.mean_ms)),
                                HumanDuration(static_cast<int64_t>(r.completion.mean_ms)),
                                Change(base.completion.mean_ms, r.completion.mean_ms), Percent(base.allocated_ratio),
                                Percent(r.allocated_ratio), (r.allocated_ratio - base.allocated_ratio) * 100.0,
                                HumanDuration(base.makespan_ms), HumanDuration(r.makespan_ms),
                                Change(static_cast<double>(base.makespan_ms), static_cast<double>(r.makespan_ms)),
                                base.cost.ToDisplay(), r.cost.ToDisplay(), base.preemptions, r.preemptions, SloMet(base),
                                SloMet(r), r.queues.size());
    out.push_back(std::move(s));
  }
  return out;
}

std::string RenderTable(const std::vector<SimResult>& runs) {
  if (runs.empty()) return "no runs\n";
  const bool clusters = ClustersDiffer(runs);
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto row = [&](std::string name, auto cell) {
    std::vector<std::string> cells;
    for (const auto& r : runs) cells.push_back(cell(r));
    rows.emplace_back(std::move(name), std::move(cells));
  };
  row("run", [&](const SimResult& r) { return RunLabel(r, clusters); });
  row("jobs completed", [](const SimResult& r) { return fmt::format("{}/{}", r.completed, r.jobs); });
  row("unschedulable", [](const SimResult& r) { return fmt::format("{}", r.unschedulable); });
  row("starved (left pending)", [](const SimResult& r) { return fmt::format("{}", r.starved); });
  row("failed", [](const SimResult& r) { return fmt::format("{}", r.failed); });
  row("restarts", [](const SimResult& r) { return fmt::format("{}", r.restarts); });
  row("durations known", [](const SimResult& r) { return r.durations.empty() ? std::string("none") : r.durations; });
  row("makespan", [](const SimResult& r) { return HumanDuration(r.makespan_ms); });
  row("allocated utilization", [](const SimResult& r) { return Percent(r.allocated_ratio); });
  row("active utilization", [](const SimResult& r) { return r.active_ratio ? Percent(*r.active_ratio) : std::string("-"); });
  row("wait mean", [](const SimResult& r) { return HumanDuration(static_cast<int64_t>(r.wait.mean_ms)); });
  row("wait p50", [](const SimResult& r) { return HumanDuration(r.wait.p50_ms); });
  row("wait p95", [](const SimResult& r) { return HumanDuration(r.wait.p95_ms); });
  row("wait p99", [](const SimResult& r) { return HumanDuration(r.wait.p99_ms); });
  row("completion mean", [](const SimResult& r) { return HumanDuration(static_cast<int64_t>(r.completion.mean_ms)); });
  row("completion p95", [](const SimResult& r) { return HumanDuration(r.completion.p95_ms); });
  row("slowdown mean", [](const SimResult& r) { return fmt::format("{:.2f}", r.slowdown.mean); });
  row("slowdown p95", [](const SimResult& r) { return fmt::format("{:.2f}", r.slowdown.p95); });
  row("GPU-hours", [](const SimResult& r) { return fmt::format("{:.1f}", r.gpu_hours); });
  row("failed GPU-hours", [](const SimResult& r) { return fmt::format("{:.1f}", r.failed_gpu_hours); });
  row("cost", [](const SimResult& r) { return r.cost.ToDisplay(); });
  row("preemptions", [](const SimResult& r) { return fmt::format("{}", r.preemptions); });
  row("queues meeting SLO", [](const SimResult& r) { return fmt::format("{}/{}", SloMet(r), r.queues.size()); });
  row("conservation", [](const SimResult& r) { return r.conservation.ok() ? std::string("ok") : std::string("FAILED"); });
  // Each queue: its SLO (share of requested GPUs granted within the wait limit), then
  // its wait, completion and slowdown (mean / p95).
  constexpr size_t kMaxQueueRows = 40;
  const auto& queues = runs.front().queues;
  for (size_t q = 0; q < queues.size() && q < kMaxQueueRows; ++q) {
    auto queue_row = [&](const std::string& what, auto cell) {
      row(fmt::format("{} {}", queues[q].name, what), [&](const SimResult& r) {
        auto it = std::find_if(r.queues.begin(), r.queues.end(), [&](const QueueSummary& x) { return x.name == queues[q].name; });
        return it == r.queues.end() ? std::string("-") : cell(*it);
      });
    };
    queue_row(SloLabel(queues[q].slo_wait_ms), [](const QueueSummary& x) {
      return SloText(x.slo_granted_ratio, x.slo_target_ratio, x.slo_met);
    });
    queue_row("wait mean/p95", [](const QueueSummary& x) {
      return HumanDuration(static_cast<int64_t>(x.wait.mean_ms)) + " / " + HumanDuration(x.wait.p95_ms);
    });
    queue_row("completion mean/p95", [](const QueueSummary& x) {
      return HumanDuration(static_cast<int64_t>(x.completion.mean_ms)) + " / " + HumanDuration(x.completion.p95_ms);
    });
    queue_row("slowdown mean/p95", [](const QueueSummary& x) { return fmt::format("{:.2f} / {:.2f}", x.slowdown.mean, x.slowdown.p95); });
  }
  size_t name_width = 0;
  std::vector<size_t> widths(runs.size(), 0);
  for (const auto& [name, cells] : rows) {
    name_width = std::max(name_width, name.size());
    for (size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
  }
  std::string out;
  for (const auto& [name, cells] : rows) {
    out += fmt::format("{:<{}}", name, name_width);
    for (size_t i = 0; i < cells.size(); ++i) out += fmt::format("  {:>{}}", cells[i], widths[i]);
    out += '\n';
  }
  if (queues.size() > kMaxQueueRows) {
    out += fmt::format("({} more queues in --report-format json or csv)\n", queues.size() - kMaxQueueRows);
  }
  for (const auto& r : runs) {
    if (!r.conservation.ok()) out += fmt::format("{}: {}\n", RunLabel(r, clusters), r.conservation.message());
  }
  const auto diffs = DescribeDifferences(runs);
  if (!diffs.empty()) {
    out += "\nDifferences:\n";
    for (const auto& d : diffs) out += "- " + d + "\n";
  }
  return out;
}

namespace {
nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50_seconds", static_cast<double>(p.p50_ms) / 1000.0},
          {"p95_seconds", static_cast<double>(p.p95_ms) / 1000.0},
          {"p99_seconds", static_cast<double>(p.p99_ms) / 1000.0},
          {"mean_seconds", p.mean_ms / 1000.0}};
}
nlohmann::json RatiosJson(const RatioPercentiles& p) {
  return {{"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}, {"mean", p.mean}};
}
}  // namespace

std::string RenderJson(const std::vector<SimResult>& runs) {
  nlohmann::json doc;
  doc["runs"] = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json j;
    j["cluster"] = r.cluster;
    j["policy"] = r.policy;
    j["durations"] = r.durations.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.durations);
    j["placement"] = r.placement;
    j["jobs"] = r.jobs;
    j["completed"] = r.completed;
    j["unschedulable"] = r.unschedulable;
    j["starved"] = r.starved;
    j["failed"] = r.failed;
    j["restarts"] = r.restarts;
    j["failed_gpu_hours"] = r.failed_gpu_hours;
    j["begin"] = FormatTime(r.begin_ms);
    j["end"] = FormatTime(r.end_ms);
    j["makespan_seconds"] = static_cast<double>(r.makespan_ms) / 1000.0;
    j["wait"] = PercentilesJson(r.wait);
    j["completion"] = PercentilesJson(r.completion);
    j["slowdown"] = RatiosJson(r.slowdown);
    j["allocated_ratio"] = r.allocated_ratio;
    j["active_ratio"] = r.active_ratio ? nlohmann::json(*r.active_ratio) : nlohmann::json(nullptr);
    j["gpu_hours"] = r.gpu_hours;
    j["cost"] = r.cost.ToString();
    j["preemptions"] = r.preemptions;
    j["conservation"] = r.conservation.ok() ? "ok" : r.conservation.message();
    j["pools"] = nlohmann::json::array();
    for (const auto& p : r.pools) {
      j["pools"].push_back({{"name", p.name}, {"gpus", p.gpus}, {"gpu_hours", p.gpu_hours},
                            {"allocated_ratio", p.allocated_ratio}, {"cost", p.cost.ToString()}});
    }
    j["queues"] = nlohmann::json::array();
    for (const auto& q : r.queues) {
      j["queues"].push_back({{"name", q.name}, {"jobs", q.jobs}, {"wait", PercentilesJson(q.wait)},
                             {"completion", PercentilesJson(q.completion)}, {"slowdown", RatiosJson(q.slowdown)},
                             {"gpu_hours", q.gpu_hours}, {"cost", q.cost.ToString()},
                             {"slo_granted_ratio", q.slo_granted_ratio}, {"slo_met", q.slo_met}});
    }
    doc["runs"].push_back(std::move(j));
  }
  doc["differences"] = DescribeDifferences(runs);
  return doc.dump(2) + "\n";
}

namespace {
std::string Secs(int64_t ms) { return fmt::format("{:.3f}", static_cast<double>(ms) / 1000.0); }
std::string Secs(double ms) { return fmt::format("{:.3f}", ms / 1000.0); }
std::string Ratio(double v) { return fmt::format("{:.4f}", v); }
// The wait, completion and slowdown columns, in the header's order.
void AppendDistributions(std::vector<std::string>& f, const Percentiles& wait, const Percentiles& completion,
                         const RatioPercentiles& slowdown) {
  for (const Percentiles* p : {&wait, &completion}) {
    f.push_back(Secs(p->mean_ms));
    f.push_back(Secs(p->p50_ms));
    f.push_back(Secs(p->p95_ms));
    f.push_back(Secs(p->p99_ms));
  }
  for (double v : {slowdown.mean, slowdown.p50, slowdown.p95, slowdown.p99}) f.push_back(Ratio(v));
}
}  // namespace

std::string RenderSummaryCsv(const std::vector<SimResult>& runs) {
  std::string out = CsvRow(
      {"scope", "cluster", "policy", "durations", "placement", "queue", "jobs", "completed", "failed", "restarts",
       "unschedulable", "starved", "makespan_s", "allocated_ratio", "active_ratio", "wait_mean_s", "wait_p50_s",
       "wait_p95_s", "wait_p99_s", "completion_mean_s", "completion_p50_s", "completion_p95_s", "completion_p99_s",
       "slowdown_mean", "slowdown_p50", "slowdown_p95", "slowdown_p99", "gpu_hours", "failed_gpu_hours", "cost",
       "preemptions", "queues", "queues_slo_met", "slo_granted_ratio", "slo_met", "conservation"});
  for (const auto& r : runs) {
    std::vector<std::string> f{"run",
                               r.cluster,
                               r.policy,
                               r.durations,
                               r.placement,
                               "",
                               std::to_string(r.jobs),
                               std::to_string(r.completed),
                               std::to_string(r.failed),
                               std::to_string(r.restarts),
                               std::to_string(r.unschedulable),
                               std::to_string(r.starved),
                               Secs(r.makespan_ms),
                               fmt::format("{:.6f}", r.allocated_ratio),
                               r.active_ratio ? fmt::format("{:.6f}", *r.active_ratio) : std::string()};
    AppendDistributions(f, r.wait, r.completion, r.slowdown);
    for (std::string v : {fmt::format("{:.3f}", r.gpu_hours), fmt::format("{:.3f}", r.failed_gpu_hours), r.cost.ToString(),
                          std::to_string(r.preemptions), std::to_string(r.queues.size()), std::to_string(SloMet(r)),
                          std::string(), std::string(),
                          r.conservation.ok() ? std::string("ok") : std::string(r.conservation.message())}) {
      f.push_back(std::move(v));
    }
    out += CsvRow(f);
    for (const auto& q : r.queues) {
      std::vector<std::string> g{"queue", r.cluster, r.policy, r.durations, r.placement, q.name, std::to_string(q.jobs)};
      g.resize(15);  // completed .. active_ratio: run-wide figures
      AppendDistributions(g, q.wait, q.completion, q.slowdown);
      for (std::string v : {fmt::format("{:.3f}", q.gpu_hours), std::string(), q.cost.ToString(), std::string(),
                            std::string(), std::string(), Ratio(q.slo_granted_ratio),
                            std::string(q.slo_met ? "true" : "false"), std::string()}) {
        g.push_back(std::move(v));
      }
      out += CsvRow(g);
    }
  }
  return out;
}

namespace {
// What a job's GPUs read as: "2" for whole GPUs, "0.4286" for a share.
std::string GpusText(const SimJob& j) {
  if (j.gpus > 0) return std::to_string(j.gpus);
  return fmt::format("{:.4f}", static_cast<double>(j.share_ticks) / kTicksPerGpu);
}

struct JobFigures {
  std::string start, end, wait_s, completion_s, slowdown, pool;
};

JobFigures FiguresOf(const SimJob& j, const JobOutcome& o, const SimResult& r) {
  JobFigures f;
  if (o.start_ms >= 0) {
    f.start = FormatTime(o.start_ms);
    f.wait_s = Secs(o.start_ms - j.submit_ms);
  }
  if (o.end_ms >= 0) f.end = FormatTime(o.end_ms);
  if (o.status == JobStatus::kCompleted && o.end_ms >= 0) {
    f.completion_s = Secs(o.end_ms - j.submit_ms);
    f.slowdown = Ratio(static_cast<double>(o.end_ms - j.submit_ms) / static_cast<double>(j.duration_ms));
  }
  if (o.pool >= 0 && static_cast<size_t>(o.pool) < r.pools.size()) f.pool = r.pools[static_cast<size_t>(o.pool)].name;
  return f;
}

// Calls `each(label, run, job, outcome, figures)` for every job of every run.
template <typename Each>
void ForEachOutcome(const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs, Each each) {
  const bool clusters = ClustersDiffer(runs);
  for (const auto& r : runs) {
    const std::string label = RunLabel(r, clusters);
    for (size_t i = 0; i < jobs.size() && i < r.outcomes.size(); ++i) {
      each(label, r, jobs[i], r.outcomes[i], FiguresOf(jobs[i], r.outcomes[i], r));
    }
  }
}
}  // namespace

std::string RenderJobsCsv(const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs) {
  std::string out = CsvRow({"run", "cluster", "policy", "placement", "job_id", "queue", "gpus", "submit", "start", "end",
                            "wait_s", "completion_s", "slowdown", "preemptions", "restarts", "status", "pool", "nodes"});
  ForEachOutcome(jobs, runs, [&](const std::string& label, const SimResult& r, const SimJob& j, const JobOutcome& o,
                                 const JobFigures& f) {
    out += CsvRow({label, r.cluster, r.policy, r.placement, j.id, j.queue, GpusText(j), FormatTime(j.submit_ms), f.start,
                   f.end, f.wait_s, f.completion_s, f.slowdown, std::to_string(o.preemptions),
                   std::to_string(o.restarts), std::string(JobStatusName(o.status)), f.pool, o.nodes});
  });
  return out;
}

std::string RenderJobsNdjson(const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs) {
  std::string out;
  auto or_null = [](const std::string& v, bool number) -> nlohmann::json {
    if (v.empty()) return nullptr;
    return number ? nlohmann::json(std::stod(v)) : nlohmann::json(v);
  };
  ForEachOutcome(jobs, runs, [&](const std::string& label, const SimResult& r, const SimJob& j, const JobOutcome& o,
                                 const JobFigures& f) {
    nlohmann::json line = {{"run", label},
                           {"cluster", r.cluster},
                           {"policy", r.policy},
                           {"placement", r.placement},
                           {"job_id", j.id},
                           {"queue", j.queue},
                           {"gpus", j.gpus > 0 ? static_cast<double>(j.gpus)
                                               : static_cast<double>(j.share_ticks) / kTicksPerGpu},
                           {"submit", FormatTime(j.submit_ms)},
                           {"start", or_null(f.start, false)},
                           {"end", or_null(f.end, false)},
                           {"wait_s", or_null(f.wait_s, true)},
                           {"completion_s", or_null(f.completion_s, true)},
                           {"slowdown", or_null(f.slowdown, true)},
                           {"preemptions", o.preemptions},
                           {"restarts", o.restarts},
                           {"status", JobStatusName(o.status)},
                           {"pool", or_null(f.pool, false)},
                           {"nodes", or_null(o.nodes, false)}};
    out += line.dump() + "\n";
  });
  return out;
}

std::string RenderTimeseriesCsv(const std::vector<SimResult>& runs) {
  std::string out = "run,policy,placement,pool,bin_start,allocated_gpus,capacity_gpus,allocated_ratio,active_ratio\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const SimResult& r = runs[i];
    const TimeSeries& ts = r.timeseries;
    const double step = static_cast<double>(ts.step_ms);
    for (size_t p = 0; p < ts.pools.size(); ++p) {
      const double capacity = static_cast<double>(ts.pool_capacity_ticks[p]);
      for (size_t b = 0; b < ts.bins(); ++b) {
        const double alloc = static_cast<double>(ts.allocated_tick_ms[p][b]) / step;
        std::string active;
        if (!ts.active_tick_ms.empty()) active = fmt::format("{:.6f}", ts.active_tick_ms[p][b] / step / capacity);
        out += fmt::format("{},{},{},{},{},{:.3f},{},{:.6f},{}\n", i, CsvField(r.policy), CsvField(r.placement), CsvField(ts.pools[p]),
                           FormatTime(ts.begin_ms + static_cast<int64_t>(b) * ts.step_ms), alloc / kTicksPerGpu,
                           ts.pool_capacity_ticks[p] / kTicksPerGpu, capacity == 0 ? 0.0 : alloc / capacity, active);
      }
    }
  }
  return out;
}

}  // namespace gpuledger::sim
