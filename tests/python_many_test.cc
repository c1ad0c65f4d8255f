// A Python dataset's samples many at a time (issue 34): a worker's thread asks one Python
// process for its share of a batch in one request, which calls the dataset's
// __getitems__ when it has one (else __getitem__ for each), and the bytes are those of one
// sample at a time, whatever the grouping and the process count.
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "python_fixture.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem {
namespace {

using testing::python_data;
using testing::sample;


// Samples `indices` of epoch 2 as one batch made by `threads` threads (each asks for its share at once).
data::Batch batch_of(const std::shared_ptr<const data::Dataset>& ds, std::vector<uint64_t> indices, int threads) {
  ThreadPool pool(threads);
  data::BatchMaker maker(ds, &pool);
  std::promise<data::Batch> done;
  maker.make_async({7, 2, std::move(indices)}, [&](data::Batch b) { done.set_value(std::move(b)); },
                   [&](std::exception_ptr e) { done.set_exception(e); });
  return done.get_future().get();
}

const data::Field* field(const data::Batch& b, const std::string& name) {
  for (const data::Field& f : b.fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Each row of `b` against the sample made alone; and which path made each ("via").
void expect_rows_made_alone(const data::Dataset& ds, const data::Batch& b, int64_t via) {
  const size_t row = ds.info().sample_bytes();
  const data::Field* made_by = field(b, "via");
  ASSERT_NE(made_by, nullptr);
  for (size_t i = 0; i < b.indices.size(); ++i) {
    int64_t label = -1;
    const std::vector<std::byte> alone = sample(ds, b.indices[i], 2, &label);
    EXPECT_EQ(std::memcmp(b.data.data() + i * row, alone.data(), row), 0) << "sample " << b.indices[i];
    EXPECT_EQ(b.labels[i], label);
    int64_t v = -1;
    std::memcpy(&v, made_by->data.data() + i * sizeof v, sizeof v);
    EXPECT_EQ(v, via) << "sample " << b.indices[i] << (via ? " was not made by __getitems__" : " was");
  }
}

TEST(PythonMany, GetitemsIsUsedWhenPresentAndGivesTheBytesOfGetitem) {
  REQUIRE_NUMPY();
  const std::vector<uint64_t> indices{3, 9, 1, 40, 22, 5, 17, 63, 0, 31, 8, 12};
  auto one = data::make_dataset(python_data("Batched", R"({"n": 64})", 1));
  auto three = data::make_dataset(python_data("Batched", R"({"n": 64})", 3));
  const data::Batch by_one = batch_of(one, indices, 1);
  expect_rows_made_alone(*one, by_one, 1);
  const data::Batch by_three = batch_of(three, indices, 3);  // other groups of samples, other processes
  expect_rows_made_alone(*three, by_three, 1);
  EXPECT_EQ(std::memcmp(by_one.data.data(), by_three.data.data(), by_one.data.size()), 0);
}

TEST(PythonMany, AGetitemsThatDrawsFromRandomIsLeftForGetitemSeededAlone) {
  REQUIRE_NUMPY();
  auto ds = data::make_dataset(python_data("Batched", R"({"n": 32, "global_draw": true})", 1));
  expect_rows_made_alone(*ds, batch_of(ds, {4, 2, 30, 11, 7, 19}, 1), 0);
  auto failing = data::make_dataset(python_data("Batched", R"({"n": 32, "fail_many": true})", 1));
  expect_rows_made_alone(*failing, batch_of(failing, {4, 2, 30, 11, 7, 19}, 1), 0);
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
