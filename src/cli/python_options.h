// The flags of users' Python code (--data python:FILE:NAME, python() steps, --script):
// the interpreter, its processes, how long one sample may take, and whether a torchvision
// image folder is made natively. Part of add_data_options (options.h).
#pragma once

#include <CLI/CLI.hpp>

#include "tandem/data/core/options.h"

namespace tandem::cli {

void add_python_options(CLI::App& app, DataOptions& o);

}  // namespace tandem::cli
