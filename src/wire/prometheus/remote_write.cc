#include "wire/prometheus/remote_write.h"

#include <fmt/format.h>
#include <snappy.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace gpuledger::prometheus {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kStartGroup = 3;
constexpr uint32_t kEndGroup = 4;
constexpr uint32_t kFixed32 = 5;

// Field numbers of the remote-write 1.0 schema (remote_write.proto).
constexpr uint32_t kWriteRequestTimeseries = 1;
constexpr uint32_t kTimeSeriesLabels = 1;
constexpr uint32_t kTimeSeriesSamples = 2;
constexpr uint32_t kLabelName = 1;
constexpr uint32_t kLabelValue = 2;
constexpr uint32_t kSampleValue = 1;
constexpr uint32_t kSampleTimestamp = 2;

// Reads protobuf wire primitives from a byte range; every read is bounds-checked.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes)
      : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ >= end_; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }

  bool ReadVarint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      auto byte = static_cast<uint8_t>(*p_++);
      if (shift == 63 && byte > 1) return false;  // more than 64 bits
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // an 11th byte
  }
  bool ReadFixed64(uint64_t& v) {
    if (end_ - p_ < 8) return false;
    uint64_t le = 0;
    std::memcpy(&le, p_, 8);
    if constexpr (std::endian::native == std::endian::big) le = __builtin_bswap64(le);
    v = le;
    p_ += 8;
    return true;
  }
  bool ReadLengthDelimited(std::string_view& out) {
    uint64_t len = 0;
    if (!ReadVarint(len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) return false;
    out = std::string_view(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }
  bool Skip(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) return false;
    p_ += n;
    return true;
  }

 private:
  const char* begin_;
  const char* p_;
  const char* end_;
};

// Names a message for error messages; formatted only when an error is reported.
struct Path {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t series = kNone;
  const char* member = nullptr;  // "labels" or "samples"
  size_t index = 0;
  std::string str() const {
    if (series == kNone) return "WriteRequest";
    if (member == nullptr) return fmt::format("timeseries[{}]", series);
    return fmt::format("timeseries[{}].{}[{}]", series, member, index);
  }
};

struct Tag {
  uint32_t field = 0;
  uint32_t wire_type = 0;
};

const char* WireTypeName(uint32_t wt) {
  switch (wt) {
    case kVarint:
      return "varint";
    case kFixed64:
      return "fixed64";
    case kLengthDelimited:
      return "length-delimited";
    case kStartGroup:
      return "start-group";
    case kEndGroup:
      return "end-group";
    case kFixed32:
      return "fixed32";
    default:
      return "invalid";
  }
}

// Reads a field tag. `where` names the message for errors.
Status ReadTag(WireReader& r, const Path& where, Tag& tag) {
  uint64_t raw = 0;
  size_t at = r.offset();
  if (!r.ReadVarint(raw)) {
    return InvalidArgument(
        fmt::format("{}: truncated or overlong field tag at byte {}", where.str(), at));
  }
  if (raw >> 32 != 0 || (raw >> 3) == 0) {
    return InvalidArgument(fmt::format("{}: invalid field number at byte {}", where.str(), at));
  }
  tag.field = static_cast<uint32_t>(raw >> 3);
  tag.wire_type = static_cast<uint32_t>(raw & 7);
  return Status::Ok();
}

// Skips a field of an unknown number.
Status SkipField(WireReader& r, const Path& where, const Tag& tag) {
  bool ok = false;
  switch (tag.wire_type) {
    case kVarint: {
      uint64_t v = 0;
      ok = r.ReadVarint(v);
      break;
    }
    case kFixed64:
      ok = r.Skip(8);
      break;
    case kLengthDelimited: {
      std::string_view v;
      ok = r.ReadLengthDelimited(v);
      break;
    }
    case kFixed32:
      ok = r.Skip(4);
      break;
    default:
      return InvalidArgument(fmt::format("{}: field {} has unsupported wire type {} ({})",
                                         where.str(), tag.field, tag.wire_type,
                                         WireTypeName(tag.wire_type)));
  }
  if (!ok)
    return InvalidArgument(
        fmt::format("{}: field {} is truncated or malformed", where.str(), tag.field));
  return Status::Ok();
}

