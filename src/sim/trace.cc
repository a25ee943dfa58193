#include "sim/trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "core/time.h"

namespace gpuledger::sim {
namespace {

// Splits one CSV line. Fields may be quoted ("a,b"); a doubled quote inside a quoted
// field is one quote. The views point into `line` or, for fields that needed unquoting,
// into `scratch`.
void SplitCsv(std::string_view line, std::vector<std::string_view>& out,
              std::vector<std::string>& scratch) {
  out.clear();
  scratch.clear();
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t i = 0;
  while (true) {
    if (i < line.size() && line[i] == '"') {
      std::string field;
      ++i;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.push_back(line[i++]);
      }
      scratch.push_back(std::move(field));
      out.emplace_back();  // patched below once scratch stops moving
      while (i < line.size() && line[i] != ',') ++i;
    } else {
      size_t end = line.find(',', i);
      if (end == std::string_view::npos) end = line.size();
      out.push_back(line.substr(i, end - i));
      i = end;
    }
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  // Quoted fields: point the placeholders at their unquoted text, in order.
  if (!scratch.empty()) {
    size_t s = 0;
    for (auto& f : out) {
      if (f.data() == nullptr && s < scratch.size()) f = scratch[s++];
    }
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A row of a CSV file with its columns looked up by name; errors name file, line and
// column.
class Row {
 public:
  Row(const std::vector<std::string_view>& fields, std::string_view where)
      : fields_(fields), where_(where) {}

  std::string_view Text(int column) const {
    return column < 0 || static_cast<size_t>(column) >= fields_.size()
               ? std::string_view()
               : Trim(fields_[static_cast<size_t>(column)]);
  }
  // Empty fields and "nan" are absent.
  bool Absent(int column) const {
    std::string_view t = Text(column);
    return t.empty() || t == "nan" || t == "NaN" || t == "NAN";
  }
  Result<double> Number(int column, std::string_view name) const {
    std::string_view t = Text(column);
    double v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v)) {
      return InvalidArgument(fmt::format("{}: column '{}': not a number: '{}'", where_, name, t));
    }
    return v;
  }
  Result<int64_t> Integer(int column, std::string_view name) const {
    std::string_view t = Text(column);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
      return InvalidArgument(
          fmt::format("{}: column '{}': not an integer: '{}'", where_, name, t));
    }
    return v;
  }
  Status Error(std::string_view message) const {
    return InvalidArgument(fmt::format("{}: {}", where_, message));
  }

