// teeny.cpu:pool — CPU kernels of the 2-D pooling ops, plane by plane in parallel. Which inputs
// a window reads and what an average divides by is kernels/math/pool.hpp.
module;
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cpu/kernels/gemm.hpp"  // max_pool_3x3_stride2
#include "math/pool.hpp"
export module teeny.cpu:pool;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;

export namespace teeny {

/// Row-pair maxima max_pool2d's 2x2 path makes at a time (16 KiB of f32: they stay in L1).
inline constexpr std::int64_t max_pool2d_pair_floats = 4096;

/// What a max_pool2d_op<T> kernel on planes `width` wide takes from the CPU context's Memory (see
/// KernelMemory): scratch for a row of window maxima with its even and odd columns apart (stride
/// 2), or for the 2x2 path's row-pair maxima.
template <CpuReal T>
constexpr KernelMemory max_pool2d_memory(std::size_t width) {
  const auto w = static_cast<std::int64_t>(width);
  const std::int64_t floats = std::max(2 * w + 2, std::max(max_pool2d_pair_floats, w));
  return {0, static_cast<std::size_t>(floats) * sizeof(T), 0};
}

/// One plane of a max pool whose input rows need not be a plane's: input row ih (of h rows, each w
/// wide) at x + (ih - first_row) * pitch, where only the rows the output rows asked for read need
/// be; output row oh (wo wide) at y + oh * wo. A convolution with a folded pool pools bands of its
/// output this way.
template <class T>
struct MaxPoolRows {
  const T* x = nullptr;
  std::int64_t first_row = 0;
  std::int64_t pitch = 0;
  std::int64_t h = 0, w = 0;
  T* y = nullptr;
  std::int64_t wo = 0;
};

// Templates over the element type, compiled here for float and double (see the end of the file).

/// Output rows [oh_begin, oh_end) of `plane` pooled with `win`, with 2 * plane.w + 2 elements of
/// `scratch` (max_pool2d_memory(plane.w) has room for them).
template <CpuReal T>
void max_pool_rows(const MaxPoolRows<T>& plane, const Window2d& win, std::int64_t oh_begin, std::int64_t oh_end,
                   T* scratch);
template <CpuReal T>
Result<NoState> prepare_kernel(const max_pool2d_op<T>& op, const Pool2dArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const max_pool2d_op<T>& op, const Pool2dArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const avg_pool2d_op<T>& op, const Pool2dArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const avg_pool2d_op<T>& op, const Pool2dArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const adaptive_avg_pool2d_op<T>& op, const Pool2dArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const adaptive_avg_pool2d_op<T>& op, const Pool2dArgs<T>& args, NoState& state, CpuContext& cpu);
#if TEENY_TRAINING
template <class T>
using PoolGradArgs = InputGradArgs<Pool2dArgs<T>, T>;
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const max_pool2d_op<T>& op, const PoolGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const max_pool2d_op<T>& op, const PoolGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const avg_pool2d_op<T>& op, const PoolGradArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const avg_pool2d_op<T>& op, const PoolGradArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const adaptive_avg_pool2d_op<T>& op, const PoolGradArgs<T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const adaptive_avg_pool2d_op<T>& op, const PoolGradArgs<T>& args, NoState& state,
                         CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
namespace {

struct Planes {
  std::int64_t count, h, w, ho, wo;
};

template <class T>
Planes planes_of(const Pool2dArgs<T>& a) {
  return {a.x.shape[0], a.x.shape[1], a.x.shape[2], a.y.shape[1], a.y.shape[2]};
}

// Runs plane(x, y) for every (input, output) plane pair, in parallel chunks.
template <class T, class F>
void for_each_plane(const Pool2dArgs<T>& a, std::int64_t window_elements, CpuContext& cpu, F plane) {
  const Planes p = planes_of(a);
  parallel_chunks(cpu, p.count, p.ho * p.wo * window_elements + p.h * p.w, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) plane(a.x.data + i * p.h * p.w, a.y.data + i * p.ho * p.wo, p);
  });
}

