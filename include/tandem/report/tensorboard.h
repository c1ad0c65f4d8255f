// TensorBoard event files, written as TensorBoard and SageMaker's TensorBoard read them:
// DIR/events.out.tfevents.<seconds>.<host>, a sequence of TFRecords (the length as 8
// bytes little-endian, its masked CRC-32C, the bytes, their masked CRC-32C), each an
// Event message (proto/tandem/v1/tensorboard.proto): first the file version, then one
// event per logged step with its scalars. MetricsLog writes one beside metrics.jsonl.
#pragma once

#include <memory>

#include "tandem/report/record_file.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::report {

// CRC-32C (Castagnoli) of `bytes`, masked as TFRecord does: ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

class TensorBoardLog {
 public:
  // Creates `dir` and the event file in it, with its file-version record. Throws
  // std::runtime_error naming the path when it cannot be written.
  explicit TensorBoardLog(const std::string& dir);

  // One event at `step` with these scalars (tag, value); values that are not finite are
  // left out.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  const std::string& path() const { return path_; }

 private:
  void record(const std::string& bytes);

  std::string path_;
  std::unique_ptr<RecordFile> out_;  // a disk full for a while loses no event (record_file.h)
};

// Where a run's event files go: the LocalPath of SageMaker's TensorBoard output config
// (<root>/input/config/tensorboardoutputconfig.json; <root>/output/tensorboard, i.e.
// /opt/ml/output/tensorboard, when it names none) when the job has one, else
// `summary_dir`/tensorboard.
std::string tensorboard_dir(const std::string& sagemaker_root, const std::string& summary_dir);

}  // namespace tandem::report
