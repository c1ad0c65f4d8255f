#include "tandem/data/core/rng.h"

#include <set>

#include <gtest/gtest.h>

namespace tandem::data {
namespace {

TEST(Rng, SameKeySameSequence) {
  Rng a(kAugmentStream, 7, 3, 42), b(kAugmentStream, 7, 3, 42);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.next_u64(), b.next_u64());
}

TEST(Rng, EveryKeyWordMatters) {
  const uint64_t base = Rng(1, 2, 3, 4).next_u64();
  EXPECT_NE(base, Rng(0, 2, 3, 4).next_u64());
  EXPECT_NE(base, Rng(1, 0, 3, 4).next_u64());
  EXPECT_NE(base, Rng(1, 2, 0, 4).next_u64());
  EXPECT_NE(base, Rng(1, 2, 3, 0).next_u64());
  EXPECT_NE(Rng(1, 2).next_u64(), Rng(2, 1).next_u64());
}

// Pinned outputs: samples must stay identical across builds, machines and releases,
// so any change to the generator has to show up here.
TEST(Rng, ReferenceValues) {
  Rng r(kContentStream, 0, 0);
  const uint64_t first = r.next_u64();
  const uint64_t second = r.next_u64();
  Rng again(kContentStream, 0, 0);
  EXPECT_EQ(first, again.next_u64());
  EXPECT_EQ(second, again.next_u64());
  EXPECT_EQ(first, 0xe84b0ff4bb1e6e89ull) << std::hex << first;
  EXPECT_EQ(second, 0xf5daf6e9be24d016ull) << std::hex << second;
}

TEST(Rng, UniformStaysInRange) {
  Rng r(5);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = r.uniform(0.1, 2.0);
    ASSERT_GE(u, 0.1);
    ASSERT_LT(u, 2.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 1.05, 0.01);
}

TEST(Rng, BelowIsUnbiasedAndInRange) {
  Rng r(9);
  std::vector<int> counts(7);
  for (int i = 0; i < 70000; ++i) {
    const uint64_t v = r.below(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
}

TEST(Rng, NormalHasUnitVariance) {
  Rng r(11);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

}  // namespace
}  // namespace tandem::data
