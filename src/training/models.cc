#include <torch/torch.h>

#include "model.h"
#include "tandem/common/error.h"

namespace tandem::training {
namespace {

namespace nn = torch::nn;

// A tiny CNN for the built-in synthetic task. Pools to a fixed 4x4 grid, so it keeps where
// things are (the synthetic label is a position) at any input size.
struct SmallCnnImpl : nn::Module {
  SmallCnnImpl(int64_t c, int64_t classes)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(c, 8, 3).padding(1)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)))),
        fc(register_module("fc", nn::Linear(16 * 4 * 4, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::adaptive_avg_pool2d(torch::relu(conv2(x)), {4, 4});
    return fc(x.flatten(1));
  }
  nn::Conv2d conv1, conv2;
  nn::Linear fc;
};
TORCH_MODULE(SmallCnn);

// The classic MNIST network of PyTorch's examples (without dropout, so runs stay
// reproducible across a checkpoint and resume).
struct MnistCnnImpl : nn::Module {
  MnistCnnImpl(int64_t c, int64_t classes)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(c, 32, 3)))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", nn::Linear(64 * 12 * 12, 128))),
        fc2(register_module("fc2", nn::Linear(128, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv2(torch::relu(conv1(x))));
    x = std::get<0>(torch::adaptive_max_pool2d(x, {12, 12}));
    return fc2(torch::relu(fc1(x.flatten(1))));
  }
  nn::Conv2d conv1, conv2;
  nn::Linear fc1, fc2;
};
TORCH_MODULE(MnistCnn);

nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

// torchvision's BasicBlock (expansion 1) and Bottleneck (expansion 4, stride on the 3x3).
struct BlockImpl : nn::Module {
  BlockImpl(int64_t in, int64_t width, int64_t stride, bool bottleneck) : bottleneck(bottleneck) {
    const int64_t out = bottleneck ? width * 4 : width;
    if (bottleneck) {
      body = register_module("body", nn::Sequential(conv(in, width, 1), nn::BatchNorm2d(width), nn::ReLU(),
                                                    conv(width, width, 3, stride), nn::BatchNorm2d(width), nn::ReLU(),
                                                    conv(width, out, 1), nn::BatchNorm2d(out)));
    } else {
      body = register_module("body", nn::Sequential(conv(in, width, 3, stride), nn::BatchNorm2d(width), nn::ReLU(),
                                                    conv(width, out, 3), nn::BatchNorm2d(out)));
    }
    if (stride != 1 || in != out) {
      shortcut = register_module("downsample", nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor identity = shortcut ? shortcut->forward(x) : x;
    return torch::relu(body->forward(x) + identity);
  }
  bool bottleneck;
  nn::Sequential body{nullptr}, shortcut{nullptr};
};
TORCH_MODULE(Block);

struct ResNetImpl : nn::Module {
  ResNetImpl(std::vector<int> depths, bool bottleneck, int64_t c, int64_t classes) {
    stem = register_module("stem", nn::Sequential(conv(c, 64, 7, 2), nn::BatchNorm2d(64), nn::ReLU(),
                                                  nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))));
    int64_t in = 64;
    nn::Sequential layers;
    for (size_t stage = 0; stage < depths.size(); ++stage) {
      const int64_t width = 64 << stage;
      for (int b = 0; b < depths[stage]; ++b) {
        layers->push_back(Block(in, width, b == 0 && stage > 0 ? 2 : 1, bottleneck));
        in = bottleneck ? width * 4 : width;
      }
    }
    body = register_module("layers", layers);
    fc = register_module("fc", nn::Linear(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = body->forward(stem->forward(x));
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  nn::Sequential stem{nullptr}, body{nullptr};
  nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

// A pre-norm transformer encoder block, as in ViT.
struct EncoderBlockImpl : nn::Module {
  EncoderBlockImpl(int64_t dim, int64_t heads, int64_t mlp)
      : norm1(register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6)))),
        attn(register_module("attn", nn::MultiheadAttention(nn::MultiheadAttentionOptions(dim, heads)))),
        norm2(register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6)))),
        mlp(register_module("mlp", nn::Sequential(nn::Linear(dim, mlp), nn::GELU(), nn::Linear(mlp, dim)))) {}
  torch::Tensor forward(torch::Tensor x) {  // (tokens, batch, dim)
    const torch::Tensor h = norm1(x);
    x = x + std::get<0>(attn->forward(h, h, h, {}, /*need_weights=*/false));
    return x + mlp->forward(norm2(x));
  }
  nn::LayerNorm norm1;
  nn::MultiheadAttention attn;
  nn::LayerNorm norm2;
  nn::Sequential mlp;
};
TORCH_MODULE(EncoderBlock);

struct VisionTransformerImpl : nn::Module {
  VisionTransformerImpl(int64_t c, int64_t side, int64_t classes, int64_t dim, int64_t depth, int64_t heads) {
    const int64_t patches = (side / 16) * (side / 16);
    patch = register_module("patch_embed", nn::Conv2d(nn::Conv2dOptions(c, dim, 16).stride(16)));
    cls = register_parameter("cls_token", torch::zeros({1, 1, dim}));
    pos = register_parameter("pos_embed", torch::randn({patches + 1, 1, dim}) * 0.02);
    for (int64_t i = 0; i < depth; ++i) blocks->push_back(EncoderBlock(dim, heads, 4 * dim));
    register_module("blocks", blocks);
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6)));
    head = register_module("head", nn::Linear(dim, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = patch(x).flatten(2).permute({2, 0, 1});  // (patches, batch, dim)
    x = torch::cat({cls.expand({1, x.size(1), cls.size(2)}), x}, 0) + pos;
    x = norm(blocks->forward(x));
    return head(x[0]);
  }
  nn::Conv2d patch{nullptr};
  torch::Tensor cls, pos;
  nn::Sequential blocks;
  nn::LayerNorm norm{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(VisionTransformer);

torch::nn::AnyModule vit(const data::DatasetInfo& info, int64_t dim, int64_t depth, int64_t heads) {
  const int64_t side = info.sample_shape[1];
  if (side % 16 != 0 || info.sample_shape[2] != side) {
    throw ConfigError("ViT models need square images whose side is a multiple of 16 (the patch size), got " +
                      std::to_string(info.sample_shape[1]) + "x" + std::to_string(info.sample_shape[2]) +
                      ": set --image-size");
  }
  return nn::AnyModule(VisionTransformer(info.sample_shape[0], side, info.num_classes, dim, depth, heads));
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"small_cnn", "mnist_cnn", "resnet18", "resnet50", "vit_tiny", "vit_b16"};
  return names;
}

torch::nn::AnyModule make_model(const std::string& name, const data::DatasetInfo& info) {
  if (info.sample_shape.size() != 3) throw ConfigError("models expect CHW samples");
  const int64_t c = info.sample_shape[0], classes = info.num_classes;
  if (name == "small_cnn") return nn::AnyModule(SmallCnn(c, classes));
  if (name == "mnist_cnn") return nn::AnyModule(MnistCnn(c, classes));
  if (name == "resnet18") return nn::AnyModule(ResNet(std::vector<int>{2, 2, 2, 2}, false, c, classes));
  if (name == "resnet50") return nn::AnyModule(ResNet(std::vector<int>{3, 4, 6, 3}, true, c, classes));
  if (name == "vit_tiny") return vit(info, 192, 12, 3);
  if (name == "vit_b16") return vit(info, 768, 12, 12);
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown --model '" + name + "': known models are " + known);
}

}  // namespace tandem::training
