// Numbers that agree everywhere: every grouping of one window sums the same rounded
// atoms, idle causes are priced at their own GPUs' prices, windows end where the data
// ends, unpriced capacity is named, and queries read a snapshot that ingest never blocks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <future>
#include <map>
#include <random>
#include <tuple>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

constexpr int64_t kMinute = kMsPerMinute;

Sample At(const std::string& uuid, int64_t t, std::optional<double> sm, int32_t processes = 1,
          std::optional<IdleGaps> gaps = std::nullopt) {
  Sample s;
  s.device_uuid = uuid;
  s.t_ms = t;
  s.sm_active = sm;
  s.process_count = processes;
  s.gaps = gaps;
  return s;
}

Device Gpu(const std::string& uuid, const std::string& model, const std::string& pool = "training") {
  return Device{.uuid = uuid, .node = "node-" + uuid, .model = model, .memory_mib = 81920, .pool = pool,
                .sample_interval_ms = kMinute};
}

PriceBook Prices() {
  return *PriceBook::Create({PriceEntry{"EXPENSIVE", "*", CapacityType::kOnDemand, Money::FromUnits(10), {0, kForever}},
                             PriceEntry{"CHEAP", "*", CapacityType::kOnDemand, Money::FromUnits(1), {0, kForever}}});
}

const UsageRow* Row(const UsageReport& r, const std::vector<std::string>& key) {
  for (const auto& row : r.rows) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

// The report's finding: team speech's input stall (for the team) cost less than one of
// its projects' input stall, because a team's idle cost was split over its causes by
// GPU-hours, mixing an expensive GPU's held-idle hours with a cheap one's stalls.
TEST(AgreementTest, IdleCausesArePricedAtTheirOwnGpus) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(Prices()).ok());
  Batch b;
  b.batch_id = "speech";
  b.devices = {Gpu("GPU-X", "EXPENSIVE"), Gpu("GPU-C", "CHEAP")};
  b.jobs = {Job{.id = "asr-1", .team = "speech", .project = "asr", .kind = JobKind::kNotebook},
            Job{.id = "tts-1", .team = "speech", .project = "tts", .kind = JobKind::kTraining}};
  const int64_t end = kBaseMs + 2 * kMsPerHour;
  b.allocations = {{"GPU-X", "asr-1", kBaseMs, end}, {"GPU-C", "tts-1", kBaseMs, end}};
  for (int64_t ts = kBaseMs; ts <= end; ts += kMinute) {
    b.samples.push_back(At("GPU-X", ts, 0.0, 0));  // held, nothing running: held idle
    // Half busy, the rest in short gaps between bursts: input stall.
    b.samples.push_back(At("GPU-C", ts, 0.5, 1, IdleGaps{kMinute, kMinute / 2, kMinute / 2}));
  }
  ASSERT_TRUE(t.ledger().Ingest(b).ok());
  const TimeRange window{kBaseMs, end};
  auto team = t.ledger().Usage(window, {Dimension::kTeam});
  auto project = t.ledger().Usage(window, {Dimension::kTeam, Dimension::kProject});
  ASSERT_TRUE(team.ok() && project.ok()) << team.status().ToString() << project.status().ToString();
  const UsageRow* speech = Row(*team, {"speech"});
  const UsageRow* asr = Row(*project, {"speech", "asr"});
  const UsageRow* tts = Row(*project, {"speech", "tts"});
  ASSERT_TRUE(speech && asr && tts);
  // By hand: asr held its 10.00/h GPU idle for 2 h (20.00); tts idled half of 2 h on a
  // 1.00/h GPU (1.00). The causes differ, so a split by hours would misprice them.
  EXPECT_EQ(asr->cost[static_cast<size_t>(Bucket::kAllocatedIdle)], Money::FromUnits(20));
  EXPECT_EQ(tts->cost[static_cast<size_t>(Bucket::kAllocatedIdle)], Money::FromUnits(1));
  EXPECT_EQ(asr->idle_cause_cost[static_cast<size_t>(IdleCause::kHeldIdle)], Money::FromUnits(20));
  EXPECT_EQ(tts->idle_cause_cost[static_cast<size_t>(IdleCause::kInputStall)], Money::FromUnits(1));
  for (IdleCause c : kAllIdleCauses) {
    size_t k = static_cast<size_t>(c);
    EXPECT_EQ(speech->idle_cause_cost[k], asr->idle_cause_cost[k] + tts->idle_cause_cost[k]) << IdleCauseName(c);
    EXPECT_LE(asr->idle_cause_cost[k], speech->idle_cause_cost[k]) << IdleCauseName(c);
  }
  EXPECT_EQ(speech->idle_cause_cost[static_cast<size_t>(IdleCause::kHeldIdle)], Money::FromUnits(20));
  EXPECT_EQ(speech->idle_cause_cost[static_cast<size_t>(IdleCause::kInputStall)], Money::FromUnits(1));
}

