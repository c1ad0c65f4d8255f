// TorchScript models: a module the user scripted or traced in Python and saved, trained
// like a built-in. The only translation unit that parses the JIT's headers.
#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/version.h>
#include <torch/torch.h>

#include "model.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::training {
namespace {

// The line of a LibTorch error that says what went wrong, made safe: the first, or the
// last after a TorchScript traceback (the interpreter's errors put the cause at the end).
std::string headline(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10 ? c10->what_without_backtrace() : e.what();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.find("Traceback of TorchScript") != std::string::npos) return printable(msg.substr(msg.rfind('\n') + 1), 300);
  return printable(msg.substr(0, msg.find('\n')), 300);
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

class ScriptModel final : public Model {
 public:
  ScriptModel(torch::jit::Module module, std::string path)
      : module_(std::move(module)), path_(std::move(path)), has_loss_(module_.find_method("loss").has_value()),
        has_training_step_(module_.find_method("training_step").has_value()) {}

  torch::Tensor forward(const torch::Tensor& x) override { return module_.forward({x}).toTensor(); }

  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels) override {
    if (!has_loss_) return Model::loss(outputs, labels);
    return module_.get_method("loss")({outputs, labels}).toTensor();
  }

  // The module's loss on zero outputs [2, classes] and uniform soft targets, without
  // gradients: a floating-point scalar, or a ConfigError naming the fix.
  void check_soft_targets(int64_t classes) override {
    if (!has_loss_) return;
    torch::NoGradGuard no_grad;
    const torch::Tensor y = torch::zeros({2, classes});
    const std::string what = "outputs " + shape_text(y.sizes()) + " and soft targets float32 " + shape_text(y.sizes());
    const std::string fix = ": --mixup, --cutmix and --label-smoothing give loss(outputs, labels) each sample's "
                            "class probabilities, float32 [N, classes], in place of int64 labels [N] (docs/models.md); "
                            "make it accept them (F.cross_entropy takes both) or leave those flags at 0";
    c10::IValue l;
    try {
      l = module_.get_method("loss")({y, torch::full({2, classes}, 1.0 / static_cast<double>(classes))});
    } catch (const std::exception& e) {
      throw ConfigError("--model " + path_ + "'s loss(outputs, labels) fails on " + what + ": " + headline(e) + fix);
    }
    if (!l.isTensor() || l.toTensor().numel() != 1 || !l.toTensor().is_floating_point()) {
      throw ConfigError("--model " + path_ + "'s loss(outputs, labels) does not return a floating-point scalar for " +
                        what + fix);
    }
  }

  bool has_training_step() const override { return has_training_step_; }
  torch::Tensor training_step(const NamedTensors& batch) override {
    c10::IValue loss;
    try {
      loss = call_training_step(batch);
    } catch (const std::exception& e) {
      throw Error("--model " + path_ + "'s training_step failed on a batch of " + batch_text(batch) + ": " +
                  headline(e));
    }
    return loss.toTensor();
  }

  NamedTensors named_parameters() override {
    NamedTensors out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
    return out;
  }

