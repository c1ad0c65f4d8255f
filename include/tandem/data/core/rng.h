// The one source of randomness for samples. Every random choice about a sample comes
// from an Rng keyed by (seed, epoch, sample index), so a sample comes out bit-identical
// whichever worker, thread or process made it. Portable by construction: no std::
// distributions, whose output differs between standard libraries.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::data {

// xoshiro256** seeded through splitmix64 from a key of up to four words.
class Rng {
 public:
  explicit Rng(uint64_t k0, uint64_t k1 = 0, uint64_t k2 = 0, uint64_t k3 = 0) {
    uint64_t x = mix(mix(mix(mix(0x7a6e64656d000001ull ^ k0) ^ k1) ^ k2) ^ k3);
    for (auto& word : s_) word = splitmix64(x);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n), unbiased (Lemire's method with rejection).
  uint64_t below(uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next_u64()) * n;
    if (static_cast<uint64_t>(m) < n) {
      const uint64_t threshold = -n % n;
      while (static_cast<uint64_t>(m) < threshold) m = static_cast<__uint128_t>(next_u64()) * n;
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Standard normal (Box-Muller; one value per call keeps the state simple to reason about).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  static uint64_t splitmix64(uint64_t& x) { return mix(x += 0x9e3779b97f4a7c15ull); }

  uint64_t s_[4];
};

// Gamma(alpha, 1): Marsaglia and Tsang's method (boosted below alpha 1). From rng's
// uniforms and normals only, so as portable as they are.
inline double sample_gamma(Rng& rng, double alpha) {
  if (alpha < 1.0) return sample_gamma(rng, alpha + 1.0) * std::pow(1.0 - rng.uniform(), 1.0 / alpha);
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = 1.0 - rng.uniform();  // (0, 1]
    if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// Domain tags keep the streams for different purposes independent.
inline constexpr uint64_t kContentStream = 0xC0;   // a sample's base content: (seed, index)
inline constexpr uint64_t kAugmentStream = 0xA6;   // its augmentation: (seed, epoch, index)
inline constexpr uint64_t kShuffleStream = 0x5F;   // an epoch's order: (seed, epoch)
inline constexpr uint64_t kMixStream = 0x3B;       // a batch's mixing in the trainer: (seed, step, rank)

}  // namespace tandem::data
