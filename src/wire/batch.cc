#include "wire/batch.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>

#include "core/time.h"

namespace gpuledger::wire {
namespace {

// Times a batch may carry: 2000-01-01 to 2200-01-01, whichever way they are written.
constexpr int64_t kEarliestMs = 946'684'800'000;
constexpr int64_t kLatestMs = 7'258'118'400'000;

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// A JSON path built only when an error is reported: "samples[3].sm_active".
struct Path {
  const Path* parent = nullptr;
  std::string_view key;
  size_t index = SIZE_MAX;
  bool quoted = false;  // `key` is a map's key: `labels["team"]`

  Path Field(std::string_view k) const { return Path{this, k, SIZE_MAX}; }
  Path Item(size_t i) const { return Path{this, {}, i}; }
  Path Entry(std::string_view k) const { return Path{this, k, SIZE_MAX, true}; }
  std::string ToString() const {
    std::string prefix = parent ? parent->ToString() : std::string();
    if (index != SIZE_MAX) return fmt::format("{}[{}]", prefix, index);
    if (quoted) return prefix + JobMetadataKeyPath(key);
    if (key.empty()) return prefix;
    return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
  }
};

Status Bad(const Path& p, std::string_view what) {
  std::string where = p.ToString();
  return InvalidArgument(where.empty() ? std::string(what) : fmt::format("{}: {}", where, what));
}

class Reader {
 public:
  explicit Reader(const BatchLimits& limits) : limits_(limits) {}

