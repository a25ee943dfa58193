#include "sim/pool_state.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace gpuledger::sim {

int32_t AllocatedTicksFor(const PoolSpec& spec, const SimJob& job) {
  if (!job.is_fractional()) return job.gpus * kTicksPerGpu;
  if (spec.sharing == Sharing::kTimeSlicing) return job.share_ticks;
  if (spec.sharing == Sharing::kMig) {
    const int32_t sevenths = (job.share_ticks + kTicksPerGpu / 7 - 1) / (kTicksPerGpu / 7);
    int32_t best = 0;
    for (int32_t s : spec.mig_layout) {
      if (s >= sevenths && (best == 0 || s < best)) best = s;
    }
    if (best > 0) return best * (kTicksPerGpu / 7);
  }
  return kTicksPerGpu;
}

PoolState::PoolState(const PoolSpec& spec) : spec_(spec) {
  const int32_t g = spec_.gpus_per_node;
  const size_t n = static_cast<size_t>(spec_.nodes);
  gpu_state_.assign(n * static_cast<size_t>(g), kFree);
  node_free_.assign(n, g);
  by_free_.assign(static_cast<size_t>(g) + 1, {});
  pos_in_bucket_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    pos_in_bucket_[i] = static_cast<int32_t>(by_free_[static_cast<size_t>(g)].size());
    by_free_[static_cast<size_t>(g)].push_back(static_cast<int32_t>(i));
  }
  domain_free_.assign((n + static_cast<size_t>(spec_.nodes_per_nvlink_domain) - 1) /
                          static_cast<size_t>(spec_.nodes_per_nvlink_domain), 0);
  rack_free_.assign((n + static_cast<size_t>(spec_.nodes_per_rack) - 1) / static_cast<size_t>(spec_.nodes_per_rack), 0);
  for (size_t i = 0; i < n; ++i) {
    domain_free_[i / static_cast<size_t>(spec_.nodes_per_nvlink_domain)] += g;
    rack_free_[i / static_cast<size_t>(spec_.nodes_per_rack)] += g;
  }
  free_whole_ = static_cast<int32_t>(gpu_state_.size());
  if (spec_.sharing == Sharing::kTimeSlicing) {
    free_ticks_.assign(gpu_state_.size(), kTicksPerGpu);
    tenants_.assign(gpu_state_.size(), {});
  } else {
    tenants_.assign(gpu_state_.size(), {});
  }
  if (spec_.sharing == Sharing::kMig) {
    slice_used_.assign(gpu_state_.size(), 0);
    for (int32_t s : spec_.mig_layout) largest_slice_ = std::max(largest_slice_, s);
  }
}

void PoolState::SetNodeFree(int32_t node, int32_t free) {
  const size_t nd = static_cast<size_t>(node);
  const int32_t old = node_free_[nd];
  if (old == free) return;
  auto& from = by_free_[static_cast<size_t>(old)];
  const int32_t pos = pos_in_bucket_[nd];
  from[static_cast<size_t>(pos)] = from.back();
  pos_in_bucket_[static_cast<size_t>(from.back())] = pos;
  from.pop_back();
  auto& to = by_free_[static_cast<size_t>(free)];
  pos_in_bucket_[nd] = static_cast<int32_t>(to.size());
  to.push_back(node);
  node_free_[nd] = free;
  const int64_t delta = free - old;
  domain_free_[nd / static_cast<size_t>(spec_.nodes_per_nvlink_domain)] += delta;
  rack_free_[nd / static_cast<size_t>(spec_.nodes_per_rack)] += delta;
  free_whole_ += static_cast<int32_t>(delta);
}

void PoolState::TakeFromNode(int32_t node, int32_t count, std::vector<int32_t>& out, GpuState as) {
  const int32_t g = spec_.gpus_per_node;
  int32_t taken = 0;
  for (int32_t i = 0; i < g && taken < count; ++i) {
    const int32_t gpu = node * g + i;
    if (gpu_state_[static_cast<size_t>(gpu)] == kFree) {
      gpu_state_[static_cast<size_t>(gpu)] = as;
      out.push_back(gpu);
      ++taken;
    }
  }
  assert(taken == count);
  SetNodeFree(node, node_free_[static_cast<size_t>(node)] - taken);
}

