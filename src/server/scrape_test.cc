// The scraper's job-bound targets: a vLLM or Triton endpoint becomes its serving job's
// snapshots, a training job's counters become Progress reports, each scrape one
// idempotent batch. Endpoints are small in-test HTTP servers on 127.0.0.1 port 0.
#include "server/scrape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/testing/missing_component.h"
#include "ledger/mfu.h"
#include "server/client.h"
#include "server/metrics.h"
#include "server/test_support.h"
#include "wire/batch.h"
#include "wire/prometheus/prom_text.h"
#include "wire/prometheus/serving_metrics.h"
#include "ledger/store_access.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;

const int64_t kT0 = 1795435200000;  // 2026-11-23T12:00:00Z
const int64_t kStep = 15 * kMsPerSecond;
const char* kServingJob = "chat-1";
const char* kTrainingJob = "train-1";

// Serves a body the test sets at /metrics.
class Endpoint {
 public:
  Endpoint() {
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      res.status = status_;
      res.set_content(body_, "text/plain; version=0.0.4");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~Endpoint() {
    http_.stop();
    thread_.join();
  }
  void Serve(std::string body, int status = 200) {
    std::lock_guard lock(mu_);
    body_ = std::move(body);
    status_ = status;
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}/metrics", port_); }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string body_;
  int status_ = 200;
};

std::string TokensText(const std::string& value) {
  return "# HELP gpuledger_job_tokens_total Tokens trained.\n"
         "# TYPE gpuledger_job_tokens_total counter\n"
         "gpuledger_job_tokens_total " +
         value + "\n";
}

// One H100 held by a training job (1B parameters) from an hour before `t0`, and a
// serving job.
Batch Jobs(int64_t t0 = kT0) {
  Batch b;
  b.batch_id = "declare-jobs";
  b.source = "test";
  Device d;
  d.uuid = "GPU-scrape-0";
  d.node = "n1";
  d.model = "NVIDIA H100 80GB HBM3";
  d.pool = "training";
  d.memory_mib = 81559;
  d.sample_interval_ms = kMsPerMinute;
  b.devices.push_back(d);
  Job serving;
  serving.id = kServingJob;
  serving.team = "search";
  serving.kind = JobKind::kServing;
  Job training;
  training.id = kTrainingJob;
  training.team = "nlp";
  training.kind = JobKind::kTraining;
  training.model_parameters = 1e9;
  b.jobs = {serving, training};
  b.allocations.push_back({d.uuid, kTrainingJob, t0 - kMsPerHour, std::nullopt});
  return b;
}

// A ledger on a fresh store with the two jobs, and a scraper applying to it directly
// (no server: nothing else touches the ledger).
class ScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("ledger.db");
    OpenLedger();
    auto st = ledger_->Ingest(Jobs());
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    auto ingestor = DcgmIngestor::Create(
        {}, [this](const Batch& b, const BatchSender& who) { return ledger_->Ingest(b, who); }, &metrics_);
    ASSERT_TRUE(ingestor.ok()) << ingestor.status().ToString();
    ingestor_ = std::move(*ingestor);
    scraper_ = std::make_unique<Scraper>(std::vector<ScrapeTarget>{}, *ingestor_, clock_, &metrics_,
                                         [this](const Batch& b, const BatchSender& who) { return ledger_->Ingest(b, who); });
  }

  void OpenLedger() {
    auto store = store::OpenSqliteStore(db_, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ledger_ = std::make_unique<ledger::Ledger>(std::move(*store), clock_);
  }

  // Hands the database over to a server (the ledger here is closed first).
  std::unique_ptr<testing::Harness> Serve() {
    scraper_.reset();
    ingestor_.reset();
    ledger_.reset();
    auto h = std::make_unique<testing::Harness>(db_, clock_);
    EXPECT_EQ(h->error, "");
    return h;
  }

  int64_t JobId(const std::string& job) {
    auto jobs = ledger::internal_StoreOf(*ledger_).ListJobs();
    EXPECT_TRUE(jobs.ok());
    for (const auto& j : *jobs) {
      if (j.job.id == job) return j.id;
    }
    ADD_FAILURE() << "no job " << job;
    return 0;
  }

  std::vector<ServingSnapshot> Serving(int64_t from, int64_t to) {
    auto s = ledger::internal_StoreOf(*ledger_).ServingOf(JobId(kServingJob), {from, to});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::vector<ServingSnapshot>{};
  }

  std::vector<Progress> ProgressReports() {
    auto p = ledger::internal_StoreOf(*ledger_).ProgressOf(JobId(kTrainingJob), {kT0 - kMsPerDay, kT0 + kMsPerDay});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : std::vector<Progress>{};
  }

  double Skipped(const std::string& reason) {
    return metrics_.Value(MetricId::kDroppedSamples, {"scrape", reason});
  }

  ScrapeTarget Target(ScrapeKind kind, const std::string& job) {
    ScrapeTarget t;
    t.url = endpoint_.url();
    t.kind = kind;
    t.job = job;
    return t;
  }

  // Scrapes at `t_ms`, expecting success.
  ScrapeResult ScrapeAt(const ScrapeTarget& target, int64_t t_ms) {
    clock_.Set(t_ms);
    auto r = scraper_->ScrapeOnce(target);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ScrapeResult{};
  }

  TempDir dir_;
  std::string db_;
  ManualClock clock_{kT0};
  MetricsRegistry metrics_;
  Endpoint endpoint_;
  std::unique_ptr<ledger::Ledger> ledger_;
  std::unique_ptr<DcgmIngestor> ingestor_;
  std::unique_ptr<Scraper> scraper_;
};

