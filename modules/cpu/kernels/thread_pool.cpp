#include "thread_pool.hpp"

#include <chrono>
#include <limits>
#include <new>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace teeny::cpu {

namespace {

// The pool whose task the calling thread is running, and its worker index there. (An embedded
// build has one thread, and needs no thread-local storage.)
#if TEENY_EMBEDDED
const ThreadPool* tls_pool = nullptr;
std::size_t tls_worker = 0;
#else
thread_local const ThreadPool* tls_pool = nullptr;
thread_local std::size_t tls_worker = 0;

// How long an idle thread spins before it sleeps: long enough to bridge the gap between the
// GEMMs of consecutive layers, short enough not to burn a core when the model is idle.
constexpr std::chrono::microseconds spin_budget{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until pred() holds or the spin budget is spent; returns pred()'s last value.
template <class Pred>
bool spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + spin_budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}
#endif

// Restores the thread-local "current pool" on scope exit (a pool's caller may itself be a worker
// of another pool).
class TlsScope {
 public:
  TlsScope(const ThreadPool* pool, std::size_t worker) : pool_(tls_pool), worker_(tls_worker) {
    tls_pool = pool;
    tls_worker = worker;
  }
  ~TlsScope() {
    tls_pool = pool_;
    tls_worker = worker_;
  }
  TlsScope(const TlsScope&) = delete;
  TlsScope& operator=(const TlsScope&) = delete;

 private:
  const ThreadPool* pool_;
  std::size_t worker_;
};

}  // namespace

ThreadPool::ThreadPool(std::size_t n_threads, Memory& memory) : memory_(&memory) {
#if TEENY_EMBEDDED
  // An embedded build has no threads: every task runs on the caller.
  (void)n_threads;
  n_threads_ = 1;
#else
  if (n_threads == 0) n_threads = std::thread::hardware_concurrency();
  if (n_threads == 0) n_threads = 1;
  if (n_threads > 1) {
    // Without per-thread workspaces, or threads, there can be no workers: run inline.
    worker_slots_ = MemoryArray<Slot>(memory, n_threads - 1);
    ranges_ = MemoryArray<Range>(memory, n_threads);
    if (worker_slots_.ok() && ranges_.ok()) threads_.reset(new (std::nothrow) std::thread[n_threads - 1]);
    if (!threads_) n_threads = 1;
  }
  n_threads_ = n_threads;
  for (std::size_t w = 1; w < n_threads_; ++w) threads_[w - 1] = std::thread([this, w] { worker_main(w); });
#endif
}

ThreadPool::~ThreadPool() {
#if !TEENY_EMBEDDED
  job_.stop.store(true, std::memory_order_seq_cst);
  job_.epoch.fetch_add(1, std::memory_order_seq_cst);
  job_.epoch.notify_all();
  for (std::size_t w = 1; w < n_threads_; ++w) threads_[w - 1].join();
#endif
  memory_->release(caller_slot_.ptr);
  for (Slot& s : worker_slots_) memory_->release(s.ptr);
}

std::size_t ThreadPool::current_worker() const { return tls_pool == this ? tls_worker : 0; }

void* ThreadPool::workspace(std::size_t worker, std::size_t bytes) {
  if (worker >= n_threads_) return nullptr;
  Slot& s = worker == 0 ? caller_slot_ : worker_slots_[worker - 1];
  if (s.bytes >= bytes && s.ptr) return s.ptr;
  memory_->release(s.ptr);
  const std::size_t want = workspace_size(bytes);
  s.ptr = memory_->allocate(want);
  s.bytes = s.ptr ? want : 0;
  return s.ptr;
}

