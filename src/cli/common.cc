#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"

namespace gpuledger::cli {

void AddCommonOptions(CLI::App& sub, CommonOptions& common) {
  sub.add_option("--config", common.config_path, "TOML configuration file")
      ->check(CLI::ExistingFile);
  sub.add_option("--db", common.db_path,
                 "the store: a SQLite file, or a postgresql:// URL (default: $GPULEDGER_DB or ~/.local/share/gpuledger/ledger.db)");
}

void AddWindowOptions(CLI::App& sub, WindowOptions& w, const std::string& fallback) {
  w.fallback = fallback;
  sub.add_option("--window", w.window,
                 "the last whole hours up to where the data ends, e.g. 7d, 30d, 12h" +
                     (fallback.empty() ? std::string() : " (default " + fallback + ")"));
  sub.add_option("--from", w.from, "start (RFC 3339), instead of --window");
  sub.add_option("--to", w.to, "end (RFC 3339), with --from; default now");
  sub.add_option("--now", w.now, "pretend the time is this (for reproducible reports)")->group("");
}

Result<TimeRange> ResolveWindow(const WindowOptions& w, ledger::Ledger* ledger, const Clock& clock) {
  int64_t now = clock.NowMs();
  if (!w.now.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(now, ParseTime(w.now));
  }
  if (!w.window.empty() && (!w.from.empty() || !w.to.empty())) {
    return InvalidArgument("give either --window or --from/--to, not both");
  }
  std::string trailing = w.window.empty() && w.from.empty() && w.to.empty() ? w.fallback : w.window;
  if (!trailing.empty()) {
    auto length = ParseDuration(trailing);
    if (!length.ok()) return length.status().WithContext("--window");
    int64_t data_end = 0;
    if (ledger != nullptr) {
      GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, ledger->Data());
      data_end = data.end_ms;
    }
    return ledger::TrailingWindow(now, data_end, *length);
  }
  if (w.from.empty()) return InvalidArgument("give --window (e.g. 7d) or --from and --to");
  auto from = ParseTime(w.from);
  if (!from.ok()) return from.status().WithContext("--from");
  int64_t to = now;
  if (!w.to.empty()) {
    auto parsed = ParseTime(w.to);
    if (!parsed.ok()) return parsed.status().WithContext("--to");
    to = *parsed;
  }
  if (to <= *from) return InvalidArgument("--to must be after --from");
  return TimeRange{*from, to};
}

Result<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(fmt::format("{}: cannot read {}", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
  if (secret.empty()) return InvalidArgument(fmt::format("{}: {} is empty", what, path));
  return secret;
}

int Fail(const Status& status) {
  std::fprintf(stderr, "gpuledger: %s\n", status.message().c_str());
  return 1;
}

std::string FormatDuration(int64_t ms) {
  int64_t s = std::max<int64_t>(0, ms) / kMsPerSecond;
  int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60;
  if (d > 0) return fmt::format("{}d {}h", d, h);
  if (h > 0) return fmt::format("{}h {}m", h, m);
  if (m > 0) return fmt::format("{}m", m);
  return fmt::format("{}s", s);
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace gpuledger::cli
