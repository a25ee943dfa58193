#include "nvml/fake/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>
#include <toml++/toml.h>

#include "nvml/nvml_abi.h"

namespace gpuledger::nvml::fake {
namespace {

// Reads one TOML table, recording the first problem in `*error` ("file:line: where:
// what"). Later reads after an error are harmless: the caller discards the result.
class Reader {
 public:
  Reader(const toml::table& table, std::string file, std::string where, std::string* error)
      : table_(table), file_(std::move(file)), where_(std::move(where)), error_(error) {}

  Reader Child(const toml::table& table, const std::string& where) const {
    return Reader(table, file_, where_.empty() ? where : where_ + "." + where, error_);
  }

  void Fail(const toml::node* node, std::string_view what) const {
    if (!error_->empty()) return;
    const toml::node& at = node != nullptr ? *node : static_cast<const toml::node&>(table_);
    *error_ = file_ + ":" + std::to_string(at.source().begin.line) + ": " +
              (where_.empty() ? std::string() : where_ + ": ") + std::string(what);
  }

  // Every key must be one of `allowed`: a misspelt key must not pass silently.
  void AllowOnly(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, node] : table_) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
        Fail(&node, "unknown key '" + std::string(key.str()) + "'");
      }
    }
  }

  const toml::node* Find(std::string_view key) const { return table_.get(key); }

  std::optional<double> OptNumber(std::string_view key, double lo, double hi) const {
    const toml::node* n = Find(key);
    if (n == nullptr) return std::nullopt;
    std::optional<double> v = n->value<double>();  // accepts integers too
    if (!v || !n->is_number()) {
      Fail(n, std::string(key) + ": must be a number");
      return std::nullopt;
    }
    if (*v < lo || *v > hi) {
      Fail(n, std::string(key) + ": must be within " + Format(lo) + ".." + Format(hi));
      return std::nullopt;
    }
    return v;
  }
  double Number(std::string_view key, double fallback, double lo, double hi) const {
    return OptNumber(key, lo, hi).value_or(fallback);
  }
  double Ratio(std::string_view key) const { return Number(key, 0, 0, 1); }
  int64_t Integer(std::string_view key, int64_t fallback, int64_t lo, int64_t hi) const {
    const toml::node* n = Find(key);
    if (n == nullptr) return fallback;
    if (!n->is_integer()) {
      Fail(n, std::string(key) + ": must be an integer");
      return fallback;
    }
    int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) {
      Fail(n, std::string(key) + ": must be within " + std::to_string(lo) + ".." +
                  std::to_string(hi));
      return fallback;
    }
    return v;
  }
  // Seconds (integer or fraction) as milliseconds.
  int64_t Ms(std::string_view key, int64_t fallback) const {
    std::optional<double> s = OptNumber(key, 0, 1e9);
    return s ? static_cast<int64_t>(std::llround(*s * 1000)) : fallback;
  }
  std::string String(std::string_view key, std::string fallback, bool required = false) const {
    const toml::node* n = Find(key);
    if (n == nullptr) {
      if (required) Fail(nullptr, "missing key '" + std::string(key) + "'");
      return fallback;
    }
    if (!n->is_string()) {
      Fail(n, std::string(key) + ": must be a string");
      return fallback;
    }
    return n->as_string()->get();
  }
  bool Bool(std::string_view key, bool fallback) const {
    const toml::node* n = Find(key);
    if (n == nullptr) return fallback;
    if (!n->is_boolean()) {
      Fail(n, std::string(key) + ": must be true or false");
      return fallback;
    }
    return n->as_boolean()->get();
  }

  // Calls `fn(reader)` for each table of the array of tables `key`.
  template <typename Fn>
  void EachTable(std::string_view key, Fn fn) const {
    const toml::node* n = Find(key);
    if (n == nullptr) return;
    const toml::array* arr = n->as_array();
    if (arr == nullptr) {
      Fail(n, std::string(key) + ": must be an array of tables ([[" + std::string(key) + "]])");
      return;
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::table* t = arr->get(i)->as_table();
      std::string where = std::string(key) + "[" + std::to_string(i) + "]";
      if (t == nullptr) {
        Fail(arr->get(i), where + ": must be a table");
        continue;
      }
      fn(Child(*t, where));
    }
  }

 private:
  static std::string Format(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  const toml::table& table_;
  std::string file_;
  std::string where_;
  std::string* error_;
};

