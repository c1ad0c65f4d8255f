// The HTML report: escaping of names that came from peers, runs with no metrics or one
// step, the SVG charts, `tandem report` as a process, and the page in headless Chromium.
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/feed/script_run.h"
#include "tandem/plan/planner.h"
#include "tandem/report/html_report.h"
#include "tandem/report/run_files.h"
#include "tandem/report/summary.h"
#include "tandem/report/svg_chart.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;
using tandem::testing::fresh_dir;
using tandem::testing::run_tandem;
using tandem::testing::slurp;

const std::string kRuns = std::string(TANDEM_FIXTURES) + "/runs";
const std::string kPriceFile = std::string(TANDEM_FIXTURES) + "/../../data/sagemaker-prices.json";

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The trainer's side of plan_inputs: rates over training time (wall less paused) and per
// CPU-second, each worker by the facts for its address, the workers' type the first known.
TEST(ReportPlanInputs, MeasuredFromRankZerosSourcesAndWhatTheWorkersSaid) {
  TrainReport train;
  train.world = 4;
  train.wall_seconds = 12;
  train.paused_seconds = 2;
  std::vector<feed::SourceStats> sources(3);
  sources[0] = {.name = "local", .samples = 500, .compute_seconds = 4};
  sources[1] = {.name = "10.0.0.5:6000", .samples = 2000, .compute_seconds = 10};
  sources[2] = {.name = "10.0.0.6:6000", .samples = 0};
  const std::vector<WorkerFacts> facts = {{"10.0.0.6:6000", "algo-4", "", 0},
                                          {"10.0.0.5:6000", "algo-3", "ml.c5.4xlarge", 16}};
  const plan::PlanInputs p = measure_plan_inputs(train, sources, facts, "ml.g5.xlarge", 2, 6);
  EXPECT_EQ(std::tie(p.trainer_instance_type, p.trainer_hosts, p.ranks), std::make_tuple("ml.g5.xlarge", 2, 4));
  EXPECT_FALSE(p.cpu_model.empty());
  ASSERT_TRUE(p.local);
  EXPECT_EQ(*p.local, (plan::LocalRate{6, 125.0, 50.0}));
  ASSERT_EQ(p.workers.size(), 2u);
  EXPECT_EQ(p.workers[0], (plan::WorkerRate{"10.0.0.5:6000", "algo-3", "ml.c5.4xlarge", 16, 200.0, 200.0}));
  EXPECT_EQ(p.workers[1], (plan::WorkerRate{"10.0.0.6:6000", "algo-4", "", 0, 0.0, 0.0}));
  EXPECT_EQ(p.worker_instance_type, "ml.c5.4xlarge");
  EXPECT_FALSE(p.simulated) << "left for the caller";
}

