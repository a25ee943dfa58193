#include "server/ingest.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

#include "server/metrics.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

constexpr size_t kMaxIgnoredFamilies = 256;
// A family name kept as a label of /metrics is at most this long; a longer one is counted
// as "(other)" (Prometheus's own names are far shorter: node_exporter's longest is ~70).
constexpr size_t kMaxIgnoredFamilyNameBytes = 128;

Status TooLarge(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

}  // namespace

Result<std::string> Gunzip(std::string_view compressed, size_t max_bytes) {
  z_stream zs{};
  // 15 + 32: a gzip or zlib header, detected automatically.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Internal("gzip: inflateInit2 failed");
  std::string out;
  char buf[64 * 1024];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      std::string why = zs.msg ? zs.msg : (rc == Z_BUF_ERROR ? "truncated stream" : "corrupt stream");
      inflateEnd(&zs);
      return InvalidArgument(fmt::format("gzip body: {}", why));
    }
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&zs);
      return TooLarge(fmt::format("gzip body inflates to more than {} bytes", max_bytes));
    }
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      return InvalidArgument("gzip body: truncated stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

Status CheckBatchAge(const Batch& batch, int64_t min_t_ms) {
  auto old = [&](const std::string& where, int64_t t) {
    return InvalidArgument(fmt::format("batch {}: {}: {} is older than the server accepts (before {})",
                                       batch.batch_id, where, FormatTime(t), FormatTime(min_t_ms)));
  };
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    if (batch.samples[i].t_ms < min_t_ms) return old(fmt::format("samples[{}].t", i), batch.samples[i].t_ms);
  }
  // An allocation's start puts its device in service: one from long ago would turn the
  // whole span since into unmonitored time.
  for (size_t i = 0; i < batch.allocations.size(); ++i) {
    if (batch.allocations[i].from_ms < min_t_ms) {
      return old(fmt::format("allocations[{}].from", i), batch.allocations[i].from_ms);
    }
  }
  return Status::Ok();
}

Result<Batch> DecodeNativeBatch(std::string_view body, const IngestLimits& limits, int64_t now_ms) {
  if (body.size() > limits.max_body_bytes) {
    return TooLarge(fmt::format("body of {} bytes is over the limit of {}", body.size(), limits.max_body_bytes));
  }
  std::string inflated;
  if (body.size() >= 2 && static_cast<unsigned char>(body[0]) == 0x1f &&
      static_cast<unsigned char>(body[1]) == 0x8b) {
    GPULEDGER_ASSIGN_OR_RETURN(inflated, Gunzip(body, limits.max_body_bytes));
    body = inflated;
  }
  // The format's own limits apply while parsing (a batch over them is malformed); the
  // server's, usually lower, after.
  GPULEDGER_ASSIGN_OR_RETURN(Batch batch, wire::ParseBatch(body));
  if (batch.samples.size() > limits.max_samples_per_batch) {
    return TooLarge(fmt::format("batch {}: {} samples is over the limit of {} per batch",
                                batch.batch_id, batch.samples.size(), limits.max_samples_per_batch));
  }
  GPULEDGER_RETURN_IF_ERROR(CheckBatchAge(batch, now_ms - limits.max_sample_age_ms));
  return batch;
}

bool IsMappedJobId(std::string_view job_id) {
  return job_id.starts_with("k8s/") || job_id.starts_with("hpc/");
}

Result<store::ApplyOutcome> GroupCommitter::Group::Apply(const Batch& batch, const BatchSender& sender) {
  if (committer_.validate_) GPULEDGER_RETURN_IF_ERROR(committer_.validate_(batch));
  return group_.Apply(batch, sender);
}

Result<store::ApplyOutcome> GroupCommitter::Group::ApplyValidated(const Batch& batch, const BatchSender& sender) {
  return group_.Apply(batch, sender);
}

