// Internal to the simulator: the free and used capacity of one pool and the placement
// of jobs onto its nodes, GPUs, MIG slices and time-sliced shares.
#pragma once

#include <cstdint>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/cluster.h"
#include "sim/trace.h"

namespace gpuledger::sim {

// How far a job's GPUs are spread, for the topology slowdowns.
enum class Span : uint8_t { kOneNode, kOneDomain, kOneRack, kRacks };

// What a running job holds in its pool.
struct Allocation {
  std::vector<int32_t> gpus;  // pool-local GPU ids; one GPU for a sub-GPU allocation
  int32_t slice = -1;         // the MIG slice on gpus[0]; -1 otherwise
  int32_t ticks = 0;          // the share held, in ticks: what is accounted and priced
  bool shared = false;        // a sub-GPU share of a MIG or time-sliced GPU
  Span span = Span::kOneNode;
};

// The share Place grants `job` in a pool of `spec`, in ticks: a sub-GPU request takes a
// whole GPU without sharing and the smallest fitting slice under MIG.
int32_t AllocatedTicksFor(const PoolSpec& spec, const SimJob& job);

class PoolState {
 public:
  explicit PoolState(const PoolSpec& spec);

  // Places job `index` if its request fits now. On success fills `out` and returns true;
  // otherwise changes nothing and returns false.
  bool Place(uint32_t index, const SimJob& job, PlacementMode mode, Allocation& out);
  // Gives back what Place granted. REQUIRES: `a` came from Place for job `index` and was
  // not released yet.
  void Release(uint32_t index, const Allocation& a);

  // The jobs sharing a time-sliced GPU (empty for other pools).
  const std::vector<uint32_t>& TenantsOf(int32_t gpu) const { return tenants_[static_cast<size_t>(gpu)]; }
  bool time_sliced() const { return spec_.sharing == Sharing::kTimeSlicing; }

  int64_t gpus() const { return static_cast<int64_t>(gpu_state_.size()); }
  int64_t capacity_ticks() const { return gpus() * kTicksPerGpu; }
  int32_t free_whole_gpus() const { return free_whole_; }
  // Ticks of capacity in use, whole and shared.
  int64_t allocated_ticks() const { return allocated_ticks_; }
  const PoolSpec& spec() const { return spec_; }

 private:
  enum GpuState : uint8_t { kFree = 0, kWhole = 1, kPartial = 2 };

  int32_t NodeOf(int32_t gpu) const { return gpu / spec_.gpus_per_node; }
  void SetNodeFree(int32_t node, int32_t free);
  // Takes `count` whole-free GPUs of `node`, appending them to `out`.
  void TakeFromNode(int32_t node, int32_t count, std::vector<int32_t>& out, GpuState as);
  // Chooses whole-free GPUs for a request of `count`; false if there are not enough.
  bool TakeWhole(int32_t count, PlacementMode mode, std::vector<int32_t>& out, GpuState as);
  bool TakeAcrossNodes(int32_t count, std::vector<int32_t>& out, GpuState as);
  // Strict locality: the job on the fewest nodes its size allows, or not at all.
  bool TakeFewestNodes(int32_t count, std::vector<int32_t>& out, GpuState as);
  void FreeWholeGpu(int32_t gpu);
  Span SpanOf(const std::vector<int32_t>& gpus) const;
  bool PlaceShared(uint32_t index, int32_t ticks, PlacementMode mode, Allocation& out);

  PoolSpec spec_;
  std::vector<uint8_t> gpu_state_;
  std::vector<int32_t> node_free_;  // whole-free GPUs per node
  // Nodes by their count of whole-free GPUs: by_free_[c] lists nodes with c free.
  std::vector<std::vector<int32_t>> by_free_;
  std::vector<int32_t> pos_in_bucket_;
  std::vector<int64_t> domain_free_, rack_free_;
  int32_t free_whole_ = 0;
  int64_t allocated_ticks_ = 0;
  // Time-slicing: free ticks per partially used GPU, and (free ticks, gpu) for best fit.
  std::vector<int32_t> free_ticks_;
  std::set<std::pair<int32_t, int32_t>> partial_by_free_;
  std::vector<std::vector<uint32_t>> tenants_;
  // MIG: the used-slice mask per GPU and the free slices of partially used GPUs as
  // (size in sevenths, gpu, slice).
  std::vector<uint8_t> slice_used_;
  std::set<std::tuple<int32_t, int32_t, int32_t>> free_slices_;
  int32_t largest_slice_ = 0;
};

}  // namespace gpuledger::sim
