// teeny.cpu:conv_gemm — the convolution as one GEMM per image and group on packed weights,
// Y[O/g, Ho*Wo] = W_g[O/g, C/g*kh*kw] * columns[C/g*kh*kw, Ho*Wo], with bias and activation in its
// epilogue. The columns (the im2col matrix) are made in one of four ways (ConvMethod, chosen by
// the planner, cpu/conv/plan.cppm):
//  - input: a 1x1, stride-1, unpadded convolution reads its input as it is;
//  - implicit: the input is copied once into zero-padded planes (one per stride phase, or one per
//    kernel column: PhasePlanes), in which every im2col row is a contiguous window; the GEMM reads
//    those windows directly (cpu::RowTable) and computes each output row as wide as a plane, cut
//    to Wo afterwards where the planes are wider. For at most 16 output channels, where those
//    would fill few of the GEMM tile's rows, cpu::pixel_rows may compute the same product with an
//    output row's pixels as the tile's rows instead, reading the same windows, Wo outputs a row;
//  - im2col: the K x Ho*Wo matrix written out;
//  - transposed: Y^T = columns^T * W_g^T, output pixels as the GEMM's rows, for layers with few
//    pixels and many channels (7x7 and 14x14 maps), where the pixel count fits the register tile
//    better as rows than as columns.
// In f64 (exact checks, not speed) the columns are the input (1x1) or the im2col matrix, and the
// GEMM is dgemm on the unpacked weights (run_unpacked).
module;
#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "math/pool.hpp"  // Window2d, max_pool_span
export module teeny.cpu:conv_gemm;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;
import :pool;
import :conv_state;
import :conv_common;

namespace teeny::conv {

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

// Channels [c_begin, c_end), plane rows [q_begin, q_end) of the planes of one image's group (`x`:
// its first channel), laid out as `ph` says (PhasePlanes), zero outside the input.
void fill_phases(const float* x, const Geometry& g, const Window2d& win, const PhasePlanes& ph, float* planes,
                 std::int64_t c_begin, std::int64_t c_end, std::int64_t q_begin, std::int64_t q_end) {
  const std::int64_t plane = ph.qh * ph.qw;
  // The planes at `slot` of channels [c0, c1): plane row r, column t is input (r * sh +
  // row0, t * sw + col0). Where they meet the input is the same for every channel.
  const auto fill_slot = [&](std::int64_t slot, std::int64_t row0, std::int64_t col0, std::int64_t c0,
                             std::int64_t c1) {
    const auto [in_lo, in_hi] = inside(row0, ph.sh, g.h, ph.qh);
    const std::int64_t r_lo = std::clamp(in_lo, q_begin, q_end);
    const std::int64_t r_hi = std::clamp(in_hi, r_lo, q_end);
    const auto [t_lo, t_hi] = inside(col0, ph.sw, g.w, ph.qw);
    float* first_plane = planes + (c0 * ph.used + slot) * plane;
    const std::int64_t plane_pitch = ph.used * plane;
    for (std::int64_t c = c0; c < c1; ++c) {
      float* q = first_plane + (c - c0) * plane_pitch;
      zero(q + q_begin * ph.qw, (r_lo - q_begin) * ph.qw);
      zero(q + r_hi * ph.qw, (q_end - r_hi) * ph.qw);
    }
    if (r_lo == r_hi) return;
    // Where the first element inside the input is (when a column is), and its rows sh input rows apart.
    const std::int64_t first = c0 * g.h * g.w + (r_lo * ph.sh + row0) * g.w + col0 + t_lo * ph.sw;
    const std::int64_t pitch = ph.sh * g.w;
    if (ph.sw == 1) {
      // Whole rows, their zero margins included, every channel in one call.
      cpu::copy_rows({.src = t_lo < t_hi ? x + first : x,
                      .src_pitch = static_cast<std::size_t>(pitch),
                      .src_plane = static_cast<std::size_t>(g.h * g.w),
                      .dst = first_plane + r_lo * ph.qw,
                      .dst_pitch = static_cast<std::size_t>(ph.qw),
                      .dst_plane = static_cast<std::size_t>(plane_pitch),
                      .planes = static_cast<std::size_t>(c1 - c0),
                      .rows = static_cast<std::size_t>(r_hi - r_lo),
                      .width = static_cast<std::size_t>(ph.qw),
                      .lead = static_cast<std::size_t>(t_lo),
                      .count = static_cast<std::size_t>(t_hi - t_lo)});
      return;
    }
    for (std::int64_t c = c0; c < c1; ++c) {
      for (std::int64_t r = r_lo; r < r_hi; ++r) {
        float* __restrict out = first_plane + (c - c0) * plane_pitch + r * ph.qw;
        zero(out, t_lo);
        zero(out + t_hi, ph.qw - t_hi);
        if (t_lo == t_hi) continue;
        const float* __restrict row = x + first + (c - c0) * g.h * g.w + (r - r_lo) * pitch;
        for (std::int64_t t = t_lo; t < t_hi; ++t) out[t] = row[(t - t_lo) * ph.sw];
      }
    }
  };
  const auto fill_slots = [&](std::int64_t c0, std::int64_t c1) {
    if (ph.by_column) {
      // Plane (c, j): every padded row, from column j * dw on.
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        fill_slot(j, -win.pad_h, j * win.dilation_w - win.pad_w, c0, c1);
      }
      return;
    }
    // Plane (c, a, b): padded rows a, a + sh, ..., of those columns b, b + sw, ...
    for (std::int64_t a = 0; a < ph.sh; ++a) {
      for (std::int64_t b = 0; b < ph.sw; ++b) {
        const std::int64_t slot = ph.slot[static_cast<std::size_t>(a * ph.sw + b)];
        if (slot >= 0) fill_slot(slot, a - win.pad_h, b - win.pad_w, c0, c1);
      }
    }
  };
  // Rows copied whole: every channel in one call per slot. Gathered across (stride 2 and more):
  // channel by channel, so that a channel's input stays in L1 while each of its phases is made.
  if (ph.sw == 1) return fill_slots(c_begin, c_end);
  for (std::int64_t c = c_begin; c < c_end; ++c) fill_slots(c, c + 1);
}

