// Model construction (Torch world only).
#pragma once

#include <string>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "tandem/data/dataset.h"

namespace tandem::training {

// Builds the model `name` for samples shaped like `info` (CHW, num_classes outputs).
// Throws ConfigError naming the known models for an unknown name.
torch::nn::AnyModule make_model(const std::string& name, const data::DatasetInfo& info);

}  // namespace tandem::training
