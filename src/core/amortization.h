// Reserved capacity bought up front, as a price per GPU-hour: the purchase spread over
// its term (docs/configuration.md, [[price]] purchase).
#pragma once

#include <cstdint>

#include "core/money.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger {

// The price per GPU-hour of `purchase` for `gpus` GPUs over `term` (whole UTC hours):
// spread evenly over every GPU-hour of the term and rounded half up to the micro-unit, so
// the term's GPU-hours at that price differ from the purchase by at most half a micro-unit
// per GPU-hour. Fails, naming the figure, on a negative purchase, fewer than one GPU, or a
// term that is empty, open-ended or not on whole hours.
Result<Money> AmortizedPerGpuHour(Money purchase, int64_t gpus, const TimeRange& term);

}  // namespace gpuledger