  Status String(element e, const Path& p, std::string& out, bool required_nonempty) {
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) return Bad(p, "must be a string");
    if (s.size() > limits_.max_string_bytes) {
      return Bad(p, fmt::format("longer than {} bytes", limits_.max_string_bytes));
    }
    for (char c : s) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return Bad(p, "contains a control character");
      }
    }
    if (required_nonempty && s.empty()) return Bad(p, "must not be empty");
    out.assign(s);
    return Status::Ok();
  }

  Status Time(element e, const Path& p, int64_t& out) {
    if (e.is_string()) {
      std::string_view s = e.get_string().value_unsafe();
      auto t = ParseTime(s);
      if (!t.ok()) return Bad(p, t.status().message());
      out = *t;
      if (out < kEarliestMs || out > kLatestMs) {
        return Bad(p, fmt::format("{} is outside 2000..2200", s));
      }
      return Status::Ok();
    }
    int64_t i = 0;
    if (e.get_int64().get(i) == simdjson::SUCCESS) {
      out = i;
    } else {
      double d = 0;
      if (e.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d) || d != std::floor(d) ||
          std::fabs(d) > 9e15) {
        return Bad(p, "must be epoch milliseconds (an integer) or an RFC 3339 string");
      }
      out = static_cast<int64_t>(d);
    }
    // Milliseconds since the epoch between 2000 and 2200: catches seconds sent as ms.
    if (out < kEarliestMs || out > kLatestMs) {
      return Bad(p, fmt::format("{} is not a plausible time in epoch milliseconds (2000..2200)", out));
    }
    return Status::Ok();
  }

  Status Int(element e, const Path& p, int64_t& out, int64_t min, int64_t max) {
    int64_t i = 0;
    double d = 0;
    if (e.get_int64().get(i) != simdjson::SUCCESS) {
      if (e.get_double().get(d) != simdjson::SUCCESS || d != std::floor(d) || !std::isfinite(d)) {
        return Bad(p, "must be an integer");
      }
      if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
        return Bad(p, fmt::format("must be within {}..{}", min, max));
      }
      i = static_cast<int64_t>(d);
    }
    if (i < min || i > max) return Bad(p, fmt::format("must be within {}..{}", min, max));
    out = i;
    return Status::Ok();
  }

  // A figure: a finite number within [min, max], or null for "absent".
  Status Figure(element e, const Path& p, std::optional<double>& out, double min, double max) {
    if (e.is_null()) {
      out.reset();
      return Status::Ok();
    }
    double d = 0;
    if (e.get_double().get(d) != simdjson::SUCCESS) {
      // simdjson does not coerce integers to double through get_double for big ints.
      int64_t i = 0;
      if (e.get_int64().get(i) != simdjson::SUCCESS) return Bad(p, "must be a number or null");
      d = static_cast<double>(i);
    }
    if (!std::isfinite(d)) return Bad(p, "must be finite");
    if (d < min || d > max) return Bad(p, fmt::format("must be within {}..{}", min, max));
    // -0.0 (written "-0.0" or an underflow such as "-1e-400") is 0: written back it would
    // be "-0", which JSON readers take for the integer 0, so the batch's canonical form,
    // and with it its content digest, would change on a second reading.
    out = d == 0 ? 0.0 : d;
    return Status::Ok();
  }

  Status Ratio(element e, const Path& p, std::optional<double>& out) {
    return Figure(e, p, out, 0.0, 1.0);
  }
  Status NonNegative(element e, const Path& p, std::optional<double>& out) {
    return Figure(e, p, out, 0.0, 1e15);
  }

  Status Array(element e, const Path& p, array& out, size_t limit) {
    if (e.get_array().get(out) != simdjson::SUCCESS) return Bad(p, "must be an array");
    if (out.size() > limit) return Bad(p, fmt::format("more than {} entries", limit));
    return Status::Ok();
  }

  Status Object(element e, const Path& p, object& out) {
    if (e.get_object().get(out) != simdjson::SUCCESS) return Bad(p, "must be an object");
    return Status::Ok();
  }

  Status Device(element e, const Path& p, gpuledger::Device& d) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_uuid = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "uuid") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, d.uuid, true));
        has_uuid = true;
      } else if (key == "node") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, d.node, false));
      } else if (key == "model") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, d.model, false));
      } else if (key == "memory_mib") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, d.memory_mib, 0, int64_t{1} << 40));
      } else if (key == "pool") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, d.pool, false));
      } else if (key == "capacity_type") {
        std::string s;
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s, true));
        auto c = ParseCapacityType(s);
        if (!c.ok()) return Bad(f, c.status().message());
        d.capacity_type = *c;
      } else if (key == "parent") {
        if (!v.is_null()) GPULEDGER_RETURN_IF_ERROR(String(v, f, d.parent_uuid, false));
      } else if (key == "share") {
        std::string s;
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s, true));
        auto sh = ParseShare(s);
        if (!sh.ok()) return Bad(f, sh.status().message());
        d.share = *sh;
      } else if (key == "mig_profile") {
        if (!v.is_null()) GPULEDGER_RETURN_IF_ERROR(String(v, f, d.mig_profile, false));
      } else if (key == "sample_interval_ms") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, d.sample_interval_ms, 1, kMsPerDay));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (!has_uuid) return Bad(p.Field("uuid"), "missing");
    if (d.parent_uuid.empty() != (d.share == Share{1, 1})) {
      return Bad(p, "a MIG instance needs both \"parent\" and a \"share\" below 1; a GPU neither");
    }
    if (d.parent_uuid == d.uuid) return Bad(p.Field("parent"), "a device cannot be its own parent");
    return Status::Ok();
  }

  Status OptionalTime(element v, const Path& f, std::optional<int64_t>& out) {
    if (v.is_null()) {
      out.reset();
      return Status::Ok();
    }
    int64_t t = 0;
    GPULEDGER_RETURN_IF_ERROR(Time(v, f, t));
    out = t;
    return Status::Ok();
  }

  // "model": {"parameters": 7e9, "layers": 32, "hidden": 4096, "sequence": 4096,
  //           "dtype": "bf16"}
  Status JobModel(element e, const Path& p, gpuledger::Job& j) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "parameters") {
        GPULEDGER_RETURN_IF_ERROR(Figure(v, f, j.model_parameters, 1.0, 1e16));
      } else if (key == "layers") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, j.model_layers, 1, 100'000));
      } else if (key == "hidden") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, j.model_hidden, 1, 10'000'000));
      } else if (key == "sequence") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, j.model_sequence, 1, 100'000'000));
      } else if (key == "dtype") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.model_dtype, true));
      } else {
        return Bad(f, "unknown field");
      }
    }
    return Status::Ok();
  }

  // "labels": {"gpuledger.io/exempt": "true", ...}: string values, unique keys, at most
  // kMaxJobMetadataEntries. Present, even empty, it is the job's whole set.
  Status Metadata(element e, const Path& p, std::optional<JobMetadata>& out) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    if (o.size() > kMaxJobMetadataEntries) {
      return Bad(p, fmt::format("more than {} entries", kMaxJobMetadataEntries));
    }
    JobMetadata m;
    for (auto [key, v] : o) {
      // The key first, named by the map only: a bad key may be huge or hold a control
      // character.
      if (std::string why = JobMetadataEntryError(key, ""); !why.empty()) return Bad(p, why);
      Path f = p.Entry(key);
      std::string value;
      GPULEDGER_RETURN_IF_ERROR(String(v, f, value, false));
      if (!m.emplace(std::string(key), std::move(value)).second) return Bad(f, "declared twice");
    }
    out = std::move(m);
    return Status::Ok();
  }

  Status ProgressReport(element e, const Path& p, gpuledger::Progress& r) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_t = false, has_interval = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "job") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, r.job_id, true));
      } else if (key == "t") {
        GPULEDGER_RETURN_IF_ERROR(Time(v, f, r.t_ms));
        has_t = true;
      } else if (key == "interval_ms") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, r.interval_ms, 1, 31 * kMsPerDay));
        has_interval = true;
      } else if (key == "tokens") {
        GPULEDGER_RETURN_IF_ERROR(Figure(v, f, r.tokens, 0.0, 1e18));
      } else if (key == "model_flops") {
        GPULEDGER_RETURN_IF_ERROR(Figure(v, f, r.model_flops, 0.0, 1e30));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (r.job_id.empty()) return Bad(p.Field("job"), "missing");
    if (!has_t) return Bad(p.Field("t"), "missing");
    if (!has_interval) return Bad(p.Field("interval_ms"), "missing");
    return Status::Ok();
  }

  Status Histogram(element e, const Path& p, CumulativeHistogram& h) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      std::optional<double> d;
      if (key == "le" || key == "count") {
        array arr;
        GPULEDGER_RETURN_IF_ERROR(Array(v, f, arr, 1024));
        std::vector<double>& dst = key == "le" ? h.le : h.count;
        size_t i = 0;
        for (element x : arr) {
          if (key == "le" && x.is_string() && x.get_string().value_unsafe() == "+Inf") {
            dst.push_back(INFINITY);
          } else {
            GPULEDGER_RETURN_IF_ERROR(Figure(x, f.Item(i), d, 0.0, 1e300));
            if (!d) return Bad(f.Item(i), "must be a number");
            dst.push_back(*d);
          }
          ++i;
        }
      } else if (key == "sum") {
        GPULEDGER_RETURN_IF_ERROR(Figure(v, f, d, 0.0, 1e300));
        h.sum = d.value_or(0.0);
      } else if (key == "total") {
        GPULEDGER_RETURN_IF_ERROR(Figure(v, f, d, 0.0, 1e300));
        h.total = d.value_or(0.0);
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (h.le.size() != h.count.size()) return Bad(p, "\"le\" and \"count\" differ in length");
    for (size_t i = 1; i < h.le.size(); ++i) {
      if (h.le[i] <= h.le[i - 1]) return Bad(p.Field("le").Item(i), "bounds must increase");
      if (h.count[i] < h.count[i - 1]) return Bad(p.Field("count").Item(i), "counts must be cumulative");
    }
    return Status::Ok();
  }

  Status Serving(element e, const Path& p, ServingSnapshot& s) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_t = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "job") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s.job_id, true));
      } else if (key == "t") {
        GPULEDGER_RETURN_IF_ERROR(Time(v, f, s.t_ms));
        has_t = true;
      } else if (key == "engine") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s.engine, true));
      } else if (key == "model") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s.model, false));
      } else if (key == "requests_waiting") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.requests_waiting));
      } else if (key == "requests_running") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.requests_running));
      } else if (key == "kv_cache_usage") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.kv_cache_usage_ratio));
      } else if (key == "prompt_tokens_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.prompt_tokens_total));
      } else if (key == "generation_tokens_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.generation_tokens_total));
      } else if (key == "preemptions_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.preemptions_total));
      } else if (key == "requests_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.requests_total));
      } else if (key == "executions_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.executions_total));
      } else if (key == "queue_seconds_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.queue_seconds_total));
      } else if (key == "compute_seconds_total") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.compute_seconds_total));
      } else if (key == "prefill_seconds") {
        GPULEDGER_RETURN_IF_ERROR(Histogram(v, f, s.prefill_seconds));
      } else if (key == "decode_seconds") {
        GPULEDGER_RETURN_IF_ERROR(Histogram(v, f, s.decode_seconds));
      } else if (key == "iteration_tokens") {
        GPULEDGER_RETURN_IF_ERROR(Histogram(v, f, s.iteration_tokens));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (s.job_id.empty()) return Bad(p.Field("job"), "missing");
    if (s.engine.empty()) return Bad(p.Field("engine"), "missing");
    if (!has_t) return Bad(p.Field("t"), "missing");
    return Status::Ok();
  }

  Status Job(element e, const Path& p, gpuledger::Job& j) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_id = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      int64_t i = 0;
      if (key == "id") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.id, true));
        has_id = true;
      } else if (key == "team") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.team, false));
      } else if (key == "project") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.project, false));
      } else if (key == "experiment") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.experiment, false));
      } else if (key == "user") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.user, false));
      } else if (key == "kind") {
        std::string s;
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s, true));
        auto k = ParseJobKind(s);
        if (!k.ok()) return Bad(f, k.status().message());
        j.kind = *k;
      } else if (key == "pool") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.pool, false));
      } else if (key == "priority") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, i, -1'000'000, 1'000'000));
        j.priority = static_cast<int32_t>(i);
      } else if (key == "requested_gpus") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, i, 0, 1'000'000));
        j.requested_gpus = static_cast<int32_t>(i);
      } else if (key == "requested_mig_profile") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, j.requested_mig_profile, false));
      } else if (key == "model") {
        GPULEDGER_RETURN_IF_ERROR(JobModel(v, f, j));
      } else if (key == "labels") {
        GPULEDGER_RETURN_IF_ERROR(Metadata(v, f, j.labels));
      } else if (key == "annotations") {
        GPULEDGER_RETURN_IF_ERROR(Metadata(v, f, j.annotations));
      } else if (key == "submit") {
        GPULEDGER_RETURN_IF_ERROR(OptionalTime(v, f, j.submit_ms));
      } else if (key == "start") {
        GPULEDGER_RETURN_IF_ERROR(OptionalTime(v, f, j.start_ms));
      } else if (key == "end") {
        GPULEDGER_RETURN_IF_ERROR(OptionalTime(v, f, j.end_ms));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (!has_id) return Bad(p.Field("id"), "missing");
    return Status::Ok();
  }

  Status Allocation(element e, const Path& p, gpuledger::Allocation& a) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_from = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "device") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, a.device_uuid, true));
      } else if (key == "job") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, a.job_id, true));
      } else if (key == "from") {
        GPULEDGER_RETURN_IF_ERROR(Time(v, f, a.from_ms));
        has_from = true;
      } else if (key == "to") {
        GPULEDGER_RETURN_IF_ERROR(OptionalTime(v, f, a.to_ms));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (a.device_uuid.empty()) return Bad(p.Field("device"), "missing");
    if (a.job_id.empty()) return Bad(p.Field("job"), "missing");
    if (!has_from) return Bad(p.Field("from"), "missing");
    return Status::Ok();
  }

  Status Process(element e, const Path& p, ProcessSample& ps) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_pid = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      std::optional<double> d;
      if (key == "pid") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, ps.pid, 0, int64_t{1} << 32));
        has_pid = true;
      } else if (key == "job") {
        if (!v.is_null()) GPULEDGER_RETURN_IF_ERROR(String(v, f, ps.job_id, false));
      } else if (key == "fb_used_mib") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, d));
        ps.fb_used_mib = d.value_or(0);
      } else if (key == "sm_share") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, ps.sm_share));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (!has_pid) return Bad(p.Field("pid"), "missing");
    return Status::Ok();
  }

  Status Gaps(element e, const Path& p, IdleGaps& g) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_interval = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      if (key == "interval_ms") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, g.interval_ms, 1, kMsPerDay));
        has_interval = true;
      } else if (key == "idle_ms") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, g.idle_ms, 0, kMsPerDay));
      } else if (key == "short_idle_ms") {
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, g.short_idle_ms, 0, kMsPerDay));
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (!has_interval) return Bad(p.Field("interval_ms"), "missing");
    if (g.idle_ms > g.interval_ms) return Bad(p.Field("idle_ms"), "longer than interval_ms");
    if (g.short_idle_ms > g.idle_ms) return Bad(p.Field("short_idle_ms"), "longer than idle_ms");
    return Status::Ok();
  }

  Status Sample(element e, const Path& p, gpuledger::Sample& s) {
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(e, p, o));
    bool has_t = false;
    for (auto [key, v] : o) {
      Path f = p.Field(key);
      // Ordered by how often agents send them.
      if (key == "device") {
        GPULEDGER_RETURN_IF_ERROR(String(v, f, s.device_uuid, true));
      } else if (key == "t") {
        GPULEDGER_RETURN_IF_ERROR(Time(v, f, s.t_ms));
        has_t = true;
      } else if (key == "sm_active") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.sm_active));
      } else if (key == "gpu_util") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.gpu_util));
      } else if (key == "sm_occupancy") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.sm_occupancy));
      } else if (key == "tensor_active") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.tensor_active));
      } else if (key == "dram_active") {
        GPULEDGER_RETURN_IF_ERROR(Ratio(v, f, s.dram_active));
      } else if (key == "fb_used_mib") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.fb_used_mib));
      } else if (key == "power_watts") {
        GPULEDGER_RETURN_IF_ERROR(NonNegative(v, f, s.power_watts));
      } else if (key == "health") {
        std::string_view h;
        if (v.get_string().get(h) != simdjson::SUCCESS) return Bad(f, "must be a string");
        auto parsed = ParseHealth(h);
        if (!parsed.ok()) return Bad(f, parsed.status().message());
        s.health = *parsed;
      } else if (key == "process_count") {
        int64_t n = 0;
        GPULEDGER_RETURN_IF_ERROR(Int(v, f, n, 0, 1'000'000));
        s.process_count = static_cast<int32_t>(n);
      } else if (key == "gaps") {
        GPULEDGER_RETURN_IF_ERROR(Gaps(v, f, s.gaps.emplace()));
      } else if (key == "processes") {
        array procs;
        GPULEDGER_RETURN_IF_ERROR(Array(v, f, procs, limits_.max_processes_per_sample));
        s.processes.resize(procs.size());
        size_t i = 0;
        for (element pe : procs) {
          GPULEDGER_RETURN_IF_ERROR(Process(pe, f.Item(i), s.processes[i]));
          ++i;
        }
      } else {
        return Bad(f, "unknown field");
      }
    }
    if (s.device_uuid.empty()) return Bad(p.Field("device"), "missing");
    if (!has_t) return Bad(p.Field("t"), "missing");
    return Status::Ok();
  }

  template <typename T, typename Fn>
  Status List(element e, const Path& p, size_t limit, std::vector<T>& out, Fn&& read_one) {
    array arr;
    GPULEDGER_RETURN_IF_ERROR(Array(e, p, arr, limit));
    out.resize(arr.size());
    size_t i = 0;
    for (element item : arr) {
      GPULEDGER_RETURN_IF_ERROR(read_one(item, p.Item(i), out[i]));
      ++i;
    }
    return Status::Ok();
  }

  Status Top(element root, Batch& b) {
    Path p;
    object o;
    GPULEDGER_RETURN_IF_ERROR(Object(root, p, o));
    // The id and version first, so that every later error can name the batch.
    element v;
    if (o["batch_id"].get(v) != simdjson::SUCCESS) return Bad(p.Field("batch_id"), "missing");
    GPULEDGER_RETURN_IF_ERROR(String(v, p.Field("batch_id"), b.batch_id, true));
    if (o["version"].get(v) != simdjson::SUCCESS) return Bad(p.Field("version"), "missing");
    int64_t version = 0;
    GPULEDGER_RETURN_IF_ERROR(Int(v, p.Field("version"), version, 0, 1'000'000));
    if (version != kBatchVersion) {
      return Bad(p.Field("version"),
                 fmt::format("unsupported version {} (this build reads version {})", version,
                             kBatchVersion));
    }
    b.version = static_cast<int>(version);
    for (auto [key, val] : o) {
      Path f = p.Field(key);
      if (key == "batch_id" || key == "version") continue;
      if (key == "source") {
        GPULEDGER_RETURN_IF_ERROR(String(val, f, b.source, false));
      } else if (key == "sent_at") {
        int64_t ignored = 0;
        GPULEDGER_RETURN_IF_ERROR(Time(val, f, ignored));
      } else if (key == "devices") {
        GPULEDGER_RETURN_IF_ERROR(List(val, f, limits_.max_devices, b.devices,
                                       [&](element x, const Path& q, gpuledger::Device& d) {
                                         return Device(x, q, d);
                                       }));
      } else if (key == "jobs") {
        GPULEDGER_RETURN_IF_ERROR(List(
            val, f, limits_.max_jobs, b.jobs,
            [&](element x, const Path& q, gpuledger::Job& j) { return Job(x, q, j); }));
      } else if (key == "allocations") {
        GPULEDGER_RETURN_IF_ERROR(List(val, f, limits_.max_allocations, b.allocations,
                                       [&](element x, const Path& q, gpuledger::Allocation& a) {
                                         return Allocation(x, q, a);
                                       }));
      } else if (key == "serving") {
        GPULEDGER_RETURN_IF_ERROR(List(val, f, limits_.max_jobs, b.serving,
                                       [&](element x, const Path& q, ServingSnapshot& r) {
                                         return Serving(x, q, r);
                                       }));
      } else if (key == "progress") {
        GPULEDGER_RETURN_IF_ERROR(List(val, f, limits_.max_jobs, b.progress,
                                       [&](element x, const Path& q, gpuledger::Progress& r) {
                                         return ProgressReport(x, q, r);
                                       }));
      } else if (key == "samples") {
        GPULEDGER_RETURN_IF_ERROR(List(
            val, f, limits_.max_samples, b.samples,
            [&](element x, const Path& q, gpuledger::Sample& s) { return Sample(x, q, s); }));
      } else {
        return Bad(f, "unknown field");
      }
    }
    return Status::Ok();
  }

 private:
  const BatchLimits& limits_;
};

