// Models (Torch world only). The trainer trains a Model: one of tandem's built-ins
// (torchvision/timm-equivalent architectures with a configurable number of classes and
// input size) or a TorchScript module the user saved from Python.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "fields.h"
#include "tandem/data/core/dataset.h"

namespace tandem::training {

class Model {
 public:
  virtual ~Model() = default;

  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // The training objective: cross-entropy over [N, classes] outputs, or the module's own
  // `loss(outputs, labels)`. `labels` are int64 [N], or soft targets, float32
  // [N, classes] with rows summing to 1, when batches are mixed or labels smoothed
  // (batch_mix.h).
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels);
  // Throws ConfigError when loss() cannot take soft targets for `classes` classes
  // (cross-entropy can; a TorchScript module's own loss is tried on a zero batch).
  virtual void check_soft_targets(int64_t /*classes*/) {}

  // Whether the model trains through training_step (a TorchScript module that defines
  // `training_step(self, batch: Dict[str, Tensor]) -> Tensor`) rather than forward + loss.
  virtual bool has_training_step() const { return false; }
  // The scalar loss of one batch of named device tensors (DeviceBatch::fields).
  // REQUIRES: has_training_step().
  virtual torch::Tensor training_step(const NamedTensors& batch);

  // Every parameter and buffer by its dotted name, in registration order (the tensors
  // are the model's own: changing them changes the model).
  virtual NamedTensors named_parameters() = 0;
  virtual NamedTensors named_buffers() = 0;
  std::vector<torch::Tensor> parameters();
  std::vector<torch::Tensor> buffers();

  virtual void train(bool on) = 0;
  virtual bool is_training() = 0;
  virtual void to(torch::Device device) = 0;

  // Writes the model to `file` so that Python can use it with nothing of tandem's (as
  // model.pt), and returns what model.json should say about it (format, how to load it).
  virtual nlohmann::json save_for_python(const std::string& file) = 0;
};

// --model: a built-in's name, or the path of a TorchScript file (ending in .pt or .pth,
// or any existing file). A TorchScript module is checked on one zero batch of two samples
// shaped like `info`'s before training: ConfigError when the file is not TorchScript, has
// no trainable parameters, or its outputs (or its loss) do not fit the data; one with
// training_step is called on a batch built from the schema (device_feed.h's
// schema_batch) and must
// return a scalar. A built-in, or a module without training_step, needs an 'image' and a
// 'label' (ConfigError naming training_step as the way to train on other fields).
std::unique_ptr<Model> build_model(const std::string& spec, const data::DatasetInfo& info);

// Whether --model names a file rather than a built-in.
bool is_model_file(const std::string& spec);

// The built-in `name` as a LibTorch module, for samples shaped like `info` (CHW,
// num_classes outputs). Throws ConfigError naming the known models for an unknown name,
// or the constraint a model puts on the input (e.g. ViT's side must be a multiple of 16).
torch::nn::AnyModule make_model(const std::string& name, const data::DatasetInfo& info);

// The names make_model accepts.
const std::vector<std::string>& model_names();

// A built-in's parameters and buffers under torchvision's names (resnet18, resnet50,
// vit_b16 and vit_tiny match torchvision's ResNet and VisionTransformer), or under
// tandem's own names for the others; tensors on the CPU, contiguous. `torchvision` says
// which.
NamedTensors python_state_dict(const std::string& name, torch::nn::Module& model, bool* torchvision = nullptr);

// Loads a TorchScript file as a Model (script_model.cc: the only TU that parses the JIT).
std::unique_ptr<Model> load_script_model(const std::string& path, const data::DatasetInfo& info);

// A built-in model by name (one of model_names()), shaped for `info`'s samples and
// classes. Throws ConfigError for an unknown name.
std::unique_ptr<Model> make_builtin_model(const std::string& name, const data::DatasetInfo& info);

}  // namespace tandem::training
