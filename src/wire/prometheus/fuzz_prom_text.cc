// libFuzzer target for the text exposition parser (built with -DGPULEDGER_FUZZ=ON and
// clang; scripts/fuzz.sh runs it). Beyond "no crash, no sanitizer report" it checks:
// - a chunked parse (split at a fuzzer-chosen point) equals the whole parse;
// - whatever parses strictly, written back by WriteFamilies, parses to the same shape;
// - the dcgm-exporter mapping (with label rules) takes any parsed input without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/prometheus/dcgm_mapping.h"
#include "wire/prometheus/prom_text.h"

namespace gp = gpuledger::prometheus;

namespace {

size_t SampleCount(const std::vector<gp::Family>& families) {
  size_t n = 0;
  for (const gp::Family& f : families) n += f.samples.size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gp::TextParseOptions strict;
  gp::TextParseOptions lenient;
  lenient.mode = gp::ParseMode::kLenient;
  lenient.max_line_bytes = 256;

  gpuledger::Result<gp::ParsedText> whole = gp::ParseText(text, strict);
  (void)gp::ParseText(text, lenient);

  size_t split = size == 0 ? 0 : data[0] % (size + 1);
  std::vector<gp::Family> chunked;
  gp::TextParser parser(strict, [&chunked](gp::Family&& f) {
    chunked.push_back(std::move(f));
    return gpuledger::Status::Ok();
  });
  gpuledger::Status st = parser.Feed(text.substr(0, split));
  if (st.ok()) st = parser.Feed(text.substr(split));
  if (st.ok()) st = parser.Finish();
  if (st.ok() != whole.ok()) __builtin_trap();
  if (!whole.ok()) return 0;
  if (chunked.size() != whole->families.size() || SampleCount(chunked) != whole->stats.samples) {
    __builtin_trap();
  }

  gpuledger::Result<std::string> written = gp::WriteFamilies(whole->families);
  if (!written.ok()) __builtin_trap();  // everything parsed must be writable
  gpuledger::Result<gp::ParsedText> again = gp::ParseText(*written, strict);
  if (!again.ok() || again->families.size() != whole->families.size() ||
      again->stats.samples != whole->stats.samples) {
    __builtin_trap();
  }
  for (const gp::Family& f : whole->families) {
    if (f.type == gp::MetricType::kHistogram) (void)gp::GroupHistogram(f);
    if (f.type == gp::MetricType::kSummary) (void)gp::GroupSummary(f);
  }
  static const gp::DcgmMapper* const mapper = [] {
    gp::DcgmMappingConfig config;
    config.rules = {{"namespace", gp::LabelRule::Match::kRegex, "team-(.*)", "$1", "p"}};
    auto m = gp::DcgmMapper::Create(std::move(config));
    if (!m.ok()) __builtin_trap();
    return new gp::DcgmMapper(std::move(m).value());
  }();
  (void)mapper->MapScrape(whole->families, 1764489600000);
  return 0;
}