Status WantWireType(const Path& where, const Tag& tag, uint32_t want) {
  if (tag.wire_type == want) return Status::Ok();
  return InvalidArgument(fmt::format("{}: field {} has wire type {} ({}), want {} ({})",
                                     where.str(), tag.field, tag.wire_type,
                                     WireTypeName(tag.wire_type), want, WireTypeName(want)));
}

Status ReadSubmessage(WireReader& r, const Path& where, std::string_view& out) {
  if (!r.ReadLengthDelimited(out)) {
    return InvalidArgument(fmt::format("{}: truncated (length runs past the end)", where.str()));
  }
  return Status::Ok();
}

Status ParseLabel(std::string_view bytes, const Path& where, Label& label) {
  WireReader r(bytes);
  while (!r.done()) {
    Tag tag;
    GPULEDGER_RETURN_IF_ERROR(ReadTag(r, where, tag));
    if (tag.field == kLabelName || tag.field == kLabelValue) {
      GPULEDGER_RETURN_IF_ERROR(WantWireType(where, tag, kLengthDelimited));
      std::string_view s;
      GPULEDGER_RETURN_IF_ERROR(ReadSubmessage(r, where, s));
      (tag.field == kLabelName ? label.name : label.value).assign(s);  // last one wins
    } else {
      GPULEDGER_RETURN_IF_ERROR(SkipField(r, where, tag));
    }
  }
  return Status::Ok();
}

Status ParseSample(std::string_view bytes, const Path& where, RemoteSample& sample) {
  WireReader r(bytes);
  while (!r.done()) {
    Tag tag;
    GPULEDGER_RETURN_IF_ERROR(ReadTag(r, where, tag));
    if (tag.field == kSampleValue) {
      GPULEDGER_RETURN_IF_ERROR(WantWireType(where, tag, kFixed64));
      uint64_t bits = 0;
      if (!r.ReadFixed64(bits))
        return InvalidArgument(fmt::format("{}.value: truncated", where.str()));
      sample.value = std::bit_cast<double>(bits);
    } else if (tag.field == kSampleTimestamp) {
      GPULEDGER_RETURN_IF_ERROR(WantWireType(where, tag, kVarint));
      uint64_t v = 0;
      if (!r.ReadVarint(v)) {
        return InvalidArgument(
            fmt::format("{}.timestamp: truncated or overlong varint", where.str()));
      }
      sample.timestamp_ms = static_cast<int64_t>(v);  // int64: two's complement
    } else {
      GPULEDGER_RETURN_IF_ERROR(SkipField(r, where, tag));
    }
  }
  return Status::Ok();
}

