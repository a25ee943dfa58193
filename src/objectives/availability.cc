#include "objectives/availability.h"

#include <algorithm>
#include <cmath>

#include "core/money.h"

namespace gpuledger::objectives {

namespace {

// One request as known at now: its wait so far and whether it has been judged.
struct Request {
  const Job* job = nullptr;
  double gpus = 1;
  int64_t wait_ms = 0;
  bool started = false;
  bool judged = false;
  bool in_time = false;
};

// Nearest rank: the smallest wait with at least p of the waits at or below it.
int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

WaitSummary Summarize(const std::vector<const Request*>& requests) {
  WaitSummary s;
  std::vector<int64_t> waits;
  for (const Request* r : requests) {
    waits.push_back(r->wait_ms);
    if (!r->started) ++s.waiting;
    if (!r->judged) continue;
    ++s.requests;
    s.gpus += r->gpus;
    if (r->in_time) s.gpus_in_time += r->gpus;
  }
  if (waits.empty()) return s;
  std::sort(waits.begin(), waits.end());
  s.p50_ms = Percentile(waits, 0.50);
  s.p90_ms = Percentile(waits, 0.90);
  s.p99_ms = Percentile(waits, 0.99);
  s.max_ms = waits.back();
  CostNumerator sum = 0;
  for (int64_t w : waits) sum += w;
  s.mean_ms = static_cast<int64_t>(sum / static_cast<CostNumerator>(waits.size()));
  return s;
}

}  // namespace

std::optional<double> WaitSummary::attainment() const {
  if (gpus <= 0) return std::nullopt;
  return gpus_in_time / gpus;
}

std::string JobSizeClass(int32_t gpus) {
  if (gpus <= 1) return "1 GPU";
  if (gpus <= 4) return "2-4 GPUs";
  if (gpus <= 8) return "5-8 GPUs";
  return "9+ GPUs";
}

bool InScope(const ObjectiveScope& scope, const Job& job) {
  switch (scope.of) {
    case ObjectiveScope::Of::kFleet: return true;
    case ObjectiveScope::Of::kPool: return job.pool == scope.name;
    case ObjectiveScope::Of::kTeam: return job.team == scope.name;
    case ObjectiveScope::Of::kKind: return JobKindName(job.kind) == scope.name;
  }
  return false;
}

AvailabilityReport JudgeAvailability(const std::vector<Job>& jobs, const ObjectiveScope& scope,
                                     const TimeRange& window, int64_t now_ms, int64_t bound_ms) {
  AvailabilityReport report;
  report.window = window;
  report.bound_ms = bound_ms;
  std::vector<Request> requests;
  for (const Job& job : jobs) {
    if (!InScope(scope, job)) continue;
    if (!job.submit_ms) {
      ++report.without_submit;
      continue;
    }
    int64_t submit = *job.submit_ms;
    if (submit > now_ms) continue;
    Request r{.job = &job, .gpus = job.requested_gpus > 0 ? static_cast<double>(job.requested_gpus) : 1.0};
    r.started = job.start_ms && *job.start_ms <= now_ms;
    bool gave_up = !r.started && job.end_ms && *job.end_ms <= now_ms;
    int64_t waited_until = r.started ? *job.start_ms : gave_up ? *job.end_ms : now_ms;
    r.wait_ms = std::max<int64_t>(0, waited_until - submit);
    r.in_time = r.started && r.wait_ms <= bound_ms;
    r.judged = r.in_time || r.wait_ms > bound_ms;
    if (r.judged) {
      int64_t judged_at = r.in_time ? *job.start_ms : submit + bound_ms;
      if (!window.Contains(judged_at)) continue;
    } else if (!window.Contains(submit) || gave_up) {
      continue;  // undecided: counted where it was submitted; ended in time: never a wait
    }
    requests.push_back(r);
  }
  std::vector<const Request*> all;
  std::map<std::string, std::map<std::string, std::vector<const Request*>>> groups;
  for (const Request& r : requests) {
    all.push_back(&r);
    groups["pool"][r.job->pool].push_back(&r);
    groups["priority"][std::to_string(r.job->priority)].push_back(&r);
    groups["size"][JobSizeClass(r.job->requested_gpus)].push_back(&r);
  }
  report.all = Summarize(all);
  for (const auto& [dimension, values] : groups) {
    for (const auto& [value, members] : values) report.by[dimension][value] = Summarize(members);
  }
  return report;
}

}  // namespace gpuledger::objectives