void ExpectSameHistogram(const CumulativeHistogram& a, const CumulativeHistogram& b,
                         const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.le, b.le);
  EXPECT_EQ(a.count, b.count);
  EXPECT_DOUBLE_EQ(a.sum, b.sum);
  EXPECT_DOUBLE_EQ(a.total, b.total);
}

void ExpectSameSnapshot(const ServingSnapshot& got, const ServingSnapshot& want) {
  SCOPED_TRACE(want.engine + " " + want.model);
  EXPECT_EQ(got.t_ms, want.t_ms);
  EXPECT_EQ(got.engine, want.engine);
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.requests_waiting, want.requests_waiting);
  EXPECT_EQ(got.requests_running, want.requests_running);
  EXPECT_EQ(got.kv_cache_usage_ratio, want.kv_cache_usage_ratio);
  EXPECT_EQ(got.prompt_tokens_total, want.prompt_tokens_total);
  EXPECT_EQ(got.generation_tokens_total, want.generation_tokens_total);
  EXPECT_EQ(got.preemptions_total, want.preemptions_total);
  EXPECT_EQ(got.requests_total, want.requests_total);
  EXPECT_EQ(got.executions_total, want.executions_total);
  EXPECT_EQ(got.queue_seconds_total, want.queue_seconds_total);
  EXPECT_EQ(got.compute_seconds_total, want.compute_seconds_total);
  ExpectSameHistogram(got.prefill_seconds, want.prefill_seconds, "prefill");
  ExpectSameHistogram(got.decode_seconds, want.decode_seconds, "decode");
  ExpectSameHistogram(got.iteration_tokens, want.iteration_tokens, "iteration tokens");
}

// What ExtractServing makes of `text` at `t_ms`, bound to the serving job.
std::vector<ServingSnapshot> Expected(const std::string& text, int64_t t_ms) {
  prometheus::TextParseOptions o;
  o.mode = prometheus::ParseMode::kLenient;
  auto parsed = prometheus::ParseText(text, o);
  EXPECT_TRUE(parsed.ok());
  auto x = prometheus::ExtractServing(parsed->families, t_ms);
  for (auto& s : x.snapshots) s.job_id = kServingJob;
  return x.snapshots;
}