void ThreadPool::run(std::size_t n_tasks, TaskFn fn, const void* ctx) {
  if (n_tasks == 0) return;
  if (tls_pool == this) {
    // Nested call from inside one of our tasks: the workers are busy with the outer job.
    for (std::size_t t = 0; t < n_tasks; ++t) fn(ctx, t, tls_worker);
    return;
  }
#if TEENY_EMBEDDED
  const TlsScope scope(this, 0);
  for (std::size_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
#else
  // Serialise callers from different threads; they all act as worker 0.
  while (busy_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  const TlsScope scope(this, 0);
  if (n_threads_ == 1 || n_tasks == 1) {
    for (std::size_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
  } else {
    constexpr std::size_t max_chunk = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t base = 0; base < n_tasks; base += max_chunk) {
      run_chunk(base, n_tasks - base < max_chunk ? n_tasks - base : max_chunk, fn, ctx);
    }
  }
  busy_.store(false, std::memory_order_release);
#endif
}

#if !TEENY_EMBEDDED

void ThreadPool::run_chunk(std::size_t base, std::size_t n_tasks, TaskFn fn, const void* ctx) {
  job_.fn = fn;
  job_.ctx = ctx;
  job_.base = base;
  job_.n = static_cast<std::uint32_t>(n_tasks);
  completion_.done.store(0, std::memory_order_relaxed);
  const std::uint32_t gen = ++generation_;
  // Release: a worker whose CAS on a ticket succeeds sees the job fields and done == 0.
  for (std::size_t r = 0; r < n_threads_; ++r) {
    const std::size_t count = first_task(n_tasks, r + 1) - first_task(n_tasks, r);
    ranges_[r].ticket.store((std::uint64_t{gen} << 32) | count, std::memory_order_release);
  }
  job_.epoch.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) job_.epoch.notify_all();

  claim_and_run(gen, 0);

  const auto n = static_cast<std::uint32_t>(n_tasks);
  std::atomic<std::uint32_t>& done = completion_.done;
  if (!spin_until([&] { return done.load(std::memory_order_acquire) == n; })) {
    completion_.caller_sleeping.store(1, std::memory_order_seq_cst);
    for (std::uint32_t d = done.load(std::memory_order_seq_cst); d != n; d = done.load(std::memory_order_seq_cst)) {
      done.wait(d, std::memory_order_seq_cst);
    }
    completion_.caller_sleeping.store(0, std::memory_order_relaxed);
  }
}

void ThreadPool::claim_and_run(std::uint32_t generation, std::size_t worker) {
  std::uint32_t ran = 0;
  for (std::size_t i = 0; i < n_threads_; ++i) {
    const std::size_t r = worker + i < n_threads_ ? worker + i : worker + i - n_threads_;
    ran += run_range(generation, r, worker);
  }
  if (ran == 0) return;
  // The tasks this thread ran are not counted yet, so the job is still this one.
  const std::uint32_t n = job_.n;
  // Last access to the job: once `done` reaches n the caller may publish the next one.
  if (completion_.done.fetch_add(ran, std::memory_order_seq_cst) + ran == n &&
      completion_.caller_sleeping.load(std::memory_order_seq_cst) != 0) {
    completion_.done.notify_all();
  }
}

std::uint32_t ThreadPool::run_range(std::uint32_t generation, std::size_t r, std::size_t worker) {
  std::atomic<std::uint64_t>& ticket = ranges_[r].ticket;
  std::uint32_t ran = 0;
  std::uint64_t t = ticket.load(std::memory_order_acquire);
  for (;;) {
    const auto left = static_cast<std::uint32_t>(t & 0xffffffffu);
    if (static_cast<std::uint32_t>(t >> 32) != generation || left == 0) return ran;
    if (!ticket.compare_exchange_weak(t, t - 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The claim succeeded, so this job is not finished and its fields are stable.
    const std::size_t first = first_task(job_.n, r);
    const std::size_t count = first_task(job_.n, r + 1) - first;
    job_.fn(job_.ctx, job_.base + first + (count - left), worker);
    ++ran;
    t = ticket.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_main(std::size_t worker) {
  const TlsScope scope(this, worker);
  std::uint32_t seen = 0;  // the constructor published nothing, so epoch 0 carries no job
  for (;;) {
    std::atomic<std::uint32_t>& epoch = job_.epoch;
    if (!spin_until([&] { return epoch.load(std::memory_order_acquire) != seen; })) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (epoch.load(std::memory_order_seq_cst) == seen) epoch.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = epoch.load(std::memory_order_acquire);
    if (job_.stop.load(std::memory_order_acquire)) return;
    const std::uint64_t t = ranges_[worker].ticket.load(std::memory_order_acquire);
    claim_and_run(static_cast<std::uint32_t>(t >> 32), worker);
  }
}

#endif  // !TEENY_EMBEDDED

}  // namespace teeny::cpu
