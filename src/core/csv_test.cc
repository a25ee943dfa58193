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

TEST(CsvTest, RowJoinsQuotedFieldsAndEndsTheLine) {
  EXPECT_EQ(CsvRow({"x", "1,5", ""}), "x,\"1,5\",\n");
  EXPECT_EQ(CsvRow({}), "\n");
}

}  // namespace
}  // namespace gpuledger
