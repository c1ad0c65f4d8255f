// The Model interface's own methods, and the choice between a built-in and a
// TorchScript file (builtin_model.cc and script_model.cc each implement one kind).
#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <torch/torch.h>

#include "model.h"
#include "tandem/common/error.h"

namespace tandem::training {

torch::Tensor Model::loss(const torch::Tensor& outputs, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(outputs.to(torch::kFloat32), labels);
}

torch::Tensor Model::training_step(const NamedTensors& /*batch*/) {
  throw std::logic_error("training_step called on a model without one");
}

std::vector<torch::Tensor> Model::parameters() {
  std::vector<torch::Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<torch::Tensor> Model::buffers() {
  std::vector<torch::Tensor> out;
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

bool is_model_file(const std::string& spec) {
  const std::string ext = std::filesystem::path(spec).extension().string();
  return ext == ".pt" || ext == ".pth" || spec.find('/') != std::string::npos ||
         (std::filesystem::is_regular_file(spec) &&
          std::find(model_names().begin(), model_names().end(), spec) == model_names().end());
}

std::unique_ptr<Model> build_model(const std::string& spec, const data::DatasetInfo& info) {
  if (is_model_file(spec)) return load_script_model(spec, info);
  if (const std::string problem = data::classification_problem(info); !problem.empty()) {
    throw ConfigError("--model " + spec + ": " + problem);
  }
  return make_builtin_model(spec, info);
}

}  // namespace tandem::training