 private:
  const std::vector<std::string_view>& fields_;
  std::string_view where_;
};

// Seconds (possibly fractional) to whole milliseconds, rounded to nearest.
int64_t SecondsToMs(double s) { return static_cast<int64_t>(std::llround(s * 1000.0)); }

Result<int64_t> PositiveSecondsMs(const Row& row, int column, std::string_view name) {
  GPULEDGER_ASSIGN_OR_RETURN(double s, row.Number(column, name));
  if (s < 0) return row.Error(fmt::format("column '{}': negative: {}", name, s));
  return SecondsToMs(s);
}

// "2017-10-09 07:01:55" (UTC) to ms since the epoch.
Result<int64_t> ParseSpaceTimestamp(const Row& row, int column) {
  std::string_view t = row.Text(column);
  auto num = [&](size_t pos, size_t len, int& out) {
    if (pos + len > t.size()) return false;
    auto [p, ec] = std::from_chars(t.data() + pos, t.data() + pos + len, out);
    return ec == std::errc() && p == t.data() + pos + len;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (t.size() != 19 || t[4] != '-' || t[7] != '-' || (t[10] != ' ' && t[10] != 'T') ||
      t[13] != ':' || t[16] != ':' || !num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) ||
      !num(11, 2, h) || !num(14, 2, mi) || !num(17, 2, s) || mo < 1 || mo > 12 || d < 1 ||
      d > 31 || h > 23 || mi > 59 || s > 60) {
    return row.Error(fmt::format("column 'timestamp': not 'YYYY-MM-DD HH:MM:SS': '{}'", t));
  }
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return days * kMsPerDay + h * kMsPerHour + mi * kMsPerMinute + s * kMsPerSecond;
}

// Per-format column layout and row conversion. Convert returns a job, or nullopt for a
// well-formed line that is not a GPU job (counted as filtered), or an error.
struct Columns {
  std::unordered_map<std::string, int> index;
  int Get(std::string_view name) const {
    auto it = index.find(std::string(name));
    return it == index.end() ? -1 : it->second;
  }
};

using Converted = Result<std::optional<SimJob>>;

// The optional `user` and `status` columns (Philly's Pass / Killed / Failed; ours
// completed / killed / failed). Only a failure marks the job: a killed job ended when
// its user said so, which is a normal end for the simulator.
Status ReadUserAndStatus(const Row& row, const Columns& c, SimJob& j) {
  j.user = std::string(row.Text(c.Get("user")));
  if (row.Absent(c.Get("status"))) return Status::Ok();
  std::string status(row.Text(c.Get("status")));
  std::transform(status.begin(), status.end(), status.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (status == "failed") {
    j.failed = true;
  } else if (status != "pass" && status != "passed" && status != "completed" && status != "killed") {
    return row.Error(fmt::format("column 'status': '{}' is not one of completed, pass, killed, failed", status));
  }
  return Status::Ok();
}

Converted ConvertPhilly(const Row& row, const Columns& c, size_t line, int64_t& /*latest_ms*/) {
  SimJob j;
  GPULEDGER_ASSIGN_OR_RETURN(j.submit_ms, ParseSpaceTimestamp(row, c.Get("timestamp")));
  GPULEDGER_ASSIGN_OR_RETURN(j.duration_ms, PositiveSecondsMs(row, c.Get("duration"), "duration"));
  GPULEDGER_ASSIGN_OR_RETURN(int64_t gpus, row.Integer(c.Get("num_gpus"), "num_gpus"));
  if (gpus < 1 || gpus > 1'000'000) return row.Error(fmt::format("column 'num_gpus': out of range: {}", gpus));
  j.gpus = static_cast<int32_t>(gpus);
  j.queue = std::string(row.Text(c.Get("cluster")));
  if (j.queue.empty()) j.queue = "default";
  j.id = fmt::format("philly-{}", line);
  j.kind = JobKind::kTraining;
  GPULEDGER_RETURN_IF_ERROR(ReadUserAndStatus(row, c, j));
  if (j.duration_ms <= 0) return std::optional<SimJob>();
  return std::optional<SimJob>(std::move(j));
}

Converted ConvertTiresias(const Row& row, const Columns& c, size_t /*line*/, int64_t& /*latest_ms*/) {
  SimJob j;
  j.id = std::string(row.Text(c.Get("job_id")));
  if (j.id.empty()) return row.Error("column 'job_id': empty");
  GPULEDGER_ASSIGN_OR_RETURN(j.submit_ms, PositiveSecondsMs(row, c.Get("submit_time"), "submit_time"));
  GPULEDGER_ASSIGN_OR_RETURN(j.duration_ms, PositiveSecondsMs(row, c.Get("duration"), "duration"));
  GPULEDGER_ASSIGN_OR_RETURN(int64_t gpus, row.Integer(c.Get("num_gpu"), "num_gpu"));
  if (gpus < 1 || gpus > 1'000'000) return row.Error(fmt::format("column 'num_gpu': out of range: {}", gpus));
  j.gpus = static_cast<int32_t>(gpus);
  j.queue = "default";
  j.kind = JobKind::kTraining;
  if (j.duration_ms <= 0) return std::optional<SimJob>();
  return std::optional<SimJob>(std::move(j));
}

int32_t QosPriority(std::string_view qos) {
  if (qos == "LS" || qos == "Guaranteed") return 2;
  if (qos == "Burstable") return 1;
  return 0;  // BE and anything else
}

Converted ConvertAlibaba2023(const Row& row, const Columns& c, size_t /*line*/, int64_t& /*latest_ms*/) {
  SimJob j;
  j.id = std::string(row.Text(c.Get("name")));
  if (j.id.empty()) return row.Error("column 'name': empty");
  GPULEDGER_ASSIGN_OR_RETURN(int64_t num_gpu, row.Integer(c.Get("num_gpu"), "num_gpu"));
  GPULEDGER_ASSIGN_OR_RETURN(int64_t milli, row.Integer(c.Get("gpu_milli"), "gpu_milli"));
  if (num_gpu < 0 || num_gpu > 1'000'000) return row.Error(fmt::format("column 'num_gpu': out of range: {}", num_gpu));
  if (milli < 0 || milli > 1000) return row.Error(fmt::format("column 'gpu_milli': out of range 0..1000: {}", milli));
  GPULEDGER_ASSIGN_OR_RETURN(j.submit_ms, PositiveSecondsMs(row, c.Get("creation_time"), "creation_time"));
  int64_t start_ms = j.submit_ms;
  if (!row.Absent(c.Get("scheduled_time"))) {
    GPULEDGER_ASSIGN_OR_RETURN(start_ms, PositiveSecondsMs(row, c.Get("scheduled_time"), "scheduled_time"));
  }
  GPULEDGER_ASSIGN_OR_RETURN(int64_t end_ms, PositiveSecondsMs(row, c.Get("deletion_time"), "deletion_time"));
  if (num_gpu == 0 || milli == 0) return std::optional<SimJob>();  // CPU-only pod
  if (num_gpu == 1 && milli < 1000) {
    j.share_ticks = static_cast<int32_t>((milli * kTicksPerGpu + 999) / 1000);
  } else {
    j.gpus = static_cast<int32_t>(num_gpu);
  }
  j.duration_ms = end_ms - start_ms;
  std::string_view qos = row.Text(c.Get("qos"));
  j.queue = qos.empty() ? "default" : std::string(qos);
  j.priority = QosPriority(qos);
  if (j.duration_ms <= 0) return std::optional<SimJob>();
  return std::optional<SimJob>(std::move(j));
}

// Alibaba 2025 rows whose deletion time is absent run to the end of the trace, which is
// only known once every row is read: they carry this marker until then.
constexpr int64_t kRunsToTraceEnd = -1;

// `latest_ms` keeps the latest instant any row saw: the trace's end.
Converted ConvertAlibaba2025(const Row& row, const Columns& c, size_t /*line*/, int64_t& latest_ms) {
  SimJob j;
  j.id = std::string(row.Text(c.Get("instance_sn")));
  if (j.id.empty()) return row.Error("column 'instance_sn': empty");
  GPULEDGER_ASSIGN_OR_RETURN(double gpus, row.Number(c.Get("gpu_request"), "gpu_request"));
  if (gpus < 0 || gpus > 1'000'000) return row.Error(fmt::format("column 'gpu_request': out of range: {}", gpus));
  int64_t created = 0, scheduled = 0, deleted = kRunsToTraceEnd;
  if (!row.Absent(c.Get("creation_time"))) {
    GPULEDGER_ASSIGN_OR_RETURN(created, PositiveSecondsMs(row, c.Get("creation_time"), "creation_time"));
  }
  scheduled = created;
  if (!row.Absent(c.Get("scheduled_time"))) {
    GPULEDGER_ASSIGN_OR_RETURN(scheduled, PositiveSecondsMs(row, c.Get("scheduled_time"), "scheduled_time"));
  }
  if (!row.Absent(c.Get("deletion_time"))) {
    GPULEDGER_ASSIGN_OR_RETURN(deleted, PositiveSecondsMs(row, c.Get("deletion_time"), "deletion_time"));
  }
  latest_ms = std::max({latest_ms, created, scheduled, deleted});
  if (gpus <= 0) return std::optional<SimJob>();  // a CPU-node instance
  if (gpus < 1) {
    j.share_ticks = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(gpus * kTicksPerGpu)));
  } else {
    j.gpus = static_cast<int32_t>(std::ceil(gpus));
  }
  j.submit_ms = created;
  // An instance never deleted runs to the trace's end, known only once every row is
  // read: until then its duration holds -1 - start.
  j.duration_ms = deleted == kRunsToTraceEnd ? -1 - scheduled : deleted - scheduled;
  if (deleted != kRunsToTraceEnd && j.duration_ms <= 0) return std::optional<SimJob>();
  j.queue = std::string(row.Text(c.Get("app_name")));
  if (j.queue.empty()) j.queue = "default";
  j.kind = JobKind::kServing;
  j.priority = 2;
  return std::optional<SimJob>(std::move(j));
}

