// PostgreSQL's time partitions of the store (internal: not part of the store's public
// face): raw samples (sample_chunks, process_samples) by UTC day. Their names say what
// they hold (sample_chunks_d20261123); PgStore makes them ahead of time and as batches need them, and
// CopySqliteIntoPostgres (store/copy.h) for the span of the store it copies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "store/pg_util.h"

namespace gpuledger::store::pg {

// The transaction-scoped advisory lock that whoever creates partitions holds.
inline constexpr int64_t kPartitionLock = 0x67706c7061727431;  // "gplpart1"

// A time partition: its table, its parent and its bounds.
struct Partition {
  std::string parent, name;
  int64_t begin_ms = 0, end_ms = 0;
};

// The day partition of `parent` holding `ms` (raw samples).
Partition DayPartition(const std::string& parent, int64_t ms);
// The day a raw-sample partition's name says it holds, or nullopt when it is not one.
std::optional<int64_t> DayOfPartitionName(std::string_view name, std::string_view parent);

// Creates `p` and attaches it to its parent, unless it is attached already.
// REQUIRES: inside a transaction of `c` that holds kPartitionLock.
Status CreatePartition(Conn& c, const Partition& p);

}  // namespace gpuledger::store::pg
