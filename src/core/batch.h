// A batch: the unit of ingest. Applied whole or not at all, identified by its id, so
// that a retry never double-charges. Its text form is wire/batch.h's v1 format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"

namespace gpuledger {

struct Batch {
  int version = 1;  // of the text format it came in
  std::string batch_id;
  std::string source;  // the node or process that sent it
  std::vector<Device> devices;
  std::vector<Job> jobs;
  std::vector<Allocation> allocations;
  std::vector<Sample> samples;
  // FNV-1a 64 of the document's bytes when parsed from text (0 otherwise): a batch id
  // reused for different content is told apart from an honest retry.
  uint64_t content_digest = 0;
};

}  // namespace gpuledger