// tandem.Feed waits for a batch in slices of 0.1 s (each a waiting()): the data wait is
// the whole wait, from the first slice, not the last slice alone.
TEST(ReportScriptRun, AWaitInSlicesCountsFromItsFirstSlice) {
  const fs::path dir = fresh_dir("script-run-slices");
  feed::ScriptRun run({.summary_path = (dir / "summary.json").string(), .log_every = 100});
  for (int batch = 0; batch < 2; ++batch) {
    for (int slice = 0; slice < 3; ++slice) {
      run.waiting();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    run.taken(4, batch, 2, [] { return std::vector<feed::SourceStats>{}; });
  }
  const TrainReport r = run.report();
  EXPECT_GE(r.data_wait_seconds, 2 * 0.09);
  EXPECT_GT(r.data_wait_fraction, 0.9);
}

TEST(ReportHtml, EscapesMarkupQuotesAndBadBytes) {
  EXPECT_EQ(html_escape("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;");
  EXPECT_EQ(html_escape("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");  // UTF-8 kept
  EXPECT_EQ(html_escape("a\xFF" "b\x01" "c\xC3"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD");
  EXPECT_EQ(html_escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an overlong '/' is not UTF-8
}

TEST(ReportHtml, PeerSuppliedNamesAreEscapedEverywhere) {
  nlohmann::json s = read_json_file(kRuns + "/two-workers/algo-2/output/data/summary.json");
  const std::string evil = "<script>alert(1)</script>";
  s["model"] = "<img src=x onerror=alert(2)>";
  s["workers"][0]["address"] = evil + ":6000";
  s["workers"][1]["failed"] = true;
  s["workers"][1]["error"] = "</td><b>boom</b>";
  s["plan_inputs"]["cpu_model"] = "\"><svg onload=alert(3)>";
  RunFiles run = load_run(kRuns + "/two-workers");
  for (auto& line : run.metrics) line["sources"][0]["name"] = evil + ":6000";
  ReportInputs in{s, run.metrics, nullptr, "no plan for this test", evil, ""};
  const std::string html = render_html_report(in);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>boom"), std::string::npos);
  EXPECT_EQ(html.find("<svg onload"), std::string::npos);
  EXPECT_GE(count(html, "&lt;script&gt;alert(1)&lt;/script&gt;:6000"), 2u);  // the sources table and the legend
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(2)&gt;"), std::string::npos);
}

// A source's error says what failed; the state column used to add its own "failed: ".
TEST(ReportHtml, AFailedSourceSaysFailedOnce) {
  nlohmann::json s = read_json_file(kRuns + "/two-workers/algo-2/output/data/summary.json");
  s["workers"][1]["failed"] = true;
  s["workers"][1]["error"] = "data worker 10.0.0.3:6000 failed: UNAVAILABLE: gone";
  RunFiles run = load_run(kRuns + "/two-workers");
  const std::string html = render_html_report({s, run.metrics, nullptr, "no plan for this test", "run", ""});
  EXPECT_NE(html.find("<td class=\"l\">data worker 10.0.0.3:6000 failed: UNAVAILABLE: gone"), std::string::npos)
      << html;
  EXPECT_EQ(html.find("failed: data worker"), std::string::npos) << html;
}

TEST(ReportHtml, FullRunHasEveryChartAndThePlan) {
  const fs::path dir = fresh_dir("report-full");
  plan::PriceTable prices = plan::load_price_table(kPriceFile);
  const std::string path = write_run_report(kRuns + "/two-workers", (dir / "r.html").string(), &prices);
  const std::string html = slurp(path);
  EXPECT_EQ(count(html, "<svg"), 7u);  // throughput, wait, breakdown, shares, loss, accuracy, cost vs N
  EXPECT_EQ(count(html, "<polygon"), 5u + 3u);  // five phases, three sources
  EXPECT_NE(html.find("tr class=\"best\"><td>2</td>"), std::string::npos);
  EXPECT_NE(html.find("Cost per sample against the number of workers"), std::string::npos);
  EXPECT_NE(html.find("Intel(R) Xeon(R) Platinum 8275CL"), std::string::npos);  // the CPU it ran on
  EXPECT_EQ(count(html, "http://"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));  // nothing fetched
  EXPECT_EQ(html.find("https://"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ReportHtml, OlderSummaryWithoutMetricsOrPlanStillRenders) {
  const fs::path dir = fresh_dir("report-old");
  plan::PriceTable prices = plan::load_price_table(kPriceFile);
  const std::string path = write_run_report(kRuns + "/old-summary", (dir / "r.html").string(), &prices);
  const std::string html = slurp(path);
  EXPECT_NE(html.find("no metrics.jsonl beside"), std::string::npos);
  EXPECT_NE(html.find("no plan: summary.json has no plan_inputs"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // Nothing at all: every field missing.
  const std::string bare = render_html_report(ReportInputs{nlohmann::json::object(), {}, nullptr, "", "", ""});
  EXPECT_NE(bare.find("no sources recorded"), std::string::npos);
  EXPECT_NE(bare.find("no step_seconds"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ReportHtml, OneStepRunDrawsPointsAndBars) {
  RunFiles run = load_run(kRuns + "/one-step");
  ASSERT_EQ(run.metrics.size(), 1u);
  const std::string html = render_html_report(ReportInputs{run.summary, run.metrics, nullptr, "types unknown", "", ""});
  EXPECT_EQ(count(html, "<svg"), 5u);  // no accuracy chart: no evaluation ran
  EXPECT_NE(html.find("no evaluation ran"), std::string::npos);
  EXPECT_GE(count(html, "<circle"), 3u);  // throughput, wait and loss are one dot each
  EXPECT_GE(count(html, "<rect fill"), 2u);  // the stacked charts become bars
  EXPECT_EQ(html.find("nan"), std::string::npos);
  EXPECT_EQ(html.find("inf"), std::string::npos);
}

TEST(ReportRunFiles, FindsSummariesAndSkipsBrokenMetricLines) {
  EXPECT_EQ(find_summary(kRuns + "/two-workers"), kRuns + "/two-workers/algo-2/output/data/summary.json");
  EXPECT_EQ(find_summary(kRuns + "/one-step"), kRuns + "/one-step/summary.json");
  const fs::path dir = fresh_dir("report-files");
  for (const char* host : {"algo-1", "algo-2"}) {
    fs::create_directories(dir / host / "output/data");
    std::ofstream(dir / host / "output/data/summary.json") << "{}";
  }
  std::string e;
  try {
    find_summary(dir.string());
  } catch (const ConfigError& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("several summaries"), std::string::npos) << e;
  std::ofstream(dir / "m.jsonl") << "{\"step\": 1}\n\n[1]\n{\"step\": 2, \"lo\n{\"step\": 3}\n";
  size_t bad = 0;
  EXPECT_EQ(read_metrics((dir / "m.jsonl").string(), bad).size(), 2u);
  EXPECT_EQ(bad, 2u);
  fs::remove_all(dir);
}

TEST(ReportSvg, TicksAreNiceAndCoverTheRange) {
  const std::vector<double> t = nice_ticks(0, 9000, 5);
  ASSERT_GE(t.size(), 3u);
  EXPECT_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 9000);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 2000);
  EXPECT_DOUBLE_EQ(nice_ticks(0, 1, 4)[1], 0.25);
  const std::vector<double> flat = nice_ticks(5, 5, 5);  // a flat range still has an axis
  ASSERT_GE(flat.size(), 2u);
  EXPECT_LE(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
  Chart c;
  c.series.push_back({"x", {1, 2}, {std::nan(""), INFINITY}});
  EXPECT_NE(render_chart(c).find("no data"), std::string::npos);
  c.x_label = "<x>";
  c.series.push_back({"<y>", {1, 2}, {3, 4}});
  const std::string svg = render_chart(c);
  EXPECT_NE(svg.find("&lt;x&gt;"), std::string::npos);
  EXPECT_NE(svg.find("&lt;y&gt;"), std::string::npos);  // the legend
  EXPECT_EQ(svg.find("<x>"), std::string::npos);
}

TEST(ReportCli, WritesThePage) {
  const fs::path dir = fresh_dir("report-cli");
  const fs::path page = dir / "sub/report.html";
  ASSERT_EQ(run_tandem("report " + kRuns + "/two-workers -o " + page.string(), dir / "log", 60), 0) << slurp(dir / "log");
  EXPECT_NE(slurp(dir / "log").find("wrote " + page.string()), std::string::npos);
  EXPECT_EQ(count(slurp(page), "<svg"), 7u);
  EXPECT_EQ(run_tandem("report " + kRuns + "/two-workers --price ml.c5.18xlarge=x -o " + page.string(), dir / "log", 60), 3);
  EXPECT_NE(slurp(dir / "log").find("is not a price"), std::string::npos);
  fs::remove_all(dir);
}

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

// Headless Chromium's command line, its profile and home under `dir`.
std::string headless(const std::string& browser, const fs::path& dir) {
  const std::string flags = " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=" +
                            (dir / "profile").string() + " --window-size=1200,2400 ";
  return "HOME=" + dir.string() + " timeout -s KILL 90 " + browser + flags;
}

// Writes the DOM headless Chromium builds from `page` to dir/dom.html (its stderr to
// dir/dom.err). True when Chromium exited 0.
bool dump_dom(const std::string& browser, const fs::path& dir, const std::string& page) {
  return std::system((headless(browser, dir) + "--dump-dom file://" + page + " > " + (dir / "dom.html").string() +
                      " 2> " + (dir / "dom.err").string()).c_str()) == 0;
}

// A Feed-fed script's run, as the browser shows it: the settings the script chose are
// the script's own, not tandem's defaults, and the step-time table's share of data wait
// is the header's. The fixture is a real run: examples/python/train_ddp.py --model small
// under tandem simulate with one worker (it reports its loss and lr through ds.log).
TEST(ReportChromium, AScriptRunShowsTheScriptsOwnSettingsAndOneDataWait) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium): the page was not checked in a browser";
  const fs::path dir = fresh_dir("report-chromium-script");
  plan::PriceTable prices = plan::load_price_table(kPriceFile);
  const std::string page = write_run_report(kRuns + "/script-run", (dir / "report.html").string(), &prices);
  ASSERT_TRUE(dump_dom(browser, dir, page)) << slurp(dir / "dom.err");
  const std::string dom = slurp(dir / "dom.html");
  for (const char* setting : {"optimizer", "schedule", "mixup alpha", "label smoothing", "momentum"}) {
    EXPECT_NE(dom.find(std::string("<th class=\"l\">") + setting + "</th><td class=\"l\">the script's own (not known to tandem)"),
              std::string::npos) << setting;
  }
  EXPECT_EQ(dom.find(">sgd<"), std::string::npos) << "tandem's default optimizer shown as the script's";
  EXPECT_NE(dom.find("<td class=\"l\">the script's own work</td>"), std::string::npos);
  const size_t card = dom.find("</b><span>of step time waiting for data</span>");
  ASSERT_NE(card, std::string::npos);
  const double wait_header = std::strtod(dom.c_str() + dom.rfind("<b>", card) + 3, nullptr);
  const size_t row = dom.find("<td class=\"l\">data wait</td>");
  ASSERT_NE(row, std::string::npos);
  size_t share_at = row;
  for (int cell = 0; cell < 3; ++cell) share_at = dom.find("<td>", share_at + 1);  // seconds, ms per step, share
  const double wait_chart = std::strtod(dom.c_str() + share_at + 4, nullptr);
  EXPECT_GT(wait_header, 0);
  EXPECT_NEAR(wait_header, wait_chart, 0.11) << "the header's data wait and the step-time table's disagree";
  fs::remove_all(dir);
}

// The page as a browser builds it: every chart is an SVG element in the DOM, and a
// screenshot is an image with something drawn on it.
TEST(ReportChromium, RendersTheChartsHeadless) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium): the page was not checked in a browser";
  const fs::path dir = fresh_dir("report-chromium");
  plan::PriceTable prices = plan::load_price_table(kPriceFile);
  const std::string page = write_run_report(kRuns + "/two-workers", (dir / "report.html").string(), &prices);
  ASSERT_TRUE(dump_dom(browser, dir, page)) << slurp(dir / "dom.err");
  const std::string run = headless(browser, dir);
  const std::string dom = slurp(dir / "dom.html"), source = slurp(page);
  EXPECT_EQ(count(dom, "<svg"), 7u) << slurp(dir / "dom.err");
  for (const char* element : {"<polygon", "<path", "<rect", "<text", "<circle"}) {
    EXPECT_EQ(count(dom, element), count(source, element)) << element;  // nothing lost to a malformed tag
  }
  EXPECT_NE(dom.find("</footer>"), std::string::npos);
  const fs::path png = dir / "report.png";
  ASSERT_EQ(std::system((run + "--hide-scrollbars --screenshot=" + png.string() + " file://" + page + " > " +
                         (dir / "shot.err").string() + " 2>&1").c_str()), 0) << slurp(dir / "shot.err");
  const std::string image = slurp(png);
  ASSERT_GT(image.size(), 8u);
  EXPECT_EQ(image.substr(1, 3), "PNG");
  EXPECT_GT(image.size(), 50'000u);  // a blank 1200 x 2400 page compresses to a few kB
  fs::remove_all(dir);
}

// What a report of the fixture run says in words: sources by host name, no "-%", the
// settings section (or why there is none), compute seconds that are not rounded to 0.
TEST(ReportWords, HostNamesDashesAndSettings) {
  nlohmann::json s = read_json_file(kRuns + "/two-workers/algo-2/output/data/summary.json");
  s["plan_inputs"]["workers"][0]["images_per_sec"] = 3195.0;
  s["workers"][2]["compute_seconds"] = 0.042;
  s["data_wait_fraction"] = nullptr;
  s["settings"] = {{"data", "imagefolder"}, {"pipeline", "decode(channels=0,scaled=1),to_uint8()"},
                   {"optimizer", "adamw"}, {"lr", 0.001}, {"seed", 7}};
  plan::PriceTable prices = plan::load_price_table(kPriceFile);
  prices.types["ml.p4d.24xlarge"].vcpus = 16;  // all kept by its 8 ranks: nothing feeds the loop at N = 0
  const nlohmann::json p = plan::make_plan(s, prices, {});
  ASSERT_TRUE(p["rows"][1]["saving_vs_none"].is_null()) << p.dump();
  const std::string html = render_html_report(ReportInputs{s, {}, p, "", "", ""});
  EXPECT_EQ(html.find("-%"), std::string::npos) << "a missing percentage is \"-\", as in the text";
  EXPECT_NE(html.find("<td class=\"l\">algo-1 (10.0.0.5:6000)</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">algo-3 (10.0.0.6:6000)</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">local</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>0.042</td>"), std::string::npos) << "compute seconds of a short run";
  EXPECT_NE(html.find("<h2>Settings</h2>"), std::string::npos);
  EXPECT_NE(html.find("<th class=\"l\">optimizer</th><td class=\"l\">adamw</td>"), std::string::npos);
  EXPECT_NE(html.find("<th class=\"l\">pipeline</th><td class=\"l\">decode(channels=0,scaled=1),to_uint8()</td>"),
            std::string::npos);
  s.erase("settings");
  EXPECT_NE(render_html_report(ReportInputs{s, {}, p, "", "", ""}).find("no settings in the summary"),
            std::string::npos);
}

// A run made by hand (no SageMaker): its summary records the settings, and planning it
// for a worker type asks for the trainer's type instead of a price for 'local'.
TEST(ReportWords, ARunMadeByHandIsReportedAndPlannedWithTheRightQuestion) {
  const fs::path dir = fresh_dir("report-by-hand");
  const fs::path summary = dir / "run/summary.json";
  ASSERT_EQ(run_tandem("trainer --local-workers 1 --steps 3 --batch-size 8 --dataset-size 64 --optimizer adamw "
                       "--sagemaker-root " + (dir / "none").string() + " --summary-json " + summary.string(),
                       dir / "train.log", 120),
            0)
      << slurp(dir / "train.log");
  const nlohmann::json s = read_json_file(summary.string());
  EXPECT_EQ(s["plan_inputs"]["trainer_instance_type"], "local");
  EXPECT_EQ(s["settings"]["optimizer"], "adamw");
  EXPECT_EQ(s["settings"]["dataset"], "synthetic");
  EXPECT_EQ(s["settings"]["dataset_size"], 64);
  EXPECT_EQ(run_tandem("plan " + summary.string() + " --worker-type ml.c5.18xlarge", dir / "plan.log", 60), 3);  // configuration
  const std::string plan = slurp(dir / "plan.log");
  EXPECT_NE(plan.find("the trainer's instance type is unknown (the run recorded 'local'"), std::string::npos) << plan;
  EXPECT_NE(plan.find("made by hand, outside SageMaker): give the type to plan for, e.g. --trainer-type "
                      "ml.p4d.24xlarge"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("--price local"), std::string::npos) << plan;
  EXPECT_EQ(run_tandem("plan " + summary.string() + " --worker-type ml.c5.18xlarge --trainer-type ml.g5.xlarge",
                       dir / "plan2.log", 60),
            0)
      << slurp(dir / "plan2.log");
  ASSERT_EQ(run_tandem("report " + summary.string(), dir / "report.log", 60), 0) << slurp(dir / "report.log");
  const std::string html = slurp(dir / "run/report.html");
  EXPECT_NE(html.find("<th class=\"l\">optimizer</th><td class=\"l\">adamw</td>"), std::string::npos);
  EXPECT_EQ(html.find("<td>0.0</td>"), std::string::npos) << "compute seconds rounded away";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::report
