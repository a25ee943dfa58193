#include "wire/prometheus/remote_write.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "wire/prometheus/test_util.h"

#ifdef GPULEDGER_HAVE_PROTOBUF
#include "remote_write.pb.h"
#endif

namespace gpuledger::prometheus {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1764489600000;  // 2025-11-30T08:00:00Z

TimeSeries Series(std::string name, Labels extra, std::vector<RemoteSample> samples) {
  TimeSeries ts;
  ts.labels.push_back({"__name__", std::move(name)});
  for (Label& l : extra) ts.labels.push_back(std::move(l));
  ts.samples = std::move(samples);
  return ts;
}

WriteRequest SampleRequest() {
  WriteRequest req;
  req.timeseries.push_back(Series("DCGM_FI_PROF_SM_ACTIVE",
                                  {{"UUID", "GPU-1"}, {"gpu", "0"}, {"pod", "a \"q\"\nb\\"}},
                                  {{0.5, kT0}, {0.75, kT0 + 10000}}));
  req.timeseries.push_back(Series(
      "up", {{"instance", "n:9400"}, {"job", "dcgm"}},
      {{StaleMarker(), kT0}, {std::numeric_limits<double>::infinity(), kT0 + 1}, {-0.0, kT0 + 2}}));
  req.timeseries.push_back(Series("vllm:num_requests_running", {}, {}));
  return req;
}

// Bytes of a protobuf varint.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string LengthDelimited(uint32_t field, const std::string& body) {
  return Varint((field << 3) | 2) + Varint(body.size()) + body;
}

TEST(RemoteWriteTest, EncodeThenDecodeRoundTrips) {
  WriteRequest req = SampleRequest();
  std::string body = EncodeWriteRequest(req);
  Result<WriteRequest> back = DecodeWriteRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // Labels come back sorted by name ("UUID" < "__name__" < "gpu" in byte order).
  WriteRequest want = req;
  for (TimeSeries& ts : want.timeseries) {
    std::sort(ts.labels.begin(), ts.labels.end(),
              [](const Label& a, const Label& b) { return a.name < b.name; });
  }
  EXPECT_EQ(*back, want);
  EXPECT_TRUE(IsStaleMarker(back->timeseries[1].samples[0].value));
  EXPECT_TRUE(std::signbit(back->timeseries[1].samples[2].value));
  EXPECT_EQ(FindLabel(back->timeseries[0].labels, "pod").value_or(""), "a \"q\"\nb\\");
}

// testdata/remote_write_golden.* were written byte by byte from the schema, apart from
// this codec and from libsnappy's compressor (the .snappy file is one literal block).
TEST(RemoteWriteTest, GoldenBytesMatchTheEncoderAndDecode) {
  WriteRequest req;
  req.timeseries.push_back(Series("DCGM_FI_PROF_SM_ACTIVE", {{"pod", "p"}}, {{0.5, kT0}}));
  req.timeseries[0].labels.insert(req.timeseries[0].labels.begin(), {"UUID", "GPU-1"});
  std::optional<std::string> pb = testutil::ReadFile(testutil::Testdata("remote_write_golden.pb"));
  std::optional<std::string> body =
      testutil::ReadFile(testutil::Testdata("remote_write_golden.snappy"));
  ASSERT_TRUE(pb && body);
  EXPECT_EQ(EncodeWriteRequestProto(req), *pb);
  Result<WriteRequest> back = DecodeWriteRequest(*body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, req);
}

