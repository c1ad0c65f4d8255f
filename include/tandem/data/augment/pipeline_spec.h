// The text of --pipeline: an ordered list of augmentation steps, each a name with
// numeric parameters, e.g.
//
//   decode,random_resized_crop(224),hflip,color_jitter(0.4,0.4,0.4),to_uint8
//   ["decode", "random_resized_crop(224)", {"op": "color_jitter", "brightness": 0.4}]
//   decode,random_resized_crop(224),python(my_aug.py:augment)
//   [..., {"op": "python", "file": "my_aug.py", "function": "augment"}]
//
// Steps are separated by commas or newlines outside parentheses; parameters are
// positional or `name=value`. Every step's parameters, their order and defaults are in
// docs/configuration.md (and the table of steps in pipeline_ops.cc).
#pragma once

#include <string>
#include <vector>

namespace tandem::data {

struct StepSpec {
  std::string op;              // e.g. "random_resized_crop"
  std::vector<double> params;  // every parameter of `op`, in its declared order, defaults filled in
  // python(FILE:FUNCTION) only: FILE made absolute, FUNCTION, and a hash of FILE's bytes
  // (read when the spec is parsed, so that the fingerprint covers the code).
  std::string file, function, code;
  // A python() step a torchvision dataset's transform translates to (JSON only): the part of
  // its transform tandem has no steps for, {"args", "from", "to", "domain"} as JSON text,
  // run on NAME(**args)'s transform (python/tandem/_torchvision_native.py); "" otherwise.
  std::string transforms;
  // random_choice and random_order (JSON only): the steps it picks one of, or runs in a
  // random order; random_choice's params are their weights, summing to 1.
  std::vector<StepSpec> steps;

  // The value of parameter `name` of this step's op. REQUIRES: `name` is one of op's parameters.
  double param(const std::string& name) const;
};

struct PipelineSpec {
  std::vector<StepSpec> steps;

  // One normalised line naming every parameter, e.g. "decode(channels=0,scaled=1),hflip(p=0.5)":
  // equal specs give equal text, so it goes into the dataset fingerprint.
  std::string canonical() const;
};

// Parses --pipeline text (the list form or a JSON array). Throws ConfigError naming the step
// and the problem: unknown op or parameter, a missing or out-of-range value, a python()
// step whose FILE is not a readable file.
PipelineSpec parse_pipeline(const std::string& text);

}  // namespace tandem::data
