// Bad input never changes the ledger: each rejected batch names itself and the field,
// and the store and every report stay exactly as they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ledger/test_fixture.h"
#include "wire/batch.h"

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;

// 2026-11-23T00:00:00Z .. 00:02:00Z in the fixture's base day.
const char* kGood = R"({"version":1,"batch_id":"good",
  "devices":[{"uuid":"GPU-1","model":"A100","pool":"p","sample_interval_ms":60000}],
  "jobs":[{"id":"j1","team":"nlp"}],
  "allocations":[{"device":"GPU-1","job":"j1","from":1795392000000}],
  "samples":[{"device":"GPU-1","t":1795392000000,"sm_active":0.5},
             {"device":"GPU-1","t":1795392060000,"sm_active":0.5},
             {"device":"GPU-1","t":1795392120000,"sm_active":0.5}]})";

struct BadBatch {
  const char* name;
  const char* json;
  const char* error;  // must appear in the message
};

const BadBatch kBad[] = {
    {"malformed JSON", R"({"version":1,"batch_id":"b1","samples":[)", "malformed JSON"},
    {"unknown version", R"({"version":7,"batch_id":"b2"})", "batch b2: version: unsupported version 7"},
    {"negative figure",
     R"({"version":1,"batch_id":"b3","samples":[{"device":"GPU-1","t":1795392180000,"sm_active":0.5,"power_watts":-1}]})",
     "batch b3: samples[0].power_watts: must be within"},
    {"NaN figure",
     R"({"version":1,"batch_id":"b4","samples":[{"device":"GPU-1","t":1795392180000,"sm_active":"NaN"}]})",
     "batch b4: samples[0].sm_active: must be a number"},
    {"time going backwards",
     R"({"version":1,"batch_id":"b5","samples":[{"device":"GPU-1","t":1795392240000,"sm_active":0.5},
        {"device":"GPU-1","t":1795392180000,"sm_active":0.5}]})",
     "batch b5: samples[1].t: time goes backwards for device GPU-1"},
    {"allocation on an unknown device",
     R"({"version":1,"batch_id":"b6","samples":[{"device":"GPU-1","t":1795392180000,"sm_active":0.9}],
        "allocations":[{"device":"GPU-9","job":"j1","from":1795392000000}]})",
     "batch b6: allocations[0].device: unknown device GPU-9"},
    {"duplicate samples in one batch",
     R"({"version":1,"batch_id":"b7","samples":[{"device":"GPU-1","t":1795392180000,"sm_active":0.5},
        {"device":"GPU-1","t":1795392180000,"sm_active":0.6}]})",
     "batch b7: samples[1].t: duplicate sample for device GPU-1"},
    {"a sample another batch stored",
     R"({"version":1,"batch_id":"b8","samples":[{"device":"GPU-1","t":1795392180000,"sm_active":0.5},
        {"device":"GPU-1","t":1795392060000,"sm_active":0.1}]})",
     "batch b8: samples[1].t: time goes backwards"},
    {"a sample another batch stored, in order",
     R"({"version":1,"batch_id":"b9","samples":[{"device":"GPU-1","t":1795392060000,"sm_active":0.1},
        {"device":"GPU-1","t":1795392180000,"sm_active":0.5}]})",
     "batch b9: samples[0]: a sample of device GPU-1 at 2026-11-23T00:01:00Z is already stored"},
    {"an unknown job",
     R"({"version":1,"batch_id":"b10","allocations":[{"device":"GPU-1","job":"ghost","from":1795392000000}]})",
     "batch b10: allocations[0].job: unknown job ghost"},
    {"a sample from the future",
     R"({"version":1,"batch_id":"b11","samples":[{"device":"GPU-1","t":"2027-06-01T00:00:00Z","sm_active":0.5}]})",
     "batch b11: samples[0].t: 2027-06-01T00:00:00Z is in the future"},
};

TEST(IngestTest, ABadBatchIsRefusedWholeAndChangesNothing) {
  testing::TempLedger t;
  auto good = wire::ParseBatch(kGood);
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(t.ledger().Ingest(*good).ok());
  TimeRange window{testing::kBaseMs, testing::kBaseMs + kMsPerHour};
  auto before_stats = *t.ledger().Stats();
  auto before = *t.ledger().Usage(window, {Dimension::kJob});

  for (const BadBatch& bad : kBad) {
    auto parsed = wire::ParseBatch(bad.json);
    Status st = parsed.ok() ? t.ledger().Ingest(*parsed).status() : parsed.status();
    ASSERT_FALSE(st.ok()) << bad.name;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad.name;
    EXPECT_THAT(st.message(), HasSubstr(bad.error)) << bad.name;

    auto stats = *t.ledger().Stats();
    EXPECT_EQ(stats.batches, before_stats.batches) << bad.name;
    EXPECT_EQ(stats.samples, before_stats.samples) << bad.name;
    EXPECT_EQ(stats.devices, before_stats.devices) << bad.name;
    EXPECT_EQ(stats.jobs, before_stats.jobs) << bad.name;
    auto after = *t.ledger().Usage(window, {Dimension::kJob});
    ASSERT_EQ(after.rows.size(), before.rows.size()) << bad.name;
    for (size_t i = 0; i < after.rows.size(); ++i) {
      EXPECT_EQ(after.rows[i].gpu_ticks_ms, before.rows[i].gpu_ticks_ms) << bad.name;
      EXPECT_EQ(after.rows[i].cost, before.rows[i].cost) << bad.name;
    }
  }
}

