// The python(FILE:FUNCTION) step of --pipeline, a Python dataset on a trainer's own cores,
// and the Python processes' shared memory within --max-inflight-mb: real Python processes
// (/usr/bin/python3 with numpy) running tests/fixtures/python_datasets/, in this process and
// behind real `tandem worker` processes.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_worker_client.h"
#include "image_fixtures.h"
#include "process_helpers.h"
#include "python_fixture.h"
#include "worker_fixture.h"
#include "tandem/common/error.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using data::testing::encode_png;
using data::testing::gradient_image;
using data::testing::write_bytes;
using testing::fresh_dir;
using testing::kPythonFixtures;
using testing::sample;
using testing::request_batch;
using testing::sample_error;
using testing::slurp;
using testing::start_error;

const std::string kSteps = kPythonFixtures + "/steps.py";

// 12 PNG images in two classes; with `bright`, image 5 of class b is nearly white.
fs::path image_folder(const std::string& name, bool bright = false) {
  const fs::path root = fresh_dir(name) / "images";
  for (int i = 0; i < 6; ++i) {
    for (const char* c : {"a", "b"}) {
      data::Image img = gradient_image(40, 36, 3, 7 * i + (c[0] == 'b'));
      if (bright && i == 5 && c[0] == 'b') std::fill(img.pixels.begin(), img.pixels.end(), uint8_t{250});
      write_bytes(root / c / (std::to_string(i) + ".png"), encode_png(img, PNG_FORMAT_RGB));
    }
  }
  return root;
}

DataOptions folder_data(const fs::path& root, const std::string& pipeline, int procs = 2) {
  DataOptions d;
  d.data = "imagefolder:" + root.string();
  d.pipeline = pipeline;
  d.python = "/usr/bin/python3";
  d.python_procs = procs;
  return d;
}

std::string step(const std::string& function, const std::string& file = kSteps) {
  return "decode,center_crop(16),hflip,python(" + file + ":" + function + ")";
}


int line_of(const std::string& file, const std::string& text) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(text) != std::string::npos) return n;
  }
  return -1;
}

// Its output shape comes from sample 0; each sample is the same bytes with 1 or 3
// processes and from any thread, the step really ran on the C++ steps' image, and the
// step's draws (random, numpy.random, tandem.sample_rng()) change with the epoch.
TEST(PythonStep, SameBytesWithOneOrThreeProcessesAndItsShapeFromSampleZero) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-same");
  auto plain = data::make_dataset(folder_data(root, "decode,center_crop(16),hflip"));
  auto one = data::make_dataset(folder_data(root, step("mark"), 1));
  auto three = data::make_dataset(folder_data(root, step("mark"), 3));
  EXPECT_EQ(one->info().sample_shape, (std::vector<int64_t>{3, 8, 16}));
  EXPECT_EQ(one->info().fingerprint, three->info().fingerprint);
  EXPECT_NE(one->info().fingerprint, plain->info().fingerprint);
  const uint64_t n = one->info().size;
  std::vector<std::vector<std::byte>> serial(n), parallel(n);
  for (uint64_t i = 0; i < n; ++i) serial[i] = sample(*one, i, 2);
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = t; i < n; i += 3) parallel[i] = sample(*three, i, 2);
    });
  }
  for (auto& t : threads) t.join();
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(serial[i], parallel[i]) << "sample " << i;
  const auto before = sample(*plain, 4, 2);  // [3,16,16]; the step keeps rows 0, 2, ...
  for (int row = 0; row < 8; ++row) {
    for (int x = 0; x < 16; ++x) {
      const auto in = static_cast<int>(before[16 * 16 + 2 * row * 16 + x]);
      ASSERT_EQ(static_cast<int>(serial[4][8 * 16 + row * 16 + x]), 255 - in) << "channel 1, row " << row;
    }
  }
  const auto other_epoch = sample(*one, 4, 3);
  EXPECT_NE(std::vector<std::byte>(other_epoch.begin(), other_epoch.begin() + 3),
            std::vector<std::byte>(serial[4].begin(), serial[4].begin() + 3));
}

TEST(PythonStep, TheFingerprintCoversTheFunctionAndTheFilesBytes) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-fingerprint");
  const fs::path copy = root.parent_path() / "steps.py";
  fs::copy_file(kSteps, copy);
  auto mine = data::make_dataset(folder_data(root, step("mark", copy.string()), 1));
  EXPECT_NE(mine->info().description.find("python(file=steps.py,function=mark,code="), std::string::npos)
      << mine->info().description;
  EXPECT_EQ(data::make_dataset(folder_data(root, step("mark"), 1))->info().fingerprint, mine->info().fingerprint)
      << "the same file elsewhere: the same dataset";
  std::ofstream(copy, std::ios::app) << "\n# another version\n";
  auto edited = data::make_dataset(folder_data(root, step("mark", copy.string()), 1));
  EXPECT_NE(edited->info().fingerprint, mine->info().fingerprint);
  EXPECT_NE(data::describe_difference(edited->info().description, mine->info().description).find("pipeline"),
            std::string::npos);
}

