#include "sim/cluster.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/time.h"

namespace gpuledger::sim {

std::string_view SharingName(Sharing s) {
  switch (s) {
    case Sharing::kNone:
      return "none";
    case Sharing::kMig:
      return "mig";
    case Sharing::kTimeSlicing:
      return "time-slicing";
  }
  return "none";
}

std::string_view DurationEstimateName(DurationEstimate e) {
  switch (e) {
    case DurationEstimate::kOracle:
      return "oracle";
    case DurationEstimate::kUserMean:
      return "user-mean";
    case DurationEstimate::kQueueMean:
      return "queue-mean";
  }
  return "oracle";
}

Result<DurationEstimate> ParseDurationEstimate(std::string_view text) {
  if (text == "oracle") return DurationEstimate::kOracle;
  if (text == "user-mean") return DurationEstimate::kUserMean;
  if (text == "queue-mean") return DurationEstimate::kQueueMean;
  return InvalidArgument(fmt::format("unknown duration estimate '{}' (oracle, user-mean, queue-mean)", text));
}

std::string_view PlacementModeName(PlacementMode m) {
  return m == PlacementMode::kTopology ? "topology" : "spread";
}

Result<PlacementMode> ParsePlacementMode(std::string_view text) {
  if (text == "topology") return PlacementMode::kTopology;
  if (text == "spread") return PlacementMode::kSpread;
  return InvalidArgument(fmt::format("unknown placement '{}' (topology, spread)", text));
}

int64_t ClusterSpec::TotalGpus() const {
  int64_t total = 0;
  for (const auto& p : pools) total += p.gpus();
  return total;
}

int ClusterSpec::RoutePool(const SimJob& job) const {
  auto takes = [](const std::vector<std::string>& list, std::string_view value) {
    return list.empty() || std::find(list.begin(), list.end(), value) != list.end() ||
           std::find(list.begin(), list.end(), "*") != list.end();
  };
  if (!job.pool.empty()) {
    for (size_t i = 0; i < pools.size(); ++i) {
      if (pools[i].name == job.pool) return static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < pools.size(); ++i) {
    if (takes(pools[i].kinds, JobKindName(job.kind)) && takes(pools[i].queues, job.queue)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

namespace {

// Reads typed values from one TOML table, naming the file, line and key in errors.
class TableReader {
 public:
  TableReader(const toml::table& t, std::string_view source, std::string what)
      : t_(t), source_(source), what_(std::move(what)) {}

  Status Error(const toml::node* node, std::string_view key, std::string_view message) const {
    uint32_t line = node != nullptr ? node->source().begin.line : t_.source().begin.line;
    return InvalidArgument(fmt::format("{}:{}: {}{}{}: {}", source_, line, what_,
                                       key.empty() ? "" : ".", key, message));
  }
  Status CheckKeys(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [k, v] : t_) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end()) {
        return Error(&v, k.str(), "unknown key");
      }
    }
    return Status::Ok();
  }
  Status String(std::string_view key, std::string& out) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    auto v = n->value<std::string>();
    if (!v) return Error(n, key, "must be a string");
    out = *v;
    return Status::Ok();
  }
  template <typename Int>
  Status Integer(std::string_view key, Int& out, int64_t min, int64_t max) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    if (!n->is_integer()) return Error(n, key, "must be an integer");
    int64_t v = *n->value<int64_t>();
    if (v < min || v > max) return Error(n, key, fmt::format("must be within {}..{}, is {}", min, max, v));
    out = static_cast<Int>(v);
    return Status::Ok();
  }
  Status Double(std::string_view key, double& out, double min, double max) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    auto v = n->value<double>();  // integers convert too
    if (!v) return Error(n, key, "must be a number");
    if (*v < min || *v > max) return Error(n, key, fmt::format("must be within {}..{}, is {}", min, max, *v));
    out = *v;
    return Status::Ok();
  }
  Status Bool(std::string_view key, bool& out) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    auto v = n->value<bool>();
    if (!v) return Error(n, key, "must be true or false");
    out = *v;
    return Status::Ok();
  }
  Status Duration(std::string_view key, int64_t& out) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    auto v = n->value<std::string>();
    if (!v) return Error(n, key, "must be a duration string such as \"10m\"");
    auto d = ParseDuration(*v);
    if (!d.ok()) return Error(n, key, d.status().message());
    out = *d;
    return Status::Ok();
  }
  Status Price(std::string_view key, Money& out) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    std::string text;
    if (auto s = n->value_exact<std::string>()) {
      text = *s;
    } else if (auto i = n->value_exact<int64_t>()) {
      text = std::to_string(*i);
    } else {
      return Error(n, key, "must be a decimal string such as \"2.50\" or an integer");
    }
    auto m = Money::Parse(text);
    if (!m.ok()) return Error(n, key, m.status().message());
    if (*m < Money()) return Error(n, key, "must not be negative");
    out = *m;
    return Status::Ok();
  }
  template <typename T>
  Status List(std::string_view key, std::vector<T>& out) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return Status::Ok();
    const toml::array* a = n->as_array();
    if (a == nullptr) return Error(n, key, "must be an array");
    out.clear();
    for (const auto& e : *a) {
      auto v = e.value<T>();
      if (!v) return Error(&e, key, "has an element of the wrong type");
      out.push_back(*v);
    }
    return Status::Ok();
  }

 private:
  const toml::table& t_;
  std::string_view source_;
  std::string what_;
};

