// teeny.cpu:conv — CPU kernel of conv_op. Each (image, group) is one GEMM on the packed SGEMM,
// Y[O/g, Ho*Wo] = W_g[O/g, C/g*kh*kw] * columns[C/g*kh*kw, Ho*Wo], with bias and activation in its
// epilogue and W_g packed once, at load. The columns (the im2col matrix) are made in one of four
// ways, whichever costs least for the layer's shape (choose_columns):
//  - input: a 1x1, stride-1, unpadded convolution reads its input as it is;
//  - implicit: the input is copied once into zero-padded "phase planes" (one per stride phase), in
//    which every im2col row is a contiguous window; the GEMM reads those windows directly
//    (cpu::RowTable) and computes each output row as wide as a phase plane, cut to Wo afterwards;
//  - im2col: the K x Ho*Wo matrix written out;
//  - transposed: Y^T = columns^T * W_g^T, output pixels as the GEMM's rows, for layers with few
//    pixels and many channels (7x7 and 14x14 maps), where the pixel count fits the register tile
//    better as rows than as columns.
// Depthwise convolutions (one input channel per group) run directly: their GEMMs would be mostly
// packing. A folded BatchNorm is applied to the weights and bias at load (norm_channel).
// In f64 (exact checks, not speed) the columns are the input (1x1) or the im2col matrix, and the
// GEMM is dgemm on the unpacked weights (run_unpacked).
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "math/elementwise.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;

export namespace teeny {

/// The zero-padded input of an implicit-GEMM convolution, split by stride phase: plane (c, a, b)
/// holds padded-input rows a, a + sh, a + 2sh, ... and, of those, columns b, b + sw, ... Tap
/// (i, j) of output (oh, ow) is then element (oh + i*dh/sh, ow + j*dw/sw) of plane
/// (c, i*dh % sh, j*dw % sw): each im2col row is one contiguous window of a plane.
struct PhasePlanes {
  std::int64_t sh = 1, sw = 1;          // strides: phases per dim
  std::int64_t qh = 0, qw = 0;          // rows and columns of a plane
  cpu::MemoryArray<std::int64_t> slot;  // per phase a * sw + b: its plane's index, or -1 when no tap reads it
  std::int64_t used = 0;                // phases read by some tap
  std::int64_t reach = 0;               // plane rows an output row reads below its own: taps' (i * dh) / sh
  std::int64_t floats = 0;              // cg * used planes, plus a row of slack for the last windows
};

/// Elements of per-worker scratch: the columns (phase planes or im2col matrix), then the GEMM's
/// result where it cannot go straight to the output (wide rows to cut, or transposed).
struct ConvScratch {
  std::int64_t columns = 0;
  std::int64_t result = 0;  // offset of the result area; 0 when the GEMM writes the output directly
  std::int64_t total = 0;
};

/// How the GEMM's im2col operand is made from an image's group (see the top of this file).
enum class ConvColumns : std::uint8_t { input, implicit, im2col, transposed };

/// What a convolution's kernel prepares at load, per element type T, in the CPU context's Memory.
/// f64 convolutions take the simplest path (input or im2col, unpacked weights, dgemm): they are
/// there for exact checks.
template <CpuReal T>
struct ConvStateOf {
  using Columns = ConvColumns;
  cpu::MemoryArray<cpu::PackedMatrix> weights;  // f32, per group: W_g as the A operand (W_g^T as B: transposed)
  Columns columns = Columns::im2col;
  bool depthwise = false;                        // one input channel per group: the direct kernel
  PhasePlanes phases;                            // implicit
  cpu::MemoryArray<std::ptrdiff_t> row_offsets;  // implicit: im2col row k's window in the phase planes
  ConvScratch scratch;                           // set at load, where forward finds its buffers
  // With a folded BatchNorm: the bias after it, and for a convolution that reads its weights
  // unpacked (depthwise, or f64) the scaled weights.
  cpu::MemoryArray<T> folded_bias;
  cpu::MemoryArray<T> folded_weight;
};
using ConvState = ConvStateOf<float>;

/// The per-worker scratch layout of one image's group with the columns made as `columns`: k rows
/// of p output pixels, og output channels of ho x wo; for implicit, the phase planes' floats and
/// width qw. Used when a kernel is prepared and when its memory is planned.
constexpr ConvScratch conv_scratch(ConvColumns columns, std::int64_t k, std::int64_t p, std::int64_t og,
                                   std::int64_t ho, std::int64_t wo, std::int64_t phase_floats, std::int64_t qw) {
  ConvScratch l;
  std::int64_t result = 0;
  switch (columns) {
    case ConvColumns::input: break;
    case ConvColumns::implicit:
      l.columns = phase_floats;
      if (qw != wo) result = og * ho * qw;
      break;
    case ConvColumns::im2col: l.columns = k * p; break;
    case ConvColumns::transposed:
      l.columns = k * p;
      result = p * og;
      break;
  }
  const std::int64_t columns_end = (l.columns + 15) / 16 * 16;  // the result starts 64-byte aligned
  l.result = result != 0 ? columns_end : 0;
  l.total = columns_end + result;
  return l;
}

/// A convolution's sizes, for planning its memory: input [n, c, h, w], output [n, o, ho, wo].
struct ConvSizes {
  std::int64_t c = 0, h = 0, w = 0;
  std::int64_t o = 0, ho = 0, wo = 0;
  std::int64_t groups = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool folded_norm = false;  // a BatchNorm folded in
};

/// What a conv_op<T> kernel takes from the CPU context's Memory (see KernelMemory), whichever
/// column algorithm it picks: with a folded BatchNorm the scaled weights (kept by the direct and
/// f64 kernels, packed and given back by the others) and bias; in f32 the window tables, one
/// packed weight per group, and the largest scratch and GEMM workspace of the three algorithms.
template <CpuReal T>
constexpr KernelMemory conv_memory(const ConvSizes& s) {
  const std::int64_t cg = s.c / s.groups;
  const std::int64_t og = s.o / s.groups;
  const std::int64_t k = cg * s.kernel_h * s.kernel_w;
  const std::int64_t p = s.ho * s.wo;
  const auto bytes = [](std::int64_t n, std::size_t size) { return static_cast<std::size_t>(n) * size; };
  KernelMemory m;
  if (s.folded_norm) m.state += block_piece(bytes(s.o * k, sizeof(T))) + block_piece(bytes(s.o, sizeof(T)));
  if (cg == 1 && s.groups > 1) return m;  // depthwise: the direct kernel
  const bool pointwise =
      s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
  if constexpr (std::is_same_v<T, double>) {
    if (!pointwise) m.scratch = bytes(conv_scratch(ConvColumns::im2col, k, p, og, s.ho, s.wo, 0, 0).total, sizeof(T));
    return m;
  } else {
    const auto uk = static_cast<std::size_t>(k);
    const auto uog = static_cast<std::size_t>(og);
    m.state += block_piece(bytes(s.groups, sizeof(cpu::PackedMatrix))) +
               static_cast<std::size_t>(s.groups) * block_piece(cpu::packed_bytes_bound(uk, uog));
    if (pointwise) {
      m.workspace = cpu::gemm_workspace_bytes_bound({uog, static_cast<std::size_t>(p), uk}, true, false);
      return m;
    }
    m.state += block_piece(bytes(s.stride_h * s.stride_w, sizeof(std::int64_t))) +
               block_piece(bytes(k, sizeof(std::ptrdiff_t)));
    const std::int64_t qh = (s.h + 2 * s.pad_h + s.stride_h - 1) / s.stride_h;
    const std::int64_t qw = (s.w + 2 * s.pad_w + s.stride_w - 1) / s.stride_w;
    // Every phase read (at most stride_h * stride_w of them), and a row of slack (plan_phases).
    const std::int64_t phase_floats = cg * s.stride_h * s.stride_w * qh * qw + qw;
    std::int64_t scratch = 0;
    for (const ConvColumns c : {ConvColumns::implicit, ConvColumns::im2col, ConvColumns::transposed}) {
      scratch = std::max(scratch, conv_scratch(c, k, p, og, s.ho, s.wo, phase_floats, qw).total);
    }
    m.scratch = bytes(scratch, sizeof(float));
    m.workspace =
        std::max({cpu::gemm_workspace_bytes_bound({uog, static_cast<std::size_t>(s.ho * qw), uk}, true, false),
                  cpu::gemm_workspace_bytes_bound({uog, static_cast<std::size_t>(p), uk}, true, false),
                  cpu::gemm_workspace_bytes_bound({static_cast<std::size_t>(p), uog, uk}, false, true)});
    return m;
  }
}

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>& op, const ConvArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const conv_op<T>& op, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu);

