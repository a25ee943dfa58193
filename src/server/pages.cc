#include "server/pages.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <vector>

namespace gpuledger::server {
namespace {

constexpr std::string_view kCursorVersion = "p1";

Status NotACursor(std::string_view text) {
  return InvalidArgument(fmt::format("after \"{}\": not a cursor a page gave (want the `next` of the previous page)",
                                     text.substr(0, 80)));
}

// The cursor's fields but the check, as the check is computed over them.
std::string CursorBody(const PageCursor& c) {
  return fmt::format("{}.{:016x}.{:016x}.{}.{}.{}", kCursorVersion, c.query, c.answer, c.window.begin_ms,
                     c.window.end_ms, c.offset);
}

uint64_t CursorCheck(std::string_view body) { return Digest().Add("cursor").Add(body).value(); }

template <class T>
bool ParseWhole(std::string_view text, T& out, int base) {
  if (text.empty() || text.size() > 18) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Digest& Digest::Add(std::string_view text) {
  for (unsigned char c : text) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
  return Add(static_cast<int64_t>(text.size()));  // delimits the part
}

Digest& Digest::Add(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) {
    h_ ^= (u >> (8 * i)) & 0xff;
    h_ *= 1099511628211ull;
  }
  return *this;
}

std::string EncodeCursor(const PageCursor& c) {
  std::string body = CursorBody(c);
  return fmt::format("{}.{:016x}", body, CursorCheck(body));
}

Result<PageCursor> DecodeCursor(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t at = 0; parts.size() < 8;) {
    size_t dot = text.find('.', at);
    parts.push_back(text.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
    if (dot == std::string_view::npos) break;
    at = dot + 1;
  }
  PageCursor c;
  uint64_t check = 0;
  if (parts.size() != 7 || parts[0] != kCursorVersion || parts[1].size() != 16 || parts[2].size() != 16 ||
      parts[6].size() != 16 || !ParseWhole(parts[1], c.query, 16) || !ParseWhole(parts[2], c.answer, 16) ||
      !ParseWhole(parts[3], c.window.begin_ms, 10) || !ParseWhole(parts[4], c.window.end_ms, 10) ||
      !ParseWhole(parts[5], c.offset, 10) || !ParseWhole(parts[6], check, 16)) {
    return NotACursor(text);
  }
  // A cursor edited by hand (another window, another offset) is not one a page gave.
  if (check != CursorCheck(text.substr(0, text.size() - 17)) || c.window.end_ms < c.window.begin_ms) {
    return NotACursor(text);
  }
  return c;
}

Result<PageRequest> PageFrom(const QueryParams& params, std::string_view endpoint, const Principal& who,
                             std::initializer_list<const char*> keys) {
  PageRequest r;
  GPULEDGER_ASSIGN_OR_RETURN(r.limit, CountParam(params, "limit", kDefaultAnswerPage, 1, kMaxAnswerPage));
  Digest d;
  d.Add(endpoint);
  for (const char* key : keys) d.Add(key).Add(Param(params, key));
  // The scope the answer was cut for: an admin's cursor is not a viewer's.
  d.Add(RoleName(who.role));
  std::vector<std::string> teams(who.teams.begin(), who.teams.end());
  std::sort(teams.begin(), teams.end());
  for (const std::string& t : teams) d.Add(t);
  r.query = d.value();
  std::string after = Param(params, "after");
  if (after.empty()) return r;
  GPULEDGER_ASSIGN_OR_RETURN(PageCursor c, DecodeCursor(after));
  if (c.query != r.query) {
    std::string named;
    for (const char* key : keys) named += fmt::format("{}{}", named.empty() ? "" : ", ", key);
    return InvalidArgument(fmt::format("after: the cursor of another query; give the first page's {} (and the same "
                                       "token) with its `next`",
                                       named));
  }
  r.after = c;
  return r;
}

Result<PageCut> CutPage(const PageRequest& request, uint64_t answer, const TimeRange& window, size_t groups) {
  PageCut cut;
  if (request.after) {
    if (request.after->answer != answer || request.after->offset > static_cast<int64_t>(groups)) {
      return Status(StatusCode::kFailedPrecondition,
                    "after: the answer changed since its first page (data arrived for its window); read it again "
                    "from the first page");
    }
    cut.begin = static_cast<size_t>(request.after->offset);
  }
  cut.end = std::min(groups, cut.begin + static_cast<size_t>(request.limit));
  if (cut.end < groups) {
    cut.next = EncodeCursor({request.query, answer, window, static_cast<int64_t>(cut.end)});
  }
  return cut;
}

uint64_t UsageDigest(const ledger::UsageReport& r) {
  Digest d;
  d.Add(r.window.begin_ms).Add(r.window.end_ms);
  auto add = [&](const ledger::UsageRow& row) {
    for (const std::string& k : row.key) d.Add(k);
    d.Add(row.no_job ? 1 : 0).Add(row.coarse_ticks_ms).Add(row.unpriced_ticks_ms);
    for (size_t b = 0; b < kBucketCount; ++b) d.Add(row.gpu_ticks_ms[b]).Add(row.cost[b].micros());
    for (size_t c = 0; c < kIdleCauseCount; ++c) d.Add(row.idle_cause_ticks_ms[c]).Add(row.idle_cause_cost[c].micros());
  };
  d.Add(static_cast<int64_t>(r.rows.size()));
  for (const ledger::UsageRow& row : r.rows) add(row);
  add(r.total);
  return d.value();
}

void AddPageJson(nlohmann::json& out, const PageRequest& request, const PageCut& cut) {
  out["limit"] = request.limit;
  out["next"] = cut.next.empty() ? nlohmann::json(nullptr) : nlohmann::json(cut.next);
}

}  // namespace gpuledger::server
