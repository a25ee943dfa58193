// CSV writing shared by every CSV the project emits (chargeback, usage, simulator
// results), so that quoting follows one rule: RFC 4180. A field holding a comma, a
// double quote, a carriage return or a line feed is enclosed in double quotes, with each
// double quote inside doubled; any other field is written as is.
//
// Formula injection (OWASP "CSV Injection"): a spreadsheet runs a cell that begins with
// = + - @, a tab or a carriage return as a formula, so a user named
// =HYPERLINK("http://evil/","x") could plant a link in a finance report. Such a field is
// written with a leading apostrophe and in double quotes ("'=HYPERLINK(...)"), which a
// spreadsheet shows as text. A field that is a plain decimal number ("-1.5", "+2",
// "-3e-4") is left alone: it is a number, not a formula, and stays one. The rule applies
// to every field, so a number written as text by a caller is kept as a number too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuledger {

// One field, quoted only when it must be; neutralized when a spreadsheet would run it.
std::string CsvField(std::string_view field);
// One record: the fields quoted as needed, joined by commas, ended by "\n".
std::string CsvRow(const std::vector<std::string>& fields);

}  // namespace gpuledger