#if TEENY_TRAINING
/// After the weight changed (an optimizer step): repacks it in place, allocating nothing. A
/// folded BatchNorm cannot be refreshed (the training lowering folds none).
template <CpuReal T>
Result<void> refresh_kernel(const conv_op<T>& op, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu);
/// The backward runs image by image (images split over the threads) and group by group on the
/// im2col matrix: dW_g += dz_g cols^T, dcols = W_g^T dz_g scattered back into dx (col2im), db +=
/// the row sums of dz.
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const conv_op<T>& op, const ConvBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const conv_op<T>& op, const ConvBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
namespace {

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

// Rows [row_begin, row_end) of the K x P im2col matrix of one image's group (`x`: its first input
// channel): row (c, i, j), column (oh, ow) holds x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 in
// the padding.
template <class T>
void im2col(const T* x, const Geometry& g, const Window2d& win, T* cols, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  // Stride 1 with the output as wide as the input ("same" padding, as in most 3x3 layers): the
  // valid output rows of a (c, i, j) row read consecutive input rows, so they are one shifted copy
  // of the plane, after which the columns that wrapped around into a neighbouring row are zeroed.
  // That is one copy per row of the matrix instead of one per output row: these rows are short.
  const bool shifted_copy = win.stride_h == 1 && win.stride_w == 1 && g.wo == g.w;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int64_t c = r / khw;
    const std::int64_t i = (r / win.kernel_w) % win.kernel_h;
    const std::int64_t j = r % win.kernel_w;
    const T* plane = x + c * g.h * g.w;
    const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
    const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
    const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
    const auto [lo, hi] = inside(iw0, win.stride_w, g.w, g.wo);
    T* __restrict dst = cols + r * g.p;
    zero(dst, oh_lo * g.wo);
    zero(dst + oh_hi * g.wo, (g.ho - oh_hi) * g.wo);
    if (oh_lo >= oh_hi) continue;
    if (shifted_copy) {
      const std::int64_t first = oh_lo * g.wo + lo;
      const std::int64_t last = (oh_hi - 1) * g.wo + hi;
      if (last > first) {
        std::memcpy(dst + first, plane + ih0 * g.w + iw0 + first, static_cast<std::size_t>(last - first) * sizeof(T));
      }
      for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
        zero(dst + oh * g.wo, lo);
        zero(dst + oh * g.wo + hi, g.wo - hi);
      }
      continue;
    }
    for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
      T* __restrict out = dst + oh * g.wo;
      const T* __restrict row = plane + (oh * win.stride_h + ih0) * g.w;
      zero(out, lo);
      if (win.stride_w == 1) {
        copy_short(out + lo, row + iw0 + lo, hi - lo);
      } else {
        for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] = row[iw0 + ow * win.stride_w];
      }
      zero(out + hi, g.wo - hi);
    }
  }
}