// The planes of an implicit-GEMM convolution (by stride phase, or `by_column`: see PhasePlanes)
// and each im2col row's window in them; false when `memory` has no room for their tables.
bool plan_phases(const Geometry& g, const Window2d& win, bool by_column, ConvState& state, cpu::Memory& memory) {
  PhasePlanes& ph = state.phases;
  const PlaneSizes sizes = plane_sizes(g, win, by_column);
  ph.by_column = by_column;
  ph.sh = by_column ? 1 : win.stride_h;
  ph.sw = win.stride_w;
  ph.qh = sizes.qh;
  ph.qw = sizes.qw;
  ph.used = sizes.used;
  ph.reach = sizes.reach;
  ph.floats = sizes.floats;
  state.row_offsets = cpu::MemoryArray<std::ptrdiff_t>(memory, static_cast<std::size_t>(g.k));
  if (!state.row_offsets.ok()) return false;
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  if (by_column) {
    for (std::int64_t r = 0; r < g.k; ++r) {
      const std::int64_t c = r / khw;
      const std::int64_t i = (r / win.kernel_w) % win.kernel_h;
      const std::int64_t j = r % win.kernel_w;
      state.row_offsets[static_cast<std::size_t>(r)] = (c * ph.used + j) * ph.qh * ph.qw + i * win.dilation_h * ph.qw;
    }
    return true;
  }
  ph.slot = cpu::MemoryArray<std::int64_t>(memory, static_cast<std::size_t>(ph.sh * ph.sw));
  if (!ph.slot.ok()) return false;
  for (std::int64_t& slot : ph.slot) slot = -1;
  std::int64_t used = 0;
  for (std::int64_t i = 0; i < win.kernel_h; ++i) {
    for (std::int64_t j = 0; j < win.kernel_w; ++j) {
      auto& slot = ph.slot[static_cast<std::size_t>((i * win.dilation_h % ph.sh) * ph.sw + j * win.dilation_w % ph.sw)];
      if (slot < 0) slot = used++;
    }
  }
  // The phases the taps read, in the order they meet them (as many as plane_sizes counts).
  ph.used = used;
  ph.floats = plane_floats(g.cg, used, ph.qh, ph.qw);
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

// The weights [o][k] of every group as cpu::pixel_rows reads them: per group, k's output channels
// in a row of pixel_rows_pitch(og) floats, zero padded, into `out`.
void fill_pixel_weights(const Geometry& g, const float* weights, float* out) {
  const auto pitch = static_cast<std::int64_t>(cpu::pixel_rows_pitch(static_cast<std::size_t>(g.og)));
  for (std::int64_t group = 0; group < g.groups; ++group) {
    const float* w = weights + group * g.og * g.k;
    float* rows = out + group * g.k * pitch;
    for (std::int64_t k = 0; k < g.k; ++k) {
      for (std::int64_t o = 0; o < pitch; ++o) rows[k * pitch + o] = o < g.og ? w[o * g.k + k] : 0.0f;
    }
  }
}

// f32, a GEMM method (state.method, with its phase planes for implicit): the weights packed for
// it (laid out for cpu::pixel_rows where it runs the product), and its scratch and GEMM workspace
// reserved.
Result<ConvState> plan_packed(const Geometry& g, const float* weights, ConvState state, CpuContext& cpu) {
  const auto og = static_cast<std::size_t>(g.og);
  const auto k = static_cast<std::size_t>(g.k);
  const bool transposed = state.method == ConvMethod::transposed;
  if (state.pixel_rows) {
    const auto floats = static_cast<std::size_t>(g.groups * g.k) * cpu::pixel_rows_pitch(og);
    state.pixel_weights = cpu::MemoryArray<float>(cpu.memory(), floats);
    if (!state.pixel_weights.ok() && floats != 0) {
      return fail(Errc::out_of_memory, "cannot allocate the ", g.groups, " x ", g.k, " x ", g.og,
                  " weight of a convolution by pixel rows");
    }
    fill_pixel_weights(g, weights, state.pixel_weights.data());
    state.scratch = scratch_layout(g, state);
    if (!cpu.reserve_scratch(static_cast<std::size_t>(state.scratch.total) * sizeof(float))) {
      return fail(Errc::out_of_memory, "cannot allocate ", state.scratch.total, " floats of convolution scratch");
    }
    return state;
  }
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
  const std::int64_t width = state.method == ConvMethod::implicit ? g.ho * state.phases.qw : g.p;
  const cpu::GemmShape shape = transposed ? cpu::GemmShape{static_cast<std::size_t>(g.p), og, k}
                                          : cpu::GemmShape{og, static_cast<std::size_t>(width), k};
  if (!cpu.reserve_gemm_workspace(cpu::gemm_workspace_bytes(shape, !transposed, transposed))) {
    return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  }
  return state;
}

// f32, not depthwise: the GEMMs on packed weights, with the columns made as prepared.
void run_packed(const ConvArgs<float>& args, ConvState& state, CpuContext& cpu) {
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

  const ConvMethod mode = state.method;
  cpu::Epilogue epilogue;
  epilogue.bias_axis = mode == ConvMethod::transposed ? cpu::BiasAxis::column : cpu::BiasAxis::row;
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
  // A folded max pool applied here (pool_in_scratch: 2x2 windows at stride 2): task t's output
  // channels, each ho rows `pitch` apart in `result`, pooled into y.
  const std::int64_t pooled_plane = args.pooled ? args.y.shape[2] * args.y.shape[3] : 0;
  auto pool_task = [&](std::int64_t t, const float* result, std::int64_t pitch) {
    float* out = y + ((t / g.groups) * g.o + (t % g.groups) * g.og) * pooled_plane;
    const std::int64_t pooled_h = args.y.shape[2];
    const auto pooled_w = static_cast<std::size_t>(args.y.shape[3]);
    if (g.ho == 2 * pooled_h) {
      // Every row pooled: the channels' rows follow one another in `result` as in y, one call.
      cpu::max_pool_2x2(result, static_cast<std::size_t>(pitch), out, static_cast<std::size_t>(g.og * pooled_h),
                        pooled_w);
      return;
    }
    for (std::int64_t o = 0; o < g.og; ++o) {
      cpu::max_pool_2x2(result + o * g.ho * pitch, static_cast<std::size_t>(pitch), out + o * pooled_plane,
                        static_cast<std::size_t>(pooled_h), pooled_w);
    }
  };
  // The implicit method's product for output rows [oh0, oh1) of task t from its phase planes
  // `cols`, into `dst`: each channel's rows `pitch` floats apart, ldo from one channel to the next.
  // The GEMM makes the planes' whole rows (pitch is then qw, cut to Wo by the caller where wider);
  // cpu::pixel_rows (state.pixel_rows) the Wo outputs of each.
  auto implicit_product = [&](std::int64_t t, const float* cols, std::int64_t oh0, std::int64_t oh1, float* dst,
                              std::int64_t pitch, std::int64_t ldo) {
    const std::int64_t group = t % g.groups;
    const float* group_bias = bias != nullptr ? bias + group * g.og : nullptr;
    if (state.pixel_rows) {
      const std::size_t weights_pitch = cpu::pixel_rows_pitch(static_cast<std::size_t>(g.og));
      cpu::PixelRows p;
      p.x = cols + oh0 * qw;
      p.x_pitch = static_cast<std::size_t>(qw);
      p.offsets = state.row_offsets.data();
      p.depth = static_cast<std::size_t>(g.k);
      p.rows = static_cast<std::size_t>(oh1 - oh0);
      p.width = static_cast<std::size_t>(g.wo);
      p.weights = state.pixel_weights.data() + static_cast<std::size_t>(group * g.k) * weights_pitch;
      p.channels = static_cast<std::size_t>(g.og);
      p.bias = group_bias;
      p.relu = epilogue.activation == cpu::Activation::relu;
      p.out = dst;
      p.out_pitch = static_cast<std::size_t>(pitch);
      p.ldo = static_cast<std::size_t>(ldo);
      cpu::pixel_rows(p);  // chosen only where the kernel exists (cpu::has_pixel_rows)
      return;
    }
    cpu::Epilogue e = epilogue;
    e.bias = group_bias;
    const cpu::GemmShape shape{static_cast<std::size_t>(g.og), static_cast<std::size_t>((oh1 - oh0) * qw),
                               static_cast<std::size_t>(g.k)};
    cpu::sgemm(shape, state.weights[static_cast<std::size_t>(group)],
               cpu::RowTable{cols + oh0 * qw, state.row_offsets.data()}, dst, static_cast<std::size_t>(ldo), e, pool);
  };
  // A folded max pool applied band by band (pool_in_bands, implicit): pooled rows [pr0, pr1) of
  // task t from its phase planes `cols`. Each band's output rows are made into `band` (og channels
  // of pool_band_rows rows qw apart) and pooled from there while they are in cache; the rows the
  // previous band made that this one's windows read too (one, for 3x3 windows at stride 2) are
  // kept, moved to the front.
  const Window2d& pw = args.pool;
  const auto reads = [&](std::int64_t pr) {  // the output rows pooled row pr reads
    return math::max_pool_span(pr, pw.kernel_h, pw.stride_h, pw.pad_h, pw.dilation_h, g.ho);
  };
  auto pooled_bands = [&](std::int64_t t, const float* cols, float* band, float* pool_rows, std::int64_t pr0,
                          std::int64_t pr1) {
    const std::int64_t group = t % g.groups;
    const std::int64_t channel = state.pool_band_rows * qw;  // floats between a band's channels
    float* out = y + ((t / g.groups) * g.o + group * g.og) * pooled_plane;
    std::int64_t have_lo = 0, have_hi = 0;  // the output rows in `band`, from its first row on
    for (std::int64_t b0 = pr0, b1 = pr0; b0 < pr1; b0 = b1) {
      const std::int64_t lo = reads(b0).first;
      for (b1 = b0 + 1; b1 < pr1 && reads(b1).end - lo <= state.pool_band_rows;) ++b1;
      const std::int64_t hi = reads(b1 - 1).end;
      const std::int64_t keep = std::max(lo, have_lo);
      const std::int64_t kept = std::max<std::int64_t>(0, have_hi - keep);
      if (kept > 0 && keep > have_lo) {
        for (std::int64_t o = 0; o < g.og; ++o) {
          float* c = band + o * channel;
          std::memmove(c, c + (keep - have_lo) * qw, static_cast<std::size_t>(kept * qw) * sizeof(float));
        }
      }
      if (const std::int64_t fresh = lo + kept; hi > fresh) {
        implicit_product(t, cols, fresh, hi, band + kept * qw, qw, channel);
      }
      have_lo = lo;
      have_hi = hi;
      for (std::int64_t o = 0; o < g.og; ++o) {
        const MaxPoolRows<float> rows{band + o * channel, lo, qw, g.ho, g.wo, out + o * pooled_plane, args.y.shape[3]};
        max_pool_rows(rows, pw, b0, b1, pool_rows);
      }
    }
  };
  // Runs task t's GEMM unless implicit (implicit_band): into the output (into `result`, to be
  // pooled, with a folded max pool), or transposed into `result` for finish() to place.
  auto gemm = [&](std::int64_t t, const float* cols, float* result) {
    const std::int64_t group = t % g.groups;
    cpu::Epilogue e = epilogue;
    e.bias = bias != nullptr ? bias + group * g.og : nullptr;
    const cpu::PackedMatrix& w = state.weights[static_cast<std::size_t>(group)];
    const auto og = static_cast<std::size_t>(g.og);
    const auto k = static_cast<std::size_t>(g.k);
    const auto p = static_cast<std::size_t>(g.p);
    float* out = state.pool_in_scratch ? result : output(t);
    switch (mode) {
      case ConvMethod::input: cpu::sgemm({og, p, k}, w, input(t), p, false, out, p, e, pool); break;
      case ConvMethod::im2col: cpu::sgemm({og, p, k}, w, cols, p, false, out, p, e, pool); break;
      case ConvMethod::implicit: break;  // implicit_band runs these
      case ConvMethod::winograd: break;  // not a GEMM method (cpu/conv/winograd.cppm)
      case ConvMethod::transposed: cpu::sgemm({p, og, k}, cols, p, true, w, result, og, e, pool); break;
    }
  };
  // Adds the residual to output channels [begin, end) of task t, which its GEMM wrote in place.
  auto finish_in_place = [&](std::int64_t t, std::int64_t begin, std::int64_t end) {
    if (residual != nullptr) add_residual_to(output(t) + begin * g.p, (end - begin) * g.p);
  };
  // Output rows [oh0, oh1) of implicit task t from its phase planes `cols`: the product over
  // those rows' wide columns, into `result` (compact, og x (oh1 - oh0) * qw) and then cut, or
  // straight into the output when its rows come out Wo wide (planes exactly Wo wide, or pixel
  // rows).
  auto implicit_band = [&](std::int64_t t, const float* cols, float* result, std::int64_t oh0, std::int64_t oh1) {
    const std::int64_t n = (oh1 - oh0) * qw;
    float* out = output(t);
    if (result == nullptr || (state.pixel_rows && !state.pool_in_scratch)) {
      implicit_product(t, cols, oh0, oh1, out + oh0 * g.wo, g.wo, g.p);
      if (residual == nullptr) return;
      for (std::int64_t o = 0; o < g.og; ++o) add_residual_to(out + o * g.p + oh0 * g.wo, (oh1 - oh0) * g.wo);
      return;
    }
    implicit_product(t, cols, oh0, oh1, result, qw, n);
    if (state.pool_in_scratch) return pool_task(t, result, qw);  // all rows: one task, one band
    for (std::int64_t o = 0; o < g.og; ++o) {
      for (std::int64_t oh = oh0; oh < oh1; ++oh) {
        float* dst = out + o * g.p + oh * g.wo;
        const float* src = result + o * n + (oh - oh0) * qw;
        if (residual != nullptr) {
          add_residual(dst, src, residual + (dst - y), g.wo, args.epilogue);
        } else {
          copy_row(dst, src, g.wo);
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
  const std::int64_t threads = state.threads;
  if (one_gemm_per_task(g, threads)) {
    // Enough GEMMs to go round: one task each, on one thread (the nested GEMM runs inline).
    pool.parallel_for(static_cast<std::size_t>(tasks), [&](std::size_t task, std::size_t worker) {
      const auto t = static_cast<std::int64_t>(task);
      float* cols = cpu.scratch(worker);
      float* result = layout.result != 0 ? cols + layout.result : nullptr;
      if (mode == ConvMethod::implicit) {
        fill_planes(t, cols, 0, state.phases.qh);
        if (state.pool_in_bands) return pooled_bands(t, cols, result, cols + layout.pool_rows, 0, args.y.shape[2]);
        return implicit_band(t, cols, result, 0, g.ho);
      }
      if (mode != ConvMethod::input) im2col(input(t), g, win, cols, 0, g.k);
      gemm(t, cols, result);
      if (state.pool_in_scratch) {
        pool_task(t, result, g.wo);
      } else if (result != nullptr) {
        finish(t, result, 0, g.og);
      } else {
        finish_in_place(t, 0, g.og);
      }
    });
  } else if (mode == ConvMethod::implicit) {
    // Few GEMMs (batch 1), implicit: each thread copies the plane rows its band of output rows
    // reads into its own scratch and computes the band from them. Sharing one copy made by both
    // threads would move half of what each reads from the other core's cache.
    // Output row oh reads plane rows oh .. oh + reach; the row after them holds what the last
    // window's discarded columns run into.
    // With a folded pool banded, the threads split the pooled rows, each making the output rows
    // its share reads (the windows across the cut: both).
    const std::int64_t reach = state.phases.reach;
    const std::int64_t rows = state.pool_in_bands ? args.y.shape[2] : g.ho;
    for (std::int64_t t = 0; t < tasks; ++t) {
      pool.parallel_for(static_cast<std::size_t>(threads), [&](std::size_t part, std::size_t worker) {
        const std::int64_t r0 = rows * static_cast<std::int64_t>(part) / threads;
        const std::int64_t r1 = rows * static_cast<std::int64_t>(part + 1) / threads;
        if (r0 == r1) return;
        float* cols = cpu.scratch(worker);
        float* result = layout.result != 0 ? cols + layout.result : nullptr;
        if (!state.pool_in_bands) {
          fill_planes(t, cols, r0, std::min(state.phases.qh, r1 + reach + 1));
          return implicit_band(t, cols, result, r0, r1);
        }
        fill_planes(t, cols, reads(r0).first, std::min(state.phases.qh, reads(r1 - 1).end + reach + 1));
        pooled_bands(t, cols, result, cols + layout.pool_rows, r0, r1);
      });
    }
  } else {
    // Few GEMMs (batch 1), im2col or transposed: each spreads over the threads itself, and so do
    // its copies.
    float* cols = cpu.scratch(0);
    float* result = layout.result != 0 ? cols + layout.result : nullptr;
    for (std::int64_t t = 0; t < tasks; ++t) {
      if (mode != ConvMethod::input) {
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
    if (state.method == ConvMethod::im2col) {
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

}  // namespace teeny::conv
