#include "wire/prometheus/prom_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/testing/missing_component.h"
#include "wire/prometheus/test_util.h"

namespace gpuledger::prometheus {
namespace {

using ::testing::HasSubstr;

const Family* FindFamily(const ParsedText& p, std::string_view name) {
  for (const Family& f : p.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

ParsedText MustParse(std::string_view text, ParseMode mode = ParseMode::kStrict) {
  TextParseOptions o;
  o.mode = mode;
  Result<ParsedText> r = ParseText(text, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ParsedText{};
}

ParsedText ParseFixture(std::string_view name) {
  std::optional<std::string> text = testutil::ReadFile(testutil::Testdata(name));
  EXPECT_TRUE(text.has_value()) << name;
  return MustParse(text.value_or(""));
}

// Families equal down to the bits of every value.
void ExpectSameFamilies(const std::vector<Family>& a, const std::vector<Family>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].name);
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].type, b[i].type);
    EXPECT_EQ(a[i].help, b[i].help);
    EXPECT_EQ(a[i].has_help, b[i].has_help);
    EXPECT_EQ(a[i].has_type, b[i].has_type);
    ASSERT_EQ(a[i].samples.size(), b[i].samples.size());
    for (size_t j = 0; j < a[i].samples.size(); ++j) {
      const TextSample& x = a[i].samples[j];
      const TextSample& y = b[i].samples[j];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.labels, y.labels);
      EXPECT_EQ(std::isnan(x.value), std::isnan(y.value));
      if (!std::isnan(x.value)) {
        EXPECT_EQ(x.value, y.value);
      }
      EXPECT_EQ(x.timestamp_ms, y.timestamp_ms);
      EXPECT_EQ(x.role, y.role);
    }
  }
}

