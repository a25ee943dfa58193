#include "ledger/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ledger/attribution.h"
#include "ledger/ingest_plan.h"
#include "ledger/largest_remainders.h"

namespace gpuledger::ledger {
namespace {

constexpr std::string_view kUnset = "(unset)";

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(p.first * 1'000'003 + p.second);
  }
};

struct DimensionInfo {
  Dimension d;
  std::string_view name;
};
constexpr DimensionInfo kDimensions[] = {
    {Dimension::kTeam, "team"},   {Dimension::kProject, "project"},
    {Dimension::kExperiment, "experiment"}, {Dimension::kUser, "user"},
    {Dimension::kKind, "kind"},   {Dimension::kJob, "job"},
    {Dimension::kPool, "pool"},   {Dimension::kNode, "node"},
    {Dimension::kModel, "model"}, {Dimension::kDevice, "device"},
    {Dimension::kHour, "hour"},
};

}  // namespace

// The latest jobs' ranks a ledger made, for the next query that reads the same list.
class Ledger::RankedJobsCache {
 public:
  // The jobs of one list (StoreReads::SharedJobs) with what every report derives from it:
  // each job's place in job-id order and, made on the first call of IdOf, the map from
  // job id to store id. Made once per list, shared by the queries that read that list.
  class Ranked {
   public:
    explicit Ranked(std::shared_ptr<const std::vector<store::JobRecord>> list) : jobs_(std::move(list)) {
      auto by_id = [](const store::JobRecord& a, const store::JobRecord& b) { return a.id < b.id; };
      if (!std::is_sorted(jobs_->begin(), jobs_->end(), by_id)) {  // should a store not keep ListJobs' order
        auto sorted = std::make_shared<std::vector<store::JobRecord>>(*jobs_);
        std::sort(sorted->begin(), sorted->end(), by_id);
        jobs_ = std::move(sorted);
      }
      // Ranks by the names the data give (uuid, job id), not by the store's ids, which
      // follow the order batches arrived in: two stores of the same data break the ties
      // of an apportionment alike.
      const auto& j = *jobs_;
      std::vector<uint32_t> by_key(j.size());
      for (size_t i = 0; i < by_key.size(); ++i) by_key[i] = static_cast<uint32_t>(i);
      std::sort(by_key.begin(), by_key.end(), [&](uint32_t a, uint32_t b) { return j[a].job.id < j[b].job.id; });
      rank_.resize(j.size());
      for (size_t r = 0; r < by_key.size(); ++r) rank_[by_key[r]] = static_cast<int64_t>(r) + 1;  // 0: no job
    }
    const std::vector<store::JobRecord>& jobs() const { return *jobs_; }  // by store id
    int64_t rank(size_t i) const { return rank_[i]; }                      // of jobs()[i], from 1
    // The store id of the job keyed `key`, 0 if none.
    int64_t IdOf(const std::string& key) const {
      std::call_once(key_map_once_, [&] {
        key_to_id_.reserve(jobs_->size());
        for (const auto& j : *jobs_) key_to_id_.emplace(j.job.id, j.id);
      });
      auto it = key_to_id_.find(key);
      return it == key_to_id_.end() ? 0 : it->second;
    }

   private:
    std::shared_ptr<const std::vector<store::JobRecord>> jobs_;
    std::vector<int64_t> rank_;
    mutable std::once_flag key_map_once_;
    mutable std::unordered_map<std::string, int64_t> key_to_id_;  // made under key_map_once_
  };

  std::shared_ptr<const Ranked> Of(std::shared_ptr<const std::vector<store::JobRecord>> list) {
    {
      MutexLock lock(mu_);
      if (kept_ && kept_list_ == list) return kept_;
    }
    auto made = std::make_shared<const Ranked>(list);  // outside the lock: other queries go on
    MutexLock lock(mu_);
    kept_list_ = std::move(list);
    kept_ = made;
    return made;
  }

 private:
  Mutex mu_;
  std::shared_ptr<const std::vector<store::JobRecord>> kept_list_ GUARDED_BY(mu_);  // as the store handed it
  std::shared_ptr<const Ranked> kept_ GUARDED_BY(mu_);
};

namespace {

// Everything a report needs to know about the fleet, loaded once per query.
class FleetIndex {
 public:
  // `now_ms` and `retire_after_ms` set the service spans (see ServiceSpan).
  // The jobs' ranks come from `ranked`, made again only when the store hands out another
  // list.
  Status Load(store::StoreReads& s, Ledger::RankedJobsCache& ranked, int64_t now_ms = kForever,
              int64_t retire_after_ms = kForever) {
    GPULEDGER_ASSIGN_OR_RETURN(devices_, s.ListDevices());
    GPULEDGER_ASSIGN_OR_RETURN(auto jobs, s.SharedJobs());
    jobs_ = ranked.Of(std::move(jobs));
    GPULEDGER_ASSIGN_OR_RETURN(book_, s.LoadPriceBook());
    std::unordered_map<int64_t, int64_t> child_ticks;
    // Store ids are dense (1, 2, ...): a vector maps them to their index, with the hash
    // map only for a store whose ids are not.
    int64_t max_id = 0;
    for (const auto& d : devices_) max_id = std::max(max_id, d.id);
    dense_ = max_id >= 0 && max_id <= 4 * static_cast<int64_t>(devices_.size()) + 1024;
    if (dense_) dense_index_.assign(static_cast<size_t>(max_id) + 1, kNoIndex);
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (dense_ && devices_[i].id >= 0) {
        dense_index_[static_cast<size_t>(devices_[i].id)] = static_cast<uint32_t>(i);
      } else {
        device_index_[devices_[i].id] = i;
      }
      if (devices_[i].parent_id) child_ticks[devices_[i].parent_id] += devices_[i].device.share.ticks();
    }
    ticks_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i) {
      const auto& d = devices_[i];
      // A MIG parent keeps the share its slices do not cover: its unpartitioned rest.
      ticks_[i] = d.parent_id ? d.device.share.ticks()
                              : std::max<int64_t>(0, kShareScale - child_ticks[d.id]);
    }
    // Devices rank by uuid, as jobs by job id (RankedJobsCache::Ranked).
    std::vector<size_t> by_uuid(devices_.size());
    for (size_t i = 0; i < by_uuid.size(); ++i) by_uuid[i] = i;
    std::sort(by_uuid.begin(), by_uuid.end(),
              [&](size_t a, size_t b) { return devices_[a].device.uuid < devices_[b].device.uuid; });
    device_rank_.resize(devices_.size());
    for (size_t r = 0; r < by_uuid.size(); ++r) device_rank_[by_uuid[r]] = static_cast<int64_t>(r);
    // The data ends at the fleet's latest sample (never after now); a store with no sample
    // yet has no end but now.
    data_end_ms_ = 0;
    for (const auto& d : devices_) data_end_ms_ = std::max(data_end_ms_, d.last_sample_ms);
    data_end_ms_ = data_end_ms_ == 0 ? now_ms : std::min(data_end_ms_, now_ms);
    service_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i) {
      const auto& d = devices_[i];
      int64_t end = kForever;
      // Silent for good: retired at the end of the hour of its last sample.
      if (d.last_sample_ms > 0 && retire_after_ms < kForever &&
          d.last_sample_ms + retire_after_ms <= data_end_ms_) {
        end = FloorTo(d.last_sample_ms, kMsPerHour) + kMsPerHour;
      }
      service_[i] = d.in_service_ms > 0 ? TimeRange{d.in_service_ms, std::max(d.in_service_ms, end)}
                                        : TimeRange{0, 0};
    }
    return Status::Ok();
  }

  // When `dev` was capacity the fleet had monitored: from its first sample or allocation
  // until it retired (docs/ARCHITECTURE.md, "Windows end where the data ends"). Empty for
  // a device never in service.
  TimeRange ServiceSpan(const store::DeviceRecord& dev) const { return service_[IndexOf(dev)]; }
  // The fleet's latest sample, or now when it is earlier (or nothing was sampled yet).
  int64_t data_end_ms() const { return data_end_ms_; }

  const std::vector<store::DeviceRecord>& devices() const { return devices_; }
  const store::DeviceRecord* device(int64_t id) const {
    if (dense_) {
      if (id < 0 || static_cast<size_t>(id) >= dense_index_.size()) return nullptr;
      uint32_t i = dense_index_[static_cast<size_t>(id)];
      return i == kNoIndex ? nullptr : &devices_[i];
    }
    auto it = device_index_.find(id);
    return it == device_index_.end() ? nullptr : &devices_[it->second];
  }
  // The place in devices() of a record of devices(), from 0: what per-device figures are
  // kept by.
  size_t IndexOf(const store::DeviceRecord& dev) const {
    // A record from elsewhere (a copy) would read another device's figures: a bug.
    std::less<const store::DeviceRecord*> before;  // a total order, for any two pointers
    if (before(&dev, devices_.data()) || !before(&dev, devices_.data() + devices_.size())) std::abort();
    return static_cast<size_t>(&dev - devices_.data());
  }
  int64_t ticks(const store::DeviceRecord& dev) const { return ticks_[IndexOf(dev)]; }
  // The device's place in uuid order, the job's in job-id order (0: no job).
  int64_t device_rank(const store::DeviceRecord& dev) const { return device_rank_[IndexOf(dev)]; }
  size_t job_count() const { return jobs_->jobs().size(); }
  int64_t job_rank(int64_t job_id) const {
    size_t i = JobIndex(job_id);
    return i == kNoJobIndex ? 0 : jobs_->rank(i);
  }
  const Job* job(int64_t id) const {
    size_t i = JobIndex(id);
    return i == kNoJobIndex ? nullptr : &jobs_->jobs()[i].job;
  }
  // The store id of the job keyed `key`, 0 if none. The map is made on the first call for
  // a list: only a report that attributes samples needs it.
  int64_t JobIdOf(const std::string& key) const { return jobs_->IdOf(key); }
  const PriceBook& book() const { return book_; }

  std::optional<Money> PriceAt(const store::DeviceRecord& d, int64_t t_ms) const {
    return book_.PriceAt(d.device.model, d.device.pool, d.device.capacity_type, t_ms);
  }

 private:
  static constexpr uint32_t kNoIndex = ~uint32_t{0};
  std::vector<store::DeviceRecord> devices_;
  bool dense_ = false;
  std::vector<uint32_t> dense_index_;                   // store id -> index, when dense_
  std::unordered_map<int64_t, size_t> device_index_;    // otherwise
  std::vector<int64_t> ticks_;
  static constexpr size_t kNoJobIndex = ~size_t{0};
  // The index in jobs_->jobs() of the job with store id `id`: ids are dense, so most
  // often its [id - first id]; otherwise by binary search.
  size_t JobIndex(int64_t id) const {
    const std::vector<store::JobRecord>& jobs = jobs_->jobs();
    if (jobs.empty() || id <= 0) return kNoJobIndex;
    int64_t guess = id - jobs.front().id;
    if (guess >= 0 && static_cast<size_t>(guess) < jobs.size() && jobs[static_cast<size_t>(guess)].id == id) {
      return static_cast<size_t>(guess);
    }
    auto it = std::lower_bound(jobs.begin(), jobs.end(), id, [](const auto& j, int64_t v) { return j.id < v; });
    return it != jobs.end() && it->id == id ? static_cast<size_t>(it - jobs.begin()) : kNoJobIndex;
  }
  std::vector<int64_t> device_rank_;
  std::shared_ptr<const Ledger::RankedJobsCache::Ranked> jobs_;
  PriceBook book_;
  std::vector<TimeRange> service_;
  int64_t data_end_ms_ = kForever;
};

