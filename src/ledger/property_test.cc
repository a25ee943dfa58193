// Property tests: random fleets, samples, allocations, prices and windows keep the
// conservation law to the millisecond and the micro-unit. What the capacity in service
// was and what it cost comes from the reference model (reference_attributor.h), which
// reads the batches the fleet sent, not the ledger's store or its MIG arithmetic.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "core/testing/missing_component.h"
#include "ledger/random_fleet.h"
#include "ledger/reference_attributor.h"
#include "ledger/test_fixture.h"
#include "ledger/store_access.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;
using testing::MakeRandomFleet;
using testing::RandomFleet;

// Forty seeds on SQLite, the first ten of them on PostgreSQL too: the PostgreSQL store
// holds to the same laws, and BackendAgreementTest below compares the two backends row by
// row on eight fleets, so all forty again there would add time, not evidence.
class ConservationTest : public ::testing::TestWithParam<std::tuple<uint64_t, testing::Backend>> {
 protected:
  void SetUp() override {
    if (std::string why = testing::BackendMissing(backend()); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  }
  uint64_t Seed() const { return std::get<0>(GetParam()); }
  testing::Backend backend() const { return std::get<1>(GetParam()); }
};

TEST_P(ConservationTest, BucketsAndCostsAddUpForAnyWindow) {
  RandomFleet fleet = MakeRandomFleet(Seed());
  testing::TempLedger t(backend());
  PriceBook book = *PriceBook::Create(fleet.prices);
  ASSERT_TRUE(t.ledger().SetPrices(book).ok());
  for (const Batch& b : fleet.batches) {
    auto r = t.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const reference::Model model(fleet.batches, book);
  std::mt19937_64 rng(Seed() * 31 + 7);
  for (int w = 0; w < 6; ++w) {
    int64_t a = kBaseMs + static_cast<int64_t>(rng() % (7 * 3600)) * 1000 - kMsPerHour +
                static_cast<int64_t>(rng() % 1000);
    int64_t b = a + 1 + static_cast<int64_t>(rng() % (5 * 3600'000));
    TimeRange window{a, b};
    auto report = t.ledger().Usage(window, {Dimension::kTeam, Dimension::kPool});
    ASSERT_TRUE(report.ok()) << report.status().ToString();  // includes the per-device check
    // The report covers the window up to where the data ends (the latest sample).
    int64_t data_end = 0;
    auto devices = ledger::internal_StoreOf(t.ledger()).ListDevices();
    ASSERT_TRUE(devices.ok());
    for (const auto& d : *devices) data_end = std::max(data_end, d.last_sample_ms);
    ASSERT_EQ(report->window, (TimeRange{a, std::max(a, std::min(b, data_end))}));
    window = report->window;
    // Time: every GPU-millisecond in service lands in exactly one bucket.
    EXPECT_EQ(report->total.total_ticks_ms(), model.InServiceTicks(window));
    // Money: the rows add up to the total, and the total is the fleet's cost.
    Money rows;
    for (const auto& row : report->rows) rows += row.total_cost();
    EXPECT_EQ(rows, report->total.total_cost());
    EXPECT_EQ(report->total.total_cost(), RoundCost(model.FleetCost(window)));

    // Additivity: a window split in two gives the same time in every bucket.
    int64_t mid = a + static_cast<int64_t>(rng() % static_cast<uint64_t>(b - a));
    if (mid > a) {
      auto left = t.ledger().Usage({a, mid}, {Dimension::kJob});
      auto right = t.ledger().Usage({mid, b}, {Dimension::kJob});
      ASSERT_TRUE(left.ok() && right.ok());
      for (size_t k = 0; k < kBucketCount; ++k) {
        EXPECT_EQ(left->total.gpu_ticks_ms[k] + right->total.gpu_ticks_ms[k],
                  report->total.gpu_ticks_ms[k])
            << "bucket " << BucketName(kAllBuckets[k]) << " window " << FormatTime(a) << " .. "
            << FormatTime(mid) << " .. " << FormatTime(b);
      }
    }
  }
}

// Grouping by hour is the window's time series: each hour's rows are that hour's usage
// (clipped to the window), and together they add up to the ungrouped report.
TEST_P(ConservationTest, HourlySeriesAddsUpToTheWindow) {
  RandomFleet fleet = MakeRandomFleet(Seed());
  testing::TempLedger t(backend());
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(fleet.prices)).ok());
  for (const Batch& b : fleet.batches) ASSERT_TRUE(t.ledger().Ingest(b).ok());
  std::mt19937_64 rng(Seed() * 17 + 3);
  int64_t a = kBaseMs - kMsPerHour + static_cast<int64_t>(rng() % (3 * 3600'000));
  TimeRange window{a, a + kMsPerHour + static_cast<int64_t>(rng() % (5 * 3600'000))};
  auto series = t.ledger().Usage(window, {Dimension::kHour, Dimension::kTeam});
  auto whole = t.ledger().Usage(window, {Dimension::kTeam});
  ASSERT_TRUE(series.ok() && whole.ok()) << series.status().ToString();
  EXPECT_EQ(series->total.gpu_ticks_ms, whole->total.gpu_ticks_ms);
  EXPECT_EQ(series->total.total_cost(), whole->total.total_cost());

  std::map<std::string, std::array<int64_t, kBucketCount>> by_team;
  std::map<std::string, Money> cost_by_team;
  std::map<std::string, std::map<std::string, std::array<int64_t, kBucketCount>>> by_hour;
  for (const auto& row : series->rows) {
    for (size_t k = 0; k < kBucketCount; ++k) {
      by_team[row.key[1]][k] += row.gpu_ticks_ms[k];
      by_hour[row.key[0]][row.key[1]][k] += row.gpu_ticks_ms[k];
    }
    cost_by_team[row.key[1]] += row.total_cost();
  }
  int64_t hours = static_cast<int64_t>(by_hour.size());
  int64_t devices = static_cast<int64_t>(ledger::internal_StoreOf(t.ledger()).ListDevices()->size());
  for (const auto& row : whole->rows) {
    EXPECT_EQ(by_team[row.key[0]], row.gpu_ticks_ms) << "team " << row.key[0];
    // Money is rounded per atom (a device's time held by one job, over the window or,
    // grouped by hour, over each hour), so a team's hourly rows may differ from its row
    // by less than a micro-unit per device-hour.
    Money diff = cost_by_team[row.key[0]] - row.total_cost();
    EXPECT_LE(std::abs(diff.micros()), devices * (hours + 1)) << "team " << row.key[0];
  }
  for (const auto& [hour, teams] : by_hour) {
    int64_t h = *ParseTime(hour);
    auto one = t.ledger().Usage(window.Intersect({h, h + kMsPerHour}), {Dimension::kTeam});
    ASSERT_TRUE(one.ok());
    for (const auto& row : one->rows) {
      auto it = teams.find(row.key[0]);
      std::array<int64_t, kBucketCount> got = it == teams.end() ? std::array<int64_t, kBucketCount>{} : it->second;
      EXPECT_EQ(got, row.gpu_ticks_ms) << hour << " team " << row.key[0];
    }
  }
}

TEST_P(ConservationTest, ImportingTheSameBatchesTwiceChangesNothing) {
  RandomFleet fleet = MakeRandomFleet(Seed());
  testing::TempLedger t(backend());
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(fleet.prices)).ok());
  for (const Batch& b : fleet.batches) ASSERT_TRUE(t.ledger().Ingest(b).ok());
  TimeRange window{kBaseMs - kMsPerHour, kBaseMs + 8 * kMsPerHour};
  auto once = *t.ledger().Usage(window, {Dimension::kJob});
  for (const Batch& b : fleet.batches) {
    auto r = t.ledger().Ingest(b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, store::ApplyOutcome::kDuplicate);
  }
  auto twice = *t.ledger().Usage(window, {Dimension::kJob});
  ASSERT_EQ(once.rows.size(), twice.rows.size());
  for (size_t i = 0; i < once.rows.size(); ++i) {
    EXPECT_EQ(once.rows[i].key, twice.rows[i].key);
    EXPECT_EQ(once.rows[i].gpu_ticks_ms, twice.rows[i].gpu_ticks_ms);
    EXPECT_EQ(once.rows[i].cost, twice.rows[i].cost);
  }
}

TEST_P(ConservationTest, ArrivalOrderDoesNotMatter) {
  RandomFleet fleet = MakeRandomFleet(Seed());
  testing::TempLedger in_order(backend()), reversed(backend());
  auto book = *PriceBook::Create(fleet.prices);
  ASSERT_TRUE(in_order.ledger().SetPrices(book).ok());
  ASSERT_TRUE(reversed.ledger().SetPrices(book).ok());
  for (const Batch& b : fleet.batches) ASSERT_TRUE(in_order.ledger().Ingest(b).ok());
  // The inventory first (it declares devices and jobs), then samples newest first;
  // rollups are refreshed between arrivals so that late data must rebuild them.
  ASSERT_TRUE(reversed.ledger().Ingest(fleet.batches[0]).ok());
  for (size_t i = fleet.batches.size() - 1; i >= 1; --i) {
    ASSERT_TRUE(reversed.ledger().Ingest(fleet.batches[i]).ok());
    if (i % 3 == 0) {
      ASSERT_TRUE(reversed.ledger().RefreshRollups().ok());
    }
  }
  TimeRange window{kBaseMs - kMsPerHour, kBaseMs + 8 * kMsPerHour};
  auto a = *in_order.ledger().Usage(window, {Dimension::kJob});
  auto b = *reversed.ledger().Usage(window, {Dimension::kJob});
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].gpu_ticks_ms, b.rows[i].gpu_ticks_ms);
    EXPECT_EQ(a.rows[i].cost, b.rows[i].cost);
  }
}

std::string SeedAndBackend(const ::testing::TestParamInfo<ConservationTest::ParamType>& p) {
  return std::to_string(std::get<0>(p.param)) + "_" + testing::BackendName(std::get<1>(p.param));
}
INSTANTIATE_TEST_SUITE_P(Seeds, ConservationTest,
                         ::testing::Combine(::testing::Range<uint64_t>(1, 41), ::testing::Values(testing::Backend::kSqlite)),
                         SeedAndBackend);
INSTANTIATE_TEST_SUITE_P(SeedsOnPostgres, ConservationTest,
                         ::testing::Combine(::testing::Range<uint64_t>(1, 11), ::testing::Values(testing::Backend::kPostgres)),
                         SeedAndBackend);

// The same random fleet on both backends: every row of every report is the same, key by
// key, to the millisecond and the micro-unit (an oracle of its own: the other store).
class BackendAgreementTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(BackendAgreementTest, BothBackendsReportTheSameToTheMicroUnit) {
  if (std::string why = testing::BackendMissing(testing::Backend::kPostgres); !why.empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  }
  RandomFleet fleet = MakeRandomFleet(GetParam());
  testing::TempLedger sqlite(testing::Backend::kSqlite), postgres(testing::Backend::kPostgres);
  PriceBook book = *PriceBook::Create(fleet.prices);
  for (testing::TempLedger* t : {&sqlite, &postgres}) {
    ASSERT_TRUE(t->ledger().SetPrices(book).ok());
    for (const Batch& b : fleet.batches) ASSERT_TRUE(t->ledger().Ingest(b).ok());
  }
  // Half the hours rolled up, half attributed from samples by the query, then all rolled up.
  for (bool refreshed : {false, true}) {
    if (refreshed) {
      ASSERT_TRUE(sqlite.ledger().RefreshRollups().ok());
      ASSERT_TRUE(postgres.ledger().RefreshRollups().ok());
    }
    std::mt19937_64 rng(GetParam() * 13 + (refreshed ? 1 : 0));
    for (int w = 0; w < 4; ++w) {
      int64_t a = kBaseMs + static_cast<int64_t>(rng() % (7 * 3600)) * 1000 - kMsPerHour;
      TimeRange window{a, a + 1 + static_cast<int64_t>(rng() % (5 * 3600'000))};
      for (const std::vector<Dimension>& by : {std::vector<Dimension>{Dimension::kTeam, Dimension::kPool},
                                               std::vector<Dimension>{Dimension::kJob, Dimension::kHour}}) {
        auto x = sqlite.ledger().Usage(window, by);
        auto y = postgres.ledger().Usage(window, by);
        ASSERT_TRUE(x.ok()) << x.status().ToString();
        ASSERT_TRUE(y.ok()) << y.status().ToString();
        EXPECT_EQ(x->window, y->window);
        ASSERT_EQ(x->rows.size(), y->rows.size());
        for (size_t i = 0; i < x->rows.size(); ++i) {
          EXPECT_EQ(x->rows[i].key, y->rows[i].key);
          EXPECT_EQ(x->rows[i].gpu_ticks_ms, y->rows[i].gpu_ticks_ms) << "row " << i;
          EXPECT_EQ(x->rows[i].cost, y->rows[i].cost) << "row " << i;
          EXPECT_EQ(x->rows[i].idle_cause_ticks_ms, y->rows[i].idle_cause_ticks_ms) << "row " << i;
          EXPECT_EQ(x->rows[i].idle_cause_cost, y->rows[i].idle_cause_cost) << "row " << i;
        }
        EXPECT_EQ(x->total.total_cost(), y->total.total_cost());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, BackendAgreementTest, ::testing::Range<uint64_t>(1, 9));

}  // namespace
}  // namespace gpuledger::ledger