GroupCommitter::GroupCommitter(BeginFn begin, ValidateFn validate, size_t max_group_tickets)
    : begin_(std::move(begin)),
      validate_(std::move(validate)),
      max_group_tickets_(std::max<size_t>(1, max_group_tickets)) {}

void GroupCommitter::Run(Ticket& ticket) {
  Waiter me{&ticket};
  mu_.lock();
  queue_.push_back(&me);
  cv_.Wait(mu_, [&]() REQUIRES(mu_) { return me.done || !leading_; });
  if (me.done) {
    mu_.unlock();
    return;
  }
  // Lead: commit groups from the head of the queue until this ticket's is done. The
  // requests arriving meanwhile queue up and form the next group.
  leading_ = true;
  while (!me.done) {
    size_t n = std::min(queue_.size(), max_group_tickets_);
    std::vector<Waiter*> group(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    uint64_t id = ++stats_.groups;
    stats_.tickets += n;
    stats_.largest_group = std::max(stats_.largest_group, n);
    mu_.unlock();
    RunGroup(group, id);
    mu_.lock();
    for (Waiter* w : group) w->done = true;
    cv_.NotifyAll();
  }
  leading_ = false;
  mu_.unlock();
  cv_.NotifyAll();  // a waiting thread leads the next group
}

void GroupCommitter::RunGroup(const std::vector<Waiter*>& tickets, uint64_t id) {
  Status commit;
  try {
    auto group = begin_();
    if (group.ok()) {
      Group g(*this, **group, id);
      for (Waiter* w : tickets) w->ticket->Apply(g);
      commit = (*group)->Commit();
    } else {
      commit = group.status();
    }
    // The group (and with it the store and the ledger lock) is released here, before
    // anyone is told.
  } catch (const std::exception& e) {
    // (Out of memory, most likely.) The group, destroyed uncommitted, rolled back; the
    // committer must go on serving the others.
    commit = Internal(fmt::format("group commit: {}", e.what()));
  }
  if (observe_) observe_(commit);
  for (Waiter* w : tickets) w->ticket->Finish(id, commit);
}

Result<store::ApplyOutcome> GroupCommitter::Apply(const Batch& batch, const BatchSender& sender) {
  if (validate_) GPULEDGER_RETURN_IF_ERROR(validate_(batch));
  struct BatchTicket final : Ticket {
    BatchTicket(const Batch& b, const BatchSender& s) : batch(b), sender(s) {}
    void Apply(Group& group) override { outcome = group.ApplyValidated(batch, sender); }
    void Finish(uint64_t, const Status& commit) override {
      // A failed commit undid the group: the batch is not applied, whatever its own
      // outcome said (even a duplicate of a batch of the same group).
      if (!commit.ok()) outcome = commit;
    }
    const Batch& batch;
    const BatchSender& sender;
    std::optional<Result<store::ApplyOutcome>> outcome;
  };
  BatchTicket ticket(batch, sender);
  Run(ticket);
  if (!ticket.outcome)
    return Internal(fmt::format("batch {}: left unapplied by its group", batch.batch_id));
  return std::move(*ticket.outcome);
}

GroupCommitter::Stats GroupCommitter::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

size_t GroupCommitter::queued() const {
  MutexLock lock(mu_);
  return queue_.size();
}

Result<std::unique_ptr<DcgmIngestor>> DcgmIngestor::Create(DcgmIngestOptions options, ApplyFn apply,
                                                           MetricsRegistry* metrics) {
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::DcgmMapper mapper,
                             prometheus::DcgmMapper::Create(options.mapping));
  return std::unique_ptr<DcgmIngestor>(
      new DcgmIngestor(std::move(options), std::move(mapper), std::move(apply), nullptr, metrics));
}

