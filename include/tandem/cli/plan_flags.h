// The flags `tandem plan` and `tandem report` share: instance types, prices, --within.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tandem/plan/plan_inputs.h"

namespace tandem::cli {

// Registers --trainer-type, --worker-type, --prices FILE, --price TYPE=DOLLARS (repeatable),
// --within and --max-workers on `app`, writing into the given variables.
void add_plan_flags(CLI::App& app, std::string& prices_file, std::vector<std::string>& prices,
                    plan::PlanOptions& options);

}  // namespace tandem::cli
