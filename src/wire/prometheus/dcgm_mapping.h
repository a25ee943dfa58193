// Maps dcgm-exporter series (from a scrape or from remote-write) onto the ledger's model:
// devices (GPUs and MIG instances), samples per device per instant, jobs (a Kubernetes
// pod or an HPC job) and "job holds device" observations.
//
// The families the ledger reads, their units and whether they arrive as a ratio (0..1)
// or a percent (0..100), are one table: DcgmFieldTable(). Every other family is counted
// in DcgmBatch::ignored_families. docs/prometheus.md prints the table, the label rules,
// the MIG handling and the health rules.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "wire/prometheus/labels.h"
#include "wire/prometheus/prom_text.h"
#include "wire/prometheus/remote_write.h"

namespace gpuledger::prometheus {

// Where a DCGM family's value lands.
enum class DcgmField : uint8_t {
  kSmActive,             // Sample::sm_active
  kSmOccupancy,          // Sample::sm_occupancy
  kTensorActive,         // Sample::tensor_active
  kDramActive,           // Sample::dram_active
  kGpuUtil,              // Sample::gpu_util (coarse)
  kFbUsedMib,            // Sample::fb_used_mib
  kPowerWatts,           // Sample::power_watts
  kGrEngineActive,       // SampleExtras::gr_engine_active
  kFbFreeMib,            // SampleExtras::fb_free_mib
  kFbReservedMib,        // SampleExtras::fb_reserved_mib
  kEnergyJoulesTotal,    // SampleExtras::energy_joules_total
  kXid,                  // SampleExtras::xid, and Sample::health by XidHealth()
  kRowRemapFailure,      // Sample::health: unhealthy when 1
  kRowRemapPending,      // Sample::health: degraded when > 0
  kRetiredPagesPending,  // Sample::health: degraded when > 0
  kEccDbeVolatile,       // Sample::health: degraded when > 0
};

// How the exporter states the value, and so how it is converted.
enum class DcgmScale : uint8_t {
  kRatio,        // 0..1 as exported; kept
  kPercent,      // 0..100 as exported; divided by 100 into a ratio
  kMib,          // MiB; kept
  kWatts,        // W; kept
  kMillijoules,  // mJ; divided by 1000 into joules
  kCode,         // a non-negative integer code (XID)
  kCount,        // a non-negative count or 0/1 flag
};
std::string_view DcgmScaleName(DcgmScale scale);  // "ratio", "percent", "MiB", ...

struct DcgmFieldSpec {
  std::string_view family;  // "DCGM_FI_PROF_SM_ACTIVE"
  DcgmField field;
  DcgmScale scale;
  std::string_view target;  // "Sample::sm_active" (for the docs table)
};

// The mapping table, in documentation order.
std::span<const DcgmFieldSpec> DcgmFieldTable();
// The table entry for `family`, or nullptr when the ledger does not use it.
const DcgmFieldSpec* FindDcgmField(std::string_view family);

// The health an XID error code implies (0 = no error: kOk). Application-caused XIDs (13,
// 31, 43, 45) leave the GPU kOk; 79 (fallen off the bus) is kLost; XIDs that need a GPU
// reset (48, 62, 64, 74, 95, 119, 120, 140, ...) are kUnhealthy; any other is kDegraded.
Health XidHealth(int64_t xid);

// dcgm-exporter's blank values (DCGM_INT32_BLANK, DCGM_INT64_BLANK, DCGM_FP64_BLANK and
// their NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED neighbours): "no reading", not a value.
bool IsDcgmBlank(double value);

// The device uuid gpuledger gives a MIG GPU instance: "MIG-" + parent uuid + "/" + GI id.
// Stable across scrapes and restarts (NVML's own MIG uuids need the driver to resolve).
std::string MigInstanceUuid(std::string_view parent_uuid, int64_t gpu_instance_id);

// A team/project rule: when the series' label `label` equals `pattern` (kEquals) or fully
// matches the ECMAScript regex `pattern` (kRegex), the job gets `team` and `project`
// (either may be empty: unset by this rule). With kRegex, "$1".."$9" in team/project
// are replaced by the capture groups. The first matching rule that sets team decides
// the team, likewise project. `label` may be any series label; pod, namespace and
// container name the workload (exported_* labels win; docs/prometheus.md). Values over
// 1 KiB never match a regex (it bounds std::regex's recursion on hostile input).
struct LabelRule {
  enum class Match : uint8_t { kEquals, kRegex };
  std::string label;
  Match match = Match::kEquals;
  std::string pattern;
  std::string team;
  std::string project;
};

// The number of compute slices of a MIG-capable GPU model; the share of a profile "Ng.*"
// is N / slices. Models match by substring of the modelName label.
struct MigSlices {
  std::string model_substring;
  int32_t slices = 7;
};

struct DcgmMappingConfig {
  std::vector<LabelRule> rules;
  // Checked in order; models that match none have default_mig_slices (7: A100, H100,
  // H200, B200). A30 has 4.
  std::vector<MigSlices> mig_slices = {{"A30", 4}};
  int32_t default_mig_slices = 7;
  // What a value that cannot be right (NaN, a ratio of 3, negative power) or a conflict
  // (two values for one device, field and instant) does: kReject fails the whole batch;
  // kSkip drops the point and counts it in DcgmBatch::skipped_points.
  enum class BadValue : uint8_t { kReject, kSkip };
  BadValue on_bad_value = BadValue::kReject;
};

// Figures of a sample that gpuledger::Sample has no field for (yet); see the report.
struct SampleExtras {
  std::optional<double> gr_engine_active;  // ratio 0..1
  std::optional<double> fb_free_mib;
  std::optional<double> fb_reserved_mib;
  std::optional<double> energy_joules_total;  // since driver load
  std::optional<int64_t> xid;                 // last XID reported; 0 = none
};

// A job observed holding a device at an instant (the ledger turns runs of these into
// Allocations).
struct JobHold {
  std::string device_uuid;
  std::string job_id;
  int64_t t_ms = 0;
  bool operator==(const JobHold&) const = default;
};

struct DcgmBatch {
  std::vector<Device> devices;       // sorted by uuid; MIG parents included
  std::vector<Sample> samples;       // one per device per instant, by (uuid, t_ms)
  std::vector<SampleExtras> extras;  // extras[i] belongs to samples[i]
  std::vector<Job> jobs;             // sorted by id
  std::vector<JobHold> holds;        // sorted by (device_uuid, t_ms, job_id)
  std::map<std::string, int64_t, std::less<>> ignored_families;  // family -> points
  int64_t used_points = 0;                                       // points that set a sample field
  int64_t stale_points = 0;                                      // remote-write staleness markers
  int64_t blank_points = 0;                                      // DCGM blank values
  int64_t skipped_points = 0;        // kSkip: bad values and conflicts dropped
  std::vector<std::string> skipped;  // kSkip: the first messages
};

// Maps batches of series. Immutable after Create(); the Map* methods are const and
// thread-safe.
class DcgmMapper {
 public:
  // Fails when a rule is malformed (empty label, invalid regex, "$N" beyond the groups),
  // naming the rule by index.
  static Result<DcgmMapper> Create(DcgmMappingConfig config);

  // Maps a parsed scrape. Samples without a timestamp are taken at `scrape_time_ms`.
  // The batch is mapped whole or not at all: on failure only the Status is returned,
  // naming the line, series and problem.
  Result<DcgmBatch> MapScrape(const std::vector<Family>& families, int64_t scrape_time_ms) const;
  // Maps a decoded remote-write request (each sample carries its own timestamp).
  Result<DcgmBatch> MapWriteRequest(const WriteRequest& request) const;

  const DcgmMappingConfig& config() const;

  // Movable, not copyable (compiled rules).
  DcgmMapper(DcgmMapper&&) noexcept;
  DcgmMapper& operator=(DcgmMapper&&) noexcept;
  ~DcgmMapper();

 private:
  struct Impl;
  explicit DcgmMapper(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::prometheus
