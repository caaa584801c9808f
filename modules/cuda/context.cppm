// teeny.cuda:context — the CUDA backend of a LoadedModel: one device and one stream, device
// memory for the plan's arena and parameters, every op's launches prepared once at load, and
// CUDA graph capture and replay.
//
//   auto cuda = teeny::cuda::CudaContext::create({.device = 0});
//   auto model = LoadedModel<CudaContext, standard_ops<float>>::load(graph, lowered, std::move(*cuda), dims);
//   (load_cuda, in :model, does both.)
//
// Kernels run in order on the context's stream; forward returns once they are queued, and
// copy_output waits for them. A launch the driver refuses is kept and returned by forward.
module;
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "cuda/runtime.hpp"
export module teeny.cuda:context;
import teeny.core;
import teeny.model;
import teeny.ops;
import :device;
import :launch;

export namespace teeny::cuda {

/// Host memory the GPU copies from and to directly (page-locked, cudaMallocHost): inputs staged
/// here upload without an extra copy, and asynchronously.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~PinnedBuffer() { release(); }

  static Result<PinnedBuffer> allocate(std::size_t bytes) {
#if TEENY_HAS_CUDA
    PinnedBuffer buffer;
    if (bytes == 0) return buffer;
    if (const int code = cuda_kernels::pinned_allocate(buffer.data_, bytes)) {
      return cuda_error(code, cat("allocating ", bytes, " bytes of pinned host memory"));
    }
    buffer.bytes_ = bytes;
    return buffer;
#else
    return not_compiled_in(cat("allocating ", bytes, " bytes of pinned host memory"));
#endif
  }

  std::span<std::byte> bytes() { return {static_cast<std::byte*>(data_), bytes_}; }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), bytes_}; }
  void* data() const { return data_; }

 private:
  void release() {
#if TEENY_HAS_CUDA
    if (data_ != nullptr) (void)cuda_kernels::pinned_free(data_);
#endif
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A captured CUDA graph and its executable form, owned by one object.
class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  CudaGraph(CudaGraph&& other) noexcept
      : graph_(std::exchange(other.graph_, nullptr)), executable_(std::exchange(other.executable_, nullptr)) {}
  CudaGraph& operator=(CudaGraph&& other) noexcept {
    if (this != &other) {
      release();
      graph_ = std::exchange(other.graph_, nullptr);
      executable_ = std::exchange(other.executable_, nullptr);
    }
    return *this;
  }
  ~CudaGraph() { release(); }

 private:
  friend class CudaContext;
  void release() {
#if TEENY_HAS_CUDA
    if (executable_ != nullptr) (void)cuda_kernels::graph_executable_destroy(executable_);
    if (graph_ != nullptr) (void)cuda_kernels::graph_destroy(graph_);
#endif
    graph_ = nullptr;
    executable_ = nullptr;
  }
  void* graph_ = nullptr;
  void* executable_ = nullptr;
};

struct CudaOptions {
  /// Which CUDA device runs the model (device_count() says how many there are).
  int device = 0;
};

/// The CUDA backend's state: its device and the stream every kernel and copy of the model is
/// queued on. Satisfies LoadedModel's DeviceMemoryBackend, GraphBackend and ReportsRunErrors.
class CudaContext {
 public:
  /// A context on `options.device`, or why there is none (no GPU, no driver, no such device).
  static Result<CudaContext> create(CudaOptions options = {}) {
    const std::string what = cat("CUDA device ", options.device);
#if TEENY_HAS_CUDA
    int count = 0;
    if (const int code = cuda_kernels::device_count(count)) return cuda_error(code, cat("selecting ", what));
    if (options.device < 0 || options.device >= count) {
      return fail(Errc::not_found, "there is no ", what, ": this machine has ", count, " CUDA device(s)");
    }
    if (const int code = cuda_kernels::set_device(options.device)) return cuda_error(code, cat("selecting ", what));
    auto stream = Stream::create();
    if (!stream) return std::move(stream).error().context(what);
    CudaContext context;
    context.device_ = options.device;
    context.stream_ = std::move(*stream);
    return context;
#else
    return not_compiled_in(cat("selecting ", what));
#endif
  }

  int device() const { return device_; }
  const Stream& stream() const { return stream_; }

