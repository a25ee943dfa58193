#include "core/currency.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace gpuledger {
namespace {

// ISO 4217 list one, alphabetic codes, sorted (the list as amended through 2025: ZWG and
// XCG in, HRK, SLL, ZWL and CUC out).
constexpr std::array<std::string_view, 180> kIso4217 = {
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN",
    "BHD", "BIF", "BMD", "BND", "BOB", "BOV", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF",
    "CHE", "CHF", "CHW", "CLF", "CLP", "CNY", "COP", "COU", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK",
    "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF",
    "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD",
    "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD",
    "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN",
    "MXV", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP",
    "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD",
    "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP",
    "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "USN", "UYI", "UYU", "UYW", "UZS", "VED", "VES",
    "VND", "VUV", "WST", "XAD", "XAF", "XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XCD", "XCG", "XDR",
    "XOF", "XPD", "XPF", "XPT", "XSU", "XTS", "XUA", "XXX", "YER", "ZAR", "ZMW", "ZWG",
};
static_assert(std::is_sorted(kIso4217.begin(), kIso4217.end()));

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

bool Currency::IsIso4217Code(std::string_view code) {
  return std::binary_search(kIso4217.begin(), kIso4217.end(), code);
}

Result<Currency> Currency::Iso4217(std::string_view code) {
  if (IsIso4217Code(code)) return Currency(Kind::kIso4217, std::string(code));
  std::string upper = Upper(code);
  if (IsIso4217Code(upper)) {
    return InvalidArgument(fmt::format("currency \"{}\": ISO 4217 codes are upper case (\"{}\")", code, upper));
  }
  return InvalidArgument(fmt::format(
      "currency \"{}\": not an ISO 4217 code (e.g. \"EUR\", \"USD\"); for an internal unit set "
      "[prices] unit = \"{}\" instead",
      code, code));
}

Result<Currency> Currency::Unit(std::string_view name) {
  if (name.empty() || name.size() > 40) {
    return InvalidArgument(fmt::format("unit \"{}\": a unit's name has 1..40 characters", name));
  }
  bool printable = std::all_of(name.begin(), name.end(), [](char ch) {
    return static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f;
  });
  if (!printable) return InvalidArgument("unit: a unit's name has no control characters");
  if (name.front() == ' ' || name.back() == ' ') {
    return InvalidArgument(fmt::format("unit \"{}\": no blank at either end", name));
  }
  if (IsIso4217Code(Upper(name))) {
    return InvalidArgument(fmt::format(
        "unit \"{}\": that is the ISO 4217 code {}; set [prices] currency = \"{}\" instead", name,
        Upper(name), Upper(name)));
  }
  return Currency(Kind::kUnit, std::string(name));
}

std::string Currency::Label() const { return is_set() ? name_ : "unnamed unit"; }

std::string_view CurrencyKindName(Currency::Kind kind) {
  switch (kind) {
    case Currency::Kind::kIso4217: return "iso4217";
    case Currency::Kind::kUnit: return "unit";
    case Currency::Kind::kUnset: return "unset";
  }
  return "unset";
}

}  // namespace gpuledger