TEST(PromTextTest, EdgeCaseFixtureParsesStrictly) {
  ParsedText p = ParseFixture("edge_cases.prom");
  EXPECT_EQ(p.stats.bad_lines, 0u);

  const Family* esc = FindFamily(p, "gpuledger_escapes_ratio");
  ASSERT_NE(esc, nullptr);
  EXPECT_EQ(esc->type, MetricType::kGauge);
  EXPECT_EQ(esc->help, "Help with a backslash \\ and a line feed \n inside; \\q stays.");
  ASSERT_EQ(esc->samples.size(), 4u);
  EXPECT_EQ(esc->samples[0].labels,
            (Labels{{"path", "C:\\dir\\"}, {"quote", "say \"hi\""}, {"nl", "a\nb"}}));
  EXPECT_TRUE(esc->samples[1].labels.empty());
  EXPECT_EQ(esc->samples[1].value, 0.5);
  EXPECT_EQ(esc->samples[2].labels, (Labels{{"trailing", "comma"}}));
  EXPECT_EQ(esc->samples[3].labels, (Labels{{"spaced", "out"}}));
  EXPECT_EQ(esc->samples[3].value, 1e-3);

  const Family* vllm = FindFamily(p, "vllm:num_requests_running");
  ASSERT_NE(vllm, nullptr);
  EXPECT_EQ(vllm->type, MetricType::kGauge);
  EXPECT_EQ(vllm->help, "Requests in the batch (HELP after TYPE).");
  EXPECT_EQ(vllm->samples.at(0).value, 3);

  const Family* sv = FindFamily(p, "special_values");
  ASSERT_NE(sv, nullptr);
  EXPECT_EQ(sv->type, MetricType::kUntyped);
  ASSERT_EQ(sv->samples.size(), 8u);
  EXPECT_TRUE(std::isnan(sv->samples[0].value));
  EXPECT_EQ(sv->samples[1].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(sv->samples[2].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(sv->samples[3].value, -1.5e10);
  EXPECT_EQ(sv->samples[4].timestamp_ms, 1700000000000);
  EXPECT_EQ(sv->samples[5].timestamp_ms, -5000);
  EXPECT_EQ(FindLabel(sv->samples[6].labels, "city").value_or(""), "Z\xc3\xbcrich \xe2\x9c\x93");
  EXPECT_EQ(sv->samples[7].value, 2);
  EXPECT_EQ(sv->samples[7].timestamp_ms, 1700000000001);
  EXPECT_FALSE(sv->samples[0].timestamp_ms.has_value());

  const Family* rpc = FindFamily(p, "rpc_duration_seconds");
  ASSERT_NE(rpc, nullptr);
  EXPECT_EQ(rpc->type, MetricType::kSummary);
  ASSERT_EQ(rpc->samples.size(), 5u);
  EXPECT_EQ(rpc->samples[1].role, SampleRole::kQuantile);
  EXPECT_EQ(rpc->samples[1].bound, 0.5);
  EXPECT_EQ(rpc->samples[3].role, SampleRole::kSum);
  EXPECT_EQ(rpc->samples[4].role, SampleRole::kCount);

  const Family* declared = FindFamily(p, "declared_only_total");
  ASSERT_NE(declared, nullptr);
  EXPECT_EQ(declared->type, MetricType::kCounter);
  EXPECT_TRUE(declared->samples.empty());

  const Family* untyped = FindFamily(p, "untyped_metric");
  ASSERT_NE(untyped, nullptr);
  EXPECT_FALSE(untyped->has_type);
  EXPECT_EQ(untyped->line, p.stats.lines);
  EXPECT_EQ(p.stats.families, p.families.size());
}

TEST(PromTextTest, HistogramGroupsBucketsPerSeries) {
  ParsedText p = ParseFixture("edge_cases.prom");
  const Family* h = FindFamily(p, "latency_seconds");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, MetricType::kHistogram);
  Result<std::vector<HistogramSeries>> g = GroupHistogram(*h);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->size(), 2u);
  const HistogramSeries& a = (*g)[0];
  EXPECT_EQ(a.labels, (Labels{{"handler", "/a"}}));
  ASSERT_EQ(a.buckets.size(), 3u);
  EXPECT_EQ(a.buckets[0], (HistogramBucket{0.05, 24054}));
  EXPECT_TRUE(std::isinf(a.buckets[2].le));
  EXPECT_EQ(a.sum, 53423);
  EXPECT_EQ(a.count, 144320);
  EXPECT_EQ((*g)[1].sum, 3.5);
}

TEST(PromTextTest, HistogramGroupingRejectsNonCumulativeBuckets) {
  ParsedText p = MustParse(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"2\"} 3\nh_bucket{le=\"+Inf\"} 6\n");
  Result<std::vector<HistogramSeries>> g = GroupHistogram(p.families.at(0));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("cumulative"));

  ParsedText no_inf = MustParse("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_sum 1\n");
  Result<std::vector<HistogramSeries>> g2 = GroupHistogram(no_inf.families.at(0));
  ASSERT_FALSE(g2.ok());
  EXPECT_THAT(g2.status().message(), HasSubstr("+Inf"));
}

