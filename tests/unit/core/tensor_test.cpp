#include "titan/core/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace titan {
namespace {

TEST(Tensor, AllocationIsAccounted) {
  Allocator& a = host_allocator();
  const int64_t before = a.stats().live_bytes;
  {
    Tensor t = Tensor::empty({4, 256});
    EXPECT_EQ(a.stats().live_bytes, before + 4096);
    EXPECT_GE(a.stats().peak_bytes, before + 4096);
    Tensor view = t.reshape({1024});  // shares storage: no new bytes
    EXPECT_EQ(a.stats().live_bytes, before + 4096);
  }
  EXPECT_EQ(a.stats().live_bytes, before);
}

// A freed large block (>= 32 MiB) serves the next request of the same size (the step's big
// buffers, allocator.cpp), and only that: another size gets other memory. Accounting is as for any
// allocation, and zeros() still zeroes the reused block.
TEST(Tensor, LargeBlocksAreReusedForTheSameSizeOnly) {
  Allocator& a = host_allocator();
  const int64_t before = a.stats().live_bytes, n = int64_t{9} << 20;  // 36 MiB of f32
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty({n});
    first = t.raw_data();
    t.data<float>()[n - 1] = 7.0f;
    EXPECT_EQ(a.stats().live_bytes, before + n * 4);
  }
  EXPECT_EQ(a.stats().live_bytes, before);
  const Tensor same = Tensor::zeros({n});
  EXPECT_EQ(same.raw_data(), first);
  EXPECT_EQ(same.data<float>()[n - 1], 0.0f);
  const Tensor other = Tensor::empty({n + 64});
  EXPECT_NE(other.raw_data(), first);
  EXPECT_EQ(a.stats().live_bytes, before + (2 * n + 64) * 4);
}

// The cache never lifts live + cached above the most the process has had live: a block is kept
// only within that mark, and a request that would pass it (by more than the 64 MiB slack) frees
// cached blocks first.
TEST(Tensor, CachedLargeBlocksStayWithinTheHighWaterMark) {
  release_cached_host_blocks();
  const int64_t live = host_allocator().stats().live_bytes;
  // A block that lifts the mark to live + big (virtual memory only, never touched).
  const int64_t big = std::max<int64_t>(int64_t{192} << 20, host_block_cache_stats().high_water_bytes - live) / 64 * 64;
  if (big > int64_t{1} << 30) GTEST_SKIP() << "an earlier test in this process left a mark above the cache's 2 GiB cap";
  { const Tensor t = Tensor::empty({big}, DType::u8); }
  EXPECT_EQ(host_block_cache_stats().high_water_bytes, live + big);
  EXPECT_EQ(host_block_cache_stats().cached_bytes, big) << "kept: live + cached is at the mark";
  {
    // live + half + the cached block would pass the mark: the cached block is freed first.
    const Tensor half = Tensor::empty({big / 2}, DType::u8);
    EXPECT_EQ(host_block_cache_stats().cached_bytes, 0);
  }
  EXPECT_EQ(host_block_cache_stats().cached_bytes, big / 2);
  const int64_t third = big / 3 / 64 * 64;
  {
    const Tensor t = Tensor::empty({third}, DType::u8);  // fits beside the cached half
    EXPECT_EQ(host_block_cache_stats().cached_bytes, big / 2);
  }
  EXPECT_EQ(host_block_cache_stats().cached_bytes, big / 2 + third);
  EXPECT_EQ(host_block_cache_stats().high_water_bytes, live + big);
  release_cached_host_blocks();
  EXPECT_EQ(host_block_cache_stats().cached_bytes, 0);
}

// Passing the mark by up to its 64 MiB slack frees nothing; passing it by more frees the smallest
// cached block that alone suffices, not the oldest: a step's head buffers are freed first (so they
// are the oldest) and a few MiB of activations pass the mark just before they are needed again
// (allocator.cpp).
TEST(Tensor, PassingTheMarkFreesTheSmallestBlockThatSuffices) {
  release_cached_host_blocks();
  const int64_t live = host_allocator().stats().live_bytes;
  const int64_t big = std::max<int64_t>(int64_t{192} << 20, host_block_cache_stats().high_water_bytes - live) / 64 * 64;
  if (big > int64_t{1} << 30) GTEST_SKIP() << "an earlier test in this process left a mark above the cache's 2 GiB cap";
  const int64_t older = big * 2 / 3 / 64 * 64, newer = big - older;
  {
    Tensor a = Tensor::empty({older}, DType::u8), b = Tensor::empty({newer}, DType::u8);
    a = Tensor();  // freed first: the oldest cached block
  }
  ASSERT_EQ(host_block_cache_stats().cached_bytes, big) << "both kept: live + cached is at the mark";
  {
    const Tensor within = Tensor::empty({int64_t{63} << 20}, DType::u8);  // 63 MiB past the mark
    EXPECT_EQ(host_block_cache_stats().cached_bytes, big) << "within the slack: both kept";
  }
  {
    const Tensor past = Tensor::empty({int64_t{65} << 20}, DType::u8);  // 1 MiB past mark + slack
    EXPECT_EQ(host_block_cache_stats().cached_bytes, older) << "the newer, smaller block is freed";
  }
  release_cached_host_blocks();
}

TEST(Tensor, ViewsShareStorageAndNarrowIsStrided) {
  Tensor t = Tensor::zeros({3, 4});
  float* p = t.data<float>();
  for (int i = 0; i < 12; ++i) p[i] = static_cast<float>(i);
  Tensor col = t.narrow(1, 1, 2);  // [3, 2], strides [4, 1]
  EXPECT_FALSE(col.is_contiguous());
  Tensor c = col.contiguous();
  const float want[] = {1, 2, 5, 6, 9, 10};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data<float>()[i], want[i]);
  EXPECT_EQ(t.select(2).data<float>()[0], 8.0f);
  EXPECT_EQ(t.reshape({-1}).size(0), 12);
}

TEST(Tensor, ErrorsNameTheTensor) {
  Tensor t = Tensor::zeros({3, 4});
  EXPECT_THROW(t.reshape({5, 3}), Error);
  EXPECT_THROW(t.narrow(1, 3, 2), Error);
  EXPECT_THROW(t.data<int64_t>(), Error);
  try {
    t.reshape({5, 3});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reshape f32[3, 4] to [5, 3]"), std::string::npos);
  }
}

// f64 is a host-reduction dtype (Comm::all_reduce_sum): 8 bytes, data<double>(), no conversions.
TEST(DType, F64HoldsDoublesAndDoesNotConvert) {
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_STREQ(dtype_name(DType::f64), "f64");
  Tensor t = Tensor::zeros({3}, DType::f64);
  t.data<double>()[1] = 0.1;
  EXPECT_EQ(t.clone().data<double>()[1], 0.1);
  EXPECT_EQ(t.describe(), "f64[3]");
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_THROW(t.to(DType::f32), Error);
}

TEST(DType, Bf16AndF16RoundTrip) {
  // Exactly representable values survive; rounding is to nearest even (bf16 keeps 8 bits).
  const float values[] = {0.0f, 1.0f, -2.5f, 0.15625f, 65504.0f};
  for (float v : values) {
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(v)), v == 65504.0f ? 65536.0f : v);
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v);
  }
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-8f)), 1.0f);         // tie -> even
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);  // tie -> even (up)
  Tensor t = Tensor::zeros({2});
  t.data<float>()[0] = 3.0f;
  EXPECT_EQ(t.to(DType::bf16).to(DType::f32).data<float>()[0], 3.0f);
}

}  // namespace
}  // namespace titan
