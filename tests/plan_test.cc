// tandem plan: the model, the price table, reading summaries, the published AWS example,
// and the real `tandem plan` process on fixture runs.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/plan/model.h"
#include "tandem/plan/planner.h"
#include "tandem/plan/prices.h"
#include "tandem/plan/spot.h"
#include "tandem/report/run_files.h"
#include "plan/sweep_plan.h"

namespace tandem::plan {
namespace {

namespace fs = std::filesystem;
using tandem::testing::fresh_dir;
using tandem::testing::slurp;

const std::string kRuns = std::string(TANDEM_FIXTURES) + "/runs";
const std::string kPriceFile = std::string(TANDEM_FIXTURES) + "/../../data/sagemaker-prices.json";

// The message of the ConfigError `f` throws ("" when it throws none).
template <typename F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

nlohmann::json two_workers() { return report::read_json_file(kRuns + "/two-workers/algo-2/output/data/summary.json"); }

TEST(PlanModel, ThroughputIsLocalPlusWorkersUpToTheCeiling) {
  ModelParams p{.ceiling = 2000, .local = 500, .per_worker = 600, .global_batch = 100,
                .trainer_usd_per_hour = 36, .worker_usd_per_hour = 3.6};
  EXPECT_DOUBLE_EQ(predicted_throughput(p, 0), 500);
  EXPECT_DOUBLE_EQ(predicted_throughput(p, 2), 1700);
  EXPECT_DOUBLE_EQ(predicted_throughput(p, 3), 2000);
  EXPECT_EQ(workers_to_ceiling(p), 3);
  const PlanRow r = plan_row(p, 2);
  EXPECT_DOUBLE_EQ(r.usd_per_hour, 43.2);
  EXPECT_NEAR(r.step_seconds, 100.0 / 1700, 1e-12);
  // $43.2/h = $0.012/s; 1,000 steps of 100/1700 s.
  EXPECT_NEAR(r.usd_per_1000_steps, 0.012 * 1000 * 100 / 1700, 1e-12);
  EXPECT_NEAR(r.usd_per_million_samples, 0.012 / 1700 * 1e6, 1e-12);
  EXPECT_FALSE(r.at_ceiling);
  EXPECT_TRUE(plan_row(p, 3).at_ceiling);
  // N = 0 .. first at the ceiling, plus one beyond.
  const std::vector<PlanRow> rows = plan_table(p, 64);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(cheapest_row(rows), 3);
  EXPECT_NEAR(saving(rows[3], rows[0]), 1 - (46.8 / 2000) / (36.0 / 500), 1e-12);
}

TEST(PlanModel, CeilingExactlyReachedAndNeverReached) {
  ModelParams p{.ceiling = 2000, .local = 1000, .per_worker = 500, .global_batch = 10,
                .trainer_usd_per_hour = 1, .worker_usd_per_hour = 1};
  EXPECT_EQ(workers_to_ceiling(p), 2);
  p.local = 2500;  // local preprocessing alone keeps up
  EXPECT_EQ(workers_to_ceiling(p), 0);
  EXPECT_EQ(plan_table(p, 64).size(), 2u);
  p.local = 100;
  p.per_worker = 0;
  EXPECT_EQ(workers_to_ceiling(p), -1);
  EXPECT_EQ(plan_table(p, 7).size(), 8u);  // stops at --max-workers
  p.per_worker = 1;                        // reachable, but beyond the limit
  EXPECT_EQ(plan_table(p, 7).size(), 8u);
}

TEST(PlanModel, NothingFeedsTheLoopWithoutWorkersWhenThereAreNoLocalThreads) {
  ModelParams p{.ceiling = 1000, .local = 0, .per_worker = 400, .global_batch = 10,
                .trainer_usd_per_hour = 10, .worker_usd_per_hour = 1};
  const std::vector<PlanRow> rows = plan_table(p, 64);
  EXPECT_FALSE(rows[0].feasible);
  EXPECT_EQ(rows[0].usd_per_million_samples, 0);
  EXPECT_EQ(cheapest_row(rows), 3);  // 1,000 samples/s at $13/h beats 800 at $12/h
  EXPECT_EQ(saving(rows[3], rows[0]), 0);
}

TEST(PlanModel, FastestWithinPercentOfTheCheapest) {
  // Workers cost more per sample than the trainer host's own threads: none is cheapest,
  // but 2 workers triple the speed for 3.3% more per sample.
  ModelParams p{.ceiling = 3000, .local = 1000, .per_worker = 1000, .global_batch = 100,
                .trainer_usd_per_hour = 10, .worker_usd_per_hour = 10.5};
  const std::vector<PlanRow> rows = plan_table(p, 64);
  EXPECT_EQ(cheapest_row(rows), 0);
  EXPECT_EQ(fastest_row_within(rows, 5), 2);
  EXPECT_EQ(fastest_row_within(rows, 3), 1);  // 2.5% more: 1 worker only
  EXPECT_EQ(fastest_row_within(rows, 0), 0);
}

TEST(PlanModel, AnElasticPoolStartsAtTheCheapestAndMovesWithinPercentOfIt) {
  // Cost per sample: 0 workers $0.072/h per sample/s, 1 $0.036, 2 $0.0254, 3 $0.0234 (the
  // ceiling), 4 $0.0252 (no faster than 3).
  ModelParams p{.ceiling = 2000, .local = 500, .per_worker = 600, .global_batch = 100,
                .trainer_usd_per_hour = 36, .worker_usd_per_hour = 3.6};
  const std::vector<PlanRow> rows = plan_table(p, 64);
  ScalingRange r = scaling_range(rows, 10);
  EXPECT_EQ(r.start, 3);
  EXPECT_EQ(r.min, 2) << "2 workers cost 8.5% more per sample";
  EXPECT_EQ(r.max, 3) << "4 are within 10% too, but no faster";
  r = scaling_range(rows, 5);
  EXPECT_EQ(r.min, 3);
  EXPECT_EQ(r.max, 3);
  // None is cheapest; up to 2 workers within 5%: the pool may grow to 2 and shrink to none.
  ModelParams q{.ceiling = 3000, .local = 1000, .per_worker = 1000, .global_batch = 100,
                .trainer_usd_per_hour = 10, .worker_usd_per_hour = 10.5};
  r = scaling_range(plan_table(q, 64), 5);
  EXPECT_EQ(r.start, 0);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, 2);
  // Where workers are the cheapest, the pool keeps at least one.
  q.worker_usd_per_hour = 1;
  q.local = 100;
  r = scaling_range(plan_table(q, 64), 3000);
  EXPECT_EQ(r.start, 3);
  EXPECT_EQ(r.min, 1) << "none is within 3000% of the cheapest, but the pool keeps one";
  EXPECT_EQ(scaling_range({}, 10).start, -1);
}

// AWS's published heterogeneous-cluster example: 1 x ml.p4d.24xlarge alone at 192 ms/step
// and $0.201, with 2 x ml.c5.18xlarge added at 86 ms/step and $0.108: 46% cheaper. Its "$
// per step" figures are dollars per 100 steps (cents per step): $37.688/h x 0.192 s =
// $0.00201 per step. The shipped us-east-1 prices (p4d $37.688/h, c5.18xlarge $3.672/h)
// give 0.2010 and 0.1076; the inputs below are the published step times.
TEST(PlanPublishedExample, P4dWithTwoC5WorkersIs46PercentCheaper) {
  const double batch = 1024, alone = batch / 0.192, with_two = batch / 0.086;
  nlohmann::json s = {{"global_batch", batch},
                      {"throughput", {{"ceiling_samples_per_sec", with_two}}},
                      {"plan_inputs",
                       {{"trainer_instance_type", "ml.p4d.24xlarge"}, {"trainer_hosts", 1},
                        {"local", {{"images_per_sec", alone}}},
                        {"workers", {{{"host", "algo-2"}, {"instance_type", "ml.c5.18xlarge"}, {"threads", 72},
                                      {"images_per_cpu_second", (with_two - alone) / 2 / 72}}}},
                        {"worker_instance_type", "ml.c5.18xlarge"}}}};
  const nlohmann::json p = make_plan(s, load_price_table(kPriceFile), {});
  const nlohmann::json& rows = p["rows"];
  EXPECT_NEAR(rows[0]["step_ms"].get<double>(), 192.0, 1e-9);
  EXPECT_NEAR(rows[2]["step_ms"].get<double>(), 86.0, 1e-9);
  const double per_100_alone = rows[0]["usd_per_1000_steps"].get<double>() / 10;
  const double per_100_two = rows[2]["usd_per_1000_steps"].get<double>() / 10;
  EXPECT_NEAR(per_100_alone, 0.201, 0.0005);
  EXPECT_NEAR(per_100_two, 0.108, 0.0005);
  EXPECT_EQ(std::lround(100 * rows[2]["saving_vs_none"].get<double>()), 46);
  EXPECT_EQ(p["recommended"]["workers"], 2);
  EXPECT_EQ(p["workers_to_ceiling"], 2);
}

// plan_inputs has one definition (plan_inputs.h): what the trainer writes is what `tandem
// plan` and the run report read back.
TEST(PlanInputsFormat, WrittenAsThePlanAndTheReportReadIt) {
  PlanInputs in;
  in.trainer_instance_type = "ml.p4d.24xlarge";
  in.trainer_hosts = 2;
  in.ranks = 16;
  in.trainer_host_cores = 96;
  in.cpu_model = "Intel Xeon";
  in.local = LocalRate{4, 250.0, 900.0};
  in.workers = {{"10.0.0.5:6000", "algo-3", "ml.c5.18xlarge", 72, 300.0, 20000.0}, {"10.0.0.6:6000", "", "", 0, 0, 0}};
  in.worker_instance_type = "ml.c5.18xlarge";
  const nlohmann::json j = to_json(in);
  EXPECT_EQ(j, nlohmann::json::parse(R"({
    "trainer_instance_type": "ml.p4d.24xlarge", "trainer_hosts": 2, "ranks": 16, "trainer_host_cores": 96,
    "cpu_model": "Intel Xeon", "local": {"threads": 4, "images_per_cpu_second": 250.0, "images_per_sec": 900.0},
    "workers": [
      {"address": "10.0.0.5:6000", "host": "algo-3", "instance_type": "ml.c5.18xlarge", "threads": 72,
       "images_per_cpu_second": 300.0, "images_per_sec": 20000.0},
      {"address": "10.0.0.6:6000", "host": null, "instance_type": null, "threads": 0,
       "images_per_cpu_second": 0.0, "images_per_sec": 0.0}],
    "worker_instance_type": "ml.c5.18xlarge", "simulated": false, "bytes_per_sample": 0.0})")) << j.dump(2);
  EXPECT_EQ(read_plan_inputs({{"plan_inputs", j}}), in);
  const nlohmann::json s = {
      {"global_batch", 512}, {"throughput", {{"ceiling_samples_per_sec", 30000}}}, {"plan_inputs", j}};
  const RunMeasurements m = read_measurements(s, {});
  EXPECT_EQ(m.trainer_type, "ml.p4d.24xlarge");
  EXPECT_EQ(m.worker_type, "ml.c5.18xlarge");
  EXPECT_EQ(m.trainer_hosts, 2);
  EXPECT_EQ(m.local_threads, 4);
  EXPECT_DOUBLE_EQ(m.local, 2 * 4 * 250.0) << "per host capacity x trainer hosts";
  EXPECT_DOUBLE_EQ(m.images_per_cpu_second, 300.0) << "the worker that made batches";
  EXPECT_EQ(m.run_workers, 2);
  EXPECT_EQ(m.rate_hosts, "algo-3");
  EXPECT_EQ(m.cpu_model, "Intel Xeon");
}

TEST(PlanInputsFormat, DamagedFieldsReadForDisplayKeepTheirDefaults) {
  EXPECT_EQ(read_plan_inputs(nlohmann::json::array()), PlanInputs{});
  EXPECT_EQ(read_plan_inputs({{"steps", 3}}), PlanInputs{}) << "a summary older than plan_inputs";
  const PlanInputs in = read_plan_inputs(nlohmann::json::parse(R"({"plan_inputs": {
      "trainer_hosts": "two", "ranks": -3, "trainer_host_cores": 1e300, "cpu_model": 7, "local": [],
      "workers": [3, {"address": "a:1", "host": 5, "threads": 8}], "simulated": "yes"}})"));
  EXPECT_EQ(in.trainer_hosts, 1);
  EXPECT_EQ(in.ranks, 1);
  EXPECT_EQ(in.trainer_host_cores, 0u);
  EXPECT_EQ(in.cpu_model, "");
  EXPECT_FALSE(in.local);
  ASSERT_EQ(in.workers.size(), 2u);
  EXPECT_EQ(in.workers[0], WorkerRate{});
  EXPECT_EQ(in.workers[1], (WorkerRate{"a:1", "", "", 8, 0, 0}));
  EXPECT_FALSE(in.simulated);
}

