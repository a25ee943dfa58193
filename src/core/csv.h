// CSV writing shared by every CSV the project emits (chargeback, usage, simulator
// results), so that quoting follows one rule: RFC 4180. A field holding a comma, a
// double quote, a carriage return or a line feed is enclosed in double quotes, with each
// double quote inside doubled; any other field is written as is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuledger {

// One field, quoted only when it must be.
std::string CsvField(std::string_view field);
// One record: the fields quoted as needed, joined by commas, ended by "\n".
std::string CsvRow(const std::vector<std::string>& fields);

}  // namespace gpuledger