// The store numbers devices in the order it first meets them, which depends on which
// agent's batch came first. Three identical GPUs, each an hour and a millisecond at
// 1.00/h: 1.000000277... each, so the window's 3.000001 leaves one micro-unit to the
// tie between them. It goes to the first device by uuid, in a store that met them
// A, B, C and in one that met them C, B, A alike.
TEST(AgreementTest, ATieGoesByNameNotByTheOrderTheStoreMetTheDevices) {
  PriceBook one = *PriceBook::Create({PriceEntry{"CHEAP", "*", CapacityType::kOnDemand, Money::FromUnits(1), {0, kForever}}});
  auto fill = [&](Ledger& ledger, std::vector<std::string> order) {
    ASSERT_TRUE(ledger.SetPrices(one).ok());
    Batch b;
    b.batch_id = "three";
    for (const std::string& uuid : order) b.devices.push_back(Gpu(uuid, "CHEAP"));
    for (int64_t ts = kBaseMs; ts <= kBaseMs + 2 * kMsPerHour; ts += kMinute) {
      for (const std::string& uuid : order) b.samples.push_back(At(uuid, ts, 0.0, 0));
    }
    ASSERT_TRUE(ledger.Ingest(b).ok());
  };
  testing::TempLedger met_abc, met_cba;
  fill(met_abc.ledger(), {"GPU-A", "GPU-B", "GPU-C"});
  fill(met_cba.ledger(), {"GPU-C", "GPU-B", "GPU-A"});
  const TimeRange window{kBaseMs, kBaseMs + kMsPerHour + 1};
  for (testing::TempLedger* t : {&met_abc, &met_cba}) {
    auto usage = t->ledger().Usage(window, {Dimension::kDevice});
    ASSERT_TRUE(usage.ok()) << usage.status().ToString();
    EXPECT_EQ(usage->total.total_cost(), Money::Parse("3.000001").value());
    ASSERT_TRUE(Row(*usage, {"GPU-A"}) && Row(*usage, {"GPU-B"}) && Row(*usage, {"GPU-C"}));
    EXPECT_EQ(Row(*usage, {"GPU-A"})->total_cost(), Money::Parse("1.000001").value());
    EXPECT_EQ(Row(*usage, {"GPU-B"})->total_cost(), Money::FromUnits(1));
    EXPECT_EQ(Row(*usage, {"GPU-C"})->total_cost(), Money::FromUnits(1));
  }
}

