// Prices per GPU-hour by GPU model, pool and capacity type, each valid over a range.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/currency.h"
#include "core/model.h"
#include "core/money.h"
#include "core/time.h"

namespace gpuledger {

inline constexpr int64_t kForever = INT64_MAX / 4;

struct PriceEntry {
  std::string model;  // "*" matches every model
  std::string pool;   // "*" matches every pool
  CapacityType capacity_type = CapacityType::kOnDemand;
  Money per_gpu_hour;
  // Prices take effect on whole UTC hours: begin and end must be multiples of an hour
  // (end may be kForever). This keeps hourly rollups priceable exactly.
  TimeRange valid{0, kForever};
};

class PriceBook {
 public:
  PriceBook() = default;

  // Builds a price book. Fails (naming the entry by index) on a negative price, an
  // empty or non-hour-aligned range, or two entries for the same model, pool and
  // capacity type whose ranges overlap.
  static Result<PriceBook> Create(std::vector<PriceEntry> entries);

  // The price of one whole GPU-hour of `device` at `t_ms`: the most specific entry
  // valid then (model and pool > model > pool > neither). Empty if none applies. MIG
  // slices are priced by their parent's model; the caller applies the share.
  std::optional<Money> PriceAt(const std::string& model, const std::string& pool,
                               CapacityType type, int64_t t_ms) const;
  // The entry PriceAt reads its price from (the same rule), or nullptr if none applies:
  // for exports that name the price they charged (FOCUS's SkuPriceId).
  const PriceEntry* EntryAt(const std::string& model, const std::string& pool, CapacityType type,
                            int64_t t_ms) const;

  const std::vector<PriceEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  // The currency of every entry's price, and so of every figure priced by this book
  // (core/currency.h). Set from the config's [prices] table; unset: an unnamed unit.
  const Currency& currency() const { return currency_; }
  void set_currency(Currency currency) { currency_ = std::move(currency); }

 private:
  std::vector<PriceEntry> entries_;
  Currency currency_;
};

}  // namespace gpuledger