TEST_F(ScrapeTest, RealVllmExpositionBecomesTheServingJobsSnapshots) {
  std::string text = testing::ReadFileOrEmpty(std::string(GPULEDGER_SHARED_DATA_DIR) +
                                              "/telemetry/vllm/vllm_v1_idle.prom");
  if (text.empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the vLLM capture is absent from ../shared/data";
  }
  endpoint_.Serve(text);
  ScrapeTarget target = Target(ScrapeKind::kServing, kServingJob);

  ScrapeResult r = ScrapeAt(target, kT0);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.serving_snapshots, 1u);
  EXPECT_TRUE(r.skipped.empty()) << r.skipped.front();
  auto want = Expected(text, kT0);
  ASSERT_EQ(want.size(), 1u);
  auto got = Serving(kT0, kT0);
  ASSERT_EQ(got.size(), 1u);
  ExpectSameSnapshot(got[0], want[0]);

  // The same scrape again (same target, same instant): the same batch, a duplicate.
  ScrapeResult again = ScrapeAt(target, kT0);
  EXPECT_FALSE(again.applied);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.batch_id, r.batch_id);
  EXPECT_EQ(Serving(kT0 - kMsPerHour, kT0 + kMsPerHour).size(), 1u);

  // The next interval adds one.
  EXPECT_TRUE(ScrapeAt(target, kT0 + kStep).applied);
  EXPECT_EQ(Serving(kT0 - kMsPerHour, kT0 + kMsPerHour).size(), 2u);

  // The API shows the job's engine as the ledger's analysis of those snapshots.
  auto h = Serve();
  auto reply =
      HttpGet(h->url(), fmt::format("/api/v1/jobs/{}/serving?from={}&to={}", kServingJob,
                                    FormatTime(kT0 - kMsPerHour), FormatTime(kT0 + kMsPerHour)));
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->status, 200) << reply->body;
  json j = json::parse(reply->body);
  ASSERT_TRUE(j.contains("engines")) << j.dump();
  ASSERT_EQ(j["engines"].size(), 1u) << j.dump();
  EXPECT_EQ(j["engines"][0]["engine"], "vllm");
  EXPECT_EQ(j["engines"][0]["model"], "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(j["engines"][0]["queue_depth"]["samples"], 2);
}

TEST_F(ScrapeTest, TritonExpositionBecomesOneSnapshotPerModel) {
  std::string text = testing::ReadFileOrEmpty(std::string(GPULEDGER_SOURCE_DIR) +
                                              "/src/wire/prometheus/testdata/triton.prom");
  ASSERT_FALSE(text.empty());
  endpoint_.Serve(text);
  ScrapeTarget target = Target(ScrapeKind::kServing, kServingJob);
  ScrapeResult r = ScrapeAt(target, kT0);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.serving_snapshots, 2u);
  auto want = Expected(text, kT0);
  auto got = Serving(kT0, kT0);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) ExpectSameSnapshot(got[i], want[i]);
  EXPECT_EQ(got[0].executions_total, 200.0);  // bert: versions 1 and 2 add up

  EXPECT_TRUE(ScrapeAt(target, kT0).duplicate);
  EXPECT_EQ(Serving(kT0, kT0).size(), 2u);
}

TEST_F(ScrapeTest, ServingTargetWithoutEngineFamiliesIsACountedSkip) {
  endpoint_.Serve("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n");
  ScrapeResult r = ScrapeAt(Target(ScrapeKind::kServing, kServingJob), kT0);
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.batch_id, "");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_THAT(r.skipped[0], HasSubstr("no vLLM or Triton family"));
  EXPECT_EQ(Skipped("serving_absent"), 1);
  EXPECT_TRUE(Serving(kT0 - kMsPerHour, kT0 + kMsPerHour).empty());

  // A bad figure is left out and counted; the rest of the snapshot is kept.
  endpoint_.Serve(
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} NaN\n"
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 4\n");
  r = ScrapeAt(Target(ScrapeKind::kServing, kServingJob), kT0 + kStep);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(Skipped("serving_invalid"), 1);
  auto got = Serving(kT0 + kStep, kT0 + kStep);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].requests_waiting.has_value());
  EXPECT_EQ(got[0].requests_running, 4.0);
}

