// Counts every heap allocation in the test binary (global operator new replaced), so that a test
// can prove a code path allocates nothing. Counting is always on and costs one atomic increment.
// Under ThreadSanitizer, whose runtime defines operator new itself, the sanitizer's allocation
// hook counts instead (every malloc too: stricter, never looser).
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "support/allocation_counter.hpp"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_SUPPORT_SANITIZER_HOOK 1
#endif
#endif

namespace {
std::atomic<std::size_t> allocations{0};
}  // namespace

namespace test_support {
std::size_t allocation_count() { return allocations.load(std::memory_order_relaxed); }
}  // namespace test_support

#if TEST_SUPPORT_SANITIZER_HOOK
#include <sanitizer/allocator_interface.h>

namespace {
void count_malloc(const volatile void*, std::size_t) { allocations.fetch_add(1, std::memory_order_relaxed); }
void ignore_free(const volatile void*) {}
const int hooked = __sanitizer_install_malloc_and_free_hooks(count_malloc, ignore_free);
}  // namespace
#else
namespace {

void* allocate(std::size_t size, std::size_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
}  // namespace

// Throwing forms: without exceptions, failure ends the program (as the standard library does).
void* operator new(std::size_t size) {
  void* p = allocate(size, 0);
  if (p == nullptr) std::abort();
  return p;
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, std::align_val_t a) {
  void* p = allocate(size, static_cast<std::size_t>(a));
  if (p == nullptr) std::abort();
  return p;
}
void* operator new[](std::size_t size, std::align_val_t a) { return operator new(size, a); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
#endif
