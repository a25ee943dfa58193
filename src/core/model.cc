#include "core/model.h"

#include <fmt/format.h>

#include <charconv>

namespace gpuledger {

std::string_view BucketName(Bucket b) {
  switch (b) {
    case Bucket::kActive: return "active";
    case Bucket::kAllocatedIdle: return "allocated_idle";
    case Bucket::kUnallocated: return "unallocated";
    case Bucket::kUnavailable: return "unavailable";
    case Bucket::kUnmonitored: return "unmonitored";
  }
  return "?";
}

std::string_view IdleCauseName(IdleCause c) {
  switch (c) {
    case IdleCause::kInputStall: return "input_stall";
    case IdleCause::kCheckpointStall: return "checkpoint_stall";
    case IdleCause::kHeldIdle: return "held_idle";
    case IdleCause::kOther: return "other";
  }
  return "?";
}

std::string_view JobKindName(JobKind k) {
  switch (k) {
    case JobKind::kTraining: return "training";
    case JobKind::kServing: return "serving";
    case JobKind::kNotebook: return "notebook";
    case JobKind::kBatch: return "batch";
    case JobKind::kUnknown: return "unknown";
  }
  return "?";
}

Result<JobKind> ParseJobKind(std::string_view text) {
  for (JobKind k : {JobKind::kTraining, JobKind::kServing, JobKind::kNotebook, JobKind::kBatch,
                    JobKind::kUnknown}) {
    if (text == JobKindName(k)) return k;
  }
  return InvalidArgument(fmt::format(
      "kind \"{}\": want training, serving, notebook, batch or unknown", text));
}

std::string_view CapacityTypeName(CapacityType c) {
  switch (c) {
    case CapacityType::kReserved: return "reserved";
    case CapacityType::kOnDemand: return "on-demand";
    case CapacityType::kSpot: return "spot";
  }
  return "?";
}

Result<CapacityType> ParseCapacityType(std::string_view text) {
  for (CapacityType c : {CapacityType::kReserved, CapacityType::kOnDemand, CapacityType::kSpot}) {
    if (text == CapacityTypeName(c)) return c;
  }
  return InvalidArgument(
      fmt::format("capacity type \"{}\": want reserved, on-demand or spot", text));
}

std::string_view HealthName(Health h) {
  switch (h) {
    case Health::kOk: return "ok";
    case Health::kDegraded: return "degraded";
    case Health::kUnhealthy: return "unhealthy";
    case Health::kLost: return "lost";
  }
  return "?";
}

Result<Health> ParseHealth(std::string_view text) {
  for (Health h : {Health::kOk, Health::kDegraded, Health::kUnhealthy, Health::kLost}) {
    if (text == HealthName(h)) return h;
  }
  return InvalidArgument(
      fmt::format("health \"{}\": want ok, degraded, unhealthy or lost", text));
}

Result<Share> ParseShare(std::string_view text) {
  auto slash = text.find('/');
  Share s;
  auto parse = [](std::string_view part, int32_t& out) {
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && p == part.data() + part.size();
  };
  if (slash == std::string_view::npos || !parse(text.substr(0, slash), s.num) ||
      !parse(text.substr(slash + 1), s.den) || !s.IsValid()) {
    return InvalidArgument(fmt::format(
        "share \"{}\": want N/D with 0 < N <= D and D dividing 840 (e.g. 3/7)", text));
  }
  return s;
}

}  // namespace gpuledger