  NamedTensors named_buffers() override {
    NamedTensors out;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) out.emplace_back(b.name, b.value);
    return out;
  }

  void train(bool on) override { module_.train(on); }
  bool is_training() override { return module_.is_training(); }
  void to(torch::Device device) override { module_.to(device); }

  // The trained module itself, on the CPU and in eval mode: torch.jit.load gives a model
  // ready to predict.
  nlohmann::json save_for_python(const std::string& file) override {
    torch::jit::Module copy = module_.deepcopy();
    copy.to(torch::kCPU);
    copy.eval();
    copy.save(file);
    return {{"format", "torchscript"},
            {"source", path_},
            {"custom_loss", has_loss_},
            {"training_step", has_training_step_},
            {"python", "import torch; model = torch.jit.load('model.pt')"}};
  }

  // A module with training_step is checked on the schema's batch; one without must fit
  // a classification dataset.
  void check_fits(const data::DatasetInfo& info) {
    if (has_training_step_) return check_training_step(info);
    if (const std::string problem = data::classification_problem(info); !problem.empty()) {
      throw ConfigError("--model " + path_ + " has no training_step method: " + problem);
    }
    check_forward(info);
  }

 private:
  c10::IValue call_training_step(const NamedTensors& batch) {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, t] : batch) dict.insert(name, t);
    return module_.get_method("training_step")({dict});
  }

  // One zero batch of two samples shaped like the data, in eval mode and without
  // gradients: the outputs must be [2, classes] and the loss (when the module has one) a
  // scalar.
  void check_forward(const data::DatasetInfo& info) {
    torch::NoGradGuard no_grad;
    module_.eval();
    std::vector<int64_t> shape = {2};
    shape.insert(shape.end(), info.sample_shape.begin(), info.sample_shape.end());
    const std::string batch = "a float32 batch shaped " + shape_text(shape) + " (dataset " + info.name + ")";
    c10::IValue out;
    try {
      out = module_.forward({torch::zeros(shape)});
    } catch (const std::exception& e) {
      throw ConfigError("--model " + path_ + " fails on " + batch + ": " + headline(e) +
                        ": its forward must take images shaped [N, C, H, W] like the data (check --image-size)");
    }
    const std::string want = "[N, classes] = [2, " + std::to_string(info.num_classes) + "]";
    if (!out.isTensor()) {
      throw ConfigError("--model " + path_ + " returns a " + out.tagKind() + " for " + batch +
                        ", not a tensor: its forward must return class scores shaped " + want);
    }
    const torch::Tensor y = out.toTensor();
    if (y.dim() != 2 || y.size(0) != 2 || y.size(1) != info.num_classes) {
      throw ConfigError("--model " + path_ + " returns outputs shaped " + shape_text(y.sizes()) + " for " + batch +
                        "; tandem needs " + want + " for the dataset's " + std::to_string(info.num_classes) +
                        " classes: change the model's last layer");
    }
    if (has_loss_) check_loss(y);
    module_.train();
  }

  void check_loss(const torch::Tensor& y) {
    c10::IValue l;
    try {
      l = module_.get_method("loss")({y, torch::zeros({2}, torch::kInt64)});
    } catch (const std::exception& e) {
      throw ConfigError("--model " + path_ + "'s loss(outputs, labels) fails on outputs " + shape_text(y.sizes()) +
                        " and int64 labels [2]: " + headline(e));
    }
    if (!l.isTensor() || l.toTensor().numel() != 1 || !l.toTensor().is_floating_point()) {
      throw ConfigError("--model " + path_ + "'s loss(outputs, labels) must return a floating-point scalar tensor");
    }
  }

  // training_step on two zero samples of every field (schema_batch), in eval mode but
  // with gradients: the loss must be a floating-point scalar that the parameters' gradients
  // can come from, or the first step's backward would fail.
  void check_training_step(const data::DatasetInfo& info) {
    const NamedTensors batch = schema_batch(info);
    const std::string what = "a batch of 2 zero samples built from dataset " + info.name + "'s schema (" +
                             batch_text(batch) + ")";
    const std::string contract = "training_step(self, batch: Dict[str, Tensor]) -> Tensor must return the loss as a "
                                 "floating-point scalar tensor (docs/models.md)";
    module_.eval();
    c10::IValue out;
    try {
      out = call_training_step(batch);
    } catch (const std::exception& e) {
      throw ConfigError("--model " + path_ + "'s training_step fails on " + what + ": " + headline(e) + ": " + contract);
    }
    module_.train();
    if (!out.isTensor()) {
      throw ConfigError("--model " + path_ + "'s training_step returns a " + out.tagKind() + " for " + what + ": " +
                        contract);
    }
    const torch::Tensor loss = out.toTensor();
    if (loss.numel() != 1 || !loss.is_floating_point()) {
      throw ConfigError("--model " + path_ + "'s training_step returns " + tensor_text(loss) + " for " + what + ": " +
                        contract + " (reduce it, e.g. with .mean())");
    }
    if (!loss.requires_grad()) {
      throw ConfigError("--model " + path_ + "'s training_step returns a loss without a gradient for " + what +
                        ": compute it from the module's parameters (not under torch.no_grad(), not detached)");
    }
  }

  torch::jit::Module module_;
  std::string path_;
  bool has_loss_;
  bool has_training_step_;
};

}  // namespace

std::unique_ptr<Model> load_script_model(const std::string& path, const data::DatasetInfo& info) {
  if (!std::filesystem::is_regular_file(path)) {
    throw ConfigError("--model " + path + ": no such file (give a built-in's name or a TorchScript file)");
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, torch::kCPU);
  } catch (const c10::Error& e) {
    throw ConfigError("--model " + path + " is not a TorchScript file this LibTorch (" + TORCH_VERSION +
                      ") can load: " + headline(e) + ". Save the model with torch.jit.script(model).save(path) "
                      "(or torch.jit.trace), not torch.save, from a PyTorch no newer than " + TORCH_VERSION);
  }
  int64_t trainable = 0;
  for (const auto& p : module.parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  if (trainable == 0) {
    throw ConfigError("--model " + path + " has no trainable parameters (none with requires_grad): nothing to train");
  }
  auto model = std::make_unique<ScriptModel>(std::move(module), path);
  model->check_fits(info);
  return model;
}

}  // namespace tandem::training