TEST(PromTextTest, SummaryGroupsQuantiles) {
  ParsedText p = ParseFixture("edge_cases.prom");
  Result<std::vector<SummarySeries>> g = GroupSummary(*FindFamily(p, "rpc_duration_seconds"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->size(), 1u);
  ASSERT_EQ((*g)[0].quantiles.size(), 3u);
  EXPECT_EQ((*g)[0].quantiles[0], (SummaryQuantile{0.01, 3102}));
  EXPECT_TRUE(std::isnan((*g)[0].quantiles[2].value));
  EXPECT_EQ((*g)[0].count, 2693);
}

TEST(PromTextTest, StrictModeStopsAtTheFirstBadLineAndNamesIt) {
  std::string text = testutil::ReadFile(testutil::Testdata("bad_lines.prom")).value_or("");
  TextParseOptions o;
  o.source = "bad_lines.prom";
  Result<ParsedText> r = ParseText(text, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("bad_lines.prom:3: bad: invalid value \"line\""));
}

TEST(PromTextTest, LenientModeSkipsAndCountsBadLines) {
  std::string text = testutil::ReadFile(testutil::Testdata("bad_lines.prom")).value_or("");
  ParsedText p = MustParse(text, ParseMode::kLenient);
  EXPECT_EQ(p.stats.bad_lines, 5u);
  ASSERT_EQ(p.stats.errors.size(), 5u);
  EXPECT_THAT(p.stats.errors[0], HasSubstr("line 3:"));
  EXPECT_THAT(p.stats.errors[1], HasSubstr("line 5: good_c: label x: unterminated value"));
  EXPECT_THAT(p.stats.errors[2], HasSubstr("line 8: second TYPE line for good_d"));
  EXPECT_THAT(p.stats.errors[3], HasSubstr("line 9: good_e: invalid timestamp"));
  EXPECT_THAT(p.stats.errors[4], HasSubstr("line 10: good_f: label x: invalid escape"));
  std::vector<std::string> names;
  for (const Family& f : p.families) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"good_a", "good_b", "good_d", "good_g"}));
  EXPECT_EQ(FindFamily(p, "good_d")->type, MetricType::kGauge);
  EXPECT_EQ(p.stats.samples, 4u);
}

TEST(PromTextTest, LenientModeKeepsOnlyTheFirstMessages) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "garbage!\n";
  TextParseOptions o;
  o.mode = ParseMode::kLenient;
  o.max_errors_kept = 3;
  Result<ParsedText> r = ParseText(text, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.bad_lines, 50u);
  EXPECT_EQ(r->stats.errors.size(), 3u);
}

struct BadCase {
  std::string text;
  std::string message;
};