TEST(PlanPrices, ShippedFileHasTheTypesTheDocsPromise) {
  const PriceTable t = load_price_table(kPriceFile);
  EXPECT_EQ(t.region, "us-east-1");
  EXPECT_FALSE(t.as_of.empty());
  for (const char* name : {"ml.p4d.24xlarge", "ml.p3.2xlarge", "ml.p3.8xlarge", "ml.p3.16xlarge", "ml.p5.48xlarge",
                           "ml.g5.xlarge", "ml.g5.48xlarge", "ml.g4dn.xlarge", "ml.c5.18xlarge", "ml.c6i.32xlarge",
                           "ml.m5.24xlarge"}) {
    ASSERT_TRUE(t.types.count(name)) << name;
    EXPECT_GT(t.types.at(name).vcpus, 0) << name;
  }
  EXPECT_EQ(t.types.at("ml.c5.18xlarge").vcpus, 72);
  EXPECT_EQ(t.types.at("ml.p4d.24xlarge").gpus, 8);
}

TEST(PlanPrices, BadEntriesAndOverridesNameTheFix) {
  const auto table = [](const char* text) { return parse_price_table(nlohmann::json::parse(text), "p.json"); };
  EXPECT_NE(config_error([&] { table(R"({"instances": {"ml.x": {"usd_per_hour": 1}}})"); }).find("\"vcpus\""),
            std::string::npos);
  EXPECT_NE(config_error([&] { table(R"({"instances": {"ml.x": {"vcpus": 4, "usd_per_hour": 0}}})"); })
                .find("usd_per_hour"),
            std::string::npos);
  EXPECT_NE(config_error([&] { table(R"({"region": "x"})"); }).find("no \"instances\""), std::string::npos);
  PriceTable t = table(R"({"instances": {"ml.c5.4xlarge": {"vcpus": 16, "usd_per_hour": 0.816}}})");
  apply_price_override(t, "ml.c5.4xlarge=0.5");
  EXPECT_DOUBLE_EQ(t.types.at("ml.c5.4xlarge").usd_per_hour, 0.5);
  EXPECT_EQ(t.types.at("ml.c5.4xlarge").vcpus, 16);
  apply_price_override(t, "ml.p9.huge=99");
  EXPECT_DOUBLE_EQ(t.types.at("ml.p9.huge").usd_per_hour, 99);
  for (const char* bad : {"ml.c5.4xlarge", "=3", "ml.c5.4xlarge=", "ml.c5.4xlarge=abc", "ml.c5.4xlarge=-1",
                          "ml.c5.4xlarge=3x", "ml.c5.4xlarge=nan"}) {
    EXPECT_NE(config_error([&] { apply_price_override(t, bad); }).find("--price"), std::string::npos) << bad;
  }
  const std::string unknown = config_error([&] { find_instance_type(t, "ml.c5.24xlarge"); });
  EXPECT_NE(unknown.find("ml.c5.4xlarge"), std::string::npos) << unknown;  // the family's known sizes
  EXPECT_NE(unknown.find("--price ml.c5.24xlarge="), std::string::npos) << unknown;
}

