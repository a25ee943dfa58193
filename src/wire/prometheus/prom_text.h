// The Prometheus text exposition format (version 0.0.4): a streaming parser that turns
// exposition text into metric families, and a writer that produces exposition which
// `promtool check metrics` accepts without lint findings.
//
// Parser contract, in brief (docs/prometheus.md has the full list):
// - Lines end in "\n" ("\r\n" is tolerated); blank lines are skipped; a line whose first
//   non-blank character is '#' is a comment unless its first token is HELP or TYPE.
// - A family starts at a HELP or TYPE line, or at a sample whose name belongs to no open
//   family. Samples of a histogram family are named NAME_bucket (with an `le` label),
//   NAME_sum and NAME_count; those of a summary NAME (with a `quantile` label), NAME_sum
//   and NAME_count. A family's lines must be contiguous.
// - Values are decimal floats (exponents allowed), NaN, +Inf, -Inf (Go's spellings,
//   case-insensitive); timestamps are optional int64 milliseconds since the epoch.
// - Two modes. kStrict stops at the first bad line with a Status naming source and line.
//   kLenient skips each bad line, counts it in TextParseStats::bad_lines and keeps the
//   first messages; a family that reappears after others is emitted a second time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "wire/prometheus/labels.h"

namespace gpuledger::prometheus {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram, kSummary, kUntyped };
// "counter", "gauge", "histogram", "summary", "untyped".
std::string_view MetricTypeName(MetricType type);
// The inverse of MetricTypeName; nullopt for anything else.
std::optional<MetricType> ParseMetricType(std::string_view text);

// What a sample line is within its family.
enum class SampleRole : uint8_t {
  kValue,     // counter, gauge or untyped value
  kBucket,    // histogram NAME_bucket; bound = its `le`
  kSum,       // histogram or summary NAME_sum
  kCount,     // histogram or summary NAME_count
  kQuantile,  // summary NAME; bound = its `quantile`
};

struct TextSample {
  std::string name;  // as written: "foo_bucket" for a bucket of histogram "foo"
  Labels labels;     // as written, `le` and `quantile` included, in their order
  double value = 0;
  std::optional<int64_t> timestamp_ms;
  SampleRole role = SampleRole::kValue;
  double bound = 0;  // `le` of a bucket or `quantile` of a quantile; 0 otherwise
  size_t line = 0;   // 1-based line it came from
};

struct Family {
  std::string name;
  MetricType type = MetricType::kUntyped;
  std::string help;  // unescaped
  bool has_help = false;
  bool has_type = false;
  std::vector<TextSample> samples;  // may be empty: a HELP/TYPE with no samples
  size_t line = 0;                  // 1-based line where the family started
};

enum class ParseMode : uint8_t { kStrict, kLenient };

struct TextParseOptions {
  ParseMode mode = ParseMode::kStrict;
  // Names the input in messages: "dcgm.prom:12: ...". Empty: "line 12: ...".
  std::string source;
  // A longer line is an error (it bounds the memory a stream can make the parser hold).
  size_t max_line_bytes = size_t{1} << 20;
  // How many messages of skipped lines kLenient keeps in TextParseStats::errors.
  size_t max_errors_kept = 10;
};

struct TextParseStats {
  size_t lines = 0;                 // lines seen, blank and comment lines included
  size_t samples = 0;               // samples emitted
  size_t families = 0;              // families emitted
  size_t bad_lines = 0;             // kLenient: lines skipped
  size_t split_families = 0;        // kLenient: families emitted again because they reappeared
  std::vector<std::string> errors;  // kLenient: the first max_errors_kept messages
};

// Parses exposition text fed in chunks of any size (a line may span chunks) and hands
// each family to `sink` when it is complete: when a line of another family arrives, or
// at Finish(). Not thread-safe; one parser per stream.
class TextParser {
 public:
  // Receives each complete family. A non-OK Status stops the parse and is returned by
  // the Feed() or Finish() call that invoked it.
  using FamilySink = std::function<Status(Family&&)>;

  TextParser(TextParseOptions options, FamilySink sink);

  // Parses the complete lines in `chunk` (with what earlier chunks left unfinished).
  // After an error every later call returns the same error.
  Status Feed(std::string_view chunk);
  // Parses a last line without a final "\n" and hands over the open family.
  // REQUIRES: called once, after the last Feed().
  Status Finish();

  const TextParseStats& stats() const { return stats_; }

 private:
  Status ParseLine(std::string_view line);
  Status HandleLine(std::string_view line);  // applies the mode to ParseLine's status
  Status ParseComment(std::string_view rest);
  Status ParseSampleLine(std::string_view line);
  Status OpenFamily(std::string_view name);
  Status CloseFamily();
  Status LineError(std::string_view what) const;

