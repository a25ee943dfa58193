// nvml_probe: loads NVML through gpuledger's binding and prints what it can read: the
// status of each entry point, the devices with GPM availability, then one line per
// device per interval. A diagnostic for real GPU machines (scripts/device-check.sh);
// it only reads, and changes no GPU setting.
//
//   nvml_probe [--library PATH] [--seconds N] [--interval-ms MS]
//
// Sample lines are `key=value` pairs so that scripts can parse them.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/time.h"
#include "nvml/collector.h"
#include "nvml/nvml_api.h"

namespace {

using gpuledger::nvml::Collector;
using gpuledger::nvml::NvmlApi;

template <typename T>
std::string Opt(const std::optional<T>& v, const char* format = "{:.3f}") {
  return v ? fmt::format(fmt::runtime(format), *v) : "-";
}

bool ParseInt(std::string_view text, int64_t& out) {
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size() && out > 0;
}

int Usage(const char* why) {
  fmt::print(stderr, "nvml_probe: {}\nusage: nvml_probe [--library PATH] [--seconds N] "
                     "[--interval-ms MS]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library(gpuledger::nvml::kDefaultNvmlLibrary);
  int64_t seconds = 10;
  int64_t interval_ms = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (i + 1 >= argc) return Usage("each option takes a value");
    std::string_view value = argv[++i];
    if (arg == "--library") {
      library = std::string(value);
    } else if (arg == "--seconds") {
      if (!ParseInt(value, seconds)) return Usage("--seconds wants a positive integer");
    } else if (arg == "--interval-ms") {
      if (!ParseInt(value, interval_ms)) return Usage("--interval-ms wants a positive integer");
    } else {
      return Usage("unknown option");
    }
  }

  auto lib = NvmlApi::Load(library);
  if (!lib.ok()) {
    fmt::print(stderr, "nvml_probe: {}\n", lib.status().ToString());
    return 1;
  }
  const auto& nvml = **lib;
  auto driver = nvml.DriverVersion();
  fmt::print("driver {}\n", driver.ok() ? driver.value() : driver.error().ToString());
  for (const auto& s : nvml.Symbols()) {
    fmt::print("symbol {} -> {}\n", s.wanted, s.resolved.empty() ? "MISSING" : s.resolved);
  }

  gpuledger::SystemClock clock;
  auto collector = Collector::Create(nvml, clock);
  if (!collector.ok()) {
    fmt::print(stderr, "nvml_probe: {}\n", collector.status().ToString());
    return 1;
  }
  for (const auto& e : (*collector)->enumeration_failures()) {
    fmt::print("enumeration_failure {}\n", e.ToString());
  }
  for (const auto& d : (*collector)->devices()) {
    fmt::print("device uuid={} model=\"{}\" memory_mib={} cc={}.{} mig_enabled={} parent={} "
               "profile={} share={}/{} gpm={}{}\n",
               d.uuid, d.model, d.memory_mib, d.cc_major, d.cc_minor, d.mig_enabled,
               d.parent_uuid.empty() ? "-" : d.parent_uuid,
               d.mig_profile.empty() ? "-" : d.mig_profile, d.share.num, d.share.den, d.gpm,
               d.gpm ? "" : fmt::format(" gpm_unavailable=\"{}\"", d.gpm_unavailable));
  }

  auto next = std::chrono::steady_clock::now();
  int64_t rounds = seconds * 1000 / interval_ms;
  for (int64_t r = 0; r < rounds; ++r) {
    next += std::chrono::milliseconds(interval_ms);
    std::this_thread::sleep_until(next);
    auto snap = (*collector)->Collect();
    for (const auto& d : snap.devices) {
      std::string gaps = "-";
      if (d.gaps) {
        gaps = fmt::format("busy={:.3f}/gaps={}/gap_total_ms={}/gap_max_ms={}/samples={}",
                           d.gaps->busy_ratio, d.gaps->gap_count, d.gaps->gap_total_ms,
                           d.gaps->gap_max_ms, d.gaps->sample_count);
      }
      fmt::print("sample t_ms={} uuid={} health={} sm_active={} sm_occupancy={} "
                 "tensor_active={} dram_active={} gpu_util={} coarse={} gpm_window_ms={} "
                 "fb_used_mib={} power_watts={} energy_mj={} sm_clock_mhz={} gaps={} "
                 "processes={} failures={} nvml_seconds={:.4f}\n",
                 snap.t_ms, d.uuid, gpuledger::HealthName(d.health), Opt(d.sm_active),
                 Opt(d.sm_occupancy), Opt(d.tensor_active), Opt(d.dram_active), Opt(d.gpu_util),
                 d.coarse, d.gpm_window_ms, Opt(d.fb_used_mib, "{:.0f}"),
                 Opt(d.power_watts, "{:.1f}"), Opt(d.energy_millijoules_total, "{}"),
                 Opt(d.sm_clock_mhz, "{}"), gaps, d.processes.size(), d.failures.size(),
                 snap.nvml_seconds);
      for (const auto& p : d.processes) {
        fmt::print("process t_ms={} uuid={} pid={} fb_used_mib={:.0f} sm_share={}\n", snap.t_ms,
                   p.device_uuid, p.pid, p.fb_used_mib, Opt(p.sm_share));
      }
      for (const auto& f : d.failures) {
        fmt::print("failure t_ms={} uuid={} {}\n", snap.t_ms, d.uuid, f.ToString());
      }
    }
  }
  return 0;
}
