// Pages of an answer the ledger computes whole: /api/v1/usage's rows and /api/v1/series'
// groups. The ledger rounds an answer's money over all of it at once (largest remainder
// over its atoms), so a page cannot be computed alone: each page's request computes the
// whole answer again, within the same query budget, and answers `limit` of its groups in
// the ledger's order. The cursor (`next`, passed back as `after`) is the API's, opaque to
// callers: it pins the window of the first page (a trailing window does not move on with
// the data between pages), names the query it belongs to (its parameters and the caller's
// scope) and the digest of the answer it was cut from, so that
//  - a cursor given with other parameters, or by another token's scope, is refused (400);
//  - a page of an answer that changed since the first page (data arrived for the window)
//    is refused (409), never silently shifted: read again from the first page.
// So the pages of one read hold each group exactly once and add up to the answer's
// total. Internal to the server library.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/api.h"

namespace gpuledger::server {

// Groups per page of /usage and /series: `limit` 1..kMaxAnswerPage, by default
// kDefaultAnswerPage (an answer no larger than that is one page, as before paging).
inline constexpr int64_t kDefaultAnswerPage = 1'000;
inline constexpr int64_t kMaxAnswerPage = 5'000;

// The header that carries `next` in every format (CSV and text have no place for it).
inline constexpr std::string_view kNextPageHeader = "Gpuledger-Next-After";

// 64-bit FNV-1a over what is added, each part delimited: for fingerprints and digests.
class Digest {
 public:
  Digest& Add(std::string_view text);
  Digest& Add(int64_t v);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

// Where a page begins, as `next` encodes it.
struct PageCursor {
  uint64_t query = 0;   // the request's fingerprint (PageRequest::query)
  uint64_t answer = 0;  // the digest of the whole answer the first page was cut from
  TimeRange window;     // the window the first page covered
  int64_t offset = 0;   // groups on the pages before
};
std::string EncodeCursor(const PageCursor& c);
// kInvalidArgument naming `after` for text that no page gave.
Result<PageCursor> DecodeCursor(std::string_view text);

// A request's page: its limit and, with `after`, the cursor, checked to belong to this
// query: the same `endpoint`, the same values of `keys` (the parameters that shape the
// answer, e.g. window, from, to, by) and the same caller's scope (role and teams).
struct PageRequest {
  int64_t limit = kDefaultAnswerPage;
  uint64_t query = 0;
  std::optional<PageCursor> after;
};
Result<PageRequest> PageFrom(const QueryParams& params, std::string_view endpoint, const Principal& who,
                             std::initializer_list<const char*> keys);

// The page of an answer of `groups` groups with digest `answer` over `window`: the
// groups [begin, end) and the cursor of the next page ("" on the last). kFailedPrecondition
// (409) when the request's cursor was cut from another answer.
struct PageCut {
  size_t begin = 0;
  size_t end = 0;
  std::string next;
};
Result<PageCut> CutPage(const PageRequest& request, uint64_t answer, const TimeRange& window, size_t groups);

// The digest of a usage answer: every row's key and figures, in order, and the total.
uint64_t UsageDigest(const ledger::UsageReport& r);

// Adds the page's place to a JSON answer: "limit", and "next" (null on the last page).
void AddPageJson(nlohmann::json& out, const PageRequest& request, const PageCut& cut);

}  // namespace gpuledger::server