TEST(PlanPrices, DefaultFileIsFoundBesideABuildFolderOrAnInstall) {
  const fs::path dir = fresh_dir("prices");
  fs::create_directories(dir / "build");
  fs::create_directories(dir / "share/tandem");
  const std::string exe = (dir / "build/tandem").string();
  EXPECT_NE(config_error([&] { load_default_price_table(exe); }).find("--prices FILE"), std::string::npos);
  fs::copy_file(kPriceFile, dir / "share/tandem/sagemaker-prices.json");
  EXPECT_EQ(load_default_price_table(exe).origin, (dir / "share/tandem/sagemaker-prices.json").string());
  // The wheel: the library a script loads (tandem/libtandem_feed.so) has the table in
  // tandem/share/tandem/ (a script's executable is Python's: it is not looked beside).
  fs::create_directories(dir / "wheel/tandem/share/tandem");
  fs::copy_file(kPriceFile, dir / "wheel/tandem/share/tandem/sagemaker-prices.json");
  EXPECT_EQ(load_default_price_table((dir / "wheel/tandem/libtandem_feed.so").string()).origin,
            (dir / "wheel/tandem/share/tandem/sagemaker-prices.json").string());
  fs::remove_all(dir);
}

TEST(PlanInputs, TwoWorkerRunPlansTwoWorkersAndComparesWithTheRun) {
  const nlohmann::json p = make_plan(two_workers(), load_price_table(kPriceFile), {});
  EXPECT_EQ(p["recommended"]["workers"], 2);
  EXPECT_EQ(p["rows"].size(), 4u);
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), 80 * 48.0);  // capacity: threads x rate
  EXPECT_DOUBLE_EQ(p["worker"]["samples_per_sec"].get<double>(), 45.0 * 72);
  EXPECT_EQ(p["run"]["workers"], 2);
  EXPECT_DOUBLE_EQ(p["run"]["predicted_samples_per_sec"].get<double>(), 9000);
  EXPECT_NE(p["measurement"]["where"].get<std::string>().find("algo-1, algo-3"), std::string::npos);
  EXPECT_NE(p["explanation"].get<std::string>().find("cheapest per sample is 2 workers"), std::string::npos);
}

