#include "store/pg_partitions.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>

#include "core/time.h"

namespace gpuledger::store::pg {
namespace {

std::chrono::year_month_day Civil(int64_t ms) {
  return std::chrono::year_month_day(
      std::chrono::floor<std::chrono::days>(std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(ms))));
}
int64_t MsOf(std::chrono::year_month_day d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::sys_days(d).time_since_epoch()).count();
}

}  // namespace

Partition DayPartition(const std::string& parent, int64_t ms) {
  auto d = Civil(ms);
  int64_t begin = FloorTo(ms, kMsPerDay);
  return {parent,
          fmt::format("{}_d{:04}{:02}{:02}", parent, static_cast<int>(d.year()), static_cast<unsigned>(d.month()),
                      static_cast<unsigned>(d.day())),
          begin, begin + kMsPerDay};
}

std::optional<int64_t> DayOfPartitionName(std::string_view name, std::string_view parent) {
  if (!name.starts_with(parent) || name.size() != parent.size() + 10 || name.substr(parent.size(), 2) != "_d") {
    return std::nullopt;
  }
  int y = 0;
  unsigned m = 0, d = 0;
  std::string_view digits = name.substr(parent.size() + 2);
  auto ok = [](std::string_view s, auto& v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (!ok(digits.substr(0, 4), y) || !ok(digits.substr(4, 2), m) || !ok(digits.substr(6, 2), d)) return std::nullopt;
  std::chrono::year_month_day day{std::chrono::year(y), std::chrono::month(m), std::chrono::day(d)};
  if (!day.ok()) return std::nullopt;
  return MsOf(day);
}

Status CreatePartition(Conn& c, const Partition& p) {
  GPULEDGER_ASSIGN_OR_RETURN(Rows attached, c.Query("SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1)",
                                                    Params().Add(p.name), "looking up a partition"));
  if (attached.rows() > 0) return Status::Ok();
  std::string what = fmt::format("creating partition {}", p.name);
  // Chunks stay in their row up to 8 KB: a 10 s device-hour's chunk is about 2 KB,
  // already deflated, and TOAST (from 2 KB on) would only move it out of line, into
  // two TOAST rows of which the second is mostly empty (store/sample_chunk.h).
  const char* with = p.parent == "sample_chunks" ? " WITH (toast_tuple_target = 8160)" : "";
  GPULEDGER_RETURN_IF_ERROR(
      c.Exec(fmt::format("CREATE TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){}", p.name,
                         p.parent, with),
             what));
  return c.Exec(fmt::format("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})", p.parent, p.name,
                            p.begin_ms, p.end_ms),
                what);
}

}  // namespace gpuledger::store::pg
