#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "wire/batch.h"

namespace gpuledger::cli {
namespace {

Result<std::string> ReadAll(const std::string& path) {
  std::ostringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFound(fmt::format("{}: cannot open", path));
    buf << in.rdbuf();
    if (in.bad()) return Unavailable(fmt::format("{}: read error", path));
  }
  return buf.str();
}

// One document, or NDJSON (one batch per line): a file with more than one line that
// opens an object at its first column is NDJSON.
bool IsNdjson(const std::string& path, std::string_view text) {
  if (path.ends_with(".ndjson") || path.ends_with(".jsonl")) return true;
  if (path.ends_with(".json")) return false;
  int openers = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == '{' && ++openers > 1) return true;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return false;
}

struct ImportStats {
  int64_t applied = 0, duplicates = 0, rejected = 0, samples = 0;
};

}  // namespace

void AddImportCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::vector<std::string> files;
    bool keep_going = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "import", "Load v1 batches (JSON documents or NDJSON files, '-' for stdin) into the store");
  AddCommonOptions(*sub, common);
  sub->add_option("files", opts->files, "batch files")->required();
  sub->add_flag("--keep-going", opts->keep_going,
                "skip a rejected batch and go on (each batch is still all or nothing)");
  out.push_back({sub, [opts, &common]() -> int {
                   SystemClock clock;
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   ImportStats st;
                   int exit_code = 0;
                   for (const std::string& path : opts->files) {
                     auto text = ReadAll(path);
                     if (!text.ok()) return Fail(text.status());
                     std::vector<std::pair<int, std::string_view>> docs;
                     if (IsNdjson(path, *text)) {
                       std::string_view all = *text;
                       int line = 0;
                       for (size_t pos = 0; pos < all.size();) {
                         size_t nl = all.find('\n', pos);
                         if (nl == std::string_view::npos) nl = all.size();
                         ++line;
                         std::string_view doc = all.substr(pos, nl - pos);
                         if (doc.find_first_not_of(" \t\r") != std::string_view::npos) {
                           docs.emplace_back(line, doc);
                         }
                         pos = nl + 1;
                       }
                     } else {
                       docs.emplace_back(1, *text);
                     }
                     for (const auto& [line, doc] : docs) {
                       auto batch = wire::ParseBatch(doc);
                       Result<store::ApplyOutcome> r =
                           batch.ok() ? (*ledger)->Ingest(*batch)
                                      : Result<store::ApplyOutcome>(batch.status());
                       if (!r.ok()) {
                         ++st.rejected;
                         std::fprintf(stderr, "gpuledger: %s:%d: %s\n", path.c_str(), line,
                                      r.status().message().c_str());
                         exit_code = 1;
                         if (!opts->keep_going) break;
                         continue;
                       }
                       if (*r == store::ApplyOutcome::kDuplicate) {
                         ++st.duplicates;
                       } else {
                         ++st.applied;
                         st.samples += static_cast<int64_t>(batch->samples.size());
                       }
                     }
                     if (exit_code && !opts->keep_going) break;
                   }
                   auto rebuilt = (*ledger)->RefreshRollups();
                   if (!rebuilt.ok()) return Fail(rebuilt.status());
                   if (auto pruned = (*ledger)->ApplyRetention(); !pruned.ok()) return Fail(pruned.status());
                   std::printf("imported %s (%s); %lld already present; %lld rejected\n",
                               Plural(st.applied, "batch", "batches").c_str(),
                               Plural(st.samples, "sample", "samples").c_str(), static_cast<long long>(st.duplicates),
                               static_cast<long long>(st.rejected));
                   return exit_code;
                 }});
}

}  // namespace gpuledger::cli