bool PoolState::TakeAcrossNodes(int32_t count, std::vector<int32_t>& out, GpuState as) {
  // Smallest unit (NVLink domain, then rack) with room, best fit; else the whole pool.
  auto fill_from = [&](int32_t first_node, int32_t last_node) {
    std::vector<int32_t> nodes;
    for (int32_t nd = first_node; nd < last_node; ++nd) {
      if (node_free_[static_cast<size_t>(nd)] > 0) nodes.push_back(nd);
    }
    std::stable_sort(nodes.begin(), nodes.end(), [&](int32_t a, int32_t b) {
      return node_free_[static_cast<size_t>(a)] > node_free_[static_cast<size_t>(b)];
    });
    int32_t left = count;
    for (int32_t nd : nodes) {
      const int32_t take = std::min(left, node_free_[static_cast<size_t>(nd)]);
      TakeFromNode(nd, take, out, as);
      left -= take;
      if (left == 0) break;
    }
  };
  auto best_unit = [&](const std::vector<int64_t>& free) {
    int64_t best = -1;
    for (size_t u = 0; u < free.size(); ++u) {
      if (free[u] >= count && (best < 0 || free[u] < free[static_cast<size_t>(best)])) best = static_cast<int64_t>(u);
    }
    return best;
  };
  if (spec_.nodes_per_nvlink_domain > 1) {
    const int64_t d = best_unit(domain_free_);
    if (d >= 0) {
      const int32_t first = static_cast<int32_t>(d) * spec_.nodes_per_nvlink_domain;
      fill_from(first, std::min(spec_.nodes, first + spec_.nodes_per_nvlink_domain));
      return true;
    }
  }
  const int64_t r = best_unit(rack_free_);
  if (r >= 0) {
    const int32_t first = static_cast<int32_t>(r) * spec_.nodes_per_rack;
    fill_from(first, std::min(spec_.nodes, first + spec_.nodes_per_rack));
    return true;
  }
  // Anywhere: the fullest-free nodes first, so that the job spans as few as it can.
  int32_t left = count;
  for (int32_t c = spec_.gpus_per_node; c > 0 && left > 0; --c) {
    while (left > 0 && !by_free_[static_cast<size_t>(c)].empty()) {
      const int32_t nd = by_free_[static_cast<size_t>(c)].back();
      const int32_t take = std::min(left, c);
      TakeFromNode(nd, take, out, as);
      left -= take;
    }
  }
  return true;
}

bool PoolState::TakeFewestNodes(int32_t count, std::vector<int32_t>& out, GpuState as) {
  // The fewest nodes that can hold `count` GPUs, the fullest-free first.
  const int32_t g = spec_.gpus_per_node;
  const int32_t nodes_needed = (count + g - 1) / g;
  std::vector<int32_t> chosen;
  int32_t sum = 0;
  for (int32_t c = g; c > 0 && static_cast<int32_t>(chosen.size()) < nodes_needed; --c) {
    for (int32_t nd : by_free_[static_cast<size_t>(c)]) {
      if (static_cast<int32_t>(chosen.size()) == nodes_needed) break;
      chosen.push_back(nd);
      sum += c;
    }
  }
  if (sum < count) return false;
  int32_t left = count;
  for (int32_t nd : chosen) {
    const int32_t take = std::min(left, node_free_[static_cast<size_t>(nd)]);
    TakeFromNode(nd, take, out, as);
    left -= take;
  }
  return true;
}

bool PoolState::TakeWhole(int32_t count, PlacementMode mode, std::vector<int32_t>& out, GpuState as) {
  if (count > free_whole_) return false;
  const int32_t g = spec_.gpus_per_node;
  if (count <= g) {
    // One node: best fit (topology) or the node with the most free GPUs (spread).
    for (int32_t i = 0; i <= g - count; ++i) {
      const int32_t c = mode == PlacementMode::kTopology ? count + i : g - i;
      if (!by_free_[static_cast<size_t>(c)].empty()) {
        TakeFromNode(by_free_[static_cast<size_t>(c)].back(), count, out, as);
        return true;
      }
    }
    if (spec_.strict_locality) return false;
  }
  if (spec_.strict_locality) return TakeFewestNodes(count, out, as);
  if (mode == PlacementMode::kSpread) {
    // One GPU at a time from the node with the most free GPUs.
    for (int32_t i = 0; i < count; ++i) {
      for (int32_t c = g; c > 0; --c) {
        if (!by_free_[static_cast<size_t>(c)].empty()) {
          TakeFromNode(by_free_[static_cast<size_t>(c)].back(), 1, out, as);
          break;
        }
      }
    }
    return true;
  }
  return TakeAcrossNodes(count, out, as);
}

Span PoolState::SpanOf(const std::vector<int32_t>& gpus) const {
  if (gpus.empty()) return Span::kOneNode;
  const int32_t node0 = NodeOf(gpus.front());
  bool nodes = false, domains = false, racks = false;
  for (int32_t gpu : gpus) {
    const int32_t nd = NodeOf(gpu);
    nodes |= nd != node0;
    domains |= nd / spec_.nodes_per_nvlink_domain != node0 / spec_.nodes_per_nvlink_domain;
    racks |= nd / spec_.nodes_per_rack != node0 / spec_.nodes_per_rack;
  }
  return racks ? Span::kRacks : domains ? Span::kOneRack : nodes ? Span::kOneDomain : Span::kOneNode;
}

