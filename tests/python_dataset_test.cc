// Python datasets (--data python:FILE:NAME): real Python processes (/usr/bin/python3 with
// numpy) running tests/fixtures/python_datasets/datasets.py, in this process and behind
// real `tandem worker` processes.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "python_fixture.h"
#include "worker_fixture.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/python_dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::Child;
using testing::fresh_dir;
using testing::python_data;
using testing::sample;
using testing::request_batch;
using testing::sample_error;
using testing::slurp;
using testing::start_error;
using testing::spawn;
using testing::start_worker;
using testing::wait_exit;
using testing::wait_for_text;
using testing::Worker;

const std::string kFile = std::string(TANDEM_FIXTURES) + "/python_datasets/datasets.py";



// The line of the fixture holding `text`.
int fixture_line(const std::string& text) {
  std::ifstream in(kFile);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(text) != std::string::npos) return n;
  }
  return -1;
}

TEST(PythonDataset, LearnsItsSchemaAndSizeFromTheDataset) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Squares", R"({"n": 40, "size": 8, "classes": 4})"));
  const data::DatasetInfo& info = ds->info();
  EXPECT_EQ(info.name, "python");
  EXPECT_EQ(info.size, 40u);
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{3, 8, 8}));
  EXPECT_EQ(info.dtype, data::DType::kUInt8);
  EXPECT_EQ(info.num_classes, 4);
  EXPECT_EQ(data::info_problem(info), "");
  int64_t label = -1;
  const auto bytes = sample(*ds, 13, 0, &label);
  EXPECT_EQ(label, 13 % 4);
  EXPECT_EQ(static_cast<int>(bytes[2]), 13) << "the dataset's own pixel (index % 256)";
}

// A sample's array may be any view (a transposed HWC image, a strided slice): its values
// arrive in C order, as np.ascontiguousarray would give them.
TEST(PythonDataset, ArraysThatAreViewsArriveInCOrder) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Views", R"({"size": 5})", 1));
  for (uint64_t index : {4, 7}) {
    const auto bytes = sample(*ds, index, 0);
    ASSERT_EQ(bytes.size(), 3u * 5 * 5);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 5; ++y) {
        for (int x = 0; x < 5; ++x) {
          const int hwc = (y * 5 + x) * 3 + c;  // the element's place in the HWC array
          EXPECT_EQ(static_cast<int>(bytes[(c * 5 + y) * 5 + x]), (hwc * 7 + int(index)) % 251)
              << "sample " << index << " at c=" << c << " y=" << y << " x=" << x;
        }
      }
    }
  }
}

std::vector<float> floats_of(const data::Field& f) {
  std::vector<float> out(f.data.size() / 4);
  std::memcpy(out.data(), f.data.data(), f.data.size());
  return out;
}

// Detection: image, ragged boxes, label, a Python float and a Python int, in the sample's
// order; the schema is announced in the description (so in the fingerprint).
TEST(PythonDataset, AnyFieldsDenseRaggedAndNumbersBecomeTheSchemaAndBatchFields) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Detection"));
  const data::DatasetInfo& info = ds->info();
  using data::DType;
  const std::vector<data::FieldSpec> expected = {{"image", DType::kUInt8, {3, 8, 8}},
                                                 {"label", DType::kInt64, {}},
                                                 {"area", DType::kInt64, {}},
                                                 {"boxes", DType::kFloat32, {-1, 4}},
                                                 {"weight", DType::kFloat32, {}}};
  EXPECT_EQ(info.schema(), expected);
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{3, 8, 8}));
  EXPECT_EQ(info.num_classes, 5);
  EXPECT_EQ(data::info_problem(info), "");
  EXPECT_EQ(data::classification_problem(info), "");
  EXPECT_NE(info.description.find(" fields=image:uint8[3,8,8],label:int64[],area:int64[],boxes:float32[-1,4],"
                                  "weight:float32[] "),
            std::string::npos) << info.description;
  const data::Batch b = data::BatchMaker(ds, nullptr).make(data::BatchRequest{1, 0, {5, 0, 7, 6}});
  EXPECT_EQ(data::batch_problem(b, info), "");
  EXPECT_EQ(b.labels, (std::vector<int64_t>{0, 0, 2, 1}));
  ASSERT_EQ(b.fields.size(), 3u);
  const data::Field& boxes = b.fields[1];
  EXPECT_EQ(boxes.name, "boxes");
  EXPECT_EQ(boxes.lengths, (std::vector<int64_t>{1, 0, 3, 2}));
  EXPECT_EQ(boxes.shape, (std::vector<int64_t>{6, 4}));
  const std::vector<float> rows = floats_of(boxes);
  EXPECT_EQ(std::vector<float>(rows.begin(), rows.begin() + 8), (std::vector<float>{5, 0, 0.5, 1.5, 7, 0, 0.5, 1.5}));
  EXPECT_EQ(rows[4 * 4], 6) << "sample 6's first box, after sample 5's one and sample 7's three";
  EXPECT_EQ(b.fields[2].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(floats_of(b.fields[2]), (std::vector<float>{2.5, 0, 3.5, 3}));
  std::vector<int64_t> area(4);
  std::memcpy(area.data(), b.fields[0].data.data(), 32);
  EXPECT_EQ(area, (std::vector<int64_t>{15, 0, 21, 18}));
  EXPECT_EQ(static_cast<int>(b.data.data()[3 * 8 * 8 * 2 + 1]), (7 * 7 + 1) % 256) << "sample 7's image at [0,0,1]";
}