// A fleet whose figures do not divide evenly: four GPUs at two prices (one split into
// MIG slices), seven jobs of three teams, random activity and gaps, a window cut inside
// hours at both ends.
void RandomFleet(Ledger& ledger, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  ASSERT_TRUE(ledger.SetPrices(*PriceBook::Create(
      {PriceEntry{"EXPENSIVE", "*", CapacityType::kOnDemand, Money::Parse("3.333333").value(), {0, kForever}},
       PriceEntry{"CHEAP", "*", CapacityType::kOnDemand, Money::Parse("0.777777").value(), {0, kForever}}})).ok());
  Batch b;
  b.batch_id = "random";
  b.devices = {Gpu("G0", "EXPENSIVE"), Gpu("G1", "EXPENSIVE", "serving"), Gpu("G2", "CHEAP"), Gpu("G3", "CHEAP", "dev")};
  Device slice = Gpu("G3-mig0", "CHEAP", "dev");
  slice.parent_uuid = "G3";
  slice.share = {3, 7};
  b.devices.push_back(slice);
  std::vector<std::string> uuids = {"G0", "G1", "G2", "G3", "G3-mig0"};
  const std::string teams[] = {"speech", "vision", "recsys"};
  for (int j = 0; j < 7; ++j) {
    b.jobs.push_back(Job{.id = "job" + std::to_string(j), .team = teams[j % 3], .project = "p" + std::to_string(j % 4),
                         .experiment = "e" + std::to_string(j % 2), .kind = static_cast<JobKind>(j % 4)});
  }
  const int64_t hours = 6;
  for (const std::string& uuid : uuids) {
    int64_t t = kBaseMs;
    while (t < kBaseMs + hours * kMsPerHour) {
      int64_t len = uniform(10, 120) * kMinute;
      int64_t job = uniform(-2, 6);  // < 0: nobody holds it
      if (job >= 0) b.allocations.push_back({uuid, "job" + std::to_string(job), t, t + len});
      t += len;
    }
    for (int64_t ts = kBaseMs; ts <= kBaseMs + hours * kMsPerHour; ts += kMinute) {
      if (uniform(0, 40) == 0) ts += 10 * kMinute;  // a gap longer than the staleness limit
      double sm = static_cast<double>(uniform(0, 100)) / 100.0;
      int64_t idle = static_cast<int64_t>((1 - sm) * kMinute);
      b.samples.push_back(At(uuid, ts, sm, static_cast<int32_t>(uniform(0, 2)),
                             IdleGaps{kMinute, idle, uniform(0, idle)}));
    }
  }
  auto r = ledger.Ingest(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

// Sums `fine` rows into the grouping by the first `n` of its dimensions.
std::map<std::vector<std::string>, UsageRow> Coarsen(const UsageReport& fine, size_t n) {
  std::map<std::vector<std::string>, UsageRow> out;
  for (const auto& row : fine.rows) {
    UsageRow& c = out[std::vector<std::string>(row.key.begin(), row.key.begin() + static_cast<long>(n))];
    for (size_t b = 0; b < kBucketCount; ++b) {
      c.gpu_ticks_ms[b] += row.gpu_ticks_ms[b];
      c.cost[b] += row.cost[b];
    }
    for (size_t k = 0; k < kIdleCauseCount; ++k) c.idle_cause_cost[k] += row.idle_cause_cost[k];
  }
  return out;
}

class AgreementPropertyTest : public ::testing::TestWithParam<uint64_t> {};

// Each table of a report is another grouping of the same window: the parts add up to the
// whole to the micro-unit, in every bucket and every idle cause.
TEST_P(AgreementPropertyTest, EveryGroupingOfAWindowSumsTheSameMoney) {
  testing::TempLedger t;
  RandomFleet(t.ledger(), GetParam());
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  const TimeRange window{kBaseMs + 17 * kMinute, kBaseMs + 5 * kMsPerHour + 41 * kMinute};
  auto fine = t.ledger().Usage(window, {Dimension::kTeam, Dimension::kProject, Dimension::kKind});
  auto by_team = t.ledger().Usage(window, {Dimension::kTeam});
  auto by_pool = t.ledger().Usage(window, {Dimension::kPool});
  auto chargeback = t.ledger().Chargeback(window, false);
  auto waste = t.ledger().TopWaste(window, 100);
  ASSERT_TRUE(fine.ok() && by_team.ok() && by_pool.ok() && chargeback.ok() && waste.ok());
  auto teams = Coarsen(*fine, 1);
  ASSERT_EQ(teams.size(), by_team->rows.size());
  for (const auto& row : by_team->rows) {
    const UsageRow& sum = teams[row.key];
    for (size_t b = 0; b < kBucketCount; ++b) {
      EXPECT_EQ(sum.cost[b], row.cost[b]) << row.key[0] << " " << BucketName(kAllBuckets[b]);
      EXPECT_EQ(sum.gpu_ticks_ms[b], row.gpu_ticks_ms[b]);
    }
    for (size_t k = 0; k < kIdleCauseCount; ++k) {
      EXPECT_EQ(sum.idle_cause_cost[k], row.idle_cause_cost[k]) << row.key[0] << " " << k;
    }
  }
  EXPECT_EQ(by_pool->total.total_cost(), by_team->total.total_cost());
  EXPECT_EQ(fine->total.total_cost(), by_team->total.total_cost());
  EXPECT_EQ(chargeback->total, by_team->total.total_cost());
  // Chargeback lines are the team-and-project grouping of the same atoms.
  auto projects = Coarsen(*fine, 2);
  Money lines;
  for (const auto& l : chargeback->lines) {
    lines += l.total_cost();
    if (l.team.starts_with("(")) continue;
    const UsageRow& row = projects[{l.team, l.project}];
    EXPECT_EQ(l.direct_cost, row.cost[0] + row.cost[1]) << l.team << "/" << l.project;
    for (size_t k = 0; k < kIdleCauseCount; ++k) EXPECT_EQ(l.idle_cost_by_cause[k], row.idle_cause_cost[k]);
  }
  EXPECT_EQ(lines, chargeback->total);
  // A source of waste is a part of its team's idle cost, never more.
  for (const WasteItem& w : *waste) {
    if (w.bucket != Bucket::kAllocatedIdle) continue;
    std::string team = w.what.substr(0, w.what.find(" / "));
    const UsageRow* whole = Row(*by_team, {team});
    ASSERT_NE(whole, nullptr) << w.what;
    EXPECT_LE(w.cost, whole->cost[static_cast<size_t>(Bucket::kAllocatedIdle)]) << w.what;
    for (size_t k = 0; k < kIdleCauseCount; ++k) EXPECT_LE(w.idle_cause_cost[k], whole->idle_cause_cost[k]);
  }
}

// Prices of millions an hour: an atom's exact cost no longer fits 64 bits (an hour of a
// whole GPU is 3.0e9 ticks x 4.3e12 micros), and is floored and rounded in 128 bits,
// while the few ms at a window's edges still fit. The total is the report's own GPU
// time at its models' prices, rounded once; every grouping adds up to it.
TEST_P(AgreementPropertyTest, CostsTooLargeForSixtyFourBitsAreExactToo) {
  testing::TempLedger t;
  RandomFleet(t.ledger(), GetParam());
  const Money expensive = Money::Parse("4333333.333333").value(), cheap = Money::Parse("777777.777777").value();
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"EXPENSIVE", "*", CapacityType::kOnDemand, expensive, {0, kForever}},
       PriceEntry{"CHEAP", "*", CapacityType::kOnDemand, cheap, {0, kForever}}})).ok());
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  const TimeRange window{kBaseMs + 17 * kMinute, kBaseMs + 5 * kMsPerHour + 41 * kMinute};
  for (const std::vector<Dimension>& by : {std::vector<Dimension>{Dimension::kModel},
                                           std::vector<Dimension>{Dimension::kModel, Dimension::kHour}}) {
    auto usage = t.ledger().Usage(window, by);
    ASSERT_TRUE(usage.ok()) << usage.status().ToString();
    CostNumerator exact = 0;
    Money rows;
    for (const UsageRow& row : usage->rows) {
      const Money price = row.key[0] == "EXPENSIVE" ? expensive : cheap;
      for (int64_t ticks : row.gpu_ticks_ms) exact += static_cast<CostNumerator>(ticks) * price.micros();
      rows += row.total_cost();
    }
    EXPECT_EQ(usage->total.total_cost(), RoundCost(exact)) << "by " << by.size() << " dimensions";
    EXPECT_EQ(rows, usage->total.total_cost());
    auto chargeback = t.ledger().Chargeback(window, false);
    ASSERT_TRUE(chargeback.ok());
    EXPECT_EQ(chargeback->total, RoundCost(exact));
  }
}