// Channels [c_begin, c_end), plane rows [q_begin, q_end) of the phase planes of one image's group (`x`: its
// first channel).
void fill_phases(const float* x, const Geometry& g, const Window2d& win, const PhasePlanes& ph, float* planes,
                 std::int64_t c_begin, std::int64_t c_end, std::int64_t q_begin, std::int64_t q_end) {
  const std::int64_t plane = ph.qh * ph.qw;
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    const float* in = x + c * g.h * g.w;
    for (std::int64_t a = 0; a < ph.sh; ++a) {
      for (std::int64_t b = 0; b < ph.sw; ++b) {
        const std::int64_t slot = ph.slot[static_cast<std::size_t>(a * ph.sw + b)];
        if (slot < 0) continue;
        float* q = planes + (c * ph.used + slot) * plane;
        // Plane row r is input row r * sh + a - ph; column t is input column t * sw + b - pw.
        const auto [in_lo, in_hi] = inside(a - win.pad_h, ph.sh, g.h, ph.qh);
        const std::int64_t r_lo = std::clamp(in_lo, q_begin, q_end);
        const std::int64_t r_hi = std::clamp(in_hi, r_lo, q_end);
        const auto [t_lo, t_hi] = inside(b - win.pad_w, ph.sw, g.w, ph.qw);
        zero(q + q_begin * ph.qw, (r_lo - q_begin) * ph.qw);
        zero(q + r_hi * ph.qw, (q_end - r_hi) * ph.qw);
        for (std::int64_t r = r_lo; r < r_hi; ++r) {
          float* __restrict dst = q + r * ph.qw;
          const float* __restrict row = in + (r * ph.sh + a - win.pad_h) * g.w + b - win.pad_w;
          zero(dst, t_lo);
          if (ph.sw == 1 && t_hi - t_lo >= 32) {
            std::memcpy(dst + t_lo, row + t_lo, static_cast<std::size_t>(t_hi - t_lo) * sizeof(float));
          } else if (ph.sw == 1) {
            copy_short(dst + t_lo, row + t_lo, t_hi - t_lo);
          } else {
            for (std::int64_t t = t_lo; t < t_hi; ++t) dst[t] = row[t * ph.sw];
          }
          zero(dst + t_hi, ph.qw - t_hi);
        }
      }
    }
  }
}

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

// A 1x1, stride-1, unpadded convolution: its GEMM reads the input as it is.
bool pointwise(const Window2d& win) {
  return win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 && win.stride_w == 1 && win.pad_h == 0 &&
         win.pad_w == 0;
}