  // ---- DeviceMemoryBackend: the plan's memory ----
  using Memory = DeviceBuffer;
  Result<DeviceBuffer> allocate(std::size_t bytes) { return DeviceBuffer::allocate(bytes); }
  /// Queues a host-to-device copy on the stream. From pageable memory `from` may be reused as soon
  /// as this returns; from a PinnedBuffer only once the stream has run the copy.
  Result<void> upload(void* to, const void* from, std::size_t bytes) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::copy_to_device_async(to, from, bytes, stream_.handle())) {
      return cuda_error(code, cat("copying ", bytes, " bytes to CUDA device ", device_));
    }
    return ok();
#else
    (void)to;
    (void)from;
    return not_compiled_in(cat("copying ", bytes, " bytes to a CUDA device"));
#endif
  }
  /// Copies device memory to the host once the work queued before it has run (and reports a
  /// kernel's failure, which surfaces here).
  Result<void> download(void* to, const void* from, std::size_t bytes) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::copy_to_host_async(to, from, bytes, stream_.handle())) {
      return cuda_error(code, cat("copying ", bytes, " bytes from CUDA device ", device_));
    }
    return stream_.synchronize();
#else
    (void)to;
    (void)from;
    return not_compiled_in(cat("copying ", bytes, " bytes from a CUDA device"));
#endif
  }
  /// Waits for everything queued on the stream.
  Result<void> synchronize() const { return stream_.synchronize(); }

  // ---- GraphBackend: capture and replay ----
  using Graph = CudaGraph;
  Result<void> begin_capture() {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::stream_begin_capture(stream_.handle())) {
      return cuda_error(code, "starting a CUDA graph capture");
    }
    return ok();
#else
    return not_compiled_in("starting a CUDA graph capture");
#endif
  }
  Result<Graph> end_capture() {
#if TEENY_HAS_CUDA
    Graph graph;
    if (const int code = cuda_kernels::stream_end_capture(stream_.handle(), graph.graph_)) {
      return cuda_error(code, "ending a CUDA graph capture");
    }
    if (const int code = cuda_kernels::graph_instantiate(graph.executable_, graph.graph_)) {
      return cuda_error(code, "instantiating a captured CUDA graph");
    }
    return graph;
#else
    return not_compiled_in("ending a CUDA graph capture");
#endif
  }
  Result<void> replay(Graph& graph) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::graph_launch(graph.executable_, stream_.handle())) {
      return cuda_error(code, "replaying a CUDA graph");
    }
    return ok();
#else
    (void)graph;
    return not_compiled_in("replaying a CUDA graph");
#endif
  }

  // ---- ReportsRunErrors: run_kernel keeps its first failure here ----
  void keep(Result<void> status) {
    if (!status && !error_) error_ = std::move(status).error();
  }
  Result<void> take_error() {
    if (!error_) return ok();
    Error error = std::move(*error_);
    error_.reset();
    return error;
  }

 private:
  CudaContext() = default;
  int device_ = 0;
  Stream stream_;
  std::optional<Error> error_;
};

/// An op's launch, prepared at load (entry point, checked geometry, packed parameters).
template <CudaOp Op>
Result<PreparedLaunch<typename KernelParams<Op>::type>> prepare_kernel(const Op& op, const typename Op::Args& args,
                                                                       CudaContext& /*cuda*/, const LaunchSite& site) {
  return prepare_launch(op, args, site);
}
template <CudaOp Op>
void run_kernel(const Op& /*op*/, const typename Op::Args& /*args*/,
                PreparedLaunch<typename KernelParams<Op>::type>& prepared, CudaContext& cuda) {
  cuda.keep(run_launch(prepared, cuda.stream().handle()));
}

/// Dropout has no CUDA kernel yet (it is planned with training on the GPU); only a model lowered
/// for training runs one, and the CUDA backend loads inference models.
struct NoLaunch {};
template <FloatElement T>
Result<NoLaunch> prepare_kernel(const dropout_op<T>& /*op*/, const typename dropout_op<T>::Args& /*args*/,
                                CudaContext& /*cuda*/, const LaunchSite& site) {
  return fail(Errc::unsupported, "node '", site.node, "' (dropout): dropout on the GPU is planned, with training");
}
template <FloatElement T>
void run_kernel(const dropout_op<T>& /*op*/, const typename dropout_op<T>::Args& /*args*/, NoLaunch& /*state*/,
                CudaContext& /*cuda*/) {}

}  // namespace teeny::cuda