Result<std::unique_ptr<DcgmIngestor>> DcgmIngestor::Create(DcgmIngestOptions options,
                                                           GroupCommitter& committer,
                                                           MetricsRegistry* metrics) {
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::DcgmMapper mapper,
                             prometheus::DcgmMapper::Create(options.mapping));
  return std::unique_ptr<DcgmIngestor>(
      new DcgmIngestor(std::move(options), std::move(mapper), nullptr, &committer, metrics));
}

DcgmIngestor::DcgmIngestor(DcgmIngestOptions options, prometheus::DcgmMapper mapper, ApplyFn apply,
                           GroupCommitter* committer, MetricsRegistry* metrics)
    : options_(std::move(options)),
      mapper_(std::move(mapper)),
      apply_(std::move(apply)),
      committer_(committer),
      metrics_(metrics) {}

// A request's (or a sweep's) part of a group: its batch is built inside the group from
// the state the requests before it in the group left.
class DcgmIngestor::PlanTicket final : public GroupCommitter::Ticket {
 public:
  PlanTicket(DcgmIngestor& ingestor, const BuildFn& build) : ing_(ingestor), build_(build) {}

  void Apply(GroupCommitter::Group& group) override {
    MutexLock lock(ing_.mu_);
    const State& base = ing_.in_group_ && ing_.group_ == group.id() ? *ing_.in_group_ : ing_.state_;
    plan_ = build_(base);
    if (plan_->empty) return;
    outcome_ = group.Apply(plan_->batch, plan_->sender);
    if (outcome_->ok() &&
        (**outcome_ == store::ApplyOutcome::kApplied || plan_->keep_on_duplicate)) {
      ing_.in_group_ = std::move(plan_->next);
      ing_.group_ = group.id();
    }
  }

  void Finish(uint64_t group_id, const Status& commit) override {
    MutexLock lock(ing_.mu_);
    if (ing_.in_group_ && ing_.group_ == group_id) {
      if (commit.ok()) ing_.state_ = std::move(*ing_.in_group_);
      ing_.in_group_.reset();
    }
    // A failed commit undid whatever the group applied, and so whatever a request with
    // nothing to apply was built on: every request of the group gets the error.
    if (!commit.ok()) outcome_ = commit;
  }

  // The plan with its durable outcome.
  Result<Plan> Take() {
    if (outcome_ && !outcome_->ok()) return outcome_->status();
    if (!plan_) return Internal("remote-write request left unapplied by its group");
    if (outcome_) {
      plan_->result.applied = **outcome_ == store::ApplyOutcome::kApplied;
      plan_->result.duplicate = !plan_->result.applied;
    }
    return std::move(*plan_);
  }

 private:
  DcgmIngestor& ing_;
  const BuildFn& build_;
  std::optional<Plan> plan_;
  std::optional<Result<store::ApplyOutcome>> outcome_;
};

Result<DcgmIngestor::Plan> DcgmIngestor::Run(const BuildFn& build) {
  if (committer_) {
    PlanTicket ticket(*this, build);
    committer_->Run(ticket);
    return ticket.Take();
  }
  MutexLock lock(mu_);
  Plan plan = build(state_);
  if (plan.empty) return plan;
  GPULEDGER_ASSIGN_OR_RETURN(store::ApplyOutcome outcome, apply_(plan.batch, plan.sender));
  plan.result.applied = outcome == store::ApplyOutcome::kApplied;
  plan.result.duplicate = !plan.result.applied;
  if (plan.result.applied || plan.keep_on_duplicate) state_ = std::move(plan.next);
  return plan;
}

