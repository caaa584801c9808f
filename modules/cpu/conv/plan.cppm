// teeny.cpu:conv_plan — the convolution's planner: which method a layer runs with (see
// cpu/conv.cppm), chosen by estimated cycles for its shape, the instruction set's register tile
// and the threads, or forced by CpuOptions::conv.
module;
#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/winograd.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv_plan;
import teeny.std;
import teeny.core;
import teeny.ops;
import :context;
import :conv_state;
import :conv_common;

namespace teeny::conv {

/// A convolution's method, and for Winograd its tile: outputs per side, 2 or 4; for implicit,
/// whether its product runs with output pixels as the register tile's rows (cpu::pixel_rows).
struct MethodChoice {
  ConvMethod method = ConvMethod::im2col;
  std::int64_t winograd_tile = 4;
  bool pixel_rows = false;
};

bool winograd_fits(const Geometry& g, const Window2d& win) {
  return teeny::winograd_fits(win.kernel_h, win.kernel_w, win.stride_h, win.stride_w, win.dilation_h, win.dilation_w,
                              g.cg, g.groups);
}

// Estimated cycles of one Winograd work item: `count` tiles of a block for `outs` output channels.
// A GEMM per point (the tiles as columns, read in place or packed), the input transform of the
// block (for F(4x4, 3x3) about 200 cycles per channel for each run of up to `lanes` tiles of one
// tile row, its staging included) and the output transform (150 per output channel and run), both
// in proportion to the points for F(2x2, 3x3), and the item's transformed filters, read at 16 bytes
// a cycle: 4x (F(2x2): 1.8x) the bytes of the plain weights, which is what rules F(4x4) out for
// wide layers on small maps at batch 1.
double winograd_item_cycles(const Geometry& g, const cpu::winograd::Plane& plane, std::int64_t count, std::int64_t outs,
                            cpu::GemmTile tile, std::int64_t lanes) {
  const auto points = static_cast<double>(plane.points());
  const double packing = tile.rows_in_place ? 0.0 : 0.5 * static_cast<double>(g.cg * count);
  const double gemms = points * (gemm_cycles(outs, count, g.cg, tile) + packing);
  const std::int64_t per_row = std::min(count, plane.tiles_w);
  const auto runs =
      static_cast<double>(((count + plane.tiles_w - 1) / plane.tiles_w) * ((per_row + lanes - 1) / lanes));
  const double transforms = runs * static_cast<double>(200 * g.cg + 150 * outs) * points /
                            static_cast<double>(cpu::winograd::kMaxPoints);  // measured for F(4x4)
  const double filters = points * static_cast<double>(outs * g.cg) * 4.0 / 16.0;
  return gemms + transforms + filters;
}

// Estimated cycles of a Winograd convolution split as `split`, for comparing with the GEMM
// methods' per-task costs: one thread's share of all items, divided by the tasks (images and
// groups) one thread runs (all of them when each task's GEMM is split over the threads).
double winograd_cycles(const Geometry& g, const cpu::winograd::Plane& plane, WinogradSplit split, std::int64_t threads,
                       cpu::GemmTile tile, std::int64_t lanes) {
  const std::int64_t tiles = g.n * plane.tiles();  // blocks run across the images of a group
  const std::int64_t blocks = (tiles + split.block - 1) / split.block;
  const std::int64_t outs = (g.og + split.parts - 1) / split.parts;
  const std::int64_t items = g.groups * blocks * split.parts;
  const double item = winograd_item_cycles(g, plane, split.block, outs, tile, lanes);
  const double mine = static_cast<double>((items + threads - 1) / threads) * item;  // one thread's share
  const std::int64_t tasks = g.n * g.groups;
  const bool per_task = one_gemm_per_task(g, threads);
  return mine * static_cast<double>(per_task ? threads : 1) / static_cast<double>(tasks);
}

// How a Winograd convolution's work is cut into items: blocks of tiles across a group's images
// (winograd_block's), each item one block, when there are enough to go round the threads; else the
// cheapest of a thread's share of the tiles per block (each thread reads all the transformed
// filters) and whole blocks with the output channels split between the threads (each reads its
// share of the filters, and transforms the input itself).
WinogradSplit winograd_split(const Geometry& g, const cpu::winograd::Plane& plane, std::int64_t threads) {
  const std::int64_t tiles = g.n * plane.tiles();
  const WinogradSplit whole{winograd_block(g.cg, g.og, tiles, plane.points()), 1};
  const std::int64_t items = g.groups * ((tiles + whole.block - 1) / whole.block);
  if (enough_to_go_round(items, threads)) return whole;
  const WinogradSplit by_tiles{std::max<std::int64_t>(1, std::min(whole.block, (tiles + threads - 1) / threads)), 1};
  const WinogradSplit by_channels{whole.block, std::min(threads, std::max<std::int64_t>(1, g.og / 16))};
  const cpu::GemmTile tile = cpu::gemm_tile();
  const std::int64_t lanes = cpu::winograd::lanes();
  WinogradSplit best = whole;
  double best_cycles = winograd_cycles(g, plane, whole, threads, tile, lanes);
  for (const WinogradSplit& split : {by_tiles, by_channels}) {
    const double cycles = winograd_cycles(g, plane, split, threads, tile, lanes);
    if (cycles < best_cycles) best = split, best_cycles = cycles;
  }
  return best;
}

// Estimated cycles of the implicit method on planes of `sizes`: the GEMM over output rows as
// wide as a plane (packed at half a cycle a float where the kernels cannot read rows in place),
// a cycle per float of the planes made, and one per float cut to Wo. When each GEMM is split over
// the threads, one thread's: its band of output rows and the plane rows those read.
double implicit_cycles(const Geometry& g, const PlaneSizes& sizes, std::int64_t threads, cpu::GemmTile tile) {
  const bool split = !one_gemm_per_task(g, threads);
  const std::int64_t band = split ? (g.ho + threads - 1) / threads : g.ho;  // output rows per thread
  const double band_share =
      static_cast<double>(std::min(sizes.qh, band + sizes.reach + 1)) / static_cast<double>(sizes.qh);
  const std::int64_t wide = band * sizes.qw;
  return gemm_cycles(g.og, wide, g.k, tile) + (tile.rows_in_place ? 0.0 : 0.5) * static_cast<double>(g.k * wide) +
         static_cast<double>(sizes.floats) * band_share + (sizes.qw != g.wo ? static_cast<double>(g.og * wide) : 0.0);
}

// Estimated cycles of the implicit method's product as cpu::pixel_rows runs it, on planes of
// `sizes`: per output row, runs of up to 16 pixels against each 16 output channels, a k step of
// m pixels costing (m + 2) / 2 cycles (its m broadcasts, the weights' vector and the window's
// offset are loads, two a cycle), and a cycle per float of the planes made; nothing is cut, the
// rows being made Wo wide. When each GEMM is split over the threads, one thread's band.
double pixel_rows_cycles(const Geometry& g, const PlaneSizes& sizes, std::int64_t threads) {
  const bool split = !one_gemm_per_task(g, threads);
  const std::int64_t band = split ? (g.ho + threads - 1) / threads : g.ho;
  const double band_share =
      static_cast<double>(std::min(sizes.qh, band + sizes.reach + 1)) / static_cast<double>(sizes.qh);
  const std::int64_t runs = (g.wo + 15) / 16;
  const double run = static_cast<double>((g.wo + runs - 1) / runs);
  const auto channel_blocks = static_cast<double>((g.og + 15) / 16);
  return static_cast<double>(band * runs) * channel_blocks * static_cast<double>(g.k) * (run + 2.0) / 2.0 +
         static_cast<double>(sizes.floats) * band_share;
}

// The cheaper way to run an implicit convolution's product on planes of `sizes`: the GEMM (output
// pixels as columns) or, where `pixels` says it fits, cpu::pixel_rows. First: its cycles.
std::pair<double, bool> implicit_product_cycles(const Geometry& g, const PlaneSizes& sizes, std::int64_t threads,
                                                cpu::GemmTile tile, bool pixels) {
  const double gemm = implicit_cycles(g, sizes, threads, tile);
  if (!pixels) return {gemm, false};
  const double rows = pixel_rows_cycles(g, sizes, threads);
  return rows < gemm ? std::pair{rows, true} : std::pair{gemm, false};
}

// Whether an implicit convolution's planes go by kernel column rather than by stride phase (see
// PhasePlanes): where the GEMM's columns it saves (the phase planes' rows are wider than the
// output) cost more than the kw copies of the input it makes. Stride 1 down the rows only; a
// kernel one column wide gains nothing. `pixels`: cpu::pixel_rows may run the product, which
// makes only the Wo outputs of a row whatever the planes.
bool planes_by_column(const Geometry& g, const Window2d& win, std::int64_t threads, bool pixels) {
  if (win.stride_h != 1 || win.kernel_w == 1) return false;
  const cpu::GemmTile tile = cpu::gemm_tile();
  return implicit_product_cycles(g, plane_sizes(g, win, true), threads, tile, pixels).first <
         implicit_product_cycles(g, plane_sizes(g, win, false), threads, tile, pixels).first;
}

// The cheapest method for a convolution that is not a plain 1x1 one (whose GEMM reads its input as
// it is), `implicit` holding its phase planes. GEMM methods: the GEMM's tile cost plus about a
// cycle and a half per float written out and read back (im2col; four for the transposed GEMM,
// which packs them by transposing and transposes its result into the output: 4-6 measured with
// `perf` on ResNet-18's stride-2 layers), half a cycle per float packed from the phase planes
// (none where the kernels read them in place), and a cycle per float of other copies. When each
// GEMM is split over the threads, the cost is one thread's: an implicit
// GEMM's band of output rows and the plane rows it reads, or a share of the others' GEMM and
// copies, plus the transposed GEMM's packing of its whole columns operand, which every thread
// does for its share of the output channels. Winograd, where it fits: winograd_cycles, for the
// cheaper of its two tile sizes.
// The implicit method's product runs as cpu::pixel_rows where `pixels` says it fits and that is
// estimated cheaper than its GEMM (pixel_rows_cycles).
// A forced method (CpuOptions::conv) is taken where it fits; a forced Winograd that does not fit
// falls back to the cheapest of the others, forced pixel rows to the implicit GEMM.
MethodChoice choose_method(const Geometry& g, const Window2d& win, const PhasePlanes& ph, ConvAlgorithm algorithm,
                           std::int64_t threads, bool pixels) {
  const bool winograd = winograd_fits(g, win);
  switch (algorithm) {
    case ConvAlgorithm::automatic: break;
    case ConvAlgorithm::implicit: return {ConvMethod::implicit};
    case ConvAlgorithm::pixel_rows: return {ConvMethod::implicit, 4, pixels};
    case ConvAlgorithm::im2col: return {ConvMethod::im2col};
    case ConvAlgorithm::transposed: return {ConvMethod::transposed};
    case ConvAlgorithm::winograd:
      if (winograd) return {ConvMethod::winograd, 4};
      break;
    case ConvAlgorithm::winograd_2x2:
      if (winograd) return {ConvMethod::winograd, 2};
      break;
  }
  const cpu::GemmTile tile = cpu::gemm_tile();
  const auto kp = static_cast<double>(g.k * g.p);
  const bool split = !one_gemm_per_task(g, threads);
  const double share = split ? 1.0 / static_cast<double>(threads) : 1.0;
  double winograd_cost = 0;
  std::int64_t winograd_tile = 4;
  if (winograd && algorithm == ConvAlgorithm::automatic) {
    for (const std::int64_t m : {4, 2}) {
      const cpu::winograd::Plane plane = cpu::winograd::plane_of(g.h, g.w, win.pad_h, win.pad_w, m);
      const double cost =
          winograd_cycles(g, plane, winograd_split(g, plane, threads), threads, tile, cpu::winograd::lanes());
      if (m == 4 || cost < winograd_cost) winograd_cost = cost, winograd_tile = m;
    }
  }
  const auto [implicit, pixel_rows] =
      implicit_product_cycles(g, {ph.qh, ph.qw, ph.used, ph.reach, ph.floats}, threads, tile, pixels);
  const struct {
    ConvMethod method;
    bool allowed;
    double cycles;
  } options[] = {
      {ConvMethod::implicit, true, implicit},
      {ConvMethod::im2col, true, (gemm_cycles(g.og, g.p, g.k, tile) + 1.5 * kp) * share},
      {ConvMethod::transposed, true,
       (gemm_cycles(g.p, g.og, g.k, tile) + 4.0 * kp + static_cast<double>(g.og * g.p)) * share +
           (split ? 0.5 * kp : 0.0)},
      {ConvMethod::winograd, winograd && algorithm == ConvAlgorithm::automatic, winograd_cost},
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < std::size(options); ++i) {
    if (options[i].allowed && options[i].cycles < options[best].cycles) best = i;
  }
  return {options[best].method, winograd_tile, options[best].method == ConvMethod::implicit && pixel_rows};
}

}  // namespace teeny::conv