// The phase planes of an implicit-GEMM convolution and each im2col row's window in them; false
// when `memory` has no room for their tables.
bool plan_phases(const Geometry& g, const Window2d& win, ConvState& state, cpu::Memory& memory) {
  PhasePlanes& ph = state.phases;
  ph.sh = win.stride_h;
  ph.sw = win.stride_w;
  ph.qh = (g.h + 2 * win.pad_h + ph.sh - 1) / ph.sh;
  ph.qw = (g.w + 2 * win.pad_w + ph.sw - 1) / ph.sw;
  ph.slot = cpu::MemoryArray<std::int64_t>(memory, static_cast<std::size_t>(ph.sh * ph.sw));
  state.row_offsets = cpu::MemoryArray<std::ptrdiff_t>(memory, static_cast<std::size_t>(g.k));
  if (!ph.slot.ok() || !state.row_offsets.ok()) return false;
  for (std::int64_t& slot : ph.slot) slot = -1;
  ph.used = 0;
  for (std::int64_t i = 0; i < win.kernel_h; ++i) {
    for (std::int64_t j = 0; j < win.kernel_w; ++j) {
      auto& slot = ph.slot[static_cast<std::size_t>((i * win.dilation_h % ph.sh) * ph.sw + j * win.dilation_w % ph.sw)];
      if (slot < 0) slot = ph.used++;
    }
  }
  // A window runs Ho * qw floats from its start, up to qw - 1 past the last plane's end.
  ph.floats = g.cg * ph.used * ph.qh * ph.qw + ph.qw;
  ph.reach = (win.kernel_h - 1) * win.dilation_h / ph.sh;
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  for (std::int64_t r = 0; r < g.k; ++r) {
    const std::int64_t c = r / khw;
    const std::int64_t di = (r / win.kernel_w) % win.kernel_h * win.dilation_h;
    const std::int64_t dj = r % win.kernel_w * win.dilation_w;
    const std::int64_t slot = ph.slot[static_cast<std::size_t>((di % ph.sh) * ph.sw + dj % ph.sw)];
    state.row_offsets[static_cast<std::size_t>(r)] =
        (c * ph.used + slot) * ph.qh * ph.qw + di / ph.sh * ph.qw + dj / ph.sw;
  }
  return true;
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

// Whether the (image, group) GEMMs go round the threads one whole GEMM per task; otherwise (batch
// 1) each GEMM is split over the threads.
bool one_gemm_per_task(const Geometry& g, std::int64_t threads) {
  const std::int64_t tasks = g.n * g.groups;
  return threads == 1 || tasks % threads == 0 || tasks >= 4 * threads;
}

// The cheapest way to make the columns of a convolution that is not a plain 1x1 one, by the
// GEMM's tile cost plus about a cycle and a half per float written out and read back (im2col),
// half a cycle per float packed from the phase planes (none where the kernels read them in
// place), and a cycle per float of other copies. When each GEMM is split over the threads, the
// cost is one thread's: an implicit GEMM's band of output rows and the plane rows it reads, or
// a share of the others' GEMM and copies, plus the transposed GEMM's packing of its whole
// columns operand, which every thread does for its share of the output channels.
ConvState::Columns choose_columns(const Geometry& g, const ConvState& implicit, ConvAlgorithm algorithm,
                                  std::int64_t threads) {
  using Columns = ConvState::Columns;
  switch (algorithm) {
    case ConvAlgorithm::automatic: break;
    case ConvAlgorithm::implicit: return Columns::implicit;
    case ConvAlgorithm::im2col: return Columns::im2col;
    case ConvAlgorithm::transposed: return Columns::transposed;
  }
  const cpu::GemmTile tile = cpu::gemm_tile();
  const auto kp = static_cast<double>(g.k * g.p);
  const PhasePlanes& ph = implicit.phases;
  const bool split = !one_gemm_per_task(g, threads);
  const std::int64_t band = split ? (g.ho + threads - 1) / threads : g.ho;  // output rows per thread
  const double band_share = static_cast<double>(std::min(ph.qh, band + ph.reach + 1)) / static_cast<double>(ph.qh);
  const double share = split ? 1.0 / static_cast<double>(threads) : 1.0;
  const std::int64_t wide = band * ph.qw;
  const bool cut = ph.qw != g.wo;
  const double costs[] = {
      gemm_cycles(g.og, wide, g.k, tile) + (tile.rows_in_place ? 0.0 : 0.5) * static_cast<double>(g.k * wide) +
          static_cast<double>(ph.floats) * band_share + (cut ? static_cast<double>(g.og * wide) : 0.0),
      (gemm_cycles(g.og, g.p, g.k, tile) + 1.5 * kp) * share,
      (gemm_cycles(g.p, g.og, g.k, tile) + 1.5 * kp + static_cast<double>(g.og * g.p)) * share +
          (split ? 0.5 * kp : 0.0),
  };
  const Columns choices[] = {Columns::implicit, Columns::im2col, Columns::transposed};
  std::size_t best = 0;
  for (std::size_t i = 1; i < 3; ++i) {
    if (costs[i] < costs[best]) best = i;
  }
  return choices[best];
}

template <class State>
ConvScratch scratch_layout(const Geometry& g, const State& state) {
  return conv_scratch(state.columns, g.k, g.p, g.og, g.ho, g.wo, state.phases.floats, state.phases.qw);
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

// f32: how the columns are made, chosen by cost, and the weights packed for it.
Result<ConvState> plan_packed(const Geometry& g, const Window2d& win, const float* weights, ConvState state,
                              CpuContext& cpu) {
  using Columns = ConvColumns;
  if (pointwise(win)) {
    state.columns = Columns::input;
  } else {
    if (!plan_phases(g, win, state, cpu.memory())) {
      return fail(Errc::out_of_memory, "cannot allocate the tables of ", g.k, " convolution windows");
    }
    state.columns = choose_columns(g, state, cpu.options().conv, static_cast<std::int64_t>(cpu.threads()));
    if (state.columns != Columns::implicit) {
      state.row_offsets = {};
      state.phases = {};
    }
  }
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  const bool transposed = state.columns == Columns::transposed;
  state.weights = cpu::MemoryArray<cpu::PackedMatrix>(cpu.memory(), static_cast<std::size_t>(g.groups));
  if (!state.weights.ok()) return fail(Errc::out_of_memory, "cannot allocate the table of ", g.groups, " groups");
  for (std::int64_t group = 0; group < g.groups; ++group) {
    const float* w = weights + group * g.og * g.k;
    cpu::PackedMatrix& packed = state.weights[static_cast<std::size_t>(group)];
    packed = transposed ? cpu::pack_b(k, og, w, k, true, cpu.memory()) : cpu::pack_a(og, k, w, k, false, cpu.memory());
    if (!packed.ok() && og * k != 0) {
      return fail(Errc::out_of_memory, "cannot pack the ", g.og, "x", g.k, " weight of group ", group);
    }
  }
  state.scratch = scratch_layout(g, state);
  if (!cpu.reserve_scratch(static_cast<std::size_t>(state.scratch.total) * sizeof(float))) {
    return fail(Errc::out_of_memory, "cannot allocate ", state.scratch.total, " floats of convolution scratch");
  }
  // Any worker may run any of the GEMMs: size every worker's GEMM workspace now.
  const std::int64_t width = state.columns == Columns::implicit ? g.ho * state.phases.qw : g.p;
  const cpu::GemmShape shape = transposed ? cpu::GemmShape{static_cast<std::size_t>(g.p), og, k}
                                          : cpu::GemmShape{og, static_cast<std::size_t>(width), k};
  if (!cpu.reserve_gemm_workspace(cpu::gemm_workspace_bytes(shape, !transposed, transposed))) {
    return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  }
  return state;
}

// f32, not depthwise: the GEMMs on packed weights, with the columns made as prepared.
void run_packed(const ConvArgs<float>& args, ConvState& state, CpuContext& cpu) {
  using Columns = ConvColumns;
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  const float* x = args.x.data;
  // nullptr without bias; a folded BatchNorm's shift replaces it
  const float* bias = state.folded_bias.empty() ? args.bias.data : state.folded_bias.data();
  float* y = args.y.data;
  // A folded residual add: the sum, then the activation, where each part of y is finished (the
  // GEMM's own epilogue then stops at the bias).
  const float* residual = args.residual.data;
  auto add_residual_to = [&](float* out, std::int64_t n) {
    add_residual(out, out, residual + (out - y), n, args.epilogue);
  };
  cpu::ThreadPool& pool = cpu.pool();

  const Columns mode = state.columns;
  cpu::Epilogue epilogue;
  epilogue.bias_axis = mode == Columns::transposed ? cpu::BiasAxis::column : cpu::BiasAxis::row;
  const bool fused = residual == nullptr && gemm_activation(args.epilogue, epilogue.activation);
  epilogue.slope = static_cast<float>(args.epilogue.params.alpha);
  const ConvScratch& layout = state.scratch;
  const std::int64_t qw = state.phases.qw;
  // Task t is image t / groups, group t % groups.
  auto input = [&](std::int64_t t) { return x + ((t / g.groups) * g.c + (t % g.groups) * g.cg) * g.h * g.w; };
  auto output = [&](std::int64_t t) { return y + ((t / g.groups) * g.o + (t % g.groups) * g.og) * g.p; };
  // Implicit: task t's phase planes in `cols`, plane rows [q_begin, q_end) of every channel, and
  // the slack the last windows read.
  auto fill_planes = [&](std::int64_t t, float* cols, std::int64_t q_begin, std::int64_t q_end) {
    fill_phases(input(t), g, win, state.phases, cols, 0, g.cg, q_begin, q_end);
    zero(cols + state.phases.floats - qw, qw);
  };
  // Runs task t's GEMM unless implicit (implicit_band): into the output, or transposed into
  // `result` for finish() to place.
  auto gemm = [&](std::int64_t t, const float* cols, float* result) {
    const std::int64_t group = t % g.groups;
    cpu::Epilogue e = epilogue;
    e.bias = bias != nullptr ? bias + group * g.og : nullptr;
    const cpu::PackedMatrix& w = state.weights[static_cast<std::size_t>(group)];
    const auto og = static_cast<std::size_t>(g.og);
    const auto k = static_cast<std::size_t>(g.k);
    const auto p = static_cast<std::size_t>(g.p);
    switch (mode) {
      case Columns::input: cpu::sgemm({og, p, k}, w, input(t), p, false, output(t), p, e, pool); break;
      case Columns::im2col: cpu::sgemm({og, p, k}, w, cols, p, false, output(t), p, e, pool); break;
      case Columns::implicit: break;  // implicit_band runs these
      case Columns::transposed: cpu::sgemm({p, og, k}, cols, p, true, w, result, og, e, pool); break;
    }
  };
  // Adds the residual to output channels [begin, end) of task t, which its GEMM wrote in place.
  auto finish_in_place = [&](std::int64_t t, std::int64_t begin, std::int64_t end) {
    if (residual != nullptr) add_residual_to(output(t) + begin * g.p, (end - begin) * g.p);
  };
  // Output rows [oh0, oh1) of implicit task t from its phase planes `cols`: the GEMM over those
  // rows' wide columns, into `result` (compact, og x (oh1 - oh0) * qw) and then cut, or straight
  // into the output when the planes are exactly Wo wide.
  auto implicit_band = [&](std::int64_t t, const float* cols, float* result, std::int64_t oh0, std::int64_t oh1) {
    const std::int64_t group = t % g.groups;
    cpu::Epilogue e = epilogue;
    e.bias = bias != nullptr ? bias + group * g.og : nullptr;
    const auto n = static_cast<std::size_t>((oh1 - oh0) * qw);
    const cpu::RowTable rows{cols + oh0 * qw, state.row_offsets.data()};
    const cpu::PackedMatrix& w = state.weights[static_cast<std::size_t>(group)];
    const cpu::GemmShape shape{static_cast<std::size_t>(g.og), n, static_cast<std::size_t>(g.k)};
    float* out = output(t);
    if (result == nullptr) {
      cpu::sgemm(shape, w, rows, out + oh0 * g.wo, static_cast<std::size_t>(g.p), e, pool);
      if (residual == nullptr) return;
      for (std::int64_t o = 0; o < g.og; ++o) add_residual_to(out + o * g.p + oh0 * g.wo, (oh1 - oh0) * g.wo);
      return;
    }
    cpu::sgemm(shape, w, rows, result, n, e, pool);
    for (std::int64_t o = 0; o < g.og; ++o) {
      for (std::int64_t oh = oh0; oh < oh1; ++oh) {
        float* dst = out + o * g.p + oh * g.wo;
        const float* src = result + o * static_cast<std::int64_t>(n) + (oh - oh0) * qw;
        if (residual != nullptr) {
          add_residual(dst, src, residual + (dst - y), g.wo, args.epilogue);
        } else {
          std::memcpy(dst, src, static_cast<std::size_t>(g.wo) * sizeof(float));
        }
      }
    }
  };
  // Output channels [begin, end) of transposed task t from its pixels x channels GEMM result.
  auto finish = [&](std::int64_t t, const float* result, std::int64_t begin, std::int64_t end) {
    float* out = output(t);
    for (std::int64_t o = begin; o < end; ++o) {
      for (std::int64_t i = 0; i < g.p; ++i) out[o * g.p + i] = result[i * g.og + o];
      if (residual != nullptr) add_residual_to(out + o * g.p, g.p);
    }
  };

  const std::int64_t tasks = g.n * g.groups;
  const auto threads = static_cast<std::int64_t>(pool.size());
  if (one_gemm_per_task(g, threads)) {
    // Enough GEMMs to go round: one task each, on one thread (the nested GEMM runs inline).
    pool.parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, std::size_t worker) {
      const auto t = static_cast<std::int64_t>(task);
      float* cols = cpu.scratch(worker);
      float* result = layout.result != 0 ? cols + layout.result : nullptr;
      if (mode == Columns::implicit) {
        fill_planes(t, cols, 0, state.phases.qh);
        return implicit_band(t, cols, result, 0, g.ho);
      }
      if (mode != Columns::input) im2col(input(t), g, win, cols, 0, g.k);
      gemm(t, cols, result);
      if (result != nullptr) {
        finish(t, result, 0, g.og);
      } else {
        finish_in_place(t, 0, g.og);
      }
    });
  } else if (mode == Columns::implicit) {
    // Few GEMMs (batch 1), implicit: each thread copies the plane rows its band of output rows
    // reads into its own scratch and computes the band from them. Sharing one copy made by both
    // threads would move half of what each reads from the other core's cache.
    // Output row oh reads plane rows oh .. oh + reach; the row after them holds what the last
    // window's discarded columns run into.
    const std::int64_t reach = state.phases.reach;
    for (std::int64_t t = 0; t < tasks; ++t) {
      pool.parallel_for(static_cast<std::size_t>(threads), [&](std::size_t band, std::size_t worker) {
        const std::int64_t oh0 = g.ho * static_cast<std::int64_t>(band) / threads;
        const std::int64_t oh1 = g.ho * static_cast<std::int64_t>(band + 1) / threads;
        if (oh0 == oh1) return;
        float* cols = cpu.scratch(worker);
        fill_planes(t, cols, oh0, std::min(state.phases.qh, oh1 + reach + 1));
        implicit_band(t, cols, layout.result != 0 ? cols + layout.result : nullptr, oh0, oh1);
      });
    }
  } else {
    // Few GEMMs (batch 1), im2col or transposed: each spreads over the threads itself, and so do
    // its copies.
    float* cols = cpu.scratch(0);
    float* result = layout.result != 0 ? cols + layout.result : nullptr;
    for (std::int64_t t = 0; t < tasks; ++t) {
      if (mode != Columns::input) {
        parallel_chunks(cpu, g.k, g.p,
                        [&](std::int64_t begin, std::int64_t end) { im2col(input(t), g, win, cols, begin, end); });
      }
      gemm(t, cols, result);
      if (result != nullptr) {
        parallel_chunks(cpu, g.og, g.p, [&](std::int64_t begin, std::int64_t end) { finish(t, result, begin, end); });
      } else if (residual != nullptr) {
        parallel_chunks(cpu, g.og, g.p, [&](std::int64_t begin, std::int64_t end) { finish_in_place(t, begin, end); });
      }
    }
  }
  if (!fused && residual == nullptr) apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
}