TEST(PromTextTest, EachMalformedLineGetsAClearError) {
  const std::vector<BadCase> cases = {
      {"m{a=\"\\x\"} 1\n", "line 1: m: label a: invalid escape \\\"x\""},
      {"# TYPE m gaugee\n", "unknown type \"gaugee\""},
      {"# TYPE m gauge extra\n", "unexpected \"extra\" after the type"},
      {"# TYPE 1m gauge\n", "TYPE: invalid metric name \"1m\""},
      {"# HELP m-x help\n", "HELP: invalid metric name \"m-x\""},
      {"m{a=\"1\",a=\"2\"} 1\n", "duplicate label a"},
      {"m{__name__=\"x\"} 1\n", "label name __name__ is reserved"},
      {"1abc 1\n", "invalid metric name \"1abc\""},
      {"{a=\"b\"} 1\n", "expected a metric name"},
      {"m\n", "m: missing value"},
      {"m{} \n", "m: missing value"},
      {"m 1 1.5\n", "invalid timestamp \"1.5\""},
      {"m 1 100 extra\n", "unexpected \"extra\" after the timestamp"},
      {"m{,} 1\n", "invalid label name"},
      {"m{a=\"b\" 1\n", "expected ',' or '}'"},
      {"m{a=\"b\",\n", "unterminated label set"},
      {"m{a} 1\n", "label a: expected '='"},
      {"m{a=b} 1\n", "expected '\"' to open the value"},
      {"m{1a=\"b\"} 1\n", "invalid label name"},
      {"m 0x10\n", "invalid value \"0x10\""},
      {"m nan(1)\n", "invalid value \"nan(1)\""},
      {"m 1e999\n", "invalid value \"1e999\""},
      {"m --1\n", "invalid value \"--1\""},
      {"m-x 1\n", "unexpected \"-x\" after the metric name"},
      {"m{a=\"\xff\"} 1\n", "label a: invalid UTF-8"},
      {"# HELP m \xc3\n", "HELP m: invalid UTF-8"},
      {"# HELP m a\n# HELP m b\n", "line 2: second HELP line for m"},
      {"# TYPE m gauge\n# TYPE m gauge\n", "line 2: second TYPE line for m"},
      {"m 1\n# TYPE m gauge\n", "line 2: TYPE line for m after its samples"},
      {"# TYPE h histogram\nh_bucket 1\n", "h_bucket: missing label le"},
      {"# TYPE h histogram\nh_bucket{le=\"x\"} 1\n", "label le: \"x\" is not a number"},
      {"# TYPE h histogram\nh 1\n", "histogram h: sample needs a _bucket, _sum or _count"},
      {"# TYPE s summary\ns 1\n", "s: missing label quantile"},
      {"a 1\nb 1\na 2\n", "line 3: family a appears again (it started at line 1)"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    Result<ParsedText> r = ParseText(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(PromTextTest, ToleratesCrlfAndAMissingFinalNewline) {
  ParsedText p = MustParse("# TYPE m gauge\r\nm{a=\"b\"} 1\r\nm{a=\"c\"} 2");
  ASSERT_EQ(p.families.size(), 1u);
  ASSERT_EQ(p.families[0].samples.size(), 2u);
  EXPECT_EQ(p.families[0].samples[1].value, 2);
  EXPECT_EQ(p.families[0].type, MetricType::kGauge);
}

TEST(PromTextTest, EmptyAndCommentOnlyInputsHaveNoFamilies) {
  EXPECT_TRUE(MustParse("").families.empty());
  EXPECT_TRUE(MustParse("\n\n   \n# just a comment\n#\n").families.empty());
}

TEST(PromTextTest, StreamingInAnyChunkSizeMatchesTheWholeParse) {
  std::string text = testutil::ReadFile(testutil::Testdata("edge_cases.prom")).value_or("");
  ParsedText whole = MustParse(text);
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<Family> got;
    TextParser parser({}, [&got](Family&& f) {
      got.push_back(std::move(f));
      return Status::Ok();
    });
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = round == 0 ? 1 : std::uniform_int_distribution<size_t>(1, 64)(rng);
      ASSERT_TRUE(parser.Feed(std::string_view(text).substr(pos, n)).ok());
      pos += n;
    }
    ASSERT_TRUE(parser.Finish().ok());
    ExpectSameFamilies(whole.families, got);
    EXPECT_EQ(parser.stats().lines, whole.stats.lines);
  }
}

TEST(PromTextTest, FamiliesAreHandedOverAsSoonAsTheyAreComplete) {
  std::vector<std::string> seen;
  TextParser parser({}, [&seen](Family&& f) {
    seen.push_back(f.name);
    return Status::Ok();
  });
  ASSERT_TRUE(parser.Feed("a 1\na 2\nb 1\n").ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a"}));  // b may still grow
  ASSERT_TRUE(parser.Finish().ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

TEST(PromTextTest, OverlongLinesAreRefusedOrSkipped) {
  std::string text = "a 1\nlong{x=\"" + std::string(300, 'y') + "\"} 1\nb 2\n";
  TextParseOptions strict;
  strict.max_line_bytes = 100;
  Result<ParsedText> r = ParseText(text, strict);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("line 2: line longer than 100 bytes"));

  TextParseOptions lenient = strict;
  lenient.mode = ParseMode::kLenient;
  TextParser parser(lenient, [](Family&&) { return Status::Ok(); });
  for (size_t i = 0; i < text.size(); i += 7) {
    ASSERT_TRUE(parser.Feed(std::string_view(text).substr(i, 7)).ok());
  }
  ASSERT_TRUE(parser.Finish().ok());
  EXPECT_EQ(parser.stats().bad_lines, 1u);
  EXPECT_EQ(parser.stats().families, 2u);
  EXPECT_EQ(parser.stats().lines, 3u);
}

TEST(PromTextTest, ASinkErrorStopsTheParseEvenWhenLenient) {
  TextParseOptions o;
  o.mode = ParseMode::kLenient;
  TextParser parser(o, [](Family&& f) {
    if (f.name == "b") return InvalidArgument("sink refuses b");
    return Status::Ok();
  });
  ASSERT_TRUE(parser.Feed("a 1\nb 1\n").ok());
  Status st = parser.Feed("c 1\n");
  EXPECT_EQ(st.message(), "sink refuses b");
  EXPECT_EQ(parser.Feed("d 1\n").message(), "sink refuses b");
  EXPECT_EQ(parser.stats().bad_lines, 0u);
}

TEST(PromTextTest, LenientModeEmitsAReappearingFamilyAgain) {
  ParsedText p = MustParse("a 1\nb 1\na 2\n", ParseMode::kLenient);
  ASSERT_EQ(p.families.size(), 3u);
  EXPECT_EQ(p.families[2].name, "a");
  EXPECT_EQ(p.stats.split_families, 1u);
}

TEST(PromTextTest, ValuesRoundTripThroughFormatAndParse) {
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      1.0,
                                      0.1,
                                      1.0 / 3,
                                      1.7740114612872875e+09,
                                      5551899580,
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::lowest(),
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity()};
  for (double v : values) {
    std::optional<double> back = ParseValue(FormatValue(v));
    ASSERT_TRUE(back.has_value()) << FormatValue(v);
    EXPECT_EQ(std::bit_cast<uint64_t>(*back), std::bit_cast<uint64_t>(v)) << FormatValue(v);
  }
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  for (std::string_view s : {"NaN", "nan", "NAN", "+Inf", "inf", "-Infinity", "+1", "1.", ".5"}) {
    EXPECT_TRUE(ParseValue(s).has_value()) << s;
  }
  for (std::string_view s : {"", "+", "-", "Na", "1,5", "1e", "+-1", "0x1p3", " 1"}) {
    EXPECT_FALSE(ParseValue(s).has_value()) << s;
  }
}

// ---- Real captures -----------------------------------------------------------------------

std::vector<std::filesystem::path> DcgmCaptures() {
  std::vector<std::filesystem::path> out;
  std::filesystem::path dir = testutil::SharedData("telemetry/dcgm_exporter");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".prom") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t CountSampleLines(const std::string& text) {
  size_t n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    if (!line.empty() && line[0] != '#') ++n;
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return n;
}

TEST(PromTextRealDataTest, DcgmExporterCapturesParseStrictly) {
  std::vector<std::filesystem::path> files = DcgmCaptures();
  if (files.empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data at " << GPULEDGER_SHARED_DATA_DIR;
  }
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    std::string text = testutil::ReadFile(path.string()).value_or("");
    TextParseOptions o;
    o.source = path.filename().string();
    Result<ParsedText> r = ParseText(text, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stats.samples, CountSampleLines(text));
    EXPECT_NE(FindFamily(*r, "DCGM_FI_DEV_GPU_UTIL"), nullptr);
    for (const Family& f : r->families) {
      ASSERT_FALSE(f.samples.empty()) << f.name;
      EXPECT_TRUE(FindLabel(f.samples[0].labels, "UUID").has_value()) << f.name;
    }
  }
}

TEST(PromTextRealDataTest, VllmCaptureParsesWithEveryHistogramGrouped) {
  std::optional<std::string> text =
      testutil::ReadFile(testutil::SharedData("telemetry/vllm/vllm_v1_idle.prom"));
  if (!text) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data at " << GPULEDGER_SHARED_DATA_DIR;
  ParsedText p = MustParse(*text);
  size_t type_lines = 0;
  for (size_t pos = text->find("# TYPE "); pos != std::string::npos;
       pos = text->find("# TYPE ", pos + 1)) {
    ++type_lines;
  }
  EXPECT_EQ(p.families.size(), type_lines);
  EXPECT_EQ(p.stats.samples, CountSampleLines(*text));
  size_t histograms = 0;
  for (const Family& f : p.families) {
    if (f.type == MetricType::kHistogram) {
      ++histograms;
      Result<std::vector<HistogramSeries>> g = GroupHistogram(f);
      EXPECT_TRUE(g.ok()) << f.name << ": " << g.status().ToString();
    }
    if (f.type == MetricType::kSummary) {
      EXPECT_TRUE(GroupSummary(f).ok()) << f.name;
    }
  }
  EXPECT_GE(histograms, 10u);
  // A histogram whose own name ends in _total keeps its buckets.
  const Family* it = FindFamily(p, "vllm:iteration_tokens_total");
  ASSERT_NE(it, nullptr);
  EXPECT_EQ(it->type, MetricType::kHistogram);
  EXPECT_GT(it->samples.size(), 3u);
  EXPECT_EQ(it->samples[0].role, SampleRole::kBucket);
  // HELP/TYPE with no samples is a family of its own.
  const Family* http = FindFamily(p, "http_requests_total");
  ASSERT_NE(http, nullptr);
  EXPECT_TRUE(http->samples.empty());
}

TEST(PromTextRealDataTest, MigSnippetsNeedLenientModeForTheValuelessLine) {
  std::string path = testutil::SharedData("telemetry/dcgm_exporter/mig_label_snippets.txt");
  std::optional<std::string> text = testutil::ReadFile(path);
  if (!text) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "no shared data at " << GPULEDGER_SHARED_DATA_DIR;
  // The last excerpt was pasted without its value: strict mode names that line.
  Result<ParsedText> strict = ParseText(*text);
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr("DCGM_FI_DEV_SM_CLOCK: missing value"));
  TextParseOptions o;
  o.mode = ParseMode::kLenient;
  Result<ParsedText> lenient = ParseText(*text, o);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->stats.bad_lines, 1u);
  EXPECT_EQ(lenient->stats.samples, 4u);
}

