#include "agent/push.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "agent/test_server.h"
#include "agent/test_util.h"
#include "wire/batch.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestLedgerServer;

class ScriptedSink final : public BatchSink {
 public:
  Status Send(std::string_view document) override {
    sent.emplace_back(document);
    if (script.empty()) return Status::Ok();
    Status st = script.front();
    script.pop_front();
    return st;
  }
  std::deque<Status> script;
  std::vector<std::string> sent;
};

TEST(PusherTest, SendsInOrderAndBacksOffExponentially) {
  TempDir dir;
  auto spool = Spool::Open(dir.path(), 1 << 20);
  ASSERT_TRUE(spool.ok());
  for (const char* d : {"b1", "b2", "b3"}) ASSERT_TRUE((*spool)->Append(d).ok());
  ManualClock clock(1'000'000);
  ScriptedSink sink;
  sink.script = {Status::Ok(), Unavailable("refused"), Unavailable("refused"), Unavailable("refused")};
  Pusher p(**spool, sink, clock, {1'000, 3'000, 2.0});

  EXPECT_EQ(p.Drain(), 1);  // b1 taken, b2 fails
  EXPECT_EQ(p.current_backoff_ms(), 1'000);
  EXPECT_EQ(p.Drain(), 0);  // backing off: not even tried
  EXPECT_EQ(sink.sent.size(), 2u);
  clock.Advance(1'000);
  EXPECT_EQ(p.Drain(), 0);
  EXPECT_EQ(p.current_backoff_ms(), 2'000);
  clock.Advance(2'000);
  EXPECT_EQ(p.Drain(), 0);
  EXPECT_EQ(p.current_backoff_ms(), 3'000);  // capped
  clock.Advance(3'000);
  EXPECT_EQ(p.Drain(), 2);
  EXPECT_EQ(p.current_backoff_ms(), 0);
  EXPECT_EQ(sink.sent, (std::vector<std::string>{"b1", "b2", "b2", "b2", "b2", "b3"}));
  EXPECT_EQ((*spool)->size(), 0u);
  EXPECT_EQ(p.stats().sent, 3);
  EXPECT_EQ(p.stats().failures, 3);
}

TEST(PusherTest, ARefusedBatchDoesNotBlockTheOthers) {
  TempDir dir;
  auto spool = Spool::Open(dir.path(), 1 << 20);
  ASSERT_TRUE(spool.ok());
  for (const char* d : {"bad", "good"}) ASSERT_TRUE((*spool)->Append(d).ok());
  ManualClock clock(0);
  ScriptedSink sink;
  sink.script = {InvalidArgument("HTTP 400: samples[0].sm_active: must be within 0..1")};
  Pusher p(**spool, sink, clock);
  EXPECT_EQ(p.Drain(), 1);
  EXPECT_EQ(p.stats().rejected, 1);
  EXPECT_EQ((*spool)->size(), 0u);
  // A refused token is retried, not dropped: an operator fixes it, the data waits.
  ASSERT_TRUE((*spool)->Append("later").ok());
  sink.script = {Status(StatusCode::kUnauthenticated, "HTTP 401")};
  EXPECT_EQ(p.Drain(), 0);
  EXPECT_EQ((*spool)->size(), 1u);
}

std::string OneBatch(const std::string& id, int64_t t_ms) {
  Batch b;
  b.batch_id = id;
  b.source = "n1";
  Device d;
  d.uuid = "GPU-push-test";
  d.node = "n1";
  d.sample_interval_ms = 1000;
  b.devices.push_back(d);
  Sample s;
  s.device_uuid = d.uuid;
  s.t_ms = t_ms;
  s.sm_active = 0.5;
  b.samples.push_back(s);
  return wire::WriteBatch(b);
}

TEST(HttpBatchSinkTest, PostsWithTheTokenAndResendsAreHarmless) {
  TempDir dir;
  ManualClock clock(1'800'000'010'000);
  TestLedgerServer server(dir / "ledger.db", clock, "s3cret");
  ASSERT_TRUE(server.Start());
  auto sink = MakeHttpBatchSink(server.url(), "s3cret", 2'000);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::string doc = OneBatch("n1-x-1", 1'800'000'000'000);
  EXPECT_TRUE((*sink)->Send(doc).ok());
  EXPECT_TRUE((*sink)->Send(doc).ok());  // a resend: acknowledged, not applied again
  EXPECT_EQ(server.applied(), 1);
  EXPECT_EQ(server.duplicates(), 1);

  auto wrong = MakeHttpBatchSink(server.url(), "guess", 2'000);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ((*wrong)->Send(doc).code(), StatusCode::kUnauthenticated);

  Status bad = (*sink)->Send("{\"version\": 1}");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("HTTP 400"));

  server.set_fail_status(503);
  EXPECT_EQ((*sink)->Send(doc).code(), StatusCode::kUnavailable);
  server.Stop();
  Status down = (*sink)->Send(doc);
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_THAT(down.message(), HasSubstr("/api/v1/batches"));

  EXPECT_FALSE(MakeHttpBatchSink("ledger:8080", "t").ok());
  EXPECT_FALSE(MakeHttpBatchSink("http://ledger:8080/api", "t").ok());
}

}  // namespace
}  // namespace gpuledger::agent