// A query reads a snapshot: the hours not yet rolled up are attributed from their samples
// exactly as the refresh would roll them up.
TEST_P(AgreementPropertyTest, DirtyHoursAnswerAsTheirRollupsWill) {
  testing::TempLedger t;
  RandomFleet(t.ledger(), GetParam());
  const TimeRange window{kBaseMs + 17 * kMinute, kBaseMs + 5 * kMsPerHour + 41 * kMinute};
  const std::vector<Dimension> by = {Dimension::kTeam, Dimension::kPool, Dimension::kHour};
  auto before = t.ledger().Usage(window, by);
  auto timeline_before = t.ledger().Timeline({kBaseMs, kBaseMs + 6 * kMsPerHour}, 10 * kMinute);
  ASSERT_TRUE(before.ok() && timeline_before.ok()) << before.status().ToString();
  auto stats = t.ledger().Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->dirty_hours, 0);
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  EXPECT_EQ(t.ledger().Stats()->dirty_hours, 0);
  auto after = t.ledger().Usage(window, by);
  auto timeline_after = t.ledger().Timeline({kBaseMs, kBaseMs + 6 * kMsPerHour}, 10 * kMinute);
  ASSERT_TRUE(after.ok() && timeline_after.ok());
  ASSERT_EQ(before->rows.size(), after->rows.size());
  for (size_t i = 0; i < before->rows.size(); ++i) {
    EXPECT_EQ(before->rows[i].key, after->rows[i].key);
    EXPECT_EQ(before->rows[i].gpu_ticks_ms, after->rows[i].gpu_ticks_ms);
    EXPECT_EQ(before->rows[i].cost, after->rows[i].cost);
    EXPECT_EQ(before->rows[i].idle_cause_ticks_ms, after->rows[i].idle_cause_ticks_ms);
  }
  ASSERT_EQ(timeline_before->size(), timeline_after->size());
  for (size_t i = 0; i < timeline_before->size(); ++i) {
    EXPECT_EQ((*timeline_before)[i].gpu_ticks_ms, (*timeline_after)[i].gpu_ticks_ms) << i;
  }
}