Converted ConvertGpuledgerCsv(const Row& row, const Columns& c, size_t /*line*/, int64_t& /*latest_ms*/) {
  SimJob j;
  j.id = std::string(row.Text(c.Get("job_id")));
  if (j.id.empty()) return row.Error("column 'job_id': empty");
  std::string_view submit = row.Text(c.Get("submit"));
  if (submit.find('-') != std::string_view::npos && submit.size() >= 10) {
    auto t = ParseTime(submit);
    if (!t.ok()) return row.Error(fmt::format("column 'submit': {}", t.status().message()));
    j.submit_ms = *t;
  } else {
    GPULEDGER_ASSIGN_OR_RETURN(j.submit_ms, PositiveSecondsMs(row, c.Get("submit"), "submit"));
  }
  GPULEDGER_ASSIGN_OR_RETURN(j.duration_ms, PositiveSecondsMs(row, c.Get("duration_s"), "duration_s"));
  if (j.duration_ms <= 0) return row.Error("column 'duration_s': must be > 0");
  int mig = c.Get("mig_profile");
  if (!row.Absent(mig)) {
    auto ticks = MigProfileTicks(row.Text(mig));
    if (!ticks.ok()) return row.Error(fmt::format("column 'mig_profile': {}", ticks.status().message()));
    j.share_ticks = *ticks;
  } else {
    GPULEDGER_ASSIGN_OR_RETURN(double gpus, row.Number(c.Get("gpus"), "gpus"));
    if (gpus <= 0 || gpus > 1'000'000) return row.Error(fmt::format("column 'gpus': out of range: {}", gpus));
    if (gpus < 1) {
      j.share_ticks = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(gpus * kTicksPerGpu - 1e-9)));
      if (j.share_ticks >= kTicksPerGpu) j.gpus = 1, j.share_ticks = 0;
    } else if (gpus != std::floor(gpus)) {
      return row.Error(fmt::format("column 'gpus': more than one GPU must be a whole number: {}", gpus));
    } else {
      j.gpus = static_cast<int32_t>(gpus);
    }
  }
  std::string_view queue = row.Text(c.Get("queue"));
  j.queue = queue.empty() ? "default" : std::string(queue);
  j.pool = std::string(row.Text(c.Get("pool")));
  if (!row.Absent(c.Get("kind"))) {
    auto kind = ParseJobKind(row.Text(c.Get("kind")));
    if (!kind.ok()) return row.Error(fmt::format("column 'kind': {}", kind.status().message()));
    j.kind = *kind;
  }
  if (!row.Absent(c.Get("priority"))) {
    GPULEDGER_ASSIGN_OR_RETURN(int64_t p, row.Integer(c.Get("priority"), "priority"));
    if (p < -1'000'000 || p > 1'000'000) return row.Error("column 'priority': out of range");
    j.priority = static_cast<int32_t>(p);
  }
  if (!row.Absent(c.Get("activity_ratio"))) {
    GPULEDGER_ASSIGN_OR_RETURN(double a, row.Number(c.Get("activity_ratio"), "activity_ratio"));
    if (a < 0 || a > 1) return row.Error(fmt::format("column 'activity_ratio': not within 0..1: {}", a));
    j.activity_ratio = static_cast<float>(a);
  }
  GPULEDGER_RETURN_IF_ERROR(ReadUserAndStatus(row, c, j));
  return std::optional<SimJob>(std::move(j));
}

