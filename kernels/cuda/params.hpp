#pragma once
// The CUDA kernels' parameter lists, in plain C++ that both compilers read: nvcc declares each
// kernel entry point with its list (kernels/cuda/*.cu check the two agree), and teeny.cuda packs
// an op's typed Args into the same list (it checks, per op, that the Args' fields turn into exactly
// these types, in this order). A kernel's parameters and an op's Args can then only change
// together: either side drifting is a compile error, not a garbled launch.
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "math/elementwise.hpp"
#include "math/half.hpp"
#include "math/loss.hpp"
#include "math/optimizer.hpp"
#include "math/pool.hpp"
#include "math/reduce.hpp"
#include "math/shape.hpp"

namespace teeny::cuda_kernels {

/// The most dims a tensor has (teeny.core's max_rank; teeny.cuda checks that they agree).
inline constexpr int max_rank = 8;

/// A dtype as kernels take it, for ops whose element types are chosen at run time (cast, an
/// embedding's indices): the values of teeny's DType, which teeny.cuda checks one by one.
enum class DTypeCode : std::uint8_t { boolean, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64 };

/// A tensor as a kernel takes it: the element pointer, then shape and strides (in elements) of
/// its first `rank` dims. Strides may be 0 (a broadcast operand) or anything a view has.
template <class T>
struct DeviceTensor {
  T* data;
  std::int64_t shape[max_rank];
  std::int64_t strides[max_rank];
  std::int32_t rank;
};

/// A kernel's parameter list, in order, and where each parameter sits in the packed buffer handed
/// to a launch: at the next multiple of its alignment, as the CUDA ABI lays kernel parameters out.
template <class... P>
struct ParamList {
  static constexpr std::size_t count = sizeof...(P);
  template <std::size_t I>
  using type = std::tuple_element_t<I, std::tuple<P...>>;
  static constexpr std::array<std::size_t, count> sizes{sizeof(P)...};
  static constexpr std::array<std::size_t, count> alignments{alignof(P)...};
  static constexpr std::array<std::size_t, count> offsets = [] {
    std::array<std::size_t, count> out{};
    std::size_t end = 0;
    for (std::size_t i = 0; i < count; ++i) {
      out[i] = (end + alignments[i] - 1) / alignments[i] * alignments[i];
      end = out[i] + sizes[i];
    }
    return out;
  }();
  static constexpr std::size_t bytes = count == 0 ? 0 : offsets[count - 1] + sizes[count - 1];
  static constexpr std::size_t alignment = [] {
    std::size_t a = 1;
    for (std::size_t x : alignments) a = x > a ? x : a;
    return a;
  }();
};

/// The phase a model runs in, for kernels that act differently when training (batch norm's batch
/// statistics, dropout's mask): the CUDA context keeps one in device memory and passes its address,
/// so a captured CUDA graph reads each replay's phase rather than the one it was captured in.
struct DevicePhase {
  std::uint64_t seed;
  std::uint64_t step;
  std::uint32_t training;  // 0 or 1
};

/// Whether a kernel's last parameter is the phase (the context's, not one of the op's Args).
template <class List>
inline constexpr bool reads_phase = false;
template <class... P>
  requires(sizeof...(P) > 0)
inline constexpr bool reads_phase<ParamList<P...>> =
    std::is_same_v<std::tuple_element_t<sizeof...(P) - 1, std::tuple<P...>>, const DevicePhase*>;

/// A backward kernel's parameter list: its forward's (the forward's arguments come first in every
/// BackwardArgs), then the gradients it reads and adds to. (For a forward that reads the phase, the
/// list is written out: the phase stays last.)
template <class Forward, class... Grads>
struct BackwardParamsOf;
template <class... P, class... Grads>
struct BackwardParamsOf<ParamList<P...>, Grads...> {
  using type = ParamList<P..., Grads...>;
};
template <class Forward, class... Grads>
using BackwardParams = typename BackwardParamsOf<Forward, Grads...>::type;

// Kernel parameters per launch: 4 KiB is what every CUDA GPU takes (Volta and later take up to
// 32 KiB from CUDA 12.1 on; teeny's kernels stay within 4 KiB).
inline constexpr std::size_t max_param_bytes = 4096;

/// unary_op: y = fn(x) elementwise (x and y of one shape).
template <class T>
using UnaryParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, math::UnaryFn, math::UnaryParams>;

/// binary_op: y = epilogue(fn(a, b)), a and b read with y's shape (stride 0 where broadcast).
template <class T>
using BinaryParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, math::BinaryFn, math::Epilogue>;

/// compare_op: a and b broadcast to y's shape (stride 0), y bool contiguous; the comparison.
template <class T>
using CompareParamList = ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<bool>, math::CompareFn>;

/// where_op: condition (bool), x and y's other operand broadcast to y's shape (stride 0), y contiguous.
template <class T>
using WhereParamList =
    ParamList<DeviceTensor<const bool>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>>;

/// reshape_op: y (contiguous) = x's elements in row-major order, x read through its strides.
template <class T>
using CopyParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>>;

/// permute_op, slice_op, concat_op: y[i] = x[i] over x's shape, both through their strides.
template <class T>
using StridedCopyParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>>;

/// pad_op: y (contiguous) = x padded by `before` per dim (negative: cropped), filled by `kind`.
template <class T>
using PadParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<T>, std::array<std::int64_t, max_rank>, math::PadKind, T>;

/// upsample_op (nearest): y[n, c, i, j] = x[n, c, src(i), src(j)] with PyTorch's float index rule.
template <class T>
using UpsampleParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, float, float>;

/// max_pool2d_op, avg_pool2d_op, adaptive_avg_pool2d_op over planes: x [planes, H, W], y [planes,
/// Ho, Wo], both contiguous; then count_include_pad and divisor_override (average pooling).
template <class T>
using Pool2dParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, math::Window2d, bool, std::int64_t>;

/// softmax_op: x and y contiguous, read as [outer, n, inner], the softmax over n; then `log`.
template <class T>
using SoftmaxParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<T>, std::int64_t, std::int64_t, std::int64_t, bool>;

/// reduce_op: y (contiguous, x's rank, reduced dims of size 1) = fn over the dims whose bit is set.
template <class T>
using ReduceParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, math::ReduceFn, std::uint32_t>;

/// cumsum_op, hardmax_op: x and y contiguous, of one shape, read as [outer, n, inner], the lines
/// along n; then cumsum's exclusive and reverse.
template <class T>
using AxisLinesParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<T>, std::int64_t, std::int64_t, std::int64_t, bool, bool>;

/// arg_reduce_op: x contiguous, read as [outer, n, inner], y [outer * inner] i64 indices along n;
/// outer, n, inner, min (argmin), last (select_last_index).
template <class T>
using ArgReduceParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<std::int64_t>, std::int64_t, std::int64_t, std::int64_t, bool, bool>;

/// nll_loss_op: x [n, classes, inner] contiguous, `n * inner` targets of an integer dtype, weight
/// [classes] or empty, y [n * inner] (mode none) or [1]; n, classes, inner, whether ignore_index
/// applies, ignore_index, the mode.
template <class T>
using NllLossParamList =
    ParamList<DeviceTensor<const T>, const void*, DTypeCode, DeviceTensor<const T>, DeviceTensor<T>, std::int64_t,
              std::int64_t, std::int64_t, bool, std::int64_t, math::LossMode>;

/// batch_norm_op: x, weight, bias, running_mean, running_var, y, eps, the fused activation,
/// num_batches_tracked, momentum; x and y [N, C, S], weight to running_var [C] or empty. Without
/// running statistics, or in the training phase, the batch's own (training: running ones updated).
template <class T>
using BatchNormParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, DeviceTensor<T>,
              DeviceTensor<T>, double, math::Epilogue, DeviceTensor<std::int64_t>, double, const DevicePhase*>;

/// layer_norm_op, rms_norm_op: x and y [rows, D]; weight and bias [D] or empty; eps.
template <class T>
using RowNormParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, double>;

/// group_norm_op: x and y [N, C, S]; weight and bias [C] or empty; groups; eps.
template <class T>
using GroupNormParamList = ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>,
                                     DeviceTensor<T>, std::int64_t, double>;

/// linear_op: x [rows, in], weight [out, in] (PyTorch's layout), bias [out] or empty, y [rows, out],
/// the fused activation.
template <class T>
using LinearParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, math::Epilogue>;

/// conv_op: x [N, C, H, W], weight [O, C/groups, kh, kw], bias [O] or empty, y [N, O, Ho, Wo] (or
/// the pooled [N, O, Hp, Wp]), the window, groups, the fused activation; a folded BatchNorm's
/// weight, bias, mean and variance ([O] or empty) and eps; a residual (as y) or empty; whether a
/// max pool is folded, and its window.
template <class T>
using ConvParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, math::Window2d,
              std::int64_t, math::Epilogue, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>,
              DeviceTensor<const T>, double, DeviceTensor<const T>, bool, math::Window2d>;

/// matmul_op: a [..., n, k], b [..., k, m] (batch dims broadcast, right-aligned), y contiguous.
template <class T>
using MatMulParamList = ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>>;

/// cast_op: n contiguous elements of `from` at x converted to `to` at y.
using CastParamList = ParamList<const void*, void*, std::int64_t, DTypeCode, DTypeCode>;

/// embedding_op: `count` indices of an integer dtype, weight [rows, dim], y [count, dim] (rows of
/// zeros for indices out of range).
template <class T>
using EmbeddingParamList = ParamList<const void*, DTypeCode, std::int64_t, DeviceTensor<const T>, DeviceTensor<T>>;

/// attention_op: q [batch..., L, E], k [batch..., S, E], v [batch..., S, Ev] (stride 0 where
/// broadcast), y [batch..., L, Ev] contiguous; the scale (in T, as PyTorch scales); causal.
template <class T>
using AttentionParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, T, bool>;

/// dropout_op: x and y of one shape, p, the op's random stream; in the training phase y = x * mask
/// / (1 - p) with the mask of kernels/math/random.hpp, else y = x.
template <class T>
using DropoutParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, double, std::uint64_t, const DevicePhase*>;

// Backward kernels (training builds): the forward's parameters, then dL/dy and the gradients each
// adds to (+=, so that a value read by several ops sums their gradients). An empty gradient (null
// data) is one not wanted. Each forward's output y holds the forward's result.

/// unary, dropout, reshape (copy), permute / slice / concat (strided add), pad, upsample, the three
/// poolings, softmax and reduce: dy (as y), dx (as x).
template <class T>
using UnaryBackwardParamList = BackwardParams<UnaryParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using DropoutBackwardParamList = ParamList<DeviceTensor<const T>, DeviceTensor<T>, double, std::uint64_t,
                                           DeviceTensor<T>, DeviceTensor<T>, const DevicePhase*>;
template <class T>
using CopyBackwardParamList = BackwardParams<CopyParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using StridedAddParamList = BackwardParams<StridedCopyParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using PadBackwardParamList = BackwardParams<PadParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using UpsampleBackwardParamList = BackwardParams<UpsampleParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using Pool2dBackwardParamList = BackwardParams<Pool2dParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using SoftmaxBackwardParamList = BackwardParams<SoftmaxParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using ReduceBackwardParamList = BackwardParams<ReduceParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
/// cumsum: dy (as y), dx (as x).
template <class T>
using AxisLinesBackwardParamList = BackwardParams<AxisLinesParamList<T>, DeviceTensor<T>, DeviceTensor<T>>;
/// nll_loss: dy (as y), dx (as x), dweight (as weight).
template <class T>
using NllLossBackwardParamList = BackwardParams<NllLossParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;

/// binary: dy, da and db (each as y, stride 0 along the dims its operand was broadcast over).
template <class T>
using BinaryBackwardParamList = BackwardParams<BinaryParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;

/// matmul: dy, da (as a), db (as b).
template <class T>
using MatMulBackwardParamList = BackwardParams<MatMulParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;

/// linear, conv, layer / RMS / group norm: dy, dx, dweight, dbias.
template <class T>
using LinearBackwardParamList =
    BackwardParams<LinearParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using ConvBackwardParamList =
    BackwardParams<ConvParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using RowNormBackwardParamList =
    BackwardParams<RowNormParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;
template <class T>
using GroupNormBackwardParamList =
    BackwardParams<GroupNormParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;

/// batch_norm: the forward's parameters but the phase, then dy, dx, dweight, dbias, the phase.
template <class T>
using BatchNormBackwardParamList =
    ParamList<DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<const T>, DeviceTensor<T>, DeviceTensor<T>,
              DeviceTensor<T>, double, math::Epilogue, DeviceTensor<std::int64_t>, double, DeviceTensor<T>,
              DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, const DevicePhase*>;

/// cast: dy (n elements of the forward's `to`), dx (n of its `from`, or null).
using CastBackwardParamList = BackwardParams<CastParamList, const void*, void*>;

/// embedding: dy [count, dim], dweight [rows, dim] (or empty), padding_idx (-1: none).
template <class T>
using EmbeddingBackwardParamList =
    BackwardParams<EmbeddingParamList<T>, DeviceTensor<T>, DeviceTensor<T>, std::int64_t>;

/// attention: dy (as y), dq, dk, dv (as q, k, v, or empty).
template <class T>
using AttentionBackwardParamList =
    BackwardParams<AttentionParamList<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>, DeviceTensor<T>>;

// Optimizer kernels (training builds' device optimizers): one launch per parameter, n elements.

/// The type a parameter of element type T is updated in: f64 for f64, f32 for the others (a 16-bit
/// parameter's f32 master copy and optimizer state).
template <class T>
using update_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The per-step values (scalars, multipliers) are read from device memory the host wrote before the
// launch, not passed by value: a captured training step replays with each step's values.

/// Adam / AdamW: param, grad, master (update_t copy of a 16-bit param, or null: the update reads
/// and writes param), exp_avg, exp_avg_sq, max_exp_avg_sq (or null: no amsgrad), the step's
/// scalars (device memory), n, the gradient's multiplier (device memory: a loss scale's inverse;
/// null: 1), found_inf (a flag a step is skipped on, or null).
template <class T>
using AdamParamList =
    ParamList<T*, const T*, update_t<T>*, update_t<T>*, update_t<T>*, update_t<T>*, const math::AdamStep<update_t<T>>*,
              std::int64_t, const update_t<T>*, const std::uint32_t*>;

/// What an SGD launch reads from device memory each step: the scalars, and whether the momentum
/// buffer holds a previous step's (else it starts as the gradient).
template <class U>
struct SgdDeviceStep {
  math::SgdStep<U> scalars;
  std::uint32_t has_buffer;
};

/// SGD: param, grad, master (or null), momentum buffer (or null: no momentum), the step (device
/// memory), n, the gradient's multiplier (device memory, or null: 1), found_inf (or null).
template <class T>
using SgdParamList = ParamList<T*, const T*, update_t<T>*, update_t<T>*, const SgdDeviceStep<update_t<T>>*,
                               std::int64_t, const update_t<T>*, const std::uint32_t*>;

/// Sets *found_inf to 1 when any of the n gradient values is infinite or NaN (loss scaling).
template <class T>
using NonFiniteParamList = ParamList<const T*, std::int64_t, std::uint32_t*>;

// Loss kernels (training builds' device losses).

/// Cross-entropy over the rows of logits [rows, classes] (contiguous) with their class-index
/// targets (int64, device memory, each in [0, classes) or the ignore_index: checked by the caller):
/// each row's term into row_losses[row] (0 for an ignored row) and dL/dlogits, times the
/// multiplier, into grad [rows, classes]; then rows, classes and the scalars (device memory).
template <class T>
using CrossEntropyParamList =
    ParamList<const T*, const std::int64_t*, T*, double*, std::int64_t, std::int64_t, const math::CrossEntropyStep*>;

/// The squared error of n elements x against y: 2 (x - y) times the multiplier into grad, and each
/// block's sum of (x - y)^2, in a fixed order, into partials[block]; then n and the multiplier
/// (device memory).
template <class T>
using SquaredErrorParamList = ParamList<const T*, const T*, T*, double*, std::int64_t, const double*>;

}  // namespace teeny::cuda_kernels