// A dataset without image and label: its batches are [N] with no payload and no labels,
// and the classification trainer's check names what is missing.
TEST(PythonDataset, ADatasetWithoutImageOrLabelServesItsFieldsOnly) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Tokens"));
  const data::DatasetInfo& info = ds->info();
  EXPECT_TRUE(info.sample_shape.empty());
  EXPECT_EQ(info.num_classes, 0);
  EXPECT_EQ(data::info_problem(info), "");
  const std::string refusal = data::classification_problem(info);
  EXPECT_NE(refusal.find("has no 'image' field (its fields: target int64 [2], tokens int32 [-1])"), std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("training_step"), std::string::npos) << refusal;
  const data::Batch b = data::BatchMaker(ds, nullptr).make(data::BatchRequest{0, 0, {3, 6}});
  EXPECT_EQ(data::batch_problem(b, info), "");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(b.data.size(), 0u);
  EXPECT_TRUE(b.labels.empty());
  ASSERT_EQ(b.fields.size(), 2u);
  EXPECT_EQ(b.fields[1].lengths, (std::vector<int64_t>{3, 1}));
  std::vector<int32_t> tokens(4);
  std::memcpy(tokens.data(), b.fields[1].data.data(), 16);
  EXPECT_EQ(tokens, (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(b.fields[0].shape, (std::vector<int64_t>{2, 2}));
}

TEST(PythonDataset, AFunctionNameTuplesAndNumClassesFromTheSetting) {
  REQUIRE_NUMPY();
  auto fn = data::make_dataset(python_data("make_squares", R"({"n": 12})", 1));
  EXPECT_EQ(fn->info().size, 12u);
  DataOptions d = python_data("Pairs", "{}", 1);
  d.num_classes = 10;
  auto pairs = data::make_dataset(d);
  EXPECT_EQ(pairs->info().sample_shape, (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(pairs->info().num_classes, 10);
  int64_t label = -1;
  EXPECT_EQ(static_cast<int>(sample(*pairs, 7, 0, &label)[5]), 7);
  EXPECT_EQ(label, 7);
  d.num_classes = 5;  // labels go to 9
  auto few = data::make_dataset(d);
  EXPECT_NE(sample_error(*few, 7).find("label 7 is outside the dataset's 5 classes"), std::string::npos);
}

// The same sample is the same bytes whatever process or thread makes it, and in another
// epoch other bytes (random, numpy.random and tandem.sample_rng() are all seeded by it).
TEST(PythonDataset, SamplesAreTheSameBytesWithOneOrThreeProcesses) {
  REQUIRE_NUMPY();
  const std::string args = R"({"n": 48, "size": 8})";
  auto one = data::make_dataset(python_data("Squares", args, 1));
  auto three = data::make_dataset(python_data("Squares", args, 3));
  EXPECT_EQ(one->info().fingerprint, three->info().fingerprint);
  std::vector<std::vector<std::byte>> serial(48), parallel(48);
  for (uint64_t i = 0; i < 48; ++i) serial[i] = sample(*one, i, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = t; i < 48; i += 4) parallel[i] = sample(*three, i, 1);
    });
  }
  for (auto& t : threads) t.join();
  for (uint64_t i = 0; i < 48; ++i) EXPECT_EQ(serial[i], parallel[i]) << "sample " << i;
  EXPECT_NE(sample(*one, 5, 0), serial[5]) << "epoch 0 and epoch 1 draw differently";
  const auto again = sample(*one, 5, 1);
  EXPECT_EQ(again[0], serial[5][0]) << "random.randrange";
  EXPECT_EQ(again[1], serial[5][1]) << "tandem.sample_rng()";
}

