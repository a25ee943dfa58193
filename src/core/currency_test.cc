#include "core/currency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger {
namespace {

using ::testing::HasSubstr;

TEST(CurrencyTest, AcceptsCodesOfTheIsoListOnly) {
  for (const char* code : {"EUR", "USD", "JPY", "CHF", "GBP", "INR", "XAU"}) {
    auto c = Currency::Iso4217(code);
    ASSERT_TRUE(c.ok()) << code << ": " << c.status().message();
    EXPECT_EQ(c->kind(), Currency::Kind::kIso4217);
    EXPECT_EQ(c->name(), code);
    EXPECT_EQ(c->Label(), code);
  }
  // Three upper-case letters are not enough: these are not (or no longer) on the list.
  for (const char* code : {"ABC", "EUX", "HRK", "ZWL", "US", "EURO", ""}) {
    auto c = Currency::Iso4217(code);
    ASSERT_FALSE(c.ok()) << code;
    EXPECT_THAT(c.status().message(), HasSubstr(std::string("\"") + code + "\": not an ISO 4217 code"));
  }
}

TEST(CurrencyTest, ALowerCaseCodeIsRefusedWithItsUpperCaseForm) {
  auto c = Currency::Iso4217("eur");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("upper case (\"EUR\")"));
}

TEST(CurrencyTest, AUnitHasAName) {
  auto c = Currency::Unit("GPU credits");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->kind(), Currency::Kind::kUnit);
  EXPECT_EQ(c->Label(), "GPU credits");
  EXPECT_EQ(c->Suffix(), " GPU credits");
  EXPECT_FALSE(Currency::Unit("").ok());
  EXPECT_FALSE(Currency::Unit(" credits").ok());
  EXPECT_FALSE(Currency::Unit("credits\n").ok());
  EXPECT_FALSE(Currency::Unit(std::string(41, 'c')).ok());
  // An ISO code is a currency, not a unit: the error says which key to use.
  auto eur = Currency::Unit("eur");
  ASSERT_FALSE(eur.ok());
  EXPECT_THAT(eur.status().message(), HasSubstr("[prices] currency = \"EUR\""));
}

TEST(CurrencyTest, UnsetIsAnUnnamedUnitNeverADefaultCurrency) {
  Currency c;
  EXPECT_FALSE(c.is_set());
  EXPECT_EQ(c.name(), "");
  EXPECT_EQ(c.Label(), "unnamed unit");
  EXPECT_EQ(CurrencyKindName(c.kind()), "unset");
  EXPECT_EQ(CurrencyKindName(Currency::Iso4217("EUR")->kind()), "iso4217");
  EXPECT_EQ(CurrencyKindName(Currency::Unit("GPU credits")->kind()), "unit");
}

}  // namespace
}  // namespace gpuledger
