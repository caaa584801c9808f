// teeny.cpu:conv_common — what the convolution's methods share (see cpu/conv.cppm): the
// layer's geometry, the runs of an input row a window reads, short copies and fills, the residual
// add, the BatchNorm fold, and the estimate of a GEMM's cycles the planner compares methods by.
module;
#include "cpu/kernels/gemm.hpp"
#include "math/elementwise.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv_common;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :conv_state;

// Not exported: the other conv partitions see these; importers of teeny.cpu do not.
namespace teeny::conv {

struct Geometry {
  std::int64_t n, c, h, w;      // input
  std::int64_t o, ho, wo;       // output
  std::int64_t groups, cg, og;  // channels per group, in and out
  std::int64_t k;               // GEMM depth: cg * kh * kw
  std::int64_t p;               // output pixels: ho * wo
};

template <class T>
Geometry geometry(const ConvArgs<T>& a) {
  Geometry g{};
  g.n = a.x.shape[0];
  g.c = a.x.shape[1];
  g.h = a.x.shape[2];
  g.w = a.x.shape[3];
  g.o = a.y.shape[1];
  g.ho = a.y.shape[2];
  g.wo = a.y.shape[3];
  if (a.pooled) {  // y is pooled: the convolution's own output size follows from its window
    const Window2d& w = a.window;
    g.ho = (g.h + 2 * w.pad_h - w.dilation_h * (w.kernel_h - 1) - 1) / w.stride_h + 1;
    g.wo = (g.w + 2 * w.pad_w - w.dilation_w * (w.kernel_w - 1) - 1) / w.stride_w + 1;
  }
  g.groups = a.groups;
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  g.k = g.cg * a.window.kernel_h * a.window.kernel_w;
  g.p = g.ho * g.wo;
  return g;
}

// The outputs [lo, hi) along one dim whose input position i0 + o * stride lies inside [0, size).
std::pair<std::int64_t, std::int64_t> inside(std::int64_t i0, std::int64_t stride, std::int64_t size,
                                             std::int64_t outputs) {
  const std::int64_t lo = i0 >= 0 ? 0 : std::min(outputs, (-i0 + stride - 1) / stride);
  const std::int64_t hi = i0 >= size ? lo : std::max(lo, std::min(outputs, (size - i0 + stride - 1) / stride));
  return {lo, hi};
}

// dst[0, n) = 0. Runs at the padding are a few elements: short ones are stored directly, not
// through a call to memset (which the compiler would make of a plain loop).
template <class T>
void zero(T* dst, std::int64_t n) {
  if (n >= 8) {
    std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  if (n >= 4) {
    constexpr T zeros[4] = {};
    std::memcpy(dst, zeros, sizeof zeros);
    std::memcpy(dst + n - 4, zeros, sizeof zeros);
    return;
  }
  if (n > 0) dst[0] = T(0);
  if (n > 1) dst[1] = T(0);
  if (n > 2) dst[2] = T(0);
}

// dst[0, n) = src[0, n) for the short runs of an im2col row (tens of floats): 16-byte moves, the
// last one overlapping, cost less than a loop's setup or a call to memcpy.
template <class T>
void copy_short(T* dst, const T* src, std::int64_t n) {
  if (n < 4) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (std::int64_t i = 0; i + 4 < n; i += 4) std::memcpy(dst + i, src + i, 4 * sizeof(T));
  std::memcpy(dst + n - 4, src + n - 4, 4 * sizeof(T));
}

// dst[0, n) = src[0, n) for a row of any length: memcpy for long rows, copy_short for short ones
// (LeNet's 28- and 10-wide), for which a call to memcpy costs more than the copy.
template <class T>
void copy_row(T* dst, const T* src, std::int64_t n) {
  if (n >= 32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  copy_short(dst, src, n);
}

// A 1x1, stride-1, unpadded convolution: its GEMM reads the input as it is.
bool pointwise(const Window2d& win) {
  return win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 && win.stride_w == 1 && win.pad_h == 0 &&
         win.pad_w == 0;
}

// The sizes of an implicit-GEMM convolution's planes (see PhasePlanes), by stride phase or
// `by_column` (stride_h 1 only).
struct PlaneSizes {
  std::int64_t qh = 0, qw = 0;  // rows and columns of a plane
  std::int64_t used = 0;        // planes per input channel
  std::int64_t reach = 0;       // plane rows an output row reads below its own
  std::int64_t floats = 0;      // all planes of a group, and a row of slack for the last windows
};
// `used` planes of qh x qw per channel: a window runs Ho * qw floats from its start, up to qw - 1
// past the last plane's end.
std::int64_t plane_floats(std::int64_t cg, std::int64_t used, std::int64_t qh, std::int64_t qw) {
  return cg * used * qh * qw + qw;
}
PlaneSizes plane_sizes(const Geometry& g, const Window2d& win, bool by_column) {
  PlaneSizes s;
  if (by_column) {
    s.qh = g.h + 2 * win.pad_h;
    s.qw = g.wo;
    s.used = win.kernel_w;
    s.reach = (win.kernel_h - 1) * win.dilation_h;
  } else {
    s.qh = (g.h + 2 * win.pad_h + win.stride_h - 1) / win.stride_h;
    s.qw = (g.w + 2 * win.pad_w + win.stride_w - 1) / win.stride_w;
    // Taps i reach (i * dh) % sh: min(kh, sh / gcd(dh, sh)) distinct phases; likewise across.
    const std::int64_t rows = std::min(win.kernel_h, win.stride_h / std::gcd(win.dilation_h, win.stride_h));
    const std::int64_t cols = std::min(win.kernel_w, win.stride_w / std::gcd(win.dilation_w, win.stride_w));
    s.used = rows * cols;
    s.reach = (win.kernel_h - 1) * win.dilation_h / win.stride_h;
  }
  s.floats = plane_floats(g.cg, s.used, s.qh, s.qw);
  return s;
}

// Estimated cycles of an M x N x K GEMM on the register tile `t`: a partial tile costs about as
// much as a full one (a narrow column edge half, a few rows a third).
double gemm_cycles(std::int64_t m, std::int64_t n, std::int64_t k, cpu::GemmTile t) {
  const auto mr = static_cast<std::int64_t>(t.mr);
  const auto nr = static_cast<std::int64_t>(t.nr);
  const double rows =
      static_cast<double>(m / mr) +
      (m % mr == 0 ? 0.0 : static_cast<double>(std::max(m % mr, (mr + 2) / 3)) / static_cast<double>(mr));
  const double cols = static_cast<double>(n / nr) + (n % nr == 0 ? 0.0 : n % nr <= nr / 2 ? 0.5 : 1.0);
  // Two fused multiply-adds of 16 lanes per cycle.
  return rows * cols * static_cast<double>(k) * static_cast<double>(mr * nr) / 32.0;
}

// Whether `tasks` independent pieces of work keep `threads` threads busy when each runs whole:
// they divide evenly, or are enough that the last round's idle threads matter little.
bool enough_to_go_round(std::int64_t tasks, std::int64_t threads) {
  return threads == 1 || tasks % threads == 0 || tasks >= 4 * threads;
}

// The threads a convolution's work is worth: as many as give each at least `macs_per_thread`
// multiply-adds (CpuOptions::conv_macs_per_thread), one at least.
std::int64_t conv_threads(const Geometry& g, std::int64_t threads, std::int64_t macs_per_thread) {
  threads = std::max<std::int64_t>(threads, 1);
  if (macs_per_thread <= 0) return threads;
  const std::int64_t macs = g.n * g.groups * g.og * g.p * g.k;
  return std::clamp<std::int64_t>(macs / macs_per_thread, 1, threads);
}

// Whether the (image, group) GEMMs go round the threads one whole GEMM per task; otherwise (batch
// 1) each GEMM is split over the threads.
bool one_gemm_per_task(const Geometry& g, std::int64_t threads) { return enough_to_go_round(g.n * g.groups, threads); }

template <class State>
ConvScratch scratch_layout(const Geometry& g, const State& state) {
  ConvScratch l = conv_scratch(state.method, g.k, g.p, g.og, g.ho, g.wo, state.phases.floats, state.phases.qw, g.cg,
                               state.winograd.plane.points(), state.winograd.stride, state.winograd.staging);
  if (state.pool_in_bands) {
    // A band of output rows (og channels, pool_band_rows rows as wide as the planes), then the
    // max pool's row buffer (max_pool_rows).
    l.result = (l.columns + 15) / 16 * 16;
    l.pool_rows = l.result + (g.og * state.pool_band_rows * state.phases.qw + 15) / 16 * 16;
    l.total = l.pool_rows + 2 * g.wo + 2;
    return l;
  }
  if (state.pool_in_scratch && l.result == 0) {
    // The GEMM writes an image's output here to be pooled (at 16 floats at least: offset 0 means
    // no result area).
    l.result = std::max<std::int64_t>(16, (l.columns + 15) / 16 * 16);
    l.total = l.result + g.og * g.p;
  }
  return l;
}

// out[i] = act(src[i] + residual[i]) for i in [0, n): a folded residual add and the activation after
// it (none when `act` is inactive). `out` may be `src`.
template <class T>
void add_residual(T* out, const T* src, const T* residual, std::int64_t n, const Epilogue& act) {
  if (act.active && act.fn == UnaryFn::relu) {  // ResNet's: one vectorised pass
    for (std::int64_t i = 0; i < n; ++i) out[i] = math::apply_unary(UnaryFn::relu, src[i] + residual[i], act.params);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) out[i] = src[i] + residual[i];
  if (act.active) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = math::apply_unary(act.fn, out[i], act.params);
  }
}

// A folded BatchNorm's per-channel affine map, y = conv * scale + shift, computed in double:
// scale = weight / sqrt(var + eps), shift = (bias - mean) * scale + norm_bias.
struct NormChannel {
  double scale, shift;
};

template <class T>
NormChannel norm_channel(const ConvArgs<T>& a, std::int64_t o) {
  const double weight = a.norm_weight.data != nullptr ? a.norm_weight.data[o] : 1.0;
  const double scale = weight / std::sqrt(a.norm_var.data[o] + a.norm_eps);
  const double bias = a.bias.data != nullptr ? a.bias.data[o] : 0.0;
  const double beta = a.norm_bias.data != nullptr ? a.norm_bias.data[o] : 0.0;
  return {scale, (bias - a.norm_mean.data[o]) * scale + beta};
}

// Every channel's var + eps must be positive for the fold (NaN is not).
template <class T>
Result<void> check_norm(const ConvArgs<T>& a, std::int64_t channels) {
  for (std::int64_t o = 0; o < channels; ++o) {
    const double var = a.norm_var.data[o];
    if (!(var + a.norm_eps > 0.0)) {  // also catches NaN
      return fail(Errc::invalid_argument, "batch norm running_var[", o, "] = ", var, " with eps ", a.norm_eps,
                  ": var + eps must be positive");
    }
  }
  return ok();
}

}  // namespace teeny::conv