std::string ValueOr(const std::string& v) { return v.empty() ? std::string(kUnset) : v; }

std::string KeyPart(Dimension d, const store::DeviceRecord& dev, const Job* job,
                    const std::string& hour_key) {
  switch (d) {
    case Dimension::kHour: return hour_key;
    case Dimension::kPool: return ValueOr(dev.device.pool);
    case Dimension::kNode: return ValueOr(dev.device.node);
    case Dimension::kModel: return ValueOr(dev.device.model);
    case Dimension::kDevice: return dev.device.uuid;
    default: break;
  }
  if (job == nullptr) return std::string(kNoJob);
  switch (d) {
    case Dimension::kTeam: return ValueOr(job->team);
    case Dimension::kProject: return ValueOr(job->project);
    case Dimension::kExperiment: return ValueOr(job->experiment);
    case Dimension::kUser: return ValueOr(job->user);
    case Dimension::kKind: return std::string(JobKindName(job->kind));
    case Dimension::kJob: return job->id;
    default: return {};
  }
}

// The order of a report's rows: by descending cost, then time, then key.
bool RowBefore(const UsageRow& a, const UsageRow& b) {
  if (a.total_cost() != b.total_cost()) return a.total_cost() > b.total_cost();
  if (a.total_ticks_ms() != b.total_ticks_ms()) return a.total_ticks_ms() > b.total_ticks_ms();
  return a.key < b.key;
}

// Sorts `rows` by RowBefore. The rows are large (a key of strings, arrays of figures):
// their indices are sorted, by figures computed once, and each row is moved once.
void SortRows(std::vector<UsageRow>& rows) {
  struct Order {
    int64_t cost, ticks;
    uint32_t row;
  };
  std::vector<Order> order(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    order[i] = {rows[i].total_cost().micros(), rows[i].total_ticks_ms(), static_cast<uint32_t>(i)};
  }
  std::sort(order.begin(), order.end(), [&](const Order& a, const Order& b) {
    if (a.cost != b.cost) return a.cost > b.cost;
    if (a.ticks != b.ticks) return a.ticks > b.ticks;
    if (rows[a.row].key != rows[b.row].key) return rows[a.row].key < rows[b.row].key;
    return a.row < b.row;  // as a stable sort would leave equal rows
  });
  std::vector<UsageRow> sorted;
  sorted.reserve(rows.size());
  for (const Order& o : order) sorted.push_back(std::move(rows[o.row]));
  rows = std::move(sorted);
}

// Collects one report's figures per atom, with a per-device conservation check.
//
// The rounding rule (core/money.h) is applied to atoms, not to groups: an atom is one
// device's time held by one job (or by none) at one price over the window, or over one
// hour of it when the report is grouped by hour. Atoms are rounded once, together, by
// largest remainder (ties to the earlier atom by device uuid, job id, hour and price), and every
// row is the sum of its atoms. So any
// two groupings of the same window (usage by team, chargeback by team and project, the
// waste by team, project and kind, a report's tables) are sums of the same rounded atoms:
// a part never exceeds its whole and a group costs the same in every table, to the
// micro-unit.
//
// An atom keeps only integer times; its price is constant, so its exact cost is its time
// times its price, made when it is rounded. Grouped by hour, the atoms of an hour are all
// met while that hour is read (the rollups of settled device-hours, then the samples of
// the dirty ones and of the window's edges, which no rollup covers), so the lookup of an
// atom is kept for the current hour only: memory is the atoms themselves.
// A growing array in blocks of 2^14 elements: an append never moves what is stored. A
// month's hourly atoms are 100+ MB, which a vector copies, and faults in afresh, at every
// doubling.
template <class T>
class BlockArray {
 public:
  size_t size() const { return size_; }
  T& operator[](size_t i) { return blocks_[i >> kShift][i & kMask]; }
  const T& operator[](size_t i) const { return blocks_[i >> kShift][i & kMask]; }
  T& emplace_back() {
    if ((size_ & kMask) == 0 && (size_ >> kShift) == blocks_.size()) blocks_.push_back(std::make_unique<T[]>(kMask + 1));
    T& t = (*this)[size_++];
    t = T{};
    return t;
  }

 private:
  static constexpr size_t kShift = 14, kMask = (size_t{1} << kShift) - 1;
  std::vector<std::unique_ptr<T[]>> blocks_;
  size_t size_ = 0;
};

class Accumulator {
 public:
  // `hourly`: an atom per hour (a report grouped by hour), or per window.
  Accumulator(const FleetIndex& fleet, bool hourly)
      : fleet_(fleet), hourly_(hourly), device_ms_(fleet.devices().size(), 0) {}

  // Adds `ms` of device time in bucket `b`, of which `coarse_ms` had its activity from
  // gpu_util.
  void Add(const store::DeviceRecord& dev, int64_t job_id, Bucket b, int64_t ms, int64_t coarse_ms,
           const std::optional<Money>& price) {
    if (ms == 0 && coarse_ms == 0) return;
    device_ms_[fleet_.IndexOf(dev)] += ms;
    AtomCell& c = CellFor(dev, job_id, price);
    int64_t ticks = fleet_.ticks(dev);
    c.ticks_ms[static_cast<size_t>(b)] += ms * ticks;
    c.coarse_ticks_ms += coarse_ms * ticks;
    if (!price) unpriced_[{dev.device.model, dev.device.pool, dev.device.capacity_type}] += ms * ticks;
  }

  // Adds the causes of allocated_idle time already added with Add, at the same price.
  void AddIdleCauses(const store::DeviceRecord& dev, int64_t job_id,
                     const std::array<int64_t, kIdleCauseCount>& ms, const std::optional<Money>& price) {
    bool any = false;
    for (int64_t v : ms) any = any || v != 0;
    if (!any) return;
    AtomCell& c = CellFor(dev, job_id, price);
    int64_t ticks = fleet_.ticks(dev);
    for (size_t k = 0; k < kIdleCauseCount; ++k) c.idle_cause_ticks_ms[k] += ms[k] * ticks;
  }

  // The hour the time added next falls in (an atom of its own when grouping by hour).
  void set_hour(int64_t hour_ms) {
    int64_t h = hourly_ ? hour_ms : 0;
    if (h != hour_ms_) ++hour_stamp_;  // every device's list of atoms this hour is empty again
    hour_ms_ = h;
    last_cell_ = kNone;
  }

  int64_t device_ms(const store::DeviceRecord& dev) const { return device_ms_[fleet_.IndexOf(dev)]; }

  // Rounds every atom's cost, once: after it no time may be added, and Finish groups
  // the same rounded atoms as often as asked.
  void RoundCosts() {
    // Each atom's exact bucket costs, floored; the micro-units the floors leave out of the
    // rounded total go to the largest remainders (core/money.h's ApportionCosts, without
    // a vector of every exact cost: a remainder is below kCostDenominator < 2^32).
    static_assert(kCostDenominator < (int64_t{1} << 32));
    std::vector<std::array<Money, kBucketCount>>& cost = cost_;
    cost.assign(atoms_.size(), {});
    std::vector<Remainder> rems;
    rems.reserve(atoms_.size() * kBucketCount);  // at most one per bucket of each atom
    CostNumerator sum = 0;
    int64_t floor_sum = 0;
    for (size_t i = 0; i < atoms_.size(); ++i) {
      const AtomCell& a = atoms_[i];
      if (a.price_micros < 0) continue;
      for (size_t b = 0; b < kBucketCount; ++b) {
        CostNumerator exact = static_cast<CostNumerator>(a.ticks_ms[b]) * a.price_micros;
        sum += exact;
        // An hour's atom fits 64 bits, whose division by the constant is a multiplication;
        // a long window's may not (ticks and prices are never negative).
        int64_t f;
        uint32_t r;
        if (exact <= std::numeric_limits<int64_t>::max()) {
          auto e = static_cast<int64_t>(exact);
          f = e / kCostDenominator;
          r = static_cast<uint32_t>(e % kCostDenominator);
        } else {
          f = static_cast<int64_t>(exact / kCostDenominator);
          r = static_cast<uint32_t>(exact % kCostDenominator);
        }
        cost[i][b] = Money::FromMicros(f);
        floor_sum += f;
        if (r != 0) {
          rems.push_back({r, static_cast<uint32_t>(i), static_cast<uint32_t>(a.name_rank >> 32),
                          static_cast<uint8_t>(b)});
        }
      }
    }
    int64_t extra = RoundCost(sum).micros() - floor_sum;
    // Ties go to the earlier atom in (device uuid, job id, hour, price) order, then
    // bucket: names, not the store's ids, so that the same data cost the same to the
    // micro-unit in any store, whatever order its batches arrived in.
    const size_t n = std::min(rems.size(), static_cast<size_t>(std::max<int64_t>(extra, 0)));
    ForLargestRemainders(
        rems, n, fleet_.devices().size(),
        [&](const Remainder& r) {  // after the device's rank (Remainder::rank)
          const AtomCell& a = atoms_[r.atom];
          return std::make_tuple(a.name_rank & 0xffffffffu, a.hour_ms, a.price_micros, r.bucket);
        },
        [&](const Remainder& r) { cost[r.atom][r.bucket] += Money::FromMicros(1); });
  }