// f64 (not depthwise): each (image, group) GEMM on the input itself (1x1) or on its im2col matrix,
// one after the other, each spread over the threads by dgemm.
template <CpuReal T>
void run_unpacked(const ConvArgs<T>& args, const ConvStateOf<T>& state, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const T* weights = state.folded_weight.empty() ? args.weight.data : state.folded_weight.data();
  const T* bias = state.folded_bias.empty() ? args.bias.data : state.folded_bias.data();
  const T* residual = args.residual.data;
  cpu::GemmEpilogue<T> epilogue;
  epilogue.bias_axis = cpu::BiasAxis::row;
  // With a folded residual add, the activation comes after it.
  const bool fused = residual == nullptr && gemm_activation(args.epilogue, epilogue.activation);
  epilogue.slope = static_cast<T>(args.epilogue.params.alpha);
  T* cols = cpu.scratch_as<T>(0);
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  const auto p = static_cast<std::size_t>(g.p);
  for (std::int64_t t = 0; t < g.n * g.groups; ++t) {  // image t / groups, group t % groups
    const std::int64_t group = t % g.groups;
    const T* in = args.x.data + ((t / g.groups) * g.c + group * g.cg) * g.h * g.w;
    T* out = args.y.data + ((t / g.groups) * g.o + group * g.og) * g.p;
    if (state.columns == ConvColumns::im2col) {
      im2col(in, g, args.window, cols, 0, g.k);
      in = cols;
    }
    cpu::GemmEpilogue<T> e = epilogue;
    e.bias = bias != nullptr ? bias + group * g.og : nullptr;
    cpu::gemm({og, p, k}, weights + group * g.og * g.k, k, false, in, p, false, out, p, e, cpu.pool());
    if (residual != nullptr) add_residual(out, out, residual + (out - args.y.data), g.og * g.p, args.epilogue);
  }
  if (!fused && residual == nullptr) apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
}

}  // namespace