// Every row's figures, and the report's window, total, unpriced capacity and currency.
void ExpectSameReport(const UsageReport& a, const UsageReport& b, const std::string& what) {
  EXPECT_EQ(a.window, b.window) << what;
  EXPECT_EQ(a.requested, b.requested) << what;
  EXPECT_EQ(a.by, b.by) << what;
  EXPECT_EQ(a.currency.Label(), b.currency.Label()) << what;
  ASSERT_EQ(a.rows.size(), b.rows.size()) << what;
  std::vector<UsageRow> rows = a.rows;
  rows.push_back(a.total);
  std::vector<UsageRow> other = b.rows;
  other.push_back(b.total);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at = fmt::format("{}, row {}", what, i);
    EXPECT_EQ(rows[i].key, other[i].key) << at;
    EXPECT_EQ(rows[i].no_job, other[i].no_job) << at;
    EXPECT_EQ(rows[i].gpu_ticks_ms, other[i].gpu_ticks_ms) << at;
    EXPECT_EQ(rows[i].cost, other[i].cost) << at;
    EXPECT_EQ(rows[i].coarse_ticks_ms, other[i].coarse_ticks_ms) << at;
    EXPECT_EQ(rows[i].unpriced_ticks_ms, other[i].unpriced_ticks_ms) << at;
    EXPECT_EQ(rows[i].idle_cause_ticks_ms, other[i].idle_cause_ticks_ms) << at;
    EXPECT_EQ(rows[i].idle_cause_cost, other[i].idle_cause_cost) << at;
  }
  ASSERT_EQ(a.unpriced.size(), b.unpriced.size()) << what;
  for (size_t i = 0; i < a.unpriced.size(); ++i) {
    EXPECT_EQ(a.unpriced[i].model, b.unpriced[i].model) << what;
    EXPECT_EQ(a.unpriced[i].gpu_ticks_ms, b.unpriced[i].gpu_ticks_ms) << what;
  }
}