std::vector<Phase> ReadPhases(const Reader& r) {
  std::vector<Phase> phases;
  r.EachTable("phase", [&](const Reader& p) {
    p.AllowOnly({"from_s", "to_s", "gpu_util", "sm_active", "sm_occupancy", "tensor_active",
                 "dram_active", "burst_ms", "gap_ms", "power_watts", "sm_clock_mhz"});
    Phase ph;
    ph.from_ms = p.Ms("from_s", 0);
    ph.to_ms = p.Ms("to_s", kForeverMs);
    ph.gpu_util = p.Ratio("gpu_util");
    ph.sm_active = p.Ratio("sm_active");
    ph.sm_occupancy = p.Ratio("sm_occupancy");
    ph.tensor_active = p.Ratio("tensor_active");
    ph.dram_active = p.Ratio("dram_active");
    ph.burst_ms = p.Integer("burst_ms", 0, 0, 3'600'000);
    ph.gap_ms = p.Integer("gap_ms", 0, 0, 3'600'000);
    ph.power_watts = p.OptNumber("power_watts", 0, 5000);
    if (auto mhz = p.OptNumber("sm_clock_mhz", 0, 10000)) {
      ph.sm_clock_mhz = static_cast<unsigned>(*mhz);
    }
    if (ph.to_ms <= ph.from_ms) p.Fail(p.Find("to_s"), "to_s must be after from_s");
    if ((ph.burst_ms > 0) != (ph.gap_ms > 0)) {
      p.Fail(nullptr, "burst_ms and gap_ms go together");
    }
    phases.push_back(ph);
  });
  return phases;
}

int ParseCode(const Reader& r, const toml::node* n) {
  static const std::map<std::string, int, std::less<>> kCodes = {
      {"SUCCESS", abi::kSuccess},
      {"UNINITIALIZED", abi::kErrorUninitialized},
      {"INVALID_ARGUMENT", abi::kErrorInvalidArgument},
      {"NOT_SUPPORTED", abi::kErrorNotSupported},
      {"NO_PERMISSION", abi::kErrorNoPermission},
      {"NOT_FOUND", abi::kErrorNotFound},
      {"INSUFFICIENT_SIZE", abi::kErrorInsufficientSize},
      {"FUNCTION_NOT_FOUND", abi::kErrorFunctionNotFound},
      {"GPU_IS_LOST", abi::kErrorGpuIsLost},
      {"ARGUMENT_VERSION_MISMATCH", abi::kErrorArgumentVersionMismatch},
      {"UNKNOWN", abi::kErrorUnknown},
  };
  if (n == nullptr) return 0;
  if (n->is_integer()) return static_cast<int>(n->as_integer()->get());
  if (n->is_string()) {
    auto it = kCodes.find(n->as_string()->get());
    if (it != kCodes.end()) return it->second;
  }
  r.Fail(n, "return: must be a code name such as \"NOT_SUPPORTED\" or an integer");
  return 0;
}

