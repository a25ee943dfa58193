#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "cli/commands.h"
#include "report/monthly.h"
#include "report/weekly.h"

namespace gpuledger::cli {
namespace {

// Chromium from Debian prints a page to PDF headless; nothing else is needed.
Status PrintToPdf(const std::string& html_path, const std::string& pdf_path) {
  std::string chromium;
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (std::filesystem::exists(c)) {
      chromium = c;
      break;
    }
  }
  if (chromium.empty()) {
    return FailedPrecondition("--pdf needs headless Chromium (Debian package chromium)");
  }
  auto profile = std::filesystem::temp_directory_path() / fmt::format("gpuledger-pdf-{}", ::getpid());
  std::string cmd = fmt::format(
      "'{}' --headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-component-update --disable-sync --no-first-run --no-pdf-header-footer "
      "--user-data-dir='{}' --print-to-pdf='{}' 'file://{}' >/dev/null 2>&1",
      chromium, profile.string(), pdf_path, std::filesystem::absolute(html_path).string());
  int rc = std::system(cmd.c_str());
  std::filesystem::remove_all(profile);
  if (rc != 0 || !std::filesystem::exists(pdf_path)) {
    return Internal(fmt::format("chromium could not print {} (exit {})", html_path, rc));
  }
  return Status::Ok();
}

// The config's targets, which --target and --pool-target override.
Result<Goals> GoalsWithFlags(Goals goals, const std::optional<double>& target,
                             const std::vector<std::string>& pool_targets) {
  if (target) {
    goals.fleet_target = *target;
    goals.fleet_target_source = "--target";
  }
  for (const std::string& pt : pool_targets) {
    auto eq = pt.find('=');
    double v = -1;
    if (eq != std::string::npos) {
      try {
        v = std::stod(pt.substr(eq + 1));
      } catch (const std::exception&) {
        v = -1;
      }
    }
    if (eq == std::string::npos || v < 0 || v > 1) {
      return InvalidArgument(fmt::format("--pool-target \"{}\": want POOL=RATIO with RATIO in 0..1", pt));
    }
    goals.pool_targets[pt.substr(0, eq)] = v;
    goals.pool_target_sources[pt.substr(0, eq)] = "--pool-target";
  }
  return goals;
}

// Writes `html` to `path`, and with `pdf` beside it as PDF; says what it wrote.
Status WriteReport(const std::string& html, const std::string& path, bool pdf) {
  std::ofstream f(path, std::ios::binary);
  f << html;
  if (!f.flush()) return Unavailable(fmt::format("cannot write {}", path));
  std::printf("wrote %s\n", path.c_str());
  if (!pdf) return Status::Ok();
  std::string pdf_path = std::filesystem::path(path).replace_extension(".pdf").string();
  GPULEDGER_RETURN_IF_ERROR(PrintToPdf(path, pdf_path));
  std::printf("wrote %s\n", pdf_path.c_str());
  return Status::Ok();
}

// The options weekly and monthly share.
struct ReportOpts {
  std::string period, out, now;
  std::optional<double> target;
  std::vector<std::string> pool_targets;
  bool pdf = false;
};

void AddSharedOptions(CLI::App& sub, ReportOpts& o) {
  sub.add_option("--out", o.out, "output file (default report-<period>.html)");
  sub.add_option("--target", o.target,
                 "effective-utilization target, 0..1 (default: the config's [targets] fleet, else 0.6)")
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option("--pool-target", o.pool_targets, "a pool's own target, POOL=RATIO (repeatable), e.g. serving=0.4");
  sub.add_flag("--pdf", o.pdf, "also print it to PDF with headless Chromium");
  sub.add_option("--now", o.now, "pretend the time is this")->group("");
}

Result<int64_t> NowOf(const ReportOpts& o, const Clock& clock) {
  if (o.now.empty()) return clock.NowMs();
  return ParseTime(o.now);
}

}  // namespace

void AddReportCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  auto o = std::make_shared<ReportOpts>();
  CLI::App* report = app.add_subcommand("report", "Reports for the people who pay");
  report->require_subcommand(1);
  CLI::App* weekly = report->add_subcommand(
      "weekly", "The weekly utilization report: one self-contained HTML page");
  AddCommonOptions(*weekly, common);
  weekly->add_option("--week", o->period, "ISO week, e.g. 2026-W48 (default: the last complete week)");
  AddSharedOptions(*weekly, *o);
  out.push_back({weekly, [o, &common]() -> int {
                   SystemClock clock;
                   auto now = NowOf(*o, clock);
                   if (!now.ok()) return Fail(now.status());
                   std::string week_name = o->period.empty() ? IsoWeekOf(*now - 7 * kMsPerDay) : o->period;
                   auto week = ParseIsoWeek(week_name);
                   if (!week.ok()) return Fail(week.status());
                   Config config;
                   auto ledger = OpenLedger(common, clock, &config);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto goals = GoalsWithFlags(config.goals, o->target, o->pool_targets);
                   if (!goals.ok()) return Fail(goals.status());
                   report::WeeklyOptions options{.goals = *goals, .objectives = config.objectives};
                   auto html = report::RenderWeeklyReport(**ledger, *week, options);
                   if (!html.ok()) return Fail(html.status());
                   Status st = WriteReport(*html, o->out.empty() ? "report-" + week_name + ".html" : o->out, o->pdf);
                   if (!st.ok()) return Fail(st);
                   PrintTargets(*goals);
                   return 0;
                 }});

  auto m = std::make_shared<ReportOpts>();
  CLI::App* monthly = report->add_subcommand(
      "monthly", "The monthly review for ML leads and finance: one self-contained HTML page (docs/reports.md)");
  AddCommonOptions(*monthly, common);
  monthly->add_option("--month", m->period, "the month, YYYY-MM (default: the month the store's data end in)");
  AddSharedOptions(*monthly, *m);
  out.push_back({monthly, [m, &common]() -> int {
                   SystemClock clock;
                   auto now = NowOf(*m, clock);
                   if (!now.ok()) return Fail(now.status());
                   Config config;
                   auto ledger = OpenLedger(common, clock, &config);
                   if (!ledger.ok()) return Fail(ledger.status());
                   // By default the month the data end in, as `chargeback` takes it.
                   std::string month_name = m->period;
                   if (month_name.empty()) {
                     auto data = (*ledger)->Data();
                     if (!data.ok()) return Fail(data.status());
                     month_name = FormatTime(data->end_ms > 0 ? data->end_ms - 1 : *now).substr(0, 7);
                   }
                   auto month = ParseMonth(month_name);
                   if (!month.ok()) return Fail(month.status().WithContext("--month"));
                   auto goals = GoalsWithFlags(config.goals, m->target, m->pool_targets);
                   if (!goals.ok()) return Fail(goals.status());
                   report::MonthlyOptions options{.goals = *goals,
                                                  .objectives = config.objectives,
                                                  .quotas = config.quotas,
                                                  .what_if = WhatIfReplayWithDefaults()};
                   auto html = report::RenderMonthlyReport(**ledger, *month, options);
                   if (!html.ok()) return Fail(html.status());
                   Status st = WriteReport(*html, m->out.empty() ? "report-" + month_name + ".html" : m->out, m->pdf);
                   if (!st.ok()) return Fail(st);
                   PrintTargets(*goals);
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
