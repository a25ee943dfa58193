#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "ledger/experiments.h"
#include "ledger/focus_lines.h"
#include "report/experiments_format.h"
#include "report/focus.h"
#include "report/usage_format.h"
#include "server/client.h"

namespace gpuledger::cli {
namespace {

// --server URL [--token T]: asks a running server instead of opening the store.
struct RemoteOptions {
  std::string server;
  std::string token;
};

void AddRemoteOptions(CLI::App& sub, RemoteOptions& r) {
  sub.add_option("--server", r.server, "ask a running gpuledger server (http://host:port) instead of the store");
  sub.add_option("--token", r.token, "bearer token for --server")->envname("GPULEDGER_TOKEN");
}

// GETs `path` from the server and prints the body; the exit code.
int PrintFromServer(const RemoteOptions& r, const std::string& path) {
  server::HttpRequestOptions o;
  o.token = r.token;
  auto res = server::HttpGet(r.server, path, o);
  if (!res.ok()) return Fail(res.status());
  if (res->status != 200) {
    return Fail(Status(StatusCode::kUnavailable,
                       fmt::format("{}: HTTP {}: {}", r.server, res->status, server::ErrorMessageOf(*res))));
  }
  std::fputs(res->body.c_str(), stdout);
  return 0;
}

// GETs every page of the paged answer at `path` (/api/v1/usage: `page_rows` rows a page,
// the Gpuledger-Next-After header naming the next) and prints them as one answer: JSON
// as one document with every page's rows (and no page fields), CSV with the header once,
// every page's rows and the total line once; a table a page at a time (each its own
// table; an answer of up to 5,000 rows is one). The exit code.
int PrintAllPagesFromServer(const RemoteOptions& r, const std::string& path, report::Format format,
                            int64_t page_rows) {
  server::HttpRequestOptions o;
  o.token = r.token;
  nlohmann::json merged;
  std::string csv_total, after;
  for (int page = 0;; ++page) {
    std::string url =
        fmt::format("{}&limit={}{}", path, page_rows, after.empty() ? "" : "&after=" + server::UrlEncode(after));
    auto res = server::HttpGet(r.server, url, o);
    if (!res.ok()) return Fail(res.status());
    if (res->status != 200) {
      return Fail(Status(StatusCode::kUnavailable,
                         fmt::format("{}: HTTP {}: {}", r.server, res->status, server::ErrorMessageOf(*res))));
    }
    after = res->next_after;
    if (format == report::Format::kJson) {
      nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
      if (j.is_discarded() || !j.contains("rows")) {
        return Fail(Unavailable(fmt::format("{}: a page that is not a usage answer", r.server)));
      }
      if (page == 0) {
        merged = std::move(j);
      } else {
        for (auto& row : j["rows"]) merged["rows"].push_back(std::move(row));
      }
      if (after.empty()) {
        merged.erase("limit");
        merged.erase("next");
        std::fputs((merged.dump(2) + "\n").c_str(), stdout);
      }
    } else if (format == report::Format::kCsv) {
      // Header, the page's rows, the whole answer's total line: each a line.
      std::vector<std::string_view> lines;
      std::string_view body = res->body;
      for (size_t at = 0; at < body.size();) {
        size_t end = std::min(body.find('\n', at), body.size() - 1) + 1;
        lines.push_back(body.substr(at, end - at));
        at = end;
      }
      if (lines.size() < 2) return Fail(Unavailable(fmt::format("{}: a page that is not a usage CSV", r.server)));
      std::string out;
      for (size_t i = page == 0 ? 0 : 1; i + 1 < lines.size(); ++i) out += lines[i];
      if (after.empty()) out += lines.back();
      std::fputs(out.c_str(), stdout);
    } else {
      std::fputs(res->body.c_str(), stdout);
    }
    if (after.empty()) return 0;
  }
}

// A table ends with the note of what had no price; CSV and JSON carry it as fields, so a
// person reading them hears it on stderr too.
void WarnUnpriced(report::Format f, const std::vector<ledger::UnpricedCapacity>& unpriced) {
  if (f != report::Format::kTable) std::fputs(report::UnpricedNote(unpriced).c_str(), stderr);
}

// The month a --period left empty means: the month the store's data end in, or with no
// store (--server) this month.
Result<std::string> DefaultMonth(ledger::Ledger* local, const Clock& clock) {
  int64_t at = clock.NowMs();
  if (local != nullptr) {
    GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, local->Data());
    if (data.end_ms > 0) at = data.end_ms - 1;  // the end is exclusive
  }
  return FormatTime(at).substr(0, 7);
}

// What a monthly command reads: the store (none with --server) and the month its --period
// names, `period` set to the default month (DefaultMonth) when it was left empty.
struct MonthQuery {
  std::unique_ptr<ledger::Ledger> local;
  TimeRange month;
};

Result<MonthQuery> OpenMonth(const CommonOptions& common, const RemoteOptions& remote, std::string& period,
                             const Clock& clock) {
  MonthQuery q;
  if (remote.server.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(q.local, OpenLedger(common, clock));
  }
  if (period.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(period, DefaultMonth(q.local.get(), clock));
  }
  auto month = ParseMonth(period);
  if (!month.ok()) return month.status().WithContext("--period");
  q.month = *month;
  return q;
}

}  // namespace

