// teeny.cuda:blas — Linear and MatMul through cuBLASLt (kernels/cuda/blas.hpp): which of their
// launches it can run (contiguous matrices, batches of one stride, an epilogue it has), the GEMM
// each becomes, and a planned GEMM as a value. cuBLASLt is loaded at run time: where it is missing
// the CUDA backend runs its own GEMM kernels and says why (CudaContext::gemm_engine()).
module;
#include "cuda/blas.hpp"
export module teeny.cuda:blas;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :device;

export namespace teeny::cuda {

/// A cuBLASLt failure as a teeny error: what was being done, then cuBLAS's name and words.
/// Errc::unsupported where cuBLASLt is missing or has no algorithm for the GEMM (teeny's kernels
/// then run it), Errc::device for everything else.
inline Error blas_error(int status, std::string_view what) {
  constexpr int not_supported = 15;  // CUBLAS_STATUS_NOT_SUPPORTED
  const bool unsupported =
      status == cuda_kernels::blas_not_loaded || status == cuda_kernels::blas_no_algorithm || status == not_supported;
  return Error(unsupported ? Errc::unsupported : Errc::device,
               cat(what, ": ", cuda_kernels::blas_status_name(status), ": ", cuda_kernels::blas_status_string(status)));
}

/// Whether cuBLASLt is there to use: loads it once per process; the error says what is missing.
inline Result<void> load_blas() {
#if TEENY_HAS_CUDA
  const char* why = nullptr;
  if (const int status = cuda_kernels::blas_load(why); status != 0) {
    return fail(Errc::unsupported,
                "cuBLASLt (libcublasLt.so.13) could not be loaded: ", why != nullptr ? why : "no reason given");
  }
  return ok();
#else
  return not_compiled_in("loading cuBLASLt");
#endif
}

#if TEENY_HAS_CUDA
inline void destroy_blas_handle(void* handle) noexcept { cuda_kernels::blas_destroy(handle); }
inline void destroy_gemm_plan(void* plan) noexcept { cuda_kernels::gemm_destroy(plan); }
#else
inline void destroy_blas_handle(void* /*handle*/) noexcept {}
inline void destroy_gemm_plan(void* /*plan*/) noexcept {}
#endif

/// A cuBLASLt handle, owned.
class BlasHandle {
 public:
  /// A handle on the current device, cuBLASLt loaded first.
  static Result<BlasHandle> create() {
    if (auto loaded = load_blas(); !loaded) return std::move(loaded).error();
#if TEENY_HAS_CUDA
    BlasHandle h;
    if (const int status = cuda_kernels::blas_create(h.handle_.slot())) {
      return blas_error(status, "creating a cuBLASLt handle");
    }
    return h;
#else
    return not_compiled_in("creating a cuBLASLt handle");
#endif
  }
  void* get() const { return handle_.get(); }