// torch, when the user's code imported it, is seeded too; its tensors are accepted.
TEST(PythonDataset, TorchIsSeededWhenTheDatasetUsesIt) {
  REQUIRE_NUMPY();
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  }
  const std::string file = std::string(TANDEM_FIXTURES) + "/python_datasets/torch_data.py";
  auto one = data::make_dataset(python_data("TorchNoise", "{}", 1, file));
  auto two = data::make_dataset(python_data("TorchNoise", "{}", 2, file));
  EXPECT_EQ(one->info().num_classes, 2) << "len(classes)";
  EXPECT_EQ(one->info().class_names, (std::vector<std::string>{"even", "odd"}));
  std::vector<std::thread> threads;
  std::vector<std::vector<std::byte>> parallel(8);
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = t; i < 8; i += 2) parallel[i] = sample(*two, i, 3);
    });
  }
  for (auto& t : threads) t.join();
  int64_t label = -1;
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(sample(*one, i, 3, &label), parallel[i]) << "sample " << i;
  EXPECT_EQ(label, 1);
  EXPECT_NE(sample(*one, 0, 3), sample(*one, 0, 4)) << "another epoch, other draws";
}

TEST(PythonDataset, TheFingerprintCoversNameArgsAndSeed) {
  REQUIRE_NUMPY();
  const auto fp = [](DataOptions d) { return data::make_dataset(d)->info().fingerprint; };
  const DataOptions base = python_data("Squares", R"({"n": 8, "size": 4})", 1);
  const std::string mine = fp(base);
  DataOptions other_args = base;
  other_args.data_args = R"({"size": 4, "n": 8})";  // the same arguments, another order
  EXPECT_EQ(fp(other_args), mine);
  other_args.data_args = R"({"n": 8, "size": 4, "channels": 1})";
  EXPECT_NE(fp(other_args), mine);
  DataOptions other_seed = base;
  other_seed.seed = 1;
  EXPECT_NE(fp(other_seed), mine);
  DataOptions other_name = python_data("make_squares", base.data_args, 1);
  const auto theirs = data::make_dataset(other_name)->info().description;
  EXPECT_NE(data::describe_difference(theirs, data::make_dataset(base)->info().description).find("Python dataset"),
            std::string::npos);
}

TEST(PythonDataset, SamplesLargerThanTheSharedMemoryGrowIt) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Big", "{}", 1));
  for (uint64_t i : {0, 9, 3}) {
    const auto bytes = sample(*ds, i, 0);
    EXPECT_EQ(bytes.size(), 3u * 512 * 512);
    EXPECT_EQ(static_cast<int>(bytes.back()), static_cast<int>(i % 251));
  }
}

// --- bad user code --------------------------------------------------------------------

TEST(PythonDatasetErrors, AnExceptionNamesTheSampleFileLineAndMessage) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Squares", R"({"raise_at": 5})"));
  const std::string e = sample_error(*ds, 5);
  EXPECT_NE(e.find("sample 5 of python:"), std::string::npos) << e;
  EXPECT_NE(e.find("ValueError: sample 5 is broken on purpose"), std::string::npos) << e;
  EXPECT_NE(e.find("datasets.py:" + std::to_string(fixture_line("broken on purpose"))), std::string::npos) << e;
  EXPECT_NE(e.find("in __getitem__"), std::string::npos) << "the last frames: " << e;
  EXPECT_NE(e.find("--on-bad-sample skip"), std::string::npos) << e;
  EXPECT_EQ(sample_error(*ds, 6), "") << "the process goes on serving";
}

