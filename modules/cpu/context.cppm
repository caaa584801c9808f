// teeny.cpu:context — the CPU backend's state shared by all kernels: the persistent thread pool
// and per-worker kernel scratch.
//
//   CpuContext cpu({.threads = 2});     // threads created once, here
module;
#include "cpu/kernels/memory.hpp"
#include "cpu/kernels/thread_pool.hpp"
export module teeny.cpu:context;
import teeny.std;
import teeny.model; // RunPhase

export namespace teeny {

/// The element types the CPU kernels compute in: float (the fast path) and double (exact checks).
/// Each kernel is written once over T and compiled for both in its module.
template <class T>
concept CpuReal = std::same_as<T, float> || std::same_as<T, double>;

/// How convolutions run (see teeny.cpu:conv): the way their GEMM's im2col operand is made, or
/// Winograd. 1x1 stride-1 unpadded and depthwise convolutions have paths of their own and ignore
/// it; f64 convolutions always take the im2col matrix.
enum class ConvAlgorithm : std::uint8_t {
  automatic,     // per layer, whichever of the six below is estimated cheapest for its shape
  implicit,      // windows of the zero-padded input read in place: no im2col matrix
  im2col,        // the im2col matrix written out
  transposed,    // im2col, with output pixels as the GEMM's rows (few pixels, many channels)
  winograd,      // Winograd F(4x4, 3x3) where it fits (3x3, stride 1, no dilation); elsewhere automatic
  winograd_2x2,  // Winograd F(2x2, 3x3) where it fits, as above: 2.25x fewer multiply-adds, not 4x,
                 // but transformed filters 1.8x the weights' size, not 4x
  pixel_rows,    // implicit, with output pixels as the register tile's rows and the output channels
                 // as its columns, where it fits (at most 16 output channels, AVX-512, no activation
                 // but ReLU applied with it); elsewhere implicit
};

struct CpuOptions {
  /// Threads that run kernels, the caller included (1: everything on the calling thread).
  std::size_t threads = 1;
  /// Convolution algorithm; automatic is best but for measurements and tests.
  ConvAlgorithm conv = ConvAlgorithm::automatic;
  /// Multiply-adds a convolution must give each thread before its work is spread over more than
  /// one: with less, handing work to another core, and its input there, costs more than the
  /// thread saves (LeNet's convolutions at batch 1, ~0.3M each, ran 1.6-1.8x slower on two threads
  /// than on one). 0 spreads every convolution over all the threads.
  std::int64_t conv_macs_per_thread = std::int64_t{1} << 20;
};

/// What a kernel takes from the CPU context's Memory when it is prepared, planned ahead of time:
/// upper bounds, for any instruction set the build may run with. `state` counts the pieces its state keeps (as a
/// MemoryBlock hands them out: see block_piece); `scratch` and `workspace` are what it reserves
/// per worker, which all kernels share: the largest counts.
struct KernelMemory {
  std::size_t state = 0;
  std::size_t scratch = 0;
  std::size_t workspace = 0;
  constexpr KernelMemory& operator+=(const KernelMemory& other) {
    state += other.state;
    scratch = std::max(scratch, other.scratch);
    workspace = std::max(workspace, other.workspace);
    return *this;
  }
};

/// The bytes a MemoryBlock takes for a piece of `bytes`: each piece starts 64-byte aligned.
constexpr std::size_t block_piece(std::size_t bytes) {
  return ((bytes == 0 ? 1 : bytes) + cpu::Memory::alignment - 1) / cpu::Memory::alignment * cpu::Memory::alignment;
}

class CpuContext {
 public:
  /// The thread pool, kernel scratch and GEMM workspaces come from `memory`, as do the kernels'
  /// states when they are prepared (packed weights, per-layer constants): see cpu::Memory.
  explicit CpuContext(CpuOptions options = {}, cpu::Memory& memory = cpu::heap_memory())
      : options_(options), memory_(&memory), pool_(make_pool(options.threads == 0 ? 1 : options.threads, memory)) {}
  cpu::ThreadPool& pool() { return *pool_; }
  std::size_t threads() const { return pool_ ? pool_->size() : 0; }
  const CpuOptions& options() const { return options_; }
  /// Where the backend's long-lived buffers come from.
  cpu::Memory& memory() const { return *memory_; }
  /// False when the thread pool itself could not be allocated: nothing can run.
  bool ok() const { return pool_ != nullptr; }

  /// Copies a model input into the model (LoadedModel::forward), cut into one contiguous range per
  /// thread as the steps after it cut their work (images, then rows), so that each thread finds its
  /// part of the input in its own cache rather than in the copying thread's. Each range is 32 KiB
  /// at least: a smaller input is copied by fewer threads, or by this one alone.
  void copy_input(void* dst, const void* src, std::size_t bytes) {
    constexpr std::size_t kMinBytesPerThread = std::size_t{32} << 10;
    const std::size_t parts = std::min(threads(), bytes / kMinBytesPerThread);
    if (parts <= 1) {
      if (bytes != 0) std::memcpy(dst, src, bytes);
      return;
    }
    pool_->parallel_for(parts, [&](std::size_t part) {
      const std::size_t begin = bytes * part / parts, end = bytes * (part + 1) / parts;
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
    });
  }