void ReadGpu(const Reader& g, Scenario& s, std::set<std::string>& uuids) {
  g.AllowOnly({"uuid", "name", "memory_mib", "base_used_mib", "compute_capability", "sm_count",
               "gpm", "mig", "mig_slices", "sample_period_ms", "idle_power_watts",
               "idle_sm_clock_mhz", "temperature_c", "phase", "instance"});
  FakeDevice& gpu = s.devices.emplace_back();
  s.gpus.push_back(&gpu);
  gpu.uuid = g.String("uuid", "", true);
  gpu.name = g.String("name", "NVIDIA H200");
  gpu.memory_mib = g.Integer("memory_mib", 143771, 1, 1 << 30);
  gpu.base_used_mib = g.Integer("base_used_mib", 0, 0, gpu.memory_mib);
  std::string cc = g.String("compute_capability", "9.0");
  if (std::sscanf(cc.c_str(), "%d.%d", &gpu.cc_major, &gpu.cc_minor) != 2) {
    g.Fail(g.Find("compute_capability"), "compute_capability: must read like \"9.0\"");
  }
  gpu.sm_count = static_cast<unsigned>(g.Integer("sm_count", 132, 1, 1024));
  gpu.gpm = g.Bool("gpm", gpu.cc_major >= 9);
  gpu.mig_enabled = g.Bool("mig", false);
  gpu.mig_slices = static_cast<unsigned>(g.Integer("mig_slices", 7, 1, 8));
  gpu.sample_period_ms = g.Integer("sample_period_ms", 100, 10, 10'000);
  gpu.idle_power_watts = g.Number("idle_power_watts", 75, 0, 5000);
  gpu.idle_sm_clock_mhz = static_cast<unsigned>(g.Integer("idle_sm_clock_mhz", 345, 0, 10'000));
  gpu.temperature_c = static_cast<unsigned>(g.Integer("temperature_c", 45, 0, 150));
  gpu.phases = ReadPhases(g);
  if (!uuids.insert(gpu.uuid).second) g.Fail(g.Find("uuid"), "uuid: not unique");

  unsigned used_slices = 0;
  g.EachTable("instance", [&](const Reader& m) {
    m.AllowOnly({"uuid", "profile", "slices", "gpu_instance_id", "compute_instance_id",
                 "memory_mib", "base_used_mib", "phase"});
    if (!gpu.mig_enabled) m.Fail(nullptr, "MIG instances need mig = true on the GPU");
    FakeDevice& mig = s.devices.emplace_back();
    mig.parent = &gpu;
    mig.uuid = m.String("uuid", "", true);
    mig.profile = m.String("profile", "", true);
    mig.name = gpu.name + " MIG " + mig.profile;
    mig.slices = static_cast<unsigned>(m.Integer("slices", 1, 1, 8));
    mig.gpu_instance_id = static_cast<unsigned>(m.Integer("gpu_instance_id", 0, 0, 64));
    mig.compute_instance_id = static_cast<unsigned>(m.Integer("compute_instance_id", 0, 0, 64));
    mig.memory_mib = m.Integer("memory_mib", 1, 1, gpu.memory_mib);
    mig.base_used_mib = m.Integer("base_used_mib", 0, 0, mig.memory_mib);
    mig.phases = ReadPhases(m);
    used_slices += mig.slices;
    if (used_slices > gpu.mig_slices) m.Fail(m.Find("slices"), "slices: more than the GPU has");
    if (!uuids.insert(mig.uuid).second) m.Fail(m.Find("uuid"), "uuid: not unique");
    gpu.instances.push_back(&mig);
  });
}

}  // namespace

bool Fault::Matches(const std::string& symbol, const FakeDevice* dev, int64_t t_ms) const {
  if (times >= 0 && fired >= times) return false;
  if (t_ms < from_ms || t_ms >= until_ms) return false;
  if (!function.empty() && symbol != function &&
      !(symbol.size() > function.size() + 2 && symbol.compare(0, function.size(), function) == 0 &&
        symbol.compare(function.size(), 2, "_v") == 0)) {
    return false;
  }
  if (!device.empty()) {
    if (dev == nullptr) return false;
    if (dev->uuid != device && dev->gpu().uuid != device) return false;
  }
  return true;
}

std::optional<Scenario> LoadScenario(const std::string& path, std::string* error) {
  error->clear();
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    *error = path + ":" + std::to_string(e.source().begin.line) + ": " +
             std::string(e.description());
    return std::nullopt;
  }
  Scenario s;
  Reader r(root, path, "", error);
  r.AllowOnly({"driver", "gpu", "process", "fault"});
  if (const toml::node* d = r.Find("driver")) {
    if (const toml::table* t = d->as_table()) {
      Reader dr = r.Child(*t, "driver");
      dr.AllowOnly({"version", "epoch_ms"});
      s.driver_version = dr.String("version", s.driver_version);
      s.epoch_ms = dr.Integer("epoch_ms", 0, 0, int64_t{1} << 50);
    } else {
      r.Fail(d, "driver: must be a table");
    }
  }
  std::set<std::string> uuids;
  r.EachTable("gpu", [&](const Reader& g) { ReadGpu(g, s, uuids); });
  r.EachTable("process", [&](const Reader& p) {
    p.AllowOnly({"pid", "device", "memory_mib", "from_s", "to_s", "sm_share"});
    FakeProcess proc;
    proc.pid = static_cast<uint32_t>(p.Integer("pid", 0, 1, 4'194'304));
    std::string uuid = p.String("device", "", true);
    for (const FakeDevice& dev : s.devices) {
      if (dev.uuid == uuid) proc.device = &dev;
    }
    if (proc.device == nullptr) p.Fail(p.Find("device"), "device: no GPU or instance '" + uuid + "'");
    proc.memory_mib = p.Integer("memory_mib", 0, 0, 1 << 30);
    proc.from_ms = p.Ms("from_s", 0);
    proc.to_ms = p.Ms("to_s", kForeverMs);
    proc.sm_share = p.Ratio("sm_share");
    s.processes.push_back(proc);
  });
  r.EachTable("fault", [&](const Reader& f) {
    f.AllowOnly({"function", "device", "from_s", "until_s", "return", "block_ms", "times"});
    Fault fault;
    fault.function = f.String("function", "");
    fault.device = f.String("device", "");
    if (!fault.device.empty() && uuids.count(fault.device) == 0) {
      f.Fail(f.Find("device"), "device: no GPU or instance '" + fault.device + "'");
    }
    fault.from_ms = f.Ms("from_s", 0);
    fault.until_ms = f.Ms("until_s", kForeverMs);
    fault.code = ParseCode(f, f.Find("return"));
    fault.block_ms = f.Integer("block_ms", 0, 0, 600'000);
    fault.times = f.Integer("times", -1, -1, 1'000'000);
    if (fault.code == 0 && fault.block_ms == 0) f.Fail(nullptr, "a fault needs return or block_ms");
    s.faults.push_back(fault);
  });
  if (!error->empty()) return std::nullopt;
  return s;
}

namespace {

double Level(const Phase& p, Metric m) {
  switch (m) {
    case Metric::kGpuUtil: return p.gpu_util;
    case Metric::kSmActive: return p.sm_active;
    case Metric::kSmOccupancy: return p.sm_occupancy;
    case Metric::kTensorActive: return p.tensor_active;
    case Metric::kDramActive: return p.dram_active;
  }
  return 0;
}

// Time within [p.from_ms, x) during which the phase's pattern is on.
double OnTimeUntil(const Phase& p, int64_t x) {
  int64_t end = std::min(x, p.to_ms);
  if (end <= p.from_ms) return 0;
  double span = static_cast<double>(end - p.from_ms);
  if (p.burst_ms <= 0) return span;
  double period = static_cast<double>(p.burst_ms + p.gap_ms);
  double full = std::floor(span / period);
  return full * static_cast<double>(p.burst_ms) +
         std::min(span - full * period, static_cast<double>(p.burst_ms));
}

double Overlap(const Phase& p, int64_t a, int64_t b) {
  return static_cast<double>(std::max<int64_t>(0, std::min(b, p.to_ms) - std::max(a, p.from_ms)));
}

}  // namespace

double MeanMetric(const FakeDevice& dev, Metric metric, int64_t a_ms, int64_t b_ms) {
  if (b_ms <= a_ms) return 0;
  if (dev.mig_enabled) {
    double sum = 0;
    for (const FakeDevice* mig : dev.instances) {
      sum += mig->slices * MeanMetric(*mig, metric, a_ms, b_ms);
    }
    return sum / dev.mig_slices;
  }
  double integral = 0;
  for (const Phase& p : dev.phases) {
    integral += Level(p, metric) * (OnTimeUntil(p, b_ms) - OnTimeUntil(p, a_ms));
  }
  return integral / static_cast<double>(b_ms - a_ms);
}

double MeanPowerWatts(const FakeDevice& gpu, int64_t a_ms, int64_t b_ms) {
  if (b_ms <= a_ms) return gpu.idle_power_watts;
  double joules_ms = gpu.idle_power_watts * static_cast<double>(b_ms - a_ms);
  for (const Phase& p : gpu.phases) {
    if (p.power_watts) joules_ms += (*p.power_watts - gpu.idle_power_watts) * Overlap(p, a_ms, b_ms);
  }
  return joules_ms / static_cast<double>(b_ms - a_ms);
}

double EnergyMillijoules(const FakeDevice& gpu, int64_t t_ms) {
  if (t_ms <= 0) return 0;
  return MeanPowerWatts(gpu, 0, t_ms) * static_cast<double>(t_ms);  // W x ms = mJ
}

unsigned SmClockMhz(const FakeDevice& gpu, int64_t t_ms) {
  for (const Phase& p : gpu.phases) {
    if (p.sm_clock_mhz && t_ms >= p.from_ms && t_ms < p.to_ms) return *p.sm_clock_mhz;
  }
  return gpu.idle_sm_clock_mhz;
}

int64_t UsedMib(const Scenario& s, const FakeDevice& dev, int64_t t_ms) {
  int64_t used = dev.base_used_mib;
  for (const FakeDevice* mig : dev.instances) used += mig->base_used_mib;
  for (const FakeProcess& p : s.processes) {
    if (!p.AliveAt(t_ms)) continue;
    if (p.device == &dev || p.device->parent == &dev) used += p.memory_mib;
  }
  return used;
}

}  // namespace gpuledger::nvml::fake
