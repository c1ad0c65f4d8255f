// What the Python tests share: /usr/bin/python3 with numpy, and the fixture files.
#pragma once

#include <cstdlib>
#include <string>

namespace tandem::testing {

// Every Python test needs /usr/bin/python3 with numpy; without it they say so and skip.
inline bool have_numpy() {
  static const bool yes = std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0;
  return yes;
}

inline const std::string kPythonFixtures = std::string(TANDEM_FIXTURES) + "/python_datasets";

}  // namespace tandem::testing

#define REQUIRE_NUMPY()                 \
  if (!::tandem::testing::have_numpy()) \
  GTEST_SKIP() << "/usr/bin/python3 cannot import numpy (apt-get install python3-numpy)"