struct FormatInfo {
  TraceFormat format;
  std::string_view name;
  std::vector<std::string_view> required;  // columns that must be in the header
  Converted (*convert)(const Row&, const Columns&, size_t, int64_t&);
};

const std::vector<FormatInfo>& Formats() {
  static const std::vector<FormatInfo> kFormats = {
      {TraceFormat::kPhilly, "philly", {"timestamp", "duration", "num_gpus", "cluster"}, ConvertPhilly},
      {TraceFormat::kTiresias, "tiresias", {"job_id", "num_gpu", "submit_time", "duration"}, ConvertTiresias},
      {TraceFormat::kAlibaba2023, "alibaba2023",
       {"name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time"},
       ConvertAlibaba2023},
      {TraceFormat::kAlibaba2025, "alibaba2025",
       {"instance_sn", "app_name", "gpu_request", "creation_time", "scheduled_time", "deletion_time"},
       ConvertAlibaba2025},
      {TraceFormat::kGpuledgerCsv, "gpuledger-csv", {"job_id", "submit", "duration_s"}, ConvertGpuledgerCsv},
  };
  return kFormats;
}

const FormatInfo& InfoOf(TraceFormat f) {
  for (const auto& info : Formats()) {
    if (info.format == f) return info;
  }
  return Formats().front();  // unreachable: every enumerator is listed
}

