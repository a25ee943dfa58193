// gpuledger serve: the central server; gpuledger token: a new bearer token and the
// config entry that admits it.
#include <fmt/format.h>
#include <malloc.h>
#include <pthread.h>
#include <optional>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "actuators/actuators.h"
#include "agent/agent_config.h"
#include "agent/slurm.h"
#include "cli/commands.h"
#include "server/auth.h"
#include "server/server.h"
#include "server/objectives_loop.h"
#include "server/server_config.h"
#include "store/store.h"

namespace gpuledger::cli {

sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // Threads started afterwards inherit the mask, so only sigwait sees these signals.
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// One malloc arena for the whole server, unless GLIBC_TUNABLES names its own count. glibc
// gives each further thread an arena of its own whose heaps are at most 64 MiB, so the
// large arrays a long window's report builds and frees (tens of MB at 10,000 GPUs) are
// fresh mmap'd pages on every request, zeroed by the kernel page by page; the main arena
// keeps freed memory for the next request, whichever thread makes it. Small allocations
// still come from each thread's own cache. Measured in docs/benchmarks.md ("Reserved sums
// and one malloc arena").
//
// And that arena keeps what a request frees, up to kKeptFreeBytes: blocks up to 32 MiB
// (glibc's largest mmap threshold) come from the heap, and its top is given back to the
// kernel only past kKeptFreeBytes. By default glibc trims whatever a request freed beyond
// its dynamic threshold (at most 64 MiB), so an hourly series of a month, 100+ MB of atoms
// at 1,000 GPUs, faulted its pages in afresh on every request (docs/benchmarks.md, "Freed
// memory kept for the next request"). GLIBC_TUNABLES naming either threshold sets both
// itself. Before any thread starts.
void UseOneMallocArena() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string_view named = tunables != nullptr ? tunables : "";
  if (named.find("arena_max") == std::string_view::npos) mallopt(M_ARENA_MAX, 1);
  const bool thresholds_named =
      named.find("mmap_threshold") != std::string_view::npos || named.find("trim_threshold") != std::string_view::npos;
  if (!thresholds_named) {
    constexpr int kLargestFromTheHeap = 32 << 20;
    constexpr int kKeptFreeBytes = 512 << 20;
    mallopt(M_MMAP_THRESHOLD, kLargestFromTheHeap);
    mallopt(M_TRIM_THRESHOLD, kKeptFreeBytes);
  }
}