  // The atoms' figures grouped by `by` (kHour only when the atoms are hourly), with the
  // rows by descending cost when `sorted`. REQUIRES: RoundCosts ran.
  UsageReport Finish(const TimeRange& window, const std::vector<Dimension>& by, bool sorted = true) const {
    UsageReport report;
    report.window = window;
    report.by = by;
    const std::vector<std::array<Money, kBucketCount>>& cost = cost_;
    // A row per distinct key. The key of an atom's (device, job) is made once; grouped by
    // hour, the row is found by (that key, hour) without building strings per atom.
    std::unordered_map<std::pair<int64_t, int64_t>, int64_t, PairHash> partial_of;  // (device, job) -> key id
    std::vector<std::pair<bool, std::vector<std::string>>> partial_keys;  // (no job, key)
    std::map<std::pair<bool, std::vector<std::string>>, int64_t> partial_id;  // hour left empty
    bool by_job = std::any_of(by.begin(), by.end(), IsJobDimension);
    std::unordered_map<int64_t, std::string> hour_keys;
    auto hour_at = std::find(by.begin(), by.end(), Dimension::kHour);
    std::array<CostNumerator, kIdleCauseCount> weights{}, scratch{};
    std::array<Money, kIdleCauseCount> split{};
    // The lookups above, each behind a cheaper one. A key of job attributes alone is the
    // job's, and one of device attributes alone the device's: it is kept by the job's
    // rank or the device's index. A key of both is kept for the device's latest job (a
    // device's atoms are mostly of one job) before the hash. And a key's atoms of one
    // hour follow each other (the hour rollups are read hour by hour), so a row is found
    // by its key's latest hour before its search.
    const bool by_device = std::any_of(by.begin(), by.end(), [](Dimension d) {
      return !IsJobDimension(d) && d != Dimension::kHour;
    });
    constexpr int64_t kNoKey = -1;
    std::vector<int64_t> key_of_job(by_device ? 0 : fleet_.job_count() + 1, kNoKey);  // by job rank
    std::vector<int64_t> key_of_device(by_job ? 0 : fleet_.devices().size(), kNoKey);
    struct LastKey {
      int64_t job_id = -1;
      int64_t key = 0;
    };
    std::vector<LastKey> last_key_of_device(by_job && by_device ? fleet_.devices().size() : 0);
    // Each key's rows, by hour: (hour, row) sorted by hour. The hour rollups come hour by
    // hour, so a key's rows are mostly appended; the samples' hours come after them.
    using HourRow = std::pair<int64_t, size_t>;
    std::vector<std::vector<HourRow>> rows_of_key;
    // Grouped by device and hour, a row holds an atom or a few (a heatmap's 190,000 for a
    // week of 1,000 GPUs): room for them all at once rather than a copy at each doubling.
    if (hourly_ && std::find(by.begin(), by.end(), Dimension::kDevice) != by.end()) {
      report.rows.reserve(atoms_.size());
    }
    auto make_key = [&](const AtomCell& atom) {
      const store::DeviceRecord* dev = fleet_.device(atom.device_id);
      const Job* job = atom.job_id ? fleet_.job(atom.job_id) : nullptr;
      std::pair<bool, std::vector<std::string>> key{by_job && job == nullptr, {}};
      for (Dimension d : by) {
        key.second.push_back(d == Dimension::kHour ? std::string() : KeyPart(d, *dev, job, ""));
      }
      auto [id, added] = partial_id.try_emplace(key, static_cast<int64_t>(partial_keys.size()));
      if (added) {
        partial_keys.push_back(std::move(key));
        rows_of_key.emplace_back();
      }
      return id->second;
    };
    for (size_t i = 0; i < atoms_.size(); ++i) {
      const AtomCell& atom = atoms_[i];
      int64_t key_id = kNoKey;
      if (!by_device) {
        int64_t& k = key_of_job[static_cast<size_t>(atom.name_rank & 0xffffffffu)];  // the job's rank
        if (k == kNoKey) k = make_key(atom);
        key_id = k;
      } else if (!by_job) {
        int64_t& k = key_of_device[atom.device_index];
        if (k == kNoKey) k = make_key(atom);
        key_id = k;
      } else {
        LastKey& last_key = last_key_of_device[atom.device_index];
        key_id = last_key.key;
        if (last_key.job_id != atom.job_id) {
          auto [pit, fresh] = partial_of.try_emplace({atom.device_id, atom.job_id}, 0);
          if (fresh) pit->second = make_key(atom);
          key_id = pit->second;
          last_key = {atom.job_id, key_id};
        }
      }
      std::vector<HourRow>& mine = rows_of_key[static_cast<size_t>(key_id)];
      size_t row_index = 0;
      if (!mine.empty() && mine.back().first == atom.hour_ms) {
        row_index = mine.back().second;
      } else {
        auto at = mine.empty() || mine.back().first < atom.hour_ms
                      ? mine.end()
                      : std::lower_bound(mine.begin(), mine.end(), HourRow(atom.hour_ms, 0));
        if (at != mine.end() && at->first == atom.hour_ms) {
          row_index = at->second;
        } else {
          row_index = report.rows.size();
          mine.insert(at, {atom.hour_ms, row_index});
          UsageRow r;
          std::tie(r.no_job, r.key) = partial_keys[static_cast<size_t>(key_id)];
          if (hour_at != by.end()) {
            auto [h, made] = hour_keys.try_emplace(atom.hour_ms);
            if (made) h->second = FormatTime(atom.hour_ms);
            r.key[static_cast<size_t>(hour_at - by.begin())] = h->second;
          }
          report.rows.push_back(std::move(r));
        }
      }
      UsageRow& row = report.rows[row_index];
      // The rounded idle cost over its causes, by their time (one price within an atom).
      Money idle_cost = cost[i][static_cast<size_t>(Bucket::kAllocatedIdle)];
      if (idle_cost == Money()) {
        split.fill(Money());
      } else {
        for (size_t c = 0; c < kIdleCauseCount; ++c) weights[c] = atom.idle_cause_ticks_ms[c];
        SplitMoneyInto(idle_cost, weights, scratch, split);
      }
      int64_t unpriced = 0;
      if (atom.price_micros < 0) {
        for (int64_t t : atom.ticks_ms) unpriced += t;
      }
      for (UsageRow* r : {&row, &report.total}) {
        for (size_t b = 0; b < kBucketCount; ++b) {
          r->gpu_ticks_ms[b] += atom.ticks_ms[b];
          r->cost[b] += cost[i][b];
        }
        for (size_t c = 0; c < kIdleCauseCount; ++c) {
          r->idle_cause_ticks_ms[c] += atom.idle_cause_ticks_ms[c];
          r->idle_cause_cost[c] += split[c];
        }
        r->coarse_ticks_ms += atom.coarse_ticks_ms;
        r->unpriced_ticks_ms += unpriced;
      }
    }
    if (sorted) SortRows(report.rows);
    report.total.key.assign(by.size(), "(total)");
    for (const auto& [what, ticks] : unpriced_) {
      report.unpriced.push_back({std::get<0>(what), std::get<1>(what), std::get<2>(what), ticks});
    }
    return report;
  }

 private:
  static constexpr size_t kNone = ~size_t{0};

  // One device's time held by one job (0: none) in one hour (0 unless grouping by hour)
  // at one price (-1: unpriced), in integer ticks x ms.
  struct AtomCell {
    int64_t device_id = 0;
    int64_t job_id = 0;
    int64_t hour_ms = 0;
    int64_t price_micros = -1;
    uint64_t name_rank = 0;  // the device's rank by uuid, then the job's by id (FleetIndex)
    uint32_t device_index = 0;  // FleetIndex::IndexOf
    uint32_t next_of_device = 0;  // grouped by hour: the device's next atom this hour
    std::array<int64_t, kBucketCount> ticks_ms{};
    std::array<int64_t, kIdleCauseCount> idle_cause_ticks_ms{};
    int64_t coarse_ticks_ms = 0;
  };
  struct AtomRef {
    int64_t job_id, price_micros;
    uint32_t atom;
  };

  AtomCell& CellFor(const store::DeviceRecord& dev, int64_t job_id, const std::optional<Money>& price) {
    int64_t p = price ? price->micros() : -1;
    // A rollup row adds each bucket and its idle causes in turn: look its atom up once.
    if (last_cell_ != kNone && last_device_ == dev.id && last_job_ == job_id && last_price_ == p) {
      return atoms_[last_cell_];
    }
    if (hourly_) return HourlyCellFor(dev, job_id, p);
    // Not grouped by hour, a device has an atom per job and price of the window (tens, on
    // a month of a busy device): each device's, sorted by (job, price), searched. A
    // device's few atoms stay in cache, where a hash of every atom of a 10,000-GPU month
    // (400k) misses it on most rows.
    size_t k = fleet_.IndexOf(dev);
    if (atoms_of_device_.empty()) atoms_of_device_.resize(fleet_.devices().size());
    auto& mine = atoms_of_device_[k];
    auto it = std::lower_bound(mine.begin(), mine.end(), std::pair(job_id, p),
                               [](const AtomRef& a, const std::pair<int64_t, int64_t>& key) {
                                 return std::pair(a.job_id, a.price_micros) < key;
                               });
    if (it != mine.end() && it->job_id == job_id && it->price_micros == p) return Remember(it->atom, dev.id, job_id, p);
    auto a = static_cast<uint32_t>(atoms_.size());
    NewCell(dev, job_id, p);
    mine.insert(it, AtomRef{job_id, p, a});
    return Remember(a, dev.id, job_id, p);
  }

  // Grouped by hour, a device has an atom or three an hour (one per job and price): they
  // are found by a walk of the device's list for the hour, with no hashing.
  AtomCell& HourlyCellFor(const store::DeviceRecord& dev, int64_t job_id, int64_t p) {
    size_t k = fleet_.IndexOf(dev);
    if (device_stamp_.empty()) {
      device_stamp_.assign(fleet_.devices().size(), 0);
      device_head_.assign(fleet_.devices().size(), kNoAtom);
    }
    if (device_stamp_[k] != hour_stamp_) {
      device_stamp_[k] = hour_stamp_;
      device_head_[k] = kNoAtom;
    }
    for (uint32_t a = device_head_[k]; a != kNoAtom; a = atoms_[a].next_of_device) {
      if (atoms_[a].job_id == job_id && atoms_[a].price_micros == p) return Remember(a, dev.id, job_id, p);
    }
    auto a = static_cast<uint32_t>(atoms_.size());
    NewCell(dev, job_id, p).next_of_device = device_head_[k];
    device_head_[k] = a;
    return Remember(a, dev.id, job_id, p);
  }

  AtomCell& Remember(size_t cell, int64_t device_id, int64_t job_id, int64_t p) {
    last_cell_ = cell;
    last_device_ = device_id;
    last_job_ = job_id;
    last_price_ = p;
    return atoms_[cell];
  }

  AtomCell& NewCell(const store::DeviceRecord& dev, int64_t job_id, int64_t p) {
    AtomCell& c = atoms_.emplace_back();
    c.device_id = dev.id;
    c.job_id = job_id;
    c.hour_ms = hour_ms_;
    c.price_micros = p;
    c.device_index = static_cast<uint32_t>(fleet_.IndexOf(dev));
    c.name_rank = static_cast<uint64_t>(fleet_.device_rank(dev)) << 32 |
                  static_cast<uint64_t>(fleet_.job_rank(job_id));
    return c;
  }

  const FleetIndex& fleet_;
  bool hourly_;
  BlockArray<AtomCell> atoms_;                         // in the order they were met
  std::vector<std::array<Money, kBucketCount>> cost_;  // each atom's, once RoundCosts ran
  static constexpr uint32_t kNoAtom = ~uint32_t{0};
  // Not grouped by hour: each device's atoms by (job, price), by FleetIndex::IndexOf.
  // Their lists grow from nothing for every query (a month of 10,000 GPUs: some 400k atoms
  // on 11,280 devices), so they take their memory from one arena that the query lets go
  // of whole, rather than from malloc at each doubling and free at the end.
  std::pmr::monotonic_buffer_resource lists_arena_;
  std::pmr::vector<std::pmr::vector<AtomRef>> atoms_of_device_{&lists_arena_};
  // Grouped by hour: each device's atoms of the current hour, a list through
  // AtomCell::next_of_device from device_head_, valid while its stamp is hour_stamp_.
  uint64_t hour_stamp_ = 1;
  std::vector<uint64_t> device_stamp_;
  std::vector<uint32_t> device_head_;
  std::vector<int64_t> device_ms_;  // by FleetIndex::IndexOf
  std::map<std::tuple<std::string, std::string, CapacityType>, int64_t> unpriced_;
  int64_t hour_ms_ = 0;
  size_t last_cell_ = kNone;
  int64_t last_device_ = 0, last_job_ = 0, last_price_ = 0;
};

int64_t CeilTo(int64_t t, int64_t step) { return -FloorTo(-t, step); }

// A span of one device's time (within one hour, in its service) that no settled rollup
// covers: attributed from the device's samples.
struct SampledSpan {
  const store::DeviceRecord* dev = nullptr;
  TimeRange span;
};

// How many spans' samples one batch-oriented read brings: bounds the samples in memory.
constexpr size_t kSpansPerRead = 64;