// Issue 12, item 8: a scraped batch obeys the native path's string rules (ValidateBatch):
// a model name with a control character refuses the scrape, naming the field; one of
// 1 MiB does not even parse (the exposition parser skips the line). Nothing is stored.
TEST_F(ScrapeTest, AScrapeObeysTheBatchStringRules) {
  auto scrape_model = [&](const std::string& label) {
    endpoint_.Serve("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"" + label +
                    "\"} 4\n");
    clock_.Set(kT0);
    return scraper_->ScrapeOnce(Target(ScrapeKind::kServing, kServingJob));
  };
  // As written in the exposition: "a\\nb" is the escape of a newline.
  for (const std::string& label : {std::string("a\x01b"), std::string("a\\nb")}) {
    auto r = scrape_model(label);
    ASSERT_FALSE(r.ok()) << label;
    EXPECT_THAT(r.status().message(), HasSubstr("serving[0].model: contains a control character"));
  }
  auto huge = scrape_model(std::string(1 << 20, 'm'));
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_FALSE(huge->applied);
  EXPECT_TRUE(Serving(kT0 - kMsPerHour, kT0 + kMsPerHour).empty());
  auto fine = scrape_model("m");
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_TRUE(fine->applied);
}

TEST_F(ScrapeTest, FailuresNameTheTargetAndApplyNothing) {
  endpoint_.Serve(testing::ReadFileOrEmpty(std::string(GPULEDGER_SOURCE_DIR) +
                                           "/src/wire/prometheus/testdata/triton.prom"));
  clock_.Set(kT0);
  auto unknown = scraper_->ScrapeOnce(Target(ScrapeKind::kServing, "no-such-job"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr(endpoint_.url()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown job no-such-job"));

  endpoint_.Serve("oops", 503);
  auto down = scraper_->ScrapeOnce(Target(ScrapeKind::kServing, kServingJob));
  ASSERT_FALSE(down.ok());
  EXPECT_THAT(down.status().message(), HasSubstr("HTTP 503"));

  auto no_job = scraper_->ScrapeOnce(Target(ScrapeKind::kProgress, ""));
  ASSERT_FALSE(no_job.ok());
  EXPECT_THAT(no_job.status().message(), HasSubstr("needs a job"));
  EXPECT_TRUE(Serving(kT0 - kMsPerHour, kT0 + kMsPerHour).empty());
}

TEST_F(ScrapeTest, ConsecutiveCounterReadingsBecomeProgressIntervalsAndMfu) {
  ScrapeTarget target = Target(ScrapeKind::kProgress, kTrainingJob);
  endpoint_.Serve(TokensText("0"));
  ScrapeResult first = ScrapeAt(target, kT0);
  EXPECT_FALSE(first.applied) << "the first reading is only a baseline";
  EXPECT_TRUE(ProgressReports().empty());

  endpoint_.Serve(TokensText("1e6"));
  ScrapeResult second = ScrapeAt(target, kT0 + kStep);
  EXPECT_TRUE(second.applied);
  EXPECT_EQ(second.progress_reports, 1u);
  // Retried at the same instant: the same batch, acknowledged as a duplicate.
  ScrapeResult retry = ScrapeAt(target, kT0 + kStep);
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.batch_id, second.batch_id);

  endpoint_.Serve(TokensText("3e6"));
  EXPECT_TRUE(ScrapeAt(target, kT0 + 2 * kStep).applied);

  auto reports = ProgressReports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].t_ms, kT0 + kStep);
  EXPECT_EQ(reports[0].interval_ms, kStep);
  EXPECT_EQ(reports[0].tokens, 1e6);
  EXPECT_FALSE(reports[0].model_flops.has_value());
  EXPECT_EQ(reports[1].t_ms, kT0 + 2 * kStep);
  EXPECT_EQ(reports[1].interval_ms, kStep);
  EXPECT_EQ(reports[1].tokens, 2e6);

  // MFU from those reports over the same 30 s: 3e6 tokens x 6 x 1e9 FLOPs per token on
  // one H100 (bf16 peak from the ledger's table).
  auto peak = ledger::PeakFlops("NVIDIA H100 80GB HBM3", ledger::Dtype::kBf16);
  ASSERT_TRUE(peak.ok());
  double want = 3e6 * 6e9 / (*peak * 30.0);
  auto h = Serve();
  // The job's MFU answer over those 30 s, with `extra` query parameters.
  auto mfu_of = [&](const std::string& extra) {
    auto reply = HttpGet(h->url(), fmt::format("/api/v1/jobs/{}/mfu?from={}&to={}{}", kTrainingJob, FormatTime(kT0),
                                               FormatTime(kT0 + 2 * kStep), extra));
    EXPECT_TRUE(reply.ok() && reply->status == 200) << (reply.ok() ? reply->body : reply.status().ToString());
    return reply.ok() ? json::parse(reply->body) : json();
  };
  json j = mfu_of("");
  EXPECT_EQ(j["basis"], "tokens");
  ASSERT_TRUE(j["mfu"].is_number()) << j.dump();
  EXPECT_NEAR(j["mfu"].get<double>(), want, 1e-9);
  EXPECT_NEAR(j["achieved_flops"].get<double>(), 1.8e16, 1e3);
  EXPECT_TRUE(j["hfu"].is_null()) << "no recomputation asked: no HFU";

  // With full recomputation the forward pass runs twice: 8 of every 6 model FLOPs, so
  // HFU is MFU x 4/3, labelled apart from it. A mode that does not exist is the caller's error.
  json jf = mfu_of("&recompute=full");
  EXPECT_EQ(jf["recompute"], "full");
  ASSERT_TRUE(jf["mfu"].is_number() && jf["hfu"].is_number()) << jf.dump();
  EXPECT_NEAR(jf["mfu"].get<double>(), want, 1e-9);
  EXPECT_NEAR(jf["hfu"].get<double>(), want * 4.0 / 3.0, 1e-9);
  auto bad = HttpGet(h->url(), fmt::format("/api/v1/jobs/{}/mfu?recompute=twice", kTrainingJob));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("recompute"));
}

