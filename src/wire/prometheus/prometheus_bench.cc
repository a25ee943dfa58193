// Throughput of the Prometheus formats: text parse (real vLLM capture and a synthetic
// 8-GPU dcgm-exporter scrape), remote-write decode (snappy + hand-written protobuf
// decoder, against libprotobuf's generated parser where available) and the DCGM mapping.
// Run a Release build: build/release/.../prometheus_bench
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>

#include "wire/prometheus/dcgm_mapping.h"
#include "wire/prometheus/prom_text.h"
#include "wire/prometheus/remote_write.h"

#ifdef GPULEDGER_HAVE_PROTOBUF
#include "remote_write.pb.h"
#endif

namespace gp = gpuledger::prometheus;

namespace {

constexpr int64_t kT0 = 1764489600000;

std::string ReadShared(const std::string& relative) {
  std::ifstream in(std::string(GPULEDGER_SHARED_DATA_DIR) + "/" + relative, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A dcgm-exporter scrape of `gpus` GPUs with the exporter's usual labels and families.
std::string SyntheticDcgmScrape(int gpus) {
  static const char* const kFamilies[] = {"DCGM_FI_DEV_SM_CLOCK",
                                          "DCGM_FI_DEV_MEM_CLOCK",
                                          "DCGM_FI_DEV_GPU_TEMP",
                                          "DCGM_FI_DEV_POWER_USAGE",
                                          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                                          "DCGM_FI_DEV_GPU_UTIL",
                                          "DCGM_FI_DEV_MEM_COPY_UTIL",
                                          "DCGM_FI_DEV_FB_FREE",
                                          "DCGM_FI_DEV_FB_USED",
                                          "DCGM_FI_DEV_FB_RESERVED",
                                          "DCGM_FI_DEV_XID_ERRORS",
                                          "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                                          "DCGM_FI_PROF_SM_ACTIVE",
                                          "DCGM_FI_PROF_SM_OCCUPANCY",
                                          "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                                          "DCGM_FI_PROF_DRAM_ACTIVE",
                                          "DCGM_FI_PROF_PCIE_TX_BYTES",
                                          "DCGM_FI_PROF_PCIE_RX_BYTES"};
  std::string out;
  for (const char* family : kFamilies) {
    out += fmt::format("# HELP {} Field {}.\n# TYPE {} gauge\n", family, family, family);
    for (int g = 0; g < gpus; ++g) {
      out += fmt::format(
          "{}{{gpu=\"{}\",UUID=\"GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc{:02d}\","
          "pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{}\",modelName=\"NVIDIA H200\","
          "Hostname=\"gpu-node-017\",DCGM_FI_DRIVER_VERSION=\"570.124.06\",container=\"trainer\","
          "namespace=\"ml-research\",pod=\"llama-ft-{}\"}} {}\n",
          family, g, g, 0x18 + g, g, g, 0.125 * (g % 8));
    }
  }
  return out;
}

gp::WriteRequest SyntheticRequest(int series) {
  gp::WriteRequest req;
  for (int i = 0; i < series; ++i) {
    gp::TimeSeries ts;
    ts.labels = {{"DCGM_FI_DRIVER_VERSION", "570.124.06"},
                 {"Hostname", fmt::format("gpu-node-{:03d}", i / 144)},
                 {"UUID", fmt::format("GPU-5b4e07f6-3a86-4340-039d-{:012d}", i / 18)},
                 {"__name__", i % 2 == 0 ? "DCGM_FI_PROF_SM_ACTIVE" : "DCGM_FI_DEV_GPU_UTIL"},
                 {"container", "trainer"},
                 {"gpu", std::to_string(i / 18 % 8)},
                 {"instance", "10.0.3.17:9400"},
                 {"job", "dcgm-exporter"},
                 {"modelName", "NVIDIA H200"},
                 {"namespace", "ml-research"},
                 {"pod", fmt::format("llama-ft-{}", i / 144)}};
    ts.samples = {{0.5, kT0 + i % 18}};
    req.timeseries.push_back(std::move(ts));
  }
  return req;
}

void ParseTextBench(benchmark::State& state, const std::string& text) {
  size_t samples = 0;
  for (auto _ : state) {
    auto r = gp::ParseText(text);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    samples = r->stats.samples;
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(samples));
}

void BM_ParseText_Vllm(benchmark::State& state) {
  static const std::string text = ReadShared("telemetry/vllm/vllm_v1_idle.prom");
  if (text.empty()) {
    state.SkipWithError("no shared data");
    return;
  }
  ParseTextBench(state, text);
}
BENCHMARK(BM_ParseText_Vllm);

void BM_ParseText_Dcgm8Gpu(benchmark::State& state) {
  static const std::string text = SyntheticDcgmScrape(8);
  ParseTextBench(state, text);
}
BENCHMARK(BM_ParseText_Dcgm8Gpu);

void BM_WriteText_Dcgm8Gpu(benchmark::State& state) {
  static const std::vector<gp::Family> families = gp::ParseText(SyntheticDcgmScrape(8))->families;
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = gp::WriteFamilies(families);
    bytes = out->size();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_WriteText_Dcgm8Gpu);

// The full remote-write path: snappy + protobuf + validation, into our structs.
void BM_DecodeRemoteWrite(benchmark::State& state) {
  gp::WriteRequest req = SyntheticRequest(static_cast<int>(state.range(0)));
  std::string proto = gp::EncodeWriteRequestProto(req);
  std::string body = gp::SnappyCompress(proto);
  for (auto _ : state) {
    auto r = gp::DecodeWriteRequest(body);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(proto.size()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["compressed_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_DecodeRemoteWrite)->Arg(1000)->Arg(20000);

void BM_SnappyUncompressOnly(benchmark::State& state) {
  std::string proto = gp::EncodeWriteRequestProto(SyntheticRequest(20000));
  std::string body = gp::SnappyCompress(proto);
  for (auto _ : state) {
    auto r = gp::SnappyUncompress(body, body.size(), proto.size());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(proto.size()));
}
BENCHMARK(BM_SnappyUncompressOnly);

// Protobuf only: the hand decoder (with its validation) ...
void BM_ParseProto_Hand(benchmark::State& state) {
  std::string proto = gp::EncodeWriteRequestProto(SyntheticRequest(20000));
  for (auto _ : state) {
    auto r = gp::ParseWriteRequestProto(proto);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(proto.size()));
  state.SetItemsProcessed(state.iterations() * 20000);
}
BENCHMARK(BM_ParseProto_Hand);

#ifdef GPULEDGER_HAVE_PROTOBUF
// ... against libprotobuf's generated parser, without any validation or conversion.
void BM_ParseProto_Libprotobuf(benchmark::State& state) {
  std::string proto = gp::EncodeWriteRequestProto(SyntheticRequest(20000));
  for (auto _ : state) {
    gpuledger::prometheus::pb::WriteRequest req;
    bool ok = req.ParseFromString(proto);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(req);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(proto.size()));
  state.SetItemsProcessed(state.iterations() * 20000);
}
BENCHMARK(BM_ParseProto_Libprotobuf);
#endif

void BM_MapWriteRequest(benchmark::State& state) {
  gp::WriteRequest req = SyntheticRequest(20000);
  auto mapper = gp::DcgmMapper::Create({});
  for (auto _ : state) {
    auto r = mapper->MapWriteRequest(req);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 20000);
}
BENCHMARK(BM_MapWriteRequest);

}  // namespace

BENCHMARK_MAIN();