void AppendJsonString(fmt::memory_buffer& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// Appends `,"key":` (or `"key":` first in an object).
void Key(fmt::memory_buffer& out, bool& first, std::string_view key) {
  if (!first) out.push_back(',');
  first = false;
  AppendJsonString(out, key);
  out.push_back(':');
}

void StrField(fmt::memory_buffer& out, bool& first, std::string_view key, std::string_view v,
              bool always = false) {
  if (v.empty() && !always) return;
  Key(out, first, key);
  AppendJsonString(out, v);
}

void NumField(fmt::memory_buffer& out, bool& first, std::string_view key,
              const std::optional<double>& v) {
  if (!v) return;
  Key(out, first, key);
  fmt::format_to(std::back_inserter(out), "{}", *v);
}

void IntField(fmt::memory_buffer& out, bool& first, std::string_view key,
              const std::optional<int64_t>& v) {
  if (!v) return;
  Key(out, first, key);
  fmt::format_to(std::back_inserter(out), "{}", *v);
}

}  // namespace

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

Result<Batch> ParseBatch(std::string_view json, const BatchLimits& limits) {
  thread_local simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(json.data(), json.size()).get(root); err != simdjson::SUCCESS) {
    return InvalidArgument(fmt::format("batch: malformed JSON: {}", simdjson::error_message(err)));
  }
  Batch b;
  Reader reader(limits);
  Status st = reader.Top(root, b);
  if (!st.ok()) {
    std::string name = b.batch_id.empty() ? std::string("batch") : "batch " + b.batch_id;
    return st.WithContext(name);
  }
  // Over the parsed content in WriteBatch's canonical form, not the bytes: a client that
  // re-serializes a retry (other whitespace, key order, number spelling) is still
  // idempotent, and only truly different content under the same batch id is a conflict.
  b.content_digest = Fnv1a64(WriteBatch(b));
  return b;
}

