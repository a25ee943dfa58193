// Runs the hand-checked golden files in testdata/golden/*.test. Layout (after DuckDB's
// sqllogictest): "# name:" and "# description:" header lines, then the inputs
//   policy NAME            placement topology|spread
//   cluster ... end        (TOML)
//   jobs ... end           (our CSV format)
// a "----" separator, then the expected results, every job covered:
//   job ID start S end E [preemptions N] [restarts N] [failed]
//   job ID unschedulable   |   job ID starved   |   job ID start S starved
//   summary KEY VALUE                      |   slo QUEUE met|missed RATIO
// Times are seconds. Lines starting with '#' are comments.
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpuledger::sim {
namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(GPULEDGER_SOURCE_DIR) / "src/sim/testdata/golden";

struct GoldenCase {
  std::string name;
  std::string policy = "fifo";
  std::string placement = "topology";
  std::string cluster_toml;
  std::string jobs_csv;
  std::vector<std::pair<int, std::string>> expected;  // (line number, text)
};

std::string Seconds(int64_t ms) {
  std::string s = fmt::format("{:.3f}", static_cast<double>(ms) / 1000.0);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

Result<GoldenCase> ParseGolden(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path.string());
  GoldenCase c;
  std::string line;
  int line_no = 0;
  std::string* block = nullptr;
  bool after_separator = false;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = Trimmed(line);
    const std::string where = fmt::format("{}:{}", path.filename().string(), line_no);
    if (block != nullptr) {
      if (t == "end") {
        block = nullptr;
      } else {
        *block += line + "\n";
      }
      continue;
    }
    if (t.rfind("# name:", 0) == 0) c.name = Trimmed(t.substr(7));
    if (t.empty() || t[0] == '#') continue;
    if (after_separator) {
      c.expected.emplace_back(line_no, t);
    } else if (t == "----") {
      after_separator = true;
    } else if (t.rfind("policy ", 0) == 0) {
      c.policy = Trimmed(t.substr(7));
    } else if (t.rfind("placement ", 0) == 0) {
      c.placement = Trimmed(t.substr(10));
    } else if (t == "cluster") {
      block = &c.cluster_toml;
    } else if (t == "jobs") {
      block = &c.jobs_csv;
    } else {
      return InvalidArgument(where + ": unexpected line: " + t);
    }
  }
  if (c.name.empty()) return InvalidArgument(path.string() + ": no '# name:' header");
  if (!after_separator) return InvalidArgument(path.string() + ": no '----' separator");
  return c;
}

// The actual result for an expected line, in the same words.
std::string Actual(const std::string& expected, const SimResult& r,
                   const std::map<std::string, size_t>& index) {
  std::istringstream words(expected);
  std::string kind, key;
  words >> kind >> key;
  if (kind == "job") {
    auto it = index.find(key);
    if (it == index.end()) return "no job " + key;
    const JobOutcome& o = r.outcomes[it->second];
    if (o.status == JobStatus::kUnschedulable) return "job " + key + " unschedulable";
    if (o.status == JobStatus::kStarved) {
      return o.start_ms < 0 ? "job " + key + " starved" : fmt::format("job {} start {} starved", key, Seconds(o.start_ms));
    }
    std::string s = fmt::format("job {} start {} end {}", key, Seconds(o.start_ms), Seconds(o.end_ms));
    if (o.preemptions > 0) s += fmt::format(" preemptions {}", o.preemptions);
    if (o.restarts > 0) s += fmt::format(" restarts {}", o.restarts);
    if (o.status == JobStatus::kFailed) s += " failed";
    return s;
  }
  if (kind == "slo") {
    for (const auto& q : r.queues) {
      if (q.name == key) return fmt::format("slo {} {} {:.4f}", key, q.slo_met ? "met" : "missed", q.slo_granted_ratio);
    }
    return "no queue " + key;
  }
  if (kind == "summary") {
    std::string v;
    if (key == "completed") v = fmt::format("{}", r.completed);
    else if (key == "unschedulable") v = fmt::format("{}", r.unschedulable);
    else if (key == "starved") v = fmt::format("{}", r.starved);
    else if (key == "failed") v = fmt::format("{}", r.failed);
    else if (key == "failed_gpu_seconds") v = fmt::format("{:.3f}", r.failed_gpu_hours * 3600.0);
    else if (key == "completion_p95_s") v = Seconds(r.completion.p95_ms);
    else if (key == "slowdown_mean") v = fmt::format("{:.4f}", r.slowdown.mean);
    else if (key == "durations") v = r.durations.empty() ? "none" : r.durations;
    else if (key == "makespan_s") v = Seconds(r.makespan_ms);
    else if (key == "wait_mean_s") v = fmt::format("{:.3f}", r.wait.mean_ms / 1000.0);
    else if (key == "wait_p50_s") v = Seconds(r.wait.p50_ms);
    else if (key == "wait_p95_s") v = Seconds(r.wait.p95_ms);
    else if (key == "wait_p99_s") v = Seconds(r.wait.p99_ms);
    else if (key == "completion_mean_s") v = fmt::format("{:.3f}", r.completion.mean_ms / 1000.0);
    else if (key == "gpu_seconds") v = fmt::format("{:.3f}", r.gpu_hours * 3600.0);
    else if (key == "allocated_ratio") v = fmt::format("{:.4f}", r.allocated_ratio);
    else if (key == "active_ratio") v = r.active_ratio ? fmt::format("{:.4f}", *r.active_ratio) : "none";
    else if (key == "cost") v = r.cost.ToString();
    else if (key == "preemptions") v = fmt::format("{}", r.preemptions);
    else if (key == "conservation") v = r.conservation.ok() ? "ok" : r.conservation.message();
    else return "unknown summary key " + key;
    return "summary " + key + " " + v;
  }
  return "unknown line kind " + kind;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesHandCheckedResults) {
  auto c = ParseGolden(kGoldenDir / GetParam());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto cluster = ParseClusterToml(c->cluster_toml, GetParam() + " cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto trace = ReadTraceText(c->jobs_csv, GetParam() + " jobs", TraceFormat::kGpuledgerCsv, ReadOptions());
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options;
  auto placement = ParsePlacementMode(c->placement);
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  options.placement = *placement;
  auto r = Simulate(*cluster, trace->jobs, c->policy, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->conservation.ok()) << r->conservation.ToString();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < trace->jobs.size(); ++i) index[trace->jobs[i].id] = i;
  std::set<std::string> covered;
  for (const auto& [line, text] : c->expected) {
    EXPECT_EQ(Actual(text, *r, index), text) << GetParam() << ":" << line << " (" << c->name << ")";
    std::istringstream words(text);
    std::string kind, key;
    words >> kind >> key;
    if (kind == "job") covered.insert(key);
  }
  for (const auto& j : trace->jobs) EXPECT_TRUE(covered.count(j.id)) << GetParam() << ": job " << j.id << " not checked";
}

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kGoldenDir)) {
    if (e.path().extension() == ".test") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(GoldenFiles()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param.substr(0, param.param.size() - 5);
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace gpuledger::sim
