#include "agent/spool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/test_util.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(SpoolTest, KeepsOrderAcrossReopens) {
  TempDir dir;
  {
    auto s = Spool::Open(dir / "spool", 1 << 20);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->Append("one").ok());
    ASSERT_TRUE((*s)->Append("two").ok());
    ASSERT_TRUE((*s)->Append("three").ok());
    EXPECT_EQ((*s)->bytes(), 11u);
    ASSERT_TRUE((*s)->PopFront().ok());
  }
  // A crash mid-write leaves a temp file: ignored and removed.
  testing::WriteFile(dir / "spool/00000000000000000009.batch.tmp", "half");
  auto s = Spool::Open(dir / "spool", 1 << 20);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->size(), 2u);
  EXPECT_EQ((*s)->Front()->document, "two");
  ASSERT_TRUE((*s)->Append("four").ok());
  std::vector<std::string> order;
  while ((*s)->size() > 0) {
    order.push_back((*s)->Front()->document);
    ASSERT_TRUE((*s)->PopFront().ok());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"two", "three", "four"}));
  EXPECT_EQ((*s)->Front().status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir / "spool/00000000000000000009.batch.tmp"));
}

TEST(SpoolTest, DropsTheOldestWhenFull) {
  TempDir dir;
  auto s = Spool::Open(dir.path(), 10);
  ASSERT_TRUE(s.ok());
  std::vector<std::string> log;
  (*s)->set_drop_callback([&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE((*s)->Append("aaaa").ok());
  ASSERT_TRUE((*s)->Append("bbbb").ok());
  ASSERT_TRUE((*s)->Append("cccccc").ok());  // 14 > 10: "aaaa" goes
  EXPECT_EQ((*s)->size(), 2u);
  EXPECT_EQ((*s)->dropped_batches(), 1u);
  EXPECT_EQ((*s)->Front()->document, "bbbb");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_THAT(log[0], HasSubstr("dropped the 1 oldest batches (4 bytes)"));
  Status big = (*s)->Append("01234567890");
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*s)->size(), 2u);  // nothing dropped for a batch that cannot fit anyway
}

}  // namespace
}  // namespace gpuledger::agent
