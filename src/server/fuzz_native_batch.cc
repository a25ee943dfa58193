// libFuzzer target for the server's native ingest path (built with -DGPULEDGER_FUZZ=ON
// and clang): gzip detection and inflation, the v1 JSON parser, the server's limits and
// the batch validation. Beyond "no crash, no sanitizer report" it checks that a batch
// that decodes writes back to a document that decodes to the same batch.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/ingest.h"
#include "wire/batch.h"

namespace gs = gpuledger::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gs::IngestLimits limits;
  limits.max_body_bytes = size_t{1} << 20;
  limits.max_samples_per_batch = 10'000;
  const int64_t now = 1795435200000;  // 2026-11-23T12:00:00Z
  gpuledger::Result<gpuledger::Batch> batch = gs::DecodeNativeBatch(bytes, limits, now);
  if (!batch.ok()) return 0;
  (void)gpuledger::ValidateBatch(*batch, now);
  std::string again = gpuledger::wire::WriteBatch(*batch);
  gpuledger::Result<gpuledger::Batch> reread = gs::DecodeNativeBatch(again, limits, now);
  if (!reread.ok()) __builtin_trap();
  if (gpuledger::wire::WriteBatch(*reread) != again) __builtin_trap();
  return 0;
}
