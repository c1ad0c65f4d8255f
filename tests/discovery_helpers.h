// Shared by the discovery tests: environments as maps, a throwaway SageMaker root, the
// message of an expected ConfigError.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tandem/cluster/cluster.h"
#include "tandem/common/error.h"

namespace tandem::cluster::testing {

namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

inline const std::string kFakePath = "/fake/input/config/resourceconfig.json";

inline std::string fixture(const std::string& name) {
  std::ifstream in(fs::path(TANDEM_FIXTURES) / "resourceconfig" / name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline const EnvLookup kNoEnv = env_of({});

// A throwaway SageMaker root: <tmp>/tandem-cluster-test-<pid>-<n>/input/config/.
class TempRoot {
 public:
  TempRoot() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("tandem-cluster-test-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_ / "input" / "config");
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;

  void write_config(const std::string& text) const { std::ofstream(config_path()) << text; }
  std::string config_path() const { return (path_ / "input/config/resourceconfig.json").string(); }
  ClusterOptions options() const {
    ClusterOptions opts;
    opts.sagemaker_root = path_.string();
    return opts;
  }

 private:
  fs::path path_;
};

// Runs `f`, which must throw ConfigError, and returns its message.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ConfigError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ConfigError, nothing was thrown";
  return "";
}

inline std::string parse_error(const std::string& text) {
  return config_error([&] { parse_resource_config(text, kFakePath); });
}

inline std::string discover_error(const std::map<std::string, std::string>& vars) {
  return config_error([&] {
    ClusterOptions opts;
    opts.sagemaker_root = "/nonexistent-tandem-root";
    discover(opts, env_of(vars));
  });
}

inline ::testing::AssertionResult Mentions(const std::string& message,
                                    std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "\"" << part << "\" not in: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::cluster::testing
