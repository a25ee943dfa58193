#include "demo/demo_fleet.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "ledger/ledger.h"
#include "ledger/rightsizing.h"
#include "store/batch_ids.h"
#include "store/store.h"
#include "wire/batch.h"

namespace gpuledger::demo {
namespace {

constexpr int64_t kStart = 1'795'392'000'000;  // Monday 2026-11-23T00:00:00Z

DemoOptions Small() {
  DemoOptions o;
  o.seed = 7;
  o.start_ms = kStart;
  o.duration_ms = 5 * kMsPerDay;
  o.sample_interval_ms = 5 * kMsPerMinute;
  return o;
}

TEST(DemoFleetTest, IsDeterministicForASeed) {
  DemoFleet a(Small()), b(Small());
  auto ba = a.Advance(kStart + 6 * kMsPerHour), bb = b.Advance(kStart + 6 * kMsPerHour);
  ASSERT_EQ(ba.size(), bb.size());
  for (size_t i = 0; i < ba.size(); ++i) EXPECT_EQ(wire::WriteBatch(ba[i]), wire::WriteBatch(bb[i]));
  DemoOptions other = Small();
  other.seed = 8;
  DemoFleet c(other);
  EXPECT_NE(wire::WriteBatch(c.Advance(kStart + kMsPerHour)[0]), wire::WriteBatch(ba[0]));
}

TEST(DemoFleetTest, DefaultStartIsTheLastCompleteIsoWeek) {
  // Wednesday 2026-12-02 12:00 -> Monday 2026-11-23 (week 48).
  int64_t wed = ParseTime("2026-12-02T12:00:00Z").value();
  EXPECT_EQ(FormatTime(DefaultStart(wed, 7 * kMsPerDay)), "2026-11-23T00:00:00Z");
  // On Monday 00:00 itself the week just ended is complete.
  int64_t mon = ParseTime("2026-11-30T00:00:00Z").value();
  EXPECT_EQ(FormatTime(DefaultStart(mon, 7 * kMsPerDay)), "2026-11-23T00:00:00Z");
  EXPECT_EQ(FormatTime(DefaultStart(wed, 10 * kMsPerDay)), "2026-11-16T00:00:00Z");
}

TEST(DemoFleetTest, HasThePromisedShape) {
  DemoFleet f(Small());
  int gpus = 0, slices = 0;
  for (const auto& d : f.devices()) (d.is_mig() ? slices : gpus)++;
  EXPECT_EQ(gpus, 344);  // 32 nodes, and the advice cases' 11 (ScheduleAdviceCases)
  EXPECT_EQ(slices, 32);
  std::map<JobKind, int> kinds;
  for (const auto& j : f.jobs()) kinds[j.job.kind]++;
  EXPECT_GT(kinds[JobKind::kTraining], 20);
  EXPECT_GT(kinds[JobKind::kServing], 5);
  EXPECT_GT(kinds[JobKind::kNotebook], 20);
  EXPECT_GT(kinds[JobKind::kBatch], 10);
}

TEST(DemoFleetTest, FeedsTheLedgerAndShowsEveryKindOfWaste) {
  auto path = std::filesystem::temp_directory_path() / ("gpuledger-demo-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  ManualClock clock(kStart + 5 * kMsPerDay);
  DemoFleet fleet(Small());
  {
    auto store = store::OpenSqliteStore(path.string());
    ASSERT_TRUE(store.ok());
    ledger::Ledger ledger(std::move(*store), clock);
    ASSERT_TRUE(ledger.SetPrices(fleet.Prices()).ok());
    for (const Batch& b : fleet.Advance(fleet.end_ms())) {
      auto r = ledger.Ingest(b);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    TimeRange window{kStart, kStart + 5 * kMsPerDay};
    auto r = ledger.Usage(window, {ledger::Dimension::kPool});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto& t = r->total;
    EXPECT_NEAR(t.total_gpu_hours(), 344.0 * 24 * 5, 1e-6);
    for (Bucket b : kAllBuckets) EXPECT_GT(t.gpu_hours(b), 0) << BucketName(b);
    EXPECT_GT(t.effective_utilization(), 0.25);
    EXPECT_LT(t.effective_utilization(), 0.8);
    // The failed GPU: 20 hours down.
    EXPECT_NEAR(t.gpu_hours(Bucket::kUnavailable), 20.0, 0.2);
    auto waste = ledger.TopWaste(window, 5);
    ASSERT_TRUE(waste.ok());
    EXPECT_EQ(waste->size(), 5u);
    // The advice finds each of the five cases, and a newcomer sees training advice first.
    auto recs = ledger::Recommend(ledger, window);
    ASSERT_TRUE(recs.ok()) << recs.status().ToString();
    std::map<std::string, const ledger::Recommendation*> found;
    for (const auto& rec : *recs) found[std::string(ledger::RecommendationKindName(rec.kind)) + ":" + rec.job_id] = &rec;
    for (const char* want : {"fewer-gpus:lr-sweep-2", "input-bound:chat-ft-7b", "checkpoint-bound:pretrain-13b",
                             "serving-headroom:embed-lite-1", "release-held:preproc-shards"}) {
      EXPECT_TRUE(found.contains(want)) << want;
    }
    if (found.contains("fewer-gpus:lr-sweep-2")) {
      EXPECT_EQ(found["fewer-gpus:lr-sweep-2"]->action, "use 8 GPUs instead of 64 per trial of lr-sweep");
    }
    EXPECT_FALSE(found.contains("fewer-gpus:lr-sweep-1"));  // the pilot is busy
    auto groups = ledger::GroupAdvice(*recs);
    ASSERT_FALSE(groups.empty());
    EXPECT_EQ(groups.front().kind, ledger::RecommendationKind::kFewerGpus);
    EXPECT_EQ(groups.front().items.front()->job_kind, JobKind::kTraining);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}

// What an agent sends, it knows: a job still running when its batch was sent has no
// end, and a notebook is named after the user who opened it.
TEST(DemoFleetTest, BatchesSayOnlyWhatIsKnownByThen) {
  DemoFleet f(Small());
  int notebooks = 0, running = 0;
  std::set<std::string> reported;  // jobs with engine scrapes or progress reports
  for (int64_t h = kStart + kMsPerHour; h <= f.end_ms(); h += kMsPerHour) {
    for (const Batch& b : f.Advance(h)) {
      for (const auto& v : b.serving) reported.insert(v.job_id);
      for (const auto& p : b.progress) reported.insert(p.job_id);
      for (const Job& j : b.jobs) {
        if (j.end_ms) {
          EXPECT_LT(*j.end_ms, h) << b.batch_id << " " << j.id;
        }
        running += j.end_ms ? 0 : 1;
        if (j.kind == JobKind::kNotebook) {
          ++notebooks;
          EXPECT_EQ(j.id.rfind("nb-" + j.user + "-", 0), 0u) << j.id << " belongs to " << j.user;
        }
      }
    }
  }
  EXPECT_GT(notebooks, 20);
  EXPECT_GT(running, 0);
  // Every serving job's engine is scraped and every training job reports its progress,
  // whichever of its node's GPUs comes first.
  for (const auto& j : f.jobs()) {
    bool reports = j.job.kind == JobKind::kServing || j.job.kind == JobKind::kTraining;
    if (reports && j.to_ms - j.from_ms > 20 * kMsPerMinute && j.from_ms < f.end_ms()) {
      EXPECT_TRUE(reported.count(j.job.id)) << j.job.id << " sent no engine or progress figures";
    }
  }
}

// The live feed's batches cover one sample interval each, so the fleet never reads as
// unmonitored between two sends; hour-long batches leave it unmonitored for most of each
// hour (the "Unmonitored 288 / Active 0").
TEST(DemoFleetTest, LiveBatchesKeepTheFleetMonitored) {
  auto unmonitored_at = [](int64_t span_ms, int64_t sent_until, int64_t now) {
    auto path = std::filesystem::temp_directory_path() /
                ("gpuledger-demo-live-" + std::to_string(::getpid()) + "-" + std::to_string(span_ms) + ".db");
    std::filesystem::remove(path);
    ManualClock clock(now);
    DemoFleet fleet(Small());
    int unmonitored = -1;
    {
      auto store = store::OpenSqliteStore(path.string());
      EXPECT_TRUE(store.ok());
      ledger::Ledger ledger(std::move(*store), clock);
      for (const Batch& b : fleet.Advance(sent_until, span_ms)) EXPECT_TRUE(ledger.Ingest(b).ok());
      auto now_fleet = ledger.FleetNow(now);
      EXPECT_TRUE(now_fleet.ok());
      unmonitored = 0;
      for (const auto& d : *now_fleet) unmonitored += d.state == ledger::DeviceState::kUnmonitored;
    }
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
    return unmonitored;
  };
  // 95 minutes in, with what was sent by then (5-minute samples: a 15-minute limit).
  const int64_t now = kStart + 95 * kMsPerMinute;
  EXPECT_EQ(unmonitored_at(5 * kMsPerMinute, now, now), 0);
  EXPECT_EQ(unmonitored_at(kMsPerHour, now, now), 376);
}

// Agents that sample less often than training jobs report progress (every ten minutes)
// still report a number of tokens: the mean activity of a step with no sample in it is
// taken on a ten-minute grid, never 0/0.
TEST(DemoFleetTest, ProgressIsANumberWhateverTheSampleInterval) {
  DemoOptions o = Small();
  o.sample_interval_ms = kMsPerHour;
  DemoFleet f(o);
  int reports = 0;
  for (const Batch& b : f.Advance(kStart + 3 * kMsPerHour)) {
    for (const Progress& p : b.progress) {
      ASSERT_TRUE(p.tokens.has_value());
      EXPECT_TRUE(std::isfinite(*p.tokens)) << p.job_id << " at " << FormatTime(p.t_ms);
      reports += *p.tokens > 0;
    }
  }
  EXPECT_GT(reports, 0);
}

// A larger fleet (DemoOptions::gpus) is the 43-node cluster copied: the first copy is the
// fleet as it always was, every other is drawn with the next seed under names of its own,
// so that nothing two copies send collides in the store, and the whole ingests cleanly.
// The demo's nodes number their batches as agents do (<node>-<run>-<n>, docs/agent.md),
// one stream per node counting 1, 2, 3, ... whatever span each call sends, so that the
// store folds a node's older ids into one run (store/batch_ids.h).
TEST(DemoFleetTest, EachNodesBatchesAreOneStreamNumberedFromOne) {
  DemoFleet fleet(Small());
  std::vector<Batch> batches = fleet.Advance(kStart + kMsPerHour);  // one hour-long span
  for (const Batch& b : fleet.Advance(kStart + kMsPerHour + 3 * Small().sample_interval_ms,
                                      Small().sample_interval_ms)) {  // then three short ones
    batches.push_back(b);
  }
  std::map<std::string, std::vector<int64_t>> seqs_of;  // stream -> its sequences, in order
  std::set<std::string> nodes;
  for (const Batch& b : batches) {
    store::BatchKey key = store::KeyOfBatchId(b.batch_id);
    ASSERT_GE(key.seq, 1) << b.batch_id;
    EXPECT_TRUE(key.stream.starts_with(b.source + "-")) << b.batch_id;
    seqs_of[key.stream].push_back(key.seq);
    nodes.insert(b.source);
  }
  EXPECT_EQ(seqs_of.size(), nodes.size());
  for (const auto& [stream, seqs] : seqs_of) EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 3, 4})) << stream;
}

// Sent in spans shorter than a minute, as the live feed sends them, the fleet carries the
// same serving scrapes and training progress as in hour-long spans: every minute's
// scrape once (spans of 10 s had carried none).
TEST(DemoFleetTest, ShortSpansCarryTheSameScrapesAndProgressAsAnHourLongOne) {
  DemoOptions o = Small();
  o.sample_interval_ms = 10'000;
  DemoFleet hourly(o), live(o);
  std::vector<Batch> one = hourly.Advance(kStart + kMsPerHour);
  std::vector<Batch> many = live.Advance(kStart + kMsPerHour, 10'000);
  auto scrapes = [](const std::vector<Batch>& batches) {
    std::multiset<std::pair<std::string, int64_t>> out;
    for (const Batch& b : batches) {
      for (const ServingSnapshot& v : b.serving) out.insert({v.job_id, v.t_ms});
      for (const Progress& p : b.progress) out.insert({"progress " + p.job_id, p.t_ms});
    }
    return out;
  };
  auto expected = scrapes(one);
  EXPECT_GT(expected.size(), 60u);  // some deployment scraped each minute of the hour
  EXPECT_EQ(scrapes(many), expected);
}

TEST(DemoFleetTest, CopiesTheClusterUnderNewNamesForALargerFleet) {
  DemoOptions big = Small();
  big.gpus = 700;  // 344 GPUs a cluster: three copies
  big.duration_ms = kMsPerDay;
  DemoOptions single = big;
  single.gpus = 0;
  DemoFleet one(single), three(big);
  EXPECT_EQ(one.clusters(), 1);
  EXPECT_EQ(three.clusters(), 3);
  int gpus = 0;
  std::set<std::string> uuids, nodes, job_ids;
  for (const auto& d : three.devices()) {
    gpus += d.is_mig() ? 0 : 1;
    uuids.insert(d.uuid);
    nodes.insert(d.node);
  }
  EXPECT_EQ(gpus, 3 * 344);
  EXPECT_EQ(uuids.size(), three.devices().size());
  EXPECT_EQ(nodes.size(), 3u * 43);
  EXPECT_TRUE(nodes.contains("trn-01") && nodes.contains("c2-trn-01") && nodes.contains("c3-dev-06"));
  for (const auto& j : three.jobs()) EXPECT_TRUE(job_ids.insert(j.job.id).second) << j.job.id;
  EXPECT_TRUE(job_ids.contains("104233") && job_ids.contains("c3-104233"));
  // The first copy is the one-cluster fleet, device for device and job for job.
  for (size_t i = 0; i < one.devices().size(); ++i) EXPECT_EQ(three.devices()[i].uuid, one.devices()[i].uuid);
  ASSERT_GE(three.jobs().size(), one.jobs().size());
  for (size_t i = 0; i < one.jobs().size(); ++i) EXPECT_EQ(three.jobs()[i].job.id, one.jobs()[i].job.id);
  std::vector<Batch> first = one.Advance(kStart + 2 * kMsPerHour);
  std::vector<Batch> all = three.Advance(kStart + 2 * kMsPerHour);
  ASSERT_EQ(all.size(), 3 * first.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(wire::WriteBatch(all[i]), wire::WriteBatch(first[i]));
  // A copy's serving deployments scrape the same models as the first's, under its own job ids.
  bool scraped = false;
  for (const Batch& b : all) {
    for (const auto& v : b.serving) {
      if (v.job_id.starts_with("c2-")) {
        EXPECT_FALSE(v.model.starts_with("c2-")) << v.model;
        scraped = true;
      }
    }
  }
  EXPECT_TRUE(scraped);
  // Ingested together, every batch is applied (no id, uuid or sample collides), and the
  // ledger knows every device of the three copies.
  auto path = std::filesystem::temp_directory_path() / ("gpuledger-demo-copies-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  {
    ManualClock clock(kStart + 2 * kMsPerHour);
    auto store = store::OpenSqliteStore(path.string());
    ASSERT_TRUE(store.ok());
    ledger::Ledger ledger(std::move(*store), clock);
    std::set<std::string> batch_ids;
    for (const Batch& b : all) {
      EXPECT_TRUE(batch_ids.insert(b.batch_id).second) << b.batch_id;
      auto r = ledger.Ingest(b);
      ASSERT_TRUE(r.ok()) << b.batch_id << ": " << r.status().ToString();
      EXPECT_EQ(*r, store::ApplyOutcome::kApplied) << b.batch_id;
    }
    auto now = ledger.FleetNow(kStart + 2 * kMsPerHour);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->size(), three.devices().size());
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}

}  // namespace
}  // namespace gpuledger::demo