void AddUsageCommands(CLI::App& app, CommonOptions& common, Commands& out) {
  struct UsageOpts {
    WindowOptions w;
    std::string by = "team";
    std::string format = "table";
    RemoteOptions remote;
    int64_t page_rows = 5'000;
  };
  auto u = std::make_shared<UsageOpts>();
  CLI::App* usage = app.add_subcommand(
      "usage", "GPU-hours and cost in each bucket, effective utilization and allocated "
               "efficiency per group, and the fleet's total");
  AddCommonOptions(*usage, common);
  AddWindowOptions(*usage, u->w, "");
  usage->add_option("--by", u->by,
                    "team, project, experiment, user, kind, job, pool, node, model, device or hour "
                    "(hour: a row per hour of the window, a time series); several separated by commas, "
                    "e.g. hour,pool")
      ->capture_default_str();
  usage->add_option("--format", u->format, "table, json or csv")->capture_default_str();
  AddRemoteOptions(*usage, u->remote);
  usage->add_option("--page-rows", u->page_rows,
                    "with --server: rows asked for a page of the server's answer (every page is read)")
      ->check(CLI::Range(int64_t{1}, int64_t{5'000}))
      ->capture_default_str();
  out.push_back({usage, [u, &common]() -> int {
                   SystemClock clock;
                   auto by = ledger::ParseDimensions(u->by);
                   if (!by.ok()) return Fail(by.status());
                   auto format = report::ParseFormat(u->format);
                   if (!format.ok()) return Fail(format.status());
                   if (!u->remote.server.empty()) {
                     // The server resolves the window by the same rule, against its data.
                     auto window = ResolveWindow(u->w, nullptr, clock);  // checks the options
                     if (!window.ok()) return Fail(window.status());
                     std::string span =
                         !u->w.window.empty()
                             ? "window=" + server::UrlEncode(u->w.window)
                             : fmt::format("from={}&to={}", server::UrlEncode(FormatTime(window->begin_ms)),
                                           server::UrlEncode(FormatTime(window->end_ms)));
                     return PrintAllPagesFromServer(u->remote,
                                                    fmt::format("/api/v1/usage?{}&by={}&format={}", span,
                                                                server::UrlEncode(u->by), server::UrlEncode(u->format)),
                                                    *format, u->page_rows);
                   }
                   Config config;
                   auto ledger = OpenLedger(common, clock, &config);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto window = ResolveWindow(u->w, ledger->get(), clock);
                   if (!window.ok()) return Fail(window.status());
                   auto r = (*ledger)->Usage(*window, *by);
                   if (!r.ok()) return Fail(r.status());
                   // Grouped by pool, each row shows the target it is held to.
                   bool by_pool = std::find(by->begin(), by->end(), ledger::Dimension::kPool) != by->end();
                   std::fputs(report::RenderUsage(*r, *format, by_pool ? &config.goals : nullptr).c_str(), stdout);
                   WarnUnpriced(*format, r->unpriced);
                   return 0;
                 }});

  struct ChargebackOpts {
    std::string period;
    std::string format = "csv";
    bool share_idle = false;
    RemoteOptions remote;
  };
  auto c = std::make_shared<ChargebackOpts>();
  CLI::App* cb = app.add_subcommand(
      "chargeback", "Cost per team and project for a month, for finance and FinOps tools");
  AddCommonOptions(*cb, common);
  cb->add_option("--period", c->period,
                 "the month, YYYY-MM (default: the month the store's data end in; with --server, this month)");
  cb->add_option("--format", c->format, "csv, json, table or focus (FOCUS 1.2 CSV for FinOps tools, docs/focus.md)")
      ->capture_default_str();
  cb->add_flag("--share-idle", c->share_idle,
               "spread unused capacity over the teams in proportion to their use, instead of "
               "listing it on its own lines");
  AddRemoteOptions(*cb, c->remote);
  out.push_back({cb, [c, &common]() -> int {
                   SystemClock clock;
                   const bool focus = c->format == "focus";
                   if (focus && c->share_idle) {
                     return Fail(InvalidArgument("--format focus lists unused capacity on rows of its own: "
                                                 "drop --share-idle"));
                   }
                   auto format = focus ? Result<report::Format>(report::Format::kCsv) : report::ParseFormat(c->format);
                   if (!format.ok()) return Fail(format.status());
                   auto opened = OpenMonth(common, c->remote, c->period, clock);
                   if (!opened.ok()) return Fail(opened.status());
                   std::unique_ptr<ledger::Ledger> local = std::move(opened->local);
                   const TimeRange* period = &opened->month;
                   if (!c->remote.server.empty() && focus) {
                     return PrintFromServer(c->remote, "/api/v1/focus?period=" + server::UrlEncode(c->period));
                   }
                   if (focus) {
                     auto e = ledger::FocusLines(*local, *period, ledger::Scope::All());
                     if (!e.ok()) return Fail(e.status());
                     std::fputs(report::RenderFocusCsv(*e).c_str(), stdout);
                     WarnUnpriced(*format, e->unpriced);
                     return 0;
                   }
                   if (!c->remote.server.empty()) {
                     return PrintFromServer(c->remote,
                                            fmt::format("/api/v1/chargeback?period={}&format={}&share_idle={}",
                                                        server::UrlEncode(c->period), server::UrlEncode(c->format),
                                                        c->share_idle ? "true" : "false"));
                   }
                   auto r = local->Chargeback(*period, c->share_idle);
                   if (!r.ok()) return Fail(r.status());
                   std::fputs(report::RenderChargeback(*r, *format).c_str(), stdout);
                   WarnUnpriced(*format, r->unpriced);
                   return 0;
                 }});

  struct ExperimentsOpts {
    std::string period;
    std::string team;
    std::string format = "table";
    RemoteOptions remote;
  };
  auto e = std::make_shared<ExperimentsOpts>();
  CLI::App* ex = app.add_subcommand(
      "experiments", "Cost per experiment for a month, per team: cost, GPU-hours, waste, effective "
                     "utilization, and each team's distribution (count, median, p90, the costliest)");
  AddCommonOptions(*ex, common);
  ex->add_option("--period", e->period,
                 "the month, YYYY-MM (default: the month the store's data end in; with --server, this month)");
  ex->add_option("--team", e->team, "only this team's experiments");
  ex->add_option("--format", e->format, "table, csv or json")->capture_default_str();
  AddRemoteOptions(*ex, e->remote);
  out.push_back({ex, [e, &common]() -> int {
                   SystemClock clock;
                   auto format = report::ParseFormat(e->format);
                   if (!format.ok()) return Fail(format.status());
                   auto opened = OpenMonth(common, e->remote, e->period, clock);
                   if (!opened.ok()) return Fail(opened.status());
                   if (!e->remote.server.empty()) {
                     std::string path = fmt::format("/api/v1/experiments?period={}&format={}",
                                                    server::UrlEncode(e->period), server::UrlEncode(e->format));
                     if (!e->team.empty()) path += "&team=" + server::UrlEncode(e->team);
                     return PrintFromServer(e->remote, path);
                   }
                   auto r = ledger::Experiments(*opened->local, opened->month, ledger::Scope::All(), e->team);
                   if (!r.ok()) return Fail(r.status());
                   std::fputs(report::RenderExperiments(*r, *format).c_str(), stdout);
                   WarnUnpriced(*format, r->unpriced);
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