// A report reads its window once (Ledger::ReadUsage) and groups it as each table needs:
// every grouping, the chargeback and the waste answer as their own queries do, to the
// micro-unit, with dirty hours (odd seeds) or none, over windows that cut hours, end past
// the data, or begin after it.
TEST_P(AgreementPropertyTest, OneReadOfAWindowAnswersEveryGroupingAsItsOwnQuery) {
  testing::TempLedger t;
  RandomFleet(t.ledger(), GetParam());
  if (GetParam() % 2 == 0) {
    ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  }
  // Some capacity unpriced: the catch-all price covers only the cheap model.
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"CHEAP", "*", CapacityType::kOnDemand, Money::Parse("1.234567").value(), {0, kForever}}})).ok());
  const std::vector<std::vector<Dimension>> groupings = {
      {Dimension::kTeam}, {Dimension::kProject}, {Dimension::kExperiment}, {Dimension::kUser},
      {Dimension::kKind}, {Dimension::kJob}, {Dimension::kPool}, {Dimension::kNode},
      {Dimension::kModel}, {Dimension::kDevice}, {Dimension::kTeam, Dimension::kProject},
      {Dimension::kTeam, Dimension::kExperiment}, {Dimension::kPool, Dimension::kTeam, Dimension::kKind},
      {Dimension::kDevice, Dimension::kJob}, {Dimension::kNode, Dimension::kModel}};
  for (const TimeRange& window : {TimeRange{kBaseMs + 17 * kMinute, kBaseMs + 5 * kMsPerHour + 41 * kMinute},
                                  TimeRange{kBaseMs + 2 * kMsPerHour, kBaseMs + 30 * kMsPerHour},
                                  TimeRange{kBaseMs + 40 * kMsPerHour, kBaseMs + 41 * kMsPerHour}}) {
    const std::string in = FormatTime(window.begin_ms) + " .. " + FormatTime(window.end_ms);
    auto read = t.ledger().ReadUsage(window);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(read->requested(), window);
    for (const auto& by : groupings) {
      std::string what = in + " by";
      for (Dimension d : by) what += " " + std::string(DimensionName(d));
      auto own = t.ledger().Usage(window, by);
      auto grouped = read->By(by);
      ASSERT_TRUE(own.ok() && grouped.ok()) << what;
      ExpectSameReport(*grouped, *own, what);
      // Unordered, the same rows.
      auto unordered = read->By(by, Ledger::RowOrder::kUnordered);
      auto own_unordered = t.ledger().Usage(window, by, Ledger::RowOrder::kUnordered);
      ASSERT_TRUE(unordered.ok() && own_unordered.ok()) << what;
      ExpectSameReport(*unordered, *own_unordered, what + " unordered");
    }
    auto chargeback = t.ledger().Chargeback(*read, true);
    auto own_chargeback = t.ledger().Chargeback(window, true);
    ASSERT_TRUE(chargeback.ok() && own_chargeback.ok()) << in;
    EXPECT_EQ(chargeback->total, own_chargeback->total) << in;
    EXPECT_EQ(chargeback->period, own_chargeback->period) << in;
    ASSERT_EQ(chargeback->lines.size(), own_chargeback->lines.size()) << in;
    for (size_t i = 0; i < chargeback->lines.size(); ++i) {
      const ChargebackLine& a = chargeback->lines[i];
      const ChargebackLine& b = own_chargeback->lines[i];
      EXPECT_EQ(std::tie(a.team, a.project, a.direct_cost, a.shared_idle_cost, a.idle_cost_by_cause),
                std::tie(b.team, b.project, b.direct_cost, b.shared_idle_cost, b.idle_cost_by_cause))
          << in << " line " << i;
      EXPECT_EQ(a.gpu_hours, b.gpu_hours) << in << " line " << i;
    }
    // The waste from the read against the waste from a query per grouping, as it was
    // built before there were reads: the four groupings of TopWaste's contract.
    auto waste = t.ledger().TopWaste(*read, 100);
    ASSERT_TRUE(waste.ok()) << in;
    Money idle, unallocated, unavailable, unmonitored;
    for (const WasteItem& w : *waste) {
      Money& sum = w.bucket == Bucket::kAllocatedIdle  ? idle
                   : w.bucket == Bucket::kUnallocated ? unallocated
                   : w.bucket == Bucket::kUnavailable ? unavailable
                                                      : unmonitored;
      sum += w.cost;
    }
    auto sum_of = [&](std::vector<Dimension> by, Bucket b) {
      Money sum;
      auto usage = t.ledger().Usage(window, by);
      EXPECT_TRUE(usage.ok()) << in;
      if (!usage.ok()) return sum;
      for (const UsageRow& row : usage->rows) {
        if (!row.no_job) sum += row.cost[static_cast<size_t>(b)];
      }
      return sum;
    };
    EXPECT_EQ(idle, sum_of({Dimension::kTeam, Dimension::kProject, Dimension::kKind}, Bucket::kAllocatedIdle)) << in;
    EXPECT_EQ(unallocated, sum_of({Dimension::kPool}, Bucket::kUnallocated)) << in;
    EXPECT_EQ(unavailable, sum_of({Dimension::kDevice, Dimension::kNode}, Bucket::kUnavailable)) << in;
    EXPECT_EQ(unmonitored, sum_of({Dimension::kNode}, Bucket::kUnmonitored)) << in;
  }
  // A read of a whole window has no hours, and groups by something.
  auto read = t.ledger().ReadUsage({kBaseMs, kBaseMs + kMsPerHour});
  ASSERT_TRUE(read.ok());
  auto hourly = read->By({Dimension::kTeam, Dimension::kHour});
  EXPECT_EQ(hourly.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hourly.status().message().find("by hour"), std::string::npos) << hourly.status().ToString();
  EXPECT_EQ(read->By({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.ledger().ReadUsage({kBaseMs, kBaseMs}).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Seeds, AgreementPropertyTest, ::testing::Range<uint64_t>(1, 9));

// Two GPUs sampled every minute from 00:00; G-late stops at 03:30, G-early at 01:00.
void TwoGpus(Ledger& ledger) {
  ASSERT_TRUE(ledger.SetPrices(Prices()).ok());
  Batch b;
  b.batch_id = "two";
  b.devices = {Gpu("G-late", "CHEAP"), Gpu("G-early", "CHEAP")};
  for (int64_t ts = kBaseMs; ts <= kBaseMs + 210 * kMinute; ts += kMinute) {
    b.samples.push_back(At("G-late", ts, 0.0));
    if (ts <= kBaseMs + kMsPerHour) b.samples.push_back(At("G-early", ts, 0.0));
  }
  ASSERT_TRUE(ledger.Ingest(b).ok());
}

// One rule (docs/ARCHITECTURE.md, "Windows end where the data ends"): time after the
// fleet's latest sample, or after now, is no capacity; a device silent for less than the
// retirement limit before the data ends is unmonitored (an outage to see); one silent for
// longer retired at the end of the hour of its last sample.
TEST(AgreementTest, WindowsEndWhereTheDataEnds) {
  testing::TempLedger t;
  TwoGpus(t.ledger());
  const int64_t data_end = kBaseMs + 210 * kMinute;
  auto r = t.ledger().Usage({kBaseMs, kBaseMs + 30 * kMsPerDay}, {Dimension::kDevice});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->window, (TimeRange{kBaseMs, data_end}));
  EXPECT_EQ(r->requested, (TimeRange{kBaseMs, kBaseMs + 30 * kMsPerDay}));
  const UsageRow* late = Row(*r, {"G-late"});
  const UsageRow* early = Row(*r, {"G-early"});
  ASSERT_TRUE(late && early);
  EXPECT_EQ(late->total_ticks_ms(), 210 * kMinute * kShareScale);
  EXPECT_EQ(late->gpu_ticks_ms[static_cast<size_t>(Bucket::kUnmonitored)], 0);
  // G-early went silent 2.5 h before the data ends: unmonitored, not retired.
  EXPECT_EQ(early->gpu_ticks_ms[static_cast<size_t>(Bucket::kUnmonitored)], 150 * kMinute * kShareScale);
  // The month is billed up to the data, not to its end.
  auto month = t.ledger().Chargeback(*ParseMonth("2026-11"), true);
  ASSERT_TRUE(month.ok());
  EXPECT_EQ(month->period.end_ms, data_end);
  EXPECT_EQ(month->total, r->total.total_cost());
  // A window wholly after the data is empty, not unmonitored.
  auto after = t.ledger().Usage({data_end + kMsPerHour, data_end + 2 * kMsPerHour}, {Dimension::kTeam});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->rows.empty());
  EXPECT_EQ(after->total.total_ticks_ms(), 0);
  // Trailing windows end at the data's last hour when the data ended before now.
  EXPECT_EQ(TrailingWindow(kBaseMs + 30 * kMsPerDay, data_end, 2 * kMsPerHour),
            (TimeRange{kBaseMs + 2 * kMsPerHour, kBaseMs + 4 * kMsPerHour}));
  EXPECT_EQ(TrailingWindow(kBaseMs + 150 * kMinute, data_end, kMsPerHour),
            (TimeRange{kBaseMs + kMsPerHour, kBaseMs + 2 * kMsPerHour}));
  auto data = t.ledger().Data();
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->first_ms, kBaseMs);
  EXPECT_EQ(data->end_ms, data_end);
}

