// The FOCUS 1.2 export (FinOps Open Cost and Usage Specification) of a month's lines
// (ledger/focus_lines.h) as CSV: docs/focus.md lists the columns and how each maps.
#pragma once

#include <string>
#include <vector>

#include "ledger/focus_lines.h"

namespace gpuledger::report {

// Who bills whom: the columns a FOCUS file names the parties in.
struct FocusParties {
  std::string billing_account_id = "gpuledger";
  std::string billing_account_name = "GPU fleet";
  std::string invoice_issuer_name = "GPU platform";
  std::string provider_name = "GPU platform";
  std::string publisher_name = "gpuledger";
};

// The header's columns, in order: the 21 mandatory FOCUS 1.2 columns, the conditional
// ones gpuledger fills, then the custom x_ columns.
const std::vector<std::string>& FocusColumns();

// The CSV (RFC 4180, core/csv.h): the header, then a record per line. Nulls are empty
// fields; numbers are plain decimals (money with six fractional digits, ListCost and
// ContractedCost exact, up to twelve); instants are UTC "YYYY-MM-DDTHH:mm:ssZ".
std::string RenderFocusCsv(const ledger::FocusExport& e, const FocusParties& parties = {});

}  // namespace gpuledger::report
