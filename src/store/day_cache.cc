#include "store/day_cache.h"

#include <algorithm>
#include <limits>
#include <random>

namespace gpuledger::store {

int64_t NewDayVersion() {
  static std::mutex mu;
  static std::mt19937_64 bits = [] {
    std::random_device seed;
    std::seed_seq seq{seed(), seed(), seed(), seed(), seed(), seed(), seed(), seed()};
    return std::mt19937_64(seq);
  }();
  std::lock_guard lock(mu);
  return static_cast<int64_t>(bits());
}

std::shared_ptr<const CachedDay> DayRowCache::Find(int64_t day_ms, int64_t version) {
  std::lock_guard lock(mu_);
  auto it = days_.find(day_ms);
  if (it == days_.end() || it->second.version != version) return nullptr;
  it->second.used = ++tick_;
  return it->second.rows;
}

void DayRowCache::Put(int64_t day_ms, int64_t version, std::shared_ptr<const CachedDay> rows) {
  const size_t size = BytesOf(*rows);
  std::lock_guard lock(mu_);
  if (size > max_bytes_) return;  // a day larger than the whole cache is read each time
  auto [it, added] = days_.try_emplace(day_ms);
  if (!added) bytes_ -= BytesOf(*it->second.rows);
  it->second = Entry{version, std::move(rows), ++tick_};
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    auto oldest = days_.end();
    for (auto e = days_.begin(); e != days_.end(); ++e) {
      if (e != it && (oldest == days_.end() || e->second.used < oldest->second.used)) oldest = e;
    }
    bytes_ -= BytesOf(*oldest->second.rows);
    days_.erase(oldest);
  }
}

size_t DayRowCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t DayRowCache::days() const {
  std::lock_guard lock(mu_);
  return days_.size();
}

size_t RollupSummer::Slot(int64_t device_id, int64_t job_id) {
  auto add = [&] {
    out_.push_back(RollupSum{device_id, job_id, {}, 0, {}});
    hour_rows_.push_back(0);
    return out_.size() - 1;
  };
  if (device_id < 0 || device_id >= kDenseIds) {
    auto [it, inserted] = index_.try_emplace({device_id, job_id}, 0);
    if (inserted) it->second = add();
    return it->second;
  }
  if (static_cast<size_t>(device_id) >= jobs_of_.size()) jobs_of_.resize(static_cast<size_t>(device_id) + 1);
  auto& jobs = jobs_of_[static_cast<size_t>(device_id)];
  auto it = std::lower_bound(jobs.begin(), jobs.end(), job_id, [](const auto& e, int64_t j) { return e.first < j; });
  if (it != jobs.end() && it->first == job_id) return it->second;
  size_t i = add();
  jobs.insert(it, {job_id, i});
  return i;
}

std::vector<RollupSum> RollupSummer::Finish() && {
  size_t kept = 0;
  for (size_t i = 0; i < out_.size(); ++i) {
    if (hour_rows_[i] != 0) out_[kept++] = out_[i];
  }
  out_.resize(kept);
  return std::move(out_);
}

namespace {

std::array<int64_t, kIdleCauseCount - 1> NamedCauses(const RollupSum& s) {
  std::array<int64_t, kIdleCauseCount - 1> out{};
  for (size_t c = 0; c < out.size(); ++c) out[c] = s.idle_causes[c];
  return out;
}

// `d` in 32 bits, or nothing when a figure does not fit.
std::optional<CachedDayRow> Compact(const DayRow& d) {
  auto fits = [](int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); };
  CachedDayRow c;
  c.device_id = d.sum.device_id;
  c.job_id = d.sum.job_id;
  for (size_t b = 0; b < kBucketCount; ++b) {
    if (!fits(d.sum.ms[b])) return std::nullopt;
    c.ms[b] = static_cast<int32_t>(d.sum.ms[b]);
  }
  if (!fits(d.sum.coarse_ms) || !fits(d.hour_rows)) return std::nullopt;
  c.coarse_ms = static_cast<int32_t>(d.sum.coarse_ms);
  c.hour_rows = static_cast<int32_t>(d.hour_rows);
  for (size_t k = 0; k + 1 < kIdleCauseCount; ++k) {
    if (!fits(d.sum.idle_causes[k])) return std::nullopt;
    c.named_causes[k] = static_cast<int32_t>(d.sum.idle_causes[k]);
  }
  return c;
}

