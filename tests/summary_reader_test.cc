// summary.json's one reader (summary_reader.h): what the writer wrote comes back typed, and
// what an older or edited summary lacks reads as absent, never as an error.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/report/summary_reader.h"

namespace tandem::report {
namespace {

TEST(SummaryReader, ReadsWhatTheWriterWrites) {
  const nlohmann::json s = {
      {"model", "resnet18"}, {"device", "cuda:0"}, {"steps", 300}, {"final_loss", 0.25}, {"world_size", 2},
      {"interrupted", true}, {"model_file", "/r/model/model.pt"},
      {"throughput", {{"global_samples_per_sec", 900.5}, {"ceiling_samples_per_sec", 1200}}},
      {"workers", {{{"address", "10.0.0.5:6000"}, {"share", 0.75}, {"batches", 30}},
                   {{"address", "local"}, {"failed", true}, {"error", "local preprocessing failed: x"}}}},
      {"step_seconds", {{"data_wait", 1.5}, {"optimizer", 0.5}}},
      {"settings", {{"optimizer", "sgd"}}}};
  const SummaryView v = read_summary(s);
  EXPECT_EQ(v.model, "resnet18");
  EXPECT_EQ(v.steps, 300);
  EXPECT_EQ(v.world_size, 2);
  EXPECT_TRUE(v.interrupted);
  EXPECT_EQ(v.model_file, "/r/model/model.pt");
  EXPECT_EQ(global_rate(v), 900.5);
  ASSERT_EQ(v.sources.size(), 2u);
  EXPECT_EQ(v.sources[0].address, "10.0.0.5:6000");
  EXPECT_EQ(v.sources[0].share, 0.75);
  EXPECT_FALSE(v.sources[0].failed);
  EXPECT_EQ(v.sources[1].error, "local preprocessing failed: x");
  ASSERT_TRUE(v.step_seconds);
  EXPECT_EQ(v.step_seconds->data_wait, 1.5);
  EXPECT_TRUE(std::isnan(v.step_seconds->communication));
  EXPECT_EQ(v.settings["optimizer"], "sgd");
}

TEST(SummaryReader, MissingOrMistypedFieldsReadAsAbsent) {
  const SummaryView v = read_summary({{"steps", "many"}, {"workers", 3}, {"samples_per_sec", 100}, {"world_size", 4},
                                      {"interrupted", "yes"}, {"settings", "none"}});
  EXPECT_TRUE(std::isnan(v.steps));
  EXPECT_TRUE(v.sources.empty());
  EXPECT_FALSE(v.interrupted);
  EXPECT_TRUE(v.settings.empty());
  EXPECT_FALSE(v.step_seconds);
  EXPECT_EQ(global_rate(v), 400);  // an older summary: samples_per_sec per rank x ranks
  EXPECT_TRUE(read_summary(nlohmann::json::array()).model.empty());
}

}  // namespace
}  // namespace tandem::report
