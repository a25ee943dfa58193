#include "server/ingest.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <thread>

#include "ledger/ingest_plan.h"
#include "server/metrics.h"
#include "server/scrape.h"
#include "server/test_support.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

const int64_t kNow = 1795435200000;  // 2026-11-23T12:00:00Z

TEST(IngestTest, DecodesPlainAndGzipBodiesWithinLimits) {
  Batch b = testing::MakeBatch("b1", "n1", 2, kNow - kMsPerHour, 10, "nlp");
  std::string json = wire::WriteBatch(b);
  IngestLimits limits;
  auto plain = DecodeNativeBatch(json, limits, kNow);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->samples.size(), 20u);

  uLongf len = compressBound(static_cast<uLong>(json.size()));
  std::string z(len, '\0');
  ASSERT_EQ(compress(reinterpret_cast<Bytef*>(z.data()), &len, reinterpret_cast<const Bytef*>(json.data()),
                     static_cast<uLong>(json.size())),
            Z_OK);
  z.resize(len);
  auto inflated = Gunzip(z, 1 << 20);
  ASSERT_TRUE(inflated.ok());
  EXPECT_EQ(*inflated, json);
  EXPECT_EQ(Gunzip(z, 100).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Gunzip(z.substr(0, z.size() / 2), 1 << 20).status().code(), StatusCode::kInvalidArgument);

  limits.max_samples_per_batch = 19;
  auto over = DecodeNativeBatch(json, limits, kNow);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  limits.max_samples_per_batch = 20;
  limits.max_sample_age_ms = 30 * kMsPerMinute;
  auto old = DecodeNativeBatch(json, limits, kNow);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("samples[0].t"), std::string::npos) << old.status().ToString();
}

TEST(IngestTest, SplitsScrapeUrls) {
  auto a = SplitHttpUrl("http://127.0.0.1:9400/metrics");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "http://127.0.0.1:9400");
  EXPECT_EQ(a->second, "/metrics");
  auto b = SplitHttpUrl("http://host:1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->second, "/metrics");
  EXPECT_FALSE(SplitHttpUrl("https://host/metrics").ok());
  EXPECT_FALSE(SplitHttpUrl("http:///x").ok());
}

// Holds become allocations; a state change is kept only when its batch was applied.
TEST(IngestTest, HoldsOpenAndCloseAllocationsOnlyWhenApplied) {
  std::vector<Batch> applied;
  bool fail_next = false;
  MetricsRegistry metrics;
  DcgmIngestOptions o;
  o.hold_timeout_ms = 2 * kMsPerMinute;
  auto ing = DcgmIngestor::Create(
      o,
      [&](const Batch& b, const BatchSender&) -> Result<store::ApplyOutcome> {
        if (fail_next) {
          fail_next = false;
          return InvalidArgument("refused");
        }
        applied.push_back(b);
        return store::ApplyOutcome::kApplied;
      },
      &metrics);
  ASSERT_TRUE(ing.ok());
  auto mapped = [&](int64_t t, bool pod) {
    prometheus::DcgmBatch m;
    Device d;
    d.uuid = "GPU-1";
    m.devices.push_back(d);
    Sample s;
    s.device_uuid = "GPU-1";
    s.t_ms = t;
    s.gpu_util = 0.5;
    m.samples.push_back(s);
    m.extras.emplace_back();
    if (pod) {
      Job j;
      j.id = "k8s/ns/p";
      m.jobs.push_back(j);
      m.holds.push_back({"GPU-1", "k8s/ns/p", t});
    }
    return m;
  };
  int64_t t = kNow - kMsPerHour;
  ASSERT_TRUE((*ing)->Apply(mapped(t, true), "r1", 1, "remote_write").ok());
  ASSERT_EQ(applied.back().allocations.size(), 1u);
  EXPECT_FALSE(applied.back().allocations[0].to_ms);
  fail_next = true;
  EXPECT_FALSE((*ing)->Apply(mapped(t + kMsPerMinute, true), "r2", 2, "remote_write").ok());
  // The refused request changed nothing: the same instant is accepted again.
  auto r = (*ing)->Apply(mapped(t + kMsPerMinute, true), "r2", 2, "remote_write");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples, 1u);
  EXPECT_EQ(applied.back().allocations.size(), 0u);
  r = (*ing)->Apply(mapped(t + 2 * kMsPerMinute, false), "r3", 3, "remote_write");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allocations_closed, 0u);
  r = (*ing)->Apply(mapped(t + 3 * kMsPerMinute, false), "r4", 4, "remote_write");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->allocations_closed, 1u);
  ASSERT_TRUE(applied.back().allocations[0].to_ms);
  EXPECT_EQ(*applied.back().allocations[0].to_ms, t + kMsPerMinute);
  // A point at an instant already applied is dropped and counted.
  r = (*ing)->Apply(mapped(t + 3 * kMsPerMinute, false), "r5", 5, "remote_write");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples, 0u);
  EXPECT_EQ(metrics.Value(MetricId::kDroppedSamples, {"remote_write", "already_stored"}), 1);

  // A device gone silent: the sweep closes its holds once the timeout has passed.
  ASSERT_TRUE((*ing)->Apply(mapped(t + 10 * kMsPerMinute, true), "r6", 6, "remote_write").ok());
  auto swept = (*ing)->Sweep(t + 11 * kMsPerMinute);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 0u);
  swept = (*ing)->Sweep(t + 12 * kMsPerMinute);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 1u);
  // Seen once: the allocation lasts a millisecond past its only sighting.
  EXPECT_EQ(*applied.back().allocations[0].to_ms, t + 10 * kMsPerMinute + 1);
}

