#include "model.h"

#include <torch/torch.h>

#include "tandem/common/error.h"

namespace tandem::training {
namespace {

// Two conv blocks and a linear head. Pools to a fixed 4x4 grid, so it keeps where
// things are (the synthetic task's label is a position) at any input size.
struct SmallCnnImpl : torch::nn::Module {
  SmallCnnImpl(int64_t channels, int64_t classes)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 8, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(16 * 4 * 4, classes))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::relu(conv2(x));
    x = torch::adaptive_avg_pool2d(x, {4, 4});
    return fc(x.flatten(1));
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(SmallCnn);

}  // namespace

torch::nn::AnyModule make_model(const std::string& name, const data::DatasetInfo& info) {
  if (info.sample_shape.size() != 3) throw ConfigError("models expect CHW samples");
  if (name == "small_cnn") return torch::nn::AnyModule(SmallCnn(info.sample_shape[0], info.num_classes));
  throw ConfigError("unknown --model '" + name + "': known models are small_cnn");
}

}  // namespace tandem::training
