// Test-only: random fleets for the ledger's property tests (property_test.cc,
// reference_attributor_test.cc). GPUs, some split into MIG slices of sevenths (whose
// parent keeps the rest, sometimes nothing); jobs; allocations that overlap (sharing)
// or stay open; samples in several batches per device at irregular instants, with gaps
// beyond any staleness limit, unhealthy and lost samples, SM activity or only GPU
// utilization, processes of the jobs holding the device, of other jobs and of none,
// with and without an SM share; prices by model with a change at a random hour, and a
// catch-all.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/price_book.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger::testing {

struct RandomFleetShape {
  int max_gpus = 4;
  int max_slices = 3;  // MIG slices per partitioned GPU, at most
  int jobs = 5;
  int64_t horizon_ms = 6 * kMsPerHour;  // from kBaseMs; REQUIRES: at least 2 hours
};

struct RandomFleet {
  std::vector<Batch> batches;  // the inventory (devices, jobs, allocations) first
  std::vector<PriceEntry> prices;
};

inline RandomFleet MakeRandomFleet(uint64_t seed, const RandomFleetShape& shape = {}) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto job_name = [&] { return "j" + std::to_string(uniform(0, shape.jobs - 1)); };
  RandomFleet f;
  Batch inventory;
  inventory.batch_id = "inventory";
  std::vector<std::string> devices;
  for (int g = 0, gpus = static_cast<int>(uniform(1, shape.max_gpus)); g < gpus; ++g) {
    Device d;
    d.uuid = "GPU-" + std::to_string(g);
    d.model = g % 2 ? "NVIDIA-H200" : "NVIDIA-A100";
    d.pool = g % 3 ? "training" : "serving";
    d.sample_interval_ms = uniform(0, 3) * 10'000;
    inventory.devices.push_back(d);
    devices.push_back(d.uuid);
    if (uniform(0, 2) == 0) {  // MIG: slices of sevenths that fit
      int used = 0;
      for (int s = 0; s < shape.max_slices; ++s) {
        int n = static_cast<int>(uniform(1, 3));
        if (used + n > 7) break;
        used += n;
        Device m = d;
        m.uuid = d.uuid + "-mig" + std::to_string(s);
        m.parent_uuid = d.uuid;
        m.share = {n, 7};
        inventory.devices.push_back(m);
        devices.push_back(m.uuid);
      }
    }
  }
  for (int j = 0; j < shape.jobs; ++j) {
    Job job;
    job.id = "j" + std::to_string(j);
    job.team = "team" + std::to_string(j % 3);
    job.project = "p" + std::to_string(j % 2);
    job.kind = static_cast<JobKind>(j % 4);
    inventory.jobs.push_back(job);
  }
  const int64_t horizon = shape.horizon_ms;
  std::map<std::string, std::vector<Allocation>> held;
  for (const auto& dev : devices) {
    for (int a = 0, n = static_cast<int>(uniform(0, 3)); a < n; ++a) {
      int64_t from = kBaseMs + uniform(0, horizon / 1000) * 1000 + uniform(0, 1) * uniform(0, 999);
      Allocation alloc{dev, job_name(), from, std::nullopt};
      if (uniform(0, 3)) alloc.to_ms = from + uniform(1, horizon / 1000) * 1000;
      inventory.allocations.push_back(alloc);
      held[dev].push_back(alloc);
    }
  }
  f.batches.push_back(inventory);
  int batch_no = 0;
  for (const auto& dev : devices) {
    int64_t t = kBaseMs + uniform(0, 1800) * 1000;
    while (t < kBaseMs + horizon) {
      Batch b;
      b.batch_id = "s" + std::to_string(batch_no++);
      for (int k = 0; k < 40 && t < kBaseMs + horizon; ++k) {
        Sample s;
        s.device_uuid = dev;
        s.t_ms = t;
        int health = static_cast<int>(uniform(0, 30));
        s.health = health == 0 ? Health::kLost : health == 1 ? Health::kUnhealthy : Health::kOk;
        if (uniform(0, 1)) {
          s.sm_active = static_cast<double>(uniform(0, 1000)) / 1000.0;
        } else {
          s.gpu_util = static_cast<double>(uniform(0, 100)) / 100.0;
        }
        for (const Allocation& a : held[dev]) {  // most jobs holding the device run something
          if (a.from_ms > t || (a.to_ms && *a.to_ms <= t) || uniform(0, 3) == 0) continue;
          ProcessSample p{100 + static_cast<int64_t>(s.processes.size()), a.job_id,
                          static_cast<double>(uniform(0, 1) * uniform(1, 80'000)), std::nullopt};
          if (uniform(0, 3)) p.sm_share = static_cast<double>(uniform(0, 100)) / 100.0;
          s.processes.push_back(p);
        }
        if (uniform(0, 4) == 0) {  // another job's process, or one the agent could not attribute
          s.processes.push_back(ProcessSample{900, uniform(0, 1) ? job_name() : "",
                                              static_cast<double>(uniform(0, 80000)),
                                              static_cast<double>(uniform(0, 100)) / 100.0});
        }
        b.samples.push_back(s);
        // Mostly regular, sometimes a gap beyond any staleness limit, sometimes odd ms.
        int r = static_cast<int>(uniform(0, 20));
        t += r == 0 ? uniform(6, 40) * kMsPerMinute : uniform(1, 60) * 1000 + uniform(0, 999);
      }
      f.batches.push_back(b);
    }
  }
  int64_t change = kBaseMs + uniform(1, horizon / kMsPerHour - 1) * kMsPerHour;
  f.prices.push_back({"NVIDIA-H200",
                      "*",
                      CapacityType::kOnDemand,
                      Money::FromMicros(uniform(1, 9'999'999)),
                      {0, change}});
  f.prices.push_back({"NVIDIA-H200",
                      "*",
                      CapacityType::kOnDemand,
                      Money::FromMicros(uniform(1, 9'999'999)),
                      {change, kForever}});
  f.prices.push_back(
      {"*", "*", CapacityType::kOnDemand, Money::FromMicros(uniform(1, 9'999'999)), {0, kForever}});
  return f;
}

}  // namespace gpuledger::ledger::testing
