// libFuzzer target for sample chunks (store/sample_chunk.h; built with -DGPULEDGER_FUZZ=ON
// and clang; scripts/fuzz.sh runs it). Beyond "no crash, no sanitizer report" on the
// input taken as a chunk (either format, deflated or not), it reads the input as samples
// (times, figures present or absent, health, process count, gaps), encodes them and
// checks that they decode to exactly what went in, and that ChunkTimes and DecodeActivity
// agree. The input is also read as a day's hour rollups (store/rollup_days.h): rows it
// decodes to lie in the day, in (hour, job) order, and encode again to a blob that decodes
// to the same rows. And it is taken as a serving chunk (store/serving_chunk.h): where it
// decodes, its gauges and times agree with it, and it encodes again to itself.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "store/rollup_days.h"
#include "store/sample_chunk.h"
#include "store/serving_chunk.h"

namespace gs = gpuledger::store;
using gpuledger::Health;
using gpuledger::IdleGaps;
using gpuledger::Sample;

namespace {

// Takes bytes off the input; zeros once it is spent.
struct Bytes {
  const uint8_t* p;
  size_t left;
  uint64_t Take(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && left > 0; ++i, --left) v = v << 8 | *p++;
    return v;
  }
};

void Check(bool ok) {
  if (!ok) std::abort();
}

bool SameBits(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || std::bit_cast<uint64_t>(*a) == std::bit_cast<uint64_t>(*b));
}