TEST(RemoteWriteTest, EmptyRequestAndEmptyLabelValues) {
  Result<WriteRequest> empty = DecodeWriteRequest(EncodeWriteRequest({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->timeseries.empty());

  WriteRequest req;
  req.timeseries.push_back(Series("m", {{"container", ""}, {"pod", "p"}}, {{1, kT0}}));
  Result<WriteRequest> back = DecodeWriteRequest(EncodeWriteRequest(req));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->timeseries[0].labels, (Labels{{"__name__", "m"}, {"pod", "p"}}));
}

TEST(RemoteWriteTest, UnknownFieldsAreSkipped) {
  // WriteRequest.metadata (3), TimeSeries.exemplars (3) and a fixed32 and a varint field
  // nobody defines.
  std::string label = LengthDelimited(1, "__name__") + LengthDelimited(2, "m");
  std::string sample = Varint((1 << 3) | 1) + std::string(8, '\0') + Varint(2 << 3) +
                       Varint(static_cast<uint64_t>(kT0)) + Varint((9 << 3) | 5) +
                       std::string(4, 'x');
  std::string series = LengthDelimited(1, label) + LengthDelimited(2, sample) +
                       LengthDelimited(3, "exemplar-bytes") + Varint(15 << 3) + Varint(300);
  std::string proto = LengthDelimited(3, "metadata") + LengthDelimited(1, series);
  Result<WriteRequest> r = ParseWriteRequestProto(proto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->timeseries.size(), 1u);
  EXPECT_EQ(r->timeseries[0].samples[0], (RemoteSample{0.0, kT0}));
}

TEST(RemoteWriteTest, SnappyFailuresAndLimitsAreReported) {
  Result<WriteRequest> not_snappy = DecodeWriteRequest("");
  ASSERT_FALSE(not_snappy.ok());
  EXPECT_THAT(not_snappy.status().message(), HasSubstr("not snappy"));

  // A header that promises 2 GiB is refused before anything is allocated.
  std::string huge = Varint(uint64_t{1} << 31) + "abc";
  Result<WriteRequest> big = DecodeWriteRequest(huge);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("over the limit"));

  std::string body = EncodeWriteRequest(SampleRequest());
  DecodeOptions small;
  small.max_compressed_bytes = body.size() - 1;
  Result<WriteRequest> too_long = DecodeWriteRequest(body, small);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kResourceExhausted);

  DecodeOptions tight;
  tight.max_uncompressed_bytes = 10;
  EXPECT_EQ(DecodeWriteRequest(body, tight).status().code(), StatusCode::kResourceExhausted);

  std::string corrupt = body.substr(0, body.size() / 2);
  Result<WriteRequest> cut = DecodeWriteRequest(corrupt);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("corrupt snappy"));
}

struct ProtoCase {
  std::string name;
  std::string proto;
  std::string message;
};

