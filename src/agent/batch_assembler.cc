#include "agent/batch_assembler.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

namespace gpuledger::agent {
namespace {

std::string Clean(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  for (;;) {
    size_t tab = line.find('\t', pos);
    out.push_back(line.substr(pos, tab == std::string_view::npos ? std::string_view::npos : tab - pos));
    if (tab == std::string_view::npos) break;
    pos = tab + 1;
  }
  return out;
}

constexpr size_t kStateFields = 9;

}  // namespace

Result<BatchAssembler> BatchAssembler::Create(AssemblerOptions options, std::vector<Device> inventory) {
  BatchAssembler a(std::move(options), std::move(inventory));
  GPULEDGER_RETURN_IF_ERROR(a.LoadState());
  return a;
}

Status BatchAssembler::LoadState() {
  if (options_.state_file.empty()) return Status::Ok();
  std::ifstream in(options_.state_file);
  if (!in) return Status::Ok();
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto f = SplitTabs(line);
    int64_t from = 0;
    if (f.size() != kStateFields ||
        std::from_chars(f[2].data(), f[2].data() + f[2].size(), from).ec != std::errc()) {
      return InvalidArgument(fmt::format("{}:{}: want {} tab-separated fields (device, job, from_ms, "
                                         "team, project, experiment, user, kind, pool)",
                                         options_.state_file, line_no, kStateFields));
    }
    Job job;
    job.id = std::string(f[1]);
    job.team = std::string(f[3]);
    job.project = std::string(f[4]);
    job.experiment = std::string(f[5]);
    job.user = std::string(f[6]);
    if (auto kind = ParseJobKind(f[7]); kind.ok()) job.kind = *kind;
    job.pool = std::string(f[8]);
    open_[{std::string(f[0]), job.id}] = from;
    jobs_[job.id] = std::move(job);
  }
  return Status::Ok();
}

Status BatchAssembler::SaveState() const {
  if (options_.state_file.empty()) return Status::Ok();
  std::string text;
  for (const auto& [key, from] : open_) {
    auto it = jobs_.find(key.second);
    Job job;
    if (it != jobs_.end()) job = it->second;
    text += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", Clean(key.first), Clean(key.second), from,
                        Clean(job.team), Clean(job.project), Clean(job.experiment), Clean(job.user),
                        JobKindName(job.kind), Clean(job.pool));
  }
  std::string tmp = options_.state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Unavailable(fmt::format("{}: cannot write", tmp));
  }
  if (std::rename(tmp.c_str(), options_.state_file.c_str()) != 0) {
    return Unavailable(fmt::format("{}: cannot rename into place", options_.state_file));
  }
  return Status::Ok();
}

void BatchAssembler::Add(int64_t t_ms, int64_t span_start_ms, std::vector<Sample> samples,
                         const std::vector<Holding>& holdings) {
  // A GPU in MIG mode has no activity figure of its own; its instances' slice-weighted
  // mean stands in (what GPM on the whole GPU would read), when they all have one.
  std::unordered_map<std::string, const Sample*> by_uuid;
  for (const Sample& s : samples) by_uuid[s.device_uuid] = &s;
  std::unordered_map<std::string, std::pair<double, double>> parent_sum;  // weighted sum, weight
  std::set<std::string> parent_incomplete;
  for (const Device& d : inventory_) {
    if (!d.is_mig()) continue;
    auto it = by_uuid.find(d.uuid);
    if (it == by_uuid.end() || !it->second->ActivityRatio() || !it->second->sm_active) {
      parent_incomplete.insert(d.parent_uuid);
      continue;
    }
    double w = static_cast<double>(d.share.num) / d.share.den;
    auto& [sum, weight] = parent_sum[d.parent_uuid];
    sum += w * *it->second->sm_active;
    weight += w;
  }
  for (Sample& s : samples) {
    if (!IsAvailable(s.health) || s.ActivityRatio()) {
      samples_.push_back(std::move(s));
      continue;
    }
    auto it = parent_sum.find(s.device_uuid);
    if (it != parent_sum.end() && it->second.second > 0 && !parent_incomplete.contains(s.device_uuid)) {
      s.sm_active = std::clamp(it->second.first / it->second.second, 0.0, 1.0);
      samples_.push_back(std::move(s));
    } else {
      ++samples_dropped_;
    }
  }

  std::set<std::pair<std::string, std::string>> now;
  for (const Holding& h : holdings) {
    auto key = std::make_pair(h.device_uuid, h.job.id);
    now.insert(key);
    jobs_[h.job.id] = h.job;
    if (!open_.contains(key)) {
      open_[key] = span_start_ms;
      allocations_.push_back({h.device_uuid, h.job.id, span_start_ms, std::nullopt});
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    if (now.contains(it->first)) {
      ++it;
      continue;
    }
    // Restored from a previous run and gone since: it ended while the agent was down,
    // at some time the agent cannot know; closing it now is the earliest it can say.
    int64_t to = std::max(t_ms, it->second + 1);
    allocations_.push_back({it->first.first, it->first.second, it->second, to});
    it = open_.erase(it);
  }
}

void BatchAssembler::CloseAll(int64_t t_ms) {
  for (const auto& [key, from] : open_) {
    allocations_.push_back({key.first, key.second, from, std::max(t_ms, from + 1)});
  }
  open_.clear();
}

std::optional<Batch> BatchAssembler::Take() {
  if (samples_.empty() && allocations_.empty()) return std::nullopt;
  Batch b;
  b.batch_id = fmt::format("{}-{}-{}", options_.node, options_.instance, ++sequence_);
  b.source = options_.node;
  b.devices = inventory_;
  // Jobs referenced by this batch, with the latest metadata seen.
  std::set<std::string> referenced;
  for (const Allocation& a : allocations_) referenced.insert(a.job_id);
  for (const Sample& s : samples_) {
    for (const ProcessSample& p : s.processes) {
      if (!p.job_id.empty()) referenced.insert(p.job_id);
    }
  }
  for (const std::string& id : referenced) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      b.jobs.push_back(it->second);
    } else {
      Job j;
      j.id = id;
      b.jobs.push_back(std::move(j));
    }
  }
  b.allocations = std::move(allocations_);
  b.samples = std::move(samples_);
  allocations_.clear();
  samples_.clear();
  // Forget jobs that hold nothing any more.
  std::set<std::string> still_open;
  for (const auto& [key, from] : open_) still_open.insert(key.second);
  std::erase_if(jobs_, [&](const auto& kv) { return !still_open.contains(kv.first); });
  return b;
}

}  // namespace gpuledger::agent