Status ReadPool(const toml::table& t, std::string_view source, size_t index, PoolSpec& p) {
  TableReader r(t, source, fmt::format("pool[{}]", index));
  GPULEDGER_RETURN_IF_ERROR(r.CheckKeys(
      {"name", "gpu_model", "nodes", "gpus_per_node", "nodes_per_nvlink_domain", "nodes_per_rack",
       "price_per_gpu_hour", "sharing", "mig_layout", "timeslice_slowdown", "cross_node_slowdown",
       "cross_domain_slowdown", "cross_rack_slowdown", "kinds", "queues", "strict_locality"}));
  p.name = fmt::format("pool{}", index);
  GPULEDGER_RETURN_IF_ERROR(r.String("name", p.name));
  GPULEDGER_RETURN_IF_ERROR(r.String("gpu_model", p.gpu_model));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("nodes", p.nodes, 1, 1'000'000));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("gpus_per_node", p.gpus_per_node, 1, kMaxPoolGpus));
  if (p.gpus() > kMaxPoolGpus) {
    return r.Error(t.get("gpus_per_node"), "gpus_per_node",
                   fmt::format("nodes x gpus_per_node is {} GPUs, more than the {} a pool may have", p.gpus(),
                               kMaxPoolGpus));
  }
  GPULEDGER_RETURN_IF_ERROR(r.Integer("nodes_per_nvlink_domain", p.nodes_per_nvlink_domain, 1, 1'000'000));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("nodes_per_rack", p.nodes_per_rack, 1, 1'000'000));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("strict_locality", p.strict_locality));
  GPULEDGER_RETURN_IF_ERROR(r.Price("price_per_gpu_hour", p.price_per_gpu_hour));
  std::string sharing = "none";
  GPULEDGER_RETURN_IF_ERROR(r.String("sharing", sharing));
  if (sharing == "none") {
    p.sharing = Sharing::kNone;
  } else if (sharing == "mig") {
    p.sharing = Sharing::kMig;
  } else if (sharing == "time-slicing") {
    p.sharing = Sharing::kTimeSlicing;
  } else {
    return r.Error(t.get("sharing"), "sharing", "must be \"none\", \"mig\" or \"time-slicing\"");
  }
  std::vector<int64_t> layout;
  GPULEDGER_RETURN_IF_ERROR(r.List("mig_layout", layout));
  int64_t sevenths = 0;
  for (int64_t s : layout) {
    if (s < 1 || s > 7) return r.Error(t.get("mig_layout"), "mig_layout", "slices must be 1..7 sevenths");
    sevenths += s;
    p.mig_layout.push_back(static_cast<int32_t>(s));
  }
  if (sevenths > 7) return r.Error(t.get("mig_layout"), "mig_layout", "slices add up to more than 7 sevenths");
  if (p.sharing == Sharing::kMig && p.mig_layout.empty()) {
    return r.Error(nullptr, "mig_layout", "required when sharing = \"mig\"");
  }
  GPULEDGER_RETURN_IF_ERROR(r.Double("timeslice_slowdown", p.timeslice_slowdown, 0, 100));
  GPULEDGER_RETURN_IF_ERROR(r.Double("cross_node_slowdown", p.cross_node_slowdown, 0, 100));
  GPULEDGER_RETURN_IF_ERROR(r.Double("cross_domain_slowdown", p.cross_domain_slowdown, 0, 100));
  GPULEDGER_RETURN_IF_ERROR(r.Double("cross_rack_slowdown", p.cross_rack_slowdown, 0, 100));
  GPULEDGER_RETURN_IF_ERROR(r.List("kinds", p.kinds));
  for (const auto& k : p.kinds) {
    if (k != "*" && !ParseJobKind(k).ok()) return r.Error(t.get("kinds"), "kinds", fmt::format("unknown job kind '{}'", k));
  }
  GPULEDGER_RETURN_IF_ERROR(r.List("queues", p.queues));
  if (p.nodes <= 0) return r.Error(nullptr, "nodes", "required (at least 1)");
  return Status::Ok();
}