TEST(PythonDatasetErrors, UnderSkipABadSampleIsReplacedByTheNextAndListed) {
  REQUIRE_NUMPY();
  DataOptions d = python_data("Squares", R"({"raise_at": 5})");
  d.on_bad_sample = "skip";
  auto ds = data::make_dataset(d);
  int64_t label = -1;
  const auto bytes = sample(*ds, 5, 0, &label);
  EXPECT_EQ(label, 6 % 4);
  EXPECT_EQ(static_cast<int>(bytes[2]), 6) << "sample 6 stands in";
  EXPECT_EQ(ds->skipped_count(), 1u);
  ASSERT_EQ(ds->skipped().size(), 1u);
  EXPECT_NE(ds->skipped()[0].find("sample 5 of python:"), std::string::npos) << ds->skipped()[0];
  EXPECT_NE(ds->skipped()[0].find("ValueError"), std::string::npos) << ds->skipped()[0];
}

TEST(PythonDatasetErrors, StartErrorsCarryThePythonError) {
  REQUIRE_NUMPY();
  const std::string wrong_name = start_error(python_data("Nope"));
  EXPECT_NE(wrong_name.find("has no 'Nope'"), std::string::npos) << wrong_name;
  EXPECT_NE(wrong_name.find("Squares"), std::string::npos) << "it lists what the file defines: " << wrong_name;
  const std::string import = start_error(python_data("X", "{}", 1, std::string(TANDEM_FIXTURES) +
                                                                      "/python_datasets/broken_import.py"));
  EXPECT_NE(import.find("No module named 'no_such_module_for_tandem_tests'"), std::string::npos) << import;
  EXPECT_NE(import.find("broken_import.py:1"), std::string::npos) << import;
  const std::string json = start_error(python_data("Squares", "{\"n\": "));
  EXPECT_NE(json.find("--data-args"), std::string::npos) << json;
  EXPECT_NE(json.find("is not a JSON object"), std::string::npos) << json;
  const std::string kwarg = start_error(python_data("Squares", R"({"colour": 1})"));
  EXPECT_NE(kwarg.find("unexpected keyword argument 'colour'"), std::string::npos) << kwarg;
  const std::string no_name = start_error(python_data("", "{}", 1, kFile + ":"));
  EXPECT_NE(no_name.find("python:my_data.py:Flowers"), std::string::npos) << no_name;
  const std::string no_file = start_error(python_data("X", "{}", 1, "/no/such/file.py"));
  EXPECT_NE(no_file.find("/no/such/file.py is not a file"), std::string::npos) << no_file;
  DataOptions bad_python = python_data("Squares");
  bad_python.python = "/no/such/python3";
  EXPECT_NE(start_error(bad_python).find("--python"), std::string::npos) << start_error(bad_python);
}

// The message of the DataError that making a batch of `indices` throws ("" if none).
std::string batch_error(const std::shared_ptr<const data::Dataset>& ds, std::vector<uint64_t> indices) {
  try {
    data::BatchMaker(ds, nullptr).make(data::BatchRequest{0, 0, std::move(indices)});
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(PythonDatasetErrors, FieldsThatBreakTheSchemaAreNamedWithWhatWasExpectedAndWhatCame) {
  REQUIRE_NUMPY();
  const std::string floats = start_error(python_data("Floats"));
  EXPECT_NE(floats.find("'image' is float16 [3,8,8]"), std::string::npos) << floats;
  EXPECT_NE(floats.find("give the field another name"), std::string::npos) << floats;
  const std::string f64 = start_error(python_data("Float64Field"));
  EXPECT_NE(f64.find("'depth' is float64 [8,8]: convert it to uint8, int32, int64, float16 or float32"),
            std::string::npos) << f64;
  const std::string ragged = start_error(python_data("RaggedNotThere"));
  EXPECT_NE(ragged.find("ragged_fields names 'boxes', which sample 0 does not have (image, label)"),
            std::string::npos) << ragged;
  auto growing = data::make_dataset(python_data("Growing"));
  const std::string later = sample_error(*growing, 3);
  EXPECT_NE(later.find("sample 3 of python:"), std::string::npos) << later;
  EXPECT_NE(later.find("'image' is uint8 [3,16,16], the first sample's was [3,8,8]"), std::string::npos) << later;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"missing", "the sample has no 'mask', which the first sample had (mask uint8 [8,8])"},
      {"extra", "field 'depth' is float32 [8,8] but the first sample had no 'depth' (it had image, label, boxes, mask)"},
      {"mask_shape", "'mask' is uint8 [9,8], the first sample's was [8,8] (uint8 [8,8]): resize or crop"},
      {"mask_dtype", "'mask' is int32 [8,8], the first sample's was [8,8] (uint8 [8,8])"},
      {"box_width", "'boxes' is float32 [2,5], the first sample's was [-1,4] (float32 [-1,4])"},
  };
  for (const auto& [how, words] : cases) {
    auto ds = data::make_dataset(python_data("BadFields", R"({"how": ")" + how + R"("})", 1));
    const std::string e = batch_error(ds, {1, 3});
    EXPECT_NE(e.find("sample 3 of python:"), std::string::npos) << how << ": " << e;
    EXPECT_NE(e.find(words), std::string::npos) << how << ": " << e;
    EXPECT_EQ(batch_error(ds, {1, 2, 4}), "") << how;
  }
}