TEST(PythonStepErrors, StartErrorsNameTheFileTheFunctionAndThePlace) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-start-errors");
  const std::string no_file = start_error(folder_data(root, step("mark", "/no/such/aug.py")));
  EXPECT_NE(no_file.find("/no/such/aug.py is not a file"), std::string::npos) << no_file;
  const std::string no_function = start_error(folder_data(root, step("nope")));
  EXPECT_NE(no_function.find("has no 'nope'"), std::string::npos) << no_function;
  EXPECT_NE(no_function.find("mark"), std::string::npos) << "it lists what the file defines: " << no_function;
  const std::string not_callable = start_error(folder_data(root, step("NOT_A_FUNCTION")));
  EXPECT_NE(not_callable.find("is a int, not a function"), std::string::npos) << not_callable;
  const std::string no_colon = start_error(folder_data(root, "decode,center_crop(16),python(" + kSteps + ")"));
  EXPECT_NE(no_colon.find("python(my_aug.py:augment)"), std::string::npos) << no_colon;
  const std::string misplaced = start_error(folder_data(root, "decode,center_crop(16),python(" + kSteps + ":mark),hflip"));
  EXPECT_NE(misplaced.find("hflip follows python("), std::string::npos) << misplaced;
}

TEST(PythonStepErrors, WhatItReturnsIsCheckedAgainstOneUint8ArrayOfOneShape) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-outputs", true);
  const std::string floats = start_error(folder_data(root, step("floats")));
  EXPECT_NE(floats.find("on sample 0"), std::string::npos) << floats;
  EXPECT_NE(floats.find("it returned a float32 array of shape [3,16,16], expected a uint8 numpy array [C,H,W]"),
            std::string::npos) << floats;
  const std::string label = start_error(folder_data(root, step("with_label")));
  EXPECT_NE(label.find("it returned a dict of fields ('image', 'label') with a 'label': the label is the dataset's"),
            std::string::npos) << label;
  const std::string no_image = start_error(folder_data(root, step("no_image")));
  EXPECT_NE(no_image.find("it returned a dict of fields ('mask') without an 'image'"), std::string::npos) << no_image;
  const std::string typo = start_error(folder_data(root, step("ragged_typo")));
  EXPECT_NE(typo.find("the function's ragged_fields attribute names 'boxes', which sample 0 does not have"),
            std::string::npos) << typo;
  auto unnamed = data::make_dataset(folder_data(root, step("points_not_ragged")));
  std::string varies;
  for (uint64_t i = 1; i < unnamed->info().size && varies.empty(); ++i) varies = sample_error(*unnamed, i);
  EXPECT_NE(varies.find("name 'points' in the function's ragged_fields attribute"), std::string::npos) << varies;
  auto shrinks = data::make_dataset(folder_data(root, step("shrinks_bright")));
  const uint64_t bright = 11;  // b/5.png: the classes' files in order, a/0..5 then b/0..5
  const std::string later = sample_error(*shrinks, bright);
  EXPECT_NE(later.find("sample 11 in --pipeline step python("), std::string::npos) << later;
  EXPECT_NE(later.find("it returned a uint8 array of shape [3,4,4], expected a uint8 numpy array of shape [3,16,16]"),
            std::string::npos) << later;
}

