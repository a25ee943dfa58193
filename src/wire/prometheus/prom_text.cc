#include "wire/prometheus/prom_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace gpuledger::prometheus {
namespace {

constexpr std::string_view kBucketSuffix = "_bucket";
constexpr std::string_view kSumSuffix = "_sum";
constexpr std::string_view kCountSuffix = "_count";
constexpr std::string_view kTotalSuffix = "_total";

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Printable form of a token for messages: quoted, truncated, control bytes escaped.
std::string Quote(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMax) out += "...";
  out += '"';
  return out;
}

// A cursor over one line.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }
  void advance() { ++pos_; }
  void SkipBlanks() {
    while (!done() && IsBlank(s_[pos_])) ++pos_;
  }
  // The run of characters up to the next blank (or the end).
  std::string_view Token() {
    size_t start = pos_;
    while (!done() && !IsBlank(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::string_view NameRun() {
    size_t start = pos_;
    while (!done() && IsNameChar(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::string_view Rest() const { return s_.substr(std::min(pos_, s_.size())); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<int64_t> ParseTimestamp(std::string_view text) {
  int64_t v = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;  // Go's ParseInt takes a leading '+'
  if (begin == end || *begin == '+') return std::nullopt;
  auto [p, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  return v;
}

std::string UnescapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      char n = text[i + 1];
      if (n == '\\') {
        out += '\\';
        ++i;
        continue;
      }
      if (n == 'n') {
        out += '\n';
        ++i;
        continue;
      }
    }
    out += text[i];  // other escapes are kept as written
  }
  return out;
}

void AppendEscapedHelp(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    std::array<char, 32> buf{};
    auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    out.append(buf.data(), p);
  }
}

// Labels with one name removed (for grouping histogram and summary series).
Labels Without(const Labels& labels, std::string_view name) {
  Labels out;
  out.reserve(labels.size());
  for (const Label& l : labels) {
    if (l.name != name) out.push_back(l);
  }
  return out;
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "untyped";
}

std::optional<MetricType> ParseMetricType(std::string_view text) {
  for (MetricType t : {MetricType::kCounter, MetricType::kGauge, MetricType::kHistogram,
                       MetricType::kSummary, MetricType::kUntyped}) {
    if (text == MetricTypeName(t)) return t;
  }
  return std::nullopt;
}

std::optional<double> ParseValue(std::string_view text) {
  if (text.empty()) return std::nullopt;
  bool negative = false;
  std::string_view body = text;
  if (body[0] == '+' || body[0] == '-') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (EqualsIgnoreCase(body, "inf") || EqualsIgnoreCase(body, "infinity")) {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (EqualsIgnoreCase(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  // Digits only from here: from_chars would also take "nan(...)", hex is not the format's.
  if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) {
    return std::nullopt;
  }
  double v = 0;
  auto [p, ec] =
      std::from_chars(body.data(), body.data() + body.size(), v, std::chars_format::general);
  if (ec != std::errc() || p != body.data() + body.size()) return std::nullopt;
  return negative ? -v : v;
}

std::string FormatValue(double value) {
  std::string out;
  AppendValue(out, value);
  return out;
}

// ---- TextParser ----------------------------------------------------------------------------

TextParser::TextParser(TextParseOptions options, FamilySink sink)
    : options_(std::move(options)), sink_(std::move(sink)) {}

Status TextParser::LineError(std::string_view what) const {
  if (options_.source.empty()) {
    return InvalidArgument(fmt::format("line {}: {}", line_no_, what));
  }
  return InvalidArgument(fmt::format("{}:{}: {}", options_.source, line_no_, what));
}

Status TextParser::Feed(std::string_view chunk) {
  if (!failed_.ok()) return failed_;
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    std::string_view piece = chunk.substr(0, nl);  // up to the newline or the end
    bool complete = nl != std::string_view::npos;
    chunk = complete ? chunk.substr(nl + 1) : std::string_view();

    if (skipping_long_) {
      if (complete) skipping_long_ = false;  // the overlong line ends here
      continue;
    }
    if (pending_.size() + piece.size() > options_.max_line_bytes) {
      ++line_no_;
      ++stats_.lines;
      pending_.clear();
      skipping_long_ = !complete;
      Status err = LineError(fmt::format("line longer than {} bytes", options_.max_line_bytes));
      if (options_.mode == ParseMode::kStrict) {
        failed_ = err;
        return failed_;
      }
      ++stats_.bad_lines;
      if (stats_.errors.size() < options_.max_errors_kept) stats_.errors.push_back(err.message());
      continue;
    }
    if (!complete) {
      pending_.append(piece);
      break;
    }
    ++line_no_;
    ++stats_.lines;
    Status st;
    if (pending_.empty()) {
      st = HandleLine(piece);
    } else {
      pending_.append(piece);
      std::string line = std::move(pending_);
      pending_.clear();
      st = HandleLine(line);
    }
    if (!st.ok()) {
      failed_ = st;
      return failed_;
    }
  }
  return Status::Ok();
}

Status TextParser::Finish() {
  if (!failed_.ok()) return failed_;
  if (!pending_.empty()) {
    ++line_no_;
    ++stats_.lines;
    std::string line = std::move(pending_);
    pending_.clear();
    Status st = HandleLine(line);
    if (!st.ok()) {
      failed_ = st;
      return failed_;
    }
  }
  Status st = CloseFamily();
  if (!st.ok()) failed_ = st;
  return st;
}

Status TextParser::HandleLine(std::string_view line) {
  Status st = ParseLine(line);
  if (st.ok() || !failed_.ok()) return st;  // the sink's own errors are never skipped
  if (options_.mode == ParseMode::kStrict) return st;
  ++stats_.bad_lines;
  if (stats_.errors.size() < options_.max_errors_kept) stats_.errors.push_back(st.message());
  return Status::Ok();
}

Status TextParser::ParseLine(std::string_view line) {
  // Leading and trailing blanks are insignificant; a trailing '\r' (CRLF input) too.
  size_t b = 0;
  while (b < line.size() && IsBlank(line[b])) ++b;
  size_t e = line.size();
  while (e > b && (IsBlank(line[e - 1]) || line[e - 1] == '\r')) --e;
  line = line.substr(b, e - b);
  if (line.empty()) return Status::Ok();
  if (line[0] == '#') return ParseComment(line.substr(1));
  return ParseSampleLine(line);
}

Status TextParser::CloseFamily() {
  if (!current_) return Status::Ok();
  Family done = std::move(*current_);
  current_.reset();
  seen_.emplace(done.name, done.line);
  ++stats_.families;
  stats_.samples += done.samples.size();
  Status st = sink_(std::move(done));
  if (!st.ok()) failed_ = st;
  return st;
}

Status TextParser::OpenFamily(std::string_view name) {
  auto it = seen_.find(std::string(name));
  if (it != seen_.end()) {
    if (options_.mode == ParseMode::kStrict) {
      return LineError(
          fmt::format("family {} appears again (it started at line {}); a family's lines must be "
                      "contiguous",
                      name, it->second));
    }
    ++stats_.split_families;
  }
  GPULEDGER_RETURN_IF_ERROR(CloseFamily());
  current_.emplace();
  current_->name = std::string(name);
  current_->line = line_no_;
  return Status::Ok();
}

Status TextParser::ParseComment(std::string_view rest) {
  Cursor c(rest);
  c.SkipBlanks();
  std::string_view keyword = c.Token();
  bool help = keyword == "HELP";
  if (!help && keyword != "TYPE") return Status::Ok();  // an ordinary comment
  c.SkipBlanks();
  std::string_view name = c.Token();
  if (!IsValidMetricName(name)) {
    return LineError(fmt::format("{}: invalid metric name {}", keyword, Quote(name)));
  }
  c.SkipBlanks();
  if (help) {
    std::string_view doc = c.Rest();
    if (!IsValidUtf8(doc)) return LineError(fmt::format("HELP {}: invalid UTF-8", name));
    if (current_ && current_->name == name) {
      if (current_->has_help) return LineError(fmt::format("second HELP line for {}", name));
    } else {
      GPULEDGER_RETURN_IF_ERROR(OpenFamily(name));
    }
    current_->help = UnescapeHelp(doc);
    current_->has_help = true;
    return Status::Ok();
  }
  std::string_view type_text = c.Token();
  c.SkipBlanks();
  if (!c.done()) {
    return LineError(fmt::format("TYPE {}: unexpected {} after the type", name, Quote(c.Rest())));
  }
  std::optional<MetricType> type = ParseMetricType(type_text);
  if (!type) {
    return LineError(
        fmt::format("TYPE {}: unknown type {}; want counter, gauge, histogram, summary or untyped",
                    name, Quote(type_text)));
  }
  if (current_ && current_->name == name) {
    if (current_->has_type) return LineError(fmt::format("second TYPE line for {}", name));
    if (!current_->samples.empty()) {
      return LineError(fmt::format("TYPE line for {} after its samples", name));
    }
  } else {
    GPULEDGER_RETURN_IF_ERROR(OpenFamily(name));
  }
  current_->type = *type;
  current_->has_type = true;
  return Status::Ok();
}

Status TextParser::ParseSampleLine(std::string_view line) {
  Cursor c(line);
  TextSample s;
  std::string_view name = c.NameRun();
  if (name.empty()) {
    return LineError(fmt::format("expected a metric name, found {}", Quote(c.Token())));
  }
  if (!IsValidMetricName(name)) {
    return LineError(fmt::format("invalid metric name {}", Quote(name)));
  }
  c.SkipBlanks();
  if (!c.done() && c.peek() == '{') {
    c.advance();
    for (;;) {
      c.SkipBlanks();
      if (c.done()) return LineError(fmt::format("{}: unterminated label set", name));
      if (c.peek() == '}') {
        c.advance();
        break;
      }
      std::string_view lname = c.NameRun();
      if (!IsValidLabelName(lname)) {
        return LineError(fmt::format("{}: invalid label name {}", name,
                                     Quote(lname.empty() ? c.Token() : lname)));
      }
      if (lname == kMetricNameLabel) {
        return LineError(fmt::format("{}: label name {} is reserved", name, lname));
      }
      for (const Label& l : s.labels) {
        if (l.name == lname) return LineError(fmt::format("{}: duplicate label {}", name, lname));
      }
      c.SkipBlanks();
      if (c.done() || c.peek() != '=') {
        return LineError(fmt::format("{}: label {}: expected '='", name, lname));
      }
      c.advance();
      c.SkipBlanks();
      if (c.done() || c.peek() != '"') {
        return LineError(fmt::format("{}: label {}: expected '\"' to open the value", name, lname));
      }
      c.advance();
      std::string value;
      bool closed = false;
      while (!c.done()) {
        char ch = c.peek();
        c.advance();
        if (ch == '"') {
          closed = true;
          break;
        }
        if (ch == '\\') {
          if (c.done()) break;
          char esc = c.peek();
          c.advance();
          if (esc == '\\') {
            value += '\\';
          } else if (esc == '"') {
            value += '"';
          } else if (esc == 'n') {
            value += '\n';
          } else {
            return LineError(fmt::format("{}: label {}: invalid escape \\{} in the value", name,
                                         lname, Quote(std::string_view(&esc, 1))));
          }
          continue;
        }
        value += ch;
      }
      if (!closed) {
        return LineError(fmt::format("{}: label {}: unterminated value", name, lname));
      }
      if (!IsValidUtf8(value)) {
        return LineError(fmt::format("{}: label {}: invalid UTF-8 in the value", name, lname));
      }
      s.labels.push_back({std::string(lname), std::move(value)});
      c.SkipBlanks();
      if (c.done()) return LineError(fmt::format("{}: unterminated label set", name));
      if (c.peek() == ',') {
        c.advance();  // a trailing comma before '}' is allowed
      } else if (c.peek() != '}') {
        return LineError(fmt::format("{}: expected ',' or '}}' after label {}, found {}", name,
                                     lname, Quote(c.Token())));
      }
    }
    c.SkipBlanks();
  } else if (!c.done() && !IsBlank(line[name.size()])) {
    return LineError(
        fmt::format("{}: unexpected {} after the metric name", name, Quote(c.Token())));
  }
  std::string_view value_text = c.Token();
  if (value_text.empty()) return LineError(fmt::format("{}: missing value", name));
  std::optional<double> value = ParseValue(value_text);
  if (!value) return LineError(fmt::format("{}: invalid value {}", name, Quote(value_text)));
  s.value = *value;
  c.SkipBlanks();
  if (!c.done()) {
    std::string_view ts_text = c.Token();
    std::optional<int64_t> ts = ParseTimestamp(ts_text);
    if (!ts) {
      return LineError(
          fmt::format("{}: invalid timestamp {}; want integer milliseconds", name, Quote(ts_text)));
    }
    s.timestamp_ms = *ts;
    c.SkipBlanks();
    if (!c.done()) {
      return LineError(fmt::format("{}: unexpected {} after the timestamp", name, Quote(c.Rest())));
    }
  }

  // Which family does the sample belong to, and in what role?
  bool member = false;
  if (current_) {
    const std::string& fam = current_->name;
    MetricType t = current_->type;
    bool has_base = name.size() > fam.size() && name.substr(0, fam.size()) == fam;
    std::string_view suffix = has_base ? name.substr(fam.size()) : std::string_view();
    if (name == fam) {
      if (t == MetricType::kHistogram) {
        return LineError(
            fmt::format("histogram {}: sample needs a _bucket, _sum or _count suffix", fam));
      }
      member = true;
      s.role = t == MetricType::kSummary ? SampleRole::kQuantile : SampleRole::kValue;
    } else if (t == MetricType::kHistogram && suffix == kBucketSuffix) {
      member = true;
      s.role = SampleRole::kBucket;
    } else if ((t == MetricType::kHistogram || t == MetricType::kSummary) &&
               (suffix == kSumSuffix || suffix == kCountSuffix)) {
      member = true;
      s.role = suffix == kSumSuffix ? SampleRole::kSum : SampleRole::kCount;
    }
  }
  if (s.role == SampleRole::kBucket || s.role == SampleRole::kQuantile) {
    std::string_view bound_label = s.role == SampleRole::kBucket ? "le" : "quantile";
    std::optional<std::string_view> bound_text = FindLabel(s.labels, bound_label);
    if (!bound_text) {
      return LineError(fmt::format("{}: missing label {}", name, bound_label));
    }
    std::optional<double> bound = ParseValue(*bound_text);
    if (!bound || std::isnan(*bound)) {
      return LineError(
          fmt::format("{}: label {}: {} is not a number", name, bound_label, Quote(*bound_text)));
    }
    s.bound = *bound;
  }
  if (!member) GPULEDGER_RETURN_IF_ERROR(OpenFamily(name));
  s.name = std::string(name);
  s.line = line_no_;
  current_->samples.push_back(std::move(s));
  return Status::Ok();
}

Result<ParsedText> ParseText(std::string_view text, const TextParseOptions& options) {
  ParsedText out;
  TextParser parser(options, [&out](Family&& f) {
    out.families.push_back(std::move(f));
    return Status::Ok();
  });
  GPULEDGER_RETURN_IF_ERROR(parser.Feed(text));
  GPULEDGER_RETURN_IF_ERROR(parser.Finish());
  out.stats = parser.stats();
  return out;
}

// ---- Histogram and summary grouping --------------------------------------------------------

namespace {

// Groups a family's samples into one series per label set without `bound_label`: _sum
// and _count set the series' sum and count, samples of `bound_role` go to `add_bound`
// (which may refuse them), any other sample is an error.
template <typename SeriesT, typename AddBound>
Result<std::vector<SeriesT>> GroupByLabels(const Family& family, SampleRole bound_role,
                                           std::string_view bound_label,
                                           std::string_view bound_noun, AddBound add_bound) {
  std::map<std::string, size_t> index;  // FormatLabels(labels minus bound) -> series
  std::vector<SeriesT> out;
  for (const TextSample& s : family.samples) {
    Labels key_labels = Without(s.labels, bound_label);
    auto [it, inserted] = index.emplace(FormatLabels(key_labels), out.size());
    if (inserted) {
      out.emplace_back();
      out.back().labels = std::move(key_labels);
    }
    SeriesT& series = out[it->second];
    if (s.role == SampleRole::kSum) {
      series.sum = s.value;
    } else if (s.role == SampleRole::kCount) {
      series.count = s.value;
    } else if (s.role == bound_role) {
      GPULEDGER_RETURN_IF_ERROR(add_bound(series, s));
    } else {
      return InvalidArgument(fmt::format("{} {}: line {}: sample {} is not a {}",
                                         MetricTypeName(family.type), family.name, s.line, s.name,
                                         bound_noun));
    }
  }
  return out;
}

}  // namespace

Result<std::vector<HistogramSeries>> GroupHistogram(const Family& family) {
  GPULEDGER_ASSIGN_OR_RETURN(
      std::vector<HistogramSeries> out,
      GroupByLabels<HistogramSeries>(family, SampleRole::kBucket, "le", "bucket",
                                     [](HistogramSeries& h, const TextSample& s) {
                                       h.buckets.push_back({s.bound, s.value});
                                       return Status::Ok();
                                     }));
  for (HistogramSeries& h : out) {
    std::stable_sort(
        h.buckets.begin(), h.buckets.end(),
        [](const HistogramBucket& a, const HistogramBucket& b) { return a.le < b.le; });
    std::string where = family.name + FormatLabels(h.labels);
    if (h.buckets.empty() || !std::isinf(h.buckets.back().le) || h.buckets.back().le < 0) {
      return InvalidArgument(fmt::format("histogram {}: no le=\"+Inf\" bucket", where));
    }
    for (size_t i = 1; i < h.buckets.size(); ++i) {
      if (h.buckets[i].le == h.buckets[i - 1].le) {
        return InvalidArgument(fmt::format("histogram {}: two buckets with le={}", where,
                                           FormatValue(h.buckets[i].le)));
      }
      if (h.buckets[i].count < h.buckets[i - 1].count) {
        return InvalidArgument(fmt::format(
            "histogram {}: bucket le={} counts {} < {} of the bucket below; buckets are "
            "cumulative",
            where, FormatValue(h.buckets[i].le), FormatValue(h.buckets[i].count),
            FormatValue(h.buckets[i - 1].count)));
      }
    }
  }
  return out;
}

Result<std::vector<SummarySeries>> GroupSummary(const Family& family) {
  GPULEDGER_ASSIGN_OR_RETURN(
      std::vector<SummarySeries> out,
      GroupByLabels<SummarySeries>(family, SampleRole::kQuantile, "quantile", "quantile",
                                   [&family](SummarySeries& q, const TextSample& s) {
                                     if (s.bound < 0 || s.bound > 1) {
                                       return InvalidArgument(fmt::format(
                                           "summary {}: line {}: quantile {} is outside 0..1",
                                           family.name, s.line, FormatValue(s.bound)));
                                     }
                                     q.quantiles.push_back({s.bound, s.value});
                                     return Status::Ok();
                                   }));
  for (SummarySeries& q : out) {
    std::stable_sort(
        q.quantiles.begin(), q.quantiles.end(),
        [](const SummaryQuantile& a, const SummaryQuantile& b) { return a.quantile < b.quantile; });
  }
  return out;
}

// ---- Writer -------------------------------------------------------------------------------

Status ValidateMetricSpec(const MetricSpec& spec) {
  auto bad = [&spec](std::string_view why) {
    return InvalidArgument(fmt::format("metric {}: {}", spec.name, why));
  };
  if (!IsValidMetricName(spec.name)) return bad("invalid metric name");
  if (spec.name.find(':') != std::string::npos) {
    return bad("colons are reserved for recording rules");
  }
  for (size_t i = 1; i < spec.name.size(); ++i) {
    char a = spec.name[i - 1];
    char b = spec.name[i];
    if (a >= 'a' && a <= 'z' && b >= 'A' && b <= 'Z')
      return bad("name is camelCase; use snake_case");
  }
  if (spec.help.empty()) return bad("help text is empty");
  if (!IsValidUtf8(spec.help)) return bad("help text is not valid UTF-8");
  bool counter = spec.type == MetricType::kCounter;
  if (counter && !EndsWith(spec.name, kTotalSuffix)) return bad("a counter's name ends in _total");
  if (!counter && EndsWith(spec.name, kTotalSuffix))
    return bad("only a counter's name ends in _total");
  if (spec.type != MetricType::kHistogram && spec.type != MetricType::kSummary) {
    for (std::string_view suffix : {kBucketSuffix, kSumSuffix, kCountSuffix}) {
      if (EndsWith(spec.name, suffix)) {
        return bad(fmt::format("only histograms and summaries have {} series", suffix));
      }
    }
  }
  if (!spec.unit.empty()) {
    static constexpr std::array<std::string_view, 12> kNonBase = {
        "milliseconds", "microseconds", "nanoseconds", "minutes",    "hours",      "days",
        "kilobytes",    "megabytes",    "gigabytes",   "kilojoules", "milliwatts", "percent"};
    for (std::string_view nb : kNonBase) {
      if (spec.unit == nb) return bad(fmt::format("unit {} is not a base unit", spec.unit));
    }
    std::string_view stem = spec.name;
    if (counter) stem.remove_suffix(kTotalSuffix.size());
    if (!EndsWith(stem, "_" + spec.unit)) {
      return bad(
          fmt::format("name does not end with its unit _{}{}", spec.unit, counter ? "_total" : ""));
    }
  }
  return Status::Ok();
}

Status TextWriter::BeginFamily(const MetricSpec& spec) {
  GPULEDGER_RETURN_IF_ERROR(ValidateMetricSpec(spec));
  std::vector<std::string> names = {spec.name};
  if (spec.type == MetricType::kHistogram) {
    names.push_back(spec.name + std::string(kBucketSuffix));
  }
  if (spec.type == MetricType::kHistogram || spec.type == MetricType::kSummary) {
    names.push_back(spec.name + std::string(kSumSuffix));
    names.push_back(spec.name + std::string(kCountSuffix));
  }
  for (const std::string& n : names) {
    if (written_.count(n) > 0) {
      return InvalidArgument(fmt::format("metric {}: {} was written before", spec.name, n));
    }
  }
  written_.insert(names.begin(), names.end());
  out_ += "# HELP ";
  out_ += spec.name;
  out_ += ' ';
  AppendEscapedHelp(out_, spec.help);
  out_ += "\n# TYPE ";
  out_ += spec.name;
  out_ += ' ';
  out_ += MetricTypeName(spec.type);
  out_ += '\n';
  current_ = spec;
  return Status::Ok();
}

Status TextWriter::CheckLabels(const Labels& labels, std::string_view reserved) const {
  std::string_view family = current_ ? std::string_view(current_->name) : std::string_view();
  for (size_t i = 0; i < labels.size(); ++i) {
    const Label& l = labels[i];
    if (!IsValidLabelName(l.name) || l.name == kMetricNameLabel) {
      return InvalidArgument(
          fmt::format("metric {}: invalid label name {}", family, Quote(l.name)));
    }
    if (!reserved.empty() && l.name == reserved) {
      return InvalidArgument(
          fmt::format("metric {}: label {} is set by the writer", family, l.name));
    }
    if (!IsValidUtf8(l.value)) {
      return InvalidArgument(fmt::format("metric {}: label {}: invalid UTF-8", family, l.name));
    }
    for (size_t j = 0; j < i; ++j) {
      if (labels[j].name == l.name) {
        return InvalidArgument(fmt::format("metric {}: duplicate label {}", family, l.name));
      }
    }
  }
  return Status::Ok();
}

void TextWriter::AppendSample(std::string_view suffix, const Labels& labels, const Label* extra,
                              double value, std::optional<int64_t> timestamp_ms) {
  out_ += current_->name;
  out_ += suffix;
  if (!labels.empty() || extra != nullptr) {
    out_ += '{';
    bool first = true;
    auto add = [&](const Label& l) {
      if (!first) out_ += ',';
      first = false;
      out_ += l.name;
      out_ += "=\"";
      AppendEscapedLabelValue(out_, l.value);
      out_ += '"';
    };
    for (const Label& l : labels) add(l);
    if (extra != nullptr) add(*extra);
    out_ += '}';
  }
  out_ += ' ';
  AppendValue(out_, value);
  if (timestamp_ms) {
    out_ += ' ';
    out_ += fmt::format("{}", *timestamp_ms);
  }
  out_ += '\n';
}

Status TextWriter::WriteSample(const Labels& labels, double value,
                               std::optional<int64_t> timestamp_ms) {
  if (!current_) return FailedPrecondition("WriteSample before BeginFamily");
  if (current_->type == MetricType::kHistogram || current_->type == MetricType::kSummary) {
    return FailedPrecondition(fmt::format("metric {}: a {} takes WriteHistogram/WriteSummary",
                                          current_->name, MetricTypeName(current_->type)));
  }
  GPULEDGER_RETURN_IF_ERROR(CheckLabels(labels, {}));
  AppendSample({}, labels, nullptr, value, timestamp_ms);
  return Status::Ok();
}

Status TextWriter::WriteHistogram(const Labels& labels, const std::vector<HistogramBucket>& buckets,
                                  double sum, double count, std::optional<int64_t> timestamp_ms) {
  if (!current_ || current_->type != MetricType::kHistogram) {
    return FailedPrecondition("WriteHistogram outside a histogram family");
  }
  GPULEDGER_RETURN_IF_ERROR(CheckLabels(labels, "le"));
  const std::string& name = current_->name;
  if (buckets.empty() || !(std::isinf(buckets.back().le) && buckets.back().le > 0)) {
    return InvalidArgument(fmt::format("histogram {}: the last bucket must be le=+Inf", name));
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (std::isnan(buckets[i].le) || std::isnan(buckets[i].count) || buckets[i].count < 0) {
      return InvalidArgument(fmt::format("histogram {}: bucket {} is not a number", name, i));
    }
    if (i > 0 && (buckets[i].le <= buckets[i - 1].le || buckets[i].count < buckets[i - 1].count)) {
      return InvalidArgument(fmt::format(
          "histogram {}: bucket {} must have a larger le and a cumulative count", name, i));
    }
  }
  for (const HistogramBucket& b : buckets) {
    Label le{"le", FormatValue(b.le)};
    AppendSample(kBucketSuffix, labels, &le, b.count, timestamp_ms);
  }
  AppendSample(kSumSuffix, labels, nullptr, sum, timestamp_ms);
  AppendSample(kCountSuffix, labels, nullptr, count, timestamp_ms);
  return Status::Ok();
}

Status TextWriter::WriteSummary(const Labels& labels, const std::vector<SummaryQuantile>& quantiles,
                                double sum, double count, std::optional<int64_t> timestamp_ms) {
  if (!current_ || current_->type != MetricType::kSummary) {
    return FailedPrecondition("WriteSummary outside a summary family");
  }
  GPULEDGER_RETURN_IF_ERROR(CheckLabels(labels, "quantile"));
  for (const SummaryQuantile& q : quantiles) {
    if (!(q.quantile >= 0 && q.quantile <= 1)) {
      return InvalidArgument(fmt::format("summary {}: quantile {} is outside 0..1", current_->name,
                                         FormatValue(q.quantile)));
    }
  }
  for (const SummaryQuantile& q : quantiles) {
    Label ql{"quantile", FormatValue(q.quantile)};
    AppendSample({}, labels, &ql, q.value, timestamp_ms);
  }
  AppendSample(kSumSuffix, labels, nullptr, sum, timestamp_ms);
  AppendSample(kCountSuffix, labels, nullptr, count, timestamp_ms);
  return Status::Ok();
}

Result<std::string> WriteFamilies(const std::vector<Family>& families) {
  std::string out;
  for (const Family& f : families) {
    if (!IsValidMetricName(f.name)) {
      return InvalidArgument(fmt::format("family {}: invalid metric name", Quote(f.name)));
    }
    if (f.has_help) {
      if (!IsValidUtf8(f.help))
        return InvalidArgument(fmt::format("family {}: help: invalid UTF-8", f.name));
      out += "# HELP ";
      out += f.name;
      out += ' ';
      AppendEscapedHelp(out, f.help);
      out += '\n';
    }
    if (f.has_type) {
      out += "# TYPE ";
      out += f.name;
      out += ' ';
      out += MetricTypeName(f.type);
      out += '\n';
    }
    for (const TextSample& s : f.samples) {
      if (!IsValidMetricName(s.name)) {
        return InvalidArgument(
            fmt::format("family {}: invalid sample name {}", f.name, Quote(s.name)));
      }
      for (const Label& l : s.labels) {
        if (!IsValidLabelName(l.name) || !IsValidUtf8(l.value)) {
          return InvalidArgument(
              fmt::format("family {}: sample {}: invalid label {}", f.name, s.name, Quote(l.name)));
        }
      }
      out += s.name;
      if (!s.labels.empty()) out += FormatLabels(s.labels);
      out += ' ';
      AppendValue(out, s.value);
      if (s.timestamp_ms) out += fmt::format(" {}", *s.timestamp_ms);
      out += '\n';
    }
  }
  return out;
}

}  // namespace gpuledger::prometheus
