// What the Python tests share: /usr/bin/python3 with numpy, and the fixture files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/common/error.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::testing {

// Every Python test needs /usr/bin/python3 with numpy; without it they say so and skip.
inline bool have_numpy() {
  static const bool yes = std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0;
  return yes;
}

inline const std::string kPythonFixtures = std::string(TANDEM_FIXTURES) + "/python_datasets";

// --data python:FILE:NAME (FILE: the fixtures' datasets.py) with `procs` processes of /usr/bin/python3.
inline DataOptions python_data(const std::string& name, const std::string& args = "{}", int procs = 2,
                               const std::string& file = kPythonFixtures + "/datasets.py") {
  DataOptions d;
  d.data = "python:" + file + ":" + name;
  d.data_args = args;
  d.python = "/usr/bin/python3";
  d.python_procs = procs;
  return d;
}

// Sample `index` of `epoch` as bytes (and its label into *label when asked).
inline std::vector<std::byte> sample(const data::Dataset& ds, uint64_t index, uint32_t epoch,
                                     int64_t* label = nullptr) {
  std::vector<std::byte> out(ds.info().sample_bytes());
  const int64_t l = ds.produce(index, epoch, out);
  if (label) *label = l;
  return out;
}

// The message of the ConfigError that building `d` throws ("" if none).
inline std::string start_error(const DataOptions& d, const DataRole& role = {}) {
  try {
    data::make_dataset(d, role);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The message of the DataError that producing `index` throws ("" if none).
inline std::string sample_error(const data::Dataset& ds, uint64_t index) {
  try {
    sample(ds, index, 0);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tandem::testing

#define REQUIRE_NUMPY()                 \
  if (!::tandem::testing::have_numpy()) \
  GTEST_SKIP() << "/usr/bin/python3 cannot import numpy (apt-get install python3-numpy)"
