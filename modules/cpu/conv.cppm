// teeny.cpu:conv — CPU kernel of conv_op. Each (image, group) is one GEMM on the packed SGEMM:
// Y[O/g, Ho*Wo] = W_g[O/g, C/g*kh*kw] * columns[C/g*kh*kw, Ho*Wo] with bias (per row) and the
// activation in its epilogue. W_g is packed once, at load; the columns are the input itself for a
// 1x1 stride-1 unpadded convolution and its im2col otherwise, written into per-worker scratch that
// persists. Depthwise convolutions (one input channel per group) run directly: their GEMMs would
// be mostly packing.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "cpu/kernels/gemm.hpp"
#include "math/window.hpp"
export module teeny.cpu:conv;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;

export namespace teeny {

struct ConvState {
  /// How the GEMM's B operand (the columns) is made from an image's group.
  enum class Columns : std::uint8_t {
    input,   // the input as it is: a 1x1, stride-1, unpadded convolution
    im2col,  // the K x Ho*Wo im2col matrix
    wide,    // stride 1, unpadded along W: K x Ho*W, output rows computed W wide and then cut to Wo,
             // so that each im2col row is one contiguous copy instead of Ho short ones
  };
  std::vector<cpu::PackedMatrix> weights;  // per group: W_g as the GEMM's A operand
  Columns columns = Columns::im2col;
  bool depthwise = false;  // one input channel per group: the direct kernel
};

Result<ConvState> prepare_kernel(const conv_op<float>& op, const ConvArgs<float>& args, CpuContext& cpu);
void run_kernel(const conv_op<float>& op, const ConvArgs<float>& args, ConvState& state, CpuContext& cpu);

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

Geometry geometry(const ConvArgs<float>& a) {
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

// dst[0, n) = 0. Runs at the padding are a few floats: short ones are stored directly, not through
// a call to memset (which the compiler would make of a plain loop).
void zero(float* dst, std::int64_t n) {
  if (n >= 8) {
    std::memset(dst, 0, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  if (n >= 4) {
    constexpr float zeros[4] = {};
    std::memcpy(dst, zeros, sizeof zeros);
    std::memcpy(dst + n - 4, zeros, sizeof zeros);
    return;
  }
  if (n > 0) dst[0] = 0.0f;
  if (n > 1) dst[1] = 0.0f;
  if (n > 2) dst[2] = 0.0f;
}

// dst[0, n) = src[0, n) for the short runs of an im2col row (tens of floats): 16-byte moves, the
// last one overlapping, cost less than a loop's setup or a call to memcpy.
void copy_short(float* dst, const float* src, std::int64_t n) {
  if (n < 4) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (std::int64_t i = 0; i + 4 < n; i += 4) std::memcpy(dst + i, src + i, 4 * sizeof(float));
  std::memcpy(dst + n - 4, src + n - 4, 4 * sizeof(float));
}

// Rows [row_begin, row_end) of the K x P im2col matrix of one image's group (`x`: its first input
// channel): row (c, i, j), column (oh, ow) holds x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 in
// the padding.
void im2col(const float* x, const Geometry& g, const Window2d& win, float* cols, std::int64_t row_begin,
            std::int64_t row_end) {
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
    const float* plane = x + c * g.h * g.w;
    const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
    const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
    const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
    const auto [lo, hi] = inside(iw0, win.stride_w, g.w, g.wo);
    float* __restrict dst = cols + r * g.p;
    zero(dst, oh_lo * g.wo);
    zero(dst + oh_hi * g.wo, (g.ho - oh_hi) * g.wo);
    if (oh_lo >= oh_hi) continue;
    if (shifted_copy) {
      const std::int64_t first = oh_lo * g.wo + lo;
      const std::int64_t last = (oh_hi - 1) * g.wo + hi;
      if (last > first) {
        std::memcpy(dst + first, plane + ih0 * g.w + iw0 + first,
                    static_cast<std::size_t>(last - first) * sizeof(float));
      }
      for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
        zero(dst + oh * g.wo, lo);
        zero(dst + oh * g.wo + hi, g.wo - hi);
      }
      continue;
    }
    for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
      float* __restrict out = dst + oh * g.wo;
      const float* __restrict row = plane + (oh * win.stride_h + ih0) * g.w;
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

// Rows [row_begin, row_end) of the K x Ho*W "wide" im2col matrix of a stride-1 convolution
// unpadded along W: row (c, i, j), column (oh, ow) holds x[c, oh - ph + i*dh, ow + j*dw] for
// ow < Wo, and whatever follows in the plane for the Wo <= ow < W that are cut off afterwards.
void im2col_wide(const float* x, const Geometry& g, const Window2d& win, float* cols, std::int64_t row_begin,
                 std::int64_t row_end) {
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  const std::int64_t width = g.ho * g.w;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int64_t c = r / khw;
    const std::int64_t i = (r / win.kernel_w) % win.kernel_h;
    const std::int64_t j = r % win.kernel_w;
    const float* plane = x + c * g.h * g.w;
    const std::int64_t ih0 = i * win.dilation_h - win.pad_h;
    const std::int64_t iw0 = j * win.dilation_w;
    const auto [oh_lo, oh_hi] = inside(ih0, win.stride_h, g.h, g.ho);
    float* dst = cols + r * width;
    zero(dst, oh_lo * g.w);
    zero(dst + oh_hi * g.w, (g.ho - oh_hi) * g.w);
    if (oh_lo >= oh_hi) continue;
    // Consecutive input rows: one copy, stopping iw0 short of the plane's end (cut-off columns).
    const std::int64_t first = oh_lo * g.w;
    const std::int64_t last = oh_hi * g.w - iw0;
    std::memcpy(dst + first, plane + ih0 * g.w + iw0 + first, static_cast<std::size_t>(last - first) * sizeof(float));
    zero(dst + last, iw0);
  }
}

// One output plane of a depthwise convolution: `x` is its input channel, `w` its kh x kw filter.
void depthwise_plane(const float* x, const float* w, float bias, float* y, const Geometry& g, const Window2d& win) {
  for (std::int64_t oh = 0; oh < g.ho; ++oh) {
    float* out = y + oh * g.wo;
    std::fill(out, out + g.wo, bias);
    for (std::int64_t i = 0; i < win.kernel_h; ++i) {
      const std::int64_t ih = oh * win.stride_h - win.pad_h + i * win.dilation_h;
      if (ih < 0 || ih >= g.h) continue;
      const float* row = x + ih * g.w;
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const std::int64_t iw0 = j * win.dilation_w - win.pad_w;
        const auto [lo, hi] = inside(iw0, win.stride_w, g.w, g.wo);
        const float wv = w[i * win.kernel_w + j];
        for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * row[iw0 + ow * win.stride_w];
      }
    }
  }
}
}  // namespace

Result<ConvState> prepare_kernel(const conv_op<float>&, const ConvArgs<float>& args, CpuContext& cpu) {
  using Columns = ConvState::Columns;
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  ConvState state;
  state.depthwise = g.cg == 1 && g.groups > 1;
  if (state.depthwise) return state;
  if (win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 && win.stride_w == 1 && win.pad_h == 0 &&
      win.pad_w == 0) {
    state.columns = Columns::input;
  } else if (win.stride_h == 1 && win.stride_w == 1 && win.pad_w == 0 && g.wo < g.w) {
    state.columns = Columns::wide;
  }
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  for (std::int64_t group = 0; group < g.groups; ++group) {
    state.weights.push_back(cpu::pack_a(og, k, args.weight.data + group * g.og * g.k, k, false));
    if (!state.weights.back().ok() && og * k != 0) {
      return fail(Errc::out_of_memory, "cannot pack the ", g.og, "x", g.k, " weight of group ", group);
    }
  }
  // Scratch per worker: the columns, and for wide columns the wide output they make.
  const std::int64_t width = state.columns == Columns::wide ? g.ho * g.w : g.p;
  const std::int64_t floats = state.columns == Columns::input  ? 0
                              : state.columns == Columns::wide ? (g.k + g.og) * width
                                                               : g.k * width;
  if (!cpu.reserve_scratch(static_cast<std::size_t>(floats) * sizeof(float))) {
    return fail(Errc::out_of_memory, "cannot allocate the ", g.k, "x", width, " im2col buffers");
  }
  // Any worker may run any of the GEMMs: size every worker's GEMM workspace now.
  if (!cpu.reserve_gemm_workspace(cpu::gemm_workspace_bytes({og, static_cast<std::size_t>(width), k}, true, false))) {
    return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  }
  return state;
}

void run_kernel(const conv_op<float>&, const ConvArgs<float>& args, ConvState& state, CpuContext& cpu) {
  using Columns = ConvState::Columns;
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  const float* x = args.x.data;
  const float* bias = args.bias.data;  // nullptr without bias
  float* y = args.y.data;
  cpu::ThreadPool& pool = cpu.pool();

  if (state.depthwise) {
    const std::int64_t khw = win.kernel_h * win.kernel_w;
    parallel_chunks(cpu, g.n * g.o, g.p * khw, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t plane = begin; plane < end; ++plane) {
        const std::int64_t n = plane / g.o;
        const std::int64_t o = plane % g.o;
        const float* in = x + (n * g.c + o / g.og) * g.h * g.w;
        depthwise_plane(in, args.weight.data + o * khw, bias != nullptr ? bias[o] : 0.0f, y + plane * g.p, g, win);
      }
    });
    if (args.epilogue.active) apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
    return;
  }

  cpu::Epilogue epilogue;
  epilogue.bias_axis = cpu::BiasAxis::row;
  const bool fused = gemm_activation(args.epilogue, epilogue.activation);
  epilogue.slope = args.epilogue.params.alpha;
  const bool wide = state.columns == Columns::wide;
  const std::int64_t width = wide ? g.ho * g.w : g.p;  // columns of B and of the GEMM's output
  auto input = [&](std::int64_t t) { return x + ((t / g.groups) * g.c + (t % g.groups) * g.cg) * g.h * g.w; };
  auto output = [&](std::int64_t t) { return y + ((t / g.groups) * g.o + (t % g.groups) * g.og) * g.p; };
  auto columns = [&](const float* in, float* cols, std::int64_t begin, std::int64_t end) {
    if (wide) {
      im2col_wide(in, g, win, cols, begin, end);
    } else {
      im2col(in, g, win, cols, begin, end);
    }
  };
  // C = W_g * B for task t's group, into `c` (row stride `width`).
  auto gemm = [&](std::int64_t t, const float* b, float* c) {
    const std::int64_t group = t % g.groups;
    cpu::Epilogue e = epilogue;
    e.bias = bias != nullptr ? bias + group * g.og : nullptr;
    const auto n = static_cast<std::size_t>(width);
    cpu::sgemm({static_cast<std::size_t>(g.og), n, static_cast<std::size_t>(g.k)},
               state.weights[static_cast<std::size_t>(group)], b, n, false, c, n, e, pool);
  };
  // Output rows [begin, end) of a wide GEMM result, cut from W to Wo columns.
  auto cut = [&](const float* c, float* out, std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      std::memcpy(out + row * g.wo, c + row * g.w, static_cast<std::size_t>(g.wo) * sizeof(float));
    }
  };

  const std::int64_t tasks = g.n * g.groups;
  const auto threads = static_cast<std::int64_t>(pool.size());
  if (threads == 1 || tasks % threads == 0 || tasks >= 4 * threads) {
    // Enough GEMMs to go round: one task each, on one thread (the nested GEMM runs inline).
    pool.parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, std::size_t worker) {
      const auto t = static_cast<std::int64_t>(task);
      if (state.columns == Columns::input) return gemm(t, input(t), output(t));
      float* cols = cpu.scratch(worker);
      columns(input(t), cols, 0, g.k);
      if (!wide) return gemm(t, cols, output(t));
      float* c = cols + g.k * width;
      gemm(t, cols, c);
      cut(c, output(t), 0, g.og * g.ho);
    });
  } else {
    // Few GEMMs (batch 1): each spreads over the threads itself, and so do its copies.
    for (std::int64_t t = 0; t < tasks; ++t) {
      if (state.columns == Columns::input) {
        gemm(t, input(t), output(t));
        continue;
      }
      float* cols = cpu.scratch(0);
      parallel_chunks(cpu, g.k, width,
                      [&](std::int64_t begin, std::int64_t end) { columns(input(t), cols, begin, end); });
      if (!wide) {
        gemm(t, cols, output(t));
        continue;
      }
      float* c = cols + g.k * width;
      gemm(t, cols, c);
      parallel_chunks(cpu, g.og * g.ho, g.wo,
                      [&](std::int64_t begin, std::int64_t end) { cut(c, output(t), begin, end); });
    }
  }
  if (!fused) apply_unary_inplace(args.y, args.epilogue.fn, args.epilogue.params, cpu);
}

}  // namespace teeny
