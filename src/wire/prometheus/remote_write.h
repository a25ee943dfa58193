// Prometheus remote-write 1.0: the body of a POST is a snappy-compressed (block format,
// not framed) protobuf WriteRequest. This decodes it into plain structs and encodes
// them back (for tests, the agent and benchmarks).
//
// The protobuf wire format is decoded by hand (varint, fixed64, length-delimited), not
// by protoc-generated code: it returns a Status with the path of the offending field
// ("timeseries[3].labels[1]: invalid UTF-8") instead of a bare failure, never throws,
// needs no arena, and measured faster on our inputs (docs/prometheus.md). The schema
// lives in remote_write.proto; the tests check this codec against libprotobuf's.
//
// Decoding validates what the 1.0 specification requires of a sender, so that nothing
// malformed reaches the ledger: label names match [a-zA-Z_][a-zA-Z0-9_]*, label values
// are UTF-8, every series has a valid __name__, no label name repeats, timestamps lie in
// a plausible window. Labels are returned sorted by name (senders must sort them; those
// that do not are forgiven), empty-valued labels are dropped (they mean "absent").
// Values are returned as sent: NaN (including the staleness marker) and +-Inf are valid
// Prometheus values; DecodeOptions::reject_non_finite refuses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "wire/prometheus/labels.h"

namespace gpuledger::prometheus {

struct RemoteSample {
  double value = 0;
  int64_t timestamp_ms = 0;
  bool operator==(const RemoteSample& o) const;  // bitwise on value: NaN == same NaN
};

struct TimeSeries {
  Labels labels;  // sorted by name; includes __name__
  std::vector<RemoteSample> samples;
  bool operator==(const TimeSeries&) const = default;
};

struct WriteRequest {
  std::vector<TimeSeries> timeseries;
  bool operator==(const WriteRequest&) const = default;
};

// The bit pattern Prometheus writes as a value to mark a series stale.
inline constexpr uint64_t kStaleNaNBits = 0x7ff0000000000002ULL;
bool IsStaleMarker(double value);
double StaleMarker();

struct DecodeOptions {
  // Limits on the compressed body and on what it decompresses to. The uncompressed
  // length in the snappy header is checked before any memory is allocated for it.
  // Decoded structs take up to ~16x the uncompressed bytes (an 8-byte label on the wire
  // becomes two 32-byte std::strings, and vectors grow by doubling), so the defaults
  // bound a request to ~512 MiB in memory; Prometheus sends batches of a few thousand
  // samples, well under 1 MiB.
  size_t max_compressed_bytes = size_t{8} << 20;
  size_t max_uncompressed_bytes = size_t{32} << 20;
  // Samples outside [min_timestamp_ms, max_timestamp_ms] are refused. The defaults
  // (1970 to 2200) refuse negative and absurd instants; tests may widen them.
  int64_t min_timestamp_ms = 0;
  int64_t max_timestamp_ms = int64_t{7258118400000};  // 2200-01-01T00:00:00Z
  // Refuse NaN (the staleness marker too) and +-Inf values.
  bool reject_non_finite = false;
};

// Decompresses a snappy block. Fails when `compressed` is not valid snappy or exceeds
// `max_compressed`, or when its declared length exceeds `max_uncompressed`.
Result<std::string> SnappyUncompress(std::string_view compressed, size_t max_compressed,
                                     size_t max_uncompressed);
std::string SnappyCompress(std::string_view raw);

// Decodes a remote-write request body (snappy block of a protobuf WriteRequest).
// On failure nothing is returned but a Status whose message names the field:
// "timeseries[3].labels[1].value: invalid UTF-8".
Result<WriteRequest> DecodeWriteRequest(std::string_view body, const DecodeOptions& options = {});

// Decodes the protobuf bytes of a WriteRequest (no snappy). Same checks as above, but the
// size limit is options.max_uncompressed_bytes. Unknown fields (metadata, exemplars,
// native histograms) are skipped.
Result<WriteRequest> ParseWriteRequestProto(std::string_view proto,
                                            const DecodeOptions& options = {});

// Encodes `request` as protobuf, exactly as given (no sorting or checks), so tests can
// build hostile inputs too.
std::string EncodeWriteRequestProto(const WriteRequest& request);
// EncodeWriteRequestProto, then snappy: a body ready to POST.
std::string EncodeWriteRequest(const WriteRequest& request);

}  // namespace gpuledger::prometheus
