// libFuzzer target for the remote-write decoder (built with -DGPULEDGER_FUZZ=ON and
// clang; scripts/fuzz.sh runs it). The input is tried both as a snappy body and as bare
// protobuf. Beyond "no crash, no sanitizer report" it checks that a decoded request
// re-encodes and decodes to itself (decoding normalizes; normalizing twice changes
// nothing).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/prometheus/remote_write.h"

namespace gp = gpuledger::prometheus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gp::DecodeOptions options;
  options.max_uncompressed_bytes = size_t{1} << 20;
  (void)gp::DecodeWriteRequest(bytes, options);
  gpuledger::Result<gp::WriteRequest> req = gp::ParseWriteRequestProto(bytes, options);
  if (!req.ok()) return 0;
  gpuledger::Result<gp::WriteRequest> again =
      gp::DecodeWriteRequest(gp::EncodeWriteRequest(*req), options);
  if (!again.ok() || !(*again == *req)) __builtin_trap();
  return 0;
}
