// teeny.cpu:conv — the CPU kernel of conv_op: what it prepares at load and how it runs, each
// method in a file of its own under cpu/conv/:
//  - state.cppm: what the kernel keeps (ConvStateOf) and takes from Memory (conv_memory);
//  - plan.cppm: the planner, which picks a layer's method by estimated cycles (CpuOptions::conv
//    forces one);
//  - gemm.cppm: one GEMM per image and group on packed weights, its im2col operand read from the
//    input (1x1), from zero-padded planes in place (implicit: by stride phase, or one per kernel
//    column where that saves more GEMM columns than the copies cost), written out (im2col), or
//    with pixels as rows (transposed); for at most 16 output channels the implicit product may
//    run as cpu::pixel_rows instead, a run of an output row's pixels against the channels, each
//    row made Wo wide; f64 always takes the input or the im2col matrix (dgemm);
//  - winograd.cppm: 3x3 stride-1 convolutions as Winograd F(4x4, 3x3) or F(2x2, 3x3), 36 or 16
//    GEMMs on transformed tiles (f32; not in embedded builds);
//  - direct.cppm: depthwise convolutions (one input channel per group), run directly;
//  - backward.cppm: the backward, in training builds;
//  - common.cppm: what they share.
// A folded BatchNorm is applied to the weights and bias here, at load, before any method sees them.
// A folded max pool is applied as each image's output is made where the GEMM methods allow
// (run_packed: 2x2 windows from the GEMM's result, the implicit GEMM's output band by band), and
// otherwise here, after the whole convolution, by the max pool's own kernel.
module;
#include "cpu/kernels/gemm.hpp"
#include "cpu/kernels/memory.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.cpu:conv;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;
import :pool;
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

namespace {

// The output size along one dim of a max pool over `size` inputs: floor mode, or ceil mode (whose
// last window must start inside the input or its left padding), as PyTorch counts them.
std::int64_t pooled_size(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                         std::int64_t dilation, bool ceil) {
  const std::int64_t span = size + 2 * pad - dilation * (kernel - 1) - 1;
  std::int64_t out = (span + (ceil ? stride - 1 : 0)) / stride + 1;
  if (ceil && (out - 1) * stride >= size + pad) --out;
  return out;
}

// A folded max pool: its windows fit the convolution's output and y is what they make.
template <CpuReal T>
Result<void> check_pool(const ConvArgs<T>& args, const Geometry& g) {
  const Window2d& p = args.pool;
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 ||
      p.pad_h < 0 || p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w) {
    return fail(Errc::invalid_argument, "folded max pool: kernel ", p.kernel_h, "x", p.kernel_w, ", stride ",
                p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w,
                ": sizes must be positive and the padding at most half the kernel");
  }
  const std::int64_t hp = args.y.shape[2];
  const std::int64_t wp = args.y.shape[3];
  auto fits = [](std::int64_t out, std::int64_t size, std::int64_t k, std::int64_t s, std::int64_t pad,
                 std::int64_t d) {
    return out == pooled_size(size, k, s, pad, d, false) || out == pooled_size(size, k, s, pad, d, true);
  };
  if (g.ho < 1 || g.wo < 1 || !fits(hp, g.ho, p.kernel_h, p.stride_h, p.pad_h, p.dilation_h) ||
      !fits(wp, g.wo, p.kernel_w, p.stride_w, p.pad_w, p.dilation_w)) {
    return fail(Errc::shape_mismatch, "the pooled output ", args.y.shape, " is not what a ", p.kernel_h, "x",
                p.kernel_w, " max pool at stride ", p.stride_h, "x", p.stride_w, " makes of the convolution's ", g.ho,
                "x", g.wo, " output");
  }
  return ok();
}

// Whether run_packed pools each image's output from the GEMM's result in its scratch: 2x2 windows
// at stride 2, unpadded, inside the output, on a GEMM method that runs one task's whole GEMM on
// one thread and applies the activation itself (it must come before the pool).
template <CpuReal T>
bool pools_in_scratch(const ConvArgs<T>& args, const Geometry& g, const ConvStateOf<T>& state) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    const Window2d& p = args.pool;
    const bool two_by_two = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                            p.pad_w == 0 && p.dilation_h == 1 && p.dilation_w == 1 && 2 * args.y.shape[2] <= g.ho &&
                            2 * args.y.shape[3] <= g.wo;
    const bool gemm_method =
        !state.depthwise && (state.method == ConvMethod::input || state.method == ConvMethod::implicit ||
                             state.method == ConvMethod::im2col);
    cpu::Activation activation{};
    return two_by_two && gemm_method && args.residual.data == nullptr && one_gemm_per_task(g, state.threads) &&
           gemm_activation(args.epilogue, activation);
  }
}

// Whether run_packed makes and pools the output in bands of rows in scratch: an implicit GEMM
// that applies the activation itself (it must come before the pool). The band stays in cache for
// the pool to read, instead of the whole output going out to memory and back (ResNet's stem: 3.2
// MB an image).
template <CpuReal T>
bool pools_in_bands(const ConvArgs<T>& args, const ConvStateOf<T>& state) {
  cpu::Activation activation{};
  return std::is_same_v<T, float> && !state.depthwise && state.method == ConvMethod::implicit &&
         args.residual.data == nullptr && gemm_activation(args.epilogue, activation);
}