// Under --on-bad-sample skip a sample that breaks the schema is replaced by the next,
// whose fields (dense and ragged) then fill its place.
TEST(PythonDatasetErrors, UnderSkipASampleThatBreaksTheSchemaIsReplaced) {
  REQUIRE_NUMPY();
  DataOptions d = python_data("BadFields", R"({"how": "box_width"})", 1);
  d.on_bad_sample = "skip";
  auto ds = data::make_dataset(d);
  const data::Batch b = data::BatchMaker(ds, nullptr).make(data::BatchRequest{0, 0, {3, 4}});
  EXPECT_EQ(data::batch_problem(b, ds->info()), "");
  ASSERT_EQ(b.fields.size(), 2u);
  EXPECT_EQ(b.fields[0].lengths, (std::vector<int64_t>{4 % 3, 4 % 3})) << "sample 3 became sample 4";
  ASSERT_EQ(ds->skipped().size(), 1u);
  EXPECT_NE(ds->skipped()[0].find("'boxes' is float32 [2,5]"), std::string::npos) << ds->skipped()[0];
}

TEST(PythonDatasetErrors, ASampleOverTheTimeoutKillsItsProcessAndIsBad) {
  REQUIRE_NUMPY();
  DataOptions d = python_data("Squares", R"({"sleep_at": 2})", 1);
  d.sample_timeout_s = 1.5;
  auto ds = data::make_dataset(d);
  const std::string e = sample_error(*ds, 2);
  EXPECT_NE(e.find("sample 2 of python:"), std::string::npos) << e;
  EXPECT_NE(e.find("took over 1.5 s"), std::string::npos) << e;
  EXPECT_NE(e.find("--sample-timeout"), std::string::npos) << e;
  EXPECT_EQ(sample_error(*ds, 3), "") << "a new process serves the next sample";
}

TEST(PythonDatasetErrors, ASampleThatKillsItsProcessTwiceIsBad) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Squares", R"({"exit_at": 4})"));
  const std::string e = sample_error(*ds, 4);
  EXPECT_NE(e.find("sample 4 of python:"), std::string::npos) << e;
  EXPECT_NE(e.find("killed its Python process twice (exited with status 3, then exited with status 3)"),
            std::string::npos) << e;
  EXPECT_EQ(sample_error(*ds, 5), "");
}

TEST(PythonDatasetErrors, AProcessThatDiesOnceIsRestartedAndTheSampleRetried) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-die-once");
  const std::string args = R"({"exit_at": 4, "once_dir": ")" + dir.string() + R"("})";
  auto ds = data::make_dataset(python_data("Squares", args, 1));
  auto clean = data::make_dataset(python_data("Squares", "{}", 1));
  EXPECT_EQ(sample(*ds, 4, 0), sample(*clean, 4, 0));
  EXPECT_TRUE(fs::exists(dir / "died-4")) << "the first try did die";
  EXPECT_EQ(ds->skipped_count(), 0u);
}

// --- behind real workers --------------------------------------------------------------