// A GroupCommitter over a real store whose next group can be held at its beginning
// (so that requests queue up behind it and form one group) and whose commits can be
// made to fail.
class TestCommitter {
 public:
  explicit TestCommitter(store::Store& store)
      : store_(store),
        committer_([this] { return Begin(); },
                   [](const Batch& b) { return ValidateBatch(b, kNow); }) {}

  GroupCommitter& committer() { return committer_; }
  // The next group to begin waits in its Begin until Release().
  void HoldNextGroup() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  // Waits until the held group is waiting, then until `n` requests queued behind it.
  void WaitUntilQueued(size_t n) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return held_; });
    }
    while (committer_.queued() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void Release() {
    std::lock_guard lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  void FailNextCommits(int n) {
    std::lock_guard lock(mu_);
    fail_commits_ = n;
  }
  int commits() {
    std::lock_guard lock(mu_);
    return commits_;
  }

 private:
  class Group final : public ledger::IngestGroup {
   public:
    Group(TestCommitter& t, std::unique_ptr<store::BatchGroup> inner)
        : t_(t), inner_(std::move(inner)) {}
    using ledger::IngestGroup::Apply;
    Result<store::ApplyOutcome> Apply(const Batch& batch, const BatchSender& sender) override {
      GPULEDGER_ASSIGN_OR_RETURN(store::IngestPlan plan, ledger::PlanIngest(batch, sender));
      return inner_->Apply(plan);
    }
    Status Commit() override {
      std::lock_guard lock(t_.mu_);
      if (t_.fail_commits_ > 0) {
        --t_.fail_commits_;
        return Internal("commit failed (as the test asked)");  // the inner group rolls back
      }
      ++t_.commits_;
      return inner_->Commit();
    }

   private:
    TestCommitter& t_;
    std::unique_ptr<store::BatchGroup> inner_;
  };

  Result<std::unique_ptr<ledger::IngestGroup>> Begin() {
    {
      std::unique_lock lock(mu_);
      if (hold_) {
        held_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !hold_; });
        held_ = false;
      }
    }
    GPULEDGER_ASSIGN_OR_RETURN(auto inner, store_.BeginBatchGroup());
    return std::unique_ptr<ledger::IngestGroup>(new Group(*this, std::move(inner)));
  }

  store::Store& store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false, held_ = false;    // GUARDED_BY(mu_)
  int fail_commits_ = 0, commits_ = 0;  // GUARDED_BY(mu_)
  GroupCommitter committer_;
};

struct StoreFixture {
  StoreFixture() {
    auto s = store::OpenSqliteStore(dir.File("ledger.db"), {.synchronous_full = true});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store = std::move(*s);
  }
  testing::TempDir dir;
  std::unique_ptr<store::Store> store;
};