// The samples attributing `span` of `dev` needs: those within the staleness limit and the
// idle-cause context either side of it (attribution.h).
store::DeviceRange SamplesAround(const store::DeviceRecord& dev, const TimeRange& span, int64_t staleness_override_ms) {
  int64_t reach = StalenessLimitMs(dev.device, staleness_override_ms) + store::kIdleContextMs;
  return {dev.id, {span.begin_ms - reach, span.end_ms + reach}};
}

// Attributes each of `spans` from its device's samples, as the rollup refresh does,
// calling `fn(span, piece, price of its hour)` in the order of `spans`. The samples and
// allocations are read kSpansPerRead spans at a time, in one call each.
template <class Fn>
Status AttributeFromSamples(store::StoreReads& reads, const FleetIndex& fleet, const std::vector<SampledSpan>& spans,
                            int64_t staleness_override_ms, Fn&& fn) {
  std::vector<store::DeviceRange> sample_ranges, alloc_ranges;
  for (size_t first = 0; first < spans.size(); first += kSpansPerRead) {
    size_t end = std::min(spans.size(), first + kSpansPerRead);
    sample_ranges.clear();
    alloc_ranges.clear();
    for (size_t i = first; i < end; ++i) {
      const SampledSpan& s = spans[i];
      sample_ranges.push_back(SamplesAround(*s.dev, s.span, staleness_override_ms));
      alloc_ranges.push_back({s.dev->id, s.span});
    }
    GPULEDGER_ASSIGN_OR_RETURN(auto samples, reads.SamplesOf(sample_ranges));
    GPULEDGER_ASSIGN_OR_RETURN(auto allocs, reads.AllocationsOf(alloc_ranges));
    for (size_t i = first; i < end; ++i) {
      const SampledSpan& s = spans[i];
      auto price = fleet.PriceAt(*s.dev, s.span.begin_ms);
      DeviceTimeline t{s.span, StalenessLimitMs(s.dev->device, staleness_override_ms), samples[i - first],
                       allocs[i - first], [&](const std::string& key) { return fleet.JobIdOf(key); }};
      Attribute(t, [&](const Piece& p) { fn(s, p, price); });
    }
  }
  return Status::Ok();
}

}  // namespace

// A window's atoms as read (Ledger::ReadAtoms), and the snapshot they were read from.
struct UsageRead::State {
  std::unique_ptr<store::StoreSnapshot> snapshot;  // Ledger::ReadUsage's own; none for UsageOn
  FleetIndex fleet;
  std::optional<Accumulator> atoms;  // of `fleet`, so State never moves (UsageRead holds it)
  TimeRange requested, window;       // asked for; and up to where the data ends
  Currency currency;

  UsageReport Report(const std::vector<Dimension>& by, Ledger::RowOrder order) const {
    UsageReport report = atoms->Finish(window, by, order == Ledger::RowOrder::kByCost);
    report.requested = requested;
    report.currency = currency;
    return report;
  }
};

UsageRead::UsageRead() : state_(std::make_unique<State>()) {}
UsageRead::UsageRead(UsageRead&&) noexcept = default;
UsageRead& UsageRead::operator=(UsageRead&&) noexcept = default;
UsageRead::~UsageRead() = default;

const TimeRange& UsageRead::requested() const { return state_->requested; }

Result<UsageReport> UsageRead::By(const std::vector<Dimension>& by, Ledger::RowOrder order) const {
  if (by.empty()) return InvalidArgument("usage needs at least one dimension to group by");
  if (std::find(by.begin(), by.end(), Dimension::kHour) != by.end()) {
    return InvalidArgument(
        "a usage read of a whole window cannot be grouped by hour (its atoms span the window): ask Usage for it");
  }
  return state_->Report(by, order);
}

store::StoreSnapshot& internal_SnapshotOf(const UsageRead& read) { return *read.state_->snapshot; }

Result<Dimension> ParseDimension(std::string_view text) {
  for (const auto& info : kDimensions) {
    if (info.name == text) return info.d;
  }
  return InvalidArgument(fmt::format(
      "cannot group by \"{}\": want team, project, experiment, user, kind, job, pool, node, "
      "model, device or hour",
      text));
}

std::string_view DimensionName(Dimension d) {
  for (const auto& info : kDimensions) {
    if (info.d == d) return info.name;
  }
  return "?";
}

Result<std::vector<Dimension>> ParseDimensions(std::string_view text) {
  std::vector<Dimension> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    GPULEDGER_ASSIGN_OR_RETURN(Dimension d, ParseDimension(text.substr(pos, comma - pos)));
    if (std::find(out.begin(), out.end(), d) != out.end()) {
      return InvalidArgument(fmt::format("grouping \"{}\" names {} twice", text, DimensionName(d)));
    }
    out.push_back(d);
    pos = comma + 1;
  }
  return out;
}

void UsageRow::Add(const UsageRow& row) {
  for (size_t b = 0; b < kBucketCount; ++b) {
    gpu_ticks_ms[b] += row.gpu_ticks_ms[b];
    cost[b] += row.cost[b];
  }
  for (size_t c = 0; c < kIdleCauseCount; ++c) {
    idle_cause_ticks_ms[c] += row.idle_cause_ticks_ms[c];
    idle_cause_cost[c] += row.idle_cause_cost[c];
  }
  coarse_ticks_ms += row.coarse_ticks_ms;
  unpriced_ticks_ms += row.unpriced_ticks_ms;
}

int64_t UsageRow::total_ticks_ms() const {
  int64_t t = 0;
  for (int64_t v : gpu_ticks_ms) t += v;
  return t;
}
double UsageRow::gpu_hours(Bucket b) const {
  return static_cast<double>(gpu_ticks_ms[static_cast<size_t>(b)]) /
         static_cast<double>(kShareScale * kMsPerHour);
}
double UnpricedCapacity::gpu_hours() const {
  return static_cast<double>(gpu_ticks_ms) / static_cast<double>(kShareScale * kMsPerHour);
}
double UsageRow::idle_cause_gpu_hours(IdleCause c) const {
  return static_cast<double>(idle_cause_ticks_ms[static_cast<size_t>(c)]) /
         static_cast<double>(kShareScale * kMsPerHour);
}
double UsageRow::total_gpu_hours() const {
  return static_cast<double>(total_ticks_ms()) / static_cast<double>(kShareScale * kMsPerHour);
}
Money UsageRow::total_cost() const {
  Money m;
  for (Money c : cost) m += c;
  return m;
}
double UsageRow::effective_utilization() const {
  int64_t total = total_ticks_ms();
  return total ? static_cast<double>(gpu_ticks_ms[0]) / static_cast<double>(total) : 0.0;
}
double UsageRow::allocated_efficiency() const {
  int64_t held = gpu_ticks_ms[0] + gpu_ticks_ms[1];
  return held ? static_cast<double>(gpu_ticks_ms[0]) / static_cast<double>(held) : 0.0;
}
std::string_view UsageRow::activity_source() const {
  int64_t held = gpu_ticks_ms[0] + gpu_ticks_ms[1];
  if (coarse_ticks_ms == 0) return "sm_active";
  if (coarse_ticks_ms >= held) return "gpu_util";
  return "mixed";
}

TimeRange TrailingWindow(int64_t now_ms, int64_t data_end_ms, int64_t length_ms) {
  int64_t end = FloorTo(now_ms, kMsPerHour);
  if (data_end_ms > 0) end = std::min(end, CeilTo(data_end_ms, kMsPerHour));
  return {end - length_ms, end};
}

store::Store& internal_StoreOf(Ledger& ledger) { return *ledger.store_; }

std::string_view DeviceStateName(DeviceState s) {
  switch (s) {
    case DeviceState::kActive: return "active";
    case DeviceState::kAllocatedIdle: return "allocated_idle";
    case DeviceState::kUnallocated: return "unallocated";
    case DeviceState::kUnavailable: return "unavailable";
    case DeviceState::kUnmonitored: return "unmonitored";
  }
  return "?";
}

Status Ledger::Validate(const Batch& batch) const {
  return ValidateBatch(batch, clock_.NowMs(), options_.max_future_skew_ms);
}

namespace {

class StoreIngestGroup final : public IngestGroup {
 public:
  StoreIngestGroup(std::unique_ptr<store::BatchGroup> group, const Clock& clock)
      : group_(std::move(group)), clock_(clock) {}
  using IngestGroup::Apply;
  Result<store::ApplyOutcome> Apply(const Batch& batch, const BatchSender& sender) override {
    GPULEDGER_ASSIGN_OR_RETURN(store::IngestPlan plan, PlanIngest(batch, sender, clock_.NowMs()));
    return group_->Apply(plan);
  }
  Status Commit() override { return group_->Commit(); }

 private:
  std::unique_ptr<store::BatchGroup> group_;
  const Clock& clock_;
};

}  // namespace

Result<std::unique_ptr<IngestGroup>> Ledger::BeginIngestGroup() {
  GPULEDGER_ASSIGN_OR_RETURN(auto group, store_->BeginBatchGroup());
  return std::unique_ptr<IngestGroup>(new StoreIngestGroup(std::move(group), clock_));
}

Result<std::vector<store::DeviceRecord>> Ledger::Devices() {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  return snap->ListDevices();
}

Result<std::vector<Job>> Ledger::Jobs() {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, snap->ListJobs());
  std::vector<Job> out;
  out.reserve(jobs.size());
  for (auto& j : jobs) out.push_back(std::move(j.job));
  return out;
}

Result<store::JobCounts> Ledger::CountJobs(const TimeRange& window) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  return snap->CountJobs(window);
}

Result<std::vector<JobAllocation>> Ledger::AllocationsOf(const std::string& job_id) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  auto job = std::find_if(jobs.begin(), jobs.end(), [&](const store::JobRecord& j) { return j.job.id == job_id; });
  if (job == jobs.end()) return std::vector<JobAllocation>{};
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
  std::unordered_map<int64_t, std::string> uuid_of;
  for (const auto& d : devices) uuid_of[d.id] = d.device.uuid;
  GPULEDGER_ASSIGN_OR_RETURN(auto allocs, snap->AllocationsOverlapping({0, kForever}));
  std::vector<JobAllocation> out;
  for (const auto& a : allocs) {
    if (a.job_id == job->id) out.push_back({uuid_of[a.device_id], a.from_ms, a.to_ms});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.from_ms < b.from_ms; });
  return out;
}

Result<std::vector<store::JobChange>> Ledger::JobChanges(const std::string& job_id) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  auto job = std::find_if(jobs.begin(), jobs.end(), [&](const store::JobRecord& j) { return j.job.id == job_id; });
  if (job == jobs.end()) return std::vector<store::JobChange>{};
  return snap->JobChangesOf(job->id);
}

Result<std::vector<std::pair<JobAllocation, std::string>>> Ledger::OpenAllocations(int64_t at_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  std::unordered_map<int64_t, std::string> uuid_of, key_of;
  for (const auto& d : devices) uuid_of[d.id] = d.device.uuid;
  for (const auto& j : jobs) key_of[j.id] = j.job.id;
  GPULEDGER_ASSIGN_OR_RETURN(auto allocs, snap->AllocationsOverlapping({at_ms, kForever}));
  std::vector<std::pair<JobAllocation, std::string>> out;
  for (const auto& a : allocs) {
    if (a.to_ms) continue;
    out.push_back({{uuid_of[a.device_id], a.from_ms, a.to_ms}, key_of[a.job_id]});
  }
  return out;
}

