// teeny.cpu:conv — the CPU kernel of conv_op: what it prepares at load and how it runs, each
// method in a file of its own under cpu/conv/:
//  - state.cppm: what the kernel keeps (ConvStateOf) and takes from Memory (conv_memory);
//  - plan.cppm: the planner, which picks a layer's method by estimated cycles (CpuOptions::conv
//    forces one);
//  - gemm.cppm: one GEMM per image and group on packed weights, its im2col operand read from the
//    input (1x1), from zero-padded phase planes in place (implicit), written out (im2col), or
//    with pixels as rows (transposed); f64 always takes the input or the im2col matrix (dgemm);
//  - winograd.cppm: 3x3 stride-1 convolutions as Winograd F(4x4, 3x3), 36 GEMMs on transformed
//    tiles (f32; not in embedded builds);
//  - direct.cppm: depthwise convolutions (one input channel per group), run directly;
//  - backward.cppm: the backward, in training builds;
//  - common.cppm: what they share.
// A folded BatchNorm is applied to the weights and bias here, at load, before any method sees them.
module;
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;
export import :conv_state;
import :conv_common;
import :conv_plan;
import :conv_gemm;
import :conv_winograd;
import :conv_direct;
#if TEENY_TRAINING
export import :conv_backward;
#endif

export namespace teeny {

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>& op, const ConvArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const conv_op<T>& op, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu);

#if TEENY_TRAINING
/// After the weight changed (an optimizer step): repacks it in place (Winograd: transforms it
/// again first), allocating nothing. A folded BatchNorm cannot be refreshed (the training
/// lowering folds none).
template <CpuReal T>
Result<void> refresh_kernel(const conv_op<T>& op, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {

using namespace conv;  // the methods (not exported)

template <CpuReal T>
Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>&, const ConvArgs<T>& args, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  ConvStateOf<T> state;
  state.depthwise = g.cg == 1 && g.groups > 1;
  state.threads = conv_threads(g, static_cast<std::int64_t>(cpu.threads()), cpu.options().conv_macs_per_thread);
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
    if (pointwise(win)) {
      state.method = ConvMethod::input;
    } else {
      if (!plan_phases(g, win, state, cpu.memory())) {
        return fail(Errc::out_of_memory, "cannot allocate the tables of ", g.k, " convolution windows");
      }
      state.method = choose_method(g, win, state.phases, cpu.options().conv, state.threads);
      if (state.method != ConvMethod::implicit) {
        state.row_offsets = {};
        state.phases = {};
      }
    }
#if !TEENY_EMBEDDED  // embedded builds leave Winograd out (winograd_fits)
    if (state.method == ConvMethod::winograd) return plan_winograd(g, win, weights, std::move(state), cpu);
#endif
    return plan_packed(g, weights, std::move(state), cpu);
  } else {
    // The GEMMs read the (scaled) weights as they are, and the input or its im2col matrix.
    state.folded_weight = std::move(scaled);
    state.method = pointwise(win) ? ConvMethod::input : ConvMethod::im2col;
    state.scratch = scratch_layout(g, state);
    if (!cpu.reserve_scratch(static_cast<std::size_t>(state.scratch.total) * sizeof(T))) {
      return fail(Errc::out_of_memory, "cannot allocate ", state.scratch.total, " elements of convolution scratch");
    }
    return state;
  }
}

template <CpuReal T>
void run_on_threads(const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (state.depthwise) return run_depthwise(args, state, cpu);
  if constexpr (std::is_same_v<T, float>) {
#if !TEENY_EMBEDDED
    if (state.method == ConvMethod::winograd) return run_winograd(args, state, cpu);
#endif
    run_packed(args, state, cpu);
  } else {
    run_unpacked(args, state, cpu);
  }
}

template <CpuReal T>
void run_kernel(const conv_op<T>&, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (state.threads == 1 && cpu.threads() > 1) {
    // Too little work to share (conv_threads): all of it runs on this thread, as the pool's one
    // task, inside which every parallel_for runs inline.
    cpu.pool().parallel_for(1, [&](std::size_t) { run_on_threads(args, state, cpu); });
    return;
  }
  run_on_threads(args, state, cpu);
}

#if TEENY_TRAINING
template <CpuReal T>
Result<void> refresh_kernel(const conv_op<T>&, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (args.norm_mean.data != nullptr) {
    return fail(Errc::unsupported, "a convolution with a folded BatchNorm cannot take new weights");
  }
  // The direct kernel and the f64 GEMMs read the weights as they are: only packed ones are refilled.
  if constexpr (std::is_same_v<T, float>) {
    if (state.depthwise) return ok();
    const Geometry g = geometry(args);
    if (state.method == ConvMethod::winograd) {
      if (!pack_winograd_filters(g, args.weight.data, state.winograd.filters.data(), state, cpu.memory())) {
        return fail(Errc::internal, "the transformed filters were lost before they could be refreshed");
      }
      return ok();
    }
    const bool transposed = state.method == ConvMethod::transposed;
    for (std::int64_t group = 0; group < g.groups; ++group) {
      const float* w = args.weight.data + group * g.og * g.k;
      if (!cpu::repack(state.weights[static_cast<std::size_t>(group)], w, static_cast<std::size_t>(g.k), transposed) &&
          g.og * g.k != 0) {
        return fail(Errc::internal, "the packed weight of group ", group, " was lost before it could be refreshed");
      }
    }
  } else {
    (void)cpu;
  }
  return ok();
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                        \
  template Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>&, const ConvArgs<T>&, CpuContext&); \
  template void run_kernel(const conv_op<T>&, const ConvArgs<T>&, ConvStateOf<T>&, CpuContext&);      \
  TEENY_CPU_REFRESH_INSTANCE(T)
#if TEENY_TRAINING
#define TEENY_CPU_REFRESH_INSTANCE(T) \
  template Result<void> refresh_kernel(const conv_op<T>&, const ConvArgs<T>&, ConvStateOf<T>&, CpuContext&);
#else
#define TEENY_CPU_REFRESH_INSTANCE(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_REFRESH_INSTANCE

}  // namespace teeny
