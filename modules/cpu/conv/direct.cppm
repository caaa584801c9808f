// teeny.cpu:conv_direct — depthwise convolutions (one input channel per group), run directly:
// their GEMMs would be mostly packing.
module;
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv_direct;
import teeny.std;
import teeny.core;
import teeny.ops;
import :context;
import :elementwise;
import :conv_state;
import :conv_common;

namespace teeny::conv {

// One output plane of a depthwise convolution: `x` is its input channel, `w` its kh x kw filter.
template <class T>
void depthwise_plane(const T* x, const T* w, T bias, T* y, const Geometry& g, const Window2d& win) {
  for (std::int64_t oh = 0; oh < g.ho; ++oh) {
    T* out = y + oh * g.wo;
    std::fill(out, out + g.wo, bias);
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih = oh * win.stride_h - win.pad_h + i * win.dilation_h;
      if (ih < 0 || ih >= g.h) continue;
      const T* row = x + ih * g.w;
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [lo, hi] = inside(iw0, win.stride_w, g.w, g.wo);
        const T wv = w[i * win.kernel_w + j];
        for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * row[iw0 + ow * win.stride_w];
      }
    }
  }
}

// A depthwise convolution: one direct loop per output plane, the planes split over the threads.
template <CpuReal T>
void run_depthwise(const ConvArgs<T>& args, const ConvStateOf<T>& state, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  const T* x = args.x.data;
  // nullptr without bias; a folded BatchNorm's shift replaces it
  const T* bias = state.folded_bias.empty() ? args.bias.data : state.folded_bias.data();
  const T* weights = state.folded_weight.empty() ? args.weight.data : state.folded_weight.data();
  T* y = args.y.data;
  const T* residual = args.residual.data;  // a folded residual add, then the activation
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  parallel_chunks(cpu, g.n * g.o, g.p * khw, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t plane = begin; plane < end; ++plane) {
      const std::int64_t n = plane / g.o;
      const std::int64_t o = plane % g.o;
      const T* in = x + (n * g.c + o / g.og) * g.h * g.w;
      T* out = y + plane * g.p;
      depthwise_plane(in, weights + o * khw, bias != nullptr ? bias[o] : T(0), out, g, win);
      if (residual != nullptr) add_residual(out, out, residual + plane * g.p, g.p, args.epilogue);
    }
  });
  if (args.epilogue.active && residual == nullptr) {
    apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
  }
}

}  // namespace teeny::conv
