// The one currency of the whole price book, shown beside every money figure.
//
// Rule. Every amount gpuledger reports is in micro-units (core/money.h) of exactly one
// currency: an ISO 4217 code ("EUR"), checked against the ISO list, or an internal unit
// with its own name ("GPU credits"). Nothing is converted. When no currency was set the
// amounts are in an unnamed unit, and every output says so: never a silent "USD".
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuledger {

class Currency {
 public:
  enum class Kind { kUnset, kIso4217, kUnit };

  // The unnamed unit: no currency was configured.
  Currency() = default;

  // An ISO 4217 alphabetic code, upper case ("EUR"). Fails, naming the text, for anything
  // that is not on the ISO list (the error suggests the upper-case form when that is one,
  // and [prices] unit for a name).
  static Result<Currency> Iso4217(std::string_view code);
  // An internal unit named `name` ("GPU credits"): 1..40 printable characters, not
  // blank at either end, and not an ISO 4217 code (that is Iso4217's).
  static Result<Currency> Unit(std::string_view name);

  // True for the codes of ISO 4217's list one (the active currencies and funds, and the
  // X codes: precious metals, SDR, testing, "no currency").
  static bool IsIso4217Code(std::string_view code);

  Kind kind() const { return kind_; }
  bool is_set() const { return kind_ != Kind::kUnset; }
  // "EUR", "GPU credits"; "" when unset.
  const std::string& name() const { return name_; }
  // For people: the name, or "unnamed unit" when unset.
  std::string Label() const;
  // The label with a space in front, for a figure's suffix: "1,234.50 EUR".
  std::string Suffix() const { return " " + Label(); }

  bool operator==(const Currency&) const = default;

 private:
  Currency(Kind kind, std::string name) : kind_(kind), name_(std::move(name)) {}
  Kind kind_ = Kind::kUnset;
  std::string name_;
};

// "iso4217", "unit" or "unset": the JSON APIs' currency_kind.
std::string_view CurrencyKindName(Currency::Kind kind);

}  // namespace gpuledger