bool PoolState::PlaceShared(uint32_t index, int32_t ticks, PlacementMode mode, Allocation& out) {
  if (spec_.sharing == Sharing::kTimeSlicing) {
    auto it = partial_by_free_.lower_bound({ticks, -1});
    int32_t gpu = -1;
    if (it != partial_by_free_.end()) {
      gpu = it->second;
      partial_by_free_.erase(it);
    } else {
      std::vector<int32_t> one;
      if (!TakeWhole(1, mode, one, kPartial)) return false;
      gpu = one.front();
      free_ticks_[static_cast<size_t>(gpu)] = kTicksPerGpu;
    }
    int32_t& free = free_ticks_[static_cast<size_t>(gpu)];
    free -= ticks;
    if (free > 0) partial_by_free_.insert({free, gpu});
    tenants_[static_cast<size_t>(gpu)].push_back(index);
    out.gpus.assign(1, gpu);
    out.ticks = ticks;
    return true;
  }
  // MIG: the smallest free slice that holds the request, on a GPU already cut up first.
  const int32_t sevenths = (ticks + kTicksPerGpu / 7 - 1) / (kTicksPerGpu / 7);
  auto it = free_slices_.lower_bound({sevenths, -1, -1});
  int32_t gpu = -1, slice = -1, size = 0;
  if (it != free_slices_.end()) {
    std::tie(size, gpu, slice) = *it;
    free_slices_.erase(it);
  } else {
    std::vector<int32_t> one;
    if (!TakeWhole(1, mode, one, kPartial)) return false;
    gpu = one.front();
    for (size_t s = 0; s < spec_.mig_layout.size(); ++s) {
      const int32_t sz = spec_.mig_layout[s];
      if (sz >= sevenths && (slice < 0 || sz < size)) {
        slice = static_cast<int32_t>(s);
        size = sz;
      }
    }
    for (size_t s = 0; s < spec_.mig_layout.size(); ++s) {
      if (static_cast<int32_t>(s) != slice) free_slices_.insert({spec_.mig_layout[s], gpu, static_cast<int32_t>(s)});
    }
  }
  slice_used_[static_cast<size_t>(gpu)] |= static_cast<uint8_t>(1U << slice);
  out.gpus.assign(1, gpu);
  out.slice = slice;
  out.ticks = size * (kTicksPerGpu / 7);
  return true;
}

bool PoolState::Place(uint32_t index, const SimJob& job, PlacementMode mode, Allocation& out) {
  out = Allocation();
  const bool sub_gpu = job.is_fractional();
  if (sub_gpu && spec_.sharing != Sharing::kNone &&
      (spec_.sharing == Sharing::kTimeSlicing ||
       (job.share_ticks + kTicksPerGpu / 7 - 1) / (kTicksPerGpu / 7) <= largest_slice_)) {
    if (!PlaceShared(index, job.share_ticks, mode, out)) return false;
    out.shared = true;
    allocated_ticks_ += out.ticks;
    return true;
  }
  const int32_t count = sub_gpu ? 1 : job.gpus;
  if (!TakeWhole(count, mode, out.gpus, kWhole)) return false;
  out.ticks = count * kTicksPerGpu;
  out.span = SpanOf(out.gpus);
  allocated_ticks_ += out.ticks;
  return true;
}

void PoolState::FreeWholeGpu(int32_t gpu) {
  gpu_state_[static_cast<size_t>(gpu)] = kFree;
  const int32_t nd = NodeOf(gpu);
  SetNodeFree(nd, node_free_[static_cast<size_t>(nd)] + 1);
}

void PoolState::Release(uint32_t index, const Allocation& a) {
  allocated_ticks_ -= a.ticks;
  if (!a.shared) {
    for (int32_t gpu : a.gpus) FreeWholeGpu(gpu);
    return;
  }
  const int32_t gpu = a.gpus.front();
  if (spec_.sharing == Sharing::kTimeSlicing) {
    auto& tenants = tenants_[static_cast<size_t>(gpu)];
    tenants.erase(std::find(tenants.begin(), tenants.end(), index));
    int32_t& free = free_ticks_[static_cast<size_t>(gpu)];
    if (free > 0) partial_by_free_.erase({free, gpu});
    free += a.ticks;
    if (tenants.empty()) {
      FreeWholeGpu(gpu);
    } else {
      partial_by_free_.insert({free, gpu});
    }
    return;
  }
  uint8_t& used = slice_used_[static_cast<size_t>(gpu)];
  used = static_cast<uint8_t>(used & ~(1U << a.slice));
  if (used == 0) {
    for (size_t s = 0; s < spec_.mig_layout.size(); ++s) {
      free_slices_.erase({spec_.mig_layout[s], gpu, static_cast<int32_t>(s)});
    }
    FreeWholeGpu(gpu);
  } else {
    free_slices_.insert({spec_.mig_layout[static_cast<size_t>(a.slice)], gpu, a.slice});
  }
}

}  // namespace gpuledger::sim