TEST(IngestTest, ARetryIsAcknowledgedAndNotChargedTwice) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(3), {0, kForever}}})).ok());
  auto good = wire::ParseBatch(kGood);
  ASSERT_EQ(*t.ledger().Ingest(*good), store::ApplyOutcome::kApplied);
  TimeRange window{testing::kBaseMs, testing::kBaseMs + 2 * kMsPerMinute};
  Money once = t.ledger().Usage(window, {Dimension::kTeam})->total.total_cost();
  EXPECT_EQ(once, Money::FromMicros(100'000));  // 2 minutes at 3.00/h
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(*t.ledger().Ingest(*wire::ParseBatch(kGood)), store::ApplyOutcome::kDuplicate);
  }
  EXPECT_EQ(t.ledger().Usage(window, {Dimension::kTeam})->total.total_cost(), once);
}

// The row of capacity held by no job is the ledger's own: it carries a flag, and no team,
// however it is spelt, can pass for it or read it.
TEST(IngestTest, TimeHeldByNoJobIsToldApartByAFlagNotByItsName) {
  testing::TempLedger t;
  const char* two = R"({"version":1,"batch_id":"two",
    "devices":[{"uuid":"GPU-1","model":"A100","pool":"p","sample_interval_ms":60000},
               {"uuid":"GPU-2","model":"A100","pool":"p","sample_interval_ms":60000}],
    "jobs":[{"id":"j1","team":"nlp"}],
    "allocations":[{"device":"GPU-1","job":"j1","from":1795392000000}],
    "samples":[{"device":"GPU-1","t":1795392000000,"sm_active":0.5},
               {"device":"GPU-2","t":1795392000000,"sm_active":0.0},
               {"device":"GPU-1","t":1795392060000,"sm_active":0.5},
               {"device":"GPU-2","t":1795392060000,"sm_active":0.0}]})";
  ASSERT_EQ(*t.ledger().Ingest(*wire::ParseBatch(two)), store::ApplyOutcome::kApplied);
  TimeRange window{testing::kBaseMs, testing::kBaseMs + kMsPerMinute};
  for (auto by : {std::vector<Dimension>{Dimension::kTeam}, {Dimension::kJob, Dimension::kDevice},
                  {Dimension::kPool, Dimension::kUser}}) {
    auto r = t.ledger().Usage(window, by);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->rows.size(), 2u);
    int flagged = 0;
    for (const UsageRow& row : r->rows) {
      flagged += row.no_job;
      // GPU-2 held by no job, GPU-1 by j1 of nlp: the flag sits on GPU-2's minute alone.
      bool unheld_minute = row.gpu_ticks_ms[static_cast<size_t>(Bucket::kActive)] == 0 &&
                           row.gpu_ticks_ms[static_cast<size_t>(Bucket::kAllocatedIdle)] == 0;
      EXPECT_EQ(row.no_job, unheld_minute);
    }
    EXPECT_EQ(flagged, 1);
  }
  // Grouped by device attributes only, rows mix held and unheld time: none is flagged.
  auto by_pool = t.ledger().Usage(window, {Dimension::kPool});
  ASSERT_TRUE(by_pool.ok());
  for (const UsageRow& row : by_pool->rows) EXPECT_FALSE(row.no_job);
  // A viewer whose team is spelt like the ledger's key sees nothing of the unheld time.
  auto seen = t.ledger().ScopedUsage(window, {Dimension::kTeam}, Scope::Teams({std::string(kNoJob)}));
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(seen->rows.empty());
  // And a batch may not name a team that way at all.
  auto forged = wire::ParseBatch(R"js({"version":1,"batch_id":"forged","jobs":[{"id":"j2","team":"(no job)"}]})js");
  ASSERT_TRUE(forged.ok());
  EXPECT_THAT(t.ledger().Ingest(*forged).status().message(), HasSubstr("jobs[0].team"));
}

// Reports share the job list while no job changes (store/job_list_cache.h): a batch that
// moves a job to another team is in the next report, whatever the reports before it read.
TEST(IngestTest, AJobsNewTeamIsInTheNextReport) {
  testing::TempLedger t;
  ASSERT_EQ(*t.ledger().Ingest(*wire::ParseBatch(kGood)), store::ApplyOutcome::kApplied);
  TimeRange window{testing::kBaseMs, testing::kBaseMs + 2 * kMsPerMinute};
  auto teams = [&] {
    auto r = t.ledger().Usage(window, {Dimension::kTeam});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> keys;
    if (r.ok()) {
      for (const UsageRow& row : r->rows) keys.push_back(row.key.at(0));
    }
    return keys;
  };
  EXPECT_THAT(teams(), ::testing::ElementsAre("nlp"));
  EXPECT_THAT(teams(), ::testing::ElementsAre("nlp"));
  auto moved = wire::ParseBatch(R"({"version":1,"batch_id":"moved","jobs":[{"id":"j1","team":"vision"}]})");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_EQ(*t.ledger().Ingest(*moved), store::ApplyOutcome::kApplied);
  EXPECT_THAT(teams(), ::testing::ElementsAre("vision"));
}

}  // namespace
}  // namespace gpuledger::ledger