TEST_F(ScrapeTest, ResetsGapsAndBadValuesNeverGiveAWrongCount) {
  ScrapeTarget target = Target(ScrapeKind::kProgress, kTrainingJob);
  endpoint_.Serve(TokensText("3e6"));
  ScrapeAt(target, kT0);

  // The job restarted (or restored a checkpoint): the counter went down. Nothing is
  // reported for that interval, never a negative count; the new value is the baseline.
  endpoint_.Serve(TokensText("5e5"));
  ScrapeResult reset = ScrapeAt(target, kT0 + kStep);
  EXPECT_FALSE(reset.applied);
  ASSERT_EQ(reset.skipped.size(), 1u);
  EXPECT_THAT(reset.skipped[0], HasSubstr("tokens went down from 3000000 to 500000"));
  EXPECT_EQ(Skipped("progress_reset"), 1);
  EXPECT_TRUE(ProgressReports().empty());

  endpoint_.Serve(TokensText("1.5e6"));
  EXPECT_TRUE(ScrapeAt(target, kT0 + 2 * kStep).applied);

  // A scrape without the family, then one with a value that is not a count: no report,
  // each a counted skip, and the baseline stays.
  endpoint_.Serve(
      "# TYPE python_gc_objects_collected_total counter\npython_gc_objects_collected_total 1\n");
  ScrapeResult absent = ScrapeAt(target, kT0 + 3 * kStep);
  EXPECT_FALSE(absent.applied);
  EXPECT_THAT(absent.skipped.at(0),
              HasSubstr("no gpuledger_job_tokens_total or gpuledger_job_model_flops_total"));
  EXPECT_EQ(Skipped("progress_absent"), 1);
  endpoint_.Serve(TokensText("NaN"));
  ScrapeResult bad = ScrapeAt(target, kT0 + 4 * kStep);
  EXPECT_FALSE(bad.applied);
  EXPECT_THAT(bad.skipped.at(0), HasSubstr("value NaN is not a count"));
  EXPECT_EQ(Skipped("progress_invalid"), 1);
  endpoint_.Serve("gpuledger_job_tokens_total not-a-number\n");
  EXPECT_FALSE(ScrapeAt(target, kT0 + 5 * kStep).applied);
  EXPECT_EQ(Skipped("progress_absent"), 2) << "an unparsable line is no value at all";

  // The next good reading covers the whole gap since the baseline.
  endpoint_.Serve(TokensText("2.5e6"));
  EXPECT_TRUE(ScrapeAt(target, kT0 + 6 * kStep).applied);

  auto reports = ProgressReports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].t_ms, kT0 + 2 * kStep);
  EXPECT_EQ(reports[0].interval_ms, kStep);
  EXPECT_EQ(reports[0].tokens, 1e6);
  EXPECT_EQ(reports[1].t_ms, kT0 + 6 * kStep);
  EXPECT_EQ(reports[1].interval_ms, 4 * kStep);
  EXPECT_EQ(reports[1].tokens, 1e6);
  for (const Progress& p : reports) EXPECT_GE(*p.tokens, 0.0);
}