Status DcgmIngestor::Recover(ledger::Ledger& ledger, int64_t now_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, ledger.Devices());
  GPULEDGER_ASSIGN_OR_RETURN(auto open, ledger.OpenAllocations(now_ms));
  std::unordered_map<std::string, int64_t> last_sample_of;
  for (const auto& d : devices) last_sample_of[d.device.uuid] = d.last_sample_ms;
  MutexLock lock(mu_);
  for (const auto& d : devices) {
    state_.last_sample_ms[d.device.uuid] = d.last_sample_ms;
    if (d.device.sample_interval_ms > 0) state_.interval_ms[d.device.uuid] = d.device.sample_interval_ms;
  }
  for (const auto& [a, job] : open) {
    if (!IsMappedJobId(job)) continue;
    Hold& h = state_.open[{a.device_uuid, job}];
    h.from_ms = a.from_ms;
    h.last_seen_ms = std::max(a.from_ms, last_sample_of[a.device_uuid]);
  }
  return Status::Ok();
}

size_t DcgmIngestor::CloseHolds(State& state, Batch& batch,
                                const std::function<bool(const HoldKey&, const Hold&)>& should_close) const {
  size_t closed = 0;
  for (auto it = state.open.begin(); it != state.open.end();) {
    if (!should_close(it->first, it->second)) {
      ++it;
      continue;
    }
    Allocation a;
    a.device_uuid = it->first.first;
    a.job_id = it->first.second;
    a.from_ms = it->second.from_ms;
    a.to_ms = std::max(it->second.last_seen_ms, it->second.from_ms + 1);
    batch.allocations.push_back(std::move(a));
    it = state.open.erase(it);
    ++closed;
  }
  return closed;
}

Result<DcgmIngestResult> DcgmIngestor::Apply(const prometheus::DcgmBatch& mapped,
                                             const std::string& batch_id, uint64_t digest,
                                             std::string_view path, const BatchSender& sender) {
  GPULEDGER_ASSIGN_OR_RETURN(Plan plan, Run([&](const State& base) {
                               Plan p = BuildRequest(base, mapped, batch_id, digest, path);
                               p.sender = sender;
                               return p;
                             }));
  // A duplicate is a retry of a request applied before: its effects, state included,
  // are in place, and its drops were counted then.
  if (!plan.result.duplicate) {
    MutexLock lock(mu_);
    CountDropped(mapped, path, plan.no_activity, plan.already_stored);
  }
  if (plan.result.applied) plan.result.samples = plan.batch.samples.size();
  return plan.result;
}

DcgmIngestor::Plan DcgmIngestor::BuildRequest(const State& base,
                                              const prometheus::DcgmBatch& mapped,
                                              const std::string& batch_id, uint64_t digest,
                                              std::string_view path) const {
  Plan plan;
  plan.next = base;
  State& next = plan.next;
  Batch& batch = plan.batch;
  batch.batch_id = batch_id;
  batch.source = std::string(path);
  batch.content_digest = digest;
  DcgmIngestResult& result = plan.result;
  result.batch_id = batch_id;

  for (Device d : mapped.devices) {
    if (d.pool.empty()) d.pool = options_.pool;
    d.capacity_type = options_.capacity_type;
    if (d.sample_interval_ms > 0) next.interval_ms[d.uuid] = d.sample_interval_ms;
    batch.devices.push_back(std::move(d));
  }
  batch.jobs = mapped.jobs;

  int64_t& no_activity = plan.no_activity;
  int64_t& already_stored = plan.already_stored;
  std::unordered_map<std::string, int64_t> latest;  // per device, the latest instant in this request
  for (size_t i = 0; i < mapped.samples.size(); ++i) {
    Sample s = mapped.samples[i];
    const prometheus::SampleExtras& x = mapped.extras[i];
    // The graphics engine's activity is the next-best figure where neither SM activity
    // nor the coarse utilization was exported; it is recorded as coarse.
    if (!s.sm_active && !s.gpu_util && x.gr_engine_active) s.gpu_util = x.gr_engine_active;
    int64_t& last = next.last_sample_ms[s.device_uuid];
    auto& l = latest[s.device_uuid];
    l = std::max(l, s.t_ms);
    if (s.t_ms <= last) {
      ++already_stored;
      continue;
    }
    if (IsAvailable(s.health) && !s.sm_active && !s.gpu_util) {
      ++no_activity;
      continue;
    }
    last = s.t_ms;
    batch.samples.push_back(std::move(s));
  }

  // Holds: open an allocation at a job's first sighting on a device, keep it open while
  // it is seen. A sample at t covers the span since the device's previous sample, so the
  // allocation starts one interval before the first sighting.
  for (const prometheus::JobHold& h : mapped.holds) {
    auto [it, inserted] = next.open.try_emplace({h.device_uuid, h.job_id});
    if (inserted) {
      auto iv = next.interval_ms.find(h.device_uuid);
      it->second.from_ms = h.t_ms - (iv == next.interval_ms.end() ? 0 : iv->second);
      it->second.last_seen_ms = h.t_ms;
      batch.allocations.push_back({h.device_uuid, h.job_id, it->second.from_ms, std::nullopt});
      ++result.allocations_opened;
    } else {
      it->second.last_seen_ms = std::max(it->second.last_seen_ms, h.t_ms);
    }
  }
  // Close holds whose device reported in this request without the job for long enough.
  result.allocations_closed = CloseHolds(next, batch, [&](const HoldKey& k, const Hold& h) {
    auto l = latest.find(k.first);
    return l != latest.end() && l->second - h.last_seen_ms >= options_.hold_timeout_ms;
  });

  plan.empty = batch.samples.empty() && batch.allocations.empty() && batch.devices.empty() &&
               batch.jobs.empty();
  return plan;
}

