// Built-in models as Models, their export under torchvision's names, and --model's
// dispatch between built-ins and TorchScript files.
#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "model.h"
#include "tandem/common/error.h"
#include "tandem/common/files.h"

namespace tandem::training {
namespace {

NamedTensors defined(const torch::OrderedDict<std::string, torch::Tensor>& items) {
  NamedTensors out;
  for (const auto& item : items) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

// "a.b.c" -> {"a", "b", "c"}
std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
    parts.push_back(name.substr(start, dot - start));
  }
  parts.push_back(name.substr(start));
  return parts;
}

std::string join_from(const std::vector<std::string>& parts, size_t from) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) out += (out.empty() ? "" : ".") + parts[i];
  return out;
}

// tandem's ResNet -> torchvision's: stem.{0,1} are conv1/bn1, layers.<i> is block b of
// stage s (layer<s+1>.<b>), whose body.{0,1,3,4,6,7} are conv1, bn1, conv2, bn2, conv3, bn3.
std::string torchvision_resnet_name(const std::string& name, const std::vector<int>& depths) {
  const std::vector<std::string> p = split_name(name);
  if (p[0] == "stem") return std::string(p[1] == "0" ? "conv1" : "bn1") + "." + join_from(p, 2);
  if (p[0] != "layers") return name;  // fc.*
  int flat = std::stoi(p[1]);
  size_t stage = 0;
  while (flat >= depths[stage]) flat -= depths[stage++];
  const std::string block = "layer" + std::to_string(stage + 1) + "." + std::to_string(flat) + ".";
  if (p[2] == "downsample") return block + "downsample." + join_from(p, 3);
  static const std::map<std::string, std::string> body = {{"0", "conv1"}, {"1", "bn1"}, {"3", "conv2"},
                                                          {"4", "bn2"},   {"6", "conv3"}, {"7", "bn3"}};
  return block + body.at(p[3]) + "." + join_from(p, 4);
}

// tandem's ViT -> torchvision's VisionTransformer (its MLP is Linear, GELU, Dropout, Linear).
std::string torchvision_vit_name(const std::string& name) {
  const std::vector<std::string> p = split_name(name);
  if (p[0] == "patch_embed") return "conv_proj." + join_from(p, 1);
  if (p[0] == "cls_token") return "class_token";
  if (p[0] == "pos_embed") return "encoder.pos_embedding";
  if (p[0] == "norm") return "encoder.ln." + join_from(p, 1);
  if (p[0] == "head") return "heads.head." + join_from(p, 1);
  const std::string layer = "encoder.layers.encoder_layer_" + p[1] + ".";
  if (p[2] == "norm1") return layer + "ln_1." + join_from(p, 3);
  if (p[2] == "norm2") return layer + "ln_2." + join_from(p, 3);
  if (p[2] == "attn") return layer + "self_attention." + join_from(p, 3);
  return layer + "mlp." + (p[3] == "0" ? "0" : "3") + "." + join_from(p, 4);  // mlp.{0,2}
}

// The torchvision constructor call that takes the exported weights, or "" for none.
std::string torchvision_loader(const std::string& name, const data::DatasetInfo& info) {
  const std::string classes = std::to_string(info.num_classes), side = std::to_string(info.sample_shape[1]);
  if (name == "resnet18" || name == "resnet50") return "torchvision.models." + name + "(num_classes=" + classes + ")";
  if (name == "vit_b16") return "torchvision.models.vit_b_16(num_classes=" + classes + ", image_size=" + side + ")";
  if (name == "vit_tiny") {
    return "torchvision.models.vision_transformer.VisionTransformer(image_size=" + side +
           ", patch_size=16, num_layers=12, num_heads=3, hidden_dim=192, mlp_dim=768, num_classes=" + classes + ")";
  }
  return "";
}

class BuiltinModel final : public Model {
 public:
  BuiltinModel(std::string name, const data::DatasetInfo& info)
      : name_(std::move(name)), info_(info), module_(make_model(name_, info)) {}

  torch::Tensor forward(const torch::Tensor& x) override { return module_.forward(x); }
  NamedTensors named_parameters() override { return defined(module_.ptr()->named_parameters()); }
  NamedTensors named_buffers() override { return defined(module_.ptr()->named_buffers()); }
  void train(bool on) override { module_.ptr()->train(on); }
  bool is_training() override { return module_.ptr()->is_training(); }
  void to(torch::Device device) override { module_.ptr()->to(device); }

  nlohmann::json save_for_python(const std::string& file) override {
    bool torchvision = false;
    const NamedTensors state = python_state_dict(name_, *module_.ptr(), &torchvision);
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [key, tensor] : state) dict.insert(key, tensor);
    const std::vector<char> bytes = torch::pickle_save(dict);
    write_file_atomically(file, std::string(bytes.begin(), bytes.end()));
    const std::string ctor = torchvision_loader(name_, info_);
    nlohmann::json meta = {{"format", "state_dict"}, {"parameter_names", torchvision ? "torchvision" : "tandem"}};
    if (!ctor.empty()) {
      meta["python"] = "import torch, torchvision; model = " + ctor +
                       "; model.load_state_dict(torch.load('model.pt', weights_only=False)); model.eval()";
    } else {
      meta["python"] = "state = torch.load('model.pt', weights_only=False): tandem's " + name_ +
                       " has no torchvision equivalent; docs/models.md has a matching Python class";
    }
    return meta;
  }

 private:
  std::string name_;
  data::DatasetInfo info_;
  torch::nn::AnyModule module_;
};

}  // namespace

NamedTensors python_state_dict(const std::string& name, torch::nn::Module& model, bool* torchvision) {
  const bool resnet = name == "resnet18" || name == "resnet50", vit = name == "vit_b16" || name == "vit_tiny";
  if (torchvision) *torchvision = resnet || vit;
  const std::vector<int> depths = name == "resnet18" ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
  NamedTensors out;
  torch::NoGradGuard no_grad;
  NamedTensors all = defined(model.named_parameters());
  for (auto& b : defined(model.named_buffers())) all.push_back(std::move(b));
  for (auto& [key, tensor] : all) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous().clone();
    std::string out_key = key;
    if (resnet) out_key = torchvision_resnet_name(key, depths);
    if (vit) {
      out_key = torchvision_vit_name(key);
      if (key == "pos_embed") t = t.permute({1, 0, 2}).contiguous();  // (tokens, 1, D) -> (1, tokens, D)
    }
    out.emplace_back(std::move(out_key), std::move(t));
  }
  return out;
}

std::unique_ptr<Model> make_builtin_model(const std::string& name, const data::DatasetInfo& info) {
  return std::make_unique<BuiltinModel>(name, info);
}

}  // namespace tandem::training
