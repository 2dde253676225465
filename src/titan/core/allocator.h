// Allocators with live/peak accounting. Every Tensor's storage comes from one; the metrics line
// reports the host allocator's peak. The meta allocator accounts the same sizes and holds no
// memory (the meta device: shapes, contract checks and the peak of a run, no data). A CUDA
// allocator slots in beside HostAllocator later.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace titan {

struct MemoryStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t num_allocs = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual const char* name() const = 0;

  MemoryStats stats() const;
  void reset_peak();  // peak := live

 protected:
  void on_allocate(size_t bytes);
  void on_deallocate(size_t bytes);

 private:
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> count_{0};
};

// 64-byte aligned host memory (one cache line, one AVX-512 vector).
class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  const char* name() const override { return "host"; }
};

// Accounts every size and returns no memory (null): the meta device's storage.
class MetaAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  const char* name() const override { return "meta"; }
};

Allocator& host_allocator();
// Frees the large blocks the host allocator keeps for reuse by same-size requests (allocator.cpp).
// The trainer calls it once setup is done, so that what loading or initializing the weights freed
// (per-tensor staging copies) does not stay resident through the run.
void release_cached_host_blocks();
// What that cache holds now, and the most bytes the host allocator has had live at once (never
// reset): live + cached stays within it.
struct HostBlockCacheStats {
  int64_t cached_bytes = 0;
  int64_t high_water_bytes = 0;
};
HostBlockCacheStats host_block_cache_stats();
Allocator& meta_allocator();

// Peak resident set size of this process in bytes (what the OS saw, including libraries).
int64_t process_peak_rss_bytes();

}  // namespace titan
