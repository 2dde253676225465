#include "titan/core/allocator.h"

#include <sys/resource.h>

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
// for a different allocation, and memory the job no longer asks for is not held beyond that cap.
namespace {
constexpr size_t kCacheMinBytes = size_t{32} << 20;  // glibc's largest mmap threshold
constexpr size_t kCachedBytes = size_t{2} << 30;

struct LargeBlockCache {
  std::mutex mutex;
  std::vector<std::pair<size_t, void*>> blocks;  // (rounded size, block)
  size_t bytes = 0;

  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].first != rounded) continue;
      void* ptr = blocks[i].second;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      bytes -= rounded;
      return ptr;
    }
    return nullptr;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [size, ptr] : blocks) std::free(ptr);
    blocks.clear();
    bytes = 0;
  }
  // False when the cache is full: the caller frees the block.
  bool keep(size_t rounded, void* ptr) {
    std::lock_guard<std::mutex> lock(mutex);
    if (bytes + rounded > kCachedBytes) return false;
    blocks.emplace_back(rounded, ptr);
    bytes += rounded;
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
  void* ptr = rounded >= kCacheMinBytes ? large_blocks().take(rounded) : nullptr;
  if (ptr == nullptr) ptr = std::aligned_alloc(64, rounded);
  TITAN_CHECK(ptr != nullptr, "[host allocator] out of memory allocating ", bytes,
              " bytes. HINT: the job needs more memory than this machine has; titan plan shows where a rank's memory goes "
              "(parameters, optimizer state, activations), and so which field to lower");
  on_allocate(bytes);
  return ptr;
}

void HostAllocator::deallocate(void* ptr, size_t bytes) {
  const size_t rounded = rounded_size(bytes);
  if (ptr != nullptr && (rounded < kCacheMinBytes || !large_blocks().keep(rounded, ptr))) std::free(ptr);
  on_deallocate(bytes);
}

void release_cached_host_blocks() { large_blocks().release_all(); }

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