TEST(AgreementTest, ADeviceSilentPastTheRetirementLimitRetires) {
  testing::TempLedger t(LedgerOptions{.retire_after_ms = 2 * kMsPerHour});
  TwoGpus(t.ledger());
  auto r = t.ledger().Usage({kBaseMs, kBaseMs + kMsPerDay}, {Dimension::kDevice});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const UsageRow* early = Row(*r, {"G-early"});
  ASSERT_NE(early, nullptr);
  // Its last sample at 01:00 is 2.5 h before the data ends: retired at 02:00, the end of
  // that sample's hour. 01:00..02:00 stays unmonitored; after 02:00 it is no capacity.
  EXPECT_EQ(early->total_ticks_ms(), 2 * kMsPerHour * kShareScale);
  EXPECT_EQ(early->gpu_ticks_ms[static_cast<size_t>(Bucket::kUnmonitored)], kMsPerHour * kShareScale);
  // The same with the rollups refreshed, and in the timeline.
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  auto again = t.ledger().Usage({kBaseMs, kBaseMs + kMsPerDay}, {Dimension::kDevice});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Row(*again, {"G-early"})->gpu_ticks_ms, early->gpu_ticks_ms);
  auto timeline = t.ledger().Timeline({kBaseMs, kBaseMs + 4 * kMsPerHour}, kMsPerHour);
  ASSERT_TRUE(timeline.ok());
  int64_t total = 0;
  for (const auto& p : *timeline) {
    for (int64_t v : p.gpu_ticks_ms) total += v;
  }
  // G-late's 3.5 h (up to its last sample, on a minute) and G-early's 2 h.
  EXPECT_EQ(total, (210 * kMinute + 2 * kMsPerHour) * kShareScale);
}

