// tandem plan for another cluster's node types (a Slurm partition, a Kubernetes node
// pool): without prices the plan counts nodes; a --prices file can size and price them.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/plan/model.h"
#include "tandem/plan/planner.h"
#include "tandem/plan/prices.h"
#include "tandem/report/html_report.h"
#include "tandem/report/run_files.h"

namespace tandem::plan {
namespace {

const std::string kRuns = std::string(TANDEM_FIXTURES) + "/runs";
const std::string kPriceFile = std::string(TANDEM_FIXTURES) + "/../../data/sagemaker-prices.json";

// The two-worker fixture run as a Slurm job records it: partitions for types.
nlohmann::json slurm_run() {
  nlohmann::json s = report::read_json_file(kRuns + "/two-workers/algo-2/output/data/summary.json");
  s["plan_inputs"]["trainer_instance_type"] = "gpu";
  s["plan_inputs"]["worker_instance_type"] = "cpu";
  for (auto& w : s["plan_inputs"]["workers"]) w["instance_type"] = "cpu";
  return s;
}

TEST(PlanModel, WithoutPricesTheFewestWorkersNearTheFastest) {
  const ModelParams p{.ceiling = 1000, .local = 100, .per_worker = 200, .global_batch = 100};
  const std::vector<PlanRow> rows = plan_table(p, 64);  // 100, 300, 500, 700, 900, 1000, 1000
  EXPECT_EQ(fastest_row(rows), 5);
  EXPECT_EQ(fewest_near_fastest(rows, 5), 5);    // 900 * 1.05 < 1000
  EXPECT_EQ(fewest_near_fastest(rows, 12), 4);   // 900 * 1.12 >= 1000
  EXPECT_EQ(fewest_near_fastest(rows, 300), 1);  // 300 * 4 >= 1000
  const ScalingRange r = node_range(rows, 12);
  EXPECT_EQ(r.start, 4);
  EXPECT_EQ(r.min, 4);
  EXPECT_EQ(r.max, 5);
  EXPECT_EQ(fastest_row({}), -1);
}

TEST(PlanNodes, ASlurmRunWithoutPricesIsPlannedInNodes) {
  const nlohmann::json p = make_plan(slurm_run(), load_price_table(kPriceFile), {});
  EXPECT_FALSE(p["priced"].get<bool>());
  EXPECT_EQ(p["unpriced_types"], nlohmann::json({"gpu", "cpu"}));
  EXPECT_EQ(p["worker"]["vcpus"], 72);  // the threads each of the run's workers had
  EXPECT_TRUE(p["worker"]["vcpus_measured"].get<bool>());
  EXPECT_TRUE(p["worker"]["usd_per_hour"].is_null());
  EXPECT_FALSE(p.contains("spot"));
  double fastest = 0;
  for (const auto& r : p["rows"]) {
    EXPECT_TRUE(r["usd_per_hour"].is_null() && r["usd_per_1000_steps"].is_null()) << r.dump();
    fastest = std::max(fastest, r["samples_per_sec"].get<double>());
  }
  // The recommendation: the first row within 5% of the fastest.
  const int n = p["recommended"]["workers"].get<int>();
  EXPECT_GE(p["recommended"]["samples_per_sec"].get<double>() * 1.05, fastest * (1 - 1e-9));
  if (n > 0) EXPECT_LT(p["rows"][n - 1]["samples_per_sec"].get<double>() * 1.05, fastest);
  EXPECT_EQ(p["elastic"]["start"], n);
  EXPECT_NE(p["explanation"].get<std::string>().find("counts nodes"), std::string::npos) << p["explanation"];
  EXPECT_NE(p["caveats"].dump().find("No price for gpu, cpu"), std::string::npos) << p["caveats"];

  const std::string text = format_plan_text(p);
  EXPECT_NE(text.find("Plan for 1 x gpu + N x cpu (72 vCPUs, as the run's workers)"), std::string::npos) << text;
  EXPECT_NE(text.find("Recommended: " + std::to_string(n) + " x cpu (the fewest within 5% of the fastest"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("$/hour"), std::string::npos) << text;
  const std::string html = report::render_html_report({.summary = slurm_run(), .plan = p});
  EXPECT_NE(html.find("recommended in orange; no prices"), std::string::npos);
}

TEST(PlanNodes, APricesFileSizesAndPricesNodeTypes) {
  PriceTable sized = parse_price_table(nlohmann::json::parse(R"({"instances": {"gpu": {"vcpus": 96, "gpus": 8},
      "cpu": {"vcpus": 32}}})"), "nodes.json");
  nlohmann::json p = make_plan(slurm_run(), sized, {});
  EXPECT_FALSE(p["priced"].get<bool>());
  EXPECT_EQ(p["worker"]["vcpus"], 32);
  EXPECT_FALSE(p["worker"]["vcpus_measured"].get<bool>());
  EXPECT_EQ(p["trainer"]["ranks_per_host"], 8);

  PriceTable priced = parse_price_table(nlohmann::json::parse(R"({"instances": {"gpu": {"vcpus": 96, "gpus": 8,
      "usd_per_hour": 30}, "cpu": {"vcpus": 32, "usd_per_hour": 1.5}}})"), "nodes.json");
  p = make_plan(slurm_run(), priced, {});
  EXPECT_TRUE(p["priced"].get<bool>());
  EXPECT_DOUBLE_EQ(p["rows"][1]["usd_per_hour"].get<double>(), 31.5);
  EXPECT_TRUE(p.contains("spot"));
  EXPECT_NE(format_plan_text(p).find("cheapest per sample"), std::string::npos);
}

TEST(PlanNodes, ANodeTypeTheRunCannotSizeAndASageMakerTypoAreErrors) {
  const PriceTable prices = load_price_table(kPriceFile);
  // A run without workers gives no worker size.
  const nlohmann::json local = report::read_json_file(kRuns + "/one-step/summary.json");
  try {
    make_plan(local, prices, {.trainer_type = "gpu", .worker_type = "cpu"});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has no vCPU count"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--prices file"), std::string::npos) << e.what();
  }
  nlohmann::json s = slurm_run();
  s["plan_inputs"]["trainer_instance_type"] = "ml.p4d.24xlarg";
  EXPECT_THROW(make_plan(s, prices, {}), ConfigError);  // SageMaker's names are checked
}

}  // namespace
}  // namespace tandem::plan
