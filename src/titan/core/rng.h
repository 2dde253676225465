// Seeded, reproducible random numbers. Counter-based (splitmix64 of seed + index), so a value
// depends only on (seed, stream, index) — not on thread count or call order.
#pragma once

#include <cstdint>

namespace titan {

class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0) : key_(mix(seed ^ mix(stream + 0x9e37))) {}

  uint64_t bits(uint64_t index) const { return mix(key_ + index * 0x9e3779b97f4a7c15ull); }
  // Uniform in [0, 1) with 24 random bits.
  float uniform(uint64_t index) const { return static_cast<float>(bits(index) >> 40) * 0x1p-24f; }
  // Standard normal (Box-Muller on two counter draws).
  float normal(uint64_t index) const;
  // Fills out[0..n) with mean + std * N(0, 1).
  void fill_normal(float* out, int64_t n, float mean, float std) const;
  // Fills out[0..n) with bound * (2 U - 1), U uniform in [0, 1): uniform in [-bound, bound).
  void fill_uniform(float* out, int64_t n, float bound) const;
  // Fills out[0..n) with integers uniform in [0, high).
  void fill_int(int64_t* out, int64_t n, int64_t high) const;

 private:
  static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t key_;
};

}  // namespace titan
