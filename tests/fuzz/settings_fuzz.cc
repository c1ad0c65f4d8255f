// libFuzzer: a settings file (--config, hyperparameters.json) applied to every option a
// trainer, worker or launch takes. Applies, or throws ConfigError; nothing crashes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "tandem/cli/options.h"
#include "tandem/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/tandem-fuzz-XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  const std::string path = dir + "/settings.json";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  tandem::Settings s;
  CLI::App app;
  tandem::cli::add_cluster_options(app, s.cluster);
  tandem::cli::add_security_options(app, s.security);
  tandem::cli::add_data_options(app, s.data);
  tandem::cli::add_worker_options(app, s.worker);
  tandem::cli::add_trainer_options(app, s.trainer);
  s.cluster.config_file = path;
  s.cluster.sagemaker_root = dir + "/no-root";
  try {
    tandem::cli::apply_setting_files(app, s.cluster);
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
