#pragma once
// Heap allocations made so far by the whole test binary (see allocation_counter.cpp).
#include <cstddef>

namespace test_support {
std::size_t allocation_count();
}  // namespace test_support
