// teeny.cuda:context — the CUDA backend of a LoadedModel: one device and one stream, device
// memory for the plan's arena and parameters, every op's launches prepared once at load, and
// CUDA graph capture and replay.
//
//   auto cuda = teeny::cuda::CudaContext::create({.device = 0});
//   auto model = LoadedModel<CudaContext, standard_ops<float>>::load(graph, lowered, std::move(*cuda), dims);
//   (load_cuda, in :cuda_model, does both.)
//
// Kernels run in order on the context's stream; forward returns once they are queued, and
// copy_output waits for them. A launch the driver refuses is kept and returned by forward.
module;
#include "cuda/blas.hpp"
#include "cuda/dnn.hpp"
#include "cuda/params.hpp"
#include "cuda/runtime.hpp"
export module teeny.cuda:context;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :device;
import :launch;
import :blas;
import :dnn;

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

#if TEENY_HAS_CUDA
inline void destroy_graph(void* graph) noexcept { (void)cuda_kernels::graph_destroy(graph); }
inline void destroy_graph_executable(void* executable) noexcept {
  (void)cuda_kernels::graph_executable_destroy(executable);
}
#else
inline void destroy_graph(void* /*graph*/) noexcept {}
inline void destroy_graph_executable(void* /*executable*/) noexcept {}
#endif

/// A captured CUDA graph and its executable form, owned by one object (the executable released
/// first: members go in reverse order).
class CudaGraph {
 private:
  friend class CudaContext;
  Owned<destroy_graph> graph_;
  Owned<destroy_graph_executable> executable_;
};

struct CudaOptions {
  /// Which CUDA device runs the model (device_count() says how many there are).
  int device = 0;
  /// Linear and MatMul through cuBLASLt where it loads (tensor cores for f16 and bf16), else, or
  /// when off, through teeny's own GEMM kernels. CudaContext::gemm_engine() says which ran.
  bool cublas = true;
  /// Convolutions through cuDNN where it loads and supports them (unpooled ones; tensor cores for
  /// f16 and bf16), else, or when off, through teeny's own convolution kernel.
  /// CudaContext::conv_engine() says which.
  bool cudnn = true;
  /// Lets cuBLASLt and cuDNN compute f32 GEMMs and convolutions with TF32 tensor cores (10-bit
  /// mantissas: about 1e-3 relative error), PyTorch's torch.backends.cuda.matmul.allow_tf32 and
  /// torch.backends.cudnn.allow_tf32 together. Off by default (PyTorch's default for matmul).
  bool allow_tf32 = false;
};

/// The CUDA backend's state: its device and the stream every kernel and copy of the model is
/// queued on. Satisfies LoadedModel's DeviceMemoryBackend (and DeviceTrainingBackend), GraphBackend
/// and ReportsRunErrors.
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
    auto phase = DeviceBuffer::allocate(sizeof(cuda_kernels::DevicePhase));
    if (!phase) return std::move(phase).error().context(what);
    CudaContext context;
    context.options_ = options;
    context.device_ = options.device;
    context.stream_ = std::move(*stream);
    context.phase_ = std::move(*phase);
    context.set_phase(RunPhase{});
    if (auto set = context.take_error(); !set) return std::move(set).error().context(what);
    return context;
#else
    return not_compiled_in(cat("selecting ", what));
