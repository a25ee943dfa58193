// The Kueue ClusterQueues gpuledger emits, checked against what Kueue's published
// v1beta1 CRD (config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml) requires
// of them: the required fields, their types, the list bounds, the name patterns, and its
// two validation rules (each flavor has as many resources as the group covers; no
// borrowingLimit without a cohort). kubectl's client-side dry run needs an API server
// and the CRD, which this machine has not, so the schema's rules are checked here.
#include "report/quota_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

namespace gpuledger::report {
namespace {

using nlohmann::json;

// The CRD's pattern for cohort and flavor names (a DNS-1123 subdomain).
const std::regex kDns1123(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");

bool IsQuantity(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>() >= 0;
  return v.is_string() && std::regex_match(v.get<std::string>(), std::regex(R"(^[0-9]+(\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$)"));
}

// Every rule of the v1beta1 schema that the emitted fields touch; each failure named.
std::vector<std::string> SchemaErrors(const json& cq) {
  std::vector<std::string> e;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) e.push_back(what);
  };
  need(cq.value("apiVersion", "") == "kueue.x-k8s.io/v1beta1", "apiVersion");
  need(cq.value("kind", "") == "ClusterQueue", "kind");
  need(cq.contains("metadata") && cq["metadata"]["name"].is_string() &&
           std::regex_match(cq["metadata"]["name"].get<std::string>(), kDns1123),
       "metadata.name");
  if (!cq.contains("spec") || !cq["spec"].is_object()) return {"spec"};
  const json& spec = cq["spec"];
  bool has_cohort = spec.contains("cohort");
  if (has_cohort) {
    need(spec["cohort"].is_string() && spec["cohort"].get<std::string>().size() <= 253 &&
             std::regex_match(spec["cohort"].get<std::string>(), kDns1123),
         "spec.cohort");
  }
  if (spec.contains("namespaceSelector")) need(spec["namespaceSelector"].is_object(), "spec.namespaceSelector");
  need(spec["resourceGroups"].is_array() && spec["resourceGroups"].size() <= 16, "spec.resourceGroups");
  for (const json& g : spec["resourceGroups"]) {
    need(g.contains("coveredResources") && g["coveredResources"].is_array(), "resourceGroups[].coveredResources");
    need(g.contains("flavors") && g["flavors"].is_array() && !g["flavors"].empty() && g["flavors"].size() <= 64,
         "resourceGroups[].flavors: 1..64");
    for (const json& r : g["coveredResources"]) need(r.is_string(), "coveredResources[]: strings");
    for (const json& f : g["flavors"]) {
      need(f["name"].is_string() && f["name"].get<std::string>().size() <= 253 &&
               std::regex_match(f["name"].get<std::string>(), kDns1123),
           "flavors[].name");
      need(f["resources"].is_array() && !f["resources"].empty() && f["resources"].size() <= 64,
           "flavors[].resources: 1..64");
      need(f["resources"].size() == g["coveredResources"].size(),
           "flavors must have the same number of resources as the coveredResources");
      for (const json& r : f["resources"]) {
        need(r.contains("name") && r["name"].is_string(), "resources[].name");
        need(r.contains("nominalQuota") && IsQuantity(r["nominalQuota"]), "resources[].nominalQuota");
        if (r.contains("borrowingLimit")) {
          need(IsQuantity(r["borrowingLimit"]), "resources[].borrowingLimit");
          need(has_cohort, "borrowingLimit must be nil when cohort is empty");
        }
      }
    }
  }
  return e;
}

ledger::KueueQueue Nlp() {
  return {.team = "nlp", .name = "gpuledger-nlp", .cohort = "gpuledger", .flavor = "nvidia-h200",
          .nominal_gpus = 7, .borrowing_limit_gpus = 0, .source = "q.toml:1"};
}

TEST(KueueTest, TheEmittedClusterQueueMeetsTheV1beta1Schema) {
  json cq = KueueClusterQueue(Nlp());
  EXPECT_EQ(SchemaErrors(cq), std::vector<std::string>{}) << cq.dump(2);
  const json& r = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0];
  EXPECT_EQ(cq["spec"]["resourceGroups"][0]["coveredResources"], json({"nvidia.com/gpu"}));
  EXPECT_EQ(r["name"], "nvidia.com/gpu");
  EXPECT_EQ(r["nominalQuota"], 7);
  EXPECT_EQ(r["borrowingLimit"], 0);
}

TEST(KueueTest, TheSchemaCheckCatchesWhatTheCrdRefuses) {
  json no_cohort = KueueClusterQueue(Nlp());
  no_cohort["spec"].erase("cohort");
  EXPECT_EQ(SchemaErrors(no_cohort), std::vector<std::string>{"borrowingLimit must be nil when cohort is empty"});
  json bad = KueueClusterQueue(Nlp());
  bad["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "NVIDIA H200";
  bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].erase("nominalQuota");
  bad["spec"]["resourceGroups"][0]["coveredResources"].push_back("cpu");
  EXPECT_EQ(SchemaErrors(bad), (std::vector<std::string>{
                                   "flavors[].name",
                                   "flavors must have the same number of resources as the coveredResources",
                                   "resources[].nominalQuota"}));
}

TEST(KueueTest, YamlIsOneDocumentPerQueueWithItsSource) {
  EXPECT_EQ(KueueYaml({Nlp()}),
            "---\n"
            "# team nlp: from the quota at q.toml:1 (docs/quotas.md)\n"
            "apiVersion: \"kueue.x-k8s.io/v1beta1\"\n"
            "kind: \"ClusterQueue\"\n"
            "metadata:\n"
            "  labels:\n"
            "    gpuledger.io/team: \"nlp\"\n"
            "  name: \"gpuledger-nlp\"\n"
            "spec:\n"
            "  cohort: \"gpuledger\"\n"
            "  namespaceSelector: {}\n"
            "  resourceGroups:\n"
            "    - coveredResources:\n"
            "        - \"nvidia.com/gpu\"\n"
            "      flavors:\n"
            "        - name: \"nvidia-h200\"\n"
            "          resources:\n"
            "            - borrowingLimit: 0\n"
            "              name: \"nvidia.com/gpu\"\n"
            "              nominalQuota: 7\n");
}

}  // namespace
}  // namespace gpuledger::report
