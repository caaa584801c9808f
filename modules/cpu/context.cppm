// teeny.cpu:context — the CPU backend's state shared by all kernels: the persistent thread pool
// and per-worker kernel scratch.
//
//   CpuContext cpu({.threads = 2});     // threads created once, here
module;
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "cpu/kernels/thread_pool.hpp"
export module teeny.cpu:context;
import teeny.model; // RunPhase

export namespace teeny {

/// The element types the CPU kernels compute in: float (the fast path) and double (exact checks).
/// Each kernel is written once over T and compiled for both in its module.
template <class T>
concept CpuReal = std::same_as<T, float> || std::same_as<T, double>;

/// How convolutions make their GEMM's im2col operand (see teeny.cpu:conv). 1x1 stride-1 unpadded
/// and depthwise convolutions have paths of their own and ignore it.
enum class ConvAlgorithm : std::uint8_t {
  automatic,   // per layer, whichever of the three below is estimated cheapest for its shape
  implicit,    // windows of the zero-padded input read in place: no im2col matrix
  im2col,      // the im2col matrix written out
  transposed,  // im2col, with output pixels as the GEMM's rows (few pixels, many channels)
};

struct CpuOptions {
  /// Threads that run kernels, the caller included (1: everything on the calling thread).
  std::size_t threads = 1;
  /// Convolution algorithm; automatic is best but for measurements and tests.
  ConvAlgorithm conv = ConvAlgorithm::automatic;
};

class CpuContext {
 public:
  explicit CpuContext(CpuOptions options = {})
      : options_(options), pool_(std::make_unique<cpu::ThreadPool>(options.threads == 0 ? 1 : options.threads)) {}
  cpu::ThreadPool& pool() { return *pool_; }
  std::size_t threads() const { return pool_->size(); }
  const CpuOptions& options() const { return options_; }

  /// Grows every worker's kernel scratch to at least `bytes` (64-byte aligned, never shrunk); false
  /// when that cannot be allocated. Kernels call it when prepared, so forward allocates nothing.
  /// It is not the pool's workspace, which the GEMM uses: a task can fill its scratch (a
  /// convolution's im2col columns) and then run a GEMM on it. Kernels run one at a time, so they
  /// all share it.
  bool reserve_scratch(std::size_t bytes) {
    if (bytes <= scratch_bytes_) return true;
    std::vector<Scratch> grown;
    for (std::size_t w = 0; w < threads(); ++w) {
      grown.emplace_back(static_cast<float*>(::operator new(bytes, std::align_val_t{64}, std::nothrow)));
      if (!grown.back()) return false;
    }
    scratch_ = std::move(grown);
    scratch_bytes_ = bytes;
    return true;
  }
  /// Grows every worker's pool workspace (the GEMM's scratch) to `bytes`, so that a GEMM run later
  /// on any worker finds it allocated: a kernel calls it when prepared, with
  /// cpu::gemm_workspace_bytes of its GEMMs. Call it only between parallel_for calls.
  bool reserve_gemm_workspace(std::size_t bytes) {
    for (std::size_t w = 0; w < threads(); ++w) {
      if (bytes != 0 && pool_->workspace(w, bytes) == nullptr) return false;
    }
    return true;
  }
  /// The phase the next kernels run in (see RunPhase); inference models stay in eval.
  const RunPhase& phase() const { return phase_; }
  void set_phase(const RunPhase& phase) { phase_ = phase; }

  /// Worker `worker`'s scratch (reserve_scratch bytes; nullptr before any reservation).
  float* scratch(std::size_t worker) const { return worker < scratch_.size() ? scratch_[worker].get() : nullptr; }
  /// The same, as elements of T (the block is 64-byte aligned, so suits any of them).
  template <CpuReal T>
  T* scratch_as(std::size_t worker) const {
    return reinterpret_cast<T*>(scratch(worker));
  }

 private:
  struct AlignedFree {
    void operator()(float* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  using Scratch = std::unique_ptr<float, AlignedFree>;

  CpuOptions options_;
  std::unique_ptr<cpu::ThreadPool> pool_;  // not movable itself; the context is
  std::vector<Scratch> scratch_;           // one block per worker
  std::size_t scratch_bytes_ = 0;
  RunPhase phase_{};
};

/// Calls fn(begin, end) on contiguous chunks of [0, n) items, spread over the pool when there is
/// enough work: `cost` is one item's work in elements touched, and a task gets at least ~16K.
template <class F>
void parallel_chunks(CpuContext& cpu, std::int64_t n, std::int64_t cost, F&& fn) {
  if (n <= 0) return;
  const std::int64_t total = n * std::max<std::int64_t>(cost, 1);
  const auto threads = static_cast<std::int64_t>(cpu.threads());
  // A few tasks per thread even out uneven items; more would only add hand-offs.
  const std::int64_t tasks = std::min({n, std::max<std::int64_t>(1, total >> 14), threads == 1 ? 1 : 4 * threads});
  if (tasks == 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  cpu.pool().parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t t) {
    const auto i = static_cast<std::int64_t>(t);
    fn(n * i / tasks, n * (i + 1) / tasks);
  });
}

/// The state of a kernel that needs none.
struct NoState {};

}  // namespace teeny
