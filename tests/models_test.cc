// Every model runs a forward and backward step; the schedule and distributed settings
// behave. (Torch world: includes the training module's private headers.)

#include <tuple>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/common/error.h"
#include "tandem/training/trainer.h"
#include "training/model.h"
#include "training/optim.h"

namespace tandem::training {
namespace {

data::DatasetInfo info_for(int channels, int side, int classes) {
  data::DatasetInfo info;
  info.name = "test";
  info.sample_shape = {channels, side, side};
  info.num_classes = classes;
  return info;
}

// oneDNN 3.6 (Debian trixie's LibTorch 2.6) dies of SIGFPE creating the backward-data
// primitive of one of resnet50's strided convolutions at 64 px, batch 2, on an AVX-512 AMD
// EPYC (Zen 4), found 2026-11-26; plain PyTorch does too (torchvision's resnet50 there).
// What this test checks is tandem's model builders, so it runs LibTorch's own
// convolutions, restored when it ends.
struct WithoutOneDnn {
  const bool was = at::globalContext().userEnabledMkldnn();
  WithoutOneDnn() { at::globalContext().setUserEnabledMkldnn(false); }
  ~WithoutOneDnn() { at::globalContext().setUserEnabledMkldnn(was); }
};

TEST(Models, EveryModelTrainsOneStep) {
  const WithoutOneDnn native_convolutions;
  torch::manual_seed(0);
  for (const std::string& name : model_names()) {
    const int side = name.rfind("vit", 0) == 0 ? 32 : (name == "mnist_cnn" ? 28 : 64);
    const auto info = info_for(name == "mnist_cnn" ? 1 : 3, side, 7);
    torch::nn::AnyModule model = make_model(name, info);
    OptimizerOptions opts;
    opts.optimizer = "adamw";
    opts.lr = 1e-3;
    auto optimizer = make_optimizer(opts, model.ptr()->parameters(), torch::kCPU);
    const torch::Tensor x = torch::randn({2, info.sample_shape[0], side, side});
    const torch::Tensor y = torch::tensor({1, 5});
    const torch::Tensor out = model.forward(x);
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 7})) << name;
    const torch::Tensor loss = torch::nn::functional::cross_entropy(out, y);
    loss.backward();
    const torch::Tensor before = model.ptr()->parameters().front().clone();
    optimizer->step();
    EXPECT_FALSE(torch::equal(before, model.ptr()->parameters().front())) << name << ": the step changed nothing";
    EXPECT_TRUE(std::isfinite(loss.item<double>())) << name;
  }
}

TEST(Models, UnknownNamesAndBadInputSizesAreClearErrors) {
  try {
    make_model("resnet19", info_for(3, 32, 10));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model("vit_tiny", info_for(3, 30, 10)), ConfigError);
}

TEST(Schedule, WarmupThenCosineToZero) {
  OptimizerOptions o;
  o.lr = 0.1;
  o.steps = 110;
  o.warmup_steps = 10;
  o.schedule = "cosine";
  EXPECT_NEAR(learning_rate(o, 0), 0.01, 1e-12);
  EXPECT_NEAR(learning_rate(o, 9), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(o, 10), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(o, 60), 0.05, 1e-12);
  EXPECT_NEAR(learning_rate(o, 110), 0.0, 1e-12);
  o.schedule = "constant";
  EXPECT_NEAR(learning_rate(o, 80), 0.1, 1e-12);
}

TEST(DistInfo, ComesFromTheLauncherAndTheFlags) {
  TrainerOptions o;
  o.master_port = 29511;
  o.dist_timeout_s = 42;
  LauncherEnv env;
  DistInfo d = dist_info(env, o);
  EXPECT_EQ(d.world, 1);
  EXPECT_EQ(d.master_addr, "127.0.0.1");
  EXPECT_EQ(d.master_port, 29511) << "--master-port when MASTER_PORT is unset";
  EXPECT_EQ(d.timeout_s, 42);
  env = {.place = {3, 4, 1, 2}, .master_addr = "algo-1",
         .master_port = 29555, .agent_store = true, .restart_count = 2, .gloo_address = "10.0.0.7"};
  d = dist_info(env, o);
  EXPECT_EQ(std::tie(d.rank, d.world, d.local_rank, d.local_world), std::make_tuple(3, 4, 1, 2));
  EXPECT_EQ(std::tie(d.master_addr, d.master_port, d.gloo_address), std::make_tuple("algo-1", 29555, "10.0.0.7"));
  EXPECT_EQ(std::tie(d.agent_store, d.restart_count), std::make_tuple(true, 2));
}

}  // namespace
}  // namespace tandem::training