#endif
  }

  int device() const { return device_; }
  const CudaOptions& options() const { return options_; }
  const Stream& stream() const { return stream_; }

  /// What runs Linear and MatMul: "cuBLASLt", or "teeny's GEMM kernels" and why (cuBLASLt turned
  /// off, or not loaded: its error). Decided when the first such op is prepared.
  const std::string& gemm_engine() const { return gemm_engine_; }

  /// The context's cuBLASLt handle and its workspace, made on first use; null (and gemm_engine()
  /// saying why) where cuBLASLt is off or cannot be used.
  void* blas() {
    if (blas_tried_) return blas_.get();
    blas_tried_ = true;
    if (!options_.cublas) {
      gemm_engine_ = "teeny's GEMM kernels (CudaOptions::cublas is off)";
      return nullptr;
    }
    auto handle = BlasHandle::create();
    auto workspace = handle ? DeviceBuffer::allocate(kBlasWorkspace) : Result<DeviceBuffer>(handle.error());
    if (!workspace) {
      gemm_engine_ = cat("teeny's GEMM kernels (", workspace.error().to_string(), ")");
      return nullptr;
    }
    blas_ = std::move(*handle);
    blas_workspace_ = std::move(*workspace);
    gemm_engine_ = "cuBLASLt";
    return blas_.get();
  }
  /// Queues a planned GEMM on the stream; a failure is kept (take_error), as a launch's is.
  void run_gemm(const GemmLaunch& gemm) {
#if TEENY_HAS_CUDA
    if (const int status = cuda_kernels::gemm_run(gemm.plan.get(), blas_.get(), gemm.a, gemm.b, gemm.bias, gemm.d,
                                                  blas_workspace_.data(), kBlasWorkspace, stream_.handle())) {
      keep(blas_error(status, cat("running the ", gemm.where)));
    }
#else
    keep(not_compiled_in(gemm.where));
#endif
  }
  /// cuBLASLt's workspace (the heuristic picks algorithms that fit it): 32 MiB, as PyTorch gives
  /// cuBLAS on Hopper.
  static constexpr std::size_t kBlasWorkspace = std::size_t{32} << 20;

  /// What runs the convolutions: "cuDNN", or "teeny's convolution kernel" and why (cuDNN turned
  /// off, or not loaded: its error). Decided when the first convolution is prepared; a pooled
  /// convolution, or one cuDNN has no algorithm for, runs teeny's kernel either way.
  const std::string& conv_engine() const { return conv_engine_; }

  /// The context's cuDNN handle and its workspace, made on first use; null (and conv_engine()
  /// saying why) where cuDNN is off or cannot be used.
  void* dnn() {
    if (dnn_tried_) return dnn_.get();
    dnn_tried_ = true;
    if (!options_.cudnn) {
      conv_engine_ = "teeny's convolution kernel (CudaOptions::cudnn is off)";
      return nullptr;
    }
    auto handle = DnnHandle::create();
    auto workspace = handle ? DeviceBuffer::allocate(kDnnWorkspace) : Result<DeviceBuffer>(handle.error());
    if (!workspace) {
      conv_engine_ = cat("teeny's convolution kernel (", workspace.error().to_string(), ")");
      return nullptr;
    }
    dnn_ = std::move(*handle);
    dnn_workspace_ = std::move(*workspace);
    conv_engine_ = "cuDNN";
    return dnn_.get();
  }
  /// Queues a planned cuDNN convolution on the stream; a failure is kept (take_error).
  void run_conv(const ConvLaunch& conv) {
#if TEENY_HAS_CUDA
    if (const int status = cuda_kernels::conv_run(conv.plan.get(), dnn_.get(), conv.x, conv.filter, conv.y,
                                                  dnn_workspace_.data(), kDnnWorkspace, stream_.handle())) {
      keep(dnn_error(status, cat("running the ", conv.where)));
    }
#else
    keep(not_compiled_in(conv.where));
#endif
  }
  /// cuDNN's workspace, fixed so that a captured graph's pointer to it stays valid: algorithms that
  /// need more are passed over.
  static constexpr std::size_t kDnnWorkspace = std::size_t{64} << 20;

  /// The phase the kernels queued from now on run in (batch norm's batch statistics and dropout's
  /// masks in training), kept in device memory that those kernels read, so that a replayed graph
  /// runs in the phase of its replay. A failed copy is kept, as a failed launch is (take_error).
  void set_phase(const RunPhase& phase) {
    phase_host_ = {phase.seed, phase.step, phase.training ? 1u : 0u};
    keep(upload(phase_.data(), &phase_host_, sizeof phase_host_).context("setting the run phase"));
  }
  /// Where kernels read the phase (device memory).
  const cuda_kernels::DevicePhase* phase() const {
    return static_cast<const cuda_kernels::DevicePhase*>(phase_.data());
  }

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
  /// Queues a copy between two places in device memory on the stream (DeviceCopyBackend: inputs
  /// already on the device).
  Result<void> copy_on_device(void* to, const void* from, std::size_t bytes) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::copy_on_device_async(to, from, bytes, stream_.handle())) {
      return cuda_error(code, cat("copying ", bytes, " bytes within CUDA device ", device_));
    }
    return ok();
#else
    (void)to;
    (void)from;
    return not_compiled_in(cat("copying ", bytes, " bytes within a CUDA device"));