// Requests that arrive while a group is being applied form the next group: one commit
// for all of them. Each is answered with its own outcome: a bad batch with its own
// error, a batch id seen earlier in the same group as a duplicate (or, with other
// content, refused), the others applied.
TEST(GroupCommitTest, RequestsWaitingTogetherShareOneCommitAndFailAlone) {
  StoreFixture f;
  ASSERT_TRUE(f.store);
  TestCommitter t(*f.store);
  int64_t t0 = kNow - 2 * kMsPerHour;
  Batch first = testing::MakeBatch("first", "n0", 1, t0, 3, "a");
  Batch good1 = testing::MakeBatch("good1", "n1", 2, t0, 5, "a");
  good1.content_digest = 11;
  Batch bad = testing::MakeBatch("bad", "n2", 1, t0, 5, "a");
  bad.samples.back().device_uuid = "GPU-unknown";  // refused by the store, not by validation
  bad.samples.back().t_ms += kMsPerHour;
  Batch dup = good1;
  Batch good2 = testing::MakeBatch("good2", "n3", 1, t0, 5, "b");
  Batch conflict = testing::MakeBatch("good1", "n4", 1, t0, 5, "b");
  conflict.content_digest = 12;
  const std::vector<const Batch*> queued = {&good1, &bad, &dup, &good2, &conflict};

  t.HoldNextGroup();
  std::vector<std::optional<Result<store::ApplyOutcome>>> out(1 + queued.size());
  std::vector<std::thread> threads;
  threads.emplace_back([&] { out[0] = t.committer().Apply(first); });
  for (size_t i = 0; i < queued.size(); ++i) {
    t.WaitUntilQueued(i);  // in this order
    threads.emplace_back([&, i] { out[i + 1] = t.committer().Apply(*queued[i]); });
  }
  t.WaitUntilQueued(queued.size());
  t.Release();
  for (auto& th : threads) th.join();

  ASSERT_TRUE(out[0]->ok());
  EXPECT_EQ(**out[0], store::ApplyOutcome::kApplied);
  ASSERT_TRUE(out[1]->ok()) << out[1]->status().ToString();
  EXPECT_EQ(**out[1], store::ApplyOutcome::kApplied);
  ASSERT_FALSE(out[2]->ok());
  EXPECT_EQ(out[2]->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      out[2]->status().message().find("batch bad: samples[4].device: unknown device GPU-unknown"),
      std::string::npos)
      << out[2]->status().ToString();
  ASSERT_TRUE(out[3]->ok()) << out[3]->status().ToString();
  EXPECT_EQ(**out[3], store::ApplyOutcome::kDuplicate);
  ASSERT_TRUE(out[4]->ok()) << out[4]->status().ToString();
  EXPECT_EQ(**out[4], store::ApplyOutcome::kApplied);
  ASSERT_FALSE(out[5]->ok());
  EXPECT_EQ(out[5]->status().code(), StatusCode::kAlreadyExists);

  GroupCommitter::Stats stats = t.committer().stats();
  EXPECT_EQ(stats.groups, 2u);
  EXPECT_EQ(stats.tickets, 6u);
  EXPECT_EQ(stats.largest_group, 5u);
  EXPECT_EQ(t.commits(), 2);
  auto st = f.store->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->batches, 3);  // first, good1, good2
  EXPECT_EQ(st->samples, 3 + 10 + 5);
  // A batch that fails validation is refused before it waits for any group.
  Batch future = testing::MakeBatch("future", "n5", 1, kNow + kMsPerDay, 1, "a");
  EXPECT_EQ(t.committer().Apply(future).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.committer().stats().tickets, 6u);
}

// A commit that fails undoes the whole group: every request of it gets the error, even
// one whose batch had been applied inside the group, and nothing of it is stored; sent
// again, the batches are applied (not taken for duplicates).
TEST(GroupCommitTest, AFailedCommitFailsEveryRequestOfTheGroup) {
  StoreFixture f;
  ASSERT_TRUE(f.store);
  TestCommitter t(*f.store);
  int64_t t0 = kNow - 2 * kMsPerHour;
  Batch first = testing::MakeBatch("first", "n0", 1, t0, 3, "a");
  Batch a = testing::MakeBatch("a", "n1", 1, t0, 3, "a");
  Batch a_again = a;
  t.HoldNextGroup();
  std::optional<Result<store::ApplyOutcome>> r0, r1, r2;
  std::thread th0([&] { r0 = t.committer().Apply(first); });
  t.WaitUntilQueued(0);
  std::thread th1([&] { r1 = t.committer().Apply(a); });
  t.WaitUntilQueued(1);
  std::thread th2([&] { r2 = t.committer().Apply(a_again); });
  t.WaitUntilQueued(2);
  t.FailNextCommits(2);  // the held group's and the next one's
  t.Release();
  th0.join();
  th1.join();
  th2.join();
  for (auto* r : {&r0, &r1, &r2}) {
    ASSERT_FALSE((*r)->ok());
    EXPECT_EQ((*r)->status().code(), StatusCode::kInternal);
  }
  EXPECT_EQ(f.store->Stats()->batches, 0);
  EXPECT_EQ(f.store->Stats()->samples, 0);
  EXPECT_EQ(*t.committer().Apply(a), store::ApplyOutcome::kApplied);
  EXPECT_EQ(*t.committer().Apply(a_again), store::ApplyOutcome::kDuplicate);
  EXPECT_EQ(f.store->Stats()->samples, 3);
}