std::string worker_flags(const std::string& name, const std::string& args, int procs) {
  return "--threads 2 --data python:" + kFile + ":" + name + " --data-args '" + args + "' --python /usr/bin/python3" +
         " --python-procs " + std::to_string(procs);
}

TEST(PythonDatasetWorkers, TwoWorkersServeByteIdenticalBatches) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-two-workers");
  const std::string args = R"({"n": 200, "size": 16})";
  Worker a = start_worker(worker_flags("Squares", args, 1), dir / "a.log", 60s);
  Worker b = start_worker(worker_flags("Squares", args, 3), dir / "b.log", 60s);
  ASSERT_NE(a.port, 0) << slurp(dir / "a.log");
  ASSERT_NE(b.port, 0) << slurp(dir / "b.log");
  data::BatchRequest request{7, 2, {3, 199, 0, 42, 42, 17, 100, 5}};
  const data::Batch x = request_batch(a.target(), request), y = request_batch(b.target(), request);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{8, 3, 16, 16}));
  EXPECT_EQ(x.labels, y.labels);
  EXPECT_EQ(x.data, y.data);
  EXPECT_EQ(testing::ready_client(a.target())->info(10).dataset.fingerprint,
            testing::ready_client(b.target())->info(10).dataset.fingerprint);
}

// Detection behind two workers: the fields travel on the wire, identical from both.
TEST(PythonDatasetWorkers, TwoWorkersServeByteIdenticalFields) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-two-workers-fields");
  Worker a = start_worker(worker_flags("Detection", "{}", 1), dir / "a.log", 60s);
  Worker b = start_worker(worker_flags("Detection", "{}", 2), dir / "b.log", 60s);
  ASSERT_NE(a.port, 0) << slurp(dir / "a.log");
  ASSERT_NE(b.port, 0) << slurp(dir / "b.log");
  const auto info = testing::ready_client(a.target())->info(10);
  ASSERT_EQ(info.dataset.fields.size(), 5u);
  EXPECT_EQ(info.dataset.fields[3], (data::FieldSpec{"boxes", data::DType::kFloat32, {-1, 4}}));
  data::BatchRequest request{7, 2, {3, 31, 0, 7, 7}};
  const data::Batch x = request_batch(a.target(), request), y = request_batch(b.target(), request);
  ASSERT_EQ(x.fields.size(), 3u);
  EXPECT_EQ(x.fields[1].lengths, (std::vector<int64_t>{3, 3, 0, 3, 3}));
  for (size_t i = 0; i < x.fields.size(); ++i) {
    EXPECT_EQ(x.fields[i].name, y.fields[i].name);
    EXPECT_EQ(x.fields[i].shape, y.fields[i].shape);
    EXPECT_EQ(x.fields[i].lengths, y.fields[i].lengths);
    EXPECT_EQ(x.fields[i].data, y.fields[i].data) << x.fields[i].name;
  }
  EXPECT_EQ(x.data, y.data);
  EXPECT_EQ(x.labels, y.labels);
}

// tandem's own trainer refuses a dataset without an image for a built-in model, naming
// it and the ways out (a training_step model, or tandem.Feed).
TEST(PythonDatasetWorkers, TheTrainerRefusesADatasetWithoutAnImage) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-trainer-refuses");
  Worker w = start_worker(worker_flags("Tokens", "{}", 1), dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
  const auto out = testing::run_capture("trainer --workers " + w.target() + " --local-workers 0 --steps 2" +
                                            " --batch-size 4 --data python:" + kFile + ":Tokens",
                                        dir / "t.log", 120);
  EXPECT_NE(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("dataset 'python' has no 'image' field (its fields: target int64 [2], tokens int32 [-1])"),
            std::string::npos) << out.out;
  EXPECT_NE(out.out.find("tandem.Feed"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("training_step(self, batch: Dict[str, Tensor]) -> Tensor"), std::string::npos) << out.out;
}

// The pids of `worker`'s Python processes, from the files the dataset writes.
std::vector<pid_t> python_pids(const fs::path& pid_dir) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator(pid_dir)) out.push_back(std::atoi(e.path().filename().c_str()));
  return out;
}

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

