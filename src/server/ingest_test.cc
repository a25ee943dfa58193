#include "server/ingest.h"

#include <gtest/gtest.h>
#include <zlib.h>

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
      [&](const Batch& b) -> Result<store::ApplyOutcome> {
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

}  // namespace
}  // namespace gpuledger::server