// ---- Writer --------------------------------------------------------------------------------

std::vector<MetricSpec> Catalog() {
  return {
      {"gpuledger_device_active_ratio", MetricType::kGauge, "ratio",
       "Share of the device's time spent active (SM activity), 0..1."},
      {"gpuledger_gpu_seconds_total", MetricType::kCounter, "seconds",
       "GPU-seconds attributed, by bucket.\nSecond line with a backslash \\ too."},
      {"gpuledger_ingest_batch_size_bytes", MetricType::kHistogram, "bytes",
       "Size of ingested batches."},
      {"gpuledger_query_duration_seconds", MetricType::kSummary, "seconds", "Query latency."},
      {"DCGM_FI_DEV_GPU_UTIL", MetricType::kGauge, "", "GPU utilization (in %)."},
  };
}

std::string WriteCatalogExposition() {
  std::vector<MetricSpec> c = Catalog();
  TextWriter w;
  EXPECT_TRUE(w.BeginFamily(c[0]).ok());
  EXPECT_TRUE(w.WriteSample({{"device", "GPU-1"}, {"node", "a \"quoted\"\nnode\\"}}, 0.75).ok());
  EXPECT_TRUE(w.WriteSample({{"device", "GPU-2"}, {"node", "b"}}, 0.5, 1764489600000).ok());
  EXPECT_TRUE(w.BeginFamily(c[1]).ok());
  EXPECT_TRUE(w.WriteSample({{"bucket", "active"}}, 12345.5).ok());
  EXPECT_TRUE(w.WriteSample({{"bucket", "allocated_idle"}}, 0).ok());
  EXPECT_TRUE(w.BeginFamily(c[2]).ok());
  EXPECT_TRUE(
      w.WriteHistogram({{"source", "agent"}},
                       {{1024, 3}, {65536, 10}, {std::numeric_limits<double>::infinity(), 11}},
                       300000, 11)
          .ok());
  EXPECT_TRUE(w.BeginFamily(c[3]).ok());
  EXPECT_TRUE(w.WriteSummary({}, {{0.5, 0.012}, {0.99, std::nan("")}}, 1.5, 100).ok());
  EXPECT_TRUE(w.BeginFamily(c[4]).ok());
  EXPECT_TRUE(w.WriteSample({{"gpu", "0"}, {"UUID", "GPU-1"}}, 91).ok());
  return w.Take();
}

