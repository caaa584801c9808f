// Elementwise kernels: unary functions (activations, exp/log/...), broadcasting binary ops,
// comparisons and where, and dropout, one template each, instantiated per element type as the
// entry points teeny_<op>_<dtype>;
// and their backward kernels (teeny_<op>_backward_<dtype>, used by training). The per-element
// formulas and derivatives are kernels/math/unary.hpp's (unary functions), elementwise.hpp's and
// gradient.hpp's (binary ones), the CPU backend's own; dropout's mask is kernels/math/random.hpp's.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/gradient.hpp"
#include "math/random.hpp"

namespace teeny::cuda_kernels {
namespace {

template <class T>
__device__ void unary(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, math::UnaryFn fn,
                      const math::UnaryParams& params) {
  const std::int64_t n = element_count(y);
  const bool contiguous = is_contiguous(x) && is_contiguous(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t xi = contiguous ? i : element_offset(x, i);
    const std::int64_t yi = contiguous ? i : element_offset(y, i);
    store(y.data + yi, math::apply_unary(fn, load(x.data + xi), params));
  }
}

// One thread an element of y, the operands read broadcast (element_offset).
template <class T>
__device__ void compare(const DeviceTensor<const T>& a, const DeviceTensor<const T>& b, const DeviceTensor<bool>& y,
                        math::CompareFn fn) {
  const std::int64_t n = element_count(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    y.data[i] = math::apply_compare(fn, load(a.data + element_offset(a, i)), load(b.data + element_offset(b, i)));
  }
}

template <class T>
__device__ void where(const DeviceTensor<const bool>& condition, const DeviceTensor<const T>& x,
                      const DeviceTensor<const T>& other, const DeviceTensor<T>& y) {
  const std::int64_t n = element_count(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    y.data[i] = condition.data[element_offset(condition, i)] ? x.data[element_offset(x, i)]
                                                             : other.data[element_offset(other, i)];
  }
}

template <class T>
__device__ void binary(const DeviceTensor<const T>& a, const DeviceTensor<const T>& b, const DeviceTensor<T>& y,
                       math::BinaryFn fn, const math::Epilogue& epilogue) {
  const std::int64_t n = element_count(y);
  const bool contiguous = is_contiguous(a) && is_contiguous(b) && is_contiguous(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t ai = contiguous ? i : element_offset(a, i);
    const std::int64_t bi = contiguous ? i : element_offset(b, i);
    const std::int64_t yi = contiguous ? i : element_offset(y, i);
    store(y.data + yi, math::apply_epilogue(epilogue, math::apply_binary(fn, load(a.data + ai), load(b.data + bi))));
  }
}

// Whether dropout zeroes and rescales (the training phase, p > 0), and the scale of what it keeps:
// p = 1 drops everything (PyTorch's output is then all zeros, not a division by zero).
template <class C>
struct DropoutMode {
  bool active;
  C scale;
};
template <class C>
__device__ DropoutMode<C> dropout_mode(double p, const DevicePhase* phase) {
  return {phase != nullptr && phase->training != 0 && p > 0, p < 1 ? static_cast<C>(1.0 / (1.0 - p)) : C(0)};
}

// The mask is drawn per row-major element index, as the CPU's: both backends drop the same elements.
template <class T>
__device__ void dropout(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, double p, std::uint64_t stream,
                        const DevicePhase* phase) {
  using C = compute_t<T>;
  const DropoutMode<C> mode = dropout_mode<C>(p, phase);
  const std::uint64_t seed = mode.active ? phase->seed : 0;
  const std::uint64_t step = mode.active ? phase->step : 0;
  const std::int64_t n = element_count(y);
  const bool contiguous = is_contiguous(x) && is_contiguous(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t xi = contiguous ? i : element_offset(x, i);
    const std::int64_t yi = contiguous ? i : element_offset(y, i);
    if (!mode.active) {
      y.data[yi] = x.data[xi];
    } else {
      const bool keep = math::dropout_keeps(p, seed, step, stream, static_cast<std::uint64_t>(i));
      store(y.data + yi, keep ? load(x.data + xi) * mode.scale : C(0));
    }
  }
}

// ---- Backward kernels (training) ----

// dx += dy * fn'(x), elementwise.
template <class T>
__device__ void unary_backward(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, math::UnaryFn fn,
                               const math::UnaryParams& params, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const bool contiguous = is_contiguous(x) && is_contiguous(y) && is_contiguous(dy) && is_contiguous(dx);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t xi = contiguous ? i : element_offset(x, i);
    const std::int64_t yi = contiguous ? i : element_offset(y, i);
    const std::int64_t dyi = contiguous ? i : element_offset(dy, i);
    const std::int64_t dxi = contiguous ? i : element_offset(dx, i);
    const auto d = math::unary_derivative(fn, load(x.data + xi), load(y.data + yi), params);
    store(dx.data + dxi, load(dx.data + dxi) + load(dy.data + dyi) * d);
  }
}

// Offsets of one element of y's shape in each tensor a binary backward reads.
struct BinaryOffsets {
  std::int64_t a, b, y, dy;
};

// da += dz * d fn/da and db += dz * d fn/db, where dz = dy * act'(y) for a fused activation. A
// broadcast operand's gradient sums over the dims it was repeated along: one thread per distinct
// gradient element (da's first, then db's) adds its terms in y's order, as the CPU does, so the
// sums are deterministic without atomics. da and db in one buffer (x op x) take both partials.
template <class T>
__device__ void binary_backward(const DeviceTensor<const T>& a, const DeviceTensor<const T>& b,
                                const DeviceTensor<T>& y, math::BinaryFn fn, const math::Epilogue& epilogue,
                                const DeviceTensor<T>& dy, const DeviceTensor<T>& da, const DeviceTensor<T>& db) {
  using C = compute_t<T>;
  const bool shared = da.data != nullptr && da.data == db.data;
  const std::int64_t na = da.data != nullptr ? grad_extent(da, true) : 0;
  const std::int64_t nb = db.data != nullptr && !shared ? grad_extent(db, true) : 0;
  const int rank = y.rank;
  for (std::int64_t i = first_index(); i < na + nb; i += grid_stride()) {
    const bool for_a = i < na;
    const DeviceTensor<T>& g = for_a ? da : db;
    // The kept coordinates give the gradient element and the first y element adding into it.
    BinaryOffsets base{0, 0, 0, 0};
    std::int64_t offset = 0;
    std::int64_t rest = for_a ? i : i - na;
    for (int d = rank - 1; d >= 0; --d) {
      if (broadcast_dim(g, d)) continue;
      const std::int64_t c = rest % g.shape[d];
      rest /= g.shape[d];
      base = {base.a + c * a.strides[d], base.b + c * b.strides[d], base.y + c * y.strides[d],
              base.dy + c * dy.strides[d]};
      offset += c * g.strides[d];
    }
    const std::int64_t terms = grad_extent(g, false);
    C acc = load(g.data + offset);
    for (std::int64_t r = 0; r < terms; ++r) {
      BinaryOffsets at = base;
      std::int64_t k = r;
      for (int d = rank - 1; d >= 0; --d) {
        if (!broadcast_dim(g, d)) continue;
        const std::int64_t c = k % g.shape[d];
        k /= g.shape[d];
        at = {at.a + c * a.strides[d], at.b + c * b.strides[d], at.y + c * y.strides[d], at.dy + c * dy.strides[d]};
      }
      const C av = load(a.data + at.a);
      const C bv = load(b.data + at.b);
      C dz = load(dy.data + at.dy);
      // The partials read fn(a, b), which y holds unless an activation was fused after it.
      C value;
      if (epilogue.active) {
        dz *= math::unary_derivative_from_output(epilogue.fn, load(y.data + at.y), epilogue.params);
        value = math::apply_binary(fn, av, bv);
      } else {
        value = load(y.data + at.y);
      }
      const math::BinaryPartials<C> p = math::binary_partials(fn, av, bv, value);
      acc += dz * (for_a ? p.da : p.db);
      if (shared) acc += dz * p.db;
    }
    store(g.data + offset, acc);
  }
}

// dx += dy * mask / (1 - p) with the forward's mask (recomputed), or dx += dy outside training.
template <class T>
__device__ void dropout_backward(double p, std::uint64_t stream, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx,
                                 const DevicePhase* phase) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const DropoutMode<C> mode = dropout_mode<C>(p, phase);
  const std::uint64_t seed = mode.active ? phase->seed : 0;
  const std::uint64_t step = mode.active ? phase->step : 0;
  const std::int64_t n = element_count(dx);
  const bool contiguous = is_contiguous(dy) && is_contiguous(dx);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t dyi = contiguous ? i : element_offset(dy, i);
    const std::int64_t dxi = contiguous ? i : element_offset(dx, i);
    if (!mode.active) {
      store(dx.data + dxi, load(dx.data + dxi) + load(dy.data + dyi));
    } else if (math::dropout_keeps(p, seed, step, stream, static_cast<std::uint64_t>(i))) {
      store(dx.data + dxi, load(dx.data + dxi) + load(dy.data + dyi) * mode.scale);
    }
  }
}
}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DevicePhase;
using teeny::cuda_kernels::DeviceTensor;