// Remote-write requests in one group: each request's batch is built on the state the
// requests before it in the group left (an instant the one before applied is dropped as
// already stored), a request refused in the group leaves that state alone, and a group
// whose commit fails leaves the ingestor's state as it was.
TEST(GroupCommitTest, RemoteWriteRequestsInOneGroupBuildOnEachOther) {
  StoreFixture f;
  ASSERT_TRUE(f.store);
  TestCommitter t(*f.store);
  MetricsRegistry metrics;
  auto ing = DcgmIngestor::Create({}, t.committer(), &metrics);
  ASSERT_TRUE(ing.ok()) << ing.status().ToString();
  int64_t t0 = kNow - kMsPerHour;
  auto mapped = [&](std::vector<int64_t> instants) {
    prometheus::DcgmBatch m;
    Device d;
    d.uuid = "GPU-1";
    m.devices.push_back(d);
    for (int64_t at : instants) {
      Sample s;
      s.device_uuid = "GPU-1";
      s.t_ms = at;
      s.gpu_util = 0.5;
      m.samples.push_back(s);
      m.extras.emplace_back();
    }
    return m;
  };
  // An instant another path stored already: the request carrying it is refused.
  ASSERT_TRUE((*ing)->Apply(mapped({t0}), "r0", 0, "remote_write").ok());
  Batch other;
  other.batch_id = "native";
  Sample taken;
  taken.device_uuid = "GPU-1";
  taken.t_ms = t0 + 3 * kMsPerMinute;
  taken.gpu_util = 0.5;
  other.samples.push_back(taken);
  ASSERT_TRUE(t.committer().Apply(other).ok());

  Batch hold = testing::MakeBatch("hold", "n0", 1, t0, 1, "a");
  t.HoldNextGroup();
  // A fixed array, not a growing vector: GCC 12 at -O3 reports a false out-of-bounds
  // std::thread in a vector's growth here (-Warray-bounds), which broke the release build.
  std::array<std::thread, 5> threads;
  std::optional<Result<DcgmIngestResult>> r1, r2, r3, r4;
  threads[0] = std::thread([&] { (void)t.committer().Apply(hold); });
  t.WaitUntilQueued(0);
  threads[1] = std::thread([&] { r1 = (*ing)->Apply(mapped({t0 + kMsPerMinute}), "r1", 1, "remote_write"); });
  t.WaitUntilQueued(1);
  threads[2] = std::thread([&] {
    r2 = (*ing)->Apply(mapped({t0 + kMsPerMinute, t0 + 2 * kMsPerMinute}), "r2", 2, "remote_write");
  });
  t.WaitUntilQueued(2);
  threads[3] = std::thread([&] { r3 = (*ing)->Apply(mapped({t0 + 3 * kMsPerMinute}), "r3", 3, "remote_write"); });
  t.WaitUntilQueued(3);
  threads[4] = std::thread([&] { r4 = (*ing)->Apply(mapped({t0 + 4 * kMsPerMinute}), "r4", 4, "remote_write"); });
  t.WaitUntilQueued(4);
  t.Release();
  for (auto& th : threads) th.join();
  ASSERT_TRUE(r1->ok()) << r1->status().ToString();
  EXPECT_EQ((*r1)->samples, 1u);
  ASSERT_TRUE(r2->ok()) << r2->status().ToString();
  EXPECT_EQ((*r2)->samples, 1u) << "the instant r1 applied in the same group is dropped";
  EXPECT_FALSE(r3->ok());
  ASSERT_TRUE(r4->ok()) << r4->status().ToString();
  EXPECT_EQ((*r4)->samples, 1u);
  EXPECT_EQ(t.committer().stats().largest_group, 4u);
  EXPECT_EQ(metrics.Value(MetricId::kDroppedSamples, {"remote_write", "already_stored"}), 1);
  EXPECT_EQ(f.store->Stats()->samples, 6);  // GPU-1 at t0, +1, +2, +3 (native), +4; hold's one

  // A failed commit: nothing applied and the state unchanged, so the retry applies all.
  t.FailNextCommits(1);
  EXPECT_FALSE((*ing)->Apply(mapped({t0 + 5 * kMsPerMinute}), "r5", 5, "remote_write").ok());
  auto again = (*ing)->Apply(mapped({t0 + 5 * kMsPerMinute}), "r5", 5, "remote_write");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->applied);
  EXPECT_EQ(again->samples, 1u);
  EXPECT_EQ(f.store->Stats()->samples, 7);
}

}  // namespace
}  // namespace gpuledger::server