// Output rows a band holds: about 512 KiB of them (og channels, each row as wide as the planes),
// and at least a pooling window's rows.
std::int64_t pool_band_rows(const Window2d& pool, const Geometry& g, std::int64_t qw) {
  constexpr std::int64_t kBandFloats = 128 * 1024;
  const std::int64_t window = (pool.kernel_h - 1) * pool.dilation_h + 1;
  return std::min(g.ho, std::max(window, kBandFloats / std::max<std::int64_t>(1, g.og * qw)));
}

}  // namespace

// Everything but a folded max pool's buffer: the method, its packed weights, tables and scratch.
template <CpuReal T>
Result<ConvStateOf<T>> prepare_unpooled(const ConvArgs<T>& args, CpuContext& cpu) {
  const Geometry g = geometry(args);
  const Window2d& win = args.window;
  if (args.pooled) {
    if (auto checked = check_pool(args, g); !checked) return std::move(checked).error();
  }
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
      // cpu::pixel_rows applies a bias and ReLU itself; the residual and other activations are
      // applied after it as after the GEMM.
      cpu::Activation activation{};
      const bool fused = args.residual.data == nullptr && gemm_activation(args.epilogue, activation);
      const bool pixels = g.og <= 16 && cpu::has_pixel_rows() &&
                          (!fused || activation == cpu::Activation::none || activation == cpu::Activation::relu);
      if (!plan_phases(g, win, planes_by_column(g, win, state.threads, pixels), state, cpu.memory())) {
        return fail(Errc::out_of_memory, "cannot allocate the tables of ", g.k, " convolution windows");
      }
      const MethodChoice choice = choose_method(g, win, state.phases, cpu.options().conv, state.threads, pixels);
      state.method = choice.method;
      state.winograd.plane.m = choice.winograd_tile;
      state.pixel_rows = choice.pixel_rows;
      if (state.method != ConvMethod::implicit) {
        state.row_offsets = {};
        state.phases = {};
      }
    }
#if !TEENY_EMBEDDED  // embedded builds leave Winograd out (winograd_fits)
    if (state.method == ConvMethod::winograd) return plan_winograd(g, win, weights, std::move(state), cpu);
#endif
    state.pool_in_scratch = args.pooled && pools_in_scratch(args, g, state);
    if (args.pooled && !state.pool_in_scratch && pools_in_bands(args, state)) {
      state.pool_in_bands = true;
      state.pool_band_rows = pool_band_rows(args.pool, g, state.phases.qw);
    }
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
Result<ConvStateOf<T>> prepare_kernel(const conv_op<T>&, const ConvArgs<T>& args, CpuContext& cpu) {
  auto state = prepare_unpooled(args, cpu);
  if (!state || !args.pooled) return state;
  const Geometry g = geometry(args);
  if (state->pool_in_scratch || state->pool_in_bands) return state;
  // Otherwise the convolution runs whole into `unpooled`, which the max pool's kernel reads.
  const auto numel = static_cast<std::size_t>(g.n * g.o * g.ho * g.wo);
  state->unpooled = cpu::MemoryArray<T>(cpu.memory(), numel);
  if (!state->unpooled.ok() && numel != 0) {
    return fail(Errc::out_of_memory, "cannot allocate the ", g.n, "x", g.o, "x", g.ho, "x", g.wo,
                " output to max-pool");
  }
  if (!cpu.reserve_scratch(max_pool2d_memory<T>(static_cast<std::size_t>(g.wo)).scratch)) {
    return fail(Errc::out_of_memory, "cannot allocate the folded max pool's row buffers");
  }
  return state;
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

// With a folded max pool that run_packed does not apply itself: the convolution into `unpooled`,
// then the max pool's kernel from there into y.
template <CpuReal T>
void run_and_pool(const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (!args.pooled || state.pool_in_scratch || state.pool_in_bands) return run_on_threads(args, state, cpu);
  const Geometry g = geometry(args);
  ConvArgs<T> whole = args;
  whole.pooled = false;
  whole.y = TensorView<T>(state.unpooled.data(), ConcreteShape{g.n, g.o, g.ho, g.wo});
  run_on_threads(whole, state, cpu);
  const Pool2dArgs<T> pool{TensorView<const T>(state.unpooled.data(), ConcreteShape{g.n * g.o, g.ho, g.wo}),
                           TensorView<T>(args.y.data, ConcreteShape{g.n * g.o, args.y.shape[2], args.y.shape[3]}),
                           args.pool};
  NoState none;
  run_kernel(max_pool2d_op<T>{}, pool, none, cpu);
}

template <CpuReal T>
void run_kernel(const conv_op<T>&, const ConvArgs<T>& args, ConvStateOf<T>& state, CpuContext& cpu) {
  if (state.threads == 1 && cpu.threads() > 1) {
    // Too little work to share (conv_threads): all of it runs on this thread, as the pool's one
    // task, inside which every parallel_for runs inline.
    cpu.pool().parallel_for(1, [&](std::size_t) { run_and_pool(args, state, cpu); });
    return;
  }
  run_and_pool(args, state, cpu);
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
    if (state.pixel_rows) {
      fill_pixel_weights(g, args.weight.data, state.pixel_weights.data());
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