// Validates and normalizes one decoded series (see the header's contract).
Status CheckSeries(TimeSeries& ts, size_t index, const DecodeOptions& options) {
  for (size_t j = 0; j < ts.labels.size(); ++j) {
    const Label& l = ts.labels[j];
    if (!IsValidLabelName(l.name)) {
      std::string shown = IsValidUtf8(l.name) ? l.name : "<invalid UTF-8>";
      return InvalidArgument(
          fmt::format("timeseries[{}].labels[{}].name: invalid label name \"{}\"", index, j,
                      shown.substr(0, 64)));
    }
    if (!IsValidUtf8(l.value)) {
      return InvalidArgument(fmt::format(
          "timeseries[{}].labels[{}].value: invalid UTF-8 (label {})", index, j, l.name));
    }
  }
  std::erase_if(ts.labels, [](const Label& l) { return l.value.empty(); });
  std::stable_sort(ts.labels.begin(), ts.labels.end(),
                   [](const Label& a, const Label& b) { return a.name < b.name; });
  for (size_t j = 1; j < ts.labels.size(); ++j) {
    if (ts.labels[j].name == ts.labels[j - 1].name) {
      return InvalidArgument(
          fmt::format("timeseries[{}]: label {} appears twice", index, ts.labels[j].name));
    }
  }
  std::optional<std::string_view> name = FindLabel(ts.labels, kMetricNameLabel);
  if (!name) return InvalidArgument(fmt::format("timeseries[{}]: no __name__ label", index));
  if (!IsValidMetricName(*name)) {
    return InvalidArgument(fmt::format("timeseries[{}]: __name__ \"{}\" is not a valid metric name",
                                       index, name->substr(0, 64)));
  }
  for (size_t k = 0; k < ts.samples.size(); ++k) {
    const RemoteSample& s = ts.samples[k];
    if (s.timestamp_ms < options.min_timestamp_ms || s.timestamp_ms > options.max_timestamp_ms) {
      return InvalidArgument(fmt::format(
          "timeseries[{}] ({}).samples[{}].timestamp: {} ms is outside the accepted window "
          "[{}, {}]",
          index, *name, k, s.timestamp_ms, options.min_timestamp_ms, options.max_timestamp_ms));
    }
    if (options.reject_non_finite && !std::isfinite(s.value)) {
      return InvalidArgument(fmt::format("timeseries[{}] ({}).samples[{}].value: {} is not finite",
                                         index, *name, k,
                                         IsStaleMarker(s.value) ? "stale marker"
                                         : std::isnan(s.value)  ? "NaN"
                                                                : "Inf"));
    }
  }
  return Status::Ok();
}

Status ParseSeries(std::string_view bytes, size_t index, TimeSeries& ts) {
  WireReader r(bytes);
  while (!r.done()) {
    Tag tag;
    const Path where{index};
    GPULEDGER_RETURN_IF_ERROR(ReadTag(r, where, tag));
    if (tag.field == kTimeSeriesLabels || tag.field == kTimeSeriesSamples) {
      bool label = tag.field == kTimeSeriesLabels;
      size_t n = label ? ts.labels.size() : ts.samples.size();
      const Path sub{index, label ? "labels" : "samples", n};
      GPULEDGER_RETURN_IF_ERROR(WantWireType(sub, tag, kLengthDelimited));
      std::string_view body;
      GPULEDGER_RETURN_IF_ERROR(ReadSubmessage(r, sub, body));
      if (label) {
        GPULEDGER_RETURN_IF_ERROR(ParseLabel(body, sub, ts.labels.emplace_back()));
      } else {
        GPULEDGER_RETURN_IF_ERROR(ParseSample(body, sub, ts.samples.emplace_back()));
      }
    } else {
      GPULEDGER_RETURN_IF_ERROR(SkipField(r, where, tag));
    }
  }
  return Status::Ok();
}

// ---- Encoding ----------------------------------------------------------------------------

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void PutTag(std::string& out, uint32_t field, uint32_t wt) { PutVarint(out, (field << 3) | wt); }
void PutBytes(std::string& out, uint32_t field, std::string_view s) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, s.size());
  out.append(s);
}
size_t BytesFieldSize(size_t len) { return 1 + VarintSize(len) + len; }  // fields 1..15

size_t LabelSize(const Label& l) {
  return BytesFieldSize(l.name.size()) + BytesFieldSize(l.value.size());
}
size_t SampleSize(const RemoteSample& s) {
  return 1 + 8 + 1 + VarintSize(static_cast<uint64_t>(s.timestamp_ms));
}
size_t SeriesSize(const TimeSeries& ts) {
  size_t n = 0;
  for (const Label& l : ts.labels) n += BytesFieldSize(LabelSize(l));
  for (const RemoteSample& s : ts.samples) n += BytesFieldSize(SampleSize(s));
  return n;
}

}  // namespace

bool RemoteSample::operator==(const RemoteSample& o) const {
  return std::bit_cast<uint64_t>(value) == std::bit_cast<uint64_t>(o.value) &&
         timestamp_ms == o.timestamp_ms;
}

bool IsStaleMarker(double value) { return std::bit_cast<uint64_t>(value) == kStaleNaNBits; }
double StaleMarker() { return std::bit_cast<double>(kStaleNaNBits); }

