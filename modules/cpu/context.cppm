// teeny.cpu:context — the CPU backend's state shared by all kernels: the persistent thread pool.
//
//   CpuContext cpu({.threads = 2});     // threads created once, here
module;
#include <cstddef>
#include <memory>

#include "cpu/kernels/thread_pool.hpp"
export module teeny.cpu:context;

export namespace teeny {

struct CpuOptions {
  /// Threads that run kernels, the caller included (1: everything on the calling thread).
  std::size_t threads = 1;
};

class CpuContext {
 public:
  explicit CpuContext(CpuOptions options = {})
      : options_(options), pool_(std::make_unique<cpu::ThreadPool>(options.threads == 0 ? 1 : options.threads)) {}
  cpu::ThreadPool& pool() { return *pool_; }
  std::size_t threads() const { return pool_->size(); }
  const CpuOptions& options() const { return options_; }

 private:
  CpuOptions options_;
  std::unique_ptr<cpu::ThreadPool> pool_;  // not movable itself; the context is
};

/// The state of a kernel that needs none.
struct NoState {};

}  // namespace teeny