template <CpuReal T>
Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>&, const ConvArgs<T>& args, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  ConvStateOf<T> state;
  state.depthwise = g.cg == 1 && g.groups > 1;
  // The weights as the kernel reads them: scaled per output channel by a folded BatchNorm.
  const T* weights = args.weight.data;
  // Packed f32 weights are made from these and the scaled copy then given back.
  cpu::MemoryArray<T> scaled;
  if (args.norm_mean.data != nullptr) {
    if (auto checked = check_norm(args, g.o); !checked) return std::move(checked).error();
    const auto numel = static_cast<std::size_t>(args.weight.numel());
    scaled = cpu::MemoryArray<T>(cpu.memory(), numel);
    state.folded_bias = cpu::MemoryArray<T>(cpu.memory(), static_cast<std::size_t>(g.o));
    if (!scaled.ok() || !state.folded_bias.ok()) {
      return fail(Errc::out_of_memory, "cannot allocate the weight with the BatchNorm folded in (", numel,
                  " elements)");
    }
    const std::int64_t per_channel = g.o == 0 ? 0 : args.weight.numel() / g.o;
    for (std::int64_t o = 0; o < g.o; ++o) {
      const NormChannel fold = norm_channel(args, o);
      for (std::int64_t i = o * per_channel; i < (o + 1) * per_channel; ++i) {
        scaled[static_cast<std::size_t>(i)] = static_cast<T>(weights[i] * fold.scale);
      }
      state.folded_bias[static_cast<std::size_t>(o)] = static_cast<T>(fold.shift);
    }
    weights = scaled.data();
  }
  if (state.depthwise) {
    state.folded_weight = std::move(scaled);
    return state;
  }
  if constexpr (std::is_same_v<T, float>) {
    return plan_packed(g, win, weights, std::move(state), cpu);
  } else {
    // The GEMMs read the (scaled) weights as they are, and the input or its im2col matrix.
    state.folded_weight = std::move(scaled);
    state.columns = pointwise(win) ? ConvColumns::input : ConvColumns::im2col;
    state.scratch = scratch_layout(g, state);
    if (!cpu.reserve_scratch(static_cast<std::size_t>(state.scratch.total) * sizeof(T))) {
      return fail(Errc::out_of_memory, "cannot allocate ", state.scratch.total, " elements of convolution scratch");
    }
    return state;
  }
}

