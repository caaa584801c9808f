// A persistent fork-join thread pool for the CPU kernels.
//
// Workers are created once; parallel_for publishes a job (a function pointer plus a context
// pointer, so no std::function and no allocation), the caller runs tasks alongside the workers,
// and the call returns when every task has finished. Idle workers spin briefly, then sleep on a
// futex, so back-to-back calls (one per layer) cost a cache-line round trip, not a syscall.
//
// The tasks of a call are cut into one contiguous range per thread, in order: worker w runs range
// w first, and only then takes what is left of the others'. Kernels number their tasks along the
// data (images, rows, channels), so consecutive calls give each thread the same part of the
// activations, which stays in its own cache; and a thread claims from a counter on a cache line
// of its own, not one that every claim moves between cores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>

#include "memory.hpp"

namespace teeny::cpu {

// The padding the analyzer reports is deliberate: the atomics sit on cache lines of their own.
class ThreadPool {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  // n_threads counts the caller: 1 runs everything inline and starts no thread; 0 means one per
  // hardware thread; an embedded build (TEENY_EMBEDDED) has no threads and always runs inline.
  // The workers' bookkeeping and every workspace come from `memory` (a pool of one thread takes
  // nothing until a workspace is asked for); threads the system makes.
  explicit ThreadPool(std::size_t n_threads, Memory& memory = heap_memory());
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run tasks, the caller included.
  std::size_t size() const { return n_threads_; }

  // Calls fn(task) -- or fn(task, worker) when fn takes two arguments, worker in [0, size()) and
  // 0 for the caller -- once for every task in [0, n_tasks), spread over the caller and the
  // workers, and returns when all have returned. Worker w is given tasks [first_task(n_tasks, w),
  // first_task(n_tasks, w + 1)); a worker that finishes its own early helps with the others'. Calls from several
  // threads are serialised (each caller acts as worker 0); a call made from inside a task (nested) runs its tasks
  // inline on that thread, with that thread's worker index.
  template <class F>
  void parallel_for(std::size_t n_tasks, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    TaskFn trampoline = [](const void* ctx, std::size_t task, std::size_t worker) {
      Fn& f = *static_cast<Fn*>(const_cast<void*>(ctx));
      if constexpr (std::is_invocable_v<Fn&, std::size_t, std::size_t>) {
        f(task, worker);
      } else {
        f(task);
      }
    };
    run(n_tasks, trampoline, static_cast<const void*>(std::addressof(fn)));
  }

  // The first task of worker w's range when a call has n_tasks tasks (w == size(): n_tasks).
  // Ranges differ in length by at most one, the longer ones first, so that a call with fewer
  // tasks than threads gives them to the caller and the first workers.
  std::size_t first_task(std::size_t n_tasks, std::size_t w) const {
    const std::size_t longer = n_tasks % n_threads_;  // ranges with one task more than the rest
    return (n_tasks / n_threads_) * w + (w < longer ? w : longer);
  }

  // Index of the calling thread in this pool: its worker index inside a task, 0 elsewhere.
  std::size_t current_worker() const;

  // Per-worker scratch memory, 64-byte aligned, grown to at least `bytes` (never shrunk, contents
  // not kept when it grows) and kept for the pool's lifetime, so steady-state calls allocate
  // nothing. Only the thread currently acting as `worker` may call it. Returns nullptr when the
  // pool's Memory has no room.
  void* workspace(std::size_t worker, std::size_t bytes);
  // What workspace(worker, bytes) takes from the Memory: requests are rounded up to whole pages,
  // so that slightly larger ones later do not reallocate.
  static constexpr std::size_t workspace_size(std::size_t bytes) { return (bytes + 4095) & ~std::size_t{4095}; }

 private:
  using TaskFn = void (*)(const void* ctx, std::size_t task, std::size_t worker);
  // A worker's workspace, on a cache line of its own.
  struct alignas(64) Slot {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };

  // One thread's range of the current job, on a cache line of its own: (generation << 32) |
  // tasks of the range not yet claimed. Claiming CASes it down, so that a claim made with a stale
  // generation fails instead of taking a task of the next job.
  struct alignas(64) Range {
    std::atomic<std::uint64_t> ticket{0};
  };

  void run(std::size_t n_tasks, TaskFn fn, const void* ctx);
  void run_chunk(std::size_t base, std::size_t n_tasks, TaskFn fn, const void* ctx);
  void worker_main(std::size_t worker);
  // Runs what worker can claim of job `generation`: its own range, then the others'.
  void claim_and_run(std::uint32_t generation, std::size_t worker);
  // Claims and runs the tasks left in range r; returns how many it ran.
  std::uint32_t run_range(std::uint32_t generation, std::size_t r, std::size_t worker);

  std::size_t n_threads_ = 1;
  std::unique_ptr<std::thread[]> threads_;  // workers 1 .. n_threads_-1
  Memory* memory_;
  Slot caller_slot_;                // worker 0's
  MemoryArray<Slot> worker_slots_;  // workers 1 .. n_threads_-1
  MemoryArray<Range> ranges_;       // one per thread, the caller's first
  std::uint32_t generation_ = 0;    // caller-only: id of the last job published

  // The current job, on one cache line so that a waking worker fetches it in one transfer. The
  // fields are written by the caller before it publishes the ranges' tickets, and read by a worker
  // only after it has claimed a task of this job, so a late worker never sees a half-written job.
  struct alignas(64) Job {
    TaskFn fn = nullptr;
    const void* ctx = nullptr;
    std::size_t base = 0;
    std::uint32_t n = 0;
    std::atomic<std::uint32_t> epoch{0};  // bumped per job and at shutdown; idle workers wait on it
    std::atomic<bool> stop{false};
  };
  Job job_;
  struct alignas(64) Completion {
    std::atomic<std::uint32_t> done{0};  // tasks finished in the current job
    std::atomic<std::uint32_t> caller_sleeping{0};
  };
  Completion completion_;
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};  // workers blocked on job_.epoch
  alignas(64) std::atomic<bool> busy_{false};           // a parallel_for is in flight
};

}  // namespace teeny::cpu