TEST(PlanInputs, AnotherWorkerFamilyIsPlannedWithACaveat) {
  PlanOptions o;
  o.worker_type = "ml.c6i.32xlarge";
  const nlohmann::json p = make_plan(two_workers(), load_price_table(kPriceFile), o);
  EXPECT_DOUBLE_EQ(p["worker"]["samples_per_sec"].get<double>(), 45.0 * 128);
  EXPECT_FALSE(p.contains("run"));  // not comparable with the run's c5 workers
  EXPECT_NE(p["caveats"][0].get<std::string>().find("a different CPU generation is a different rate"), std::string::npos);
}

// A simulate run's instance types are labels: the plan says the rates are this machine's.
TEST(PlanInputs, ASimulatedRunIsPlannedWithItsOwnCaveat) {
  nlohmann::json s = two_workers();
  s["plan_inputs"]["simulated"] = true;
  s["plan_inputs"]["cpu_model"] = "AMD EPYC";
  const nlohmann::json p = make_plan(s, load_price_table(kPriceFile), {});
  const std::string all = p["caveats"].dump();
  EXPECT_NE(all.find("simulated hosts, all on this machine's AMD EPYC"), std::string::npos) << all;
  EXPECT_NE(all.find("This run was a simulation"), std::string::npos) << all;
  EXPECT_EQ(make_plan(two_workers(), load_price_table(kPriceFile), {})["caveats"].dump().find("simulation"),
            std::string::npos);
}

