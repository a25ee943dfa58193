#include "core/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/time.h"

namespace gpuledger {
namespace {

// Why a figure is refused, or "" when it is absent or a finite number within
// [0, max] (a ratio has max 1, an amount no max).
std::string FigureError(std::optional<double> v, double max = HUGE_VAL) {
  if (!v) return "";
  if (std::isnan(*v)) return "must be a number, not NaN";
  if (std::isinf(*v)) return fmt::format("must be finite, not {}", *v);
  if (max == 1.0 && (*v < 0 || *v > 1)) return fmt::format("must be within 0..1, not {}", *v);
  if (*v < 0) return fmt::format("must not be negative, not {}", *v);
  return "";
}

// Why a string of a batch is refused, or "" when it is at most kMaxBatchStringBytes and
// free of control characters.
std::string StringError(std::string_view s) {
  if (s.size() > kMaxBatchStringBytes) {
    return fmt::format("longer than {} bytes ({} bytes)", kMaxBatchStringBytes, s.size());
  }
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "contains a control character";
  }
  // The ledger's own keys are names in parentheses ("(no job)", "(unset)", "(total)",
  // "(unallocated)", ...): a batch may not forge one, or a job called "(no job)" would
  // read as the fleet's capacity held by no job.
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    return "is reserved: names in parentheses are the ledger's own";
  }
  return "";
}

}  // namespace

std::string JobMetadataEntryError(std::string_view key, std::string_view value) {
  if (key.empty()) return "a key is empty";
  if (std::string why = StringError(key); !why.empty()) return "a key " + why;
  return StringError(value);
}

std::string JobMetadataKeyPath(std::string_view key) {
  std::string out = "[\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out += "\"]";
  return out;
}

