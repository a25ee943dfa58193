#include "dashboard/dashboard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gpuledger::dashboard {
namespace {

using ::testing::HasSubstr;

std::string ReadSource(const std::string& relative) {
  std::ifstream f(std::string(GPULEDGER_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(DashboardTest, EmbedsThePageItsScriptsAndUplotByteForByte) {
  const Asset* index = FindAsset("index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index->body, ReadSource("src/dashboard/web/index.html"));
  const Asset* app = FindAsset("app.js");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(app->body, ReadSource("src/dashboard/web/app.js"));
  const Asset* uplot = FindAsset("uPlot.iife.min.js");
  ASSERT_NE(uplot, nullptr);
  EXPECT_EQ(uplot->body, ReadSource("src/dashboard/web/node_modules/uplot/dist/uPlot.iife.min.js"));
  ASSERT_NE(FindAsset("uPlot.min.css"), nullptr);
  EXPECT_EQ(FindAsset("../index.html"), nullptr);
  EXPECT_EQ(FindAsset("missing.js"), nullptr);
}

TEST(DashboardTest, EveryAssetHasADistinctValidatorAndNoExternalReference) {
  for (const Asset& a : Assets()) {
    EXPECT_EQ(a.etag.size(), 18u) << a.name;  // 16 hex digits, quoted
    EXPECT_EQ(a.etag.front(), '"') << a.name;
    for (const Asset& b : Assets()) {
      if (&a != &b) {
        EXPECT_NE(a.etag, b.etag) << a.name << " " << b.name;
      }
    }
  }
  // The page loads only what this server serves: nothing from a CDN.
  std::string page(FindAsset("index.html")->body);
  EXPECT_THAT(page, HasSubstr("/assets/uPlot.iife.min.js"));
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("//cdn"), std::string::npos);
}

}  // namespace
}  // namespace gpuledger::dashboard