TEST_F(ScrapeTest, AFailedApplyKeepsTheBaseline) {
  ScrapeTarget target = Target(ScrapeKind::kProgress, "not-declared-yet");
  endpoint_.Serve(TokensText("0"));
  ScrapeAt(target, kT0);  // a baseline: nothing applied, so the unknown job is not noticed
  endpoint_.Serve(TokensText("1e6"));
  clock_.Set(kT0 + kStep);
  auto r = scraper_->ScrapeOnce(target);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown job not-declared-yet"));

  // Declared now: the next scrape reports everything since the baseline.
  Batch declare;
  declare.batch_id = "declare-late";
  declare.source = "test";
  Job j;
  j.id = "not-declared-yet";
  j.team = "nlp";
  declare.jobs.push_back(j);
  ASSERT_TRUE(ledger_->Ingest(declare).ok());
  endpoint_.Serve(TokensText("2e6"));
  ScrapeResult ok = ScrapeAt(target, kT0 + 2 * kStep);
  EXPECT_TRUE(ok.applied);
  auto p = ledger::internal_StoreOf(*ledger_).ProgressOf(JobId("not-declared-yet"), {kT0, kT0 + kMsPerHour});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].interval_ms, 2 * kStep);
  EXPECT_EQ((*p)[0].tokens, 2e6);
}

// The server's own scraper thread, configured with job-bound targets, fills the ledger
// and counts its skips in /metrics.
TEST(ScrapeServerTest, ConfiguredJobTargetsAreScrapedByTheServer) {
  TempDir dir;
  Endpoint vllm, trainer;
  vllm.Serve(testing::ReadFileOrEmpty(std::string(GPULEDGER_SOURCE_DIR) +
                                      "/src/wire/prometheus/testdata/triton.prom"));
  trainer.Serve("# TYPE unrelated gauge\nunrelated 1\n");
  SystemClock clock;
  ServerOptions o;
  ScrapeTarget serving;
  serving.url = vllm.url();
  serving.interval_ms = 100;
  serving.kind = ScrapeKind::kServing;
  serving.job = kServingJob;
  ScrapeTarget progress = serving;
  progress.url = trainer.url();
  progress.kind = ScrapeKind::kProgress;
  progress.job = kTrainingJob;
  o.scrape_targets = {serving, progress};
  testing::Harness h(dir.File("s.db"), clock, o);
  ASSERT_EQ(h.error, "");
  // The jobs are declared after the scraper started: its first scrapes fail (unknown job)
  // and are retried at the next interval.
  Batch jobs = Jobs(clock.NowMs());
  auto declared = HttpPost(h.url(), "/api/v1/batches", wire::WriteBatch(jobs), "application/json");
  ASSERT_TRUE(declared.ok());
  ASSERT_EQ(declared->status, 200) << declared->body;

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  json engines;
  double absent = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = HttpGet(h.url(), fmt::format("/api/v1/jobs/{}/serving?from={}", kServingJob,
                                          FormatTime(clock.NowMs() - kMsPerHour)));
    if (r.ok() && r->status == 200) engines = json::parse(r->body)["engines"];
    absent = h.server->metrics().Value(MetricId::kDroppedSamples, {"scrape", "progress_absent"});
    if (engines.size() == 2 && absent > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(engines.size(), 2u) << engines.dump();
  EXPECT_GT(absent, 0);
  auto metrics = HttpGet(h.url(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(
      metrics->body,
      HasSubstr(
          "gpuledger_ingest_dropped_samples_total{path=\"scrape\",reason=\"progress_absent\"}"));
  EXPECT_THAT(metrics->body,
              HasSubstr(fmt::format("gpuledger_scrapes_total{{target=\"{}\",outcome=\"ok\"}}",
                                    vllm.url())));
}

}  // namespace
}  // namespace gpuledger::server
