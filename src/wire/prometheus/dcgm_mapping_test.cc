#include "wire/prometheus/dcgm_mapping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/testing/missing_component.h"
#include "wire/prometheus/test_util.h"

namespace gpuledger::prometheus {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT1 = 1764489600000;
constexpr int64_t kT2 = kT1 + 10000;
constexpr int64_t kScrapeMs = kT1 + 5000;
const std::string kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const std::string kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000000";
const std::string kGpuC = "GPU-cccccccc-0000-0000-0000-000000000000";
const std::string kGpuD = "GPU-dddddddd-0000-0000-0000-000000000000";
const std::string kGpuE = "GPU-eeeeeeee-0000-0000-0000-000000000000";

DcgmMappingConfig FleetConfig() {
  DcgmMappingConfig c;
  using M = LabelRule::Match;
  c.rules = {
      {"namespace", M::kEquals, "ml-research", "research", "llm"},
      {"namespace", M::kRegex, "team-(.+)", "$1", ""},
      {"hpc_job", M::kRegex, "[0-9]+", "hpc", "simulation-$&"},
  };
  return c;
}

DcgmMapper Mapper(DcgmMappingConfig config = FleetConfig()) {
  Result<DcgmMapper> m = DcgmMapper::Create(std::move(config));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

std::vector<Family> ParseOrDie(std::string_view text, ParseMode mode = ParseMode::kStrict) {
  TextParseOptions o;
  o.mode = mode;
  Result<ParsedText> p = ParseText(text, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value().families : std::vector<Family>{};
}

std::vector<Family> FleetFamilies() {
  std::optional<std::string> text = testutil::ReadFile(testutil::Testdata("dcgm_fleet.prom"));
  EXPECT_TRUE(text.has_value());
  return ParseOrDie(text.value_or(""));
}

const Device* FindDevice(const DcgmBatch& b, std::string_view uuid) {
  for (const Device& d : b.devices) {
    if (d.uuid == uuid) return &d;
  }
  return nullptr;
}
const Sample* FindSample(const DcgmBatch& b, std::string_view uuid, int64_t t) {
  for (const Sample& s : b.samples) {
    if (s.device_uuid == uuid && s.t_ms == t) return &s;
  }
  return nullptr;
}
const Job* FindJob(const DcgmBatch& b, std::string_view id) {
  for (const Job& j : b.jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

// A scrape as Prometheus would remote-write it: one series per sample line.
WriteRequest ToWriteRequest(const std::vector<Family>& families, int64_t scrape_ms) {
  WriteRequest req;
  for (const Family& f : families) {
    for (const TextSample& s : f.samples) {
      TimeSeries ts;
      ts.labels = s.labels;
      ts.labels.push_back({"__name__", s.name});
      ts.samples.push_back({s.value, s.timestamp_ms.value_or(scrape_ms)});
      req.timeseries.push_back(std::move(ts));
    }
  }
  return req;
}

TEST(DcgmMappingTest, TheTableTellsRatiosFromPercents) {
  std::set<std::string_view> families;
  for (const DcgmFieldSpec& spec : DcgmFieldTable()) {
    EXPECT_TRUE(families.insert(spec.family).second) << spec.family;
    EXPECT_EQ(FindDcgmField(spec.family), &spec);
    if (spec.family.substr(0, 13) == "DCGM_FI_PROF_") {
      EXPECT_EQ(spec.scale, DcgmScale::kRatio);
    }
  }
  EXPECT_EQ(FindDcgmField("DCGM_FI_DEV_GPU_UTIL")->scale, DcgmScale::kPercent);
  EXPECT_EQ(FindDcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")->scale, DcgmScale::kMillijoules);
  EXPECT_EQ(FindDcgmField("DCGM_FI_DEV_SM_CLOCK"), nullptr);
}

TEST(DcgmMappingTest, FleetFixtureMapsDevicesMigSharesAndMemory) {
  Result<DcgmBatch> r = Mapper().MapScrape(FleetFamilies(), kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DcgmBatch& b = *r;
  std::vector<std::string> uuids;
  for (const Device& d : b.devices) uuids.push_back(d.uuid);
  EXPECT_EQ(uuids,
            (std::vector<std::string>{kGpuA, kGpuB, kGpuC, kGpuD, kGpuE, "MIG-" + kGpuB + "/1",
                                      "MIG-" + kGpuB + "/9", "MIG-" + kGpuC + "/3"}));
  const Device* a = FindDevice(b, kGpuA);
  EXPECT_FALSE(a->is_mig());  // GPU_I_PROFILE="<<<NULL>>>" is no MIG instance
  EXPECT_EQ(a->node, "node-a");
  EXPECT_EQ(a->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a->memory_mib, 51958 + 29089 + 512);
  EXPECT_EQ(a->sample_interval_ms, 10000);

  const Device* mig3 = FindDevice(b, "MIG-" + kGpuB + "/1");
  EXPECT_EQ(mig3->parent_uuid, kGpuB);
  EXPECT_EQ(mig3->share, (Share{3, 7}));
  EXPECT_EQ(mig3->mig_profile, "3g.71gb");
  EXPECT_EQ(mig3->memory_mib, 71 * 1024);  // from the profile: no FB figures for MIG
  EXPECT_EQ(FindDevice(b, "MIG-" + kGpuB + "/9")->share, (Share{1, 7}));
  EXPECT_EQ(FindDevice(b, "MIG-" + kGpuC + "/3")->share, (Share{2, 4}));  // A30: 4 slices
  EXPECT_EQ(FindDevice(b, kGpuB)->node, "node-b");  // the parent is a device too
  EXPECT_FALSE(FindDevice(b, kGpuB)->is_mig());
}

TEST(DcgmMappingTest, FleetFixtureMapsSamplesUnitsAndHealth) {
  Result<DcgmBatch> r = Mapper().MapScrape(FleetFamilies(), kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DcgmBatch& b = *r;
  ASSERT_EQ(b.samples.size(), b.extras.size());
  const Sample* a1 = FindSample(b, kGpuA, kT1);
  ASSERT_NE(a1, nullptr);
  EXPECT_EQ(a1->sm_active, 0.8125);  // both pods' series carry the same reading
  EXPECT_EQ(a1->gpu_util, 0.85);     // percent -> ratio
  EXPECT_EQ(a1->fb_used_mib, 51958);
  EXPECT_EQ(a1->power_watts, 158.25);
  EXPECT_EQ(a1->health, Health::kOk);
  EXPECT_EQ(a1->activity_source(), ActivitySource::kSmActive);
  size_t a1_index = static_cast<size_t>(a1 - b.samples.data());
  EXPECT_DOUBLE_EQ(b.extras[a1_index].energy_joules_total.value_or(0), 5551899.58);
  EXPECT_EQ(b.extras[a1_index].fb_free_mib, 29089);
  EXPECT_EQ(FindSample(b, kGpuA, kT2)->sm_active, 0.5);
  EXPECT_FALSE(FindSample(b, kGpuA, kT2)->gpu_util.has_value());

  const Sample* d = FindSample(b, kGpuD, kT1);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->gpu_util, 1.0);          // 100.4 % is clamped, not refused
  EXPECT_EQ(d->health, Health::kLost);  // XID 79
  EXPECT_EQ(b.extras[static_cast<size_t>(d - b.samples.data())].xid, 79);

  EXPECT_EQ(FindSample(b, "MIG-" + kGpuB + "/1", kT1)->sm_active, 0.25);
  EXPECT_EQ(FindSample(b, kGpuE, kScrapeMs), nullptr);  // only an unused family
  EXPECT_EQ(b.ignored_families,
            (std::map<std::string, int64_t, std::less<>>{{"DCGM_FI_DEV_SM_CLOCK", 1}}));
  EXPECT_EQ(b.used_points, 16);
}

TEST(DcgmMappingTest, FleetFixtureMapsJobsRulesAndHolds) {
  Result<DcgmBatch> r = Mapper().MapScrape(FleetFamilies(), kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DcgmBatch& b = *r;
  std::vector<std::string> ids;
  for (const Job& j : b.jobs) ids.push_back(j.id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"hpc/4242", "k8s/batch/etl-5", "k8s/ml-research/llama-ft-0",
                                      "k8s/serving/vllm-7f9c", "k8s/team-vision/jupyter-anna",
                                      "k8s/team-vision/resnet-train-1"}));
  EXPECT_EQ(FindJob(b, "k8s/ml-research/llama-ft-0")->team, "research");
  EXPECT_EQ(FindJob(b, "k8s/ml-research/llama-ft-0")->project, "llm");
  EXPECT_EQ(FindJob(b, "k8s/team-vision/jupyter-anna")->team, "vision");
  EXPECT_EQ(FindJob(b, "k8s/team-vision/jupyter-anna")->project, "");
  EXPECT_EQ(FindJob(b, "hpc/4242")->team, "hpc");
  EXPECT_EQ(FindJob(b, "hpc/4242")->project, "simulation-4242");
  EXPECT_EQ(FindJob(b, "k8s/serving/vllm-7f9c")->team, "");
  // The exporter's own pod (plain pod/namespace beside exported_*) is no job.
  EXPECT_EQ(FindJob(b, "k8s/monitoring/dcgm-exporter-x1"), nullptr);
  EXPECT_EQ(FindJob(b, "k8s/team-vision/resnet-train-1")->team, "vision");

  std::vector<JobHold> on_a;
  for (const JobHold& h : b.holds) {
    if (h.device_uuid == kGpuA) on_a.push_back(h);
  }
  EXPECT_EQ(on_a, (std::vector<JobHold>{{kGpuA, "k8s/ml-research/llama-ft-0", kT1},
                                        {kGpuA, "k8s/team-vision/jupyter-anna", kT1},
                                        {kGpuA, "k8s/ml-research/llama-ft-0", kT2}}));
  EXPECT_NE(
      std::find(b.holds.begin(), b.holds.end(), JobHold{"MIG-" + kGpuC + "/3", "hpc/4242", kT1}),
      b.holds.end());
  EXPECT_NE(std::find(b.holds.begin(), b.holds.end(), JobHold{kGpuE, "k8s/batch/etl-5", kT1}),
            b.holds.end());
}

TEST(DcgmMappingTest, RemoteWriteAndScrapeMapToTheSameBatch) {
  std::vector<Family> families = FleetFamilies();
  WriteRequest req = ToWriteRequest(families, kScrapeMs);
  req.timeseries.push_back(
      {{{"__name__", "DCGM_FI_PROF_SM_ACTIVE"}, {"UUID", kGpuA}}, {{StaleMarker(), kT2 + 1}}});
  Result<WriteRequest> decoded = DecodeWriteRequest(EncodeWriteRequest(req));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  DcgmMapper m = Mapper();
  Result<DcgmBatch> a = m.MapScrape(families, kScrapeMs);
  Result<DcgmBatch> b = m.MapWriteRequest(*decoded);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  ASSERT_EQ(a->devices.size(), b->devices.size());
  for (size_t i = 0; i < a->devices.size(); ++i) {
    EXPECT_EQ(a->devices[i].uuid, b->devices[i].uuid);
    EXPECT_EQ(a->devices[i].share, b->devices[i].share);
    EXPECT_EQ(a->devices[i].memory_mib, b->devices[i].memory_mib);
  }
  ASSERT_EQ(a->samples.size(), b->samples.size());
  for (size_t i = 0; i < a->samples.size(); ++i) {
    EXPECT_EQ(a->samples[i].device_uuid, b->samples[i].device_uuid);
    EXPECT_EQ(a->samples[i].sm_active, b->samples[i].sm_active);
    EXPECT_EQ(a->samples[i].gpu_util, b->samples[i].gpu_util);
    EXPECT_EQ(a->samples[i].health, b->samples[i].health);
  }
  EXPECT_EQ(a->holds, b->holds);
  EXPECT_EQ(a->jobs.size(), b->jobs.size());
  EXPECT_EQ(a->ignored_families, b->ignored_families);
  EXPECT_EQ(b->stale_points, 1);
}

std::string Line(std::string_view family, std::string_view labels, std::string_view value) {
  return std::string(family) + "{UUID=\"GPU-1\",modelName=\"NVIDIA H200\"" + std::string(labels) +
         "} " + std::string(value) + "\n";
}

Result<DcgmBatch> MapText(const std::string& text, DcgmMappingConfig config = {}) {
  return Mapper(std::move(config)).MapScrape(ParseOrDie(text), kScrapeMs);
}

TEST(DcgmMappingTest, ImpossibleValuesFailTheBatchNamingTheLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Line("DCGM_FI_PROF_SM_ACTIVE", "", "50"), "line 1: DCGM_FI_PROF_SM_ACTIVE{UUID=\"GPU-1\""},
      {Line("DCGM_FI_PROF_SM_ACTIVE", "", "50"), "ratio 50 is outside 0..1"},
      {Line("DCGM_FI_DEV_GPU_UTIL", "", "250"), "percent 250 is outside 0..100"},
      {Line("DCGM_FI_PROF_DRAM_ACTIVE", "", "NaN"), "value NaN is not finite"},
      {Line("DCGM_FI_DEV_POWER_USAGE", "", "-3"), "-3 W is negative"},
      {Line("DCGM_FI_DEV_FB_USED", "", "+Inf"), "value +Inf is not finite"},
      {Line("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "", "-1"), "energy -1 mJ is negative"},
      {Line("DCGM_FI_DEV_XID_ERRORS", "", "4.5"), "4.5 is not an XID code"},
      {"DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\"} 0.5\n", "no UUID label"},
      {Line("DCGM_FI_PROF_SM_ACTIVE", ",GPU_I_PROFILE=\"weird\",GPU_I_ID=\"1\"", "0.5"),
       "GPU_I_PROFILE \"weird\": want a MIG profile such as 3g.71gb"},
      {Line("DCGM_FI_PROF_SM_ACTIVE", ",GPU_I_PROFILE=\"8g.141gb\",GPU_I_ID=\"1\"", "0.5"),
       "8 slices on a 7-slice NVIDIA H200"},
      {Line("DCGM_FI_PROF_SM_ACTIVE", ",GPU_I_PROFILE=\"1g.18gb\",GPU_I_ID=\"x\"", "0.5"),
       "GPU_I_ID \"x\": want the GPU instance id"},
      {Line("DCGM_FI_PROF_SM_ACTIVE", ",pod=\"a\"", "0.5") +
           Line("DCGM_FI_PROF_SM_ACTIVE", ",pod=\"b\"", "0.6"),
       "conflicting values 0.5 and 0.6"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Result<DcgmBatch> r = MapText(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(DcgmMappingTest, SkipModeDropsBadPointsAndKeepsTheRest) {
  DcgmMappingConfig c;
  c.on_bad_value = DcgmMappingConfig::BadValue::kSkip;
  std::string text =
      Line("DCGM_FI_PROF_SM_ACTIVE", "", "NaN") + Line("DCGM_FI_DEV_GPU_UTIL", "", "40");
  Result<DcgmBatch> r = MapText(text, c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped_points, 1);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_THAT(r->skipped[0], HasSubstr("not finite"));
  ASSERT_EQ(r->samples.size(), 1u);
  EXPECT_FALSE(r->samples[0].sm_active.has_value());
  EXPECT_EQ(r->samples[0].gpu_util, 0.4);
  EXPECT_EQ(r->samples[0].activity_source(), ActivitySource::kGpuUtil);
}

TEST(DcgmMappingTest, BlankValuesAreNoReadings) {
  std::string text = Line("DCGM_FI_DEV_POWER_USAGE", "", "140737488355328") +
                     Line("DCGM_FI_DEV_FB_USED", "", "2147483632") +
                     Line("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "", "9223372036854775792") +
                     Line("DCGM_FI_DEV_GPU_UTIL", "", "7");
  Result<DcgmBatch> r = MapText(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->blank_points, 3);
  ASSERT_EQ(r->samples.size(), 1u);
  EXPECT_FALSE(r->samples[0].power_watts.has_value());
  EXPECT_EQ(r->samples[0].gpu_util, 0.07);
  EXPECT_FALSE(IsDcgmBlank(2147483631.0));
  EXPECT_FALSE(IsDcgmBlank(5551899580.0));
}

TEST(DcgmMappingTest, HealthFamiliesDegradeOrFailTheDevice) {
  auto health = [](const std::string& family, const std::string& value) {
    Result<DcgmBatch> r = MapText(Line(family, "", value));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && !r->samples.empty() ? r->samples[0].health : Health::kOk;
  };
  EXPECT_EQ(health("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1"), Health::kUnhealthy);
  EXPECT_EQ(health("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0"), Health::kOk);
  EXPECT_EQ(health("DCGM_FI_DEV_ROW_REMAP_PENDING", "1"), Health::kDegraded);
  EXPECT_EQ(health("DCGM_FI_DEV_RETIRED_PENDING", "2"), Health::kDegraded);
  EXPECT_EQ(health("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1"), Health::kDegraded);
  EXPECT_EQ(health("DCGM_FI_DEV_XID_ERRORS", "48"), Health::kUnhealthy);
  EXPECT_EQ(health("DCGM_FI_DEV_XID_ERRORS", "13"), Health::kOk);
  // The worst figure of the instant wins.
  Result<DcgmBatch> r = MapText(Line("DCGM_FI_DEV_XID_ERRORS", "", "94") +
                                Line("DCGM_FI_DEV_ROW_REMAP_FAILURE", "", "1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples[0].health, Health::kUnhealthy);

  EXPECT_EQ(XidHealth(0), Health::kOk);
  EXPECT_EQ(XidHealth(31), Health::kOk);
  EXPECT_EQ(XidHealth(79), Health::kLost);
  EXPECT_EQ(XidHealth(95), Health::kUnhealthy);
  EXPECT_EQ(XidHealth(92), Health::kDegraded);
}

TEST(DcgmMappingTest, NodeFallsBackToTheScrapeInstance) {
  Result<DcgmBatch> r = MapText(
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-1\",instance=\"10.0.0.7:9400\"} 1\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-2\",instance=\"[fd00::1]:9400\"} 1\n"
      "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-3\",hostname=\"lower\",instance=\"x:1\"} 1\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->devices.size(), 3u);
  EXPECT_EQ(r->devices[0].node, "10.0.0.7");
  EXPECT_EQ(r->devices[1].node, "fd00::1");
  EXPECT_EQ(r->devices[2].node, "lower");
}

TEST(DcgmMappingTest, MalformedRulesAreRefusedByIndex) {
  using M = LabelRule::Match;
  auto create = [](std::vector<LabelRule> rules) {
    DcgmMappingConfig c;
    c.rules = std::move(rules);
    return DcgmMapper::Create(std::move(c)).status();
  };
  EXPECT_THAT(
      create({{"namespace", M::kEquals, "a", "t", ""}, {"ns", M::kRegex, "(", "t", ""}}).message(),
      HasSubstr("rules[1]: regex \"(\""));
  EXPECT_THAT(create({{"namespace", M::kRegex, "team-(.*)", "$2", ""}}).message(),
              HasSubstr("rules[0]: refers to $2 but regex \"team-(.*)\" has 1 group(s)"));
  EXPECT_THAT(create({{"", M::kEquals, "a", "t", ""}}).message(), HasSubstr("is not a label name"));
  EXPECT_THAT(create({{"pod", M::kEquals, "a", "", ""}}).message(),
              HasSubstr("sets neither team nor project"));
  DcgmMappingConfig c;
  c.mig_slices = {{"X100", 9}};
  EXPECT_THAT(DcgmMapper::Create(c).status().message(), HasSubstr("want a divisor of 840"));
  EXPECT_EQ(MigInstanceUuid("GPU-1", 7), "MIG-GPU-1/7");
}

TEST(DcgmMappingTest, FirstMatchingRuleDecidesTeamAndProjectSeparately) {
  using M = LabelRule::Match;
  DcgmMappingConfig c;
  c.rules = {{"container", M::kEquals, "main", "", "from-container"},
             {"namespace", M::kRegex, "(.*)-prod", "$1", "from-namespace"},
             {"namespace", M::kRegex, ".*", "fallback", "fallback"}};
  Result<DcgmBatch> r = MapText(
      Line("DCGM_FI_DEV_GPU_UTIL", ",namespace=\"search-prod\",pod=\"p\",container=\"main\"", "1"),
      c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->jobs.size(), 1u);
  EXPECT_EQ(r->jobs[0].team, "search");
  EXPECT_EQ(r->jobs[0].project, "from-container");
}

TEST(DcgmMappingTest, HugeLabelValuesDoNotBreakRegexRules) {
  using M = LabelRule::Match;
  DcgmMappingConfig c;
  c.rules = {{"namespace", M::kRegex, "(a|b)*", "ab", ""}};
  std::string huge(200000, 'a');
  Result<DcgmBatch> r =
      MapText(Line("DCGM_FI_DEV_GPU_UTIL", ",namespace=\"" + huge + "\",pod=\"p\"", "1") +
                  Line("DCGM_FI_DEV_GPU_UTIL", ",namespace=\"abab\",pod=\"q\",UUID2=\"x\"", "1"),
              c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->jobs.size(), 2u);
  EXPECT_EQ(r->jobs[0].team, "");  // k8s/aaaa.../p: too long to match
  EXPECT_EQ(r->jobs[1].team, "ab");
}

// ---- Real captures -------------------------------------------------------------------------

TEST(DcgmMappingRealDataTest, EveryCaptureMapsToOneDeviceWithUtilization) {
  std::filesystem::path dir = testutil::SharedData("telemetry/dcgm_exporter");
  if (!std::filesystem::exists(dir)) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data at " << dir;
  DcgmMapper m = Mapper();
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".prom") continue;
    ++files;
    SCOPED_TRACE(e.path().filename().string());
    std::string text = testutil::ReadFile(e.path().string()).value_or("");
    Result<DcgmBatch> r = m.MapScrape(ParseOrDie(text), kScrapeMs);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->devices.size(), 1u);
    const Device& d = r->devices[0];
    EXPECT_EQ(d.uuid.substr(0, 4), "GPU-");
    EXPECT_FALSE(d.node.empty());
    EXPECT_FALSE(d.model.empty());
    EXPECT_GT(d.memory_mib, 1000);
    ASSERT_EQ(r->samples.size(), 1u);
    const Sample& s = r->samples[0];
    ASSERT_TRUE(s.gpu_util.has_value());
    EXPECT_GE(*s.gpu_util, 0.0);
    EXPECT_LE(*s.gpu_util, 1.0);
    EXPECT_EQ(s.health, Health::kOk);
    EXPECT_EQ(r->ignored_families.count("DCGM_FI_DEV_SM_CLOCK"), 1u);
    EXPECT_TRUE(r->jobs.empty());
  }
  EXPECT_EQ(files, 5u);
}

TEST(DcgmMappingRealDataTest, T4CaptureFiguresAreConverted) {
  std::optional<std::string> text = testutil::ReadFile(
      testutil::SharedData("telemetry/dcgm_exporter/T4_ericsson_dcgm-exporter.prom"));
  if (!text) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data";
  Result<DcgmBatch> r = Mapper().MapScrape(ParseOrDie(*text), kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Sample& s = r->samples.at(0);
  EXPECT_EQ(s.device_uuid, "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a");
  EXPECT_DOUBLE_EQ(*s.gpu_util, 0.91);
  EXPECT_DOUBLE_EQ(*s.power_watts, 68.244);
  EXPECT_DOUBLE_EQ(*s.tensor_active, 0.005822);
  EXPECT_DOUBLE_EQ(*s.dram_active, 0.092781);
  EXPECT_DOUBLE_EQ(*r->extras.at(0).gr_engine_active, 0.156205);
  EXPECT_DOUBLE_EQ(*r->extras.at(0).energy_joules_total, 15152422.938);
  EXPECT_EQ(r->devices[0].model, "Tesla T4");
  EXPECT_EQ(r->devices[0].node, "cp-bm14r7");
}

TEST(DcgmMappingRealDataTest, MigSnippetsGiveMigDevicesAndPods) {
  std::optional<std::string> text =
      testutil::ReadFile(testutil::SharedData("telemetry/dcgm_exporter/mig_label_snippets.txt"));
  if (!text) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data";
  Result<DcgmBatch> r = Mapper().MapScrape(ParseOrDie(*text, ParseMode::kLenient), kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string h100 = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77";
  for (int gi : {7, 8, 9}) {
    const Device* d = FindDevice(*r, MigInstanceUuid(h100, gi));
    ASSERT_NE(d, nullptr) << gi;
    EXPECT_EQ(d->share, (Share{1, 7}));
    EXPECT_EQ(d->mig_profile, "1g.10gb");
    EXPECT_EQ(d->node, "gsrh100-074");
  }
  const Device* a100 =
      FindDevice(*r, MigInstanceUuid("GPU-06357e72-c3ee-614b-775f-a89e18e8cc08", 0));
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->share, (Share{7, 7}));  // "7g.79gb": the whole GPU as one instance
  EXPECT_NE(FindJob(*r, "k8s/model-playground-stg/tts-predictor-00011-deployment-5554f75554-8j8pl"),
            nullptr);
  EXPECT_EQ(r->jobs.size(), 2u);     // GI 8 and the A100 have empty pod labels
  ASSERT_EQ(r->samples.size(), 3u);  // GR_ENGINE_ACTIVE of the three H100 instances
  for (const SampleExtras& x : r->extras) EXPECT_EQ(x.gr_engine_active, 0.0);
}

TEST(DcgmMappingRealDataTest, VllmScrapeIsAllIgnored) {
  std::optional<std::string> text =
      testutil::ReadFile(testutil::SharedData("telemetry/vllm/vllm_v1_idle.prom"));
  if (!text) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data";
  std::vector<Family> families = ParseOrDie(*text);
  Result<DcgmBatch> r = Mapper().MapScrape(families, kScrapeMs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->devices.empty());
  EXPECT_TRUE(r->samples.empty());
  EXPECT_EQ(r->used_points, 0);
  int64_t points = 0;
  for (const auto& [name, n] : r->ignored_families) points += n;
  size_t samples = 0;
  for (const Family& f : families) samples += f.samples.size();
  EXPECT_EQ(points, static_cast<int64_t>(samples));
  EXPECT_GT(r->ignored_families.count("vllm:num_requests_running"), 0u);
}

}  // namespace
}  // namespace gpuledger::prometheus