namespace {

// The cost of `share_ticks` of a GPU over [from, to) at the book's prices, hour by hour
// (a price book changes only on the hour). `priced` is false when some hour had no price.
Money IdleCostOf(const PriceBook& book, const Device& d, int64_t share_ticks, int64_t from_ms, int64_t to_ms,
                 bool& priced) {
  CostNumerator exact = 0;
  priced = true;
  for (int64_t t = from_ms; t < to_ms;) {
    int64_t hour_end = std::min(to_ms, FloorTo(t, kMsPerHour) + kMsPerHour);
    if (auto price = book.PriceAt(d.model, d.pool, d.capacity_type, t)) {
      exact += CostOf(hour_end - t, share_ticks, *price);
    } else {
      priced = false;
    }
    t = hour_end;
  }
  return RoundCost(exact);
}

// The start of each allocated-idle device's idle spell: the first sample after its last
// active one, searched backwards in widening steps from `now_ms`, no earlier than the
// device's floor. floor_ms when no sample since then was active. Each round reads a step
// of every device still searching, a block of devices per read.
struct IdleSearch {
  int64_t device_id = 0;
  int64_t floor_ms = 0;
  int64_t since_ms = 0;  // the answer, once done
};
Status FindIdleSpellStarts(store::StoreReads& reads, int64_t now_ms, std::vector<IdleSearch>& searches) {
  struct Open {
    size_t at;
    int64_t end, first_idle;
  };
  std::vector<Open> open;
  for (size_t i = 0; i < searches.size(); ++i) {
    searches[i].since_ms = searches[i].floor_ms;
    if (now_ms > searches[i].floor_ms) open.push_back({i, now_ms, now_ms});
  }
  std::vector<store::DeviceRange> ranges;
  for (int64_t step = kMsPerHour; !open.empty(); step *= 4) {
    ranges.clear();
    for (const Open& o : open) {
      const IdleSearch& s = searches[o.at];
      ranges.push_back({s.device_id, {std::max(s.floor_ms, o.end - step), o.end}});
    }
    std::vector<Open> still;
    // A block of devices per read (store::SampleReadEnd): a late step reaches days back,
    // on every device still idle.
    for (size_t first = 0, end = 0; first < ranges.size(); first = end) {
      end = store::SampleReadEnd(ranges, first);
      GPULEDGER_ASSIGN_OR_RETURN(auto samples_of, reads.SamplesOf(std::span(ranges).subspan(first, end - first)));
      for (size_t k = first; k < end; ++k) {
        Open o = open[k];
        IdleSearch& s = searches[o.at];
        bool found = false;
        const auto& samples = samples_of[k - first];
        for (auto it = samples.rbegin(); it != samples.rend() && !found; ++it) {
          if (it->t_ms > o.end) continue;  // the range is inclusive at both ends
          if (it->ActivityRatio().value_or(0) > 0) {
            s.since_ms = o.first_idle;
            found = true;
          } else {
            o.first_idle = it->t_ms;
          }
        }
        o.end = ranges[k].range.begin_ms - 1;
        if (!found && o.end > s.floor_ms) still.push_back(o);
      }
    }
    open = std::move(still);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<DeviceNow>> Ledger::FleetNow(int64_t now_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  GPULEDGER_ASSIGN_OR_RETURN(auto allocs, snap->AllocationsOverlapping({now_ms, now_ms + 1}));
  GPULEDGER_ASSIGN_OR_RETURN(auto latest, snap->LatestSamples());
  GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, snap->LoadPriceBook());
  std::unordered_map<int64_t, const Job*> job_of;
  for (const auto& j : jobs) job_of[j.id] = &j.job;
  std::unordered_map<int64_t, std::vector<Holder>> holders;
  for (const auto& a : allocs) {
    if (auto j = job_of.find(a.job_id); j != job_of.end()) holders[a.device_id].push_back({*j->second, a.from_ms});
  }
  // Indexes: GPUs by node and slices by parent, each in the order they entered the store.
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::map<std::string, int32_t> gpus_on_node;
  std::unordered_map<int64_t, int32_t> index_of, slices_of;
  std::unordered_map<int64_t, int64_t> child_ticks;
  for (const store::DeviceRecord& d : devices) {
    if (d.parent_id == 0) index_of[d.id] = gpus_on_node[d.device.node]++;
    else child_ticks[d.parent_id] += d.device.share.ticks();
  }
  const int64_t floor_ms = now_ms - kIdleLookBackMs;
  std::vector<DeviceNow> out;
  out.reserve(devices.size());
  std::vector<size_t> idle_at, unallocated_at;  // their places in `out`
  std::vector<IdleSearch> idle;
  std::vector<store::DeviceRange> unallocated;
  for (store::DeviceRecord& d : devices) {
    DeviceNow n;
    if (auto it = latest.find(d.id); it != latest.end()) n.last = std::move(it->second);
    n.holders = std::move(holders[d.id]);
    std::stable_sort(n.holders.begin(), n.holders.end(), [](const Holder& a, const Holder& b) { return a.since_ms < b.since_ms; });
    n.staleness_limit_ms = StalenessLimitMs(d.device, options_.staleness_override_ms);
    if (!n.last || now_ms - n.last->t_ms > n.staleness_limit_ms) {
      n.state = DeviceState::kUnmonitored;
    } else if (!IsAvailable(n.last->health)) {
      n.state = DeviceState::kUnavailable;
    } else if (n.holders.empty()) {
      n.state = DeviceState::kUnallocated;
    } else {
      n.state = n.last->ActivityRatio().value_or(0) > 0 ? DeviceState::kActive : DeviceState::kAllocatedIdle;
    }
    if (d.parent_id == 0) {
      n.gpu_index = index_of[d.id];
    } else {
      n.gpu_index = index_of.count(d.parent_id) ? index_of[d.parent_id] : 0;
      n.slice_index = slices_of[d.parent_id]++;
    }
    if (n.state == DeviceState::kAllocatedIdle) {
      idle_at.push_back(out.size());
      idle.push_back({d.id, std::max(floor_ms, n.holders.front().since_ms)});
    } else if (n.state == DeviceState::kUnallocated) {
      unallocated_at.push_back(out.size());
      unallocated.push_back({d.id, {floor_ms, now_ms}});
    }
    n.record = std::move(d);
    out.push_back(std::move(n));
  }
  // Since when each idle device has idled: the allocated ones from their samples, the
  // unallocated ones from their last allocation's end; each kind in one read (a round).
  GPULEDGER_RETURN_IF_ERROR(FindIdleSpellStarts(*snap, now_ms, idle));
  for (size_t k = 0; k < idle.size(); ++k) out[idle_at[k]].idle_since_ms = idle[k].since_ms;
  GPULEDGER_ASSIGN_OR_RETURN(auto past_of, snap->AllocationsOf(unallocated));
  for (size_t k = 0; k < unallocated.size(); ++k) {
    DeviceNow& n = out[unallocated_at[k]];
    int64_t since = std::max(floor_ms, n.record.in_service_ms);
    for (const auto& a : past_of[k]) {
      if (a.to_ms && *a.to_ms <= now_ms) since = std::max(since, *a.to_ms);
    }
    n.idle_since_ms = since;
  }
  for (DeviceNow& n : out) {
    if (!n.idle_since_ms) continue;
    const store::DeviceRecord& d = n.record;
    n.idle_since_clipped = *n.idle_since_ms <= floor_ms;
    // A MIG parent's capacity is what its slices leave (as in the usage figures).
    int64_t ticks = d.parent_id ? d.device.share.ticks() : std::max<int64_t>(0, kShareScale - child_ticks[d.id]);
    n.idle_cost = IdleCostOf(book, d.device, ticks, *n.idle_since_ms, now_ms, n.idle_priced);
  }
  std::stable_sort(out.begin(), out.end(), [](const DeviceNow& a, const DeviceNow& b) {
    if (a.idle_cost != b.idle_cost) return b.idle_cost < a.idle_cost;
    return std::tuple(a.record.device.node, a.gpu_index, a.slice_index.value_or(-1)) <
           std::tuple(b.record.device.node, b.gpu_index, b.slice_index.value_or(-1));
  });
  return out;
}

Result<PriceBook> Ledger::Prices() {
  GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, store_->LoadPriceBook());
  book.set_currency(options_.currency);
  return book;
}
Status Ledger::SetPrices(const PriceBook& book) { return store_->SavePriceBook(book); }
Result<int64_t> Ledger::ApplyRetention() {
  if (options_.raw_retention_ms <= 0) return int64_t{0};
  return store_->PruneSamples(clock_.NowMs() - options_.raw_retention_ms);
}
Result<std::vector<int64_t>> Ledger::SettleDays(size_t limit) {
  return store_->SettleDays(clock_.NowMs() - kSettleAfterMs, limit);
}
Result<store::StoreCheck> Ledger::CheckStore(bool full) { return store_->Check(full); }
Result<store::StoreStats> Ledger::Stats() {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  return snap->Stats();
}

Result<DataSpan> Ledger::Data() {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
  DataSpan span;
  for (const auto& d : devices) {
    if (d.in_service_ms > 0 && (span.first_ms == 0 || d.in_service_ms < span.first_ms)) span.first_ms = d.in_service_ms;
    span.end_ms = std::max(span.end_ms, d.last_sample_ms);
  }
  if (span.end_ms > 0) span.end_ms = std::min(span.end_ms, clock_.NowMs());
  return span;
}

Ledger::Ledger(std::unique_ptr<store::Store> store, const Clock& clock, LedgerOptions options)
    : store_(std::move(store)), clock_(clock), options_(options), ranked_jobs_(std::make_unique<RankedJobsCache>()) {}

Ledger::~Ledger() = default;

Result<store::ApplyOutcome> Ledger::Ingest(const Batch& batch, const BatchSender& sender) {
  int64_t now = clock_.NowMs();
  GPULEDGER_RETURN_IF_ERROR(ValidateBatch(batch, now, options_.max_future_skew_ms));
  GPULEDGER_ASSIGN_OR_RETURN(store::IngestPlan plan, PlanIngest(batch, sender, now));
  return store_->ApplyBatch(plan);
}

Result<int64_t> Ledger::RefreshRollups() {
  MutexLock refreshing(refresh_mu_);
  FleetIndex fleet;
  bool loaded = false;
  int64_t rebuilt = 0;
  for (;;) {
    GPULEDGER_ASSIGN_OR_RETURN(auto dirty, store_->DirtyHours(1024));
    if (dirty.empty()) return rebuilt;
    if (!loaded) {
      GPULEDGER_RETURN_IF_ERROR(fleet.Load(*store_, *ranked_jobs_));
      loaded = true;
    }
    // Runs of consecutive dirty hours of one device share one read of its samples.
    std::sort(dirty.begin(), dirty.end(), [](const store::DirtyHour& a, const store::DirtyHour& b) {
      return std::tie(a.device_id, a.hour_ms) < std::tie(b.device_id, b.hour_ms);
    });
    struct Run {
      size_t first, end;  // dirty[first, end): consecutive hours of one device
      const store::DeviceRecord* dev;
    };
    std::vector<Run> runs;
    for (size_t run = 0; run < dirty.size();) {
      size_t end = run + 1;
      while (end < dirty.size() && dirty[end].device_id == dirty[run].device_id &&
             dirty[end].hour_ms == dirty[end - 1].hour_ms + kMsPerHour && end - run < 48) {
        ++end;
      }
      const store::DeviceRecord* dev = fleet.device(dirty[run].device_id);
      runs.push_back({run, end, dev != nullptr && dev->in_service_ms > 0 ? dev : nullptr});
      run = end;
    }
    std::vector<store::RollupUpdate> updates;
    updates.reserve(dirty.size());
    // The samples and allocations of kSpansPerRead runs in one read each.
    std::vector<store::DeviceRange> sample_ranges, alloc_ranges;
    for (size_t first_run = 0; first_run < runs.size(); first_run += kSpansPerRead) {
      size_t end_run = std::min(runs.size(), first_run + kSpansPerRead);
      sample_ranges.clear();
      alloc_ranges.clear();
      for (size_t r = first_run; r < end_run; ++r) {
        const Run& run = runs[r];
        if (run.dev == nullptr) continue;
        TimeRange hours{dirty[run.first].hour_ms, dirty[run.end - 1].hour_ms + kMsPerHour};
        sample_ranges.push_back(SamplesAround(*run.dev, hours, options_.staleness_override_ms));
        alloc_ranges.push_back({run.dev->id, hours});
      }
      GPULEDGER_ASSIGN_OR_RETURN(auto samples_of, store_->SamplesOf(sample_ranges));
      GPULEDGER_ASSIGN_OR_RETURN(auto allocs_of, store_->AllocationsOf(alloc_ranges));
      size_t read = 0;
      for (size_t r = first_run; r < end_run; ++r) {
        const Run& run = runs[r];
        const store::DeviceRecord* dev = run.dev;
        static const std::vector<Sample> kNoSamples;
        static const std::vector<store::AllocationRecord> kNoAllocations;
        const auto& samples = dev ? samples_of[read] : kNoSamples;
        const auto& allocs = dev ? allocs_of[read] : kNoAllocations;
        if (dev) ++read;
        int64_t limit = dev ? StalenessLimitMs(dev->device, options_.staleness_override_ms) : 0;
        for (size_t k = run.first; k < run.end; ++k) {
          const store::DirtyHour& d = dirty[k];
          store::RollupUpdate& u = updates.emplace_back();
          u.dirty = d;
          if (dev == nullptr) continue;
          TimeRange span{std::max(d.hour_ms, dev->in_service_ms), d.hour_ms + kMsPerHour};
          if (span.empty()) continue;
          std::map<int64_t, store::RollupRow> by_job, by_minute;
          DeviceTimeline t{span, limit, samples, allocs, [&](const std::string& key) { return fleet.JobIdOf(key); }};
          Attribute(t, [&](const Piece& p) {
            auto& h = by_job[p.job_id];
            h.ms[static_cast<size_t>(p.bucket)] += p.ms;
            if (p.coarse) h.coarse_ms += p.ms;
            if (p.bucket == Bucket::kAllocatedIdle) h.idle_causes[static_cast<size_t>(p.cause)] += p.ms;
            by_minute[p.minute_ms].ms[static_cast<size_t>(p.bucket)] += p.ms;
          });
          for (auto& [job, row] : by_job) {
            row.period_ms = d.hour_ms;
            row.device_id = d.device_id;
            row.job_id = job;
            u.hour_rows.push_back(row);
          }
          for (auto& [minute, row] : by_minute) {
            row.period_ms = minute;
            row.device_id = d.device_id;
            u.minute_rows.push_back(row);
          }
          ++rebuilt;
        }
      }
    }
    GPULEDGER_RETURN_IF_ERROR(store_->WriteRollups(updates));
  }
}

Result<UsageReport> Ledger::Usage(const TimeRange& asked, const std::vector<Dimension>& by) {
  // One snapshot for the whole report: it never waits for ingest, and ingest committed
  // meanwhile changes nothing in it.
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  return UsageOn(*snap, asked, by);
}

Result<UsageReport> Ledger::Usage(const TimeRange& asked, const std::vector<Dimension>& by, RowOrder order) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  return UsageOn(*snap, asked, by, order);
}