void DcgmIngestor::CountDropped(const prometheus::DcgmBatch& mapped, std::string_view path,
                                int64_t no_activity, int64_t already_stored) {
  std::string p(path);
  if (metrics_) {
    for (const auto& [family, points] : mapped.ignored_families) {
      // Family names come from senders: their number and length in /metrics are bounded.
      bool known = family.size() <= kMaxIgnoredFamilyNameBytes && ignored_seen_.count(family) > 0;
      if (!known && family.size() <= kMaxIgnoredFamilyNameBytes && ignored_seen_.size() < kMaxIgnoredFamilies) {
        ignored_seen_.insert(family);
        known = true;
      }
      metrics_->Add(MetricId::kIgnoredPoints, {known ? family : std::string("(other)")},
                    static_cast<double>(points));
    }
    if (no_activity) metrics_->Add(MetricId::kDroppedSamples, {p, "no_activity"}, static_cast<double>(no_activity));
    if (already_stored) {
      metrics_->Add(MetricId::kDroppedSamples, {p, "already_stored"}, static_cast<double>(already_stored));
    }
    if (int64_t n = mapped.stale_points + mapped.blank_points) {
      metrics_->Add(MetricId::kDroppedSamples, {p, "stale_or_blank"}, static_cast<double>(n));
    }
  }
}

Result<size_t> DcgmIngestor::Sweep(int64_t now_ms) {
  auto build = [&](const State& base) {
    Plan p;
    p.next = base;
    // Applied or already applied: either way the holds are closed.
    p.keep_on_duplicate = true;
    p.closed = CloseHolds(p.next, p.batch, [&](const HoldKey&, const Hold& h) {
      return now_ms - h.last_seen_ms >= options_.hold_timeout_ms;
    });
    p.empty = p.closed == 0;
    if (p.empty) return p;
    // The id names what it closes, so a sweep retried after a crash is recognised.
    std::string ids;
    for (const Allocation& a : p.batch.allocations)
      ids += fmt::format("{}|{}|{};", a.device_uuid, a.job_id, a.from_ms);
    uint64_t digest = wire::Fnv1a64(ids);
    p.batch.batch_id = fmt::format("sweep-{:016x}", digest);
    p.batch.source = "server";
    p.batch.content_digest = digest;
    return p;
  };
  GPULEDGER_ASSIGN_OR_RETURN(Plan plan, Run(build));
  return plan.closed;
}

}  // namespace gpuledger::server
