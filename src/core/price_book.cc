#include "core/price_book.h"

#include <fmt/format.h>

namespace gpuledger {

Result<PriceBook> PriceBook::Create(std::vector<PriceEntry> entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const PriceEntry& e = entries[i];
    std::string where = fmt::format("price[{}] ({} / {} / {})", i, e.model, e.pool,
                                    CapacityTypeName(e.capacity_type));
    if (e.model.empty() || e.pool.empty()) {
      return InvalidArgument(where + ": model and pool must be set (\"*\" matches any)");
    }
    if (e.per_gpu_hour < Money()) return InvalidArgument(where + ": negative price");
    if (e.valid.empty()) return InvalidArgument(where + ": empty validity range");
    auto aligned = [](int64_t t) { return t == kForever || t % kMsPerHour == 0; };
    if (!aligned(e.valid.begin_ms) || !aligned(e.valid.end_ms)) {
      return InvalidArgument(where + ": validity must start and end on a whole UTC hour");
    }
    for (size_t j = 0; j < i; ++j) {
      const PriceEntry& o = entries[j];
      if (o.model == e.model && o.pool == e.pool && o.capacity_type == e.capacity_type &&
          o.valid.Overlaps(e.valid)) {
        return InvalidArgument(fmt::format("{}: overlaps price[{}] for the same key", where, j));
      }
    }
  }
  PriceBook book;
  book.entries_ = std::move(entries);
  return book;
}

std::optional<Money> PriceBook::PriceAt(const std::string& model, const std::string& pool,
                                        CapacityType type, int64_t t_ms) const {
  const PriceEntry* best = EntryAt(model, pool, type, t_ms);
  if (best == nullptr) return std::nullopt;
  return best->per_gpu_hour;
}

const PriceEntry* PriceBook::EntryAt(const std::string& model, const std::string& pool, CapacityType type,
                                     int64_t t_ms) const {
  const PriceEntry* best = nullptr;
  int best_rank = -1;
  for (const PriceEntry& e : entries_) {
    if (e.capacity_type != type || !e.valid.Contains(t_ms)) continue;
    bool model_ok = e.model == "*" || e.model == model;
    bool pool_ok = e.pool == "*" || e.pool == pool;
    if (!model_ok || !pool_ok) continue;
    int rank = (e.model != "*" ? 2 : 0) + (e.pool != "*" ? 1 : 0);
    if (rank > best_rank) {
      best = &e;
      best_rank = rank;
    }
  }
  return best;
}

}  // namespace gpuledger
