// What every Store backend shares: the group of batches applied at once, the
// single-device forms of the batch-oriented reads, the chunks' decoding, the job counts
// of a window, and the audit log's door.
#include "store/store.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include "store/actions.h"

namespace gpuledger::store {
namespace {

// What a job-change row says for a label or annotation the job did not have.
constexpr std::string_view kAbsent = "(absent)";
// EncodeJobMetadata's separators: ASCII unit and record separators.
constexpr char kKeyEnd = '\x1f';
constexpr char kEntryEnd = '\x1e';

// Each range's chunks decoded by `decode` into its samples, by time.
template <class Out>
Result<std::vector<std::vector<Out>>> DecodeChunksOf(std::span<const DeviceRange> ranges, const EncodedChunks& chunks,
                                                     ChunkDecoder<Out> decode) {
  std::vector<std::vector<Out>> out(ranges.size());
  std::vector<bool> ordered(ranges.size(), true);
  const std::string_view bytes = chunks.bytes;
  for (const EncodedChunks::Chunk& c : chunks.chunks) {
    if (c.range >= ranges.size() || c.offset > bytes.size() || c.size > bytes.size() - c.offset) {
      return Internal(fmt::format("store: a chunk of range {} lies outside the {} ranges or {} bytes read", c.range,
                                  ranges.size(), bytes.size()));
    }
    const DeviceRange& r = ranges[c.range];
    std::vector<Out>& samples = out[c.range];
    size_t before = samples.size();
    if (!decode(bytes.substr(c.offset, c.size), c.first_ms, r.range.begin_ms, r.range.end_ms, samples)) {
      return Internal(fmt::format("store: sample_chunks row of device {} at {} is corrupt: the chunk does not decode",
                                  r.device_id, FormatTime(c.first_ms)));
    }
    // Chunks come by first time; two batches' chunks of one hour may interleave.
    if (before > 0 && samples.size() > before && samples[before].t_ms < samples[before - 1].t_ms) {
      ordered[c.range] = false;
    }
  }
  for (size_t at = 0; at < out.size(); ++at) {
    if (!ordered[at]) {
      std::stable_sort(out[at].begin(), out[at].end(), [](const Out& a, const Out& b) { return a.t_ms < b.t_ms; });
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::vector<Sample>>> DecodeSamplesOf(std::span<const DeviceRange> ranges,
                                                         const EncodedChunks& chunks) {
  return DecodeChunksOf<Sample>(ranges, chunks, DecodeChunk);
}

Result<std::vector<std::vector<ActivitySample>>> DecodeActivityOf(std::span<const DeviceRange> ranges,
                                                                  const EncodedChunks& chunks) {
  return DecodeChunksOf<ActivitySample>(ranges, chunks, DecodeActivity);
}

Result<std::vector<std::vector<ActivitySample>>> StoreReads::ActivityOf(std::span<const DeviceRange> ranges) {
  GPULEDGER_ASSIGN_OR_RETURN(EncodedChunks chunks, EncodedChunksOf(ranges));
  return DecodeActivityOf(ranges, chunks);
}

std::vector<JobChange> DeclaredJobChanges(const Job& stored, const Job& declared) {
  auto number = [](int64_t v) { return v == 0 ? std::string() : std::to_string(v); };
  auto kind = [](JobKind k) { return k == JobKind::kUnknown ? std::string() : std::string(JobKindName(k)); };
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"team", {stored.team, declared.team}},
      {"project", {stored.project, declared.project}},
      {"experiment", {stored.experiment, declared.experiment}},
      {"user", {stored.user, declared.user}},
      {"kind", {std::string(JobKindName(stored.kind)), kind(declared.kind)}},
      {"pool", {stored.pool, declared.pool}},
      {"priority", {std::to_string(stored.priority), number(declared.priority)}},
      {"requested_gpus", {std::to_string(stored.requested_gpus), number(declared.requested_gpus)}},
      {"requested_mig_profile", {stored.requested_mig_profile, declared.requested_mig_profile}},
  };
  std::vector<JobChange> changes;
  for (const auto& [field, values] : fields) {
    if (values.second.empty() || values.second == values.first) continue;
    changes.push_back(JobChange{.field = field, .old_value = values.first, .new_value = values.second});
  }
  for (auto [name, was, now] : {std::tuple{"label", &stored.labels, &declared.labels},
                                std::tuple{"annotation", &stored.annotations, &declared.annotations}}) {
    if (!*now) continue;  // says nothing
    static const JobMetadata kNone;
    const JobMetadata& before = *was ? **was : kNone;
    const JobMetadata& after = **now;
    auto value = [](const JobMetadata& m, const std::string& key) {
      auto it = m.find(key);
      return it == m.end() ? std::string(kAbsent) : it->second;
    };
    std::set<std::string_view> keys;
    for (const auto& [k, v] : before) keys.insert(k);
    for (const auto& [k, v] : after) keys.insert(k);
    for (std::string_view k : keys) {
      std::string key(k);
      std::string old_value = value(before, key), new_value = value(after, key);
      if (old_value == new_value) continue;
      changes.push_back(JobChange{.field = fmt::format("{}:{}", name, key),
                                  .old_value = std::move(old_value),
                                  .new_value = std::move(new_value)});
    }
  }
  return changes;
}

std::optional<std::string> EncodeJobMetadata(const std::optional<JobMetadata>& metadata) {
  if (!metadata) return std::nullopt;
  std::string out;
  for (const auto& [key, value] : *metadata) {
    out += key;
    out.push_back(kKeyEnd);
    out += value;
    out.push_back(kEntryEnd);
  }
  return out;
}

Status DecodeJobMetadata(const std::optional<std::string>& labels, const std::optional<std::string>& annotations,
                         Job& job) {
  for (auto [name, column, out] : {std::tuple{"labels", &labels, &job.labels},
                                   std::tuple{"annotations", &annotations, &job.annotations}}) {
    out->reset();
    if (!*column) continue;
    JobMetadata m;
    std::string_view text = **column;
    while (!text.empty()) {
      size_t end = text.find(kEntryEnd);
      size_t mid = text.find(kKeyEnd);
      if (end == std::string_view::npos || mid == std::string_view::npos || mid > end || mid == 0) {
        return Internal(fmt::format("store: jobs row {} is corrupt: its {} are not a stored set", job.id, name));
      }
      m.emplace(std::string(text.substr(0, mid)), std::string(text.substr(mid + 1, end - mid - 1)));
      text.remove_prefix(end + 1);
    }
    *out = std::move(m);
  }
  return Status::Ok();
}

std::vector<Result<ApplyOutcome>> Store::ApplyBatches(std::span<const IngestPlan> plans) {
  std::vector<Result<ApplyOutcome>> out;
  out.reserve(plans.size());
  auto group = BeginBatchGroup();
  if (!group.ok()) {
    for (size_t i = 0; i < plans.size(); ++i) out.emplace_back(group.status());
    return out;
  }
  for (const IngestPlan& p : plans) out.push_back((*group)->Apply(p));
  if (Status st = (*group)->Commit(); !st.ok()) {
    for (auto& r : out) r = st;
  }
  return out;
}

size_t SampleReadEnd(std::span<const DeviceRange> ranges, size_t first) {
  constexpr size_t kRangesPerRead = 256;
  constexpr int64_t kRangeMsPerRead = 64 * 24 * kMsPerHour;
  size_t end = first;
  int64_t range_ms = 0;
  while (end < ranges.size() && end - first < kRangesPerRead && (end == first || range_ms < kRangeMsPerRead)) {
    range_ms += ranges[end].range.length_ms();
    ++end;
  }
  return end;
}

Result<std::vector<Sample>> StoreReads::Samples(int64_t device_id, const TimeRange& range) {
  DeviceRange one{device_id, range};
  GPULEDGER_ASSIGN_OR_RETURN(auto out, SamplesOf({&one, 1}));
  return std::move(out.at(0));
}

Result<JobCounts> StoreReads::CountJobs(const TimeRange& window) {
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, SharedJobs());
  JobCounts c;
  std::unordered_set<std::string_view> teams, projects, experiments, users;
  std::set<JobKind> kinds;
  for (const JobRecord& r : *jobs) {
    const Job& j = r.job;
    if ((j.end_ms && *j.end_ms < window.begin_ms) || (j.start_ms && *j.start_ms >= window.end_ms)) continue;
    ++c.jobs;
    teams.insert(j.team);
    projects.insert(j.project);
    experiments.insert(j.experiment);
    users.insert(j.user);
    kinds.insert(j.kind);
  }
  c.teams = static_cast<int64_t>(teams.size());
  c.projects = static_cast<int64_t>(projects.size());
  c.experiments = static_cast<int64_t>(experiments.size());
  c.users = static_cast<int64_t>(users.size());
  c.kinds = static_cast<int64_t>(kinds.size());
  return c;
}

Result<std::shared_ptr<const std::vector<JobRecord>>> StoreReads::SharedJobs() {
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, ListJobs());
  return std::make_shared<const std::vector<JobRecord>>(std::move(jobs));
}

Result<std::vector<AllocationRecord>> StoreReads::Allocations(int64_t device_id, const TimeRange& range) {
  DeviceRange one{device_id, range};
  GPULEDGER_ASSIGN_OR_RETURN(auto out, AllocationsOf({&one, 1}));
  return std::move(out.at(0));
}

Result<ActionLog*> ActionLogOf(Store& store) {
  auto* log = dynamic_cast<ActionLog*>(&store);
  if (!log) return FailedPrecondition("this store keeps no audit log of interventions");
  return log;
}

}  // namespace gpuledger::store