Status ReadQueue(const toml::table& t, std::string_view source, size_t index, QueueSpec& q) {
  TableReader r(t, source, fmt::format("queue[{}]", index));
  GPULEDGER_RETURN_IF_ERROR(r.CheckKeys({"name", "parent", "guaranteed_gpus", "max_gpus", "weight", "borrowing"}));
  GPULEDGER_RETURN_IF_ERROR(r.String("name", q.name));
  if (q.name.empty()) return r.Error(nullptr, "name", "required");
  GPULEDGER_RETURN_IF_ERROR(r.String("parent", q.parent));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("guaranteed_gpus", q.guaranteed_gpus, 0, 100'000'000));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("max_gpus", q.max_gpus, 0, 100'000'000));
  GPULEDGER_RETURN_IF_ERROR(r.Double("weight", q.weight, 1e-6, 1e6));
  GPULEDGER_RETURN_IF_ERROR(r.Bool("borrowing", q.borrowing));
  return Status::Ok();
}

Status ReadScheduler(const toml::table& t, std::string_view source, SchedulerSpec& s) {
  TableReader r(t, source, "scheduler");
  GPULEDGER_RETURN_IF_ERROR(r.CheckKeys({"min_runtime", "usage_half_life", "backfill_depth", "slo_wait",
                                         "slo_target", "timeseries_step", "las_thresholds",
                                         "duration_estimate"}));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("min_runtime", s.min_runtime_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("usage_half_life", s.usage_half_life_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Integer("backfill_depth", s.backfill_depth, 0, 10'000'000));
  if (t.contains("las_thresholds")) {
    std::vector<std::string> texts;
    GPULEDGER_RETURN_IF_ERROR(r.List("las_thresholds", texts));
    s.las_thresholds_gpu_ms.clear();
    for (const auto& text : texts) {
      auto d = ParseDuration(text);
      if (!d.ok()) return r.Error(t.get("las_thresholds"), "las_thresholds", d.status().message());
      if (!s.las_thresholds_gpu_ms.empty() && *d <= s.las_thresholds_gpu_ms.back()) {
        return r.Error(t.get("las_thresholds"), "las_thresholds", "must be ascending");
      }
      s.las_thresholds_gpu_ms.push_back(*d);
    }
  }
  GPULEDGER_RETURN_IF_ERROR(r.Duration("slo_wait", s.slo_wait_ms));
  GPULEDGER_RETURN_IF_ERROR(r.Double("slo_target", s.slo_target_ratio, 0, 1));
  GPULEDGER_RETURN_IF_ERROR(r.Duration("timeseries_step", s.timeseries_step_ms));
  std::string estimate(DurationEstimateName(s.duration_estimate));
  GPULEDGER_RETURN_IF_ERROR(r.String("duration_estimate", estimate));
  auto e = ParseDurationEstimate(estimate);
  if (!e.ok()) return r.Error(t.get("duration_estimate"), "duration_estimate", e.status().message());
  s.duration_estimate = *e;
  return Status::Ok();
}

// Checks the queue tree: unique names, parents that exist, no cycles.
Status CheckQueueTree(const std::vector<QueueSpec>& queues, std::string_view source) {
  std::set<std::string> names;
  for (const auto& q : queues) {
    if (!names.insert(q.name).second) return InvalidArgument(fmt::format("{}: queue '{}' defined twice", source, q.name));
  }
  for (const auto& q : queues) {
    if (!q.parent.empty() && names.count(q.parent) == 0) {
      return InvalidArgument(fmt::format("{}: queue '{}': parent '{}' is not defined", source, q.name, q.parent));
    }
    // Walk up at most queues.size() steps; more means a cycle.
    std::string at = q.parent;
    for (size_t steps = 0; !at.empty(); ++steps) {
      if (steps > queues.size() || at == q.name) {
        return InvalidArgument(fmt::format("{}: queue '{}': parents form a cycle", source, q.name));
      }
      auto it = std::find_if(queues.begin(), queues.end(), [&](const QueueSpec& x) { return x.name == at; });
      at = it->parent;
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateCluster(const ClusterSpec& spec) {
  if (spec.pools.empty()) return InvalidArgument("cluster has no pool");
  for (const PoolSpec& p : spec.pools) {
    if (p.nodes < 1 || p.gpus_per_node < 1 || p.nodes_per_nvlink_domain < 1 || p.nodes_per_rack < 1) {
      return InvalidArgument(fmt::format("pool '{}': nodes, gpus_per_node, nodes_per_nvlink_domain and "
                                         "nodes_per_rack must be at least 1",
                                         p.name));
    }
    int32_t sevenths = 0;
    for (int32_t s : p.mig_layout) {
      if (s < 1 || s > 7) return InvalidArgument(fmt::format("pool '{}': MIG slices must be 1..7 sevenths", p.name));
      sevenths += s;
    }
    if (sevenths > 7 || (p.sharing == Sharing::kMig && p.mig_layout.empty())) {
      return InvalidArgument(fmt::format("pool '{}': a MIG layout needs 1..7 sevenths in all", p.name));
    }
    if (p.price_per_gpu_hour < Money()) return InvalidArgument(fmt::format("pool '{}': negative price", p.name));
    if (p.gpus() > kMaxPoolGpus) {
      return InvalidArgument(
          fmt::format("pool '{}': {} GPUs, more than the {} a pool may have", p.name, p.gpus(), kMaxPoolGpus));
    }
  }
  if (spec.scheduler.backfill_depth < 0) {
    return InvalidArgument(fmt::format("scheduler: backfill_depth must be >= 0, is {}", spec.scheduler.backfill_depth));
  }
  return CheckQueueTree(spec.queues, "cluster");
}

Result<ClusterSpec> ParseClusterToml(std::string_view text, std::string_view source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(fmt::format("{}:{}: {}", source_name, e.source().begin.line, e.description()));
  }
  ClusterSpec spec;
  TableReader r(root, source_name, "cluster");
  GPULEDGER_RETURN_IF_ERROR(r.CheckKeys({"name", "scheduler", "pool", "queue"}));
  GPULEDGER_RETURN_IF_ERROR(r.String("name", spec.name));
  if (const toml::node* s = root.get("scheduler")) {
    if (!s->is_table()) return r.Error(s, "scheduler", "must be a table");
    GPULEDGER_RETURN_IF_ERROR(ReadScheduler(*s->as_table(), source_name, spec.scheduler));
  }
  const toml::array* pools = root.get("pool") != nullptr ? root.get("pool")->as_array() : nullptr;
  if (pools == nullptr || pools->empty()) return r.Error(nullptr, "", "needs at least one [[pool]]");
  std::set<std::string> pool_names;
  for (size_t i = 0; i < pools->size(); ++i) {
    const toml::table* t = pools->get(i)->as_table();
    if (t == nullptr) return r.Error(pools->get(i), "pool", "must be a table");
    PoolSpec p;
    GPULEDGER_RETURN_IF_ERROR(ReadPool(*t, source_name, i, p));
    if (!pool_names.insert(p.name).second) {
      return InvalidArgument(fmt::format("{}: pool '{}' defined twice", source_name, p.name));
    }
    spec.pools.push_back(std::move(p));
  }
  if (const toml::node* qn = root.get("queue")) {
    const toml::array* queues = qn->as_array();
    if (queues == nullptr) return r.Error(qn, "queue", "must be an array of tables [[queue]]");
    for (size_t i = 0; i < queues->size(); ++i) {
      const toml::table* t = queues->get(i)->as_table();
      if (t == nullptr) return r.Error(queues->get(i), "queue", "must be a table");
      QueueSpec q;
      GPULEDGER_RETURN_IF_ERROR(ReadQueue(*t, source_name, i, q));
      spec.queues.push_back(std::move(q));
    }
  }
  GPULEDGER_RETURN_IF_ERROR(CheckQueueTree(spec.queues, source_name));
  return spec;
}

Result<ClusterSpec> LoadClusterFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot open cluster file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseClusterToml(ss.str(), path);
}

ClusterSpec UniformCluster(int32_t nodes, int32_t gpus_per_node, Money price) {
  ClusterSpec spec;
  spec.name = fmt::format("{}x{}", nodes, gpus_per_node);
  PoolSpec p;
  p.name = "main";
  p.nodes = nodes;
  p.gpus_per_node = gpus_per_node;
  p.price_per_gpu_hour = price;
  spec.pools.push_back(std::move(p));
  return spec;
}

}  // namespace gpuledger::sim
