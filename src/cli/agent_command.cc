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
  sub->add_option("--config", common.config_path, "gpuledger.toml: its [agent] section (the whole file is checked)")
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
                   auto loaded = LoadCommonConfig(common);
                   if (!loaded.ok()) return Fail(loaded.status());
                   agent::AgentConfig config;
                   agent::ApplyAgentConfig(loaded->agent, config);
                   // A flag given overrides the file; FinishAgentConfig's errors name the flag.
                   auto text = [&](const std::string& value, std::string& target, const char* key, const char* flag) {
                     if (value.empty()) return;
                     target = value;
                     config.where.SetFlag(key, flag);
                   };
                   auto duration = [&](const std::string& value, int64_t& target, const char* key,
                                       const char* flag) -> Status {
                     if (value.empty()) return Status::Ok();
                     auto d = ParseDuration(value);
                     if (!d.ok()) return d.status().WithContext(flag);
                     target = *d;
                     config.where.SetFlag(key, flag);
                     return Status::Ok();
                   };
                   text(opts->server_url, config.server_url, "server_url", "--server");
                   text(opts->token_file, config.token_file, "token_file", "--token-file");
                   text(opts->node, config.node, "node", "--node");
                   text(opts->pool, config.pool, "pool", "--pool");
                   text(opts->spool_dir, config.spool_dir, "spool_dir", "--spool-dir");
                   text(opts->listen, config.listen_address, "listen", "--listen");
                   text(opts->nvml_library, config.nvml_library, "nvml_library", "--nvml-library");
                   text(opts->proc_root, config.proc_root, "proc_root", "--proc-root");
                   if (Status st = duration(opts->interval, config.interval_ms, "interval", "--interval"); !st.ok()) {
                     return Fail(st);
                   }
                   if (Status st = duration(opts->push_interval, config.push_interval_ms, "push_interval",
                                            "--push-interval");
                       !st.ok()) {
                     return Fail(st);
                   }
                   if (!opts->spool_size.empty()) {
                     auto size = config::ParseByteSize(opts->spool_size);
                     if (!size.ok()) return Fail(size.status().WithContext("--spool-size"));
                     config.spool_max_bytes = *size;
                     config.where.SetFlag("spool_size", "--spool-size");
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