namespace {

// Whether `text` matches `pattern`, where '*' matches any run of characters (none too).
bool GlobMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

bool BatchSender::MayReportFor(std::string_view node) const {
  if (nodes.empty()) return true;
  return std::any_of(nodes.begin(), nodes.end(), [&](const std::string& n) { return GlobMatch(n, node); });
}

Status ValidateBatch(const Batch& b, int64_t now_ms, int64_t max_future_skew_ms) {
  auto bad = [&](std::string where, std::string_view what) {
    return InvalidArgument(fmt::format("batch {}: {}: {}", b.batch_id, where, what));
  };
  // The first figure of `checks` that is refused, as a Status naming it.
  struct Figure {
    std::string_view name;
    std::optional<double> value;
    double max;
  };
  auto figures = [&](const std::string& where, std::initializer_list<Figure> checks) {
    for (const Figure& c : checks) {
      if (std::string why = FigureError(c.value, c.max); !why.empty()) {
        return bad(fmt::format("{}.{}", where, c.name), why);
      }
    }
    return Status::Ok();
  };
  // The string rules of the v1 format (wire/batch.h), for every input path: `where` is
  // "devices[3].uuid" and the like; the string itself is never quoted (it may be huge).
  struct Text {
    std::string_view name;
    std::string_view value;
  };
  auto texts = [&](const std::string& where, std::initializer_list<Text> checks) {
    for (const Text& t : checks) {
      if (std::string why = StringError(t.value); !why.empty()) {
        return bad(where.empty() ? std::string(t.name) : fmt::format("{}.{}", where, t.name), why);
      }
    }
    return Status::Ok();
  };
  if (b.batch_id.empty()) return InvalidArgument("batch: batch_id: missing");
  if (std::string why = StringError(b.batch_id); !why.empty()) {
    return InvalidArgument(fmt::format("batch: batch_id: {}", why));
  }
  GPULEDGER_RETURN_IF_ERROR(texts("", {{"source", b.source}}));
  std::unordered_set<std::string_view> device_ids;
  for (size_t i = 0; i < b.devices.size(); ++i) {
    const Device& d = b.devices[i];
    if (d.uuid.empty()) return bad(fmt::format("devices[{}].uuid", i), "missing");
    GPULEDGER_RETURN_IF_ERROR(texts(fmt::format("devices[{}]", i),
                                    {{"uuid", d.uuid}, {"node", d.node}, {"model", d.model}, {"pool", d.pool},
                                     {"parent", d.parent_uuid}, {"mig_profile", d.mig_profile}}));
    if (!device_ids.insert(d.uuid).second) {
      return bad(fmt::format("devices[{}].uuid", i), "declared twice in one batch");
    }
    if (!d.share.IsValid()) {
      return bad(fmt::format("devices[{}].share", i),
                 fmt::format("{}/{} is not a share of a GPU (0 < num <= den, den dividing {})",
                             d.share.num, d.share.den, kShareScale));
    }
    if (d.memory_mib < 0) {
      return bad(fmt::format("devices[{}].memory_mib", i), "must not be negative");
    }
    if (d.sample_interval_ms < 0) {
      return bad(fmt::format("devices[{}].sample_interval_ms", i), "must not be negative");
    }
  }
  std::unordered_set<std::string_view> job_ids;
  for (size_t i = 0; i < b.jobs.size(); ++i) {
    const Job& j = b.jobs[i];
    if (j.id.empty()) return bad(fmt::format("jobs[{}].id", i), "missing");
    GPULEDGER_RETURN_IF_ERROR(texts(fmt::format("jobs[{}]", i),
                                    {{"id", j.id}, {"team", j.team}, {"project", j.project},
                                     {"experiment", j.experiment}, {"user", j.user}, {"pool", j.pool},
                                     {"requested_mig_profile", j.requested_mig_profile},
                                     {"model.dtype", j.model_dtype}}));
    if (!job_ids.insert(j.id).second) {
      return bad(fmt::format("jobs[{}].id", i), "declared twice in one batch");
    }
    if (j.start_ms && j.end_ms && *j.end_ms < *j.start_ms) {
      return bad(fmt::format("jobs[{}].end", i), "before its start");
    }
    size_t metadata_bytes = 0;
    for (auto [name, m] : {std::pair{"labels", &j.labels}, std::pair{"annotations", &j.annotations}}) {
      if (!*m) continue;
      std::string where = fmt::format("jobs[{}].{}", i, name);
      if ((*m)->size() > kMaxJobMetadataEntries) {
        return bad(where, fmt::format("more than {} entries ({})", kMaxJobMetadataEntries, (*m)->size()));
      }
      for (const auto& [key, value] : **m) {
        if (std::string why = JobMetadataEntryError(key, value); !why.empty()) {
          // A bad key is named by its map only: it may be huge, or hold a control character.
          bool key_ok = !key.empty() && StringError(key).empty();
          return bad(key_ok ? where + JobMetadataKeyPath(key) : where, why);
        }
        metadata_bytes += key.size() + value.size();
      }
    }
    if (metadata_bytes > kMaxJobMetadataBytes) {
      return bad(fmt::format("jobs[{}]", i), fmt::format("labels and annotations take more than {} bytes ({})",
                                                         kMaxJobMetadataBytes, metadata_bytes));
    }
  }
  for (size_t i = 0; i < b.allocations.size(); ++i) {
    const Allocation& a = b.allocations[i];
    if (a.device_uuid.empty()) return bad(fmt::format("allocations[{}].device", i), "missing");
    if (a.job_id.empty()) return bad(fmt::format("allocations[{}].job", i), "missing");
    GPULEDGER_RETURN_IF_ERROR(
        texts(fmt::format("allocations[{}]", i), {{"device", a.device_uuid}, {"job", a.job_id}}));
    if (a.to_ms && *a.to_ms <= a.from_ms) {
      return bad(fmt::format("allocations[{}].to", i), "must be after \"from\"");
    }
    if (a.from_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("allocations[{}].from", i),
                 fmt::format("{} is in the future (now {})", FormatTime(a.from_ms), FormatTime(now_ms)));
    }
    // An end is reported once it happened: a planned end years ahead would dirty every
    // hour up to it (an open allocation, with no `to`, is how a running job is sent).
    if (a.to_ms && *a.to_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("allocations[{}].to", i),
                 fmt::format("{} is in the future (now {}); leave \"to\" out while the allocation is open",
                             FormatTime(*a.to_ms), FormatTime(now_ms)));
    }
  }
  for (size_t i = 0; i < b.progress.size(); ++i) {
    const Progress& p = b.progress[i];
    if (p.job_id.empty()) return bad(fmt::format("progress[{}].job", i), "missing");
    GPULEDGER_RETURN_IF_ERROR(texts(fmt::format("progress[{}]", i), {{"job", p.job_id}}));
    if (!p.tokens && !p.model_flops) {
      return bad(fmt::format("progress[{}]", i), "needs tokens or model_flops");
    }
    GPULEDGER_RETURN_IF_ERROR(
        figures(fmt::format("progress[{}]", i),
                {{"tokens", p.tokens, HUGE_VAL}, {"model_flops", p.model_flops, HUGE_VAL}}));
    if (p.t_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("progress[{}].t", i),
                 fmt::format("{} is in the future (now {})", FormatTime(p.t_ms), FormatTime(now_ms)));
    }
  }
  for (size_t i = 0; i < b.serving.size(); ++i) {
    const ServingSnapshot& r = b.serving[i];
    GPULEDGER_RETURN_IF_ERROR(
        texts(fmt::format("serving[{}]", i), {{"job", r.job_id}, {"engine", r.engine}, {"model", r.model}}));
  }
  std::unordered_map<std::string_view, int64_t> last_t;
  last_t.reserve(64);
  for (size_t i = 0; i < b.samples.size(); ++i) {
    const Sample& s = b.samples[i];
    if (s.device_uuid.empty()) return bad(fmt::format("samples[{}].device", i), "missing");
    auto [it, inserted] = last_t.try_emplace(s.device_uuid, s.t_ms);
    if (inserted) {  // each device's uuid once
      GPULEDGER_RETURN_IF_ERROR(texts(fmt::format("samples[{}]", i), {{"device", s.device_uuid}}));
    } else {
      if (s.t_ms == it->second) {
        return bad(fmt::format("samples[{}].t", i),
                   fmt::format("duplicate sample for device {} at {}", s.device_uuid,
                               FormatTime(s.t_ms)));
      }
      if (s.t_ms < it->second) {
        return bad(fmt::format("samples[{}].t", i),
                   fmt::format("time goes backwards for device {} ({} after {})", s.device_uuid,
                               FormatTime(s.t_ms), FormatTime(it->second)));
      }
      it->second = s.t_ms;
    }
    if (s.t_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("samples[{}].t", i),
                 fmt::format("{} is in the future (now {}); is the sender's clock wrong?",
                             FormatTime(s.t_ms), FormatTime(now_ms)));
    }
    const std::string where = fmt::format("samples[{}]", i);
    GPULEDGER_RETURN_IF_ERROR(figures(where, {{"sm_active", s.sm_active, 1.0},
                                              {"sm_occupancy", s.sm_occupancy, 1.0},
                                              {"tensor_active", s.tensor_active, 1.0},
                                              {"dram_active", s.dram_active, 1.0},
                                              {"gpu_util", s.gpu_util, 1.0},
                                              {"fb_used_mib", s.fb_used_mib, HUGE_VAL},
                                              {"power_watts", s.power_watts, HUGE_VAL}}));
    if (s.process_count && *s.process_count < 0) {
      return bad(where + ".process_count", "must not be negative");
    }
    if (const auto& g = s.gaps) {
      if (g->interval_ms <= 0) return bad(where + ".gaps.interval_ms", "must be positive");
      if (g->idle_ms < 0 || g->idle_ms > g->interval_ms) {
        return bad(where + ".gaps.idle_ms", "must be within 0..interval_ms");
      }
      if (g->short_idle_ms < 0 || g->short_idle_ms > g->idle_ms) {
        return bad(where + ".gaps.short_idle_ms", "must be within 0..idle_ms");
      }
    }
    if (IsAvailable(s.health) && !s.sm_active && !s.gpu_util) {
      return bad(fmt::format("samples[{}]", i),
                 "a healthy sample needs an activity figure (sm_active or gpu_util)");
    }
    std::unordered_set<int64_t> pids;
    for (size_t k = 0; k < s.processes.size(); ++k) {
      const ProcessSample& p = s.processes[k];
      if (!pids.insert(p.pid).second) {
        return bad(fmt::format("samples[{}].processes[{}].pid", i, k), "listed twice");
      }
      GPULEDGER_RETURN_IF_ERROR(texts(fmt::format("samples[{}].processes[{}]", i, k), {{"job", p.job_id}}));
      GPULEDGER_RETURN_IF_ERROR(
          figures(fmt::format("samples[{}].processes[{}]", i, k),
                  {{"fb_used_mib", p.fb_used_mib, HUGE_VAL}, {"sm_share", p.sm_share, 1.0}}));
    }
  }
  return Status::Ok();
}

}  // namespace gpuledger
