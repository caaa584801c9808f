// teeny.cuda:dnn — convolutions through cuDNN (kernels/cuda/dnn.hpp): which conv launches it can
// run (unpooled, contiguous NCHW tensors, 16-byte aligned), the cuDNN convolution each becomes, and a
// planned one as a value. cuDNN computes the sums of products; what the lowering folded into the
// convolution (bias, BatchNorm, residual, activation) follows in teeny's teeny_conv_finish kernel.
// cuDNN is loaded at run time: where it is missing the CUDA backend runs its own convolution
// kernel and says why (CudaContext::conv_engine()).
module;
#include "cuda/dnn.hpp"
export module teeny.cuda:dnn;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :device;

export namespace teeny::cuda {

/// A cuDNN failure as a teeny error: what was being done, then cuDNN's name and words.
/// Errc::unsupported where cuDNN is missing (or a part of it: a sub-library that does not load or
/// match), has no algorithm, or does not support the convolution (teeny's kernel then runs it),
/// Errc::device for everything else.
inline Error dnn_error(int status, std::string_view what) {
  const bool not_supported = status >= 3000 && status < 4000;  // CUDNN_STATUS_NOT_SUPPORTED and its kinds
  // CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH and CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED
  const bool part_missing = status == 1002 || status == 1008;
  const bool unsupported = status == cuda_kernels::dnn_not_loaded || status == cuda_kernels::dnn_no_algorithm ||
                           not_supported || part_missing;
  return Error(unsupported ? Errc::unsupported : Errc::device,
               cat(what, ": ", cuda_kernels::dnn_status_name(status), ": ", cuda_kernels::dnn_status_string(status)));
}

/// Whether cuDNN is there to use: loads it once per process; the error says what is missing.
inline Result<void> load_dnn() {
#if TEENY_HAS_CUDA
  const char* why = nullptr;
  if (const int status = cuda_kernels::dnn_load(why); status != 0) {
    return fail(Errc::unsupported,
                "cuDNN (libcudnn.so.9) could not be loaded: ", why != nullptr ? why : "no reason given");
  }
  return ok();
#else
  return not_compiled_in("loading cuDNN");
#endif
}

#if TEENY_HAS_CUDA
inline void destroy_dnn_handle(void* handle) noexcept { cuda_kernels::dnn_destroy(handle); }
inline void destroy_conv_plan(void* plan) noexcept { cuda_kernels::conv_destroy(plan); }
#else
inline void destroy_dnn_handle(void* /*handle*/) noexcept {}
inline void destroy_conv_plan(void* /*plan*/) noexcept {}
#endif

/// A cuDNN handle, owned.
class DnnHandle {
 public:
  /// A handle on the current device, cuDNN loaded first.
  static Result<DnnHandle> create() {
    if (auto loaded = load_dnn(); !loaded) return std::move(loaded).error();
#if TEENY_HAS_CUDA
    DnnHandle h;
    if (const int status = cuda_kernels::dnn_create(h.handle_.slot())) {
      return dnn_error(status, "creating a cuDNN handle");
    }
    return h;
#else
    return not_compiled_in("creating a cuDNN handle");
#endif
  }
  void* get() const { return handle_.get(); }

 private:
  Owned<destroy_dnn_handle> handle_;
};

/// One cuDNN convolution of a launch, planned at load (descriptors, algorithm) with the device
/// pointers it reads and writes: run() only queues it.
struct ConvLaunch {
  /// cuDNN's name of the algorithm the plan runs.
  std::string_view algorithm() const {
#if TEENY_HAS_CUDA
    return cuda_kernels::conv_algorithm_name(plan.get());
#else
    return "none";
#endif
  }