TEST(PlanInputs, MissingFieldsAndZeroRatesNameTheFix) {
  const PriceTable prices = load_price_table(kPriceFile);
  const auto error = [&](const nlohmann::json& s, PlanOptions o = {}) { return config_error([&] { make_plan(s, prices, o); }); };
  EXPECT_NE(error(report::read_json_file(kRuns + "/old-summary/summary.json")).find("re-run the job"), std::string::npos);
  const nlohmann::json unknown = report::read_json_file(kRuns + "/unknown-types/summary.json");
  EXPECT_NE(error(unknown).find("--trainer-type"), std::string::npos);
  EXPECT_NE(error(unknown, {.trainer_type = "ml.p4d.24xlarge"}).find("--worker-type"), std::string::npos);
  nlohmann::json s = two_workers();
  s["throughput"].erase("ceiling_samples_per_sec");
  EXPECT_NE(error(s).find("--ceiling"), std::string::npos);
  EXPECT_EQ(error(s, {.ceiling = 9000.0}), "");
  s = two_workers();
  for (auto& w : s["plan_inputs"]["workers"]) w["images_per_cpu_second"] = 0;
  EXPECT_NE(error(s).find("made no batches"), std::string::npos);
  s = two_workers();
  s["global_batch"] = "big";
  EXPECT_NE(error(s).find("global_batch"), std::string::npos);
  s = two_workers();
  s["plan_inputs"]["trainer_instance_type"] = "ml.p9.huge";
  EXPECT_NE(error(s).find("unknown instance type 'ml.p9.huge'"), std::string::npos);
}

TEST(PlanInputs, RunWithoutWorkersScalesTheTrainerHostsRate) {
  PlanOptions o{.trainer_type = "ml.g5.xlarge", .worker_type = "ml.c5.4xlarge"};
  const nlohmann::json run = report::read_json_file(kRuns + "/one-step/summary.json");
  nlohmann::json p = make_plan(run, load_price_table(kPriceFile), o);
  EXPECT_EQ(p["measurement"]["on"], "trainer host");
  EXPECT_DOUBLE_EQ(p["worker"]["samples_per_sec"].get<double>(), 69.5 * 16);
  EXPECT_NE(p["caveats"][0].get<std::string>().find("AMD EPYC 7B13"), std::string::npos);  // the CPU it ran on
  // The g5.xlarge's 2 spare vCPUs (4 less 2 for its one rank) already outrun the loop.
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), 2 * 69.5);
  EXPECT_EQ(p["recommended"]["workers"], 0);
  EXPECT_NE(p["explanation"].get<std::string>().find("the loop is already the bottleneck"), std::string::npos);
  // With 3 vCPUs kept for the loop, one is left: a c5.4xlarge more than covers the gap but
  // costs more per sample than it saves; it is 2.9% dearer per sample and 54% faster.
  o.reserve_vcpus_per_rank = 3;
  p = make_plan(run, load_price_table(kPriceFile), o);
  EXPECT_EQ(p["recommended"]["workers"], 0);
  EXPECT_EQ(p["fastest_within"]["workers"], 1);
}

TEST(PlanTrainerCores, NoWorkersIsTheTrainerTypesSpareVcpus) {
  const PriceTable prices = load_price_table(kPriceFile);
  nlohmann::json s = two_workers();  // ml.p4d.24xlarge, 8 ranks, local 80 threads at 48/s
  s["plan_inputs"]["local"] = {{"threads", 1}, {"images_per_cpu_second", 50.0}, {"images_per_sec", 50.0}};
  nlohmann::json p = make_plan(s, prices, {});
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), (96 - 2 * 8) * 50.0) << "not the 1 thread that ran";
  EXPECT_EQ(p["trainer"]["spare_vcpus_per_host"], 80);
  // The run is compared with the model as it ran: its one local thread and 2 workers.
  EXPECT_DOUBLE_EQ(p["run"]["predicted_samples_per_sec"].get<double>(), 50.0 + 2 * 45.0 * 72);
  p = make_plan(s, prices, {.reserve_vcpus_per_rank = 4});
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), (96 - 4 * 8) * 50.0);
  // No local threads ran: the workers' per-thread rate on the trainer's spare vCPUs.
  s["plan_inputs"]["local"] = nullptr;
  p = make_plan(s, prices, {});
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), 80 * 45.0);
  EXPECT_TRUE(p["rows"][0]["step_ms"].is_number()) << "N = 0 is priced: " << p["rows"][0];
  EXPECT_NE(format_plan_text(p).find("80 spare vCPUs per trainer host"), std::string::npos) << format_plan_text(p);
}

// A run whose trainer hosts made nothing (a tandem.Feed with local_threads=0, a channel
// sent only to the data group): their spare vCPUs were no source and are none in the plan.
// N = 0 is no choice, its row says what to set, and the recommendation has workers.
TEST(PlanTrainerCores, ARunWithoutLocalThreadsCannotUseTheTrainersCores) {
  const PriceTable prices = load_price_table(kPriceFile);
  nlohmann::json s = two_workers();
  s["plan_inputs"]["local"] = {{"threads", 0}, {"images_per_cpu_second", 0.0}, {"images_per_sec", 0.0}};
  const nlohmann::json p = make_plan(s, prices, {});
  EXPECT_DOUBLE_EQ(p["local_samples_per_sec"].get<double>(), 0.0) << p.dump();
  EXPECT_TRUE(p["rows"][0]["step_ms"].is_null()) << "N = 0 feeds nothing: " << p["rows"][0];
  EXPECT_NE(p["rows"][0]["limit"].get<std::string>().find("local_threads"), std::string::npos) << p["rows"][0];
  EXPECT_GE(p["recommended"]["workers"].get<int>(), 1);
  EXPECT_GE(p["elastic"]["min"].get<int>(), 1);
  EXPECT_NE(p["explanation"].get<std::string>().find("made no samples there"), std::string::npos) << p["explanation"];
}

