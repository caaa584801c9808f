// The convolution kernel teeny launches itself: direct, one output element a thread, with what
// the lowering folds into a convolution applied in the same pass (bias, a BatchNorm, a residual
// add, the activation, a max pool over the activated values). Instantiated per element type as
// teeny_conv_<dtype>; f16 and bf16 accumulate in f32. Where cuDNN runs the sums of products
// (unpooled convolutions: teeny.cuda's conv_dnn), teeny_conv_finish_<dtype> applies the rest in
// place, with the same code.
//
// Its backward (training), teeny_conv_backward_<dtype>, is direct too: one element of dx, dW or db
// a thread, each summing every term that reaches it (dz = dy * act'(y), computed where dy is read)
// and adding it once, so the result is the same every run. As on the CPU, the folds have no
// backward (the op refuses to pack one): they are not read.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/gradient.hpp"
#include "math/norm.hpp"
#include "math/pool.hpp"

namespace teeny::cuda_kernels {
namespace {

template <class T>
struct ConvInputs {
  DeviceTensor<const T> x, weight, bias;
  math::Window2d window;
  std::int64_t groups;
  math::Epilogue epilogue;
  DeviceTensor<const T> norm_weight, norm_bias, norm_mean, norm_var;
  double norm_eps;
};

// What follows the sum of products at output channel o: the bias, the folded BatchNorm, `added`
// (the residual), the activation.
template <class T>
__device__ compute_t<T> finish(const ConvInputs<T>& in, compute_t<T> acc, std::int64_t o, compute_t<T> added) {
  using C = compute_t<T>;
  if (in.bias.data != nullptr) acc += load(in.bias.data + o);
  if (in.norm_mean.data != nullptr) {
    const double weight = in.norm_weight.data != nullptr ? static_cast<double>(load(in.norm_weight.data + o)) : 1.0;
    const double bias = in.norm_bias.data != nullptr ? static_cast<double>(load(in.norm_bias.data + o)) : 0.0;
    const auto affine = math::batch_norm_affine(weight, bias, static_cast<double>(load(in.norm_mean.data + o)),
                                                static_cast<double>(load(in.norm_var.data + o)), in.norm_eps);
    acc = acc * static_cast<C>(affine.scale) + static_cast<C>(affine.shift);
  }
  return math::apply_epilogue(in.epilogue, acc + added);
}

// The activated convolution at (n, o, oh, ow) of the unpooled output, plus `added` before the
// activation.
template <class T>
__device__ compute_t<T> conv_at(const ConvInputs<T>& in, std::int64_t n, std::int64_t o, std::int64_t oh,
                                std::int64_t ow, compute_t<T> added) {
  using C = compute_t<T>;
  const math::Window2d& win = in.window;
  const std::int64_t channels = in.x.shape[1];
  const std::int64_t h = in.x.shape[2];
  const std::int64_t w = in.x.shape[3];
  const std::int64_t per_group = channels / in.groups;
  const std::int64_t out_per_group = in.weight.shape[0] / in.groups;
  const std::int64_t first_channel = (o / out_per_group) * per_group;
  const T* weights = in.weight.data + o * per_group * win.kernel_h * win.kernel_w;
  C acc = C(0);
  for (std::int64_t c = 0; c < per_group; ++c) {
    const T* plane = in.x.data + (n * channels + first_channel + c) * h * w;
    for (std::int64_t kh = 0; kh < win.kernel_h; ++kh) {
      const std::int64_t ih = oh * win.stride_h - win.pad_h + kh * win.dilation_h;
      if (ih < 0 || ih >= h) continue;
      for (std::int64_t kw = 0; kw < win.kernel_w; ++kw) {
        const std::int64_t iw = ow * win.stride_w - win.pad_w + kw * win.dilation_w;
        if (iw < 0 || iw >= w) continue;
        acc += load(plane + ih * w + iw) * load(weights + (c * win.kernel_h + kh) * win.kernel_w + kw);
      }
    }
  }
  return finish(in, acc, o, added);
}

template <class T>
__device__ void conv(const ConvInputs<T>& in, const DeviceTensor<T>& y, const DeviceTensor<const T>& residual,
                     bool pooled, const math::Window2d& pool) {
  using C = compute_t<T>;
  const math::Window2d& win = in.window;
  const std::int64_t n_outputs = element_count(y);
  const std::int64_t out_channels = y.shape[1];
  const std::int64_t yh = y.shape[2];
  const std::int64_t yw = y.shape[3];
  // The unpooled output's size, from the input and the window.
  const std::int64_t ho = (in.x.shape[2] + 2 * win.pad_h - win.dilation_h * (win.kernel_h - 1) - 1) / win.stride_h + 1;
  const std::int64_t wo = (in.x.shape[3] + 2 * win.pad_w - win.dilation_w * (win.kernel_w - 1) - 1) / win.stride_w + 1;
  for (std::int64_t i = first_index(); i < n_outputs; i += grid_stride()) {
    const std::int64_t ow = i % yw;
    const std::int64_t oh = (i / yw) % yh;
    const std::int64_t o = (i / (yw * yh)) % out_channels;
    const std::int64_t n = i / (yw * yh * out_channels);
    if (!pooled) {
      const C added = residual.data != nullptr ? load(residual.data + i) : C(0);
      store(y.data + i, conv_at(in, n, o, oh, ow, added));
      continue;
    }
    const math::MaxSpan rows = math::max_pool_span(oh, pool.kernel_h, pool.stride_h, pool.pad_h, pool.dilation_h, ho);
    const math::MaxSpan cols = math::max_pool_span(ow, pool.kernel_w, pool.stride_w, pool.pad_w, pool.dilation_w, wo);
    C acc = -C(INFINITY);
    for (std::int64_t ph = rows.first; ph < rows.end; ph += pool.dilation_h) {
      for (std::int64_t pw = cols.first; pw < cols.end; pw += pool.dilation_w) {
        acc = math::max_pool_update(acc, conv_at(in, n, o, ph, pw, C(0)));
      }
    }
    store(y.data + i, acc);
  }
}

// The rest of an unpooled convolution whose sums of products cuDNN wrote into y: each element
// finished in place (bias, BatchNorm, residual, activation), as conv_at finishes its own sums.
template <class T>
__device__ void conv_finish(const ConvInputs<T>& in, const DeviceTensor<T>& y, const DeviceTensor<const T>& residual) {
  using C = compute_t<T>;
  const std::int64_t n_outputs = element_count(y);
  const std::int64_t plane = y.shape[2] * y.shape[3];
  const std::int64_t out_channels = y.shape[1];
  for (std::int64_t i = first_index(); i < n_outputs; i += grid_stride()) {
    const C added = residual.data != nullptr ? load(residual.data + i) : C(0);
    store(y.data + i, finish(in, load(y.data + i), (i / plane) % out_channels, added));
  }
}

// The convolution's backward, one gradient element a thread over dx, then dW, then db (x, W, y, dy
// and the gradients are contiguous, as the op packs them):
//   dx[n, c, ih, iw] += sum of dz[n, o, oh, ow] W[o, c % cg, kh, kw] over the o of c's group and
//                       the (oh, ow, kh, kw) that read (ih, iw);
//   dW[o, cl, kh, kw] += sum over n, oh, ow of dz[n, o, oh, ow] x[n, c, ih, iw] (c = cl in o's group);
//   db[o] += sum of dz[n, o, ...], summed in double as the CPU sums it.
template <class T>
__device__ void conv_backward(const ConvInputs<T>& in, const DeviceTensor<T>& y, const DeviceTensor<T>& dy,
                              const DeviceTensor<T>& dx, const DeviceTensor<T>& dweight, const DeviceTensor<T>& dbias) {
  using C = compute_t<T>;
  const math::Window2d& win = in.window;
  const std::int64_t batch = in.x.shape[0];
  const std::int64_t channels = in.x.shape[1];
  const std::int64_t h = in.x.shape[2];
  const std::int64_t w = in.x.shape[3];
  const std::int64_t out_channels = in.weight.shape[0];
  const std::int64_t ho = y.shape[2];
  const std::int64_t wo = y.shape[3];
  const std::int64_t per_group = channels / in.groups;
  const std::int64_t out_per_group = out_channels / in.groups;
  const std::int64_t taps = win.kernel_h * win.kernel_w;
  const std::int64_t nx = dx.data != nullptr ? batch * channels * h * w : 0;
  const std::int64_t nw = dweight.data != nullptr ? out_channels * per_group * taps : 0;
  const std::int64_t nb = dbias.data != nullptr ? out_channels : 0;
  const auto dz = [&](std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow) {
    const std::int64_t i = ((n * out_channels + o) * ho + oh) * wo + ow;
    const C g = load(dy.data + i);
    return in.epilogue.active
               ? g * math::unary_derivative_from_output(in.epilogue.fn, load(y.data + i), in.epilogue.params)
               : g;
  };
  for (std::int64_t i = first_index(); i < nx + nw + nb; i += grid_stride()) {
    if (i < nx) {
      const std::int64_t iw = i % w;
      const std::int64_t ih = (i / w) % h;
      const std::int64_t c = (i / (w * h)) % channels;
      const std::int64_t n = i / (w * h * channels);
      const std::int64_t group = c / per_group;
      C acc = C(0);
      for (std::int64_t o = group * out_per_group; o < (group + 1) * out_per_group; ++o) {
        const T* weights = in.weight.data + (o * per_group + c % per_group) * taps;
        for (std::int64_t kh = 0; kh < win.kernel_h; ++kh) {
          // The output row that read input row ih through tap kh, if any: ih = oh * sh - ph + kh * dh.
          const std::int64_t th = ih + win.pad_h - kh * win.dilation_h;
          if (th < 0 || th % win.stride_h != 0 || th / win.stride_h >= ho) continue;
          for (std::int64_t kw = 0; kw < win.kernel_w; ++kw) {
            const std::int64_t tw = iw + win.pad_w - kw * win.dilation_w;
            if (tw < 0 || tw % win.stride_w != 0 || tw / win.stride_w >= wo) continue;
            acc += dz(n, o, th / win.stride_h, tw / win.stride_w) * load(weights + kh * win.kernel_w + kw);
          }
        }
      }
      store(dx.data + i, load(dx.data + i) + acc);
    } else if (i < nx + nw) {
      const std::int64_t j = i - nx;
      const std::int64_t kw = j % win.kernel_w;
      const std::int64_t kh = (j / win.kernel_w) % win.kernel_h;
      const std::int64_t cl = (j / taps) % per_group;
      const std::int64_t o = j / (taps * per_group);
      const std::int64_t c = (o / out_per_group) * per_group + cl;
      C acc = C(0);
      for (std::int64_t n = 0; n < batch; ++n) {
        const T* plane = in.x.data + (n * channels + c) * h * w;
        for (std::int64_t oh = 0; oh < ho; ++oh) {
          const std::int64_t ih = oh * win.stride_h - win.pad_h + kh * win.dilation_h;
          if (ih < 0 || ih >= h) continue;
          for (std::int64_t ow = 0; ow < wo; ++ow) {
            const std::int64_t iw = ow * win.stride_w - win.pad_w + kw * win.dilation_w;
            if (iw < 0 || iw >= w) continue;
            acc += dz(n, o, oh, ow) * load(plane + ih * w + iw);
          }
        }
      }
      store(dweight.data + j, load(dweight.data + j) + acc);
    } else {
      const std::int64_t o = i - nx - nw;
      double sum = 0;
      for (std::int64_t n = 0; n < batch; ++n) {
        for (std::int64_t p = 0; p < ho * wo; ++p) sum += static_cast<double>(dz(n, o, p / wo, p % wo));
      }
      store(dbias.data + o, load(dbias.data + o) + static_cast<C>(sum));
    }
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_CONV_ENTRIES(T, suffix)                                                                                  \
  extern "C" __global__ void teeny_conv_##suffix(                                                                      \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T> bias, DeviceTensor<T> y,            \
      teeny::math::Window2d window, std::int64_t groups, teeny::math::Epilogue epilogue,                               \
      DeviceTensor<const T> norm_weight, DeviceTensor<const T> norm_bias, DeviceTensor<const T> norm_mean,             \
      DeviceTensor<const T> norm_var, double norm_eps, DeviceTensor<const T> residual, bool pooled,                    \
      teeny::math::Window2d pool) {                                                                                    \
    const teeny::cuda_kernels::ConvInputs<T> in{x,           weight,    bias,      window,   groups,  epilogue,        \
                                                norm_weight, norm_bias, norm_mean, norm_var, norm_eps};                \
    teeny::cuda_kernels::conv<T>(in, y, residual, pooled, pool);                                                       \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ConvParamList<T>, decltype(teeny_conv_##suffix)>);        \
  extern "C" __global__ void teeny_conv_finish_##suffix(                                                               \
      DeviceTensor<const T>, DeviceTensor<const T> weight, DeviceTensor<const T> bias, DeviceTensor<T> y,              \
      teeny::math::Window2d window, std::int64_t groups, teeny::math::Epilogue epilogue,                               \
      DeviceTensor<const T> norm_weight, DeviceTensor<const T> norm_bias, DeviceTensor<const T> norm_mean,             \
      DeviceTensor<const T> norm_var, double norm_eps, DeviceTensor<const T> residual, bool pooled,                    \
      teeny::math::Window2d) {                                                                                         \
    if (pooled) return; /* pooled convolutions run teeny_conv whole: never finished here */                            \
    const teeny::cuda_kernels::ConvInputs<T> in{{},          weight,    bias,      window,   groups,  epilogue,        \
                                                norm_weight, norm_bias, norm_mean, norm_var, norm_eps};                \
    teeny::cuda_kernels::conv_finish<T>(in, y, residual);                                                              \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ConvParamList<T>, decltype(teeny_conv_finish_##suffix)>); \
  extern "C" __global__ void teeny_conv_backward_##suffix(                                                             \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T> bias, DeviceTensor<T> y,            \
      teeny::math::Window2d window, std::int64_t groups, teeny::math::Epilogue epilogue,                               \
      DeviceTensor<const T> norm_weight, DeviceTensor<const T> norm_bias, DeviceTensor<const T> norm_mean,             \
      DeviceTensor<const T> norm_var, double norm_eps, DeviceTensor<const T>, bool, teeny::math::Window2d,             \
      DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight, DeviceTensor<T> dbias) {                        \
    const teeny::cuda_kernels::ConvInputs<T> in{x,           weight,    bias,      window,   groups,  epilogue,        \
                                                norm_weight, norm_bias, norm_mean, norm_var, norm_eps};                \
    teeny::cuda_kernels::conv_backward<T>(in, y, dy, dx, dweight, dbias);                                              \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ConvBackwardParamList<T>,                       \
                                                  decltype(teeny_conv_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_CONV_ENTRIES)
#undef TEENY_CONV_ENTRIES

namespace teeny::cuda_kernels {

KernelTable conv_kernels() noexcept {
#define TEENY_CONV_ENTRY(T, suffix)                                                        \
  TEENY_KERNEL_ENTRY(teeny_conv_##suffix), TEENY_KERNEL_ENTRY(teeny_conv_finish_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_conv_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_CONV_ENTRY)};
#undef TEENY_CONV_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