TEST(AgreementTest, UnpricedCapacityIsNamed) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(Prices()).ok());
  Batch b;
  b.batch_id = "unpriced";
  b.devices = {Gpu("G-priced", "CHEAP"), Gpu("G-free", "MYSTERY", "lab")};
  for (int64_t ts = kBaseMs; ts <= kBaseMs + kMsPerHour; ts += kMinute) {
    b.samples.push_back(At("G-priced", ts, 0.5));
    b.samples.push_back(At("G-free", ts, 0.5));
  }
  ASSERT_TRUE(t.ledger().Ingest(b).ok());
  auto r = t.ledger().Usage({kBaseMs, kBaseMs + kMsPerHour}, {Dimension::kPool});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->unpriced.size(), 1u);
  EXPECT_EQ(r->unpriced[0].model, "MYSTERY");
  EXPECT_EQ(r->unpriced[0].pool, "lab");
  EXPECT_EQ(r->unpriced[0].gpu_ticks_ms, kMsPerHour * kShareScale);
  EXPECT_EQ(r->total.unpriced_ticks_ms, kMsPerHour * kShareScale);
  auto c = t.ledger().Chargeback({kBaseMs, kBaseMs + kMsPerHour}, false);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->unpriced.size(), 1u);
}

// A query never waits for a group commit, and sees none of a group not yet committed.
TEST(AgreementTest, QueriesReadASnapshotWhileAGroupIsOpen) {
  testing::TempLedger t;
  TwoGpus(t.ledger());
  auto group = t.ledger().BeginIngestGroup();
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  Batch more;
  more.batch_id = "more";
  more.devices = {Gpu("G-new", "CHEAP")};
  for (int64_t ts = kBaseMs; ts <= kBaseMs + kMsPerHour; ts += kMinute) more.samples.push_back(At("G-new", ts, 1.0));
  ASSERT_TRUE(t.ledger().Validate(more).ok());
  ASSERT_TRUE((*group)->Apply(more).ok());
  // The group holds the store's writer; the query runs on another thread and must finish.
  auto query = std::async(std::launch::async, [&] {
    return t.ledger().Usage({kBaseMs, kBaseMs + kMsPerHour}, {Dimension::kDevice});
  });
  ASSERT_EQ(query.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the query waited for ingest";
  auto during = query.get();
  ASSERT_TRUE(during.ok()) << during.status().ToString();
  EXPECT_EQ(Row(*during, {"G-new"}), nullptr);
  ASSERT_TRUE((*group)->Commit().ok());
  group->reset();
  auto after = t.ledger().Usage({kBaseMs, kBaseMs + kMsPerHour}, {Dimension::kDevice});
  ASSERT_TRUE(after.ok());
  ASSERT_NE(Row(*after, {"G-new"}), nullptr);
  // Held by no job: unallocated, from its first sample on.
  EXPECT_EQ(Row(*after, {"G-new"})->gpu_ticks_ms[static_cast<size_t>(Bucket::kUnallocated)], kMsPerHour * kShareScale);
}

}  // namespace
}  // namespace gpuledger::ledger
