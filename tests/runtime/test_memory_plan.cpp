#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

import teeny.runtime;

using teeny::BufferRequest;

namespace {
// The independent check: no two buffers live at the same time share a byte.
bool disjoint_when_live(const std::vector<BufferRequest>& r, const teeny::MemoryPlan& p) {
  for (std::size_t i = 0; i < r.size(); ++i) {
    for (std::size_t j = i + 1; j < r.size(); ++j) {
      const bool live = r[i].first_step <= r[j].last_step && r[j].first_step <= r[i].last_step;
      const bool overlap = p.offsets[i] < p.offsets[j] + r[j].bytes && p.offsets[j] < p.offsets[i] + r[i].bytes;
      if (live && overlap && r[i].bytes > 0 && r[j].bytes > 0) return false;
    }
  }
  return true;
}
}  // namespace

TEST_CASE("a chain reuses memory: two buffers at a time") {
  // x -> a -> b -> c: each buffer lives from its producer to its consumer.
  const std::vector<BufferRequest> chain{{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  const auto plan = teeny::plan_memory(chain);
  CHECK(plan.arena_bytes == 2048);
  CHECK(plan.naive_bytes == 4096);
  CHECK(plan.offsets[0] == plan.offsets[2]);
  CHECK(disjoint_when_live(chain, plan));
}

TEST_CASE("a skip connection keeps its buffer alive across the block") {
  const std::vector<BufferRequest> block{{256, 0, 3}, {256, 1, 2}, {256, 2, 3}, {256, 3, 4}};
  const auto plan = teeny::plan_memory(block);
  CHECK(plan.arena_bytes == 3 * 256);
  CHECK(disjoint_when_live(block, plan));
}

TEST_CASE("offsets are aligned and sizes rounded up") {
  const std::vector<BufferRequest> odd{{10, 0, 1}, {3, 0, 1}};
  const auto plan = teeny::plan_memory(odd, 64);
  CHECK(plan.offsets[0] % 64 == 0);
  CHECK(plan.offsets[1] % 64 == 0);
  CHECK(plan.arena_bytes == 128);
}

TEST_CASE("random lifetimes: never overlapping while live, never worse than naive") {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<BufferRequest> r(40);
    for (auto& b : r) {
      b.first_step = rng() % 30;
      b.last_step = b.first_step + rng() % 8;
      b.bytes = 64 * (1 + rng() % 50);
    }
    const auto plan = teeny::plan_memory(r);
    CHECK(disjoint_when_live(r, plan));
    CHECK(plan.arena_bytes <= plan.naive_bytes);
  }
}
