// std::vector storage on a cache line (64 bytes, AVX-512's vector): a plain std::vector's large
// buffers come from mmap 16 bytes past a page start, so every 64-byte load of a row would
// straddle two lines.
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace gpt2 {

constexpr size_t kCacheLineBytes = 64;

// What a resize puts in the new elements: zeros, as std::allocator does, or nothing at all (for
// buffers that no one reads before writing, where zeroing would only touch every page).
enum class NewElements { kZeroed, kUninitialized };

template <typename T, NewElements kNew = NewElements::kZeroed>
struct CacheLineAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = CacheLineAllocator<U, kNew>;
  };

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U, kNew>&) {}

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{kCacheLineBytes}); }

  // std::allocator_traits calls this for every element a resize adds (no arguments) and for
  // copies; only the first differs from the default, and only when kNew says so.
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (kNew == NewElements::kUninitialized && sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }

  bool operator==(const CacheLineAllocator&) const { return true; }
  bool operator!=(const CacheLineAllocator&) const { return false; }
};

template <typename T, NewElements kNew = NewElements::kZeroed>
using CacheLineVector = std::vector<T, CacheLineAllocator<T, kNew>>;

}  // namespace gpt2