constexpr std::int64_t kPairFloats = max_pool2d_pair_floats;

// 2x2 windows at stride 2 tiling the input exactly (no padding, even sizes): no row pair straddles
// two planes, so the whole tensor is one stream of row pairs.
bool tiles_2x2(const Window2d& w, const Planes& p) {
  return w.kernel_h == 2 && w.kernel_w == 2 && w.stride_h == 2 && w.stride_w == 2 && w.pad_h == 0 && w.pad_w == 0 &&
         w.dilation_h == 1 && w.dilation_w == 1 && p.h == 2 * p.ho && p.w == 2 * p.wo;
}

// The 2x2 path: the maxima of each row pair into a buffer, then of each two neighbours in it. With
// an even width, neighbours never straddle rows, so both are flat loops whatever the plane size
// (a 10x10 plane's 5-wide rows would leave a per-row loop nothing to vectorise).
template <class T>
void max_pool_2x2(const T* x, T* y, const Planes& p, CpuContext& cpu) {
  const std::int64_t pairs = p.count * p.ho;  // output rows
  const std::int64_t per_pass = std::max<std::int64_t>(1, kPairFloats / p.w);
  parallel_chunks(cpu, pairs, 2 * p.w, [&](std::int64_t begin, std::int64_t end) {
    T* __restrict pair_max = cpu.scratch_as<T>(cpu.pool().current_worker());
    for (std::int64_t r0 = begin; r0 < end; r0 += per_pass) {
      const std::int64_t rows = std::min(per_pass, end - r0);
      const T* __restrict top = x + 2 * r0 * p.w;
      for (std::int64_t r = 0; r < rows; ++r, top += 2 * p.w) {
        const T* __restrict bottom = top + p.w;
        T* __restrict dst = pair_max + r * p.w;
        for (std::int64_t i = 0; i < p.w; ++i) dst[i] = math::max_pool_update(top[i], bottom[i]);
      }
      T* __restrict out = y + r0 * p.wo;
      for (std::int64_t q = 0; q < rows * p.wo; ++q)
        out[q] = math::max_pool_update(pair_max[2 * q], pair_max[2 * q + 1]);
    }
  });
}

}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const max_pool2d_op<T>&, const Pool2dArgs<T>& args, CpuContext& cpu) {
  if (!cpu.reserve_scratch(max_pool2d_memory<T>(static_cast<std::size_t>(args.x.shape[2])).scratch)) {
    return fail(Errc::out_of_memory, "cannot allocate max_pool2d's row buffers");
  }
  return NoState{};
}

namespace {
// out[o] = max(out[o], in[o * stride + offset]) for o in [begin, end); Stride 0: `stride` at run
// time. A compile-time stride lets the loop vectorise.
template <std::int64_t Stride, class T>
void max_taps(T* __restrict out, const T* __restrict in, std::int64_t begin, std::int64_t end, std::int64_t stride,
              std::int64_t offset) {
  const std::int64_t s = Stride != 0 ? Stride : stride;
  for (std::int64_t o = begin; o < end; ++o) out[o] = math::max_pool_update(out[o], in[o * s + offset]);
}

// out[o] = the max of the K x K window at column o * S + offset of rows r[0..K), for o in
// [begin, end): the common square, undilated windows (2x2 stride 2, 3x3 stride 2) with every row
// inside the input. Compile-time sizes unroll the window and let the loop over o vectorise.
template <int K, int S, class T>
void max_window_rows(T* __restrict out, const T* const* r, std::int64_t begin, std::int64_t end, std::int64_t offset) {
  const T* __restrict r0 = r[0];
  const T* __restrict r1 = r[K > 1 ? 1 : 0];
  const T* __restrict r2 = r[K > 2 ? 2 : 0];
  for (std::int64_t o = begin; o < end; ++o) {
    const std::int64_t c = o * S + offset;
    T acc = r0[c];
    for (int j = 1; j < K; ++j) acc = math::max_pool_update(acc, r0[c + j]);
    for (int j = 0; K > 1 && j < K; ++j) acc = math::max_pool_update(acc, r1[c + j]);
    for (int j = 0; K > 2 && j < K; ++j) acc = math::max_pool_update(acc, r2[c + j]);
    out[o] = acc;
  }
}
// The max of output column `ow`'s window clipped to the row, over the K rows r[0..K).
template <class T>
T border_max(const T* const* r, const Window2d& w, std::int64_t width, std::int64_t ow) {
  const math::MaxSpan cols = math::max_pool_span(ow, w.kernel_w, w.stride_w, w.pad_w, w.dilation_w, width);
  T acc = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = 0; i < w.kernel_h; ++i) {
    for (std::int64_t iw = cols.first; iw < cols.end; iw += w.dilation_w) acc = math::max_pool_update(acc, r[i][iw]);
  }
  return acc;
}

