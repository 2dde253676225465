// A std::vector whose storage is 64-byte aligned, for the scratch buffers of kernels whose loops the
// compiler vectorizes. A vectorized loop peels scalar iterations until its pointers are aligned, and
// a peeled scalar iteration may round differently from the vector body (multiply-adds contracted
// otherwise); with the default allocator the alignment follows the thread's malloc arena, so the
// result would depend on which thread ran a task. Aligned buffers peel the same way every time.
#pragma once

#include <cstdlib>
#include <new>
#include <vector>

namespace titan {

template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}  // NOLINT: rebinding, as the standard allocators do
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const { return true; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace titan
