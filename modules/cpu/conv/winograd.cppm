// teeny.cpu:conv_winograd — 3x3 stride-1 convolutions as Winograd F(4x4, 3x3) or F(2x2, 3x3)
// (see cpu/kernels/winograd.hpp; the planner picks the tile): a group's m x m output tiles, image
// after image, are cut into blocks; a block is transformed (B^T d B, into the worker's scratch),
// multiplied by the transformed filters in one GEMM per point of an (m + 2) x (m + 2) transformed
// tile (36 or 16; the filters packed at load, the tiles read as rows in place) and transformed
// back (A^T M A) with the bias, a folded residual add and ReLU applied as the outputs are written.
// Blocks span images, so that a batch of small maps still gives the GEMMs wide operands; they go
// round the threads, and where there are too few (batch 1) a block's tiles or its output channels
// are split between the threads.
module;
#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "cpu/kernels/winograd.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv_winograd;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;
import :conv_state;
import :conv_common;
import :conv_plan;

namespace teeny::conv {

namespace wg = cpu::winograd;

// Output channels [begin, end) of a group's share `part` of them.
std::pair<std::int64_t, std::int64_t> winograd_part(const Geometry& g, const WinogradSplit& split, std::int64_t part) {
  return {g.og * part / split.parts, g.og * (part + 1) / split.parts};
}

// Transforms the filters of every group (`weights`: [o][cg][3][3], a folded BatchNorm applied)
// and packs each share's matrix of each point as the GEMM's A operand, into `state.weights`, whose
// table exists already (entries already packed are refilled in place). `u` holds one group's
// unpacked matrices, one per point.
bool pack_winograd_filters(const Geometry& g, const float* weights, float* u, ConvState& state, cpu::Memory& memory) {
  const WinogradSplit& split = state.winograd.split;
  const std::int64_t points = state.winograd.plane.points();
  const std::int64_t matrix = g.og * g.cg;
  const auto cg = static_cast<std::size_t>(g.cg);
  for (std::int64_t group = 0; group < g.groups; ++group) {
    wg::transform_filters(weights + group * matrix * 9, g.og, g.cg, state.winograd.plane.m, u);
    for (std::int64_t part = 0; part < split.parts; ++part) {
      const auto [begin, end] = winograd_part(g, split, part);
      for (std::int64_t xi = 0; xi < points; ++xi) {
        cpu::PackedMatrix& packed = state.weights[static_cast<std::size_t>((group * split.parts + part) * points + xi)];
        const float* rows = u + xi * matrix + begin * g.cg;
        if (packed.ok()) {
          cpu::repack(packed, rows, cg, false);
        } else {
          packed = cpu::pack_a(static_cast<std::size_t>(end - begin), cg, rows, cg, false, memory);
          if (!packed.ok() && (end - begin) * g.cg != 0) return false;
        }
      }
    }
  }
  return true;
}

// f32, 3x3 stride 1 (winograd_fits), the tile size in plan.plane.m: the work split, the
// transformed filters packed, and the scratch and GEMM workspace reserved.
Result<ConvState> plan_winograd(const Geometry& g, const Window2d& win, const float* weights, ConvState state,
                                CpuContext& cpu) {
  WinogradPlan& plan = state.winograd;
  plan.plane = wg::plane_of(g.h, g.w, win.pad_h, win.pad_w, plan.plane.m);
  const std::int64_t points = plan.plane.points();
  plan.split = winograd_split(g, plan.plane, state.threads);
  plan.stride = plan.split.block + wg::kMaxLanes;
  plan.staging = wg::input_staging_floats(plan.plane, plan.split.block);
  plan.rows = cpu::MemoryArray<std::ptrdiff_t>(cpu.memory(), static_cast<std::size_t>(g.cg));
  state.weights =
      cpu::MemoryArray<cpu::PackedMatrix>(cpu.memory(), static_cast<std::size_t>(g.groups * plan.split.parts * points));
  if (!plan.rows.ok() || !state.weights.ok()) {
    return fail(Errc::out_of_memory, "cannot allocate the tables of a Winograd convolution (", g.groups, " groups, ",
                g.cg, " input channels)");
  }
  for (std::int64_t c = 0; c < g.cg; ++c) plan.rows[static_cast<std::size_t>(c)] = c * plan.stride;
  // The transformed filters, unpacked: packed from, then given back (training builds keep them to
  // refresh the packed ones without allocating).
  const auto matrices = static_cast<std::size_t>(points * g.og * g.cg);
  cpu::MemoryArray<float> u(cpu.memory(), matrices);
  if (!u.ok() || !pack_winograd_filters(g, weights, u.data(), state, cpu.memory())) {
    return fail(Errc::out_of_memory, "cannot allocate the transformed filters of a Winograd convolution (", points,
                " x ", g.og, " x ", g.cg, " floats per group)");
  }
#if TEENY_TRAINING
  plan.filters = std::move(u);
#endif
  state.scratch = scratch_layout(g, state);
  if (!cpu.reserve_scratch(static_cast<std::size_t>(state.scratch.total) * sizeof(float))) {
    return fail(Errc::out_of_memory, "cannot allocate ", state.scratch.total, " floats of convolution scratch");
  }
  const cpu::GemmShape shape{static_cast<std::size_t>(g.og), static_cast<std::size_t>(plan.split.block),
                             static_cast<std::size_t>(g.cg)};
  if (!cpu.reserve_gemm_workspace(cpu::gemm_workspace_bytes(shape, true, false))) {
    return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  }
  return state;
}

void run_winograd(const ConvArgs<float>& args, ConvState& state, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const WinogradPlan& plan = state.winograd;
  const WinogradSplit& split = plan.split;
  const float* bias = state.folded_bias.empty() ? args.bias.data : state.folded_bias.data();
  const float* residual = args.residual.data;
  const Epilogue& act = args.epilogue;
  const bool relu = act.active && act.fn == UnaryFn::relu;  // applied as the outputs are written
  const std::int64_t per_image = plan.plane.tiles();
  const std::int64_t points = plan.plane.points();
  const std::int64_t tiles = g.n * per_image;  // a group's tiles, image by image
  const std::int64_t blocks = (tiles + split.block - 1) / split.block;
  const auto cg = static_cast<std::size_t>(g.cg);
  const auto stride = static_cast<std::size_t>(plan.stride);
  cpu::ThreadPool& pool = cpu.pool();
  // Item i: group i / (blocks * parts), then its block of tiles and share of the output channels.
  const std::int64_t items = g.groups * blocks * split.parts;
  pool.parallel_for(static_cast<std::size_t>(items), [&](std::size_t item, std::size_t worker) {
    const auto i = static_cast<std::int64_t>(item);
    const std::int64_t group = i / (blocks * split.parts);
    const std::int64_t first = i / split.parts % blocks * split.block;
    const std::int64_t part = i % split.parts;
    const std::int64_t count = std::min(split.block, tiles - first);
    const auto [begin, end] = winograd_part(g, split, part);
    float* scratch = cpu.scratch(worker);
    const wg::Points v{scratch, winograd_point_floats(g.cg, plan.stride), plan.stride};
    const wg::Points m{scratch + state.scratch.result, winograd_point_floats(g.og, plan.stride), plan.stride};
    // Calls f(image, its first tile, tiles, their first column in the block) for each image the
    // block's tiles fall in.
    auto for_each_image = [&](auto&& f) {
      for (std::int64_t t = first; t < first + count;) {
        const std::int64_t image = t / per_image;
        const std::int64_t n = std::min(per_image - t % per_image, first + count - t);
        f(image, t % per_image, n, t - first);
        t += n;
      }
    };
    float* staging = scratch + points * v.point_stride;
    for_each_image([&](std::int64_t image, std::int64_t image_first, std::int64_t n, std::int64_t column) {
      const float* in = args.x.data + (image * g.c + group * g.cg) * g.h * g.w;
      wg::transform_input(in, g.cg, plan.plane, image_first, n, {v.data + column, v.point_stride, v.row_stride},
                          staging);
    });
    const std::int64_t weights = (group * split.parts + part) * points;
    for (std::int64_t xi = 0; xi < points; ++xi) {
      const cpu::RowTable rows{v.data + xi * v.point_stride, plan.rows.data()};
      cpu::sgemm({static_cast<std::size_t>(end - begin), static_cast<std::size_t>(count), cg},
                 state.weights[static_cast<std::size_t>(weights + xi)], rows, m.data + xi * m.point_stride, stride,
                 cpu::Epilogue{}, pool);
    }
    for_each_image([&](std::int64_t image, std::int64_t image_first, std::int64_t n, std::int64_t column) {
      float* out = args.y.data + (image * g.o + group * g.og + begin) * g.p;
      wg::OutputEpilogue e;
      e.bias = bias != nullptr ? bias + group * g.og + begin : nullptr;
      e.residual = residual != nullptr ? residual + (out - args.y.data) : nullptr;
      e.relu = relu;
      wg::transform_output({m.data + column, m.point_stride, m.row_stride}, end - begin, plan.plane, image_first, n, e,
                           out);
    });
  });
  if (act.active && !relu) apply_unary_inplace(args.y, act.fn, act.params, cpu);
}

}  // namespace teeny::conv
