// Serving engines' own metrics, from a parsed exposition: vLLM (`vllm:*`) and Triton
// (`nv_inference_*`), one snapshot per engine and model.
#pragma once

#include <string>
#include <vector>

#include "core/serving.h"
#include "core/status.h"
#include "wire/prometheus/prom_text.h"

namespace gpuledger::prometheus {

struct ServingExtract {
  std::vector<ServingSnapshot> snapshots;  // by engine, then model
  // Figures left out, each with its reason ("vllm:kv_cache_usage_perc{...} line 12:
  // value NaN"): a bad value is skipped and said, never turned into a number.
  std::vector<std::string> skipped;
};

// Reads the vLLM and Triton families of a scrape taken at `scrape_ms`. Families it does
// not know are ignored; families it knows with the wrong type are skipped and said. A
// scrape with neither engine's families gives no snapshot (not an error).
ServingExtract ExtractServing(const std::vector<Family>& families, int64_t scrape_ms);

}  // namespace gpuledger::prometheus