// out[o] = max(v[2o], v[2o + 1], v[2o + 2]) for o in [begin, end), NaN-propagating: a 3-wide
// window at stride 2 (ResNet's stem pool) along a row of vertical maxima. With SSE2, four outputs
// at a time from the row split into even and odd columns in registers; it reads up to v[2 * end + 1].
template <class T>
void max3_stride2(T* __restrict out, const T* __restrict v, std::int64_t begin, std::int64_t end) {
  std::int64_t o = begin;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {  // f64 takes the plain loop
    const auto nan_max = [](__m128 a, __m128 b) {
      const __m128 m = _mm_max_ps(a, b);  // b where either is NaN
      const __m128 a_nan = _mm_cmpunord_ps(a, a);
      return _mm_or_ps(_mm_and_ps(a_nan, a), _mm_andnot_ps(a_nan, m));
    };
    for (; o + 4 <= end; o += 4) {
      const T* p = v + 2 * o;
      const __m128 lo = _mm_loadu_ps(p);       // v[2o .. 2o + 3]
      const __m128 hi = _mm_loadu_ps(p + 4);   // v[2o + 4 .. 2o + 7]
      const __m128 lo2 = _mm_loadu_ps(p + 2);  // v[2o + 2 .. 2o + 5]
      const __m128 hi2 = _mm_loadu_ps(p + 6);  // v[2o + 6 .. 2o + 9]
      const __m128 even = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
      const __m128 odd = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
      const __m128 next = _mm_shuffle_ps(lo2, hi2, _MM_SHUFFLE(2, 0, 2, 0));
      _mm_storeu_ps(out + o, nan_max(nan_max(even, odd), next));
    }
  }
#endif
  for (; o < end; ++o) {
    out[o] = math::max_pool_update(math::max_pool_update(v[2 * o], v[2 * o + 1]), v[2 * o + 2]);
  }
}

template <class T>
using WindowRowsFn = void (*)(T*, const T* const*, std::int64_t, std::int64_t, std::int64_t);

template <class T>
WindowRowsFn<T> fixed_window(const Window2d& w) {
  if (w.dilation_h != 1 || w.dilation_w != 1 || w.kernel_h != w.kernel_w) return nullptr;
  if (w.kernel_h == 2 && w.stride_w == 2) return &max_window_rows<2, 2, T>;
  return nullptr;
}
}  // namespace