// A Python process SIGKILLed mid-run is replaced; the trainer's audit shows every sample
// consumed once. SIGTERM to the worker then ends every Python process with it.
TEST(PythonDatasetWorkers, APythonProcessKilledMidRunLosesNoSampleAndNoneOutliveTheWorker) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-kill-child");
  fs::create_directories(dir / "pids");
  const std::string args = R"({"n": 160, "size": 32, "delay": 0.01, "pid_dir": ")" + (dir / "pids").string() + R"("})";
  Worker w = start_worker(worker_flags("Squares", args, 2) + " --term-grace 5", dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
  // The trainer has no copy of the file (the same name, elsewhere): it learns the dataset
  // from the worker and starts no Python process of its own.
  const std::string data = " --data python:not-on-this-host/datasets.py:Squares --data-args '" + args + "'";
  Child trainer = spawn("trainer --workers " + w.target() + " --local-workers 0 --train-threads 1 --batch-size 8" +
                            " --log-every 5 --steps 60 --audit-samples --summary-json " + (dir / "s.json").string() + data,
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=10 ", 120s)) << slurp(dir / "trainer.log");
  EXPECT_NE(slurp(dir / "trainer.log").find("not-on-this-host/datasets.py (of --data python:"), std::string::npos)
      << slurp(dir / "trainer.log");
  const std::vector<pid_t> first = python_pids(dir / "pids");
  ASSERT_EQ(first.size(), 2u);
  kill(first[0], SIGKILL);
  EXPECT_EQ(wait_exit(trainer, 180s), 0) << slurp(dir / "trainer.log") << slurp(dir / "w.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  const auto& audit = s["sample_audit"];
  EXPECT_EQ(audit["consumed"], 60 * 8) << audit.dump(2);
  EXPECT_EQ(audit["missing"], 0) << audit.dump(2);
  EXPECT_EQ(audit["duplicated"], 0) << audit.dump(2);
  EXPECT_EQ(audit["unplanned"], 0) << audit.dump(2);
  const std::vector<pid_t> all = python_pids(dir / "pids");
  EXPECT_EQ(all.size(), 3u) << "the killed process was replaced\n" << slurp(dir / "w.log");
  EXPECT_NE(slurp(dir / "w.log").find("restarting it"), std::string::npos) << slurp(dir / "w.log");
  kill(w.child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(w.child, 60s), 0) << slurp(dir / "w.log");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (const pid_t pid : all) {
    while (alive(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(alive(pid)) << "Python process " << pid << " outlived its worker";
  }
}

// A worker killed outright (SIGKILL: no destructor runs) leaves no Python process behind,
// neither one waiting for a request nor one busy in __getitem__ (sample 3 sleeps).
TEST(PythonDatasetWorkers, PythonProcessesEndWhenTheirWorkerIsKilled) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-kill-worker");
  fs::create_directories(dir / "pids");
  const std::string args = R"({"n": 16, "sleep_at": 3, "pid_dir": ")" + (dir / "pids").string() + R"("})";
  Worker w = start_worker(worker_flags("Squares", args, 2), dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
  const std::vector<pid_t> pids = python_pids(dir / "pids");
  ASSERT_EQ(pids.size(), 2u);
  auto client = testing::ready_client(w.target(), {}, 60);
  auto call = client->stream();
  ASSERT_TRUE(call->write(data::BatchRequest{0, 0, {3}}));
  std::this_thread::sleep_for(1s);  // the request reaches a process, which sleeps
  kill(w.child.pid, SIGKILL);
  wait_exit(w.child, 30s);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (const pid_t pid : pids) {
    while (alive(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(alive(pid)) << "Python process " << pid << " outlived its SIGKILLed worker";
  }
}

TEST(PythonDatasetWorkers, AWorkerWhoseDatasetCannotStartFailsWithThePythonError) {
  REQUIRE_NUMPY();
  const fs::path dir = fresh_dir("python-worker-fails");
  const auto out = testing::run_capture("worker --port 0 --bind 127.0.0.1 " + worker_flags("Nope", "{}", 1),
                                        dir / "w.log", 60);
  EXPECT_EQ(out.code, 3) << out.out;
  EXPECT_NE(out.out.find("has no 'Nope'"), std::string::npos) << out.out;
}

}  // namespace
}  // namespace tandem
