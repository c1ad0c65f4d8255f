// training_step models end to end: examples/python-dataset's segmentation and detection
// datasets (Python, on a data worker host and on the trainer host) and its TorchScript
// models (written here by the example's scripts with Debian's python3-torch) trained by
// `tandem simulate` on two ranks (Gloo): every host exits 0, the loss falls, the ranks
// agree, and the saved model.pt loads (in C++ and in Python) with its training_step.
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include "process_helpers.h"
#include "python_fixture.h"

namespace tandem::training {
namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

const fs::path kExample = fs::path(TANDEM_FIXTURES) / "../../examples/python-dataset";

bool python_has_torch() {
  static const bool yes = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return yes;
}

double mean(const std::vector<double>& v, size_t from, size_t count) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(from + count), 0.0) /
         static_cast<double>(count);
}

// Writes `task`'s model with the example's script, trains it with `tandem simulate` on
// shapes.py's `dataset` and checks the run; returns the summary.
nlohmann::json simulate_task(const std::string& task, const std::string& dataset) {
  const fs::path dir = fresh_dir("training-step-" + task);
  const fs::path model = dir / (task + ".pt");
  const std::string write = "/usr/bin/python3 " + (kExample / (task + "_model.py")).string() + " " + model.string() +
                            " > " + (dir / "model.log").string() + " 2>&1";
  EXPECT_EQ(std::system(write.c_str()), 0) << slurp(dir / "model.log");
  const std::string data = "python:" + fs::canonical(kExample / "shapes.py").string() + ":" + dataset;
  const int code = run_tandem("simulate --model " + model.string() + " --data " + data +
                                  " --data-args '{\"n\": 256, \"size\": 32}' --python /usr/bin/python3"
                                  " --python-procs 1 --worker-hosts 1 --procs-per-host 2 --steps 40 --batch-size 8"
                                  " --lr 0.05 --log-every 10 --run-dir " + (dir / "run").string() +
                                  " --summary-json " + (dir / "summary.json").string(),
                              dir / "run.log", 300);
  EXPECT_EQ(code, 0) << "every host exits 0\n" << slurp(dir / "run.log");
  if (code != 0) return {};
  const auto s = nlohmann::json::parse(slurp(dir / "summary.json"));
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["steps"], 40);
  EXPECT_EQ(s["param_checksums"][0], s["param_checksums"][1]) << "ranks diverged";
  const std::vector<double> losses = s["losses"].get<std::vector<double>>();
  EXPECT_EQ(losses.size(), 40u);
  if (losses.size() == 40u) {
    EXPECT_LT(mean(losses, 35, 5), 0.9 * mean(losses, 0, 5)) << s["losses"].dump();
  }
  const fs::path out = s["model_file"].get<std::string>();
  const auto meta = nlohmann::json::parse(slurp(out.parent_path() / "model.json"));
  EXPECT_TRUE(meta["training_step"].get<bool>()) << meta.dump(2);
  torch::jit::Module trained = torch::jit::load(out.string());
  EXPECT_TRUE(trained.find_method("training_step").has_value());
  EXPECT_FALSE(trained.is_training()) << "handed back in eval mode, ready to predict";
  const std::string load = "/usr/bin/python3 -c 'import sys, torch; m = torch.jit.load(sys.argv[1]); "
                           "m(torch.zeros(2, 3, 32, 32, dtype=torch.uint8))' " + out.string() + " > " +
                           (dir / "load.log").string() + " 2>&1";
  EXPECT_EQ(std::system(load.c_str()), 0) << "Python loads and runs model.pt\n" << slurp(dir / "load.log");
  return s;
}

#define REQUIRE_TORCH_PYTHON()                                                        \
  REQUIRE_NUMPY();                                                                    \
  if (!python_has_torch())                                                            \
  GTEST_SKIP() << "the models are written by /usr/bin/python3 with torch (apt-get install python3-torch)"

// image uint8 [3, 16, 16] + mask uint8 [16, 16]: no label, so no classification.
TEST(TrainingStepSimulate, ASegmentationModelTrainsOnImageAndMaskOnTwoRanks) {
  REQUIRE_TORCH_PYTHON();
  const nlohmann::json s = simulate_task("segmentation", "Segmentation");
  if (s.is_object()) EXPECT_EQ(s["workers"].size(), 1u) << "the data worker host served batches";
}

// image + ragged boxes float32 [k, 4] + ragged labels int64 [k]: the model reads the boxes
// through boxes_lengths.
TEST(TrainingStepSimulate, ADetectionModelTrainsOnRaggedBoxesOnTwoRanks) {
  REQUIRE_TORCH_PYTHON();
  simulate_task("detection", "Detection");
}

}  // namespace
}  // namespace tandem::training
