#include "python_options.h"

#include "tandem/cli/options.h"

namespace tandem::cli {

void add_python_options(CLI::App& app, DataOptions& o) {
  app.add_option("--data-args", o.data_args, "--data python:FILE:NAME: NAME's keyword arguments, a JSON object")
      ->capture_default_str()->group(kDataGroup);
  app.add_option("--python", o.python, "--data python:... and --script: the interpreter; default $TANDEM_PYTHON (set by the wheel's tandem: its Python), else /usr/bin/python3, else python3")
      ->group(kDataGroup);
  app.add_option("--python-procs", o.python_procs, "--data python:...: Python processes; 0 = the worker's --threads")
      ->capture_default_str()->check(in_range(0, 4096))->group(kDataGroup);
  app.add_option("--python-native", o.python_native,
                 "--data python:...: auto = a torchvision ImageFolder and its transforms made in C++ where they "
                 "translate, the rest in Python (docs/datasets.md); off = all of it run as Python")
      ->capture_default_str()->check(CLI::IsMember({"auto", "off"}))->group(kDataGroup);
  app.add_option("--sample-timeout", o.sample_timeout_s,
                 "--data python:...: a sample taking longer kills its process and is a bad sample (seconds)")
      ->capture_default_str()->check(in_range(0.001, 86400.0))->group(kDataGroup);
}

}  // namespace tandem::cli