  Owned<destroy_conv_plan> plan;
  const void* x = nullptr;
  const void* filter = nullptr;
  void* y = nullptr;
  std::string where;  // "cuDNN convolution of node 'layer1.0.conv1' (op conv, dtype f16, ...)"
};

/// A convolution and the device memory it reads and writes: what conv_dnn makes of a launch that
/// cuDNN can run, and whether teeny_conv_finish has anything left to do after it.
struct ConvOperands {
  cuda_kernels::ConvDesc desc;
  const void* x = nullptr;
  const void* filter = nullptr;
  void* y = nullptr;
  bool needs_finish = false;  // a bias, BatchNorm, residual or activation follows
};

template <class T>
constexpr cuda_kernels::DnnType dnn_type() {
  if constexpr (std::same_as<T, double>) {
    return cuda_kernels::DnnType::f64;
  } else if constexpr (std::same_as<T, f16>) {
    return cuda_kernels::DnnType::f16;
  } else if constexpr (std::same_as<T, bf16>) {
    return cuda_kernels::DnnType::bf16;
  } else {
    return cuda_kernels::DnnType::f32;
  }
}

/// A conv launch as a cuDNN convolution: none when its output is pooled (the pool reads the
/// activated values, which only teeny's kernel makes), a tensor is not contiguous or not 16-byte
/// aligned, or there is nothing to compute.
template <FloatElement T>
std::optional<ConvOperands> conv_dnn(const ConvArgs<T>& args, bool tf32) {
  if (args.pooled || args.x.rank() != 4 || args.weight.rank() != 4 || args.y.rank() != 4) return std::nullopt;
  if (!args.x.is_contiguous() || !args.weight.is_contiguous() || !args.y.is_contiguous()) return std::nullopt;
  if (args.residual.data != nullptr && !args.residual.is_contiguous()) return std::nullopt;
  if (args.y.numel() == 0 || args.x.numel() == 0 || args.weight.numel() == 0) return std::nullopt;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (!aligned(args.x.data) || !aligned(args.weight.data) || !aligned(args.y.data)) return std::nullopt;
  ConvOperands c;
  cuda_kernels::ConvDesc& d = c.desc;
  d.type = dnn_type<T>();
  d.tf32 = tf32;
  d.n = args.x.shape[0];
  d.c = args.x.shape[1];
  d.h = args.x.shape[2];
  d.w = args.x.shape[3];
  d.o = args.weight.shape[0];
  d.kernel_h = args.weight.shape[2];
  d.kernel_w = args.weight.shape[3];
  d.pad_h = args.window.pad_h;
  d.pad_w = args.window.pad_w;
  d.stride_h = args.window.stride_h;
  d.stride_w = args.window.stride_w;
  d.dilation_h = args.window.dilation_h;
  d.dilation_w = args.window.dilation_w;
  d.groups = args.groups;
  d.out_h = args.y.shape[2];
  d.out_w = args.y.shape[3];
  c.x = args.x.data;
  c.filter = args.weight.data;
  c.y = args.y.data;
  c.needs_finish = args.bias.data != nullptr || args.norm_mean.data != nullptr || args.residual.data != nullptr ||
                   args.epilogue.active;
  return c;
}

/// Plans `c` on `handle` for `site`'s launch of `op` (what an error names).
template <class Op>
Result<ConvLaunch> plan_conv(const Op& op, const ConvOperands& c, void* handle, std::size_t workspace_bytes,
                             const LaunchSite& site) {
  const cuda_kernels::ConvDesc& d = c.desc;
  ConvLaunch launch;
  launch.where = cat("cuDNN convolution of node '", site.node, "' (op ", op.name(), ", dtype ", name(op.output_dtype()),
                     ", x [", d.n, ", ", d.c, ", ", d.h, ", ", d.w, "], filter [", d.o, ", ", d.c / d.groups, ", ",
                     d.kernel_h, ", ", d.kernel_w, "], groups ", d.groups, ")");
#if TEENY_HAS_CUDA
  if (const int status = cuda_kernels::conv_plan(launch.plan.slot(), handle, d, workspace_bytes)) {
    return dnn_error(status, cat("planning the ", launch.where));
  }
  launch.x = c.x;
  launch.filter = c.filter;
  launch.y = c.y;
  return launch;
#else
  (void)handle;
  (void)workspace_bytes;
  return not_compiled_in(launch.where);
#endif
}

}  // namespace teeny::cuda