// The network: bytes per sample from the run, each type's network_gbps from the price
// table; float32 at 224 px on a worker with a 1 Gbit/s NIC is network-bound, and the plan
// says so. A trainer NIC that carries less than the workers make caps them all.
TEST(PlanNetwork, ALargeSampleOnASmallNicIsNetworkBound) {
  PriceTable prices = load_price_table(kPriceFile);
  prices.types["ml.c5.18xlarge"].network_gbps = 1;
  nlohmann::json s = two_workers();
  const double bytes = 3 * 224 * 224 * 4 + 8 + 8;
  s["plan_inputs"]["bytes_per_sample"] = bytes;
  nlohmann::json p = make_plan(s, prices, {});
  const double carried = 1e9 / 8 / bytes;
  EXPECT_NEAR(p["network"]["worker_samples_per_sec"].get<double>(), carried, 1e-6);
  EXPECT_NEAR(p["rows"][1]["samples_per_sec"].get<double>(), p["local_samples_per_sec"].get<double>() + carried, 1e-6);
  EXPECT_EQ(p["rows"][1]["limit"], "worker network");
  EXPECT_NE(p["explanation"].get<std::string>().find("the network, not the cores, limits each worker"), std::string::npos)
      << p["explanation"];
  EXPECT_NE(format_plan_text(p).find("worker network bound"), std::string::npos) << format_plan_text(p);
  // The trainer's NIC: 2 Gbit/s into the p4d carries two workers' worth at most.
  prices.types["ml.p4d.24xlarge"].network_gbps = 2;
  s["throughput"]["ceiling_samples_per_sec"] = 1e6;
  p = make_plan(s, prices, {.max_workers = 8});
  EXPECT_EQ(p["rows"][3]["limit"], "trainer network");
  EXPECT_NEAR(p["rows"][8]["samples_per_sec"].get<double>(), p["local_samples_per_sec"].get<double>() + 2 * carried, 1e-6);
  EXPECT_TRUE(p["workers_to_ceiling"].is_null());
  EXPECT_NE(p["explanation"].get<std::string>().find("ml.p4d.24xlarge's network (2.0 Gbit/s"), std::string::npos)
      << p["explanation"];
  // Without bytes per sample (an older summary) the network is not modelled, and says so.
  s["plan_inputs"].erase("bytes_per_sample");
  EXPECT_NE(make_plan(s, prices, {})["caveats"].dump().find("The network is not modelled"), std::string::npos);
}

// The CPU-time rate cross-checked against the wall clock: in a run that waited for data,
// workers that made far less than their threads' CPU time says were held by something
// else (storage, the network), and the plan says its table is optimistic; workers that
// agree (within 20%), or a run that did not wait, say nothing.
TEST(PlanInputs, TheCpuTimeRateIsCrossCheckedAgainstTheWallClock) {
  const PriceTable prices = load_price_table(kPriceFile);
  nlohmann::json s = two_workers();  // 2 x 72 threads x 45 = 6,480 samples/s by CPU time; made 6,327
  auto cross_check = [&] {
    const nlohmann::json plan = make_plan(s, prices, {});  // held: a range over a temporary's member dangles
    for (const auto& c : plan["caveats"]) {
      if (c.get<std::string>().rfind("Cross-check:", 0) == 0) return c.get<std::string>();
    }
    return std::string();
  };
  s["data_wait_fraction"] = 0.3;
  EXPECT_EQ(cross_check(), "") << "the workers made what their CPU time says";
  for (auto& w : s["plan_inputs"]["workers"]) w["images_per_sec"] = 1500.0;  // storage-bound
  EXPECT_NE(cross_check().find("the workers made 3,000.0 samples/s while the loop waited for data 30% of the time, "
                               "and their threads' CPU time says 6,480.0. Something besides their cores"),
            std::string::npos) << cross_check();
  s["data_wait_fraction"] = 0.02;
  EXPECT_EQ(cross_check(), "") << "a loop that did not wait holds its workers back itself";
  s["data_wait_fraction"] = 0.3;
  for (auto& w : s["plan_inputs"]["workers"]) w["images_per_sec"] = 5000.0;
  EXPECT_NE(cross_check().find("the table is pessimistic"), std::string::npos) << cross_check();
}