 private:
  Owned<destroy_blas_handle> handle_;
};

/// One GEMM of a launch, planned at load (descriptors, algorithm) with the device pointers it
/// reads and writes: run() only queues it.
struct GemmLaunch {
  Owned<destroy_gemm_plan> plan;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* d = nullptr;
  std::string where;  // "cuBLASLt GEMM of node 'fc1' (op linear, dtype f16)"
};

/// A GEMM and the device memory it reads and writes: what linear_gemm and matmul_gemm make of a
/// launch that cuBLASLt can run.
struct GemmOperands {
  cuda_kernels::GemmDesc desc;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* d = nullptr;
};

template <class T>
constexpr cuda_kernels::BlasType blas_type() {
  if constexpr (std::same_as<T, double>) {
    return cuda_kernels::BlasType::f64;
  } else if constexpr (std::same_as<T, f16>) {
    return cuda_kernels::BlasType::f16;
  } else if constexpr (std::same_as<T, bf16>) {
    return cuda_kernels::BlasType::bf16;
  } else {
    return cuda_kernels::BlasType::f32;
  }
}

namespace blas_detail {
// cuBLASLt is planned for 16-byte aligned operands (kernels/cuda/blas.hpp); a view at an odd
// offset (a slice) stays with teeny's kernel.
inline bool aligned(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The one stride (in elements) between consecutive matrices of `t`'s batch dims (all but the last
// two), when there is one: 0 when every batch reads the same matrix, else the matrix size when the
// batches are laid out one after another.
template <class T>
std::optional<std::int64_t> batch_stride(const TensorView<T>& t) {
  const std::size_t r = t.rank();
  const std::int64_t matrix = t.shape[r - 2] * t.shape[r - 1];
  bool all_zero = true;
  bool packed = true;
  std::int64_t expected = matrix;
  for (std::size_t d = r - 2; d-- > 0;) {
    if (t.shape[d] == 1) continue;
    all_zero = all_zero && t.strides[d] == 0;
    packed = packed && t.strides[d] == expected;
    expected *= t.shape[d];
  }
  if (all_zero) return 0;
  if (packed) return matrix;
  return std::nullopt;
}
// Whether the last two dims of `t` are a contiguous row-major matrix.
template <class T>
bool matrix_contiguous(const TensorView<T>& t) {
  const std::size_t r = t.rank();
  return t.strides[r - 1] == 1 && (t.shape[r - 2] == 1 || t.strides[r - 2] == t.shape[r - 1]);
}
}  // namespace blas_detail

/// A Linear's y = act(x W^T + b) as a GEMM: row-major D [rows, out] = x [rows, in] times W stored
/// [out, in] (transposed), the bias one per column of D. None unless x, W, b and y are contiguous
/// and the activation is none or ReLU (cuBLASLt's epilogues; others stay with teeny's kernel).
template <FloatElement T>
std::optional<GemmOperands> linear_gemm(const LinearArgs<T>& args, bool tf32) {
  const bool relu = args.epilogue.active && args.epilogue.fn == UnaryFn::relu;
  if (args.epilogue.active && !relu) return std::nullopt;
  if (args.x.rank() != 2 || args.y.rank() != 2 || !args.x.is_contiguous() || !args.weight.is_contiguous() ||
      !args.y.is_contiguous() || (args.bias.data != nullptr && !args.bias.is_contiguous())) {
    return std::nullopt;
  }
  if (args.y.numel() == 0 || args.x.shape[1] == 0) return std::nullopt;  // nothing for cuBLASLt to do
  if (!blas_detail::aligned(args.x.data) || !blas_detail::aligned(args.weight.data) ||
      !blas_detail::aligned(args.bias.data) || !blas_detail::aligned(args.y.data)) {
    return std::nullopt;
  }
  GemmOperands g;
  g.desc.type = blas_type<T>();
  g.desc.tf32 = tf32;
  g.desc.m = args.x.shape[0];
  g.desc.n = args.weight.shape[0];
  g.desc.k = args.x.shape[1];
  g.desc.transpose_b = true;
  const bool bias = args.bias.data != nullptr;
  using E = cuda_kernels::BlasEpilogue;
  g.desc.epilogue = relu ? (bias ? E::bias_relu : E::relu) : (bias ? E::bias : E::none);
  g.a = args.x.data;
  g.b = args.weight.data;
  g.bias = args.bias.data;
  g.d = args.y.data;
  return g;
}

/// y = a b over broadcast batches, when each operand's batches are one stride apart (0 where
/// broadcast) and every matrix is contiguous: one strided-batched GEMM.
template <FloatElement T>
std::optional<GemmOperands> matmul_gemm(const MatMulArgs<T>& args, bool tf32) {
  const std::size_t r = args.y.rank();
  if (r < 2 || args.a.rank() != r || args.b.rank() != r || !args.y.is_contiguous()) return std::nullopt;
  if (!blas_detail::matrix_contiguous(args.a) || !blas_detail::matrix_contiguous(args.b)) return std::nullopt;
  const auto stride_a = blas_detail::batch_stride(args.a);
  const auto stride_b = blas_detail::batch_stride(args.b);
  if (!stride_a || !stride_b) return std::nullopt;
  if (!blas_detail::aligned(args.a.data) || !blas_detail::aligned(args.b.data) || !blas_detail::aligned(args.y.data)) {
    return std::nullopt;
  }
  GemmOperands g;
  g.desc.type = blas_type<T>();
  g.desc.tf32 = tf32;
  g.desc.m = args.y.shape[r - 2];
  g.desc.n = args.y.shape[r - 1];
  g.desc.k = args.a.shape[r - 1];
  if (args.y.numel() == 0 || g.desc.k == 0) return std::nullopt;
  g.desc.batch = args.y.numel() / (g.desc.m * g.desc.n);
  g.desc.stride_a = *stride_a;
  g.desc.stride_b = *stride_b;
  g.desc.stride_d = g.desc.m * g.desc.n;
  // Every batch's matrices 16-byte aligned too, as the first ones.
  for (const std::int64_t stride : {g.desc.stride_a, g.desc.stride_b, g.desc.stride_d}) {
    if (g.desc.batch > 1 && stride * static_cast<std::int64_t>(sizeof(T)) % 16 != 0) return std::nullopt;
  }
  g.a = args.a.data;
  g.b = args.b.data;
  g.d = args.y.data;
  return g;
}

/// Plans `g` on `handle` for `site`'s launch of `op` (what an error names).
template <class Op>
Result<GemmLaunch> plan_gemm(const Op& op, const GemmOperands& g, void* handle, std::size_t workspace_bytes,
                             const LaunchSite& site) {
  GemmLaunch launch;
  launch.where = cat("cuBLASLt GEMM of node '", site.node, "' (op ", op.name(), ", dtype ", name(op.output_dtype()),
                     ", ", g.desc.batch, " x [", g.desc.m, ", ", g.desc.k, "] x [", g.desc.k, ", ", g.desc.n, "])");
#if TEENY_HAS_CUDA
  if (const int status = cuda_kernels::gemm_plan(launch.plan.slot(), handle, g.desc, workspace_bytes)) {
    return blas_error(status, cat("planning the ", launch.where));
  }
  launch.a = g.a;
  launch.b = g.b;
  launch.bias = g.bias;
  launch.d = g.d;
  return launch;
#else
  (void)handle;
  (void)workspace_bytes;
  return not_compiled_in(launch.where);
#endif
}

}  // namespace teeny::cuda