// `raw` as a serving chunk (store/serving_chunk.h): where it decodes whole, its gauges and
// times decode too and are the whole snapshots', and the snapshots encoded again decode
// to themselves.
void CheckAsServingChunk(std::string_view raw, int64_t first) {
  constexpr int64_t kAll0 = std::numeric_limits<int64_t>::min(), kAll1 = std::numeric_limits<int64_t>::max();
  std::vector<gpuledger::ServingSnapshot> snapshots;
  std::vector<gpuledger::ServingGauges> gauges;
  std::vector<int64_t> times;
  if (!gs::DecodeServingChunk(raw, first, kAll0, kAll1, snapshots)) {
    (void)gs::DecodeServingGauges(raw, first, kAll0, kAll1, gauges);
    (void)gs::ServingChunkTimes(raw, first, times);
    return;
  }
  Check(gs::DecodeServingGauges(raw, first, kAll0, kAll1, gauges) && gs::ServingChunkTimes(raw, first, times));
  Check(gauges.size() == snapshots.size() && times.size() == snapshots.size());
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const gpuledger::ServingSnapshot& v = snapshots[i];
    Check(gauges[i].t_ms == v.t_ms && times[i] == v.t_ms && SameBits(gauges[i].requests_waiting, v.requests_waiting) &&
          SameBits(gauges[i].kv_cache_usage_ratio, v.kv_cache_usage_ratio));
  }
  if (snapshots.empty()) return;
  std::vector<gpuledger::ServingSnapshot> again;
  const int64_t first_again = snapshots.front().t_ms;
  Check(gs::DecodeServingChunk(gs::EncodeServingChunk(snapshots), first_again, kAll0, kAll1, again));
  Check(again.size() == snapshots.size());
  for (size_t i = 0; i < again.size(); ++i) {
    const gpuledger::ServingSnapshot &a = snapshots[i], &b = again[i];
    Check(a.t_ms == b.t_ms && SameBits(a.requests_waiting, b.requests_waiting) &&
          SameBits(a.requests_running, b.requests_running) && SameBits(a.kv_cache_usage_ratio, b.kv_cache_usage_ratio) &&
          SameBits(a.prompt_tokens_total, b.prompt_tokens_total) &&
          SameBits(a.generation_tokens_total, b.generation_tokens_total) &&
          SameBits(a.preemptions_total, b.preemptions_total) && SameBits(a.requests_total, b.requests_total) &&
          SameBits(a.executions_total, b.executions_total) && SameBits(a.queue_seconds_total, b.queue_seconds_total) &&
          SameBits(a.compute_seconds_total, b.compute_seconds_total));
    Check(gpuledger::EncodeHistogram(a.prefill_seconds) == gpuledger::EncodeHistogram(b.prefill_seconds) &&
          gpuledger::EncodeHistogram(a.decode_seconds) == gpuledger::EncodeHistogram(b.decode_seconds) &&
          gpuledger::EncodeHistogram(a.iteration_tokens) == gpuledger::EncodeHistogram(b.iteration_tokens));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int64_t first = 1'795'392'000'000;
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  std::vector<Sample> out;
  const bool decoded = gs::DecodeChunk(raw, first, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max(), out);
  // The activity figures alone: refused where the whole samples are, and else the very
  // figures of those samples (sm_active where present, else gpu_util).
  std::vector<gs::ActivitySample> activity;
  Check(gs::DecodeActivity(raw, first, std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), activity) == decoded);
  if (decoded) {
    Check(activity.size() == out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const Sample& w = out[i];
      const gs::ActivitySample& a = activity[i];
      Check(a.t_ms == w.t_ms && a.activity == (w.sm_active ? w.sm_active : w.gpu_util) &&
            a.fb_used_mib == w.fb_used_mib && a.process_count == w.process_count && a.gaps == w.gaps);
    }
  }
  std::vector<int64_t> times;
  (void)gs::ChunkTimes(raw, first, times);
  CheckAsServingChunk(raw, first);

  // The input as samples: per sample a mask byte, a step, health, then the present
  // integers (figures as multiples of their precision, kept where a double is exact).
  std::optional<double> Sample::*const figures[] = {
      &Sample::sm_active, &Sample::sm_occupancy, &Sample::tensor_active, &Sample::dram_active,
      &Sample::gpu_util,  &Sample::fb_used_mib,  &Sample::power_watts};
  const double scales[] = {1e4, 1e4, 1e4, 1e4, 1e4, 1, 10};
  Bytes in{data, size};
  std::vector<Sample> samples;
  int64_t t = first;
  while (in.left > 0 && samples.size() < 4096) {
    Sample s;
    uint64_t mask = in.Take(2);
    t += static_cast<int64_t>(in.Take(3));
    s.t_ms = t;
    s.health = static_cast<Health>(in.Take(1) % 4);
    for (int k = 0; k < 7; ++k) {
      if (mask & (1u << k)) {
        auto v = static_cast<int64_t>(in.Take(6)) - (int64_t{1} << 47);
        s.*figures[k] = static_cast<double>(v) / scales[k];
      }
    }
    if (mask & (1u << 7)) s.process_count = static_cast<int32_t>(in.Take(4));
    if (mask & (1u << 8)) {
      s.gaps = IdleGaps{static_cast<int64_t>(in.Take(8)), static_cast<int64_t>(in.Take(8)),
                        static_cast<int64_t>(in.Take(8))};
    }
    samples.push_back(s);
  }
  gs::ChunkEncoder encoder(first);
  for (const Sample& s : samples) encoder.Add(s);
  std::string chunk = encoder.Finish();
  out.clear();
  Check(gs::DecodeChunk(chunk, first, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), out));
  Check(out.size() == samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& a = samples[i];
    const Sample& b = out[i];
    Check(a.t_ms == b.t_ms && a.health == b.health && a.process_count == b.process_count);
    for (int k = 0; k < 7; ++k) Check(a.*figures[k] == b.*figures[k]);
    Check(a.gaps.has_value() == b.gaps.has_value());
    if (a.gaps) {
      Check(a.gaps->interval_ms == b.gaps->interval_ms && a.gaps->idle_ms == b.gaps->idle_ms &&
            a.gaps->short_idle_ms == b.gaps->short_idle_ms);
    }
  }
  times.clear();
  Check(gs::ChunkTimes(chunk, first, times) && times.size() == samples.size());

  std::vector<gs::RollupRow> rows;
  if (gs::DecodeDayHours(raw, first, 7, [&](const gs::RollupRow& r) { rows.push_back(r); })) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const gs::RollupRow& r = rows[i];
      Check(r.device_id == 7 && r.period_ms >= first && r.period_ms < first + gpuledger::kMsPerDay);
      Check(i == 0 || std::pair(rows[i - 1].period_ms, rows[i - 1].job_id) < std::pair(r.period_ms, r.job_id));
    }
    auto again = gs::EncodeDayHours(first, rows);
    Check(again.ok());
    std::vector<gs::RollupRow> back;
    Check(gs::DecodeDayHours(*again, first, 7, [&](const gs::RollupRow& r) { back.push_back(r); }));
    Check(back.size() == rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      Check(back[i].period_ms == rows[i].period_ms && back[i].job_id == rows[i].job_id && back[i].ms == rows[i].ms &&
            back[i].coarse_ms == rows[i].coarse_ms && back[i].idle_causes == rows[i].idle_causes);
    }
  }
  return 0;
}
