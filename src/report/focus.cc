#include "report/focus.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/csv.h"

namespace gpuledger::report {
namespace {

// `value` / 10^digits as a plain decimal, at least
// six fractional digits, trailing zeros beyond them dropped.
std::string Decimal(CostNumerator value, int digits) {
  bool negative = value < 0;
  if (negative) value = -value;
  CostNumerator scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  auto whole = static_cast<unsigned long long>(value / scale);
  std::string frac;
  CostNumerator rest = value % scale;
  for (int i = 0; i < digits; ++i) {
    scale /= 10;
    frac += static_cast<char>('0' + static_cast<int>(rest / scale));
    rest %= scale;
  }
  while (frac.size() > 6 && frac.back() == '0') frac.pop_back();
  return fmt::format("{}{}.{}", negative ? "-" : "", whole, frac);
}

// FOCUS instants are whole seconds: a start rounds down, an (exclusive) end up.
std::string Instant(int64_t t_ms, bool end) {
  int64_t s = FloorTo(t_ms, kMsPerSecond);
  if (end && s != t_ms) s += kMsPerSecond;
  return FormatTime(s);
}

}  // namespace

const std::vector<std::string>& FocusColumns() {
  static const std::vector<std::string> kColumns = {
      // The 21 mandatory columns of FOCUS 1.2.
      "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
      "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
      "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
      "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
      // The conditional columns that apply.
      "ChargeFrequency", "ConsumedQuantity", "ConsumedUnit", "ContractedUnitPrice", "ListUnitPrice", "ResourceId",
      "ResourceType", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
      // gpuledger's own.
      "x_Bucket", "x_IdleCause", "x_EffectiveUtilization", "x_CapacityType", "x_Unpriced", "x_CorrectionFor",
      "x_CurrencyName"};
  return kColumns;
}

std::string RenderFocusCsv(const ledger::FocusExport& e, const FocusParties& parties) {
  std::string out = CsvRow(FocusColumns());
  // BillingCurrency is an ISO 4217 code: an internal unit, or none set, bills in XXX
  // ("no currency"), and x_CurrencyName names the unit.
  const std::string currency = e.currency.kind() == Currency::Kind::kIso4217 ? e.currency.name() : "XXX";
  const std::string billing_start = Instant(e.billing_period.begin_ms, false);
  const std::string billing_end = Instant(e.billing_period.end_ms, true);
  for (const ledger::FocusLine& l : e.lines) {
    const std::string cost = l.cost.ToString();
    const bool priced_row = !l.correction;
    std::string quantity, unit_price, list_cost = cost;
    if (priced_row) {
      quantity = Decimal(l.pricing_quantity_micro_hours(), 6);
      unit_price = l.unit_price->ToString();
      list_cost = Decimal(l.list_cost_pico(), 12);
    }
    std::string tags;
    if (l.job) {
      nlohmann::json t = {{"job", l.job->id}, {"kind", std::string(JobKindName(l.job->kind))}, {"pool", l.pool}};
      if (!l.project.empty()) t["project"] = l.project;
      if (!l.job->experiment.empty()) t["experiment"] = l.job->experiment;
      tags = t.dump();
    } else if (!l.device_uuid.empty()) {
      tags = nlohmann::json{{"pool", l.pool}}.dump();
    }
    out += CsvRow({
        cost,                                             // BilledCost
        parties.billing_account_id,                       // BillingAccountId
        parties.billing_account_name,                     // BillingAccountName
        currency,                                         // BillingCurrency
        billing_end,                                      // BillingPeriodEnd
        billing_start,                                    // BillingPeriodStart
        "Usage",                                          // ChargeCategory
        l.correction ? "Correction" : "",                 // ChargeClass
        l.description,                                    // ChargeDescription
        Instant(l.charge_period.end_ms, true),            // ChargePeriodEnd
        Instant(l.charge_period.begin_ms, false),         // ChargePeriodStart
        list_cost,                                        // ContractedCost (= list: one price per entry)
        cost,                                             // EffectiveCost
        parties.invoice_issuer_name,                      // InvoiceIssuerName
        list_cost,                                        // ListCost
        quantity,                                         // PricingQuantity
        priced_row ? "GPU-Hours" : "",                    // PricingUnit
        parties.provider_name,                            // ProviderName
        parties.publisher_name,                           // PublisherName
        "AI and Machine Learning",                        // ServiceCategory
        "GPU compute",                                    // ServiceName
        "Usage-Based",                                    // ChargeFrequency
        quantity,                                         // ConsumedQuantity
        priced_row ? "GPU-Hours" : "",                    // ConsumedUnit
        unit_price,                                       // ContractedUnitPrice
        unit_price,                                       // ListUnitPrice
        l.device_uuid,                                    // ResourceId
        l.device_uuid.empty() ? "" : (l.mig_slice ? "MIG slice" : "GPU"),  // ResourceType
        l.sku_id,                                         // SkuId
        l.sku_price_id,                                   // SkuPriceId
        l.team,                                           // SubAccountId
        l.team,                                           // SubAccountName
        tags,                                             // Tags
        l.bucket ? std::string(BucketName(*l.bucket)) : "",                 // x_Bucket
        l.idle_cause ? std::string(IdleCauseName(*l.idle_cause)) : "",      // x_IdleCause
        l.job ? fmt::format("{:.4f}", l.effective_utilization) : "",        // x_EffectiveUtilization
        l.device_uuid.empty() ? "" : std::string(CapacityTypeName(l.capacity_type)),  // x_CapacityType
        l.unpriced ? "true" : "false",                    // x_Unpriced
        l.correction_for,                                 // x_CorrectionFor
        e.currency.Label(),                               // x_CurrencyName
    });
  }
  return out;
}

}  // namespace gpuledger::report
