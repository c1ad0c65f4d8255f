// Internal to the pipeline's parser (pipeline_spec.cc, pipeline_ops.cc): the table of
// steps, their parameters and defaults (torchvision's), and how a step's written values
// become its full parameter list.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tandem/data/augment/pipeline_spec.h"

namespace tandem::data::pipeline_ops {

inline constexpr double kRequired = std::numeric_limits<double>::quiet_NaN();

struct ParamDef {
  const char* name;
  double fallback;  // kRequired: must be given
  std::vector<std::string> choices = {};  // named values (auto_augment's policy): the value is the index
};

struct OpDef {
  const char* name;
  std::vector<ParamDef> params;
  bool variadic = false;  // normalize: any count of positional values
};

// Every step, its parameters in positional order and their defaults.
const std::vector<OpDef>& ops();
const OpDef* find_op(const std::string& name);  // nullptr for none

// Throws the ConfigError about step `step` (as written) naming `problem`.
[[noreturn]] void fail(const std::string& step, const std::string& problem);

std::string trim(const std::string& s);
std::string format_number(double v);  // as the canonical text writes numbers

// `token` as a number; fail()s naming `text` when it is not one.
double parse_number(const std::string& text, const std::string& token);

// Checks a bound step's values (ranges, sizes, choices); fail()s naming `text`.
void validate(const std::string& text, const StepSpec& s);

// Positional and named values (torchvision's names and tuples too) -> the op's full
// parameter list, defaults filled in; unknown steps and parameters get the nearest name.
StepSpec bind_params(const std::string& text, const std::string& name, const std::vector<std::string>& positional,
                     const std::vector<std::pair<std::string, std::string>>& named);

}  // namespace tandem::data::pipeline_ops
