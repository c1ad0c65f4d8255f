// Your model in, your model out: TorchScript files saved in Python train like built-ins
// (custom loss, two ranks, checkpoints), bad files are refused with the reason, and what
// tandem writes at the end runs in Python (Debian's python3-torch) with equal outputs.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "training/model.h"

namespace tandem::training {
namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

const fs::path kModels = fs::path(TANDEM_FIXTURES) / "models";

data::DatasetInfo image_info(std::vector<int64_t> shape = {3, 32, 32}, int classes = 10) {
  data::DatasetInfo info;
  info.name = "synthetic";
  info.size = 1000;
  info.sample_shape = std::move(shape);
  info.num_classes = classes;
  return info;
}

std::string build_error(const std::string& spec, const data::DatasetInfo& info = image_info()) {
  try {
    build_model(spec, info);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

bool python_has_torch() {
  return std::system("/usr/bin/python3 -c 'import torch, torchvision' > /dev/null 2>&1") == 0;
}

void save_tensor(const torch::Tensor& t, const fs::path& file) {
  const std::vector<char> bytes = torch::pickle_save(t);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs tests/python/check_model.py: Python loads `model_file` as `kind` says and must
// give `expected` for `x`.
void expect_python_agrees(const std::string& kind, const fs::path& model_file, const torch::Tensor& x,
                          const torch::Tensor& expected, const fs::path& dir) {
  save_tensor(x, dir / "x.pt");
  save_tensor(expected, dir / "y.pt");
  const std::string cmd = "/usr/bin/python3 " + (fs::path(TANDEM_FIXTURES) / "../python/check_model.py").string() +
                          " '" + kind + "' " + model_file.string() + " " + (dir / "x.pt").string() + " " +
                          (dir / "y.pt").string() + " > " + (dir / "python.log").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "python.log");
}

TEST(ScriptModels, BadFilesAreRefusedWithTheReasonAndTheFix) {
  EXPECT_NE(build_error((kModels / "missing.pt").string()).find("no such file"), std::string::npos);
  const std::string not_script = build_error((kModels / "state_dict_not_torchscript.pt").string());
  EXPECT_NE(not_script.find("is not a TorchScript file"), std::string::npos) << not_script;
  EXPECT_NE(not_script.find("torch.jit.script(model).save(path)"), std::string::npos) << not_script;
  const std::string no_params = build_error((kModels / "no_parameters.pt").string());
  EXPECT_NE(no_params.find("no trainable parameters"), std::string::npos) << no_params;
  const std::string five = build_error((kModels / "five_classes.pt").string());
  EXPECT_NE(five.find("returns outputs shaped [2, 5]"), std::string::npos) << five;
  EXPECT_NE(five.find("[N, classes] = [2, 10]"), std::string::npos) << five;
  const std::string bad_loss = build_error((kModels / "bad_loss.pt").string());
  EXPECT_NE(bad_loss.find("loss(outputs, labels) must return a floating-point scalar"), std::string::npos)
      << bad_loss;
  const std::string gray = build_error((kModels / "tiny_net.pt").string(), image_info({1, 28, 28}));
  EXPECT_NE(gray.find("fails on a float32 batch shaped [2, 1, 28, 28]"), std::string::npos) << gray;
  EXPECT_NE(build_error("resnet19").find("unknown --model 'resnet19'"), std::string::npos);
}

TEST(ScriptModels, AModulesOwnLossReplacesCrossEntropy) {
  const torch::Tensor x = torch::randn({4, 3, 32, 32});
  const torch::Tensor y = torch::tensor({1, 2, 3, 4});
  const auto smoothed = build_model((kModels / "tiny_net.pt").string(), image_info());
  const torch::Tensor out = smoothed->forward(x);
  EXPECT_TRUE(torch::allclose(smoothed->loss(out, y),
                              torch::nn::functional::cross_entropy(
                                  out, y, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1))));
  EXPECT_FALSE(torch::allclose(smoothed->loss(out, y), torch::nn::functional::cross_entropy(out, y)));
  const auto plain = build_model((kModels / "plain_net_traced.pt").string(), image_info());
  const torch::Tensor plain_out = plain->forward(x);
  EXPECT_TRUE(torch::allclose(plain->loss(plain_out, y), torch::nn::functional::cross_entropy(plain_out, y)));
  EXPECT_EQ(smoothed->named_buffers().size(), 3u) << "BatchNorm's running mean, variance and count";
}

TEST(ScriptModels, TrainsOnTwoRanksAndTheResultRunsInPython) {
  const fs::path dir = fresh_dir("script-model");
  const fs::path model = kModels / "tiny_net.pt";
  ASSERT_EQ(run_tandem("simulate --model " + model.string() + " --procs-per-host 2 --worker-hosts 1 --steps 12"
                       " --batch-size 8 --log-every 4 --run-dir " + (dir / "run").string() + " --summary-json " +
                       (dir / "s.json").string(),
                       dir / "run.log", 240),
            0)
      << slurp(dir / "run.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(s["world_size"], 2);
  ASSERT_EQ(s["param_checksums"].size(), 2u);
  EXPECT_EQ(s["param_checksums"][0], s["param_checksums"][1]) << "ranks diverged";
  const fs::path out = s["model_file"].get<std::string>();
  const auto meta = nlohmann::json::parse(slurp(out.parent_path() / "model.json"));
  EXPECT_EQ(meta["format"], "torchscript");
  EXPECT_TRUE(meta["custom_loss"].get<bool>());

  torch::jit::Module trained = torch::jit::load(out.string());
  torch::jit::Module initial = torch::jit::load(model.string());
  EXPECT_FALSE(trained.is_training()) << "handed back in eval mode, ready to predict";
  EXPECT_FALSE(torch::equal(trained.attr("fc").toModule().attr("weight").toTensor(),
                            initial.attr("fc").toModule().attr("weight").toTensor()))
      << "the written model is not the trained one";
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({4, 3, 32, 32});
  torch::NoGradGuard no_grad;
  const torch::Tensor y = trained.forward({x}).toTensor();
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 10}));
  if (!python_has_torch()) GTEST_SKIP() << "the Python half needs Debian's python3-torch and python3-torchvision";
  expect_python_agrees("jit", out, x, y, dir);
}