// Spot against a hand computation: C = 20 s, lambda = 0.5 an hour, R = 400 s.
TEST(PlanSpot, YoungsIntervalAndTheTimeFactorByHand) {
  const SpotJob job{0.5, 20, 400};
  const double lambda = 0.5 / 3600;
  const double tau = std::sqrt(2 * 20 / lambda);  // 379.5 s
  EXPECT_NEAR(checkpoint_interval_seconds(job), tau, 1e-9);
  EXPECT_NEAR(spot_time_factor(job, tau), (1 + 20 / tau) * (1 + lambda * (400 + (tau + 20) / 2)), 1e-12);
  // Young's interval is the best one: a shorter or longer interval loses more.
  EXPECT_LT(spot_time_factor(job, tau), spot_time_factor(job, tau / 2));
  EXPECT_LT(spot_time_factor(job, tau), spot_time_factor(job, tau * 2));
  EXPECT_TRUE(std::isinf(checkpoint_interval_seconds({0, 20, 400})));
  EXPECT_NEAR(absent_share(2, 360), 0.2 / 1.2, 1e-12);
}

// Every plan has a spot section: each choice's cost with interruptions beside on-demand,
// the checkpoint interval, and spot workers beside an on-demand trainer group; the cost
// and the checkpoint figures are the run's when it measured them.
TEST(PlanSpot, TheSectionAgreesWithTheTableAndTheRunsMeasurements) {
  PriceTable prices = load_price_table(kPriceFile);
  prices.types["ml.p4d.24xlarge"].spot_discount = 0.6;
  prices.types["ml.p4d.24xlarge"].spot_interruption_pct_month = 30;
  prices.types["ml.c5.18xlarge"].spot_discount = 0.7;
  prices.types["ml.c5.18xlarge"].spot_interruption_pct_month = 5;
  prices.spot.provision_seconds = 300;
  nlohmann::json s = two_workers();
  s["checkpoints"] = {{"count", 4}, {"seconds", 48.0}};
  s["startup_seconds"] = 90.0;
  const nlohmann::json p = make_plan(s, prices, {});
  const nlohmann::json& spot = p["spot"];
  EXPECT_DOUBLE_EQ(spot["checkpoint_seconds"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(spot["restart_seconds"].get<double>(), 390.0);
  ASSERT_EQ(spot["whole_job"].size(), 2u);  // no workers, and the recommended 2
  const nlohmann::json& two = spot["whole_job"][1];
  EXPECT_EQ(two["workers"], 2);
  const double lambda = -std::log(1 - 0.30) / 730 + 2 * -std::log(1 - 0.05) / 730;
  EXPECT_NEAR(two["interruptions_per_day"].get<double>(), 24 * lambda, 1e-12);
  const SpotJob job{lambda, 12, 390};
  const double tau = checkpoint_interval_seconds(job), factor = spot_time_factor(job, tau);
  const double step_s = p["rows"][2]["step_ms"].get<double>() / 1000;
  const double usd_per_hour = 37.688 * 0.4 + 2 * 3.672 * 0.3;
  EXPECT_NEAR(two["spot_usd_per_1000_steps"].get<double>(), usd_per_hour / 3600 * 1000 * step_s * factor, 1e-9);
  EXPECT_EQ(two["checkpoint_every_steps"], std::llround(tau / step_s));
  EXPECT_GT(two["saving_vs_on_demand"].get<double>(), 0.5);
  const nlohmann::json& split = spot["spot_workers_on_demand_trainer"];
  EXPECT_NEAR(split["worker_away_share"].get<double>(), absent_share(-std::log(1 - 0.05) / 730, 300), 1e-12);
  const std::string text = format_plan_text(p);
  EXPECT_NE(text.find("On spot"), std::string::npos) << text;
  EXPECT_NE(text.find("--checkpoint-every auto"), std::string::npos) << text;
  EXPECT_NE(p["caveats"].dump().find("A checkpoint took 12.0 s in this run"), std::string::npos) << p["caveats"];
  // Without measurements the section assumes, and says so.
  s.erase("checkpoints");
  EXPECT_NE(make_plan(s, prices, {})["caveats"].dump().find("No checkpoint was written in this run"), std::string::npos);
}

TEST(PlanText, GroupsThousands) {
  EXPECT_EQ(group_thousands(1234567.891, 2), "1,234,567.89");
  EXPECT_EQ(group_thousands(999.96, 1), "1,000.0");
  EXPECT_EQ(group_thousands(-1500, 0), "-1,500");
  EXPECT_EQ(group_thousands(-0.0001, 2), "0.00");
  EXPECT_EQ(group_thousands(0.201, 3), "0.201");
}

// The real binary; stdout in `out` (the plan, and errors: tandem logs to stdout), stderr in `err`.
int run_plan(const std::string& args, const fs::path& dir, std::string& out, std::string& err) {
  const std::string cmd = "timeout -s KILL 60 " + std::string(TANDEM_BINARY) + " " + args + " > " +
                          (dir / "out").string() + " 2> " + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  out = slurp(dir / "out");
  err = slurp(dir / "err");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PlanCli, TextFromARunDirectoryWithTheInstalledPrices) {
  const fs::path dir = fresh_dir("plan-cli-text");
  std::string out, err;
  ASSERT_EQ(run_plan("plan " + kRuns + "/two-workers", dir, out, err), 0) << err;
  EXPECT_NE(out.find("Recommended: 2 x ml.c5.18xlarge"), std::string::npos) << out;
  EXPECT_NE(out.find("sagemaker-prices.json (us-east-1"), std::string::npos) << out;
  EXPECT_NE(out.find("$0.712 per 1,000 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("Elastic pool: "), std::string::npos) << out;
  // A cheaper worker price moves nothing but the costs; the positional after --price stays the run.
  ASSERT_EQ(run_plan("plan --price ml.c5.18xlarge=1.0 " + kRuns + "/two-workers", dir, out, err), 0) << err;
  EXPECT_NE(out.find("+ N x ml.c5.18xlarge ($1.000/h"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(PlanCli, JsonForTools) {
  const fs::path dir = fresh_dir("plan-cli-json");
  std::string out, err;
  ASSERT_EQ(run_plan("plan --json --within 10 --prices " + kPriceFile + " " + kRuns +
                         "/two-workers/algo-2/output/data/summary.json", dir, out, err), 0) << err;
  const nlohmann::json p = nlohmann::json::parse(out);
  EXPECT_EQ(p["recommended"]["workers"], 2);
  EXPECT_EQ(p["fastest_within"]["within_pct"], 10.0);
  EXPECT_EQ(p["elastic"]["start"], 2);
  EXPECT_LE(p["elastic"]["min"].get<int>(), 2);
  EXPECT_EQ(p["elastic"]["max"], p["fastest_within"]["workers"]);
  EXPECT_EQ(p["rows"][0]["workers"], 0);
  EXPECT_NEAR(p["rows"][2]["usd_per_1000_steps"].get<double>(), 45.032 / 3600 * 512.0 / 9000 * 1000, 1e-9);
  fs::remove_all(dir);
}

TEST(PlanCli, BadInputIsOneClearError) {
  const fs::path dir = fresh_dir("plan-cli-bad");
  const std::pair<std::string, std::string> cases[] = {
      {kRuns + "/old-summary", "summary.json has no plan_inputs"},
      {kRuns + "/unknown-types", "--trainer-type ml.p4d.24xlarge"},
      {"--worker-type ml.c7.huge " + kRuns + "/two-workers", "unknown instance type 'ml.c7.huge'"},
      {"--price ml.c5.18xlarge=cheap " + kRuns + "/two-workers", "is not a price"},
      {"--json " + dir.string() + "/nowhere", "no such file or directory"}};
  for (const auto& [args, message] : cases) {
    std::string out, err;
    EXPECT_EQ(run_plan("plan " + args, dir, out, err), 3) << "configuration: " << args;
    const std::string all = out + err;
    EXPECT_NE(all.find(message), std::string::npos) << all;
    EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 1) << "one line, no plan: " << all;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::plan

namespace tandem::plan {
namespace {

// --sweep-jobs: N jobs like the run on one pool make each sample once; the pool needs the
// workers one job's rate takes (or its NICs the N-fold sending), not N times them.
TEST(PlanSweep, NJobsOnOnePoolNeedOneJobsWorkersUnlessTheNetworkHoldsThem) {
  PlanOptions o;
  o.sweep_jobs = 4;
  const nlohmann::json p = make_plan(two_workers(), load_price_table(kPriceFile), o);
  ASSERT_TRUE(p.contains("sweep")) << p.dump(2);
  const nlohmann::json& s = p["sweep"];
  const int alone = p["recommended"]["workers"].get<int>();
  EXPECT_EQ(s["separate_workers"], 4 * alone) << s.dump(2);
  EXPECT_LE(s["shared_workers"].get<int>(), alone) << s.dump(2);
  EXPECT_GE(s["shared_workers"].get<int>(), 1) << s.dump(2);
  EXPECT_NEAR(s["samples_sent_per_sec"].get<double>(), 4 * s["samples_made_per_sec"].get<double>(), 1e-6);
  EXPECT_GT(s["saving"].get<double>(), 0.5) << s.dump(2);
  const std::string text = format_plan_text(p);
  EXPECT_NE(text.find("A sweep of 4 such jobs"), std::string::npos) << text;
  EXPECT_NE(text.find("instead of " + std::to_string(4 * alone)), std::string::npos) << text;
  // The network, when it is what holds the pool: a worker NIC that carries 1.5 jobs' rate.
  ModelParams mp;
  mp.per_worker = 1000;
  mp.worker_network = 1500;
  const nlohmann::json row = {{"workers", 2}, {"samples_per_sec", 2000.0}};
  const nlohmann::json n = sweep_section(mp, row, 4, false);
  EXPECT_EQ(n["shared_workers"], 6) << n.dump(2);  // 8,000 samples/s out at 1,500 a NIC
  EXPECT_EQ(n["limit"], "worker network");
  EXPECT_FALSE(n.contains("saving"));
  PlanOptions bad;
  bad.sweep_jobs = -1;
  EXPECT_THROW(make_plan(two_workers(), load_price_table(kPriceFile), bad), ConfigError);
}

}  // namespace
}  // namespace tandem::plan