template <CpuReal T>
void run_kernel(const conv_op<T>&, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (!state.depthwise) {
    if constexpr (std::is_same_v<T, float>) {
      run_packed(args, state, cpu);
    } else {
      run_unpacked(args, state, cpu);
    }
    return;
  }
  // Depthwise: one direct loop per output plane.
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

#if TEENY_TRAINING
template <CpuReal T>
Result<void> refresh_kernel(const conv_op<T>&, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext&) {
  if (args.norm_mean.data != nullptr) {
    return fail(Errc::unsupported, "a convolution with a folded BatchNorm cannot take new weights");
  }
  // The direct kernel and the f64 GEMMs read the weights as they are: only packed ones are refilled.
  if constexpr (std::is_same_v<T, float>) {
    if (state.depthwise) return ok();
    const Geometry g = geometry(args);
    const bool transposed = state.columns == ConvColumns::transposed;
    for (std::int64_t group = 0; group < g.groups; ++group) {
      const float* w = args.weight.data + group * g.og * g.k;
      if (!cpu::repack(state.weights[static_cast<std::size_t>(group)], w, static_cast<std::size_t>(g.k), transposed) &&
          g.og * g.k != 0) {
        return fail(Errc::internal, "the packed weight of group ", group, " was lost before it could be refreshed");
      }
    }
  }
  return ok();
}

namespace {
// The im2col matrix of one image's group: cols[(c * kh + i) * kw + j][oh * Wo + ow] is the input at
// (c, oh * sh - ph + i * dh, ow * sw - pw + j * dw), zero outside it.
template <class T>
void im2col_group(const T* x, const Geometry& g, const Window2d& win, T* cols) {
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
      const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [ow_lo, ow_hi] = inside(iw0, win.stride_w, g.w, g.wo);
        T* row = cols + ((c * win.kernel_h + i) * win.kernel_w + j) * g.p;
        zero(row, oh_lo * g.wo);
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* src = x + (c * g.h + ih0 + oh * win.stride_h) * g.w + iw0;
          T* dst = row + oh * g.wo;
          zero(dst, ow_lo);
          if (win.stride_w == 1) {  // the common case: a contiguous run
            std::memcpy(dst + ow_lo, src + ow_lo, static_cast<std::size_t>(ow_hi - ow_lo) * sizeof(T));
          } else {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * win.stride_w];
          }
          zero(dst + ow_hi, g.wo - ow_hi);
        }
        zero(row + oh_hi * g.wo, (g.ho - oh_hi) * g.wo);
      }
    }
  }
}

// The transpose of im2col_group: dx += each column entry at the input position it was read from.
template <class T>
void col2im_group(const T* cols, const Geometry& g, const Window2d& win, T* dx) {
  for (std::int64_t c = 0; c < g.cg; ++c) {
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
      const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [ow_lo, ow_hi] = inside(iw0, win.stride_w, g.w, g.wo);
        const T* row = cols + ((c * win.kernel_h + i) * win.kernel_w + j) * g.p;
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* __restrict dst = dx + (c * g.h + ih0 + oh * win.stride_h) * g.w + iw0;
          const T* __restrict src = row + oh * g.wo;
          if (win.stride_w == 1) {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += src[ow];
          } else {
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * win.stride_w] += src[ow];
          }
        }
      }
    }
  }
}