// Loads a state dict tandem wrote for a built-in back into the built-in, in order.
void load_in_order(torch::nn::Module& module, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::impl::GenericDict dict = torch::pickle_load(bytes).toGenericDict();
  std::vector<torch::Tensor> mine = module.parameters();
  for (const auto& b : module.buffers()) mine.push_back(b);
  ASSERT_EQ(dict.size(), mine.size());
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (const auto& item : dict) mine[i++].copy_(item.value().toTensor());
}

TEST(PythonModels, TheTrainersResnet18LoadsIntoTorchvisionWithEqualOutputs) {
  if (!python_has_torch()) GTEST_SKIP() << "needs Debian's python3-torch and python3-torchvision";
  const fs::path dir = fresh_dir("resnet18-out");
  fs::create_directories(dir / "root");
  ASSERT_EQ(run_tandem("trainer --model resnet18 --local-workers 1 --train-threads 2 --steps 3 --batch-size 8"
                       " --image-size 32 --sagemaker-root " + (dir / "root").string(),
                       dir / "run.log", 240),
            0)
      << slurp(dir / "run.log");
  const fs::path out = dir / "root/model/model.pt";
  const auto meta = nlohmann::json::parse(slurp(dir / "root/model/model.json"));
  EXPECT_EQ(meta["parameter_names"], "torchvision");
  torch::nn::AnyModule model = make_model("resnet18", image_info());
  load_in_order(*model.ptr(), out);
  model.ptr()->eval();
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::NoGradGuard no_grad;
  expect_python_agrees("recipe", out, x, model.forward(x), dir);
}

// The name mapping of the other torchvision architectures, on models whose BatchNorm
// statistics have moved (a few forward passes in train mode).
TEST(PythonModels, Resnet50AndVitStateDictsMatchTorchvision) {
  if (!python_has_torch()) GTEST_SKIP() << "needs Debian's python3-torch and python3-torchvision";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"resnet50", "torchvision.models.resnet50(num_classes=10)"},
      {"vit_tiny", "torchvision.models.vision_transformer.VisionTransformer(image_size=32, patch_size=16, "
                   "num_layers=12, num_heads=3, hidden_dim=192, mlp_dim=768, num_classes=10)"}};
  for (const auto& [name, ctor] : cases) {
    SCOPED_TRACE(name);
    const fs::path dir = fresh_dir("state-dict-" + name);
    torch::manual_seed(7);
    torch::nn::AnyModule model = make_model(name, image_info());
    {
      torch::NoGradGuard no_grad;
      for (int i = 0; i < 3; ++i) model.forward(torch::randn({4, 3, 32, 32}) * 2 + 1);
    }
    bool torchvision = false;
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [key, t] : python_state_dict(name, *model.ptr(), &torchvision)) dict.insert(key, t);
    EXPECT_TRUE(torchvision);
    const std::vector<char> bytes = torch::pickle_save(dict);
    std::ofstream(dir / "model.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    model.ptr()->eval();
    const torch::Tensor x = torch::randn({2, 3, 32, 32});
    torch::NoGradGuard no_grad;
    expect_python_agrees(ctor, dir / "model.pt", x, model.forward(x), dir);
  }
}

}  // namespace
}  // namespace tandem::training
