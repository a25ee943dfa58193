// Exemptions of the intervention rules (core/objective.h): the recorded attributes and the
// scheduler labels and annotations the agent kept.
#include "core/objective.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger {
namespace {

using ::testing::HasSubstr;

Job Notebook() {
  return Job{.id = "k8s/research/nb-ana", .team = "research", .user = "ana",
             .labels = JobMetadata{{"gpuledger.io/exempt", "true"}, {"app", "jupyter"}},
             .annotations = JobMetadata{{"gpuledger.io/reason", "demo on friday"}}};
}

TEST(ExemptionTest, ALabelWithItsValueExempts) {
  EXPECT_EQ(ExemptionOf({"label:gpuledger.io/exempt=true"}, Notebook()), "label:gpuledger.io/exempt=true");
}

TEST(ExemptionTest, ALabelWithAnotherValueDoesNot) {
  EXPECT_EQ(ExemptionOf({"label:gpuledger.io/exempt=false", "label:app=vscode"}, Notebook()), "");
}

TEST(ExemptionTest, ALabelKeyAloneExemptsWhateverItsValue) {
  EXPECT_EQ(ExemptionOf({"label:app"}, Notebook()), "label:app");
  Job j = Notebook();
  j.labels = JobMetadata{{"app", ""}};  // present with an empty value is present
  EXPECT_EQ(ExemptionOf({"label:app"}, j), "label:app");
  j.labels = JobMetadata{};
  EXPECT_EQ(ExemptionOf({"label:app"}, j), "");
}

TEST(ExemptionTest, AnnotationsAreMatchedApartFromLabels) {
  EXPECT_EQ(ExemptionOf({"annotation:gpuledger.io/reason"}, Notebook()), "annotation:gpuledger.io/reason");
  EXPECT_EQ(ExemptionOf({"annotation:gpuledger.io/reason=demo on friday"}, Notebook()),
            "annotation:gpuledger.io/reason=demo on friday");
  // The label's key as an annotation, and the annotation's as a label, exempt nothing.
  EXPECT_EQ(ExemptionOf({"annotation:gpuledger.io/exempt", "label:gpuledger.io/reason"}, Notebook()), "");
}

TEST(ExemptionTest, AJobWhoseLabelsWereNeverReportedIsNotExemptByLabel) {
  Job j = Notebook();
  j.labels.reset();
  j.annotations.reset();
  EXPECT_EQ(ExemptionOf({"label:gpuledger.io/exempt", "annotation:gpuledger.io/reason"}, j), "");
}

TEST(ExemptionTest, TheFirstMatchingEntryIsTheReason) {
  EXPECT_EQ(ExemptionOf({"team:vision", "user:ana", "label:app"}, Notebook()), "user:ana");
  EXPECT_EQ(ExemptionOf({"job:k8s/research/nb-ana"}, Notebook()), "job:k8s/research/nb-ana");
  EXPECT_EQ(ExemptionOf({"project:none", "label:app=jupyter"}, Notebook()), "label:app=jupyter");
}

TEST(ExemptionTest, ParsesEveryForm) {
  auto e = ParseExemption("label:gpuledger.io/exempt=true");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->of, Exemption::Of::kLabel);
  EXPECT_EQ(e->name, "gpuledger.io/exempt");
  EXPECT_EQ(e->value, "true");
  e = ParseExemption("annotation:owner");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->of, Exemption::Of::kAnnotation);
  EXPECT_FALSE(e->value.has_value());
  e = ParseExemption("label:x=");  // the label present with an empty value
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->value, "");
  e = ParseExemption("team:a=b");  // '=' is no separator outside labels and annotations
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->name, "a=b");
}

TEST(ExemptionTest, RefusesWhatIsNoFormNamingTheForms) {
  for (const char* bad : {"label:", "label:=x", "annotation:", "tag:x", "user", "", "team:"}) {
    auto e = ParseExemption(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("label:KEY=VALUE, label:KEY, annotation:KEY=VALUE or annotation:KEY"));
  }
}

}  // namespace
}  // namespace gpuledger
