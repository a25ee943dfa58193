// The FOCUS 1.2 export: a small fleet's file line by line against a hand-checked golden
// file (src/report/testdata/focus/), and every rule of the spec that applies checked on
// the demo's fleet, whose costs must add up to its chargeback's total by another road.
#include "report/focus.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "demo/demo_fleet.h"
#include "store/store.h"

namespace gpuledger::report {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kBase = 1'795'392'000'000;  // Monday 2026-11-23T00:00:00Z
constexpr int64_t kMin = kMsPerMinute;

// A ledger on a fresh SQLite file in a temporary folder.
class TempStore {
 public:
  explicit TempStore(int64_t now_ms) : clock_(now_ms) {
    static int n = 0;
    path_ = fs::temp_directory_path() / fmt::format("gpuledger-focus-{}-{}.db", ::getpid(), n++);
    fs::remove(path_);
    auto store = store::OpenSqliteStore(path_.string());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    ledger_ = std::make_unique<ledger::Ledger>(std::move(*store), clock_);
  }
  ~TempStore() {
    ledger_.reset();
    for (const char* s : {"", "-wal", "-shm"}) fs::remove(path_.string() + s);
  }
  ledger::Ledger& ledger() { return *ledger_; }

 private:
  fs::path path_;
  ManualClock clock_;
  std::unique_ptr<ledger::Ledger> ledger_;
};

// RFC 4180 records (quoted fields may hold commas, quotes and line breaks).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(std::move(field));
      field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// A plain decimal as an exact count of 1e-12: "1.5" -> 1'500'000'000'000.
CostNumerator Pico(const std::string& text) {
  static const std::regex kDecimal(R"(-?[0-9]+(\.[0-9]{1,12})?)");
  EXPECT_TRUE(std::regex_match(text, kDecimal)) << "not a plain decimal: \"" << text << "\"";
  bool negative = !text.empty() && text[0] == '-';
  std::string t = negative ? text.substr(1) : text;
  auto dot = t.find('.');
  std::string whole = t.substr(0, dot), frac = dot == std::string::npos ? "" : t.substr(dot + 1);
  frac.resize(12, '0');
  CostNumerator v = 0;
  for (char c : whole + frac) v = v * 10 + (c - '0');
  return negative ? -v : v;
}

// Every rule of FOCUS 1.2 that applies to gpuledger's rows, checked on each row of `csv`
// (docs/focus.md lists them). Returns the rows as column -> value maps.
std::vector<std::map<std::string, std::string>> CheckFocusRules(const std::string& csv) {
  auto records = ParseCsv(csv);
  EXPECT_FALSE(records.empty());
  if (records.empty()) return {};
  const std::vector<std::string>& header = records[0];
  // The 21 mandatory columns, each once; custom ones after every FOCUS column, x_-prefixed.
  const std::vector<std::string> mandatory = {
      "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
      "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
      "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
      "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName"};
  for (const auto& m : mandatory) EXPECT_EQ(std::count(header.begin(), header.end(), m), 1) << m;
  bool custom_seen = false;
  static const std::regex kPascal("[A-Z][A-Za-z]*");
  for (const auto& h : header) {
    if (h.rfind("x_", 0) == 0) {
      custom_seen = true;
    } else {
      EXPECT_FALSE(custom_seen) << h << " comes after a custom column";
      EXPECT_TRUE(std::regex_match(h, kPascal)) << h;
    }
  }
  static const std::regex kInstant(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)");
  const std::set<std::string> categories = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"};
  std::vector<std::map<std::string, std::string>> out;
  for (size_t i = 1; i < records.size(); ++i) {
    const std::string where = fmt::format("row {}", i);
    EXPECT_EQ(records[i].size(), header.size()) << where;
    std::map<std::string, std::string> r;
    for (size_t c = 0; c < header.size() && c < records[i].size(); ++c) r[header[c]] = records[i][c];
    for (const char* not_null : {"BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
                                 "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeDescription",
                                 "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost",
                                 "InvoiceIssuerName", "ListCost", "ProviderName", "PublisherName", "ServiceCategory",
                                 "ServiceName"}) {
      EXPECT_FALSE(r[not_null].empty()) << where << ": " << not_null << " is null";
    }
    EXPECT_TRUE(Currency::IsIso4217Code(r["BillingCurrency"])) << where << ": " << r["BillingCurrency"];
    EXPECT_TRUE(categories.count(r["ChargeCategory"])) << where << ": " << r["ChargeCategory"];
    EXPECT_TRUE(r["ChargeClass"].empty() || r["ChargeClass"] == "Correction") << where;
    EXPECT_EQ(r["ServiceCategory"], "AI and Machine Learning") << where;
    for (const char* t : {"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"}) {
      EXPECT_TRUE(std::regex_match(r[t], kInstant)) << where << ": " << t << " " << r[t];
    }
    EXPECT_LT(r["BillingPeriodStart"], r["BillingPeriodEnd"]) << where;
    EXPECT_LT(r["ChargePeriodStart"], r["ChargePeriodEnd"]) << where;
    const bool correction = r["ChargeClass"] == "Correction";
    const bool usage = r["ChargeCategory"] == "Usage";
    if (!correction) {
      // A period's own charges fall within it; a correction may be for an earlier one.
      EXPECT_GE(r["ChargePeriodStart"], r["BillingPeriodStart"]) << where;
      EXPECT_LE(r["ChargePeriodEnd"], r["BillingPeriodEnd"]) << where;
    }
    for (const char* money : {"BilledCost", "EffectiveCost", "ListCost", "ContractedCost"}) Pico(r[money]);
    if (!correction) {
      for (const char* money : {"BilledCost", "EffectiveCost", "ListCost", "ContractedCost"}) {
        EXPECT_GE(Pico(r[money]), 0) << where << ": " << money;
      }
    }
    // Pricing: quantity and unit together; for usage that is not a correction, present,
    // with unit prices that multiply out to the list and contracted costs exactly.
    EXPECT_EQ(r["PricingQuantity"].empty(), r["PricingUnit"].empty()) << where;
    EXPECT_EQ(r["ConsumedQuantity"].empty(), r["ConsumedUnit"].empty()) << where;
    if (usage && !correction) {
      EXPECT_FALSE(r["PricingQuantity"].empty()) << where;
      EXPECT_FALSE(r["ListUnitPrice"].empty()) << where;
      EXPECT_FALSE(r["ContractedUnitPrice"].empty()) << where;
      EXPECT_FALSE(r["ConsumedQuantity"].empty()) << where;
      EXPECT_GT(Pico(r["ConsumedQuantity"]), 0) << where;
      EXPECT_FALSE(r["SkuId"].empty()) << where;
    }
    if (!r["ListUnitPrice"].empty()) {
      EXPECT_GE(Pico(r["ListUnitPrice"]), 0) << where;
      EXPECT_EQ(Pico(r["ListUnitPrice"]) * Pico(r["PricingQuantity"]), Pico(r["ListCost"]) * 1'000'000'000'000LL)
          << where << ": ListCost " << r["ListCost"] << " != " << r["ListUnitPrice"] << " x " << r["PricingQuantity"];
    }
    if (!r["ContractedUnitPrice"].empty()) {
      EXPECT_EQ(Pico(r["ContractedUnitPrice"]) * Pico(r["PricingQuantity"]),
                Pico(r["ContractedCost"]) * 1'000'000'000'000LL)
          << where;
    }
    if (!r["SkuPriceId"].empty()) {
      EXPECT_FALSE(r["SkuId"].empty()) << where;
    }
    if (r["ResourceId"].empty()) {
      EXPECT_TRUE(r["ResourceType"].empty()) << where;
    }
    EXPECT_EQ(r["SubAccountId"].empty(), r["SubAccountName"].empty()) << where;
    if (!r["Tags"].empty()) {
      auto tags = nlohmann::json::parse(r["Tags"], nullptr, false);
      EXPECT_TRUE(tags.is_object()) << where << ": Tags " << r["Tags"];
    }
    out.push_back(std::move(r));
  }
  return out;
}

// One line of `text` after another, with the golden file's line number on a mismatch.
void ExpectLines(const std::string& got, const fs::path& golden) {
  std::ifstream in(golden);
  ASSERT_TRUE(in) << golden;
  std::stringstream want_text;
  want_text << in.rdbuf();
  std::istringstream g(got), w(want_text.str());
  std::string gl, wl;
  int n = 0;
  while (true) {
    bool more_g = static_cast<bool>(std::getline(g, gl)), more_w = static_cast<bool>(std::getline(w, wl));
    ++n;
    if (!more_g && !more_w) break;
    EXPECT_EQ(more_g ? gl : "(end of export)", more_w ? wl : "(end of golden file)")
        << golden.filename().string() << ":" << n;
  }
}

fs::path Golden(const std::string& name) { return fs::path(GPULEDGER_SOURCE_DIR) / "src/report/testdata/focus" / name; }

Sample At(const std::string& device, int64_t t, double sm_active) {
  Sample s;
  s.device_uuid = device;
  s.t_ms = t;
  s.sm_active = sm_active;
  return s;
}

// The small fleet of the golden files (testdata/focus/README.md says what each line is).
Batch SmallFleet() {
  Batch b;
  b.batch_id = "small-fleet";
  b.devices.push_back(Device{.uuid = "GPU-A", .node = "n1", .model = "NVIDIA-H200", .pool = "train",
                             .sample_interval_ms = kMin});
  b.devices.push_back(Device{.uuid = "GPU-B", .node = "n1", .model = "NVIDIA-H200", .pool = "dev",
                             .sample_interval_ms = kMin});
  b.devices.push_back(Device{.uuid = "MIG-B1", .node = "n1", .model = "NVIDIA-H200", .pool = "dev",
                             .parent_uuid = "GPU-B", .share = *ParseShare("3/7"), .mig_profile = "3g.71gb",
                             .sample_interval_ms = kMin});
  b.devices.push_back(Device{.uuid = "GPU-C", .node = "n2", .model = "NVIDIA-L4", .pool = "dev",
                             .sample_interval_ms = kMin});
  b.jobs.push_back(Job{.id = "j1", .team = "vision", .project = "detect", .experiment = "e1",
                       .kind = JobKind::kTraining});
  b.jobs.push_back(Job{.id = "nb-ana", .team = "nlp", .project = "chat", .user = "ana", .kind = JobKind::kNotebook});
  b.allocations.push_back({"GPU-A", "j1", kBase, kBase + 90 * kMin});
  b.allocations.push_back({"MIG-B1", "nb-ana", kBase, std::nullopt});
  for (int64_t t = kBase; t <= kBase + 120 * kMin; t += kMin) {
    b.samples.push_back(At("GPU-A", t, 0.5));
    b.samples.push_back(At("GPU-B", t, 0));
    b.samples.push_back(At("MIG-B1", t, 0));
    b.samples.push_back(At("GPU-C", t, 0));
  }
  return b;
}

PriceBook SmallFleetPrices() {
  const int64_t one = kBase + kMsPerHour;
  return *PriceBook::Create({
      PriceEntry{"NVIDIA-H200", "*", CapacityType::kOnDemand, *Money::Parse("3.00"), {0, one}},
      PriceEntry{"NVIDIA-H200", "*", CapacityType::kOnDemand, *Money::Parse("4.00"), {one, kForever}},
      PriceEntry{"NVIDIA-H200", "dev", CapacityType::kOnDemand, *Money::Parse("7.00"), {0, kForever}},
  });
}

Money SumBilled(const std::vector<std::map<std::string, std::string>>& rows) {
  CostNumerator pico = 0;
  for (const auto& r : rows) pico += Pico(r.at("BilledCost"));
  return Money::FromMicros(static_cast<int64_t>(pico / 1'000'000));
}

TEST(FocusExportTest, SmallFleetMatchesTheGoldenFileLineByLine) {
  TempStore t(kBase + 20 * kMsPerDay);
  ASSERT_TRUE(t.ledger().SetPrices(SmallFleetPrices()).ok());
  ASSERT_TRUE(t.ledger().Ingest(SmallFleet()).ok());
  auto november = *ParseMonth("2026-11");
  auto e = ledger::FocusLines(t.ledger(), november, ledger::Scope::All());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const std::string csv = RenderFocusCsv(*e);
  ExpectLines(csv, Golden("small_fleet_2026-11.csv"));
  auto rows = CheckFocusRules(csv);
  auto cb = t.ledger().Chargeback(november, false);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(SumBilled(rows), cb->total);
  EXPECT_EQ(e->total, cb->total);
}

// A closed month changed later: December books the change as a correction of November,
// and November's own export, as frozen, says what its live figures differ by.
TEST(FocusExportTest, CorrectionsOfAClosedMonthAreTheirOwnRows) {
  TempStore t(kBase + 20 * kMsPerDay);
  ASSERT_TRUE(t.ledger().SetPrices(SmallFleetPrices()).ok());
  ASSERT_TRUE(t.ledger().Ingest(SmallFleet()).ok());
  ASSERT_TRUE(t.ledger().ClosePeriod("2026-11", "finance").ok());
  Batch late;
  late.batch_id = "late";
  for (int64_t t_ms = kBase + 121 * kMin; t_ms <= kBase + 180 * kMin; t_ms += kMin) {
    late.samples.push_back(At("GPU-A", t_ms, 0));
  }
  auto applied = t.ledger().Ingest(late);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();

  auto december = *ParseMonth("2026-12");
  auto dec = ledger::FocusLines(t.ledger(), december, ledger::Scope::All());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const std::string csv = RenderFocusCsv(*dec);
  ExpectLines(csv, Golden("corrections_2026-12.csv"));
  auto rows = CheckFocusRules(csv);
  EXPECT_EQ(SumBilled(rows), t.ledger().Chargeback(december, false)->total);

  auto november = *ParseMonth("2026-11");
  auto nov = ledger::FocusLines(t.ledger(), november, ledger::Scope::All());
  ASSERT_TRUE(nov.ok()) << nov.status().ToString();
  auto nov_rows = CheckFocusRules(RenderFocusCsv(*nov));
  EXPECT_EQ(SumBilled(nov_rows), t.ledger().Chargeback(november, false)->total);  // as frozen
  // The hour that came late, GPU-A unallocated at 4.00 and the rest of the fleet silent
  // (GPU-B and its slice at 7.00: 4/7 + 3/7), taken back out of the month as it stands.
  std::map<std::string, std::string> corrections;
  for (const auto& r : nov_rows) {
    if (r.at("ChargeClass") == "Correction") corrections[r.at("x_Bucket")] = r.at("BilledCost");
  }
  EXPECT_EQ(corrections, (std::map<std::string, std::string>{{"unallocated", "-4.000000"}, {"unmonitored", "-7.000000"}}));
}

// A viewer sees its teams' rows: no capacity rows, no other team's.
TEST(FocusExportTest, AViewerSeesItsTeamsRowsOnly) {
  TempStore t(kBase + 20 * kMsPerDay);
  ASSERT_TRUE(t.ledger().SetPrices(SmallFleetPrices()).ok());
  ASSERT_TRUE(t.ledger().Ingest(SmallFleet()).ok());
  auto e = ledger::FocusLines(t.ledger(), *ParseMonth("2026-11"), ledger::Scope::Teams({"nlp"}));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_FALSE(e->lines.empty());
  for (const auto& l : e->lines) {
    EXPECT_EQ(l.team, "nlp") << l.description;
    EXPECT_TRUE(l.job.has_value()) << l.description;
  }
}

// The demo fleet over five days, sampled every 5 minutes as demo_fleet_test does: every
// applicable rule on every row, costs adding up to the chargeback's total and, team by team, to the usage report's rows (another road: no
// export code), unallocated and idle capacity on rows of their own.
TEST(FocusExportTest, DemoFleetFollowsTheSpecAndAddsUpToTheChargeback) {
  demo::DemoOptions o;
  o.seed = 7;
  o.start_ms = kBase;
  o.duration_ms = 5 * kMsPerDay;  // the demo's outages and unmonitored spans fall in these days
  o.sample_interval_ms = 5 * kMin;
  demo::DemoFleet fleet(o);
  TempStore t(kBase + 10 * kMsPerDay);
  ASSERT_TRUE(t.ledger().SetPrices(fleet.Prices()).ok());
  for (const Batch& b : fleet.Advance(fleet.end_ms())) {
    auto r = t.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto november = *ParseMonth("2026-11");
  auto e = ledger::FocusLines(t.ledger(), november, ledger::Scope::All());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const std::string csv = RenderFocusCsv(*e);
  auto rows = CheckFocusRules(csv);
  ASSERT_GT(rows.size(), 1000u);

  auto cb = t.ledger().Chargeback(november, false);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(SumBilled(rows), cb->total);
  auto by_node = t.ledger().Usage(november, {ledger::Dimension::kNode});
  ASSERT_TRUE(by_node.ok());
  Money usage_total;
  for (const auto& r : by_node->rows) usage_total += r.total_cost();
  EXPECT_EQ(SumBilled(rows), usage_total);

  auto by_team = t.ledger().Usage(november, {ledger::Dimension::kTeam});
  ASSERT_TRUE(by_team.ok());
  std::map<std::string, CostNumerator> exported;
  std::map<std::string, int> buckets;
  for (const auto& r : rows) {
    exported[r.at("SubAccountId")] += Pico(r.at("BilledCost"));
    buckets[r.at("x_Bucket")]++;
    EXPECT_TRUE(r.at("ChargeClass").empty()) << "no closed month, no correction";
  }
  for (const auto& row : by_team->rows) {
    const std::string team = row.no_job ? "" : row.key[0];
    EXPECT_EQ(Money::FromMicros(static_cast<int64_t>(exported[team] / 1'000'000)), row.total_cost()) << team;
  }
  for (const char* b : {"active", "allocated_idle", "unallocated", "unavailable", "unmonitored"}) {
    EXPECT_GT(buckets[b], 0) << b;
  }
}

}  // namespace
}  // namespace gpuledger::report