template <CpuReal T>
void max_pool_rows(const MaxPoolRows<T>& p, const Window2d& win, std::int64_t oh_begin, std::int64_t oh_end,
                   T* scratch) {
  // Separably, per output row: the max over the window's rows into a row buffer (elementwise over
  // contiguous rows), then over its columns. Output columns [lo, hi) have their whole window inside
  // the row and need no bounds checks.
  const std::int64_t reach = (win.kernel_w - 1) * win.dilation_w - win.pad_w;  // last tap's offset
  const std::int64_t lo = std::min(p.wo, (win.pad_w + win.stride_w - 1) / win.stride_w);
  const std::int64_t hi = p.w - 1 - reach < 0 ? lo : std::clamp((p.w - 1 - reach) / win.stride_w + 1, lo, p.wo);
  auto taps = win.stride_w == 1 ? &max_taps<1, T> : win.stride_w == 2 ? &max_taps<2, T> : &max_taps<0, T>;
  const WindowRowsFn<T> fixed = fixed_window<T>(win);
  // 3x3 windows at stride 2 along the rows (ResNet's stem pool): a row of them at a time in the
  // active instruction set's vectors where it has the kernel (f32), the top and bottom rows' clipped
  // windows included.
  const bool stem_window = std::is_same_v<T, float> && win.kernel_h == 3 && win.kernel_w == 3 && win.stride_w == 2 &&
                           win.dilation_h == 1 && win.dilation_w == 1;
  const auto row = [&](std::int64_t ih) { return p.x + (ih - p.first_row) * p.pitch; };
  T* __restrict rowmax = scratch;
  for (std::int64_t oh = oh_begin; oh < oh_end; ++oh) {
    const math::MaxSpan rows = math::max_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, win.dilation_h, p.h);
    const bool whole = rows.end - rows.first == win.kernel_h;
    T* __restrict out = p.y + oh * p.wo;
    if ((stem_window && rows.end > rows.first) || (fixed != nullptr && whole)) {
      // The window's rows, clipped to the plane (a row repeated changes no max).
      const T* r[3] = {row(rows.first), row(std::min(rows.first + 1, rows.end - 1)),
                       row(std::min(rows.first + 2, rows.end - 1))};
      bool done = false;
      if constexpr (std::is_same_v<T, float>) {
        done = stem_window && cpu::max_pool_3x3_stride2(r[0], r[1], r[2], out, static_cast<std::size_t>(lo),
                                                        static_cast<std::size_t>(hi), -win.pad_w);
      }
      if (!done && fixed != nullptr && whole) {
        fixed(out, r, lo, hi, -win.pad_w);
        done = true;
      }
      if (done) {
        for (std::int64_t ow = 0; ow < lo; ++ow) out[ow] = border_max(r, win, p.w, ow);
        for (std::int64_t ow = hi; ow < p.wo; ++ow) out[ow] = border_max(r, win, p.w, ow);
        continue;
      }
    }
    const T* first = row(rows.first);
    for (std::int64_t iw = 0; iw < p.w; ++iw) rowmax[iw] = first[iw];
    for (std::int64_t ih = rows.first + win.dilation_h; ih < rows.end; ih += win.dilation_h) {
      const T* __restrict in = row(ih);
      for (std::int64_t iw = 0; iw < p.w; ++iw) rowmax[iw] = math::max_pool_update(rowmax[iw], in[iw]);
    }
    auto border = [&](std::int64_t ow) {
      const math::MaxSpan cols = math::max_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, win.dilation_w, p.w);
      out[ow] = -std::numeric_limits<T>::infinity();
      for (std::int64_t iw = cols.first; iw < cols.end; iw += win.dilation_w) {
        out[ow] = math::max_pool_update(out[ow], rowmax[iw]);
      }
    };
    for (std::int64_t ow = 0; ow < lo; ++ow) border(ow);
    if (win.stride_w == 2 && win.kernel_w == 3 && win.dilation_w == 1) {
      max3_stride2(out, rowmax - win.pad_w, lo, hi);
    } else if (win.stride_w == 2) {
      // Even and odd columns apart, so that every tap reads one of them at unit stride: input
      // column 2 * ow + t is even[ow + t / 2] for an even t, odd[ow + (t - 1) / 2] for an odd one.
      T* __restrict even = rowmax + p.w;
      T* __restrict odd = even + (p.w + 1) / 2;
      for (std::int64_t i = 0; i < (p.w + 1) / 2; ++i) even[i] = rowmax[2 * i];
      for (std::int64_t i = 0; i < p.w / 2; ++i) odd[i] = rowmax[2 * i + 1];
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t t = j * win.dilation_w - win.pad_w;
        const T* src = t % 2 == 0 ? even + t / 2 : odd + (t - 1) / 2;  // t - 1 is even: exact
        if (j == 0) {
          for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] = src[ow];
        } else {
          max_taps<1>(out, src, lo, hi, 1, 0);
        }
      }
    } else {
      for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] = rowmax[ow * win.stride_w - win.pad_w];
      for (std::int64_t j = 1; j < win.kernel_w; ++j) {
        taps(out, rowmax, lo, hi, win.stride_w, j * win.dilation_w - win.pad_w);
      }
    }
    for (std::int64_t ow = hi; ow < p.wo; ++ow) border(ow);
  }
}

