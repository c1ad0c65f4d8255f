// Each trainer component's options, derived once from the settings: every flag reaches its
// component, --epochs becomes steps, and a host's cores are split between LibTorch and
// local preprocessing. Torch-free.
#include <string>

#include <gtest/gtest.h>

#include "tandem/common/error.h"
#include "tandem/training/trainer_options.h"
#include "training/checkpoint_schedule.h"

namespace tandem::training {
namespace {

data::DatasetInfo dataset_of(uint64_t size) {
  data::DatasetInfo info;
  info.name = "synthetic";
  info.size = size;
  return info;
}

DistInfo world(int world, int rank = 0, int local_world = 1) {
  DistInfo d;
  d.world = world;
  d.rank = rank;
  d.local_world = local_world;
  return d;
}

TEST(TrainerConfig, DefaultsAreTheFlagsDefaults) {
  const TrainerOptions flags;
  const TrainerConfig c = trainer_config(flags, flags.steps);
  EXPECT_EQ(c.model, ModelOptions{});
  EXPECT_EQ(c.optimizer, OptimizerOptions{});
  LoopOptions loop;
  loop.batch_size = flags.batch_size;  // the data position a checkpoint keeps
  EXPECT_EQ(c.loop, loop);
  EXPECT_EQ(c.checkpoints, CheckpointOptions{});
  EXPECT_EQ(c.mix, MixOptions{});
}

TEST(TrainerConfig, EveryFlagReachesItsComponent) {
  TrainerOptions o;
  o.model = "resnet18";
  o.amp = "bf16";
  o.channels_last = true;
  o.grad_sync = "after-backward";
  o.optimizer = "adamw";
  o.lr = 0.3;
  o.momentum = 0.5;
  o.weight_decay = 0.01;
  o.fused_optimizer = false;
  o.clip_grad_norm = 1.5;
  o.warmup_steps = 7;
  o.schedule = "cosine";
  o.log_every = 3;
  o.eval_every = 11;
  o.checkpoint_every = 13;
  o.keep_checkpoints = 2;
  o.mixup = 0.2;
  o.cutmix = 1.0;
  o.label_smoothing = 0.1;
  o.batch_size = 12;
  const TrainerConfig c = trainer_config(o, 99);
  EXPECT_EQ(c.model, (ModelOptions{"resnet18", "bf16", true, false}));
  EXPECT_EQ(c.optimizer, (OptimizerOptions{"adamw", 0.3, 0.5, 0.01, false, 1.5, 7, "cosine", 99}));
  EXPECT_EQ(c.loop, (LoopOptions{99, 3, 11, 0, 12}));
  EXPECT_EQ(c.checkpoints, (CheckpointOptions{13, 2}));
  EXPECT_EQ(c.mix, (MixOptions{0.2, 1.0, 0.1, 0})) << "the seed is the data's, set by the caller";
}

TEST(RankOptions, EpochsBecomeWholeGlobalBatchesForTheLoopAndTheSchedule) {
  TrainerOptions o;
  o.batch_size = 8;
  o.steps = 5;
  RankOptions r = derive_rank_options(o, dataset_of(100), world(2), {});
  EXPECT_EQ(r.steps_per_epoch, 6u) << "100 samples / (8 x 2 ranks): the remainder waits for the next epoch";
  EXPECT_EQ(r.trainer.loop.steps, 5) << "--steps when --epochs is not given";
  o.epochs = 3;
  r = derive_rank_options(o, dataset_of(100), world(2, 1), {});
  EXPECT_EQ(r.trainer.loop.steps, 18);
  EXPECT_EQ(r.trainer.optimizer.steps, 18) << "the schedule decays to 0 at the run's last step";
}

TEST(RankOptions, EpochsOfLessThanOneGlobalBatchAreAClearError) {
  TrainerOptions o;
  o.batch_size = 64;
  o.epochs = 1;
  try {
    derive_rank_options(o, dataset_of(100), world(2), {});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("dataset synthetic has 100 samples for a global batch of 128"), std::string::npos) << m;
    EXPECT_NE(m.find("lower --batch-size or use --steps"), std::string::npos) << m;
  }
  o.epochs = 0;
  EXPECT_NO_THROW(derive_rank_options(o, dataset_of(100), world(2), {})) << "--steps needs no whole epoch";
}

TEST(RankOptions, ThreadsSplitTheHostsCores) {
  const TrainerOptions o;  // --local-workers -1 (spare cores), --train-threads 0 (auto)
  auto split = [&](const TrainerOptions& opts, RankHost host, int local_world = 1) {
    const RankOptions r = derive_rank_options(opts, dataset_of(1000), world(local_world, 0, local_world), host);
    return std::make_pair(r.local_threads, r.torch_threads);
  };
  EXPECT_EQ(split(o, {.cores = 16, .gpus = 1, .local_data = true}), std::make_pair(14, 2)) << "GPU: the rest preprocess";
  EXPECT_EQ(split(o, {.cores = 16, .gpus = 0, .local_data = true}), std::make_pair(8, 8)) << "CPU, no workers: half";
  EXPECT_EQ(split(o, {.cores = 16, .local_data = true, .remote_workers = true}), std::make_pair(0, 16))
      << "CPU with workers: training owns the cores";
  EXPECT_EQ(split(o, {.cores = 16, .gpus = 1, .local_data = false}), std::make_pair(0, 16))
      << "a rank without the data preprocesses nothing";
  EXPECT_EQ(split(o, {.cores = 16, .gpus = 4, .local_data = true}, 4), std::make_pair(2, 2))
      << "four ranks share 16 cores: 4 each";
  EXPECT_EQ(split(o, {.cores = 1, .gpus = 1, .local_data = true}), std::make_pair(1, 1)) << "never below one";
  TrainerOptions given;
  given.local_workers = 3;
  given.train_threads = 5;
  EXPECT_EQ(split(given, {.cores = 16, .local_data = true}), std::make_pair(3, 5)) << "the flags win";
}

}  // namespace
// --checkpoint-every N, 0 and auto: under auto the first checkpoint, 20 steps in, measures
// the cost, and Young's interval in steps follows (sqrt(2 x 2 s / 1 an hour) = 120 s at
// 0.5 s a step: every 240 steps).
TEST(CheckpointSchedule, EveryNNeverAndAuto) {
  CheckpointSchedule every({.every = 5}, 0, 20);
  EXPECT_TRUE(every.due(5));
  EXPECT_FALSE(every.due(6));
  EXPECT_FALSE(every.due(20)) << "the final model follows the last step";
  EXPECT_FALSE(CheckpointSchedule({.every = 0}, 0, 100).due(20));
  CheckpointSchedule automatic({.every = -1, .interruptions_per_hour = 1}, 100, 10000);
  EXPECT_FALSE(automatic.due(101));
  EXPECT_TRUE(automatic.due(120));
  EXPECT_EQ(automatic.measured(119, 2.0, 0.5), "");
  const std::string line = automatic.measured(120, 2.0, 0.5);
  EXPECT_EQ(automatic.every(), 240) << line;
  EXPECT_NE(line.find("every 240 steps"), std::string::npos) << line;
  EXPECT_TRUE(automatic.due(480));
  EXPECT_FALSE(automatic.due(481));
  CheckpointSchedule calm({.every = -1, .interruptions_per_hour = 0}, 0, 1000);
  EXPECT_NE(calm.measured(20, 2.0, 0.5).find("no more checkpoints"), std::string::npos);
  EXPECT_FALSE(calm.due(40));
}

}  // namespace tandem::training
