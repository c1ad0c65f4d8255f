// The model zoo (Torch world only): torchvision/timm-equivalent architectures with a
// configurable number of classes and input size.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "tandem/data/dataset.h"

namespace tandem::training {

// Builds the model `name` for samples shaped like `info` (CHW, num_classes outputs).
// Throws ConfigError naming the known models for an unknown name, or the constraint a
// model puts on the input (e.g. ViT's side must be a multiple of its patch size).
torch::nn::AnyModule make_model(const std::string& name, const data::DatasetInfo& info);

// The names make_model accepts.
const std::vector<std::string>& model_names();

}  // namespace tandem::training
