// teeny.runtime:memory_plan — places activation buffers in one arena, reusing memory by liveness.
//
// Each buffer is live from the step that writes it to the last step that reads it. Buffers whose
// lifetimes overlap get disjoint bytes; others may share. Placement is greedy by size (largest
// first, each at the lowest offset that fits), which is near-optimal for the chains and skips of
// neural networks and runs once, at load.
//
//   BufferRequest r[] = {{1024, 0, 1}, {512, 1, 2}, {1024, 2, 3}};
//   MemoryPlan p = plan_memory(r);     // p.arena_bytes == 1536 (the third reuses the first)
export module teeny.runtime:memory_plan;
import teeny.std;

export namespace teeny {

/// A buffer of `bytes`, written at step `first_step` and last read at step `last_step`.
struct BufferRequest {
  std::size_t bytes = 0;
  std::size_t first_step = 0;
  std::size_t last_step = 0;
};

struct MemoryPlan {
  std::vector<std::size_t> offsets;  // one per request, `alignment`-aligned
  std::size_t arena_bytes = 0;       // the arena's size: the peak of the placement
  std::size_t naive_bytes = 0;       // what one buffer per request would take
};

inline MemoryPlan plan_memory(std::span<const BufferRequest> requests, std::size_t alignment = 64) {
  auto round_up = [alignment](std::size_t n) { return (n + alignment - 1) / alignment * alignment; };
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Largest first, ties in request order. (A sort with the index as tie-break, not stable_sort:
  // libstdc++ 12's stable_sort calls the deprecated get_temporary_buffer, which clang warns about.)
  std::ranges::sort(order, [&](std::size_t a, std::size_t b) {
    return requests[a].bytes != requests[b].bytes ? requests[a].bytes > requests[b].bytes : a < b;
  });

  std::vector<std::size_t> placed;  // indices already given an offset, sorted by offset
  for (std::size_t i : order) {
    const BufferRequest& r = requests[i];
    const std::size_t size = round_up(r.bytes);
    plan.naive_bytes += size;
    std::size_t offset = 0;
    for (std::size_t j : placed) {  // walk placed buffers by offset; skip past every live clash
      const BufferRequest& other = requests[j];
      const bool live_together = r.first_step <= other.last_step && other.first_step <= r.last_step;
      if (!live_together) continue;
      const std::size_t other_end = plan.offsets[j] + round_up(other.bytes);
      if (offset + size <= plan.offsets[j]) break;  // fits in the gap before it
      offset = std::max(offset, other_end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.insert(std::ranges::upper_bound(placed, offset, {}, [&](std::size_t j) { return plan.offsets[j]; }), i);
  }
  return plan;
}

}  // namespace teeny
