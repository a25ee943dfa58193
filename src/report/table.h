// The reports' plain-text tables (internal to the report library).
#pragma once

#include <string>
#include <vector>

namespace gpuledger::report {

// Columns of a plain-text table, right-aligned after the first `left` columns. The
// first row is a header; with `total_row` the last row is set off as a total.
std::string Table(const std::vector<std::vector<std::string>>& rows, size_t left, bool total_row = true);

}  // namespace gpuledger::report
