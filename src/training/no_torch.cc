// The training module's entry points in a build without LibTorch (TANDEM_WITH_TORCH=OFF,
// and build/lite/tandem beside every full build): the pip wheel's `tandem`, which runs data
// workers, `launch -- COMMAND` and the other commands that need no trainer. Whatever asks
// for tandem's own trainer stops at require_builtin_trainer() with one line saying where
// to get it; the rest of this file is what the application links against, unreachable.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"

namespace tandem::training {
namespace {

const char* const kNoTrainer =
    " needs tandem's own LibTorch trainer, which this tandem does not have (the pip wheel links no LibTorch): "
    "run your own training script with `tandem launch -- python3 train.py` (docs/python.md), or use the tandem "
    "image (examples/sagemaker/Dockerfile) or a build against your LibTorch (docs/gpu.md)";

[[noreturn]] void no_trainer(const std::string& what) { throw ConfigError(what + kNoTrainer); }

}  // namespace

bool has_builtin_trainer() { return false; }

void require_builtin_trainer(const std::string& what) { no_trainer(what); }

TorchRuntime torch_runtime() { return {}; }

std::string describe(const TorchRuntime&) { return "no LibTorch (tandem's own trainer is not in this build)"; }

nlohmann::json to_json(const TorchRuntime&) {
  return {{"torch", nullptr}, {"cuda_built", false}, {"builtin_trainer", false}};
}

std::string why_no_gpu(const TorchRuntime&) {
  return "this tandem has no LibTorch, so its own trainer cannot run here: train with your script "
         "(`tandem launch -- python3 train.py`), or use the tandem image (examples/sagemaker/Dockerfile)";
}

// No LibTorch, so no CUDA through it: `launch` counts a host's GPUs itself (/dev/nvidia*).
int cuda_device_count() { return 0; }

void check_ranks_fit_gpus(int) {}

void set_torch_threads(int) {}

struct Trainer::Impl {};

Trainer::Trainer(const TrainerConfig&, const data::DatasetInfo&, const DistInfo&, const RunPaths&,
                 std::shared_ptr<const data::Dataset>) {
  no_trainer("training");
}

Trainer::~Trainer() = default;

std::string Trainer::device() const { return {}; }

int64_t Trainer::start_step() const { return 0; }

std::string Trainer::resumed_from() const { return ""; }

std::optional<data::DataPosition> Trainer::resumed_position() const { return std::nullopt; }
void Trainer::follow(const data::DataAnchor&, int64_t) {}

TrainReport Trainer::run(const NextBatch&, const std::atomic<bool>&, const RunLimits&, const RunObserver&) {
  no_trainer("training");
}

void Trainer::barrier() {}

std::vector<std::string> Trainer::gather(const std::string&, const std::string& mine) { return {mine}; }

double Trainer::evaluate() { no_trainer("evaluation"); }

}  // namespace tandem::training