Columns HeaderColumns(std::string_view header) {
  std::vector<std::string_view> fields;
  std::vector<std::string> scratch;
  SplitCsv(header, fields, scratch);
  Columns c;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name(Trim(fields[i]));
    if (i == 0 && name.rfind("\xEF\xBB\xBF", 0) == 0) name.erase(0, 3);  // UTF-8 BOM
    c.index.emplace(name, static_cast<int>(i));
  }
  return c;
}

std::string_view FirstLine(std::string_view text) {
  size_t nl = text.find('\n');
  std::string_view line = nl == std::string_view::npos ? text : text.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

std::string_view TraceFormatName(TraceFormat f) { return InfoOf(f).name; }

Result<TraceFormat> ParseTraceFormat(std::string_view text) {
  for (const auto& info : Formats()) {
    if (info.name == text) return info.format;
  }
  return InvalidArgument(fmt::format(
      "unknown trace format '{}' (philly, tiresias, alibaba2023, alibaba2025, gpuledger-csv)", text));
}

Result<TraceFormat> GuessTraceFormat(std::string_view header_line) {
  Columns c = HeaderColumns(header_line);
  for (const auto& info : Formats()) {
    bool all = std::all_of(info.required.begin(), info.required.end(),
                           [&](std::string_view col) { return c.Get(col) >= 0; });
    if (all) return info.format;
  }
  return InvalidArgument(fmt::format(
      "cannot tell the trace format from the header '{}'; name it with --trace-format "
      "(philly, tiresias, alibaba2023, alibaba2025, gpuledger-csv)",
      header_line.substr(0, 200)));
}

Result<Trace> ReadTraceText(std::string_view text, std::string_view source_name,
                            TraceFormat format, const ReadOptions& options) {
  const FormatInfo& info = InfoOf(format);
  std::string_view header = FirstLine(text);
  if (header.empty()) return InvalidArgument(fmt::format("{}:1: empty file, expected a header", source_name));
  Columns columns = HeaderColumns(header);
  for (std::string_view col : info.required) {
    if (columns.Get(col) < 0) {
      return InvalidArgument(fmt::format("{}:1: header lacks column '{}' required by format {}",
                                         source_name, col, info.name));
    }
  }
  if (format == TraceFormat::kGpuledgerCsv && columns.Get("gpus") < 0 && columns.Get("mig_profile") < 0) {
    return InvalidArgument(fmt::format("{}:1: header needs a 'gpus' or 'mig_profile' column", source_name));
  }
  const size_t width = columns.index.size();
  Trace trace;
  std::vector<std::string_view> fields;
  std::vector<std::string> scratch;
  std::string where;
  int64_t latest_ms = 0;  // the trace's end, for alibaba2025 instances still running
  size_t pos = std::min(text.size(), header.size() + 1);
  if (pos < text.size() && text[pos - 1] == '\r') ++pos;
  size_t line_no = 1;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (Trim(line).empty() || Trim(line) == "\r") continue;
    ++trace.lines_read;
    SplitCsv(line, fields, scratch);
    where = fmt::format("{}:{}", source_name, line_no);
    Row row(fields, where);
    Converted job = fields.size() != width
                        ? Converted(row.Error(fmt::format("expected {} fields, found {}", width, fields.size())))
                        : info.convert(row, columns, line_no, latest_ms);
    if (!job.ok()) {
      if (!options.skip_bad_lines) return job.status();
      ++trace.skipped_bad_lines;
      if (trace.errors.size() < kMaxReportedErrors) trace.errors.push_back(job.status().message());
      continue;
    }
    if (!job->has_value()) {
      ++trace.filtered;
      continue;
    }
    SimJob& j = **job;
    trace.jobs.push_back(std::move(j));
  }
  if (format == TraceFormat::kAlibaba2025) {
    // Instances never deleted run until the last instant the trace saw.
    auto& jobs = trace.jobs;
    for (auto& j : jobs) {
      if (j.duration_ms < 0) j.duration_ms = latest_ms - (-1 - j.duration_ms);
    }
    size_t before = jobs.size();
    jobs.erase(std::remove_if(jobs.begin(), jobs.end(), [](const SimJob& j) { return j.duration_ms <= 0; }),
               jobs.end());
    trace.filtered += before - jobs.size();
  }
  return trace;
}

