#include "core/amortization.h"

#include <fmt/format.h>

#include "core/price_book.h"

namespace gpuledger {

Result<Money> AmortizedPerGpuHour(Money purchase, int64_t gpus, const TimeRange& term) {
  if (purchase < Money()) return InvalidArgument(fmt::format("purchase {}: cannot be negative", purchase.ToString()));
  if (gpus < 1) return InvalidArgument(fmt::format("gpus {}: a purchase covers at least one GPU", gpus));
  if (term.empty() || term.end_ms >= kForever || term.begin_ms % kMsPerHour != 0 || term.end_ms % kMsPerHour != 0) {
    return InvalidArgument("a purchase's term needs a start and an end on whole UTC hours, the end after the start");
  }
  const CostNumerator gpu_hours = static_cast<CostNumerator>(term.length_ms() / kMsPerHour) * gpus;
  const CostNumerator micros = (static_cast<CostNumerator>(purchase.micros()) * 2 + gpu_hours) / (gpu_hours * 2);
  return Money::FromMicros(static_cast<int64_t>(micros));
}

}  // namespace gpuledger