  TextParseOptions options_;
  FamilySink sink_;
  TextParseStats stats_;
  Status failed_;
  std::string pending_;         // an unfinished line carried from the last chunk
  bool skipping_long_ = false;  // discarding the rest of an overlong line
  size_t line_no_ = 0;
  std::optional<Family> current_;
  // Names of families already emitted, with the line each started at.
  std::unordered_map<std::string, size_t> seen_;
};

struct ParsedText {
  std::vector<Family> families;
  TextParseStats stats;
};

// Parses a whole exposition. On failure (kStrict) nothing is returned but the Status.
Result<ParsedText> ParseText(std::string_view text, const TextParseOptions& options = {});

// Parses a sample value as the format spells it ("1", "-2.5e-3", "NaN", "+Inf", ...).
std::optional<double> ParseValue(std::string_view text);
// Formats a value so that ParseValue (and Prometheus) reads back the same double:
// shortest round-trip digits, "NaN", "+Inf", "-Inf".
std::string FormatValue(double value);

// ---- Histograms and summaries, grouped per series --------------------------------------

struct HistogramBucket {
  double le = 0;
  double count = 0;  // cumulative
  bool operator==(const HistogramBucket&) const = default;
};
struct HistogramSeries {
  Labels labels;                         // without `le`
  std::vector<HistogramBucket> buckets;  // in ascending `le`
  std::optional<double> sum;
  std::optional<double> count;
};
// Groups a histogram family's samples into one series per label set (minus `le`).
// Fails, naming the series, when buckets are not cumulative or lack the +Inf bucket.
// REQUIRES: family.type == kHistogram.
Result<std::vector<HistogramSeries>> GroupHistogram(const Family& family);

struct SummaryQuantile {
  double quantile = 0;
  double value = 0;
  bool operator==(const SummaryQuantile&) const = default;
};
struct SummarySeries {
  Labels labels;                           // without `quantile`
  std::vector<SummaryQuantile> quantiles;  // in ascending quantile
  std::optional<double> sum;
  std::optional<double> count;
};
// Groups a summary family's samples per label set (minus `quantile`).
// REQUIRES: family.type == kSummary.
Result<std::vector<SummarySeries>> GroupSummary(const Family& family);

// ---- Writer ------------------------------------------------------------------------------

// One entry of a metric catalog: the exposition's HELP and TYPE lines come from it.
struct MetricSpec {
  std::string name;  // the family name; a counter's ends in "_total"
  MetricType type = MetricType::kGauge;
  // The base unit the name ends with ("seconds", "bytes", "joules", "ratio", ...), before
  // "_total" for a counter; empty for a unitless figure or a dcgm-exporter-compatible name.
  std::string unit;
  std::string help;  // one line or several; escaped by the writer
};

// OK when the spec makes lint-clean exposition: a valid name without colons (they are
// for recording rules) or camelCase, a non-empty valid-UTF-8 help, a counter named
// *_total, no *_total/_count/_sum/_bucket on other types, the unit at the end of the
// name, and a base unit (seconds, not milliseconds). The message names the spec.
Status ValidateMetricSpec(const MetricSpec& spec);

// Writes exposition text. Usage: BeginFamily(spec), then that family's samples; then
// the next family. Every method validates its input and on failure writes nothing.
class TextWriter {
 public:
  // Writes the HELP and TYPE lines. Fails when the spec is invalid or its family (or a
  // sample name it implies) was written before.
  Status BeginFamily(const MetricSpec& spec);
  // A counter, gauge or untyped sample of the current family.
  Status WriteSample(const Labels& labels, double value,
                     std::optional<int64_t> timestamp_ms = std::nullopt);
  // A histogram series. `buckets` in ascending `le`, cumulative, ending with +Inf.
  Status WriteHistogram(const Labels& labels, const std::vector<HistogramBucket>& buckets,
                        double sum, double count,
                        std::optional<int64_t> timestamp_ms = std::nullopt);
  // A summary series. `quantiles` within [0, 1].
  Status WriteSummary(const Labels& labels, const std::vector<SummaryQuantile>& quantiles,
                      double sum, double count, std::optional<int64_t> timestamp_ms = std::nullopt);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  Status CheckLabels(const Labels& labels, std::string_view reserved) const;
  void AppendSample(std::string_view suffix, const Labels& labels, const Label* extra, double value,
                    std::optional<int64_t> timestamp_ms);

  std::string out_;
  std::optional<MetricSpec> current_;
  std::unordered_set<std::string> written_;  // family and sample names written
};

// Writes parsed families back as exposition (HELP and TYPE where the family had them,
// samples as parsed). For round trips and re-exposition; no lint rules are applied.
// Fails when a family or sample cannot be written back faithfully (invalid name,
// invalid UTF-8), naming it.
Result<std::string> WriteFamilies(const std::vector<Family>& families);

}  // namespace gpuledger::prometheus
