// teeny.cpu:conv_state — what a convolution's CPU kernel keeps between load and forward (its
// method, packed weights, tables and scratch layout) and what it takes from the CPU context's
// Memory, planned from the shapes alone (conv_memory, for typed models). See cpu/conv.cppm for
// the methods themselves.
module;
#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "cpu/kernels/winograd.hpp"
export module teeny.cpu:conv_state;
import teeny.std;
import teeny.core;
import teeny.model;
import :context;

export namespace teeny {

/// The zero-padded input of an implicit-GEMM convolution, laid out so that each im2col row is one
/// contiguous window of a plane, in one of two ways:
///  - by stride phase: plane (c, a, b) holds padded-input rows a, a + sh, a + 2sh, ... and, of
///    those, columns b, b + sw, ... Tap (i, j) of output (oh, ow) is element (oh + i*dh/sh,
///    ow + j*dw/sw) of plane (c, i*dh % sh, j*dw % sw). A plane is wider than the output (its
///    windows run over the padding), so each output row is computed qw wide and cut to Wo.
///  - by kernel column (`by_column`, stride_h 1 only): plane (c, j) holds every padded-input row,
///    and of it columns j*dw, j*dw + sw, ... exactly Wo of them. Tap (i, j) of output (oh, ow) is
///    element (oh + i*dh, ow) of plane (c, j). The planes hold kw copies of the input, but the GEMM
///    computes no column to throw away: it pays where the kernel is wide and the map narrow
///    (LeNet's 5x5 on 14x14: 100 output pixels instead of 140).
struct PhasePlanes {
  bool by_column = false;
  std::int64_t sh = 1, sw = 1;          // strides: phases per dim (by_column: sh 1, sw the stride)
  std::int64_t qh = 0, qw = 0;          // rows and columns of a plane
  cpu::MemoryArray<std::int64_t> slot;  // per phase a * sw + b: its plane's index, or -1 when no tap reads it
  std::int64_t used = 0;                // planes per channel: phases read by some tap, or kernel columns
  std::int64_t reach = 0;               // plane rows an output row reads below its own: taps' (i * dh) / sh
  std::int64_t floats = 0;              // cg * used planes, plus a row of slack for the last windows
};

/// Elements of per-worker scratch: the columns (phase planes or im2col matrix; Winograd: the
/// transformed input), then the GEMM's result where it cannot go straight to the output (wide rows
/// to cut, transposed, or Winograd's transformed output).
struct ConvScratch {
  std::int64_t columns = 0;
  std::int64_t result = 0;     // offset of the result area; 0 when the GEMM writes the output directly
  std::int64_t pool_rows = 0;  // pool_in_bands: offset of the max pool's row buffer
  std::int64_t total = 0;
};

/// How a convolution that is not depthwise runs (see cpu/conv.cppm): a GEMM per image and group
/// on its im2col operand, made in one of four ways, or Winograd's GEMMs on transformed tiles (36
/// for F(4x4, 3x3), 16 for F(2x2, 3x3)).
enum class ConvMethod : std::uint8_t { input, implicit, im2col, transposed, winograd };

/// How a Winograd convolution's work is cut into items: blocks of `block` tiles of an image, each
/// for all its output channels or (batch 1 on several threads) for one of `parts` shares of them.
struct WinogradSplit {
  std::int64_t block = 1;
  std::int64_t parts = 1;
};

/// Winograd F(m x m, 3x3), m = plane.m: tiles are transformed, multiplied and written back in
/// items (`split`), each block's values `stride` floats apart per channel (block + the lanes'
/// slack); the input transform works in `staging` floats of scratch.
struct WinogradPlan {
  cpu::winograd::Plane plane;
  WinogradSplit split;
  std::int64_t stride = 0;
  std::int64_t staging = 0;
  cpu::MemoryArray<std::ptrdiff_t> rows;  // the GEMM's B rows in a point's block: channel c at c * stride
#if TEENY_TRAINING
  cpu::MemoryArray<float> filters;  // the transformed filters unpacked, to refresh the packed ones in place
#endif
};

/// What a convolution's kernel prepares at load, per element type T, in the CPU context's Memory.
/// f64 convolutions take the simplest path (input or im2col, unpacked weights, dgemm): they are
/// there for exact checks.
template <CpuReal T>
struct ConvStateOf {
  // f32, per group: W_g as the A operand (W_g^T as B: transposed); Winograd: per group, share of
  // the output channels and point, the transformed filters U[xi], at
  // (group * parts + part) * points + xi.
  cpu::MemoryArray<cpu::PackedMatrix> weights;
  ConvMethod method = ConvMethod::im2col;
  std::int64_t threads = 1;  // what the work is spread over: the pool's threads, or fewer (conv_threads)
  bool depthwise = false;    // one input channel per group: the direct kernel
  PhasePlanes phases;        // implicit
  cpu::MemoryArray<std::ptrdiff_t> row_offsets;  // implicit: im2col row k's window in the phase planes
  // implicit, its product run by cpu::pixel_rows (output pixels as the tile's rows): per group, the
  // weights with each k's output channels in a row of cpu::pixel_rows_pitch(og) floats (`weights`
  // then holds nothing)
  bool pixel_rows = false;
  cpu::MemoryArray<float> pixel_weights;
  WinogradPlan winograd;  // winograd
  ConvScratch scratch;    // set at load, where forward finds its buffers
  // With a folded BatchNorm: the bias after it, and for a convolution that reads its weights
  // unpacked (depthwise, or f64) the scaled weights.
  cpu::MemoryArray<T> folded_bias;
  cpu::MemoryArray<T> folded_weight;
  // A folded max pool (ConvArgs::pooled): each image's output pooled from the GEMM's result in
  // scratch (pool_in_scratch: 2x2 windows at stride 2, one GEMM per task); or made and pooled in
  // bands of pool_band_rows output rows in scratch (pool_in_bands: implicit); or else the whole
  // convolution run into `unpooled` and pooled from there by the max pool's kernel.
  bool pool_in_scratch = false;
  bool pool_in_bands = false;
  std::int64_t pool_band_rows = 0;
  cpu::MemoryArray<T> unpooled;
};
using ConvState = ConvStateOf<float>;

/// Floats between two points' matrices of a Winograd block (`rows` channels `stride` apart): 16 more
/// than they take, so that the points' values of a tile, which the transforms read or write
/// together, fall in different sets of the L1 cache rather than all in one.
constexpr std::int64_t winograd_point_floats(std::int64_t rows, std::int64_t stride) { return rows * stride + 16; }

/// The per-worker scratch layout of one image's group run as `method`: k rows of p output pixels,
/// og output channels of ho x wo; for implicit, the phase planes' floats and width qw; for
/// Winograd, the input channels cg, the transformed tile's points and the plan's block stride and
/// staging (after the transformed input).
constexpr ConvScratch conv_scratch(ConvMethod method, std::int64_t k, std::int64_t p, std::int64_t og, std::int64_t ho,
                                   std::int64_t wo, std::int64_t phase_floats, std::int64_t qw, std::int64_t cg = 0,
                                   std::int64_t winograd_points = 0, std::int64_t winograd_stride = 0,
                                   std::int64_t winograd_staging = 0) {
  ConvScratch l;
  std::int64_t result = 0;
  switch (method) {
    case ConvMethod::input: break;
    case ConvMethod::implicit:
      l.columns = phase_floats;
      if (qw != wo) result = og * ho * qw;
      break;
    case ConvMethod::im2col: l.columns = k * p; break;
    case ConvMethod::transposed:
      l.columns = k * p;
      result = p * og;
      break;
    case ConvMethod::winograd:
      l.columns = winograd_points * winograd_point_floats(cg, winograd_stride) + winograd_staging;
      result = winograd_points * winograd_point_floats(og, winograd_stride);
      break;
  }
  const std::int64_t columns_end = (l.columns + 15) / 16 * 16;  // the result starts 64-byte aligned
  l.result = result != 0 ? columns_end : 0;
  l.total = columns_end + result;
  return l;
}

/// Tiles a Winograd convolution transforms and multiplies at once, of `tiles` (a group's, across
/// the batch's images), split evenly into blocks and rounded up to whole vectors of 16 tiles. As
/// few blocks as keep a block's transformed input and output (points * (cg + og) floats per tile)
/// within about 2 MiB (the L2 cache of recent cores, and some of L3): measured on Zen 4 with
/// F(4x4) (ResNet-18's 3x3 layers, 16 to 196 tiles), blocks from 48 tiles up all run within noise
/// of each other, and smaller ones lose up to 20 %. But each block reads all the transformed
/// filters (points * cg * og floats), from memory once they outgrow that cache. Then, where it
/// moves fewer bytes, as few blocks as keep one point's share of a block (what one GEMM reads and
/// writes, (cg + og) floats per tile) within 512 KiB, the transformed input and output counted as
/// moved four times (written, read back, and the cache lines fetched for both writes). ResNet-18
/// at batch 8 on a Xeon (filters from DRAM at ~14 GB/s): layer4's 3x3 convolutions -25-30 % in
/// one block instead of four; all of layer2's in one block, +60 %, which this count avoids.
constexpr std::int64_t winograd_block(std::int64_t cg, std::int64_t og, std::int64_t tiles, std::int64_t points) {
  if (tiles <= 0) return 1;
  constexpr std::int64_t kCache = std::int64_t{2} << 20;  // bytes
  constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
  const auto blocks_within = [tiles](std::int64_t bytes, std::int64_t per_tile) {
    const std::int64_t fit = std::max<std::int64_t>(16, bytes / std::max<std::int64_t>(1, per_tile));
    return (tiles + fit - 1) / fit;
  };
  const std::int64_t per_tile = points * (cg + og) * kFloat;
  std::int64_t blocks = blocks_within(kCache, per_tile);
  const std::int64_t filters = points * cg * og * kFloat;
  if (blocks > 1 && filters > kCache) {
    const std::int64_t fewer = blocks_within(kCache / 4, (cg + og) * kFloat);
    if (fewer * filters + 4 * tiles * per_tile < blocks * filters) blocks = fewer;
  }
  return std::min(tiles, ((tiles + blocks - 1) / blocks + 15) / 16 * 16);
}

/// Whether a convolution can run as Winograd (F(4x4, 3x3) or F(2x2, 3x3)): 3x3, stride 1, no
/// dilation, f32, and not depthwise. Embedded builds leave Winograd out (its filters take 1.8x or
/// 4x the memory).
constexpr bool winograd_fits(std::int64_t kernel_h, std::int64_t kernel_w, std::int64_t stride_h, std::int64_t stride_w,
                             std::int64_t dilation_h, std::int64_t dilation_w, std::int64_t cg, std::int64_t groups) {
#if TEENY_EMBEDDED
  (void)kernel_h, (void)kernel_w, (void)stride_h, (void)stride_w, (void)dilation_h, (void)dilation_w, (void)cg,
      (void)groups;
  return false;
#else
  return kernel_h == 3 && kernel_w == 3 && stride_h == 1 && stride_w == 1 && dilation_h == 1 && dilation_w == 1 &&
         !(cg == 1 && groups > 1);
#endif
}

/// A convolution's sizes, for planning its memory: input [n, c, h, w], output [n, o, ho, wo].
struct ConvSizes {
  std::int64_t n = 1;
  std::int64_t c = 0, h = 0, w = 0;
  std::int64_t o = 0, ho = 0, wo = 0;
  std::int64_t groups = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  bool folded_norm = false;  // a BatchNorm folded in
};

/// What a conv_op<T> kernel takes from the CPU context's Memory (see KernelMemory), whichever
/// method it picks: with a folded BatchNorm the scaled weights (kept by the direct and f64
/// kernels, packed and given back by the others) and bias; in f32 the window tables, one packed
/// weight per group (and, for at most 16 output channels, the weights laid out for
/// cpu::pixel_rows), and the largest scratch and GEMM workspace of the GEMM methods; and where
/// Winograd fits, its transformed filters (unpacked while they are packed, then given back),
/// their packed copies, its row table, scratch and workspace. For a convolution without a folded
/// max pool: typed models, which plan with this, fold none.
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
    if (!pointwise) m.scratch = bytes(conv_scratch(ConvMethod::im2col, k, p, og, s.ho, s.wo, 0, 0).total, sizeof(T));
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
    // The weights as cpu::pixel_rows reads them, where it may run the implicit method's product.
    if (og <= 16) {
      const auto pitch = static_cast<std::int64_t>(cpu::pixel_rows_pitch(uog));
      m.state += block_piece(bytes(s.groups * k * pitch, sizeof(float)));
    }
    const std::int64_t qh = (s.h + 2 * s.pad_h + s.stride_h - 1) / s.stride_h;
    const std::int64_t qw = (s.w + 2 * s.pad_w + s.stride_w - 1) / s.stride_w;
    // Every phase read (at most stride_h * stride_w of them), and a row of slack (plan_phases).
    const std::int64_t phase_floats = cg * s.stride_h * s.stride_w * qh * qw + qw;
    // Or a plane per kernel column, Wo wide, of every padded row.
    const std::int64_t column_floats = cg * s.kernel_w * (s.h + 2 * s.pad_h) * s.wo + s.wo;
    std::int64_t scratch = conv_scratch(ConvMethod::implicit, k, p, og, s.ho, s.wo, column_floats, s.wo).total;
    for (const ConvMethod c : {ConvMethod::implicit, ConvMethod::im2col, ConvMethod::transposed}) {
      scratch = std::max(scratch, conv_scratch(c, k, p, og, s.ho, s.wo, phase_floats, qw).total);
    }
    m.workspace =
        std::max({cpu::gemm_workspace_bytes_bound({uog, static_cast<std::size_t>(s.ho * qw), uk}, true, false),
                  cpu::gemm_workspace_bytes_bound({uog, static_cast<std::size_t>(p), uk}, true, false),
                  cpu::gemm_workspace_bytes_bound({static_cast<std::size_t>(p), uog, uk}, false, true)});
    if (winograd_fits(s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, cg, s.groups)) {
      // Either tile size's: the planner picks one at load.
      std::size_t state = 0;
      for (const std::int64_t tile : {2, 4}) {
        const cpu::winograd::Plane plane = cpu::winograd::plane_of(s.h, s.w, s.pad_h, s.pad_w, tile);
        const std::int64_t block = winograd_block(cg, og, s.n * plane.tiles(), plane.points());  // across images
        const std::int64_t stride = block + cpu::winograd::kMaxLanes;
        const std::int64_t staging = cpu::winograd::input_staging_floats(plane, block);
        const auto points = static_cast<std::size_t>(s.groups * plane.points());
        state = std::max(state, block_piece(bytes(plane.points() * og * cg, sizeof(float))) +  // U, unpacked
                                    block_piece(points * sizeof(cpu::PackedMatrix)) +
                                    points * block_piece(cpu::packed_bytes_bound(static_cast<std::size_t>(cg), uog)) +
                                    block_piece(bytes(cg, sizeof(std::ptrdiff_t))));
        scratch = std::max(
            scratch,
            conv_scratch(ConvMethod::winograd, k, p, og, s.ho, s.wo, 0, 0, cg, plane.points(), stride, staging).total);
        m.workspace = std::max(m.workspace,
                               cpu::gemm_workspace_bytes_bound(
                                   {uog, static_cast<std::size_t>(stride), static_cast<std::size_t>(cg)}, true, false));
      }
      m.state += state;
    }
    m.scratch = bytes(scratch, sizeof(float));
    return m;
  }
}

}  // namespace teeny