std::string WriteBatch(const Batch& b) {
  fmt::memory_buffer out;
  out.reserve(256 + b.samples.size() * 160);
  bool first = true;
  out.push_back('{');
  Key(out, first, "version");
  fmt::format_to(std::back_inserter(out), "{}", b.version);
  StrField(out, first, "batch_id", b.batch_id, true);
  StrField(out, first, "source", b.source);
  auto list = [&](std::string_view key, const auto& items, auto&& write_one) {
    if (items.empty()) return;
    Key(out, first, key);
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out.push_back(',');
      out.push_back('{');
      bool f = true;
      write_one(items[i], f);
      out.push_back('}');
    }
    out.push_back(']');
  };
  list("devices", b.devices, [&](const Device& d, bool& f) {
    StrField(out, f, "uuid", d.uuid, true);
    StrField(out, f, "node", d.node);
    StrField(out, f, "model", d.model);
    if (d.memory_mib) IntField(out, f, "memory_mib", d.memory_mib);
    StrField(out, f, "pool", d.pool);
    StrField(out, f, "capacity_type", CapacityTypeName(d.capacity_type));
    StrField(out, f, "parent", d.parent_uuid);
    if (d.is_mig()) StrField(out, f, "share", fmt::format("{}/{}", d.share.num, d.share.den));
    StrField(out, f, "mig_profile", d.mig_profile);
    if (d.sample_interval_ms) IntField(out, f, "sample_interval_ms", d.sample_interval_ms);
  });
  list("jobs", b.jobs, [&](const Job& j, bool& f) {
    StrField(out, f, "id", j.id, true);
    StrField(out, f, "team", j.team);
    StrField(out, f, "project", j.project);
    StrField(out, f, "experiment", j.experiment);
    StrField(out, f, "user", j.user);
    StrField(out, f, "kind", JobKindName(j.kind));
    StrField(out, f, "pool", j.pool);
    if (j.priority) IntField(out, f, "priority", j.priority);
    if (j.requested_gpus) IntField(out, f, "requested_gpus", j.requested_gpus);
    StrField(out, f, "requested_mig_profile", j.requested_mig_profile);
    IntField(out, f, "submit", j.submit_ms);
    IntField(out, f, "start", j.start_ms);
    IntField(out, f, "end", j.end_ms);
    if (j.model_parameters || j.model_layers || j.model_hidden || j.model_sequence ||
        !j.model_dtype.empty()) {
      Key(out, f, "model");
      out.push_back('{');
      bool mf = true;
      NumField(out, mf, "parameters", j.model_parameters);
      if (j.model_layers) IntField(out, mf, "layers", j.model_layers);
      if (j.model_hidden) IntField(out, mf, "hidden", j.model_hidden);
      if (j.model_sequence) IntField(out, mf, "sequence", j.model_sequence);
      StrField(out, mf, "dtype", j.model_dtype);
      out.push_back('}');
    }
    for (auto [name, m] : {std::pair{"labels", &j.labels}, std::pair{"annotations", &j.annotations}}) {
      if (!*m) continue;  // says nothing; an empty set is written, as `{}`
      Key(out, f, name);
      out.push_back('{');
      bool mf = true;
      for (const auto& [key, value] : **m) StrField(out, mf, key, value, true);
      out.push_back('}');
    }
  });
  auto histogram = [&](bool& f, std::string_view key, const CumulativeHistogram& h) {
    if (h.empty()) return;
    Key(out, f, key);
    out.push_back('{');
    bool hf = true;
    Key(out, hf, "le");
    out.push_back('[');
    for (size_t i = 0; i < h.le.size(); ++i) {
      if (i) out.push_back(',');
      if (std::isinf(h.le[i])) {
        out.append(std::string_view("\"+Inf\""));
      } else {
        fmt::format_to(std::back_inserter(out), "{}", h.le[i]);
      }
    }
    out.push_back(']');
    Key(out, hf, "count");
    out.push_back('[');
    for (size_t i = 0; i < h.count.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", h.count[i]);
    out.push_back(']');
    NumField(out, hf, "sum", h.sum);
    NumField(out, hf, "total", h.total);
    out.push_back('}');
  };
  list("serving", b.serving, [&](const ServingSnapshot& r, bool& f) {
    StrField(out, f, "job", r.job_id, true);
    IntField(out, f, "t", r.t_ms);
    StrField(out, f, "engine", r.engine, true);
    StrField(out, f, "model", r.model);
    NumField(out, f, "requests_waiting", r.requests_waiting);
    NumField(out, f, "requests_running", r.requests_running);
    NumField(out, f, "kv_cache_usage", r.kv_cache_usage_ratio);
    NumField(out, f, "prompt_tokens_total", r.prompt_tokens_total);
    NumField(out, f, "generation_tokens_total", r.generation_tokens_total);
    NumField(out, f, "preemptions_total", r.preemptions_total);
    NumField(out, f, "requests_total", r.requests_total);
    NumField(out, f, "executions_total", r.executions_total);
    NumField(out, f, "queue_seconds_total", r.queue_seconds_total);
    NumField(out, f, "compute_seconds_total", r.compute_seconds_total);
    histogram(f, "prefill_seconds", r.prefill_seconds);
    histogram(f, "decode_seconds", r.decode_seconds);
    histogram(f, "iteration_tokens", r.iteration_tokens);
  });
  list("progress", b.progress, [&](const Progress& r, bool& f) {
    StrField(out, f, "job", r.job_id, true);
    IntField(out, f, "t", r.t_ms);
    IntField(out, f, "interval_ms", r.interval_ms);
    NumField(out, f, "tokens", r.tokens);
    NumField(out, f, "model_flops", r.model_flops);
  });
  list("allocations", b.allocations, [&](const Allocation& a, bool& f) {
    StrField(out, f, "device", a.device_uuid, true);
    StrField(out, f, "job", a.job_id, true);
    IntField(out, f, "from", a.from_ms);
    IntField(out, f, "to", a.to_ms);
  });
  list("samples", b.samples, [&](const Sample& s, bool& f) {
    StrField(out, f, "device", s.device_uuid, true);
    IntField(out, f, "t", s.t_ms);
    NumField(out, f, "sm_active", s.sm_active);
    NumField(out, f, "sm_occupancy", s.sm_occupancy);
    NumField(out, f, "tensor_active", s.tensor_active);
    NumField(out, f, "dram_active", s.dram_active);
    NumField(out, f, "gpu_util", s.gpu_util);
    NumField(out, f, "fb_used_mib", s.fb_used_mib);
    NumField(out, f, "power_watts", s.power_watts);
    if (s.health != Health::kOk) StrField(out, f, "health", HealthName(s.health));
    if (s.process_count) IntField(out, f, "process_count", int64_t{*s.process_count});
    if (s.gaps) {
      Key(out, f, "gaps");
      fmt::format_to(std::back_inserter(out), "{{\"interval_ms\":{},\"idle_ms\":{},\"short_idle_ms\":{}}}",
                     s.gaps->interval_ms, s.gaps->idle_ms, s.gaps->short_idle_ms);
    }
    if (!s.processes.empty()) {
      Key(out, f, "processes");
      out.push_back('[');
      for (size_t i = 0; i < s.processes.size(); ++i) {
        const ProcessSample& p = s.processes[i];
        if (i) out.push_back(',');
        out.push_back('{');
        bool pf = true;
        IntField(out, pf, "pid", p.pid);
        StrField(out, pf, "job", p.job_id);
        NumField(out, pf, "fb_used_mib", p.fb_used_mib);
        NumField(out, pf, "sm_share", p.sm_share);
        out.push_back('}');
      }
      out.push_back(']');
    }
  });
  out.push_back('}');
  return fmt::to_string(out);
}

}  // namespace gpuledger::wire