Result<UsageReport> internal_UsageOn(Ledger& ledger, store::StoreReads& snap, const TimeRange& window,
                                     const std::vector<Dimension>& by) {
  return ledger.UsageOn(snap, window, by);
}

Result<UsageReport> Ledger::UsageOn(store::StoreReads& reads, const TimeRange& asked, const std::vector<Dimension>& by,
                                    RowOrder order) {
  if (asked.empty()) {
    return InvalidArgument(fmt::format("window [{}, {}) is empty", FormatTime(asked.begin_ms),
                                       FormatTime(asked.end_ms)));
  }
  if (by.empty()) return InvalidArgument("usage needs at least one dimension to group by");
  UsageRead read;
  GPULEDGER_RETURN_IF_ERROR(
      ReadAtoms(reads, asked, std::find(by.begin(), by.end(), Dimension::kHour) != by.end(), read));
  return read.state_->Report(by, order);
}

Result<UsageRead> Ledger::ReadUsage(const TimeRange& asked) {
  if (asked.empty()) {
    return InvalidArgument(fmt::format("window [{}, {}) is empty", FormatTime(asked.begin_ms),
                                       FormatTime(asked.end_ms)));
  }
  UsageRead read;
  GPULEDGER_ASSIGN_OR_RETURN(read.state_->snapshot, store_->Snapshot());
  GPULEDGER_RETURN_IF_ERROR(ReadAtoms(*read.state_->snapshot, asked, false, read));
  return read;
}

Status Ledger::ReadAtoms(store::StoreReads& reads, const TimeRange& asked, bool hourly, UsageRead& into) {
  store::StoreReads* snap = &reads;
  UsageRead::State& st = *into.state_;
  FleetIndex& fleet = st.fleet;
  GPULEDGER_RETURN_IF_ERROR(fleet.Load(*snap, *ranked_jobs_, clock_.NowMs(), options_.retire_after_ms));
  Accumulator& acc = st.atoms.emplace(fleet, hourly);
  st.requested = asked;
  st.currency = options_.currency;
  // The window ends where the data ends: time after the fleet's latest sample (or after
  // now) is no capacity anyone has measured yet.
  const TimeRange window{asked.begin_ms, std::max(asked.begin_ms, std::min(asked.end_ms, fleet.data_end_ms()))};
  st.window = window;
  if (window.empty()) {
    acc.RoundCosts();
    return Status::Ok();
  }

  // Whole hours from the rollups, one price epoch at a time (prices change on hours),
  // but for the device-hours still dirty in the snapshot: those are attributed from the
  // samples below, as the rollup refresh would, so no report waits for the refresh.
  int64_t first_hour = CeilTo(window.begin_ms, kMsPerHour);
  int64_t last_hour = FloorTo(window.end_ms, kMsPerHour);
  std::vector<store::DirtyHour> dirty;
  if (first_hour < last_hour) {
    GPULEDGER_ASSIGN_OR_RETURN(dirty, snap->DirtyHoursIn({first_hour, last_hour}));
    std::vector<int64_t> epochs = {first_hour, last_hour};
    if (hourly) {
      for (int64_t h = first_hour + kMsPerHour; h < last_hour; h += kMsPerHour) epochs.push_back(h);
    }
    for (const PriceEntry& e : fleet.book().entries()) {
      for (int64_t t : {e.valid.begin_ms, e.valid.end_ms}) {
        if (t > first_hour && t < last_hour) epochs.push_back(t);
      }
    }
    // A retired device's end (on an hour) splits the hours too: after it, its rollups hold
    // only the unmonitored time that is not capacity any more.
    for (const store::DeviceRecord& dev : fleet.devices()) {
      int64_t end = fleet.ServiceSpan(dev).end_ms;
      if (end > first_hour && end < last_hour) epochs.push_back(end);
    }
    std::sort(epochs.begin(), epochs.end());
    epochs.erase(std::unique(epochs.begin(), epochs.end()), epochs.end());
    // Each device's price, looked up again only when a price entry begins or ends: an
    // hourly report has an epoch per hour, and a price book's lookup compares strings.
    std::vector<int64_t> price_changes;
    for (const PriceEntry& e : fleet.book().entries()) {
      price_changes.push_back(e.valid.begin_ms);
      price_changes.push_back(e.valid.end_ms);
    }
    std::sort(price_changes.begin(), price_changes.end());
    const size_t n_devices = fleet.devices().size();
    std::vector<std::optional<Money>> price_of(n_devices);
    int64_t prices_from = kForever, prices_until = kForever;  // price_of holds for [from, until)
    std::vector<int64_t> covered(n_devices);
    // The dirty hours of each device, by FleetIndex::IndexOf.
    std::vector<std::vector<int64_t>> dirty_hours_of(n_devices);
    for (const store::DirtyHour& d : dirty) {
      if (const store::DeviceRecord* dev = fleet.device(d.device_id)) {
        dirty_hours_of[fleet.IndexOf(*dev)].push_back(d.hour_ms);
      }
    }
    auto begin_epoch = [&](const TimeRange& hours) {
      acc.set_hour(hours.begin_ms);
      if (hours.begin_ms < prices_from || hours.begin_ms >= prices_until) {
        for (size_t k = 0; k < n_devices; ++k) price_of[k] = fleet.PriceAt(fleet.devices()[k], hours.begin_ms);
        auto next = std::upper_bound(price_changes.begin(), price_changes.end(), hours.begin_ms);
        prices_from = hours.begin_ms;
        prices_until = next == price_changes.end() ? kForever : *next;
      }
      std::fill(covered.begin(), covered.end(), 0);
    };
    // A settled rollup row, or a sum of them (RollupRow, RollupSum), of the epoch `hours`.
    auto add_rollup = [&](const TimeRange& hours, const auto& s) -> Status {
      const store::DeviceRecord* dev = fleet.device(s.device_id);
      if (dev == nullptr) return Internal(fmt::format("rollup of unknown device {}", s.device_id));
      if (hours.Intersect(fleet.ServiceSpan(*dev)).empty()) return Status::Ok();  // retired by then
      size_t k = fleet.IndexOf(*dev);
      const std::optional<Money>& price = price_of[k];
      for (Bucket b : kAllBuckets) {
        int64_t ms = s.ms[static_cast<size_t>(b)];
        // The row's coarse time is counted once, with its active bucket.
        acc.Add(*dev, s.job_id, b, ms, b == Bucket::kActive ? s.coarse_ms : 0, price);
        covered[k] += ms;
      }
      acc.AddIdleCauses(*dev, s.job_id, s.idle_causes, price);
      return Status::Ok();
    };
    // Time in service that no settled rollup covers, nor a dirty hour, had no data at
    // all: unmonitored.
    auto end_epoch = [&](const TimeRange& hours) -> Status {
      for (size_t k = 0; k < n_devices; ++k) {
        const store::DeviceRecord& dev = fleet.devices()[k];
        if (dev.in_service_ms == 0) continue;
        TimeRange service = hours.Intersect(fleet.ServiceSpan(dev));
        int64_t capacity = service.length_ms();
        for (int64_t h : dirty_hours_of[k]) capacity -= service.Intersect({h, h + kMsPerHour}).length_ms();
        int64_t gap = capacity - covered[k];
        if (gap < 0) {
          return Internal(fmt::format("rollups of device {} cover more than its time in service",
                                      dev.device.uuid));
        }
        acc.Add(dev, 0, Bucket::kUnmonitored, gap, 0, price_of[k]);
      }
      return Status::Ok();
    };
    if (!hourly) {
      for (size_t i = 0; i + 1 < epochs.size(); ++i) {
        TimeRange hours{epochs[i], epochs[i + 1]};
        begin_epoch(hours);
        GPULEDGER_ASSIGN_OR_RETURN(auto sums, snap->SumSettledHourRollups(hours));
        for (const store::RollupSum& s : sums) GPULEDGER_RETURN_IF_ERROR(add_rollup(hours, s));
        GPULEDGER_RETURN_IF_ERROR(end_epoch(hours));
      }
    } else {
      // Grouped by hour, every epoch lies within an hour: the window's hour rows are read
      // in one pass, in hour order, each added to the epoch that holds it, leaving out
      // the dirty device-hours (attributed from their samples below).
      std::unordered_set<std::pair<int64_t, int64_t>, PairHash> dirty_set;
      for (const store::DirtyHour& d : dirty) dirty_set.insert({d.device_id, d.hour_ms});
      size_t i = 0;
      begin_epoch({epochs[0], epochs[1]});
      auto add_row = [&](const store::RollupRow& r) -> Status {
        while (r.period_ms >= epochs[i + 1]) {
          GPULEDGER_RETURN_IF_ERROR(end_epoch({epochs[i], epochs[i + 1]}));
          ++i;
          begin_epoch({epochs[i], epochs[i + 1]});
        }
        if (!dirty_set.empty() && dirty_set.count({r.device_id, r.period_ms})) return Status::Ok();
        return add_rollup({epochs[i], epochs[i + 1]}, r);
      };
      GPULEDGER_RETURN_IF_ERROR(snap->ScanHourRollups({first_hour, last_hour}, add_row));
      for (; i + 1 < epochs.size(); ++i) {
        GPULEDGER_RETURN_IF_ERROR(end_epoch({epochs[i], epochs[i + 1]}));
        if (i + 2 < epochs.size()) begin_epoch({epochs[i + 1], epochs[i + 2]});
      }
    }
  }

  // From raw samples: the partial hours at the window's edges, and the dirty hours.
  std::vector<SampledSpan> spans;
  auto sampled = [&](const store::DeviceRecord& dev, const TimeRange& hour_span) {
    TimeRange span = hour_span.Intersect(fleet.ServiceSpan(dev));
    if (dev.in_service_ms != 0 && !span.empty()) spans.push_back({&dev, span});
  };
  TimeRange head{window.begin_ms, std::min(first_hour, window.end_ms)};
  TimeRange tail{std::max(last_hour, first_hour), window.end_ms};
  for (const TimeRange& edge : {head, tail}) {
    if (edge.empty()) continue;
    for (const store::DeviceRecord& dev : fleet.devices()) sampled(dev, edge);
  }
  for (const store::DirtyHour& d : dirty) {
    if (const store::DeviceRecord* dev = fleet.device(d.device_id)) sampled(*dev, {d.hour_ms, d.hour_ms + kMsPerHour});
  }
  GPULEDGER_RETURN_IF_ERROR(AttributeFromSamples(
      *snap, fleet, spans, options_.staleness_override_ms,
      [&](const SampledSpan& s, const Piece& p, const std::optional<Money>& price) {
        acc.set_hour(FloorTo(s.span.begin_ms, kMsPerHour));  // each span lies within one hour
        acc.Add(*s.dev, p.job_id, p.bucket, p.ms, p.coarse ? p.ms : 0, price);
        if (p.bucket == Bucket::kAllocatedIdle) {
          std::array<int64_t, kIdleCauseCount> causes{};
          causes[static_cast<size_t>(p.cause)] = p.ms;
          acc.AddIdleCauses(*s.dev, p.job_id, causes, price);
        }
      }));

  // The conservation law, device by device: every millisecond in service, once.
  for (const store::DeviceRecord& dev : fleet.devices()) {
    int64_t expected = window.Intersect(fleet.ServiceSpan(dev)).length_ms();
    if (acc.device_ms(dev) != expected) {
      return Internal(fmt::format("conservation violated for device {}: {} ms attributed, {} ms "
                                  "in service in the window",
                                  dev.device.uuid, acc.device_ms(dev), expected));
    }
  }
  acc.RoundCosts();
  return Status::Ok();
}