TEST(PromTextWriterTest, WrittenExpositionParsesBackExactly) {
  std::string text = WriteCatalogExposition();
  ParsedText p = MustParse(text);
  ASSERT_EQ(p.families.size(), 5u);
  const Family& ratio = p.families[0];
  EXPECT_EQ(ratio.name, "gpuledger_device_active_ratio");
  EXPECT_EQ(ratio.help, Catalog()[0].help);
  EXPECT_EQ(ratio.samples[0].labels,
            (Labels{{"device", "GPU-1"}, {"node", "a \"quoted\"\nnode\\"}}));
  EXPECT_EQ(ratio.samples[1].timestamp_ms, 1764489600000);
  EXPECT_EQ(p.families[1].help, Catalog()[1].help);
  EXPECT_EQ(p.families[1].type, MetricType::kCounter);
  Result<std::vector<HistogramSeries>> h = GroupHistogram(p.families[2]);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->at(0).buckets.size(), 3u);
  EXPECT_EQ(h->at(0).buckets[1], (HistogramBucket{65536, 10}));
  EXPECT_EQ(h->at(0).count, 11);
  Result<std::vector<SummarySeries>> s = GroupSummary(p.families[3]);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->at(0).quantiles[0], (SummaryQuantile{0.5, 0.012}));
  EXPECT_EQ(p.families[4].samples[0].value, 91);
}