#define TEENY_ELEMENTWISE_ENTRIES(T, suffix)                                                                           \
  extern "C" __global__ void teeny_unary_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y, teeny::math::UnaryFn fn, \
                                                  teeny::math::UnaryParams params) {                                   \
    teeny::cuda_kernels::unary<T>(x, y, fn, params);                                                                   \
  }                                                                                                                    \
  extern "C" __global__ void teeny_binary_##suffix(DeviceTensor<const T> a, DeviceTensor<const T> b,                   \
                                                   DeviceTensor<T> y, teeny::math::BinaryFn fn,                        \
                                                   teeny::math::Epilogue epilogue) {                                   \
    teeny::cuda_kernels::binary<T>(a, b, y, fn, epilogue);                                                             \
  }                                                                                                                    \
  extern "C" __global__ void teeny_dropout_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y, double p,              \
                                                    std::uint64_t stream, const DevicePhase* phase) {                  \
    teeny::cuda_kernels::dropout<T>(x, y, p, stream, phase);                                                           \
  }                                                                                                                    \
  extern "C" __global__ void teeny_unary_backward_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                 \
                                                           teeny::math::UnaryFn fn, teeny::math::UnaryParams params,   \
                                                           DeviceTensor<T> dy, DeviceTensor<T> dx) {                   \
    teeny::cuda_kernels::unary_backward<T>(x, y, fn, params, dy, dx);                                                  \
  }                                                                                                                    \
  extern "C" __global__ void teeny_binary_backward_##suffix(                                                           \
      DeviceTensor<const T> a, DeviceTensor<const T> b, DeviceTensor<T> y, teeny::math::BinaryFn fn,                   \
      teeny::math::Epilogue epilogue, DeviceTensor<T> dy, DeviceTensor<T> da, DeviceTensor<T> db) {                    \
    teeny::cuda_kernels::binary_backward<T>(a, b, y, fn, epilogue, dy, da, db);                                        \
  }                                                                                                                    \
  extern "C" __global__ void teeny_dropout_backward_##suffix(DeviceTensor<const T>, DeviceTensor<T>, double p,         \
                                                             std::uint64_t stream, DeviceTensor<T> dy,                 \
                                                             DeviceTensor<T> dx, const DevicePhase* phase) {           \
    teeny::cuda_kernels::dropout_backward<T>(p, stream, dy, dx, phase);                                                \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UnaryParamList<T>, decltype(teeny_unary_##suffix)>);      \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BinaryParamList<T>, decltype(teeny_binary_##suffix)>);    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::DropoutParamList<T>, decltype(teeny_dropout_##suffix)>);  \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UnaryBackwardParamList<T>,                      \
                                                  decltype(teeny_unary_backward_##suffix)>);                           \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BinaryBackwardParamList<T>,                     \
                                                  decltype(teeny_binary_backward_##suffix)>);                          \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::DropoutBackwardParamList<T>,                    \
                                                  decltype(teeny_dropout_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_ELEMENTWISE_ENTRIES)
#undef TEENY_ELEMENTWISE_ENTRIES

#define TEENY_SELECT_ENTRIES(T, suffix)                                                                               \
  extern "C" __global__ void teeny_compare_##suffix(DeviceTensor<const T> a, DeviceTensor<const T> b,                 \
                                                    DeviceTensor<bool> y, teeny::math::CompareFn fn) {                \
    teeny::cuda_kernels::compare<T>(a, b, y, fn);                                                                     \
  }                                                                                                                   \
  extern "C" __global__ void teeny_where_##suffix(DeviceTensor<const bool> condition, DeviceTensor<const T> x,        \
                                                  DeviceTensor<const T> other, DeviceTensor<T> y) {                   \
    teeny::cuda_kernels::where<T>(condition, x, other, y);                                                            \
  }                                                                                                                   \
  static_assert(                                                                                                      \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CompareParamList<T>, decltype(teeny_compare_##suffix)>); \
  static_assert(                                                                                                      \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::WhereParamList<T>, decltype(teeny_where_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SELECT_ENTRIES)
#undef TEENY_SELECT_ENTRIES

namespace teeny::cuda_kernels {

KernelTable elementwise_kernels() noexcept {
#define TEENY_ELEMENTWISE_ENTRY(T, suffix)                                                                     \
  TEENY_KERNEL_ENTRY(teeny_unary_##suffix), TEENY_KERNEL_ENTRY(teeny_binary_##suffix),                         \
      TEENY_KERNEL_ENTRY(teeny_dropout_##suffix), TEENY_KERNEL_ENTRY(teeny_unary_backward_##suffix),           \
      TEENY_KERNEL_ENTRY(teeny_binary_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_dropout_backward_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_compare_##suffix), TEENY_KERNEL_ENTRY(teeny_where_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_ELEMENTWISE_ENTRY)};
#undef TEENY_ELEMENTWISE_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