TEST(PythonStepErrors, AnExceptionNamesTheSampleFileLineAndMessageAndUnderSkipIsReplaced) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-raises", true);
  auto failing = data::make_dataset(folder_data(root, step("too_bright")));
  const std::string e = sample_error(*failing, 11);
  EXPECT_NE(e.find("sample 11 in --pipeline step python(" + kSteps + ":too_bright)"), std::string::npos) << e;
  EXPECT_NE(e.find("ValueError: this image is too bright on purpose"), std::string::npos) << e;
  EXPECT_NE(e.find("steps.py:" + std::to_string(line_of(kSteps, "too bright on purpose"))), std::string::npos) << e;
  EXPECT_NE(e.find("b/5.png"), std::string::npos) << "the image it came from: " << e;
  EXPECT_NE(e.find("--on-bad-sample skip"), std::string::npos) << e;
  EXPECT_EQ(sample_error(*failing, 10), "") << "its processes go on serving";
  DataOptions d = folder_data(root, step("too_bright"));
  d.on_bad_sample = "skip";
  auto skipping = data::make_dataset(d);
  EXPECT_EQ(sample_error(*skipping, 11), "");
  ASSERT_EQ(skipping->skipped().size(), 1u);
  EXPECT_NE(skipping->skipped()[0].find("b/5.png"), std::string::npos) << skipping->skipped()[0];
  EXPECT_NE(skipping->skipped()[0].find("too bright on purpose"), std::string::npos) << skipping->skipped()[0];
  const fs::path only_bright = root.parent_path() / "only-bright";
  fs::create_directories(only_bright / "b");
  fs::copy_file(root / "b" / "5.png", only_bright / "b" / "5.png");
  const std::string first = start_error(folder_data(only_bright, step("too_bright"), 1));
  EXPECT_NE(first.find("cannot use --pipeline step python(" + kSteps + ":too_bright) on sample 0"), std::string::npos)
      << first;
  EXPECT_NE(first.find("too bright on purpose"), std::string::npos) << first;
}

// --- the pool: processes started as needed, shared memory within a limit -------------

data::PythonPoolOptions pool_options(const std::string& name, int procs) {
  DataOptions d;
  d.python = "/usr/bin/python3";
  d.python_procs = procs;
  data::PythonPoolOptions p = data::python_runtime_options(data::python_runtime(d));
  p.file = kPythonFixtures + "/datasets.py";
  p.name = name;
  p.args_json = R"({"n": 64, "size": 8, "delay": 0.05})";
  return p;
}

TEST(PythonPool, StartsOneProcessAndTheOthersAsCallsNeedThem) {
  REQUIRE_NUMPY();
  data::PythonPoolOptions p = pool_options("Squares", 3);
  p.start_procs = 1;
  data::PythonProcessPool pool(p);
  EXPECT_EQ(pool.pids().size(), 1u);
  for (int i = 0; i < 4; ++i) pool.run(i, 7, [](const data::SampleFields&) {});
  EXPECT_EQ(pool.pids().size(), 1u) << "one caller at a time needs one process";
  std::vector<std::thread> threads;
  std::atomic<int> inside{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) pool.run(t * 4 + i, 7, [&](const data::SampleFields&) { ++inside; });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(inside, 12);
  EXPECT_GE(pool.pids().size(), 2u);
  EXPECT_LE(pool.pids().size(), 3u);
}

// A sample larger than its process's share of --max-inflight-mb is one clear error: at
// start (sample 0) in this process, and from a real worker.
TEST(PythonPool, ASampleOverItsShareOfMaxInflightIsAClearError) {
  REQUIRE_NUMPY();
  DataOptions d;
  d.data = "python:" + kPythonFixtures + "/datasets.py:Squares";
  d.data_args = R"({"n": 4, "size": 1024})";  // 3 MiB a sample
  d.python = "/usr/bin/python3";
  d.python_procs = 2;
  const std::string e = start_error(d, {.python_shm_bytes = 4u << 20});  // 2 MiB each
  EXPECT_NE(e.find("sample 0 of python:"), std::string::npos) << e;
  EXPECT_NE(e.find("needs 3.0 MiB of shared memory, more than the 2.0 MiB each of its 2 Python processes may use"),
            std::string::npos) << e;
  EXPECT_NE(e.find("--max-inflight-mb"), std::string::npos) << e;
  auto fits = data::make_dataset(d, {.python_shm_bytes = 8u << 20});
  EXPECT_EQ(fits->shared_memory_bytes(), 8u << 20);
  EXPECT_EQ(sample(*fits, 3, 0).size(), 3u << 20);

  const fs::path dir = fresh_dir("python-shm-worker");
  const auto out = testing::run_capture("worker --port 0 --bind 127.0.0.1 --max-inflight-mb 8 --python-procs 2 "
                                        "--python /usr/bin/python3 --data " + d.data + " --data-args '" + d.data_args + "'",
                                        dir / "w.log", 60);
  EXPECT_EQ(out.code, 3) << out.out;
  EXPECT_NE(out.out.find("more than the 2.0 MiB each of its 2 Python processes may use (half of --max-inflight-mb"),
            std::string::npos) << out.out;
}

// The python() step's input goes through the same shared memory, within the same limit.
TEST(PythonPool, AStepOutputOverTheLimitIsAClearError) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-shm");
  DataOptions d = folder_data(root, step("huge"));
  const std::string e = start_error(d, {.python_shm_bytes = 2u << 20});  // 1 MiB each of 2; the step returns 3 MiB
  EXPECT_NE(e.find("sample 0 in --pipeline step python("), std::string::npos) << e;
  EXPECT_NE(e.find("needs 3.0 MiB of shared memory"), std::string::npos) << e;
}