TEST(PromTextWriterTest, CatalogSpecsAreCheckedForLintRules) {
  struct Case {
    MetricSpec spec;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"requests", MetricType::kCounter, "", "h"}, "a counter's name ends in _total"},
      {{"queue_total", MetricType::kGauge, "", "h"}, "only a counter's name ends in _total"},
      {{"fooBar", MetricType::kGauge, "", "h"}, "camelCase"},
      {{"job:rate5m", MetricType::kGauge, "", "h"}, "recording rules"},
      {{"x_seconds", MetricType::kGauge, "seconds", ""}, "help text is empty"},
      {{"x_seconds", MetricType::kGauge, "seconds", "\xff"}, "not valid UTF-8"},
      {{"latency", MetricType::kGauge, "seconds", "h"}, "does not end with its unit _seconds"},
      {{"io_bytes_total", MetricType::kCounter, "seconds", "h"}, "_seconds_total"},
      {{"x_milliseconds", MetricType::kGauge, "milliseconds", "h"}, "not a base unit"},
      {{"x_count", MetricType::kGauge, "", "h"}, "only histograms and summaries have _count"},
      {{"9x", MetricType::kGauge, "", "h"}, "invalid metric name"},
  };
  for (const Case& c : cases) {
    Status st = ValidateMetricSpec(c.spec);
    EXPECT_THAT(st.message(), HasSubstr(c.message)) << c.spec.name;
  }
  for (const MetricSpec& spec : Catalog()) EXPECT_TRUE(ValidateMetricSpec(spec).ok()) << spec.name;
}

