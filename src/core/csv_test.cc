#include "core/csv.h"

#include <gtest/gtest.h>

namespace gpuledger {
namespace {

TEST(CsvTest, PlainFieldsAreWrittenAsIs) {
  EXPECT_EQ(CsvField("team-a"), "team-a");
  EXPECT_EQ(CsvField(""), "");
}

TEST(CsvTest, FieldsWithSeparatorsQuotesOrLineBreaksAreQuoted) {
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
}

// OWASP's CSV injection: a cell a spreadsheet would run as a formula is shown as text.
TEST(CsvTest, CellsThatWouldRunAsFormulasAreWrittenAsText) {
  EXPECT_EQ(CsvField("=HYPERLINK(\"http://evil/\",\"x\")"), "\"'=HYPERLINK(\"\"http://evil/\"\",\"\"x\"\")\"");
  EXPECT_EQ(CsvField("+cmd"), "\"'+cmd\"");
  EXPECT_EQ(CsvField("-2+3"), "\"'-2+3\"");
  EXPECT_EQ(CsvField("@SUM(A1)"), "\"'@SUM(A1)\"");
  EXPECT_EQ(CsvField("\tx"), "\"'\tx\"");
  EXPECT_EQ(CsvField("\rx"), "\"'\rx\"");
  EXPECT_EQ(CsvField("-"), "\"'-\"");
  // Only the first character matters: a formula sign inside a name is harmless.
  EXPECT_EQ(CsvField("a=b"), "a=b");
}

TEST(CsvTest, SignedNumbersStayNumbers) {
  for (const char* n : {"-1.5", "+2", "-0.000001", "-3e-4", "+1.25E+3", "-.5"}) EXPECT_EQ(CsvField(n), n);
  EXPECT_EQ(CsvRow({"team", "-1.5", "=1+1"}), "team,-1.5,\"'=1+1\"\n");
}

TEST(CsvTest, RowJoinsQuotedFieldsAndEndsTheLine) {
  EXPECT_EQ(CsvRow({"x", "1,5", ""}), "x,\"1,5\",\n");
  EXPECT_EQ(CsvRow({}), "\n");
}

}  // namespace
}  // namespace gpuledger
