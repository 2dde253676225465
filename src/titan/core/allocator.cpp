#include "titan/core/allocator.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "titan/core/error.h"

namespace titan {

MemoryStats Allocator::stats() const {
  return MemoryStats{live_.load(), peak_.load(), count_.load()};
}

void Allocator::reset_peak() { peak_.store(live_.load()); }

void Allocator::on_allocate(size_t bytes) {
  const int64_t live = live_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load();
  while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
  }
  count_.fetch_add(1);
}

void Allocator::on_deallocate(size_t bytes) { live_.fetch_sub(static_cast<int64_t>(bytes)); }

// Large blocks are kept when freed and handed to the next request of the same rounded size. A
// training step allocates the same few big buffers every step (the head's logits chunk and the
// bf16 rounding of its weight, some hundreds of MiB each): glibc serves each with a fresh mmap,
// so every step faulted in and zeroed them again (~6% of the bf16 bench step in the kernel's
// clear_page). Exact sizes only, and at most kCachedBytes in all, so a cached block never stands in
// for a different allocation. The cache never lifts the footprint above the job's own high-water
// mark either: a block is kept only while live + cached bytes stay within the most the job has had
// live at once, and an allocation that would pass that mark by more than kMarkSlack first frees
// cached blocks (take() says which). The peak RSS is then the allocator's peak plus the libraries
// plus at most kMarkSlack of the cache.
namespace {
constexpr size_t kCacheMinBytes = size_t{32} << 20;  // glibc's largest mmap threshold
constexpr size_t kCachedBytes = size_t{2} << 30;
// How far live + cached may pass the mark before blocks are freed. The head's buffers make the
// mark, and they are all cached when the backward right after it holds 40 MiB more than the head
// started with (the bf16 bench step, with the weight packed for AMX): without the slack one of them
// (the 85 MiB bf16 dlogits) was freed and faulted in again every step (0.15 s on a 2-core Xeon VM,
// docs/performance.md (z)).
constexpr size_t kMarkSlack = size_t{64} << 20;

struct LargeBlockCache {
  std::mutex mutex;
  std::vector<std::pair<size_t, void*>> blocks;  // (rounded size, block), oldest first
  std::atomic<size_t> bytes{0};
  std::atomic<size_t> high_water{0};  // the most bytes live at once; never reset, unlike the stats' peak

  // Before every host allocation of `rounded` bytes while `live` bytes are live: a cached block of
  // that size (large requests only), else null, after freeing the cached blocks that would lift
  // live + cached more than kMarkSlack above the high-water mark.
  void* take(size_t rounded, size_t live) {
    const size_t after = live + rounded;
    size_t mark = high_water.load();
    while (after > mark && !high_water.compare_exchange_weak(mark, after)) {
    }
    mark = std::max(mark, after) + kMarkSlack;
    if (bytes.load() == 0 || (rounded < kCacheMinBytes && after + bytes.load() <= mark)) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; rounded >= kCacheMinBytes && i < blocks.size(); ++i) {
      if (blocks[i].first != rounded) continue;
      void* ptr = blocks[i].second;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      bytes -= rounded;
      return ptr;
    }
    // Over the mark (with its slack): the smallest block that alone brings it back under, else the
    // oldest blocks until it is. A step's last big buffers are freed first and so are the oldest, while the
    // allocation that passes the mark is often a small one just before they are needed again: with
    // oldest-first, every bf16 step dropped and faulted in again the head's 311 MiB bf16 weight for
    // a few MiB of activations (docs/performance.md (z)).
    while (!blocks.empty() && after + bytes.load() > mark) {
      const size_t excess = after + bytes.load() - mark;
      size_t victim = 0;
      for (size_t i = 0; i < blocks.size(); ++i) {
        const size_t size = blocks[i].first, best = blocks[victim].first;
        if (size >= excess && (best < excess || size < best)) victim = i;
      }
      std::free(blocks[victim].second);
      bytes -= blocks[victim].first;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    return nullptr;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [size, ptr] : blocks) std::free(ptr);
    blocks.clear();
    bytes = 0;
  }
  // False when the cache is full or the block would lift live + cached (`live_after` once it is
  // freed) above the high-water mark: the caller frees the block.
  bool keep(size_t rounded, void* ptr, size_t live_after) {
    std::lock_guard<std::mutex> lock(mutex);
    const size_t cached = bytes.load() + rounded;
    if (cached > kCachedBytes || live_after + cached > high_water.load()) return false;
    blocks.emplace_back(rounded, ptr);
    bytes = cached;
    return true;
  }
};

LargeBlockCache& large_blocks() {
  static LargeBlockCache* cache = new LargeBlockCache;  // never destroyed: tensors may outlive statics
  return *cache;
}

size_t rounded_size(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }
}  // namespace

void* HostAllocator::allocate(size_t bytes) {
  const size_t rounded = rounded_size(bytes);
  void* ptr = large_blocks().take(rounded, static_cast<size_t>(stats().live_bytes));
  if (ptr == nullptr) ptr = std::aligned_alloc(64, rounded);
  TITAN_CHECK(ptr != nullptr, "[host allocator] out of memory allocating ", bytes,
              " bytes. HINT: the job needs more memory than this machine has; titan plan shows where a rank's memory goes "
              "(parameters, optimizer state, activations), and so which field to lower");
  on_allocate(bytes);
  return ptr;
}

void HostAllocator::deallocate(void* ptr, size_t bytes) {
  const size_t rounded = rounded_size(bytes);
  const size_t live_after = static_cast<size_t>(stats().live_bytes) - bytes;
  if (ptr != nullptr && (rounded < kCacheMinBytes || !large_blocks().keep(rounded, ptr, live_after))) std::free(ptr);
  on_deallocate(bytes);
}

void release_cached_host_blocks() { large_blocks().release_all(); }

HostBlockCacheStats host_block_cache_stats() {
  const LargeBlockCache& cache = large_blocks();
  return {static_cast<int64_t>(cache.bytes.load()), static_cast<int64_t>(cache.high_water.load())};
}

// The sizes the host allocator accounts (the requested bytes): a meta run's peak is a host run's.
void* MetaAllocator::allocate(size_t bytes) {
  on_allocate(bytes);
  return nullptr;
}

void MetaAllocator::deallocate(void*, size_t bytes) { on_deallocate(bytes); }

Allocator& meta_allocator() {
  static MetaAllocator allocator;
  return allocator;
}

Allocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

int64_t process_peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace titan