TEST(PromTextWriterTest, WriterRefusesMisuseAndWritesNothing) {
  TextWriter w;
  EXPECT_EQ(w.WriteSample({}, 1).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(w.BeginFamily(Catalog()[0]).ok());
  size_t before = w.text().size();
  EXPECT_FALSE(w.WriteSample({{"a", "1"}, {"a", "2"}}, 1).ok());
  EXPECT_FALSE(w.WriteSample({{"bad-name", "1"}}, 1).ok());
  EXPECT_FALSE(w.WriteSample({{"__name__", "x"}}, 1).ok());
  EXPECT_FALSE(w.WriteSample({{"a", "\xc3"}}, 1).ok());
  EXPECT_FALSE(w.WriteHistogram({}, {}, 0, 0).ok());
  EXPECT_EQ(w.text().size(), before);
  EXPECT_THAT(w.BeginFamily(Catalog()[0]).message(), HasSubstr("was written before"));

  ASSERT_TRUE(w.BeginFamily(Catalog()[2]).ok());
  before = w.text().size();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(w.WriteHistogram({}, {{1, 1}}, 0, 0).ok());                    // no +Inf
  EXPECT_FALSE(w.WriteHistogram({}, {{2, 1}, {1, 2}, {inf, 3}}, 0, 3).ok());  // le order
  EXPECT_FALSE(w.WriteHistogram({}, {{1, 5}, {inf, 3}}, 0, 3).ok());          // not cumulative
  EXPECT_FALSE(w.WriteHistogram({{"le", "1"}}, {{inf, 3}}, 0, 3).ok());       // le is ours
  EXPECT_FALSE(w.WriteSample({}, 1).ok());                                    // not a gauge
  EXPECT_EQ(w.text().size(), before);
  ASSERT_TRUE(w.BeginFamily(Catalog()[3]).ok());
  EXPECT_FALSE(w.WriteSummary({}, {{1.5, 1}}, 0, 0).ok());
}

TEST(PromTextWriterTest, ParsedFamiliesWriteBackToTheSameFamilies) {
  ParsedText p = ParseFixture("edge_cases.prom");
  Result<std::string> text = WriteFamilies(p.families);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ParsedText again = MustParse(*text);
  ExpectSameFamilies(p.families, again.families);
}

// ---- promtool ---------------------------------------------------------------------------------

std::optional<std::string> FindPromtool() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    std::string dir =
        dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::filesystem::path candidate = std::filesystem::path(dir) / "promtool";
    if (!dir.empty() && std::filesystem::exists(candidate)) return candidate.string();
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return std::nullopt;
}

// Runs `promtool check metrics` on `text`; returns its exit code and output.
std::pair<int, std::string> Promtool(const std::string& promtool, const std::string& text,
                                     const std::string& name) {
  std::string dir = ::testing::TempDir();
  std::string in = dir + "/" + name + ".prom";
  std::string out = dir + "/" + name + ".out";
  std::ofstream(in, std::ios::binary) << text;
  std::string cmd = "'" + promtool + "' check metrics < '" + in + "' > '" + out + "' 2>&1";
  int raw = std::system(cmd.c_str());
  int code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return {code, testutil::ReadFile(out).value_or("")};
}

TEST(PromtoolTest, WriterOutputPassesPromtoolCheckMetrics) {
  std::optional<std::string> promtool = FindPromtool();
  if (!promtool) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian package prometheus)";
  }
  auto [code, output] = Promtool(*promtool, WriteCatalogExposition(), "catalog");
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "");
  // The check is real: a lint finding makes promtool fail.
  auto [bad_code, bad_output] = Promtool(*promtool, "# TYPE fooBar counter\nfooBar 1\n", "lint");
  EXPECT_NE(bad_code, 0);
  EXPECT_THAT(bad_output, HasSubstr("camelCase"));
}

TEST(PromtoolTest, RewrittenCapturesStillParseInPromtool) {
  std::optional<std::string> promtool = FindPromtool();
  if (!promtool) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian package prometheus)";
  }
  std::vector<std::string> texts;
  texts.push_back(testutil::ReadFile(testutil::Testdata("edge_cases.prom")).value_or(""));
  std::optional<std::string> vllm =
      testutil::ReadFile(testutil::SharedData("telemetry/vllm/vllm_v1_idle.prom"));
  if (vllm) texts.push_back(*vllm);
  for (size_t i = 0; i < texts.size(); ++i) {
    ParsedText p = MustParse(texts[i]);
    Result<std::string> out = WriteFamilies(p.families);
    ASSERT_TRUE(out.ok());
    auto [code, output] = Promtool(*promtool, *out, "rewrite" + std::to_string(i));
    // 0: clean; 3: lint findings only (the inputs are not ours to lint); 1: a parse error.
    EXPECT_TRUE(code == 0 || code == 3) << code << ": " << output;
    EXPECT_THAT(output, ::testing::Not(HasSubstr("error while linting")));
  }
}

}  // namespace
}  // namespace gpuledger::prometheus
