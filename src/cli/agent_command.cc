// `gpuledger agent`: wiring only. The agent itself is src/agent (docs/agent.md).
#include <signal.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "cli/commands.h"
#include "nvml/nvml_api.h"

namespace gpuledger::cli {

void AddAgentCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string server_url, token_file, node, pool, spool_dir, listen, nvml_library, proc_root;
    std::string interval, push_interval, spool_size;
    bool once = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "agent", "Run the node agent: poll NVML, attribute processes to jobs, serve /metrics, push batches");
  sub->add_option("--config", common.config_path, "TOML configuration file ([agent] section)")
      ->check(CLI::ExistingFile);
  sub->add_option("--server", opts->server_url, "server URL, e.g. http://ledger:8080 (overrides agent.server_url)");
  sub->add_option("--token-file", opts->token_file, "file holding the agent token");
  sub->add_option("--node", opts->node, "node name (default: the host name)");
  sub->add_option("--pool", opts->pool, "pool of this node's GPUs");
  sub->add_option("--interval", opts->interval, "collection interval, e.g. 1s or 500ms");
  sub->add_option("--push-interval", opts->push_interval, "push interval, e.g. 10s");
  sub->add_option("--spool-dir", opts->spool_dir, "on-disk spool folder");
  sub->add_option("--spool-size", opts->spool_size, "spool bound, e.g. 1GiB");
  sub->add_option("--listen", opts->listen, "/metrics address, e.g. 0.0.0.0:9400 (empty: none)");
  sub->add_option("--nvml-library", opts->nvml_library, "path of libnvidia-ml.so.1");
  sub->add_option("--proc-root", opts->proc_root, "the host's /proc (e.g. /host/proc in a container)");
  sub->add_flag("--once", opts->once, "collect once, print the exposition and exit (a check, pushes nothing)");
  out.push_back({sub, [opts, &common]() -> int {
                   agent::AgentConfig config;
                   if (!common.config_path.empty()) {
                     auto loaded = agent::LoadAgentConfig(common.config_path);
                     if (!loaded.ok()) return Fail(loaded.status());
                     config = std::move(loaded).value();
                   }
                   auto duration = [](const std::string& text, int64_t& target, const char* flag) -> Status {
                     if (text.empty()) return Status::Ok();
                     auto d = agent::ParseAgentDuration(text);
                     if (!d.ok()) return d.status().WithContext(flag);
                     target = *d;
                     return Status::Ok();
                   };
                   if (!opts->server_url.empty()) config.server_url = opts->server_url;
                   if (!opts->token_file.empty()) config.token_file = opts->token_file;
                   if (!opts->node.empty()) config.node = opts->node;
                   if (!opts->pool.empty()) config.pool = opts->pool;
                   if (!opts->spool_dir.empty()) config.spool_dir = opts->spool_dir;
                   if (!opts->listen.empty()) config.listen_address = opts->listen;
                   if (!opts->nvml_library.empty()) config.nvml_library = opts->nvml_library;
                   if (!opts->proc_root.empty()) config.proc_root = opts->proc_root;
                   if (Status st = duration(opts->interval, config.interval_ms, "--interval"); !st.ok()) return Fail(st);
                   if (Status st = duration(opts->push_interval, config.push_interval_ms, "--push-interval"); !st.ok()) {
                     return Fail(st);
                   }
                   if (!opts->spool_size.empty()) {
                     auto size = agent::ParseByteSize(opts->spool_size);
                     if (!size.ok()) return Fail(size.status().WithContext("--spool-size"));
                     config.spool_max_bytes = *size;
                   }
                   if (Status st = agent::FinishAgentConfig(config); !st.ok()) return Fail(st);

                   auto nvml = nvml::NvmlApi::Load(config.nvml_library);
                   if (!nvml.ok()) return Fail(nvml.status());
                   SystemClock clock;
                   std::unique_ptr<agent::BatchSink> sink;
                   if (!config.server_url.empty() && !opts->once) {
                     auto made = agent::MakeHttpBatchSink(config.server_url, config.token);
                     if (!made.ok()) return Fail(made.status());
                     sink = std::move(made).value();
                   }
                   std::unique_ptr<agent::ScontrolResolver> slurm;
                   if (config.slurm) {
                     agent::ScontrolResolver::Options so;
                     so.scontrol = config.scontrol;
                     slurm = std::make_unique<agent::ScontrolResolver>(clock, so);
                   }
                   agent::AgentEnv env{nvml->get(), &clock, sink.get(), slurm.get()};
                   auto created = agent::Agent::Create(config, env);
                   if (!created.ok()) return Fail(created.status());
                   agent::Agent& a = **created;
                   if (opts->once) {
                     // One interval first, so that GPM has two samples to measure between.
                     std::this_thread::sleep_for(std::chrono::milliseconds(config.interval_ms));
                     a.CollectOnce();
                     std::fputs(a.MetricsText()->c_str(), stdout);
                     return 0;
                   }
                   // SIGINT/SIGTERM are taken with sigwait so the agent stops cleanly.
                   sigset_t set;
                   sigemptyset(&set);
                   sigaddset(&set, SIGINT);
                   sigaddset(&set, SIGTERM);
                   pthread_sigmask(SIG_BLOCK, &set, nullptr);
                   if (Status st = a.Start(); !st.ok()) return Fail(st);
                   std::fprintf(stderr, "gpuledger agent: %zu devices on %s; /metrics on port %d; spool %s\n",
                                a.devices().size(), config.node.c_str(), a.metrics_port(), config.spool_dir.c_str());
                   int sig = 0;
                   sigwait(&set, &sig);
                   std::fprintf(stderr, "gpuledger agent: signal %d, stopping\n", sig);
                   a.Stop();
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