// --- behind real workers ---------------------------------------------------------------

TEST(PythonStepWorkers, TwoWorkersServeByteIdenticalBatches) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-workers");
  const fs::path dir = root.parent_path();
  const std::string flags = "--threads 2 --python /usr/bin/python3 --data imagefolder:" + root.string() +
                            " --pipeline '" + step("mark") + "' --python-procs ";
  testing::Worker a = testing::start_worker(flags + "1", dir / "a.log", 60s);
  testing::Worker b = testing::start_worker(flags + "3", dir / "b.log", 60s);
  ASSERT_NE(a.port, 0) << slurp(dir / "a.log");
  ASSERT_NE(b.port, 0) << slurp(dir / "b.log");
  const data::BatchRequest request{3, 1, {0, 11, 5, 5, 7, 2}};
  const data::Batch x = request_batch(a.target(), request), y = request_batch(b.target(), request);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{6, 3, 8, 16}));
  EXPECT_EQ(x.labels, y.labels);
  EXPECT_EQ(x.data, y.data);
  auto local = data::make_dataset(folder_data(root, step("mark"), 1));
  EXPECT_EQ(std::vector<std::byte>(x.data.data() + 3 * 8 * 16, x.data.data() + 2 * 3 * 8 * 16), sample(*local, 11, 1))
      << "the same bytes as made in this process";
}

// A step that returns a dict: its 'image' is the sample's image, its other fields join
// the dataset's schema after image and label (the label still the class folder's), and a
// worker sends them as fields: dense (mask) and ragged (points, the function's
// ragged_fields attribute), numbers as float32.
TEST(PythonStepFields, ADictsFieldsTravelBesideTheImageAndTheFoldersLabel) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-fields");
  auto mask = data::make_dataset(folder_data(root, step("fields")));
  std::string names;
  for (const data::FieldSpec& f : mask->info().schema()) names += data::field_spec_text(f) + "; ";
  EXPECT_EQ(names, "image uint8 [3,16,16]; label int64 []; mask uint8 [16,16]; ") << names;
  EXPECT_EQ(mask->info().num_classes, 2);
  const fs::path dir = root.parent_path();
  testing::Worker w = testing::start_worker("--threads 2 --python /usr/bin/python3 --python-procs 2 --data imagefolder:" +
                                                root.string() + " --pipeline '" + step("with_points") + "'",
                                            dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
  const data::BatchRequest request{1, 0, {0, 7, 3, 11}};
  const data::Batch b = request_batch(w.target(), request);
  EXPECT_EQ(b.labels, (std::vector<int64_t>{0, 1, 0, 1}));  // a/0..5 then b/0..5
  ASSERT_EQ(b.fields.size(), 2u);
  EXPECT_EQ(b.fields[0].name, "brightness");
  EXPECT_EQ(b.fields[0].dtype, data::DType::kFloat32);
  const data::Field& points = b.fields[1];
  EXPECT_EQ(points.name, "points");
  ASSERT_EQ(points.lengths.size(), 4u);
  const size_t pixels = 3 * 16 * 16;
  int64_t rows = 0;
  for (size_t i = 0; i < 4; ++i) {
    const auto* image = reinterpret_cast<const uint8_t*>(b.data.data()) + i * pixels;
    const int64_t n = image[0] % 3 + 1;  // the function's rule, from the image it returned
    EXPECT_EQ(points.lengths[i], n) << "sample " << i;
    const auto* values = reinterpret_cast<const float*>(points.data.data()) + rows * 2;
    for (int64_t v = 0; v < n * 2; ++v) EXPECT_EQ(values[v], static_cast<float>(n)) << "sample " << i;
    rows += n;
    double sum = 0;
    for (size_t p = 0; p < pixels; ++p) sum += image[p];
    EXPECT_NEAR(reinterpret_cast<const float*>(b.fields[0].data.data())[i], sum / pixels, 1e-3) << "sample " << i;
  }
  EXPECT_EQ(points.shape, (std::vector<int64_t>{rows, 2}));
}

// --- a Python dataset on the trainer's own cores ----------------------------------------

DataOptions squares(const std::string& file) {
  DataOptions d;
  d.data = "python:" + file + ":Squares";
  d.data_args = R"({"n": 96, "size": 8})";
  d.python = "/usr/bin/python3";
  d.python_procs = 2;
  return d;
}