namespace {
Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot open trace file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

Result<Trace> ReadTraceFile(const std::string& path, TraceFormat format, const ReadOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ReadTraceText(text, path, format, options);
}

Result<Trace> ReadTraceFileGuessing(const std::string& path, const ReadOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  auto format = GuessTraceFormat(FirstLine(text));
  if (!format.ok()) return format.status().WithContext(path + ":1");
  return ReadTraceText(text, path, *format, options);
}

Result<int32_t> MigProfileTicks(std::string_view profile) {
  // "3g.71gb", "1g.10gb+me": the compute slices are the number before 'g'.
  size_t g = profile.find('g');
  int slices = 0;
  if (g != std::string_view::npos && g > 0) {
    auto [p, ec] = std::from_chars(profile.data(), profile.data() + g, slices);
    if (ec != std::errc() || p != profile.data() + g) slices = 0;
  }
  if (slices < 1 || slices > 7 || g + 1 >= profile.size() || profile[g + 1] != '.') {
    return InvalidArgument(fmt::format("not a MIG profile like '3g.71gb': '{}'", profile));
  }
  return static_cast<int32_t>(slices * (kTicksPerGpu / 7));
}

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint64_t Rng::Below(uint64_t n) { return Next() % n; }

Trace SyntheticTrace(const SyntheticSpec& spec, uint64_t seed) {
  Rng rng(seed);
  Trace trace;
  trace.jobs.reserve(spec.jobs);
  // Philly's GPU-count mix (philly_pollux.csv): 93% 1, then 2, 4, 8 and a tail.
  struct Mix {
    int32_t gpus;
    double cumulative;
  };
  static constexpr Mix kMix[] = {{1, 0.932}, {2, 0.954}, {4, 0.977}, {8, 0.997}, {16, 0.9995}, {32, 1.0}};
  const double log_min = std::log(static_cast<double>(spec.min_duration_ms));
  const double log_max = std::log(static_cast<double>(std::max(spec.max_duration_ms, spec.min_duration_ms)));
  int64_t t = 0;
  for (size_t i = 0; i < spec.jobs; ++i) {
    SimJob j;
    j.id = fmt::format("j{}", i);
    // Exponential inter-arrival times (Poisson arrivals).
    t += static_cast<int64_t>(-std::log(1.0 - rng.Uniform()) * static_cast<double>(spec.mean_interarrival_ms));
    j.submit_ms = t;
    j.duration_ms = std::max<int64_t>(1, static_cast<int64_t>(std::exp(log_min + (log_max - log_min) * rng.Uniform())));
    double u = rng.Uniform();
    if (u < spec.fractional_ratio) {
      static constexpr int32_t kShares[] = {120, 240, 360, 420, 480};  // 1/7..4/7, 1/2
      j.share_ticks = kShares[rng.Below(5)];
    } else {
      double m = rng.Uniform();
      j.gpus = 1;
      for (const Mix& mix : kMix) {
        if (m < mix.cumulative) {
          j.gpus = mix.gpus;
          break;
        }
      }
      j.gpus = std::min(j.gpus, spec.max_gpus);
    }
    j.queue = fmt::format("q{}", rng.Below(static_cast<uint64_t>(std::max(1, spec.queues))));
    j.priority = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(std::max(1, spec.priorities))));
    j.kind = JobKind::kTraining;
    trace.jobs.push_back(std::move(j));
  }
  trace.lines_read = spec.jobs;
  return trace;
}

}  // namespace gpuledger::sim
