#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "cli/commands.h"
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

}  // namespace

void AddReportCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string week, out, now;
    std::optional<double> target;
    std::vector<std::string> pool_targets;
    bool pdf = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* report = app.add_subcommand("report", "Reports for the people who pay");
  report->require_subcommand(1);
  CLI::App* weekly = report->add_subcommand(
      "weekly", "The weekly utilization report: one self-contained HTML page");
  AddCommonOptions(*weekly, common);
  weekly->add_option("--week", o->week, "ISO week, e.g. 2026-W48 (default: the last complete week)");
  weekly->add_option("--out", o->out, "output file (default report-<week>.html)");
  weekly->add_option("--target", o->target,
                     "effective-utilization target, 0..1 (default: the config's [targets] fleet, else 0.6)")
      ->check(CLI::Range(0.0, 1.0));
  weekly->add_option("--pool-target", o->pool_targets,
                     "a pool's own target, POOL=RATIO (repeatable), e.g. serving=0.4");
  weekly->add_flag("--pdf", o->pdf, "also print it to PDF with headless Chromium");
  weekly->add_option("--now", o->now, "pretend the time is this")->group("");
  out.push_back({weekly, [o, &common]() -> int {
                   SystemClock clock;
                   int64_t now = clock.NowMs();
                   if (!o->now.empty()) {
                     auto t = ParseTime(o->now);
                     if (!t.ok()) return Fail(t.status());
                     now = *t;
                   }
                   std::string week_name =
                       o->week.empty() ? IsoWeekOf(now - 7 * kMsPerDay) : o->week;
                   auto week = ParseIsoWeek(week_name);
                   if (!week.ok()) return Fail(week.status());
                   Config config;
                   auto ledger = OpenLedger(common, clock, &config);
                   if (!ledger.ok()) return Fail(ledger.status());
                   // The config's targets, which the flags override.
                   Goals goals = config.goals;
                   if (o->target) {
                     goals.fleet_target = *o->target;
                     goals.fleet_target_source = "--target";
                   }
                   for (const std::string& pt : o->pool_targets) {
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
                       return Fail(InvalidArgument(fmt::format(
                           "--pool-target \"{}\": want POOL=RATIO with RATIO in 0..1", pt)));
                     }
                     goals.pool_targets[pt.substr(0, eq)] = v;
                     goals.pool_target_sources[pt.substr(0, eq)] = "--pool-target";
                   }
                   report::WeeklyOptions options{.goals = goals, .objectives = config.objectives};
                   auto html = report::RenderWeeklyReport(**ledger, *week, options);
                   if (!html.ok()) return Fail(html.status());
                   std::string path = o->out.empty() ? "report-" + week_name + ".html" : o->out;
                   std::ofstream f(path, std::ios::binary);
                   f << *html;
                   if (!f.flush()) return Fail(Unavailable(fmt::format("cannot write {}", path)));
                   std::printf("wrote %s\n", path.c_str());
                   PrintTargets(goals);
                   if (o->pdf) {
                     std::string pdf = std::filesystem::path(path).replace_extension(".pdf").string();
                     Status st = PrintToPdf(path, pdf);
                     if (!st.ok()) return Fail(st);
                     std::printf("wrote %s\n", pdf.c_str());
                   }
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