Result<UsageReport> Ledger::ScopedUsage(const TimeRange& window, const std::vector<Dimension>& by,
                                        const Scope& scope) {
  if (scope.all_teams) return Usage(window, by);
  std::vector<Dimension> with_team = {Dimension::kTeam};
  for (Dimension d : by) {
    if (d != Dimension::kTeam) with_team.push_back(d);
  }
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport full, Usage(window, with_team));
  UsageReport out;
  out.window = full.window;
  out.requested = full.requested;
  out.by = by;
  out.total = full.total;
  out.total.key.assign(by.size(), "(total)");
  out.unpriced = full.unpriced;
  out.currency = full.currency;
  std::map<std::vector<std::string>, UsageRow> rows;
  for (const UsageRow& row : full.rows) {
    if (row.no_job || !scope.MaySee(row.key[0])) continue;
    std::vector<std::string> key;
    for (Dimension d : by) {
      auto it = std::find(with_team.begin(), with_team.end(), d);
      key.push_back(row.key[static_cast<size_t>(it - with_team.begin())]);
    }
    UsageRow& r = rows[key];
    r.key = key;
    r.Add(row);
  }
  for (auto& [key, row] : rows) out.rows.push_back(std::move(row));
  std::stable_sort(out.rows.begin(), out.rows.end(), RowBefore);
  return out;
}

Result<ChargebackReport> Ledger::LiveChargeback(const TimeRange& period, const UsageRead* read) {
  const std::vector<Dimension> by = {Dimension::kTeam, Dimension::kProject};
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage, read ? read->By(by) : Usage(period, by));
  ChargebackReport report;
  report.period = usage.window;  // ends where the data ends
  report.total = usage.total.total_cost();
  report.unpriced = usage.unpriced;
  report.currency = usage.currency;
  std::array<Money, kBucketCount> unused{};
  std::array<double, kBucketCount> unused_hours{};
  for (const UsageRow& row : usage.rows) {
    if (row.no_job) {
      for (Bucket b : {Bucket::kUnallocated, Bucket::kUnavailable, Bucket::kUnmonitored}) {
        unused[static_cast<size_t>(b)] += row.cost[static_cast<size_t>(b)];
        unused_hours[static_cast<size_t>(b)] += row.gpu_hours(b);
      }
      continue;
    }
    ChargebackLine line;
    line.team = row.key[0];
    line.project = row.key[1];
    line.active_gpu_hours = row.gpu_hours(Bucket::kActive);
    line.idle_gpu_hours = row.gpu_hours(Bucket::kAllocatedIdle);
    line.gpu_hours = line.active_gpu_hours + line.idle_gpu_hours;
    line.direct_cost = row.cost[0] + row.cost[1];
    line.idle_cost_by_cause = row.idle_cause_cost;
    line.unpriced_gpu_hours = static_cast<double>(row.unpriced_ticks_ms) /
                              static_cast<double>(kShareScale * kMsPerHour);
    report.lines.push_back(std::move(line));
  }
  std::sort(report.lines.begin(), report.lines.end(), [](const auto& a, const auto& b) {
    return std::tie(a.team, a.project) < std::tie(b.team, b.project);
  });
  for (Bucket b : {Bucket::kUnallocated, Bucket::kUnavailable, Bucket::kUnmonitored}) {
    size_t i = static_cast<size_t>(b);
    if (unused[i] == Money() && unused_hours[i] == 0) continue;
    ChargebackLine line;
    line.team = fmt::format("({})", BucketName(b));
    line.capacity = b;
    line.gpu_hours = unused_hours[i];
    line.direct_cost = unused[i];
    report.lines.push_back(std::move(line));
  }
  return report;
}

namespace {

// The figures a chargeback line and its frozen row share, copied either way.
template <typename From, typename To>
void CopyFigures(const From& from, To& to) {
  to.gpu_hours = from.gpu_hours;
  to.active_gpu_hours = from.active_gpu_hours;
  to.idle_gpu_hours = from.idle_gpu_hours;
  to.unpriced_gpu_hours = from.unpriced_gpu_hours;
  to.direct_cost = from.direct_cost;
  to.idle_cost_by_cause = from.idle_cost_by_cause;
}

store::FrozenLine Freeze(const ChargebackLine& l, const std::string& month) {
  store::FrozenLine f;
  f.month = month;
  f.for_month = l.correction_for.empty() ? month : l.correction_for;
  if (l.capacity) {
    f.capacity = std::string(BucketName(*l.capacity));
  } else {
    f.team = l.team;
    f.project = l.project;
  }
  CopyFigures(l, f);
  return f;
}

ChargebackLine Thaw(const store::FrozenLine& f) {
  ChargebackLine l;
  if (!f.capacity.empty()) {
    for (Bucket b : kAllBuckets) {
      if (BucketName(b) == f.capacity) l.capacity = b;
    }
    l.team = fmt::format("({})", f.capacity);
  } else {
    l.team = f.team;
    l.project = f.project;
  }
  if (f.for_month != f.month) l.correction_for = f.for_month;
  CopyFigures(f, l);
  return l;
}

// The line's identity across a month's frozen and live chargebacks.
std::tuple<bool, int, std::string, std::string> LineKey(const ChargebackLine& l) {
  return {l.capacity.has_value(), l.capacity ? static_cast<int>(*l.capacity) : -1, l.team, l.project};
}

// `later` - `earlier`, line by line: the corrections that take a month's booked lines to
// its live ones (lines that did not change are left out).
std::vector<ChargebackLine> Differences(const std::vector<ChargebackLine>& earlier,
                                        const std::vector<ChargebackLine>& later, const std::string& month) {
  std::map<std::tuple<bool, int, std::string, std::string>, ChargebackLine> diff;
  auto add = [&](const ChargebackLine& l, int sign) {
    auto [it, fresh] = diff.try_emplace(LineKey(l));
    ChargebackLine& d = it->second;
    if (fresh) {
      d.team = l.team;
      d.project = l.project;
      d.capacity = l.capacity;
      d.correction_for = month;
    }
    auto s = static_cast<double>(sign);
    d.gpu_hours += s * l.gpu_hours;
    d.active_gpu_hours += s * l.active_gpu_hours;
    d.idle_gpu_hours += s * l.idle_gpu_hours;
    d.unpriced_gpu_hours += s * l.unpriced_gpu_hours;
    auto apply = [sign](Money& to, Money m) { sign > 0 ? to += m : to -= m; };
    apply(d.direct_cost, l.direct_cost);
    for (size_t c = 0; c < kIdleCauseCount; ++c) apply(d.idle_cost_by_cause[c], l.idle_cost_by_cause[c]);
  };
  for (const ChargebackLine& l : earlier) add(l, -1);
  for (const ChargebackLine& l : later) add(l, +1);
  std::vector<ChargebackLine> out;
  for (auto& [key, d] : diff) {
    // Hours are sums of doubles: what is left of an unchanged line is rounding dust.
    bool moved = d.direct_cost != Money() || std::abs(d.gpu_hours) > 1e-6 || std::abs(d.unpriced_gpu_hours) > 1e-6;
    for (const Money& m : d.idle_cost_by_cause) moved = moved || m != Money();
    if (moved) out.push_back(std::move(d));
  }
  return out;
}

std::string MonthName(const TimeRange& month) { return FormatTime(month.begin_ms).substr(0, 7); }

// The calendar month that begins at `begin_ms` (a month's start).
TimeRange MonthFrom(int64_t begin_ms) {
  auto m = ParseMonth(FormatTime(begin_ms).substr(0, 7));
  return m.ok() ? *m : TimeRange{begin_ms, begin_ms};
}

}  // namespace

