// A Python dataset's samples many at a time (issue 34): a worker's thread asks one Python
// process for its share of a batch in one request, which calls the dataset's
// __getitems__ when it has one (else __getitem__ for each), and the bytes are those of one
// sample at a time, whatever the grouping and the process count.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "python_fixture.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem {
namespace {

using testing::python_data;
using testing::sample;
namespace fs = std::filesystem;


// Samples `indices` of epoch 2 as one batch made by `threads` threads (each asks for its share at once).
data::Batch batch_of(const std::shared_ptr<const data::Dataset>& ds, std::vector<uint64_t> indices, int threads) {
  ThreadPool pool(threads);
  data::BatchMaker maker(ds, &pool);
  std::promise<data::Batch> done;
  maker.make_async({7, 2, std::move(indices)}, [&](data::Batch b) { done.set_value(std::move(b)); },
                   [&](std::exception_ptr e) { done.set_exception(e); });
  return done.get_future().get();
}

// Each row of `b` against the sample made alone; and whether __getitems__ made them
// (`batched`), as its `log` file says.
void expect_rows_made_alone(const data::Dataset& ds, const data::Batch& b, const fs::path& log,
                            std::optional<bool> batched) {
  const size_t row = ds.info().sample_bytes();
  std::set<uint64_t> made;
  std::ifstream in(log);
  for (uint64_t i; in >> i;) made.insert(i);
  for (size_t i = 0; i < b.indices.size(); ++i) {
    int64_t label = -1;
    const std::vector<std::byte> alone = sample(ds, b.indices[i], 2, &label);
    EXPECT_EQ(std::memcmp(b.data.data() + i * row, alone.data(), row), 0) << "sample " << b.indices[i];
    EXPECT_EQ(b.labels[i], label) << "sample " << b.indices[i];
    if (batched) {
      EXPECT_EQ(made.count(b.indices[i]) > 0, *batched)
          << "sample " << b.indices[i] << (*batched ? " was not made by __getitems__" : " was");
    }
  }
}

// The dataset's arguments with a fresh log of what its __getitems__ made.
std::string logged(const fs::path& log, const std::string& more = "") {
  fs::remove(log);
  return R"({"log": ")" + log.string() + "\"" + more + "}";
}

TEST(PythonMany, GetitemsIsUsedWhenPresentAndGivesTheBytesOfGetitem) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-many");
  const std::vector<uint64_t> indices{3, 9, 1, 40, 22, 5, 17, 63, 0, 31, 8, 12};
  auto one = data::make_dataset(python_data("Batched", logged(dir / "one", R"(, "n": 64)"), 1));
  const data::Batch by_one = batch_of(one, indices, 1);
  expect_rows_made_alone(*one, by_one, dir / "one", true);
  auto three = data::make_dataset(python_data("Batched", logged(dir / "three", R"(, "n": 64)"), 3));
  const data::Batch by_three = batch_of(three, indices, 3);  // other groups of samples, other processes
  expect_rows_made_alone(*three, by_three, dir / "three", true);
  EXPECT_EQ(std::memcmp(by_one.data.data(), by_three.data.data(), by_one.data.size()), 0);
}

TEST(PythonMany, AGetitemsThatDrawsFromRandomIsLeftForGetitemSeededAlone) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-many-draws");
  // It draws, and writes the draw into its images: the batch holds __getitem__'s bytes.
  auto draws = data::make_dataset(python_data("Batched", logged(dir / "draws", R"(, "n": 32, "global_draw": true)"), 1));
  expect_rows_made_alone(*draws, batch_of(draws, {4, 2, 30, 11, 7, 19}, 1), dir / "draws", std::nullopt);
  auto failing = data::make_dataset(python_data("Batched", logged(dir / "fails", R"(, "n": 32, "fail_many": true)"), 1));
  expect_rows_made_alone(*failing, batch_of(failing, {4, 2, 30, 11, 7, 19}, 1), dir / "fails", false);
}

// A __getitems__ that gives other samples than __getitem__ (the hostile run's: out of
// order, views of one reused buffer, labels swapped) is caught at its first use, by
// samples 0, the middle and the last made both ways, and every sample is then made by
// __getitem__: the batch holds the right bytes and labels, not silently wrong ones.
TEST(PythonMany, AGetitemsThatGivesOtherSamplesIsHeldToGetitem) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-many-wrong");
  for (const std::string wrong : {"reversed", "aliased", "labels"}) {
    SCOPED_TRACE(wrong);
    auto ds = data::make_dataset(python_data("Batched", logged(dir / wrong, R"(, "wrong": ")" + wrong + "\""), 1));
    const data::Batch b = batch_of(ds, {3, 9, 1, 40, 22, 5, 17, 62}, 1);
    expect_rows_made_alone(*ds, b, dir / wrong, false);
  }
}