// Adds to `summer` the hour rows of split.head and split.tail (with `settled`, those of
// device-hours not dirty), and with `settled` the hour rows of the dirty device-hours of
// split.days with figures and hour_rows negated: what the day rows hold of them. All of
// them are read from the device-days' day hours (store/rollup_days.h).
Status AddHourRows(DayRowSource& source, const DaySplit& split, bool settled, RollupSummer& summer) {
  std::array<int64_t, kIdleCauseCount - 1> named{};
  auto add = [&](const RollupRow& r) {
    for (size_t c = 0; c < named.size(); ++c) named[c] = r.idle_causes[c];
    summer.Add(r.device_id, r.job_id, r.ms, r.coarse_ms, named, 1);
  };
  for (const TimeRange* part : {&split.head, &split.tail}) {
    if (part->empty()) continue;
    DirtySet dirty;
    if (settled) {
      GPULEDGER_ASSIGN_OR_RETURN(std::vector<DirtyHour> marks, source.DirtyHoursIn(*part));
      dirty = DirtySet(marks);
    }
    GPULEDGER_RETURN_IF_ERROR(source.ReadDayHours(
        {FloorTo(part->begin_ms, kMsPerDay), part->end_ms},
        [&](int64_t day, int64_t device, std::string_view hours) -> Status {
          if (!DecodeDayHours(hours, day, device, [&](const RollupRow& r) {
                if (part->Contains(r.period_ms) && !dirty.Holds(device, r.period_ms)) {
                  add(r);
                }
              })) {
            return CorruptDayHours(device, day);
          }
          return Status::Ok();
        }));
  }
  if (!settled || split.days.empty()) return Status::Ok();
  return source.ReadDirtyDayHours(split.days, [&](int64_t hour, int64_t device, std::string_view hours) -> Status {
    const int64_t day = FloorTo(hour, kMsPerDay);
    if (!DecodeDayHours(hours, day, device, [&](const RollupRow& r) {
          if (r.period_ms != hour) return;
          std::array<int64_t, kBucketCount> ms{};
          for (size_t b = 0; b < kBucketCount; ++b) ms[b] = -r.ms[b];
          for (size_t c = 0; c < named.size(); ++c) named[c] = -r.idle_causes[c];
          summer.Add(device, r.job_id, ms, -r.coarse_ms, named, -1);
        })) {
      return CorruptDayHours(device, day);
    }
    return Status::Ok();
  });
}

}  // namespace

Result<std::vector<RollupSum>> SumHourRollupsThroughCache(DayRowSource& source, DayRowCache& cache,
                                                          const TimeRange& hours, bool settled) {
  const DaySplit split = SplitIntoDays(hours);
  RollupSummer summer;
  if (!split.days.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(auto versions, source.DayVersions(split.days));
    // The days cached at their version, and room for their pairs (at most their rows).
    std::vector<std::shared_ptr<const CachedDay>> cached;
    size_t cached_rows = 0;
    auto v = versions.begin();
    for (int64_t day = split.days.begin_ms; day < split.days.end_ms; day += kMsPerDay) {
      while (v != versions.end() && v->first < day) ++v;
      cached.push_back(v != versions.end() && v->first == day ? cache.Find(day, v->second) : nullptr);
      if (cached.back()) cached_rows += cached.back()->size();
    }
    summer.Reserve(cached_rows);
    size_t k = 0;
    for (int64_t day = split.days.begin_ms; day < split.days.end_ms; day += kMsPerDay, ++k) {
      if (cached[k]) {
        for (const CachedDayRow& r : *cached[k]) summer.Add(r);
        continue;
      }
      std::optional<int64_t> version;
      auto rows = std::make_shared<CachedDay>();
      bool compact = true;
      GPULEDGER_RETURN_IF_ERROR(source.ReadDay(day, version, [&](const DayRow& d) {
        summer.Add(d.sum.device_id, d.sum.job_id, d.sum.ms, d.sum.coarse_ms, NamedCauses(d.sum), d.hour_rows);
        if (!compact) return;
        if (auto c = Compact(d)) {
          rows->push_back(*c);
        } else {
          compact = false;
        }
      }));
      if (version && compact) {
        rows->shrink_to_fit();
        cache.Put(day, *version, std::move(rows));
      }
    }
  }
  GPULEDGER_RETURN_IF_ERROR(AddHourRows(source, split, settled, summer));
  return std::move(summer).Finish();
}

}  // namespace gpuledger::store