Result<ChargebackReport> Ledger::OpenChargeback(const TimeRange& period,
                                                const std::vector<store::ClosedPeriodRecord>& closed,
                                                const std::vector<store::FrozenLine>& frozen,
                                                const UsageRead* read) {
  GPULEDGER_ASSIGN_OR_RETURN(ChargebackReport report, LiveChargeback(period, read));
  for (const auto& c : closed) {
    if (c.range.Overlaps(period)) report.overlaps_closed.push_back(c.month);
  }
  if (closed.empty() || period != MonthFrom(closed.back().range.end_ms)) {
    return report;
  }
  // The first open month: corrections to every closed month.
  for (const auto& c : closed) {
    std::vector<ChargebackLine> booked;
    for (const store::FrozenLine& f : frozen) {
      if (f.for_month == c.month) {
        booked.push_back(Thaw(f));
        booked.back().correction_for.clear();
      }
    }
    GPULEDGER_ASSIGN_OR_RETURN(ChargebackReport live, LiveChargeback(c.range, nullptr));
    for (ChargebackLine& d : Differences(booked, live.lines, c.month)) {
      report.total += d.direct_cost;
      report.lines.push_back(std::move(d));
    }
  }
  return report;
}

Result<ChargebackReport> Ledger::Chargeback(const TimeRange& period, bool share_idle) {
  return ChargebackOf(period, share_idle, nullptr);
}

Result<ChargebackReport> Ledger::Chargeback(const UsageRead& read, bool share_idle) {
  return ChargebackOf(read.requested(), share_idle, &read);
}

Result<ChargebackReport> Ledger::ChargebackOf(const TimeRange& period, bool share_idle, const UsageRead* read) {
  GPULEDGER_ASSIGN_OR_RETURN(auto closed, store_->ClosedPeriods());
  GPULEDGER_ASSIGN_OR_RETURN(auto frozen, store_->FrozenLines());
  ChargebackReport report;
  auto month = std::find_if(closed.begin(), closed.end(), [&](const auto& c) { return c.range == period; });
  if (month != closed.end()) {
    report.period = month->window;  // as it covered when it closed
    report.closed = ClosedPeriod{month->month, month->range, month->closed_at_ms, month->closed_by};
    for (const store::FrozenLine& f : frozen) {
      if (f.month != month->month) continue;
      report.lines.push_back(Thaw(f));
      report.total += f.direct_cost;
    }
  } else {
    GPULEDGER_ASSIGN_OR_RETURN(report, OpenChargeback(period, closed, frozen, read));
  }
  // With share_idle, capacity held by no job is spread over the teams' own lines (not
  // over corrections) in proportion to their direct cost.
  std::vector<size_t> own;
  Money unused, direct_total;
  for (size_t i = 0; i < report.lines.size(); ++i) {
    const ChargebackLine& l = report.lines[i];
    if (!l.correction_for.empty()) continue;
    if (l.capacity) {
      unused += l.direct_cost;
    } else {
      own.push_back(i);
      direct_total += l.direct_cost;
    }
  }
  report.share_idle = share_idle && direct_total > Money();  // nothing used: nothing to share by
  if (report.share_idle) {
    std::vector<Money> weights;
    for (size_t i : own) weights.push_back(report.lines[i].direct_cost);
    std::vector<Money> shares = SplitMoney(unused, weights);
    for (size_t k = 0; k < own.size(); ++k) report.lines[own[k]].shared_idle_cost = shares[k];
    std::erase_if(report.lines, [](const ChargebackLine& l) { return l.capacity && l.correction_for.empty(); });
  }
  return report;
}

Result<ClosedPeriod> Ledger::ClosePeriod(std::string_view month_text, const std::string& by) {
  GPULEDGER_ASSIGN_OR_RETURN(TimeRange month, ParseMonth(month_text));
  std::string name = MonthName(month);
  int64_t now = clock_.NowMs();
  if (month.end_ms > now) {
    return FailedPrecondition(fmt::format("billing period {} is not over yet (it ends {})", name, FormatTime(month.end_ms)));
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto closed, store_->ClosedPeriods());
  if (!closed.empty() && closed.back().range.begin_ms >= month.begin_ms) {
    for (const auto& c : closed) {
      if (c.month == name) {
        return Status(StatusCode::kAlreadyExists, fmt::format("billing period {} is closed already (at {} by {})",
                                                              name, FormatTime(c.closed_at_ms), c.closed_by));
      }
    }
    return FailedPrecondition(fmt::format("billing periods close in order: {} is closed, so {} can no longer be",
                                          closed.back().month, name));
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto frozen, store_->FrozenLines());
  GPULEDGER_ASSIGN_OR_RETURN(ChargebackReport report, OpenChargeback(month, closed, frozen, nullptr));
  std::vector<store::FrozenLine> lines;
  for (const ChargebackLine& l : report.lines) lines.push_back(Freeze(l, name));
  store::ClosedPeriodRecord record{name, month, report.period, now, by};
  GPULEDGER_RETURN_IF_ERROR(store_->ClosePeriod(record, lines));
  return ClosedPeriod{name, month, now, by};
}

Result<std::vector<ClosedPeriod>> Ledger::ClosedPeriods() {
  GPULEDGER_ASSIGN_OR_RETURN(auto closed, store_->ClosedPeriods());
  std::vector<ClosedPeriod> out;
  for (const auto& c : closed) out.push_back({c.month, c.range, c.closed_at_ms, c.closed_by});
  return out;
}

Result<std::vector<TimelinePoint>> Ledger::Timeline(const TimeRange& window, int64_t step_ms,
                                                    const std::string& pool) {
  if (window.empty() || step_ms <= 0 || step_ms % kMsPerMinute != 0 ||
      window.begin_ms % kMsPerMinute != 0 || window.end_ms % kMsPerMinute != 0) {
    return InvalidArgument("a timeline needs a non-empty window and a step of whole minutes");
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
  FleetIndex fleet;
  GPULEDGER_RETURN_IF_ERROR(fleet.Load(*snap, *ranked_jobs_, clock_.NowMs(), options_.retire_after_ms));
  // As in Usage, capacity ends where the data ends (here at the end of its minute, the
  // resolution of the minute rollups): the points after it are empty.
  const TimeRange measured{window.begin_ms, CeilTo(fleet.data_end_ms(), kMsPerMinute)};
  auto in_service = [&](const store::DeviceRecord& d) { return fleet.ServiceSpan(d).Intersect(measured); };
  size_t n = static_cast<size_t>((window.length_ms() + step_ms - 1) / step_ms);
  std::vector<TimelinePoint> points(n);
  std::vector<int64_t> covered(n, 0);
  for (size_t i = 0; i < n; ++i) points[i].begin_ms = window.begin_ms + static_cast<int64_t>(i) * step_ms;
  auto wanted = [&](const store::DeviceRecord& d) { return pool.empty() || d.device.pool == pool; };
  auto add = [&](const store::DeviceRecord& dev, int64_t minute_ms, Bucket b, int64_t ms) {
    size_t i = static_cast<size_t>((minute_ms - window.begin_ms) / step_ms);
    int64_t ticks = fleet.ticks(dev);
    points[i].gpu_ticks_ms[static_cast<size_t>(b)] += ms * ticks;
    covered[i] += ms * ticks;
  };
  GPULEDGER_RETURN_IF_ERROR(snap->ScanMinuteRollups(window, [&](const store::RollupRow& r) {
    const store::DeviceRecord* dev = fleet.device(r.device_id);
    if (dev == nullptr || !wanted(*dev)) return;
    if (!in_service(*dev).Contains(r.period_ms)) return;
    for (Bucket b : kAllBuckets) add(*dev, r.period_ms, b, r.ms[static_cast<size_t>(b)]);
  }, /*settled_only=*/true));
  // The device-hours still dirty in the snapshot, from their samples (as in Usage).
  GPULEDGER_ASSIGN_OR_RETURN(auto dirty, snap->DirtyHoursIn({FloorTo(window.begin_ms, kMsPerHour), window.end_ms}));
  std::vector<SampledSpan> spans;
  for (const store::DirtyHour& d : dirty) {
    const store::DeviceRecord* dev = fleet.device(d.device_id);
    if (dev == nullptr || !wanted(*dev)) continue;
    TimeRange span = window.Intersect({d.hour_ms, d.hour_ms + kMsPerHour}).Intersect(in_service(*dev));
    if (!span.empty()) spans.push_back({dev, span});
  }
  GPULEDGER_RETURN_IF_ERROR(AttributeFromSamples(*snap, fleet, spans, options_.staleness_override_ms,
                                                 [&](const SampledSpan& s, const Piece& p, const std::optional<Money>&) {
                                                   add(*s.dev, p.minute_ms, p.bucket, p.ms);
                                                 }));
  for (size_t i = 0; i < n; ++i) {
    TimeRange step{points[i].begin_ms, std::min(points[i].begin_ms + step_ms, window.end_ms)};
    int64_t capacity = 0;
    for (const store::DeviceRecord& d : fleet.devices()) {
      if (d.in_service_ms == 0 || !wanted(d)) continue;
      capacity += step.Intersect(in_service(d)).length_ms() * fleet.ticks(d);
    }
    points[i].gpu_ticks_ms[static_cast<size_t>(Bucket::kUnmonitored)] +=
        std::max<int64_t>(0, capacity - covered[i]);
  }
  return points;
}

Result<std::vector<WasteItem>> Ledger::TopWaste(const TimeRange& window, size_t limit) {
  GPULEDGER_ASSIGN_OR_RETURN(UsageRead read, ReadUsage(window));
  return TopWaste(read, limit);
}

Result<std::vector<WasteItem>> Ledger::TopWaste(const UsageRead& read, size_t limit) {
  std::vector<WasteItem> items;
  auto collect = [&](std::vector<Dimension> by, Bucket bucket, auto&& describe) -> Status {
    GPULEDGER_ASSIGN_OR_RETURN(UsageReport r, read.By(by));
    for (const UsageRow& row : r.rows) {
      Money cost = row.cost[static_cast<size_t>(bucket)];
      if (cost == Money() || row.no_job) continue;
      items.push_back({describe(row.key), bucket, row.gpu_hours(bucket), cost});
      if (bucket == Bucket::kAllocatedIdle) items.back().idle_cause_cost = row.idle_cause_cost;
    }
    return Status::Ok();
  };
  GPULEDGER_RETURN_IF_ERROR(collect(
      {Dimension::kTeam, Dimension::kProject, Dimension::kKind}, Bucket::kAllocatedIdle,
      [](const std::vector<std::string>& k) {
        return fmt::format("{} / {}: {} jobs held GPUs idle", k[0], k[1], k[2]);
      }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kPool}, Bucket::kUnallocated,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("pool {}: capacity nobody held", k[0]);
                                    }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kDevice, Dimension::kNode}, Bucket::kUnavailable,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("GPU {} on {}: down", k[0], k[1]);
                                    }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kNode}, Bucket::kUnmonitored,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("node {}: no telemetry", k[0]);
                                    }));
  std::stable_sort(items.begin(), items.end(),
                   [](const WasteItem& a, const WasteItem& b) { return a.cost > b.cost; });
  if (items.size() > limit) items.resize(limit);
  return items;
}

}  // namespace gpuledger::ledger