// Per-worker elements of the backward's scratch: one image group's im2col matrix and its
// gradient, then the worker's own dW and db sums (added together after the images).
std::int64_t backward_scratch_elements(const Geometry& g) { return 2 * g.k * g.p + g.o * g.k + g.o; }

// dst[o] += the sum of row o of src[rows x length], accumulated in double in eight independent
// lanes (so that it vectorises).
template <class T>
void add_row_sums(const T* src, std::int64_t rows, std::int64_t length, T* dst) {
  for (std::int64_t o = 0; o < rows; ++o) {
    const T* row = src + o * length;
    double lanes[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
      for (int l = 0; l < 8; ++l) lanes[l] += row[i + l];
    }
    for (; i < length; ++i) lanes[0] += row[i];
    double sum = 0;
    for (double lane : lanes) sum += lane;
    dst[o] += static_cast<T>(sum);
  }
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>& args, CpuContext& cpu) {
  const Geometry g = geometry(args.forward);
  const std::int64_t elements = backward_scratch_elements(g);
  if (!cpu.reserve_scratch(static_cast<std::size_t>(elements) * sizeof(T))) {
    return fail(Errc::out_of_memory, "cannot allocate ", elements,
                " elements of convolution backward scratch per thread");
  }
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>& args, NoState&, CpuContext& cpu) {
  const ConvArgs<T>& f = args.forward;
  epilogue_backward(f.epilogue, args.dy, f.y, cpu);  // dy now holds dz, before the activation
  const Geometry g = geometry(f);
  const Window2d& win = f.window;
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  const auto p = static_cast<std::size_t>(g.p);
  cpu::GemmEpilogue<T> accumulate;
  accumulate.accumulate = true;
  const cpu::GemmEpilogue<T> overwrite;
  // Images are split over the workers, each running its GEMMs alone (a GEMM called inside a task
  // runs on that task's thread): an image's GEMMs are too small to split well, and its dx is its
  // own. dW and db are summed per task (at most one task per thread, each summing in the scratch
  // block of its own index while it works in its thread's) and added up in task order afterwards,
  // so that the result does not depend on which thread ran which task.
  const std::int64_t tasks = std::min<std::int64_t>(g.n, static_cast<std::int64_t>(cpu.threads()));
  auto partial_dw = [&](std::size_t task) { return cpu.scratch_as<T>(task) + 2 * g.k * g.p; };
  auto partial_db = [&](std::size_t task) { return partial_dw(task) + g.o * g.k; };
  cpu.pool().parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, std::size_t worker) {
    T* cols = cpu.scratch_as<T>(worker);
    T* dcols = cols + g.k * g.p;
    T* dw = partial_dw(task);
    T* db = partial_db(task);
    std::fill(dw, dw + g.o * g.k + g.o, T(0));
    const auto t = static_cast<std::int64_t>(task);
    for (std::int64_t n = g.n * t / tasks; n < g.n * (t + 1) / tasks; ++n) {
      const T* dz = args.dy.data + n * g.o * g.p;
      for (std::int64_t group = 0; group < g.groups; ++group) {
        const T* dz_g = dz + group * g.og * g.p;
        const T* x_g = f.x.data + (n * g.c + group * g.cg) * g.h * g.w;
        if (args.dweight.data != nullptr) {  // dW_g[og, K] += dz_g[og, P] cols^T[P, K]
          im2col_group(x_g, g, win, cols);
          cpu::gemm({og, k, p}, dz_g, p, false, cols, p, true, dw + group * g.og * g.k, k, accumulate, cpu.pool());
        }
        if (args.dx.data != nullptr) {  // dcols[K, P] = W_g^T[K, og] dz_g[og, P], then col2im
          cpu::gemm({k, p, og}, f.weight.data + group * g.og * g.k, k, true, dz_g, p, false, dcols, p, overwrite,
                    cpu.pool());
          col2im_group(dcols, g, win, args.dx.data + (n * g.c + group * g.cg) * g.h * g.w);
        }
      }
      if (args.dbias.data != nullptr) add_row_sums(dz, g.o, g.p, db);
    }
  });
  for (std::size_t w = 0; w < static_cast<std::size_t>(tasks); ++w) {
    if (args.dweight.data != nullptr) {
      const T* dw = partial_dw(w);
      for (std::int64_t i = 0; i < g.o * g.k; ++i) args.dweight.data[i] += dw[i];
    }
    if (args.dbias.data != nullptr) {
      const T* db = partial_db(w);
      for (std::int64_t o = 0; o < g.o; ++o) args.dbias.data[o] += db[o];
    }
  }
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                        \
  template Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>&, const ConvArgs<T>&, CpuContext&); \
  template void run_kernel(const conv_op<T>&, const ConvArgs<T>&, ConvStateOf<T>&, CpuContext&);      \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                         \
  template Result<void> refresh_kernel(const conv_op<T>&, const ConvArgs<T>&, ConvStateOf<T>&, CpuContext&);    \
  template Result<NoState> prepare_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const conv_op<T>&, const ConvBackwardArgs<T>&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
