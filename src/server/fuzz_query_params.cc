// libFuzzer target for the query API's parameters (built with -DGPULEDGER_FUZZ=ON and
// clang): window, from/to, step, by, limit, after (a page's cursor), format, period,
// week, team and job ids, fed to the handlers themselves (no HTTP) over a small fleet.
// The first byte picks the endpoint; the rest is a query string "k=v&k=v", or for the
// job endpoints the job id and then a query string after a NUL. Beyond "no crash, no
// sanitizer report" it checks that no input is answered 500 (every bad parameter is the
// caller's error: 4xx) and that every JSON answer parses. The budget is kept small so
// that no input is slow.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "core/batch.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/api.h"
#include "store/store.h"

namespace gs = gpuledger::server;
using namespace gpuledger;

namespace {

const int64_t kNow = 1795435200000;  // 2026-11-23T12:00:00Z

// Two GPUs of one job for the three hours before now.
struct Fleet {
  ManualClock clock{kNow};
  std::unique_ptr<ledger::Ledger> ledger;
  Goals goals;
  gs::QueryLimits limits;

  Fleet() {
    std::string dir = (std::filesystem::temp_directory_path() / "gpuledger-fuzz-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) std::abort();
    auto store = store::OpenSqliteStore(dir + "/ledger.db");
    if (!store.ok()) std::abort();
    ledger = std::make_unique<ledger::Ledger>(std::move(*store), clock);
    Batch b;
    b.batch_id = "fuzz-fleet";
    Job j;
    j.id = "k8s/ns/pod-0";
    j.team = "alpha";
    b.jobs.push_back(j);
    for (int g = 0; g < 2; ++g) {
      Device d;
      d.uuid = "GPU-" + std::to_string(g);
      d.node = "n0";
      d.model = "NVIDIA H100 80GB HBM3";
      d.pool = "training";
      d.sample_interval_ms = kMsPerMinute;
      b.devices.push_back(d);
      b.allocations.push_back({d.uuid, j.id, kNow - 3 * kMsPerHour, std::nullopt});
      for (int i = 0; i < 180; i += 5) {
        Sample s;
        s.device_uuid = d.uuid;
        s.t_ms = kNow - 3 * kMsPerHour + i * kMsPerMinute;
        s.sm_active = 0.5;
        b.samples.push_back(s);
      }
    }
    if (!ledger->Ingest(b).ok()) std::abort();
    limits.max_device_hours = 2 * 48;
    limits.max_rows = 500;
    limits.max_series_cells = 500;
    limits.max_heatmap_cells = 500;
  }
};

gs::QueryParams ParseQuery(std::string_view text) {
  gs::QueryParams p;
  while (!text.empty()) {
    size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    size_t eq = pair.find('=');
    p[std::string(pair.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    text.remove_prefix(amp + 1);
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fleet fleet;
  if (size == 0 || size > 4096) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string job_id;
  if (size_t nul = rest.find('\0'); nul != std::string_view::npos) {
    job_id = std::string(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  gs::QueryParams params = ParseQuery(rest);
  gs::Principal who{"fuzz", data[0] & 0x80 ? gs::Role::kViewer : gs::Role::kAdmin, {"alpha"}};
  auto span = fleet.ledger->Data();
  if (!span.ok()) std::abort();
  gs::QueryContext q{*fleet.ledger, who, kNow, 0, &fleet.goals, 30'000, span->end_ms, span->first_ms, &fleet.limits};
  gs::HttpReply reply;
  switch (data[0] % 12) {
    case 0: reply = gs::UsageReply(q, params); break;
    case 1: reply = gs::SeriesReply(q, params); break;
    case 2: reply = gs::HeatmapReply(q, params); break;
    case 3: reply = gs::WasteReply(q, params); break;
    case 4: reply = gs::ChargebackReply(q, params); break;
    case 5: reply = gs::BudgetsReply(q, params); break;
    case 6: reply = gs::RecommendationsReply(q, params); break;
    case 7: reply = gs::JobReply(q, job_id); break;
    case 8: reply = gs::JobMfuReply(q, job_id, params); break;
    case 9: reply = gs::JobServingReply(q, job_id, params); break;
    case 10: reply = gs::WeeklyReportReply(q, params); break;
    default: reply = gs::FleetReply(q); break;
  }
  if (reply.status >= 500) __builtin_trap();
  if (reply.content_type == "application/json" && !nlohmann::json::accept(reply.body)) __builtin_trap();
  return 0;
}
