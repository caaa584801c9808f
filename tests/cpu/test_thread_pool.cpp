// ThreadPool: every task runs exactly once on 1..4 threads, back-to-back calls, nested and
// concurrent callers, per-worker workspaces, clean shutdown.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "cpu/kernels/thread_pool.hpp"

using teeny::cpu::ThreadPool;

TEST_CASE("parallel_for runs every task exactly once on 1 to 4 threads") {
  for (std::size_t threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (const std::size_t n : {0, 1, 2, 3, 4, 5, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::vector<std::size_t> worker_of(n, 99);
      pool.parallel_for(n, [&](std::size_t task, std::size_t worker) {
        hits[task].fetch_add(1, std::memory_order_relaxed);
        worker_of[task] = worker;
      });
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (hits[i].load() != 1 || worker_of[i] >= threads) ++wrong;
      }
      INFO("threads=", threads, " n=", n);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("one-argument tasks, const callables and many calls in a row") {
  for (std::size_t threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    std::vector<std::uint64_t> out(37, 0);
    const auto fill = [&out](std::size_t i) { out[i] += i * i; };
    constexpr int calls = 5000;
    for (int c = 0; c < calls; ++c) pool.parallel_for(out.size(), fill);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] != calls * i * i;
    INFO("threads=", threads);
    CHECK(wrong == 0);
  }
}

TEST_CASE("work is actually spread over the workers") {
  ThreadPool pool(4);
  std::atomic<int> arrived{0};
  std::vector<int> seen(4, 0);
  // Every task waits until all four have started, which only finishes if four threads run them.
  pool.parallel_for(4, [&](std::size_t, std::size_t worker) {
    seen[worker] = 1;
    arrived.fetch_add(1);
    while (arrived.load() < 4) std::this_thread::yield();
  });
  CHECK(seen == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("each worker starts on its own contiguous range of tasks") {
  ThreadPool pool(4);
  // Ranges of 10 tasks over 4 threads: 3, 3, 2, 2 tasks, starting at 0, 3, 6 and 8.
  CHECK(pool.first_task(10, 0) == 0);
  CHECK(pool.first_task(10, 1) == 3);
  CHECK(pool.first_task(10, 2) == 6);
  CHECK(pool.first_task(10, 3) == 8);
  CHECK(pool.first_task(10, 4) == 10);
  // Fewer tasks than threads go to the caller and the first workers.
  CHECK(pool.first_task(2, 1) == 1);
  CHECK(pool.first_task(2, 2) == 2);
  for (int call = 0; call < 20; ++call) {
    std::vector<std::size_t> worker_of(10, 99);
    std::vector<int> started(4, 0);
    std::atomic<int> arrived{0};
    // Each thread's first task waits until all four threads hold one, so no thread can take
    // another's range before that thread has claimed from it.
    pool.parallel_for(10, [&](std::size_t task, std::size_t worker) {
      worker_of[task] = worker;
      if (started[worker]++ != 0) return;
      arrived.fetch_add(1);
      while (arrived.load() < 4) std::this_thread::yield();
    });
    INFO("call ", call);
    CHECK(worker_of[0] == 0);
    CHECK(worker_of[3] == 1);
    CHECK(worker_of[6] == 2);
    CHECK(worker_of[8] == 3);
  }
}

TEST_CASE("a parallel_for nested inside a task runs inline") {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> grid(std::size_t{8} * 16);
  std::atomic<int> wrong_worker{0};
  pool.parallel_for(8, [&](std::size_t i, std::size_t outer_worker) {
    pool.parallel_for(16, [&](std::size_t j, std::size_t inner_worker) {
      grid[i * 16 + j].fetch_add(inner_worker == outer_worker ? 1 : 100);
    });
    if (pool.current_worker() != outer_worker) wrong_worker.fetch_add(1);
  });
  int sum = 0;
  for (auto& g : grid) sum += g.load();
  CHECK(sum == 8 * 16);
  CHECK(wrong_worker.load() == 0);
}

TEST_CASE("callers on different threads are serialised") {
  ThreadPool pool(3);
  std::atomic<std::uint64_t> total{0};
  auto hammer = [&] {
    for (int c = 0; c < 500; ++c) {
      pool.parallel_for(9, [&](std::size_t i) { total.fetch_add(i + 1, std::memory_order_relaxed); });
    }
  };
  std::thread t1(hammer);
  std::thread t2(hammer);
  hammer();
  t1.join();
  t2.join();
  CHECK(total.load() == 3u * 500u * 45u);
}

TEST_CASE("per-worker workspaces are aligned, grow on demand and are kept") {
  ThreadPool pool(3);
  void* first = pool.workspace(0, 1000);  // the caller is worker 0 outside parallel_for
  REQUIRE(first != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
  CHECK(pool.workspace(0, 900) == first);
  void* grown = pool.workspace(0, 1 << 20);
  REQUIRE(grown != nullptr);
  CHECK(pool.workspace(0, 1000) == grown);
  CHECK(pool.workspace(3, 16) == nullptr);  // no such worker
  CHECK(pool.current_worker() == 0);

  std::vector<std::atomic<int>> misaligned(3);
  pool.parallel_for(12, [&](std::size_t, std::size_t w) {
    void* p = pool.workspace(w, 4096 * (w + 1));
    if (p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 64 != 0) {
      misaligned[w].fetch_add(1);
      return;
    }
    static_cast<unsigned char*>(p)[4096 * (w + 1) - 1] = 1;  // the whole size is usable
  });
  for (auto& m : misaligned) CHECK(m.load() == 0);
}

TEST_CASE("pools start and stop cleanly, idle or busy") {
  for (int round = 0; round < 50; ++round) {
    ThreadPool idle(1 + round % 4);
  }
  for (int round = 0; round < 50; ++round) {
    ThreadPool pool(1 + round % 4);
    std::atomic<int> n{0};
    pool.parallel_for(10, [&](std::size_t) { n.fetch_add(1); });
    CHECK(n.load() == 10);
  }
  ThreadPool automatic(0);
  CHECK(automatic.size() >= 1);
}