// Who carries out serve's enforced decisions (docs/objectives.md): Slurm through the
// tools the config's [agent] scontrol names (scancel beside it; both from PATH by default),
// Kubernetes through [agent.kubernetes] api_server with its token_file, when one is set,
// finding a job's pods by that section's pod rules (the agent's, from the same file; the
// defaults where it sets none): a rule serve and the agent read differently would name
// the pods of another job. Bad rules stop serve at start, naming their FILE:LINE.
Result<server::LoopActuators> ServeActuators(const Config& config) {
  server::LoopActuators out;
  actuators::SlurmOptions slurm;
  if (config.agent.scontrol) {
    slurm.scontrol = *config.agent.scontrol;
    std::filesystem::path dir = std::filesystem::path(slurm.scontrol).parent_path();
    if (!dir.empty()) slurm.scancel = (dir / "scancel").string();
  }
  out.slurm = actuators::SlurmActuator(
      [](const std::vector<std::string>& argv) { return agent::RunCommand(argv, 30'000); }, slurm);
  const config::KubernetesSection& k = config.agent.kubernetes;
  if (k.api_server && *k.api_server != "none") {
    actuators::KubernetesOptions options{.api_server = *k.api_server};
    GPULEDGER_ASSIGN_OR_RETURN(options.rules, agent::PodRulesFromConfig(k));
    if (k.token_file) {
      GPULEDGER_ASSIGN_OR_RETURN(options.token, ReadSecretFile(*k.token_file, k.where.Of("token_file")));
    }
    auto kube = actuators::KubernetesActuator(options);
    if (!kube.ok()) return kube.status().WithContext(k.where.Of("api_server"));
    out.kubernetes = std::move(*kube);
  }
  return out;
}

void AddServeCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string listen;
    std::string db_file;
    bool insecure = false;
    std::string now;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Run the central server: ingest (native batches, Prometheus remote-write, scrapes), "
               "the JSON API and /metrics (docs/server.md)");
  AddCommonOptions(*sub, common);
  // A PostgreSQL URL carries its password: from a file (a mounted Kubernetes Secret) it
  // stays out of the command line that `ps` shows, and out of the config file.
  sub->add_option("--db-file", o->db_file,
                  "read the store (a postgresql:// URL or a SQLite path) from this file, e.g. a mounted "
                  "Secret, so that a password is not on the command line; overrides the config's db")
      ->excludes(sub->get_option("--db"));
  sub->add_option("--listen", o->listen, "host:port to listen on (default 127.0.0.1:8080; [server] listen)");
  sub->add_flag("--insecure", o->insecure,
                "allow a non-loopback address without any token configured (everyone is admin)");
  sub->add_option("--now", o->now, "pretend the time is this, and stands still (tests, screenshots of a stored fleet)")
      ->group("");
  out.push_back({sub, [o, &common]() -> int {
                   UseOneMallocArena();
                   sigset_t stop = BlockStopSignals();
                   SystemClock system_clock;
                   std::optional<ManualClock> frozen;
                   if (!o->now.empty()) {
                     auto at = ParseTime(o->now);
                     if (!at.ok()) return Fail(at.status().WithContext("--now"));
                     frozen.emplace(*at);
                   }
                   const Clock& clock = frozen ? static_cast<const Clock&>(*frozen) : system_clock;
                   if (!o->db_file.empty()) {
                     auto db = ReadSecretFile(o->db_file, "--db-file");
                     if (!db.ok()) return Fail(db.status());
                     common.db_path = std::move(*db);
                   }
                   // Every acknowledged batch is durable against power loss.
                   Config config;
                   auto ledger = OpenLedger(common, clock, &config, {.synchronous_full = true, .exclusive_writer = true});
                   if (!ledger.ok()) return Fail(ledger.status());
                   // A damaged database is not served: the quick structural check first
                   // (`gpuledger store check` runs the full one).
                   auto check = (*ledger)->CheckStore(/*full=*/false);
                   if (!check.ok()) return Fail(check.status());
                   if (!check->ok()) {
                     return Fail(FailedPrecondition(StoreCheckText(*check) +
                                                    "\n(restore a backup; `gpuledger store check` for the full check)"));
                   }
                   server::ServerOptions options;
                   Status applied = server::ApplyServerConfig(config.server, options);
                   if (!applied.ok()) return Fail(applied);
                   if (!o->listen.empty()) options.listen = o->listen;
                   if (o->insecure) options.insecure = true;
                   options.goals = config.goals;
                   options.objectives = config.objectives;
                   options.quotas = config.quotas;
                   // /api/v1/quotas/drift reads Slurm's limits with the sacctmgr beside [agent] scontrol.
                   options.slurm_runner = [](const std::vector<std::string>& argv) {
                     return agent::RunCommand(argv, 30'000);
                   };
                   if (config.agent.scontrol) {
                     std::filesystem::path dir = std::filesystem::path(*config.agent.scontrol).parent_path();
                     if (!dir.empty()) options.sacctmgr = (dir / "sacctmgr").string();
                   }
                   PrintTargets(options.goals);
                   options.what_if = WhatIfForServer();
                   auto srv = server::Server::Create(**ledger, clock, options);
                   if (!srv.ok()) return Fail(srv.status());
                   // The config's objectives, alerts and rules (docs/objectives.md); none: null.
                   auto actuators = ServeActuators(config);
                   if (!actuators.ok()) return Fail(actuators.status());
                   auto objectives =
                       server::ObjectivesLoop::Create(**ledger, clock, (*srv)->metrics(), config, std::move(*actuators));
                   if (!objectives.ok()) return Fail(objectives.status());
                   Status st = (*srv)->Start();
                   if (!st.ok()) return Fail(st);
                   if (*objectives) (*objectives)->Start();
                   std::fprintf(stderr, "gpuledger: serving on %s (Ctrl-C or SIGTERM stops)\n",
                                (*srv)->Url().c_str());
                   int sig = 0;
                   sigwait(&stop, &sig);
                   std::fprintf(stderr, "gpuledger: %s: finishing requests in flight\n",
                                sig == SIGINT ? "SIGINT" : "SIGTERM");
                   if (*objectives) (*objectives)->Stop();
                   (*srv)->Stop();
                   return 0;
                 }});

  struct TokenOpts {
    std::string name;
    std::string role = "viewer";
    std::vector<std::string> teams;
    std::vector<std::string> nodes;
  };
  auto t = std::make_shared<TokenOpts>();
  CLI::App* tok = app.add_subcommand(
      "token", "Make a new bearer token; prints it once, and the [[server.token]] entry (a salted "
               "hash) to add to the server's config");
  tok->add_option("--name", t->name, "who or what uses it (shown in the server's logs)")->required();
  tok->add_option("--role", t->role, "agent, viewer or admin")->capture_default_str();
  tok->add_option("--team", t->teams, "a team a viewer may see (repeat for several)");
  tok->add_option("--node", t->nodes,
                  "a node an agent may report for, '*' matching any run (repeat for several; none: any node)");
  out.push_back({tok, [t]() -> int {
                   auto role = server::ParseRole(t->role);
                   if (!role.ok()) return Fail(role.status());
                   if (*role == server::Role::kViewer && t->teams.empty()) {
                     return Fail(InvalidArgument("a viewer token needs at least one --team"));
                   }
                   if (*role != server::Role::kAgent && !t->nodes.empty()) {
                     return Fail(InvalidArgument("only an agent token is bound to nodes (--node)"));
                   }
                   std::string token = server::NewToken();
                   std::string teams;
                   std::string nodes;
                   for (const auto& team : t->teams) teams += fmt::format("{}\"{}\"", teams.empty() ? "" : ", ", team);
                   for (const auto& node : t->nodes) nodes += fmt::format("{}\"{}\"", nodes.empty() ? "" : ", ", node);
                   std::printf("token: %s\n\n[[server.token]]\nname = \"%s\"\nrole = \"%s\"\nhash = \"%s\"\n",
                               token.c_str(), t->name.c_str(), t->role.c_str(),
                               server::HashToken(token).c_str());
                   if (!teams.empty()) std::printf("teams = [%s]\n", teams.c_str());
                   if (!nodes.empty()) std::printf("nodes = [%s]\n", nodes.c_str());
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