template <CpuReal T>
void run_kernel(const max_pool2d_op<T>&, const Pool2dArgs<T>& args, NoState&, CpuContext& cpu) {
  const Planes shape = planes_of(args);
  if (tiles_2x2(args.window, shape)) return max_pool_2x2(args.x.data, args.y.data, shape, cpu);
  const Window2d& win = args.window;
  for_each_plane(args, win.kernel_h * win.kernel_w, cpu, [&](const T* x, T* y, const Planes& p) {
    max_pool_rows(MaxPoolRows<T>{x, 0, p.w, p.h, p.w, y, p.wo}, win, 0, p.ho,
                  cpu.scratch_as<T>(cpu.pool().current_worker()));
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const avg_pool2d_op<T>&, const Pool2dArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const avg_pool2d_op<T>&, const Pool2dArgs<T>& args, NoState&, CpuContext& cpu) {
  const Window2d& win = args.window;
  for_each_plane(args, win.kernel_h * win.kernel_w, cpu, [&](const T* x, T* y, const Planes& p) {
    for (std::int64_t oh = 0; oh < p.ho; ++oh) {
      const math::AvgSpan rows = math::avg_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, p.h);
      for (std::int64_t ow = 0; ow < p.wo; ++ow) {
        const math::AvgSpan cols = math::avg_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, p.w);
        T sum = T(0);
        for (std::int64_t ih = rows.begin; ih < rows.end; ++ih) {
          for (std::int64_t iw = cols.begin; iw < cols.end; ++iw) sum += x[ih * p.w + iw];
        }
        const std::int64_t divisor = math::avg_pool_divisor(rows, cols, args.count_include_pad, args.divisor_override);
        y[oh * p.wo + ow] = sum / static_cast<T>(divisor);
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const adaptive_avg_pool2d_op<T>&, const Pool2dArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const adaptive_avg_pool2d_op<T>&, const Pool2dArgs<T>& args, NoState&, CpuContext& cpu) {
  const Planes shape = planes_of(args);
  // A window spans about H/Ho x W/Wo inputs (at least one).
  const std::int64_t window = (shape.h / shape.ho + 1) * (shape.w / shape.wo + 1);
  for_each_plane(args, window, cpu, [&](const T* x, T* y, const Planes& p) {
    for (std::int64_t oh = 0; oh < p.ho; ++oh) {
      const std::int64_t h0 = math::adaptive_begin(oh, p.h, p.ho);
      const std::int64_t h1 = math::adaptive_end(oh, p.h, p.ho);
      for (std::int64_t ow = 0; ow < p.wo; ++ow) {
        const std::int64_t w0 = math::adaptive_begin(ow, p.w, p.wo);
        const std::int64_t w1 = math::adaptive_end(ow, p.w, p.wo);
        T sum = T(0);
        for (std::int64_t ih = h0; ih < h1; ++ih) {
          for (std::int64_t iw = w0; iw < w1; ++iw) sum += x[ih * p.w + iw];
        }
        // PyTorch divides by the window's height, then its width.
        y[oh * p.wo + ow] = sum / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
      }
    }
  });
}

#if TEENY_TRAINING
namespace {
// Runs plane(x, dy, dx) for every plane of a pooling backward, in parallel chunks (planes are
// independent: a window never reaches into another plane).
template <class T, class F>
void for_each_grad_plane(const PoolGradArgs<T>& g, std::int64_t window_elements, CpuContext& cpu, F plane) {
  if (g.dx.data == nullptr) return;
  const Planes p = planes_of(g.forward);
  parallel_chunks(cpu, p.count, p.ho * p.wo * window_elements + p.h * p.w, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      plane(g.forward.x.data + i * p.h * p.w, g.dy.data + i * p.ho * p.wo, g.dx.data + i * p.h * p.w, p);
    }
  });
}
// The 2x2 tiling of the forward's fast path: every input lies in one window, and the window's
// winner (the first maximum, or the last NaN, as the forward picks it) is found without branches,
// which a data-dependent winner would mispredict half the time.
template <class T>
void max_pool_2x2_backward(const T* x, const T* dy, T* dx, const Planes& p) {
  for (std::int64_t oh = 0; oh < p.ho; ++oh) {
    const T* __restrict top = x + 2 * oh * p.w;
    const T* __restrict bottom = top + p.w;
    T* __restrict dtop = dx + 2 * oh * p.w;
    T* __restrict dbottom = dtop + p.w;
    const T* __restrict grad = dy + oh * p.wo;
    for (std::int64_t ow = 0; ow < p.wo; ++ow) {
      const T a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
      const bool na = a != a, nb = b != b, nc = c != c, nd = d != d;
      const bool any_nan = na || nb || nc || nd;
      const bool a_max = a >= b && a >= c && a >= d;
      const bool b_max = !a_max && b >= c && b >= d;
      const bool c_max = !a_max && !b_max && c >= d;
      const bool wins[4] = {any_nan ? na && !nb && !nc && !nd : a_max, any_nan ? nb && !nc && !nd : b_max,
                            any_nan ? nc && !nd : c_max, any_nan ? nd : !a_max && !b_max && !c_max};
      const T gv = grad[ow];
      dtop[2 * ow] += wins[0] ? gv : T(0);
      dtop[2 * ow + 1] += wins[1] ? gv : T(0);
      dbottom[2 * ow] += wins[2] ? gv : T(0);
      dbottom[2 * ow + 1] += wins[3] ? gv : T(0);
    }
  }
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const max_pool2d_op<T>&, const PoolGradArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const max_pool2d_op<T>&, const PoolGradArgs<T>& g, NoState&, CpuContext& cpu) {
  const Window2d& win = g.forward.window;
  if (tiles_2x2(win, planes_of(g.forward))) {
    for_each_grad_plane(g, 4, cpu,
                        [](const T* x, const T* dy, T* dx, const Planes& p) { max_pool_2x2_backward(x, dy, dx, p); });
    return;
  }
  for_each_grad_plane(g, win.kernel_h * win.kernel_w, cpu, [&](const T* x, const T* dy, T* dx, const Planes& p) {
    for (std::int64_t oh = 0; oh < p.ho; ++oh) {
      const math::MaxSpan rows = math::max_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, win.dilation_h, p.h);
      for (std::int64_t ow = 0; ow < p.wo; ++ow) {
        const math::MaxSpan cols = math::max_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, win.dilation_w, p.w);
        if (rows.first >= rows.end || cols.first >= cols.end) continue;
        // The forward's winner, found as PyTorch finds it: the first maximum, or the last NaN.
        std::int64_t best = rows.first * p.w + cols.first;
        T max = -std::numeric_limits<T>::infinity();
        for (std::int64_t ih = rows.first; ih < rows.end; ih += win.dilation_h) {
          for (std::int64_t iw = cols.first; iw < cols.end; iw += win.dilation_w) {
            const T v = x[ih * p.w + iw];
            if (math::max_pool_wins(max, v)) {
              max = v;
              best = ih * p.w + iw;
            }
          }
        }
        dx[best] += dy[oh * p.wo + ow];
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const avg_pool2d_op<T>&, const PoolGradArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const avg_pool2d_op<T>&, const PoolGradArgs<T>& g, NoState&, CpuContext& cpu) {
  const Pool2dArgs<T>& f = g.forward;
  const Window2d& win = f.window;
  for_each_grad_plane(g, win.kernel_h * win.kernel_w, cpu, [&](const T*, const T* dy, T* dx, const Planes& p) {
    for (std::int64_t oh = 0; oh < p.ho; ++oh) {
      const math::AvgSpan rows = math::avg_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, p.h);
      for (std::int64_t ow = 0; ow < p.wo; ++ow) {
        const math::AvgSpan cols = math::avg_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, p.w);
        const std::int64_t divisor = math::avg_pool_divisor(rows, cols, f.count_include_pad, f.divisor_override);
        const T share = dy[oh * p.wo + ow] / static_cast<T>(divisor);
        for (std::int64_t ih = rows.begin; ih < rows.end; ++ih) {
          for (std::int64_t iw = cols.begin; iw < cols.end; ++iw) dx[ih * p.w + iw] += share;
        }
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const adaptive_avg_pool2d_op<T>&, const PoolGradArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const adaptive_avg_pool2d_op<T>&, const PoolGradArgs<T>& g, NoState&, CpuContext& cpu) {
  const Planes shape = planes_of(g.forward);
  const std::int64_t window = (shape.h / shape.ho + 1) * (shape.w / shape.wo + 1);
  for_each_grad_plane(g, window, cpu, [&](const T*, const T* dy, T* dx, const Planes& p) {
    for (std::int64_t oh = 0; oh < p.ho; ++oh) {
      const std::int64_t h0 = math::adaptive_begin(oh, p.h, p.ho);
      const std::int64_t h1 = math::adaptive_end(oh, p.h, p.ho);
      for (std::int64_t ow = 0; ow < p.wo; ++ow) {
        const std::int64_t w0 = math::adaptive_begin(ow, p.w, p.wo);
        const std::int64_t w1 = math::adaptive_end(ow, p.w, p.wo);
        const T share = dy[oh * p.wo + ow] / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
        for (std::int64_t ih = h0; ih < h1; ++ih) {
          for (std::int64_t iw = w0; iw < w1; ++iw) dx[ih * p.w + iw] += share;
        }
      }
    }
  });
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                                  \
  template void max_pool_rows(const MaxPoolRows<T>&, const Window2d&, std::int64_t, std::int64_t, T*);          \
  template Result<NoState> prepare_kernel(const max_pool2d_op<T>&, const Pool2dArgs<T>&, CpuContext&);          \
  template void run_kernel(const max_pool2d_op<T>&, const Pool2dArgs<T>&, NoState&, CpuContext&);               \
  template Result<NoState> prepare_kernel(const avg_pool2d_op<T>&, const Pool2dArgs<T>&, CpuContext&);          \
  template void run_kernel(const avg_pool2d_op<T>&, const Pool2dArgs<T>&, NoState&, CpuContext&);               \
  template Result<NoState> prepare_kernel(const adaptive_avg_pool2d_op<T>&, const Pool2dArgs<T>&, CpuContext&); \
  template void run_kernel(const adaptive_avg_pool2d_op<T>&, const Pool2dArgs<T>&, NoState&, CpuContext&);      \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                           \
  template Result<NoState> prepare_backward_kernel(const max_pool2d_op<T>&, const PoolGradArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const max_pool2d_op<T>&, const PoolGradArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_backward_kernel(const avg_pool2d_op<T>&, const PoolGradArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const avg_pool2d_op<T>&, const PoolGradArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_backward_kernel(const adaptive_avg_pool2d_op<T>&, const PoolGradArgs<T>&,      \
                                                   CpuContext&);                                                  \
  template void run_backward_kernel(const adaptive_avg_pool2d_op<T>&, const PoolGradArgs<T>&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