// A __getitems__ whose samples cannot be sent (arrays of Python objects) where
// __getitem__'s can: each is made alone, right, and the switch is said once (it was
// silent, each sample re-made alone at every request).
TEST(PythonMany, AGetitemsGivingObjectArraysIsLeftOnceAndSaidOnce) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-many-objects");
  ::testing::internal::CaptureStderr();
  auto ds = data::make_dataset(python_data("Batched", logged(dir / "log", R"(, "wrong": "objects")"), 1));
  const data::Batch b = batch_of(ds, {3, 9, 1, 40, 22, 5, 17, 62}, 1);
  const data::Batch again = batch_of(ds, {4, 10, 2, 41, 23, 6, 18, 63}, 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  expect_rows_made_alone(*ds, b, dir / "log", std::nullopt);
  expect_rows_made_alone(*ds, again, dir / "log", std::nullopt);
  size_t said = 0;
  for (size_t at = err.find("__getitems__ gave for index"); at != std::string::npos;
       at = err.find("__getitems__ gave for index", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << err;
  EXPECT_NE(err.find("array of Python objects"), std::string::npos) << err;
}

// A field of Python objects is named, with the fix, not numpy's "Cannot change data-type".
TEST(PythonMany, AFieldOfPythonObjectsIsNamedWithTheFix) {
  REQUIRE_NUMPY();
  try {
    auto ds = data::make_dataset(python_data("Objects", "{}", 1));
    ADD_FAILURE() << "a field of Python objects was taken";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("field 'names' is an array of Python objects"), std::string::npos) << what;
    EXPECT_NE(what.find("np.stack"), std::string::npos) << what;
  }
}

// Without __getitems__: __getitem__ for each, seeded per sample (random, numpy.random and
// tandem.sample_rng all drawn from), in one request.
TEST(PythonMany, ManySamplesOfADatasetWithoutGetitemsAreTheBytesOfEachAlone) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Squares", R"({"n": 48, "size": 8})", 2));
  const data::Batch b = batch_of(ds, {5, 47, 12, 12, 0, 33, 21, 8}, 2);  // a repeat: the same bytes twice
  const size_t row = ds->info().sample_bytes();
  for (size_t i = 0; i < b.indices.size(); ++i) {
    const std::vector<std::byte> alone = sample(*ds, b.indices[i], 2);
    EXPECT_EQ(std::memcmp(b.data.data() + i * row, alone.data(), row), 0) << "sample " << b.indices[i];
  }
}

// A sample that raises among many: the others come from the one request, and it is
// substituted (--on-bad-sample skip) as when made alone.
TEST(PythonMany, ABadSampleAmongManyIsSubstitutedAsWhenMadeAlone) {
  REQUIRE_NUMPY();
  DataOptions d = python_data("Squares", R"({"n": 16, "raise_at": 6})", 1);
  d.on_bad_sample = "skip";
  auto ds = data::make_dataset(d);
  const data::Batch b = batch_of(ds, {5, 6, 7, 8}, 1);
  const size_t row = ds->info().sample_bytes();
  for (size_t i = 0; i < b.indices.size(); ++i) {
    const std::vector<std::byte> alone = sample(*ds, b.indices[i], 2);
    EXPECT_EQ(std::memcmp(b.data.data() + i * row, alone.data(), row), 0) << "sample " << b.indices[i];
  }
  EXPECT_GE(ds->skipped_count(), 1u);
}

// A __getitems__ that hangs is found within one --sample-timeout, not one per sample
// (16 samples at 1 s took 16 s, about 16 minutes at the default 60 s): its samples are
// made alone, right, and __getitems__ is not asked again.
TEST(PythonMany, AGetitemsThatHangsIsFoundWithinOneSampleTimeout) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-many-hang");
  DataOptions d = python_data("Batched", logged(dir / "log", R"(, "hang_many": 60)"), 1);
  d.sample_timeout_s = 1;
  auto ds = data::make_dataset(d);
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < 16; ++i) indices.push_back(i * 3 + 1);
  const auto t0 = std::chrono::steady_clock::now();
  const data::Batch b = batch_of(ds, indices, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8)) << "the hang took one timeout per sample";
  expect_rows_made_alone(*ds, b, dir / "log", true);  // logged: __getitems__ was called (and hung)
  const data::Batch again = batch_of(ds, {2, 5, 8, 11, 14}, 1);
  EXPECT_EQ(again.indices.size(), 5u);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// A sample that hangs among many is caught after its own --sample-timeout (the wait goes
// on while the process makes samples), made alone, and named; the others are made.
TEST(PythonMany, ASampleThatHangsAmongManyMeetsItsOwnTimeout) {
  REQUIRE_NUMPY();
  DataOptions d = python_data("Squares", R"({"n": 16, "sleep_at": 6, "delay": 0.3})", 1);
  d.sample_timeout_s = 1.5;  // each sample takes 0.3 s: four of them, 1.2 s, would be within it
  auto ds = data::make_dataset(d);
  const data::Batch fine = batch_of(ds, {1, 2, 3, 4, 5}, 1);  // 1.5 s together, 0.3 s each
  EXPECT_EQ(fine.indices.size(), 5u);
  try {
    batch_of(ds, {4, 5, 6, 7}, 1);
    FAIL() << "a hung sample made a batch";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 6 of python:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("took over 1.5 s"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
