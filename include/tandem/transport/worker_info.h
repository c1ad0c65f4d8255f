// What a data worker says about itself: the answer to the Info RPC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/batching/batch.h"

namespace tandem::transport {

struct WorkerInfo {
  std::string dataset;
  uint64_t size = 0;
  std::string fingerprint;
  std::string fingerprint_description;  // what the fingerprint hashes (data::DatasetInfo::description)
  std::vector<int64_t> sample_shape;
  data::DType dtype = data::DType::kFloat32;
  int num_classes = 0;
  std::vector<float> mean, std;
  std::vector<std::string> class_names;  // label -> name; empty when the labels have none
  std::vector<data::FieldSpec> fields;   // the schema (data::DatasetInfo::schema()); empty: image and label
  int threads = 0;
  std::string host;
  std::vector<std::string> skipped;  // files it could not use (--on-bad-sample skip)
  uint64_t skipped_count = 0;
  std::string determinism_problem;  // data::Dataset::determinism_problem(); "" when deterministic
};

}  // namespace tandem::transport