#endif
  }
  /// Zeroes device memory (DeviceTrainingBackend: gradient buffers), queued on the stream.
  Result<void> zero(void* to, std::size_t bytes) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::zero_async(to, bytes, stream_.handle())) {
      return cuda_error(code, cat("zeroing ", bytes, " bytes on CUDA device ", device_));
    }
    return ok();
#else
    (void)to;
    return not_compiled_in(cat("zeroing ", bytes, " bytes on a CUDA device"));
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
    if (const int code = cuda_kernels::stream_end_capture(stream_.handle(), graph.graph_.slot())) {
      return cuda_error(code, "ending a CUDA graph capture");
    }
    if (const int code = cuda_kernels::graph_instantiate(graph.executable_.slot(), graph.graph_.get())) {
      return cuda_error(code, "instantiating a captured CUDA graph");
    }
    return graph;
#else
    return not_compiled_in("ending a CUDA graph capture");
#endif
  }
  Result<void> replay(Graph& graph) {
#if TEENY_HAS_CUDA
    if (const int code = cuda_kernels::graph_launch(graph.executable_.get(), stream_.handle())) {
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
  CudaOptions options_;
  int device_ = 0;
  Stream stream_;
  BlasHandle blas_;
  DeviceBuffer blas_workspace_;
  bool blas_tried_ = false;
  std::string gemm_engine_ = "not decided yet (no Linear or MatMul prepared)";
  DnnHandle dnn_;
  DeviceBuffer dnn_workspace_;
  bool dnn_tried_ = false;
  std::string conv_engine_ = "not decided yet (no convolution prepared)";
  DeviceBuffer phase_;
  cuda_kernels::DevicePhase phase_host_{};
  std::optional<Error> error_;
};

/// An op's launch, prepared at load (entry point, checked geometry, packed parameters).
template <CudaOp Op>
Result<PreparedLaunch<typename KernelParams<Op>::type>> prepare_kernel(const Op& op, const typename Op::Args& args,
                                                                       CudaContext& cuda, const LaunchSite& site) {
  return prepare_launch(op, args, site, cuda.phase());
}
template <CudaOp Op>
void run_kernel(const Op& /*op*/, const typename Op::Args& /*args*/,
                PreparedLaunch<typename KernelParams<Op>::type>& prepared, CudaContext& cuda) {
  cuda.keep(run_launch(prepared, cuda.stream().handle()));
}

/// A Linear's or MatMul's launch: one cuBLASLt GEMM where it can run it, else teeny's kernel.
template <class List>
struct GemmOrKernel {
  std::variant<PreparedLaunch<List>, GemmLaunch> run;
};

namespace context_detail {
template <class Op>
Result<GemmOrKernel<typename KernelParams<Op>::type>> prepare_gemm(const Op& op, const typename Op::Args& args,
                                                                   std::optional<GemmOperands> gemm, CudaContext& cuda,
                                                                   const LaunchSite& site) {
  if (gemm && cuda.blas() != nullptr) {
    auto planned = plan_gemm(op, *gemm, cuda.blas(), CudaContext::kBlasWorkspace, site);
    if (planned) return GemmOrKernel<typename KernelParams<Op>::type>{std::move(*planned)};
    // No algorithm for this shape or type: teeny's kernel runs it. Any other failure is an error.
    if (planned.error().code() != Errc::unsupported) return std::move(planned).error();
  }
  auto launch = prepare_launch(op, args, site, cuda.phase());
  if (!launch) return std::move(launch).error();
  return GemmOrKernel<typename KernelParams<Op>::type>{std::move(*launch)};
}
template <class List>
void run_gemm_or_kernel(GemmOrKernel<List>& state, CudaContext& cuda) {
  if (auto* gemm = std::get_if<GemmLaunch>(&state.run)) {
    cuda.run_gemm(*gemm);
  } else {
    cuda.keep(run_launch(std::get<PreparedLaunch<List>>(state.run), cuda.stream().handle()));
  }
}
}  // namespace context_detail

template <FloatElement T>
Result<GemmOrKernel<cuda_kernels::LinearParamList<T>>> prepare_kernel(const linear_op<T>& op, const LinearArgs<T>& args,
                                                                      CudaContext& cuda, const LaunchSite& site) {
  return context_detail::prepare_gemm(op, args, linear_gemm(args, cuda.options().allow_tf32), cuda, site);
}
template <FloatElement T>
void run_kernel(const linear_op<T>& /*op*/, const LinearArgs<T>& /*args*/,
                GemmOrKernel<cuda_kernels::LinearParamList<T>>& state, CudaContext& cuda) {
  context_detail::run_gemm_or_kernel(state, cuda);
}
template <FloatElement T>
Result<GemmOrKernel<cuda_kernels::MatMulParamList<T>>> prepare_kernel(const matmul_op<T>& op, const MatMulArgs<T>& args,
                                                                      CudaContext& cuda, const LaunchSite& site) {
  return context_detail::prepare_gemm(op, args, matmul_gemm(args, cuda.options().allow_tf32), cuda, site);
}
template <FloatElement T>
void run_kernel(const matmul_op<T>& /*op*/, const MatMulArgs<T>& /*args*/,
                GemmOrKernel<cuda_kernels::MatMulParamList<T>>& state, CudaContext& cuda) {
  context_detail::run_gemm_or_kernel(state, cuda);
}

/// A convolution's launch: cuDNN's convolution then, where something was folded into it, teeny's
/// teeny_conv_finish over the output in place; or teeny's whole convolution kernel.
template <class List>
struct DnnConv {
  ConvLaunch conv;
  std::optional<PreparedLaunch<List>> finish;
};
template <class List>
struct ConvOrKernel {
  std::variant<PreparedLaunch<List>, DnnConv<List>> run;
};

template <FloatElement T>
Result<ConvOrKernel<cuda_kernels::ConvParamList<T>>> prepare_kernel(const conv_op<T>& op, const ConvArgs<T>& args,
                                                                    CudaContext& cuda, const LaunchSite& site) {
  using List = cuda_kernels::ConvParamList<T>;
  const std::optional<ConvOperands> operands = conv_dnn(args, cuda.options().allow_tf32);
  if (operands && cuda.dnn() != nullptr) {
    auto planned = plan_conv(op, *operands, cuda.dnn(), CudaContext::kDnnWorkspace, site);
    if (planned) {
      DnnConv<List> dnn{std::move(*planned), std::nullopt};
      if (operands->needs_finish) {
        // The same parameters as teeny_conv's, so the same packing; the site's geometry covers y.
        auto finish =
            launch_detail::prepare<List>(op, cat("teeny_conv_finish_", name(dtype_of<T>)), args, site, cuda.phase());
        if (!finish) return std::move(finish).error();
        dnn.finish.emplace(std::move(*finish));
      }
      return ConvOrKernel<List>{std::move(dnn)};
    }
    // Not supported by cuDNN, or no algorithm for it: teeny's kernel runs it. Any other failure is
    // an error.
    if (planned.error().code() != Errc::unsupported) return std::move(planned).error();
  }
  auto launch = prepare_launch(op, args, site, cuda.phase());
  if (!launch) return std::move(launch).error();
  return ConvOrKernel<List>{std::move(*launch)};
}
template <FloatElement T>
void run_kernel(const conv_op<T>& /*op*/, const ConvArgs<T>& /*args*/,
                ConvOrKernel<cuda_kernels::ConvParamList<T>>& state, CudaContext& cuda) {
  using List = cuda_kernels::ConvParamList<T>;
  if (auto* dnn = std::get_if<DnnConv<List>>(&state.run)) {
    cuda.run_conv(dnn->conv);
    if (dnn->finish) cuda.keep(run_launch(*dnn->finish, cuda.stream().handle()));
  } else {
    cuda.keep(run_launch(std::get<PreparedLaunch<List>>(state.run), cuda.stream().handle()));
  }
}

#if TEENY_TRAINING
/// An op's backward launch, prepared at load as its forward ones are.
template <CudaBackwardOp Op>
Result<PreparedLaunch<typename KernelParams<Op>::backward>> prepare_backward_kernel(
    const Op& op, const typename Op::BackwardArgs& args, CudaContext& cuda, const LaunchSite& site) {
  return prepare_backward_launch(op, args, site, cuda.phase());
}
template <CudaBackwardOp Op>
void run_backward_kernel(const Op& /*op*/, const typename Op::BackwardArgs& /*args*/,
                         PreparedLaunch<typename KernelParams<Op>::backward>& prepared, CudaContext& cuda) {
  cuda.keep(run_launch(prepared, cuda.stream().handle()));
}
#endif

}  // namespace teeny::cuda