TEST(RemoteWriteTest, InvalidProtobufIsReportedWithItsPath) {
  std::string label = LengthDelimited(1, "__name__") + LengthDelimited(2, "m");
  std::string series = LengthDelimited(1, label);
  const std::vector<ProtoCase> cases = {
      {"truncated tag", "\x8a", "WriteRequest: truncated or overlong field tag at byte 0"},
      {"length past the end", Varint((1 << 3) | 2) + Varint(100) + "abc",
       "timeseries[0]: truncated"},
      {"field number 0", Varint(0 << 3), "invalid field number"},
      {"group wire type", Varint((5 << 3) | 3), "wire type 3 (start-group)"},
      {"invalid wire type", Varint((5 << 3) | 7), "wire type 7 (invalid)"},
      {"timeseries as varint", Varint(1 << 3) + Varint(5),
       "timeseries[0]: field 1 has wire type 0 (varint), want 2 (length-delimited)"},
      {"overlong varint", Varint((7 << 3) | 0) + std::string(10, '\xff') + "\x01",
       "WriteRequest: field 7 is truncated or malformed"},
      {"sample value as varint",
       LengthDelimited(1,
                       LengthDelimited(1, label) + LengthDelimited(2, Varint(1 << 3) + Varint(1))),
       "timeseries[0].samples[0]: field 1 has wire type 0 (varint), want 1 (fixed64)"},
      {"sample value truncated",
       LengthDelimited(
           1, LengthDelimited(1, label) + LengthDelimited(2, Varint((1 << 3) | 1) + "1234")),
       "timeseries[0].samples[0].value: truncated"},
      {"label as fixed64", LengthDelimited(1, Varint((1 << 3) | 1) + std::string(8, 'x')),
       "timeseries[0].labels[0]: field 1 has wire type 1"},
      {"second series broken", LengthDelimited(1, series) + LengthDelimited(1, "\xff"),
       "timeseries[1]: truncated or overlong field tag"},
  };
  for (const ProtoCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<WriteRequest> r = ParseWriteRequestProto(c.proto);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(RemoteWriteTest, SpecViolationsAreNamedBySeriesAndLabel) {
  auto decode = [](const WriteRequest& req, DecodeOptions o = {}) {
    return DecodeWriteRequest(EncodeWriteRequest(req), o);
  };
  WriteRequest req;
  for (int i = 0; i < 3; ++i) req.timeseries.push_back(Series("ok", {{"i", "x"}}, {{1, kT0}}));
  req.timeseries.push_back(Series("m", {{"a", "\xc3\x28"}}, {{1, kT0}}));
  EXPECT_EQ(decode(req).status().message(),
            "timeseries[3].labels[1].value: invalid UTF-8 (label a)");

  WriteRequest bad_name;
  bad_name.timeseries.push_back(Series("m", {{"a-b", "x"}}, {}));
  EXPECT_THAT(decode(bad_name).status().message(),
              HasSubstr("timeseries[0].labels[1].name: invalid label name \"a-b\""));
  WriteRequest binary_name;
  binary_name.timeseries.push_back(Series("m", {{"\xff\xfe", "x"}}, {}));
  EXPECT_THAT(decode(binary_name).status().message(), HasSubstr("<invalid UTF-8>"));

  WriteRequest no_name;
  no_name.timeseries.push_back({{{"job", "x"}}, {{1, kT0}}});
  EXPECT_EQ(decode(no_name).status().message(), "timeseries[0]: no __name__ label");
  WriteRequest digit_name;
  digit_name.timeseries.push_back(Series("9m", {}, {}));
  EXPECT_THAT(decode(digit_name).status().message(), HasSubstr("is not a valid metric name"));

  WriteRequest dup;
  dup.timeseries.push_back(Series("m", {{"a", "1"}, {"a", "2"}}, {}));
  EXPECT_EQ(decode(dup).status().message(), "timeseries[0]: label a appears twice");

  WriteRequest absurd;
  absurd.timeseries.push_back(
      Series("m", {}, {{1, kT0}, {1, std::numeric_limits<int64_t>::max()}}));
  EXPECT_THAT(decode(absurd).status().message(),
              HasSubstr("timeseries[0] (m).samples[1].timestamp: 9223372036854775807 ms is "
                        "outside the accepted window"));
  WriteRequest negative;
  negative.timeseries.push_back(Series("m", {}, {{1, -1}}));
  EXPECT_THAT(decode(negative).status().message(), HasSubstr("samples[0].timestamp: -1 ms"));
  DecodeOptions wide;
  wide.min_timestamp_ms = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(decode(negative, wide).ok());
}

TEST(RemoteWriteTest, NonFiniteValuesAreKeptUnlessRefused) {
  WriteRequest req;
  req.timeseries.push_back(Series("m", {}, {{std::nan(""), kT0}}));
  req.timeseries.push_back(
      Series("n", {}, {{1, kT0}, {-std::numeric_limits<double>::infinity(), kT0}}));
  req.timeseries.push_back(Series("s", {}, {{StaleMarker(), kT0}}));
  ASSERT_TRUE(DecodeWriteRequest(EncodeWriteRequest(req)).ok());
  DecodeOptions strict;
  strict.reject_non_finite = true;
  EXPECT_EQ(DecodeWriteRequest(EncodeWriteRequest(req), strict).status().message(),
            "timeseries[0] (m).samples[0].value: NaN is not finite");
  req.timeseries.erase(req.timeseries.begin());
  EXPECT_EQ(DecodeWriteRequest(EncodeWriteRequest(req), strict).status().message(),
            "timeseries[0] (n).samples[1].value: Inf is not finite");
  req.timeseries.erase(req.timeseries.begin());
  EXPECT_EQ(DecodeWriteRequest(EncodeWriteRequest(req), strict).status().message(),
            "timeseries[0] (s).samples[0].value: stale marker is not finite");
}

TEST(RemoteWriteTest, RandomAndMutatedInputsNeverCrash) {
  std::mt19937 rng(42);
  std::string valid = EncodeWriteRequestProto(SampleRequest());
  size_t failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = valid;
    int flips = std::uniform_int_distribution<int>(1, 8)(rng);
    for (int f = 0; f < flips; ++f) {
      size_t at = std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng);
      bytes[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    }
    if (i % 3 == 0) bytes.resize(std::uniform_int_distribution<size_t>(0, bytes.size())(rng));
    Result<WriteRequest> proto = ParseWriteRequestProto(bytes);
    Result<WriteRequest> snappy = DecodeWriteRequest(bytes);
    if (!proto.ok()) {
      ++failures;
      EXPECT_FALSE(proto.status().message().empty());
    }
    EXPECT_FALSE(snappy.ok() && bytes.empty());
  }
  EXPECT_GT(failures, 100u);  // the mutations do reach the error paths
}

#ifdef GPULEDGER_HAVE_PROTOBUF
// libprotobuf is an independent implementation of the same schema: our encoder's bytes
// parse there, and its bytes decode here, to the same request.
TEST(RemoteWriteProtobufTest, HandCodecAgreesWithLibprotobuf) {
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 50; ++round) {
    WriteRequest req;
    int n_series = std::uniform_int_distribution<int>(0, 6)(rng);
    for (int i = 0; i < n_series; ++i) {
      TimeSeries ts;
      ts.labels.push_back({"__name__", "m" + std::to_string(i)});
      int n_labels = std::uniform_int_distribution<int>(0, 5)(rng);
      for (int j = 0; j < n_labels; ++j) {
        ts.labels.push_back({"l" + std::to_string(j), std::string(rng() % 200 + 1, 'v')});
      }
      int n_samples = std::uniform_int_distribution<int>(0, 5)(rng);
      for (int k = 0; k < n_samples; ++k) {
        double v = std::bit_cast<double>(rng());
        if (std::isnan(v)) v = 0.25;  // libprotobuf may canonicalize NaN payloads
        ts.samples.push_back({v, static_cast<int64_t>(rng() % 7258118400000)});
      }
      req.timeseries.push_back(std::move(ts));
    }
    // Ours -> libprotobuf.
    gpuledger::prometheus::pb::WriteRequest pbreq;
    ASSERT_TRUE(pbreq.ParseFromString(EncodeWriteRequestProto(req)));
    ASSERT_EQ(pbreq.timeseries_size(), static_cast<int>(req.timeseries.size()));
    for (int i = 0; i < pbreq.timeseries_size(); ++i) {
      const auto& pts = pbreq.timeseries(i);
      const TimeSeries& ts = req.timeseries[static_cast<size_t>(i)];
      ASSERT_EQ(pts.labels_size(), static_cast<int>(ts.labels.size()));
      for (int j = 0; j < pts.labels_size(); ++j) {
        EXPECT_EQ(pts.labels(j).name(), ts.labels[static_cast<size_t>(j)].name);
        EXPECT_EQ(pts.labels(j).value(), ts.labels[static_cast<size_t>(j)].value);
      }
      ASSERT_EQ(pts.samples_size(), static_cast<int>(ts.samples.size()));
      for (int k = 0; k < pts.samples_size(); ++k) {
        EXPECT_EQ(std::bit_cast<uint64_t>(pts.samples(k).value()),
                  std::bit_cast<uint64_t>(ts.samples[static_cast<size_t>(k)].value));
        EXPECT_EQ(pts.samples(k).timestamp(), ts.samples[static_cast<size_t>(k)].timestamp_ms);
      }
    }
    // libprotobuf -> ours (it omits zero-valued fields; we must read them as zero).
    std::string bytes;
    ASSERT_TRUE(pbreq.SerializeToString(&bytes));
    Result<WriteRequest> back = ParseWriteRequestProto(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, req);
  }
}

TEST(RemoteWriteProtobufTest, ZeroValuedSamplesFromLibprotobufDecode) {
  gpuledger::prometheus::pb::WriteRequest pbreq;
  auto* ts = pbreq.add_timeseries();
  auto* l = ts->add_labels();
  l->set_name("__name__");
  l->set_value("m");
  ts->add_samples();  // value 0, timestamp 0: both omitted on the wire
  std::string bytes;
  ASSERT_TRUE(pbreq.SerializeToString(&bytes));
  Result<WriteRequest> r = ParseWriteRequestProto(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->timeseries[0].samples.at(0), (RemoteSample{0, 0}));
}
#endif

}  // namespace
}  // namespace gpuledger::prometheus