  /// Grows every worker's kernel scratch to at least `bytes` (64-byte aligned, never shrunk); false
  /// when that cannot be allocated. Kernels call it when prepared, so forward allocates nothing.
  /// It is not the pool's workspace, which the GEMM uses: a task can fill its scratch (a
  /// convolution's im2col columns) and then run a GEMM on it. Kernels run one at a time, so they
  /// all share it. While reservations are deferred it only records the size.
  bool reserve_scratch(std::size_t bytes) {
    if (bytes <= scratch_bytes_) return true;
    scratch_wanted_ = std::max(scratch_wanted_, bytes);
    if (deferred_) return true;
    if (!pool_) return false;
    cpu::MemoryArray<Scratch> grown(*memory_, threads());
    if (!grown.ok()) return false;
    for (Scratch& s : grown) {
      s = Scratch(*memory_, (bytes + sizeof(float) - 1) / sizeof(float));
      if (!s.ok()) return false;
    }
    scratch_ = std::move(grown);
    scratch_bytes_ = bytes;
    return true;
  }
  /// Grows every worker's pool workspace (the GEMM's scratch) to `bytes`, so that a GEMM run later
  /// on any worker finds it allocated: a kernel calls it when prepared, with
  /// cpu::gemm_workspace_bytes of its GEMMs. Call it only between parallel_for calls. While
  /// reservations are deferred it only records the size.
  bool reserve_gemm_workspace(std::size_t bytes) {
    workspace_wanted_ = std::max(workspace_wanted_, bytes);
    if (deferred_) return true;
    if (!pool_) return false;
    for (std::size_t w = 0; w < threads(); ++w) {
      if (bytes != 0 && pool_->workspace(w, bytes) == nullptr) return false;
    }
    return true;
  }
  /// From now on reserve_scratch and reserve_gemm_workspace only record the largest size asked
  /// for; commit_reservations allocates them, once. A loader that plans its memory (a typed model
  /// on a MemoryBlock) prepares every kernel in between, so that nothing is allocated twice.
  void defer_reservations() { deferred_ = true; }
  bool commit_reservations() {
    deferred_ = false;
    return reserve_scratch(scratch_wanted_) && reserve_gemm_workspace(workspace_wanted_);
  }

  /// The most a one-thread context on a MemoryBlock takes from it, its kernels (together
  /// `kernels`) prepared with reservations deferred: its pool, their states, one scratch and one
  /// workspace.
  static constexpr std::size_t block_bytes(const KernelMemory& kernels) {
    std::size_t bytes = block_piece(sizeof(cpu::ThreadPool)) + kernels.state;
    if (kernels.scratch != 0) {
      bytes += block_piece(sizeof(Scratch)) +
               block_piece((kernels.scratch + sizeof(float) - 1) / sizeof(float) * sizeof(float));
    }
    if (kernels.workspace != 0) bytes += block_piece(cpu::ThreadPool::workspace_size(kernels.workspace));
    return bytes;
  }

  /// The phase the next kernels run in (see RunPhase); inference models stay in eval.
  const RunPhase& phase() const { return phase_; }
  void set_phase(const RunPhase& phase) { phase_ = phase; }

  /// Worker `worker`'s scratch (reserve_scratch bytes; nullptr before any reservation).
  float* scratch(std::size_t worker) const {
    return worker < scratch_.size() ? const_cast<float*>(scratch_[worker].data()) : nullptr;
  }
  /// The same, as elements of T (the block is 64-byte aligned, so suits any of them).
  template <CpuReal T>
  T* scratch_as(std::size_t worker) const {
    return reinterpret_cast<T*>(scratch(worker));
  }

 private:
  // The pool lives in a piece of the context's memory, so that the context moves.
  struct PoolDelete {
    cpu::Memory* memory;
    void operator()(cpu::ThreadPool* pool) const {
      pool->~ThreadPool();
      memory->release(pool);
    }
  };
  using PoolPtr = std::unique_ptr<cpu::ThreadPool, PoolDelete>;
  static PoolPtr make_pool(std::size_t threads, cpu::Memory& memory) {
    void* piece = memory.allocate(sizeof(cpu::ThreadPool));
    if (piece == nullptr) return PoolPtr(nullptr, PoolDelete{&memory});
    return PoolPtr(::new (piece) cpu::ThreadPool(threads, memory), PoolDelete{&memory});
  }
  using Scratch = cpu::MemoryArray<float>;

  CpuOptions options_;
  cpu::Memory* memory_;
  PoolPtr pool_;                       // not movable itself; the context is
  cpu::MemoryArray<Scratch> scratch_;  // one block per worker
  std::size_t scratch_bytes_ = 0;
  std::size_t scratch_wanted_ = 0;  // the largest reservations asked for
  std::size_t workspace_wanted_ = 0;
  bool deferred_ = false;
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