feed::FeedOptions feed_of(const DataOptions& d, const std::shared_ptr<const data::Dataset>& served,
                          std::shared_ptr<testing::FakeWorkerState> state) {
  feed::FeedOptions o;
  o.data = d;
  o.workers = {"w"};
  o.batch_size = 8;
  o.connect_timeout_s = 30;
  o.batch_timeout_s = 60;
  o.connect = [served, state](const std::string& target) {
    return std::make_unique<testing::FakeWorkerClient>(target, state, served);
  };
  return o;
}

// With the file here a rank's feed builds the dataset (its own pool) and can make samples
// on local threads; without it, it learns the dataset from its workers.
TEST(PythonDatasetLocal, AFeedWithTheFileMakesSamplesItselfOneWithoutLearnsFromWorkers) {
  REQUIRE_NUMPY();
  const DataOptions here = squares(kPythonFixtures + "/datasets.py");
  auto served = data::make_dataset(here);
  auto state = std::make_shared<testing::FakeWorkerState>();
  state->info = testing::describe(*served, "w-host");
  std::atomic<bool> stop{false};
  {
    feed::RankFeed feed(feed_of(here, served, state), stop);
    ASSERT_NE(feed.local_dataset(), nullptr) << "the file is here: the feed makes the dataset itself";
    EXPECT_EQ(feed.info().fingerprint, served->info().fingerprint);
    feed.start(12, 0, 2);
    int batches = 0;
    while (auto b = feed.next()) ++batches;
    EXPECT_EQ(batches, 12);
    uint64_t local = 0;
    for (const auto& s : feed.scheduler().stats()) {
      if (s.name == "local") local = s.samples;
    }
    EXPECT_GT(local, 0u) << "the local threads made samples through the feed's Python processes";
  }
  const DataOptions elsewhere = squares("not-on-this-host/datasets.py");
  feed::RankFeed learner(feed_of(elsewhere, served, state), stop);
  EXPECT_EQ(learner.local_dataset(), nullptr);
  EXPECT_EQ(learner.info().fingerprint, served->info().fingerprint);
  EXPECT_EQ(learner.info().sample_shape, (std::vector<int64_t>{3, 8, 8}));
}

// A trainer and a worker as real processes: the trainer's --local-workers make samples
// through its own Python processes, checked against the worker's fingerprint; the audit
// shows every sample once.
TEST(PythonDatasetLocal, ATrainerWithTheFileUsesItsLocalWorkersBesideAWorker) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-local-trainer");
  const std::string data = " --python /usr/bin/python3 --data python:" + kPythonFixtures +
                           "/datasets.py:Squares --data-args '{\"n\": 400, \"size\": 16, \"delay\": 0.005}'";
  testing::Worker w = testing::start_worker("--threads 1 --python-procs 1" + data, dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
  const auto out = testing::run_capture("trainer --workers " + w.target() + " --local-workers 2 --train-threads 1" +
                                            " --batch-size 8 --steps 30 --audit-samples --summary-json " +
                                            (dir / "s.json").string() + data,
                                        dir / "trainer.log", 240);
  ASSERT_EQ(out.code, 0) << out.out << slurp(dir / "w.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  uint64_t local = 0, remote = 0;
  for (const auto& source : s["workers"]) {
    (source["address"] == "local" ? local : remote) += source["samples"].get<uint64_t>();
  }
  EXPECT_GT(local, 0u) << s["workers"].dump(2);
  EXPECT_EQ(local + remote, 30u * 8) << s["workers"].dump(2);
  EXPECT_EQ(s["sample_audit"]["missing"], 0) << s["sample_audit"].dump(2);
  EXPECT_EQ(s["sample_audit"]["duplicated"], 0) << s["sample_audit"].dump(2);
  EXPECT_EQ(out.out.find("is not on this host"), std::string::npos) << out.out;
}

// Users' code must be deterministic: a python() step drawing from os.urandom is named by
// the dataset's check (which a worker runs at start); one drawing only from the sources
// tandem seeds is not.
TEST(PythonStep, AStepDrawingFromAnUnseededSourceIsFound) {
  REQUIRE_NUMPY();
  const fs::path root = image_folder("python-step-determinism");
  EXPECT_EQ(data::make_dataset(folder_data(root, step("mark")))->determinism_problem(), "");
  const std::string problem = data::make_dataset(folder_data(root, step("unseeded")))->determinism_problem();
  EXPECT_NE(problem.find("steps.py:unseeded) is not deterministic: on sample 0"), std::string::npos) << problem;
  EXPECT_NE(problem.find("tandem.sample_rng()"), std::string::npos) << problem;
  fs::remove_all(root.parent_path());
}

}  // namespace
}  // namespace tandem
