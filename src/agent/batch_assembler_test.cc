#include "agent/batch_assembler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/test_util.h"
#include "wire/batch.h"

namespace gpuledger::agent {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'800'000'000'000;

std::vector<Device> Inventory() {
  Device gpu;
  gpu.uuid = "GPU-1";
  gpu.node = "n1";
  gpu.model = "NVIDIA H200";
  gpu.sample_interval_ms = 1000;
  Device parent = gpu;
  parent.uuid = "GPU-2";
  Device mig = gpu;
  mig.uuid = "MIG-2a";
  mig.parent_uuid = "GPU-2";
  mig.share = {3, 7};
  mig.mig_profile = "3g.71gb";
  Device mig2 = mig;
  mig2.uuid = "MIG-2b";
  mig2.share = {4, 7};
  return {gpu, parent, mig, mig2};
}

std::vector<Sample> Samples(int64_t t, bool with_process) {
  Sample g;
  g.device_uuid = "GPU-1";
  g.t_ms = t;
  g.sm_active = 0.5;
  if (with_process) g.processes.push_back({4101, "job-a", 1000, 0.5});
  Sample parent;  // a GPU in MIG mode: no activity of its own
  parent.device_uuid = "GPU-2";
  parent.t_ms = t;
  Sample a;
  a.device_uuid = "MIG-2a";
  a.t_ms = t;
  a.sm_active = 0.7;
  Sample b = a;
  b.device_uuid = "MIG-2b";
  b.sm_active = 0.0;
  return {g, parent, a, b};
}

Job JobA() {
  Job j;
  j.id = "job-a";
  j.team = "nlp";
  return j;
}

TEST(BatchAssemblerTest, OpensAndClosesAllocationsWithTheProcesses) {
  auto made = BatchAssembler::Create({"n1", "abc", ""}, Inventory());
  ASSERT_TRUE(made.ok());
  BatchAssembler& a = *made;
  EXPECT_FALSE(a.Take());
  a.Add(kT0 + 1000, kT0, Samples(kT0 + 1000, true), {{"GPU-1", JobA()}});
  a.Add(kT0 + 2000, kT0 + 1000, Samples(kT0 + 2000, true), {{"GPU-1", JobA()}});
  auto b1 = a.Take();
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->batch_id, "n1-abc-1");
  EXPECT_EQ(b1->devices.size(), 4u);
  ASSERT_EQ(b1->allocations.size(), 1u);
  EXPECT_EQ(b1->allocations[0].from_ms, kT0);  // from the start of the span it was first seen in
  EXPECT_FALSE(b1->allocations[0].to_ms);
  ASSERT_EQ(b1->jobs.size(), 1u);
  EXPECT_EQ(b1->jobs[0].team, "nlp");
  EXPECT_EQ(b1->samples.size(), 8u);
  // The MIG-mode GPU's activity is its instances' slice-weighted mean: (3*0.7 + 4*0) / 7.
  EXPECT_NEAR(*b1->samples[1].sm_active, 0.3, 1e-12);
  EXPECT_TRUE(ValidateBatch(*b1, kT0 + 3000).ok()) << ValidateBatch(*b1, kT0 + 3000).ToString();

  a.Add(kT0 + 3000, kT0 + 2000, Samples(kT0 + 3000, false), {});
  auto b2 = a.Take();
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->batch_id, "n1-abc-2");
  ASSERT_EQ(b2->allocations.size(), 1u);
  EXPECT_EQ(b2->allocations[0].from_ms, kT0);
  EXPECT_EQ(b2->allocations[0].to_ms, kT0 + 3000);
  ASSERT_EQ(b2->jobs.size(), 1u);  // the closing batch names its job again
  EXPECT_EQ(a.open_allocations(), 0u);
  // The v1 text round-trips.
  auto parsed = wire::ParseBatch(wire::WriteBatch(*b2));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->allocations.size(), 1u);
}

TEST(BatchAssemblerTest, DropsHealthySamplesWithoutActivity) {
  auto made = BatchAssembler::Create({"n1", "x", ""}, Inventory());
  ASSERT_TRUE(made.ok());
  std::vector<Sample> s = Samples(kT0 + 1000, false);
  s[3].sm_active.reset();  // one instance without GPM: its parent cannot be derived either
  made->Add(kT0 + 1000, kT0, std::move(s), {});
  auto b = made->Take();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->samples.size(), 2u);
  EXPECT_EQ(made->samples_dropped(), 2);
  EXPECT_TRUE(ValidateBatch(*b, kT0 + 1000).ok());
}

TEST(BatchAssemblerTest, ARestartContinuesOpenAllocations) {
  TempDir dir;
  std::string state = dir / "open.tsv";
  {
    auto a = BatchAssembler::Create({"n1", "run1", state}, Inventory());
    ASSERT_TRUE(a.ok());
    Job b = JobA();
    b.id = "job-b";
    a->Add(kT0 + 1000, kT0, Samples(kT0 + 1000, true), {{"GPU-1", JobA()}, {"MIG-2a", b}});
    ASSERT_TRUE(a->Take());
    ASSERT_TRUE(a->SaveState().ok());
  }
  auto a = BatchAssembler::Create({"n1", "run2", state}, Inventory());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->open_allocations(), 2u);
  // job-a still runs: no new allocation; job-b ended while the agent was down: closed.
  a->Add(kT0 + 60'000, kT0 + 59'000, Samples(kT0 + 60'000, true), {{"GPU-1", JobA()}});
  auto batch = a->Take();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->batch_id, "n1-run2-1");
  ASSERT_EQ(batch->allocations.size(), 1u);
  EXPECT_EQ(batch->allocations[0].job_id, "job-b");
  EXPECT_EQ(batch->allocations[0].from_ms, kT0);
  EXPECT_EQ(batch->allocations[0].to_ms, kT0 + 60'000);
  ASSERT_EQ(batch->jobs.size(), 2u);
  EXPECT_EQ(batch->jobs[1].team, "nlp");  // job-b's metadata came back from the state file

  testing::WriteFile(state, "GPU-1\tjob-a\tnot-a-number\n");
  EXPECT_THAT(BatchAssembler::Create({"n1", "run3", state}, Inventory()).status().message(),
              ::testing::HasSubstr("open.tsv:1: want 9 tab-separated fields"));
}

}  // namespace
}  // namespace gpuledger::agent