Result<std::string> SnappyUncompress(std::string_view compressed, size_t max_compressed,
                                     size_t max_uncompressed) {
  if (compressed.size() > max_compressed) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("remote-write body: {} bytes exceeds the limit of {}",
                              compressed.size(), max_compressed));
  }
  size_t length = 0;
  if (!snappy::GetUncompressedLength(compressed.data(), compressed.size(), &length)) {
    return InvalidArgument("remote-write body: not snappy block data (bad length header)");
  }
  if (length > max_uncompressed) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("remote-write body: decompresses to {} bytes, over the limit of {}",
                              length, max_uncompressed));
  }
  std::string out(length, '\0');
  if (!snappy::RawUncompress(compressed.data(), compressed.size(), out.data())) {
    return InvalidArgument("remote-write body: corrupt snappy block");
  }
  return out;
}

std::string SnappyCompress(std::string_view raw) {
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

Result<WriteRequest> ParseWriteRequestProto(std::string_view proto, const DecodeOptions& options) {
  if (proto.size() > options.max_uncompressed_bytes) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("WriteRequest: {} bytes exceeds the limit of {}", proto.size(),
                              options.max_uncompressed_bytes));
  }
  WriteRequest req;
  WireReader r(proto);
  const Path where;
  while (!r.done()) {
    Tag tag;
    GPULEDGER_RETURN_IF_ERROR(ReadTag(r, where, tag));
    if (tag.field != kWriteRequestTimeseries) {
      GPULEDGER_RETURN_IF_ERROR(SkipField(r, where, tag));  // metadata (3) and the like
      continue;
    }
    size_t index = req.timeseries.size();
    const Path sub{index};
    GPULEDGER_RETURN_IF_ERROR(WantWireType(sub, tag, kLengthDelimited));
    std::string_view body;
    GPULEDGER_RETURN_IF_ERROR(ReadSubmessage(r, sub, body));
    TimeSeries& ts = req.timeseries.emplace_back();
    GPULEDGER_RETURN_IF_ERROR(ParseSeries(body, index, ts));
    GPULEDGER_RETURN_IF_ERROR(CheckSeries(ts, index, options));
  }
  return req;
}

Result<WriteRequest> DecodeWriteRequest(std::string_view body, const DecodeOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(std::string proto, SnappyUncompress(body, options.max_compressed_bytes,
                                                                 options.max_uncompressed_bytes));
  return ParseWriteRequestProto(proto, options);
}

std::string EncodeWriteRequestProto(const WriteRequest& request) {
  size_t total = 0;
  for (const TimeSeries& ts : request.timeseries) total += BytesFieldSize(SeriesSize(ts)) + 4;
  std::string out;
  out.reserve(total);
  for (const TimeSeries& ts : request.timeseries) {
    PutTag(out, kWriteRequestTimeseries, kLengthDelimited);
    PutVarint(out, SeriesSize(ts));
    for (const Label& l : ts.labels) {
      PutTag(out, kTimeSeriesLabels, kLengthDelimited);
      PutVarint(out, LabelSize(l));
      PutBytes(out, kLabelName, l.name);
      PutBytes(out, kLabelValue, l.value);
    }
    for (const RemoteSample& s : ts.samples) {
      PutTag(out, kTimeSeriesSamples, kLengthDelimited);
      PutVarint(out, SampleSize(s));
      PutTag(out, kSampleValue, kFixed64);
      uint64_t bits = std::bit_cast<uint64_t>(s.value);
      if constexpr (std::endian::native == std::endian::big) bits = __builtin_bswap64(bits);
      char buf[8];
      std::memcpy(buf, &bits, 8);
      out.append(buf, 8);
      PutTag(out, kSampleTimestamp, kVarint);
      PutVarint(out, static_cast<uint64_t>(s.timestamp_ms));
    }
  }
  return out;
}

std::string EncodeWriteRequest(const WriteRequest& request) {
  return SnappyCompress(EncodeWriteRequestProto(request));
}

}  // namespace gpuledger::prometheus
