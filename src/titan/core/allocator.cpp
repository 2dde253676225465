#include "titan/core/allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <new>

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

void* HostAllocator::allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* ptr = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  TITAN_CHECK(ptr != nullptr, "[host allocator] out of memory allocating ", bytes,
              " bytes. HINT: the job needs more memory than this machine has; titan plan shows where a rank's memory goes "
              "(parameters, optimizer state, activations), and so which field to lower");
  on_allocate(bytes);
  return ptr;
}

void HostAllocator::deallocate(void* ptr, size_t bytes) {
  std::free(ptr);
  on_deallocate(bytes);
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
