#include "tandem/data/sources/file_dataset.h"

#include <filesystem>
#include <stdexcept>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {

std::pair<std::string, std::string> split_source(const std::string& data) {
  const size_t colon = data.find(':');
  if (colon == std::string::npos) return {data, ""};
  return {data.substr(0, colon), data.substr(colon + 1)};
}

std::string data_path(const DataOptions& opts) {
  const auto [source, path] = split_source(opts.data);
  if (!path.empty()) {
    // A brace pattern names files the kind checks one by one.
    const bool pattern = source_kind(opts.data).brace_patterns && path.find('{') != std::string::npos;
    if (!pattern && !std::filesystem::exists(path)) {
      throw ConfigError("--data " + printable(opts.data, 200) + ": " + printable(path, 200) +
                        " does not exist: check the path");
    }
    return path;
  }
  const std::string channel = opts.sagemaker_root + "/input/data/" + opts.channel;
  if (!std::filesystem::exists(channel)) {
    const std::string named = printable(opts.channel, 80), shown = printable(source, 80);
    throw ConfigError("--data " + shown + " reads the SageMaker channel '" + named + "' at " +
                      printable(channel, 300) + ", which does not exist: give the job a '" + named +
                      "' input channel, pick another with --channel, or pass --data " + shown + ":PATH");
  }
  return channel;
}

std::string python_file_of(const DataOptions& opts) {
  const std::string rest = split_source(opts.data).second;
  const size_t colon = rest.rfind(':');
  return colon == std::string::npos ? rest : rest.substr(0, colon);
}

namespace {

bool python_file_is_here(const DataOptions& opts) {
  std::error_code ec;
  return std::filesystem::is_regular_file(python_file_of(opts), ec);
}

}  // namespace

bool dataset_is_here(const DataOptions& opts) {
  const SourceNeeds needs = source_kind(opts.data).needs;
  // A Python dataset is here when its FILE is: a trainer with it makes samples on its own
  // cores too (through its own pool) and checks the workers' fingerprint against its own.
  if (needs == SourceNeeds::kPythonFile) return python_file_is_here(opts);
  if (needs == SourceNeeds::kNothing) return true;
  try {
    data_path(opts);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

uint64_t samples_per_epoch(uint64_t requested, uint64_t available, const std::string& what) {
  if (available == 0) throw ConfigError(what + " holds no samples: add data or point --data elsewhere");
  if (requested == 0) return available;
  if (requested > available) {
    throw ConfigError("--dataset-size " + std::to_string(requested) + " exceeds the " + std::to_string(available) +
                      " samples of " + what + ": lower it, or 0 for all");
  }
  return requested;
}

void check_sample_index(uint64_t index, const DatasetInfo& info) {
  if (index >= info.size) {
    throw std::out_of_range("sample index " + std::to_string(index) + " is outside dataset '" + info.name +
                            "' of " + std::to_string(info.size) + " samples");
  }
}

}  // namespace tandem::data
