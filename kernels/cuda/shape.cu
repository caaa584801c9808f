// Shape kernels: copies (reshape; permute, slice, concat and weight through strides), padding, nearest
// upsampling and casts, one template each, instantiated per element type as teeny_<family>_<dtype>;
// and their backward kernels (training), which add dy back along the forward's reads. Which
// input element an output reads is kernels/math/shape.hpp's rule, the CPU backend's own; a cast's
// gradient is kernels/math/gradient.hpp's.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/gradient.hpp"

namespace teeny::cuda_kernels {
namespace {

// y (contiguous) takes x's elements in row-major order; x may be strided. A reshape that shares
// its input's bytes (x.data == y.data) has nothing to move.
template <class T>
__device__ void copy(const DeviceTensor<const T>& x, const DeviceTensor<T>& y) {
  if (static_cast<const void*>(x.data) == static_cast<const void*>(y.data)) return;
  const std::int64_t n = element_count(y);
  const bool contiguous = is_contiguous(x);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    y.data[i] = x.data[contiguous ? i : element_offset(x, i)];
  }
}

template <class T>
__device__ void strided_copy(const DeviceTensor<const T>& x, const DeviceTensor<T>& y) {
  const std::int64_t n = element_count(x);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    y.data[element_offset(y, i)] = x.data[element_offset(x, i)];
  }
}

template <class T>
__device__ void pad(const DeviceTensor<const T>& x, const DeviceTensor<T>& y,
                    const std::array<std::int64_t, max_rank>& before, math::PadKind kind, T value) {
  const std::int64_t n = element_count(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    std::int64_t rest = i;
    std::int64_t offset = 0;
    bool fill = false;
    for (int d = y.rank - 1; d >= 0; --d) {
      const std::int64_t source = math::pad_source_index(kind, rest % y.shape[d], before[d], x.shape[d]);
      rest /= y.shape[d];
      fill = fill || source < 0;
      offset += source * x.strides[d];
    }
    y.data[i] = fill ? value : x.data[offset];
  }
}

template <class T>
__device__ void upsample_nearest(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, float inv_scale_h,
                                 float inv_scale_w) {
  const std::int64_t n = element_count(y);
  const std::int64_t channels = y.shape[1];
  const std::int64_t oh = y.shape[2];
  const std::int64_t ow = y.shape[3];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t j = i % ow;
    const std::int64_t row = i / ow;
    const std::int64_t plane = row / oh;
    const std::int64_t sh = math::nearest_source_index(row % oh, x.shape[2], oh, inv_scale_h);
    const std::int64_t sw = math::nearest_source_index(j, x.shape[3], ow, inv_scale_w);
    y.data[i] = x.data[(plane / channels) * x.strides[0] + (plane % channels) * x.strides[1] + sh * x.strides[2] +
                       sw * x.strides[3]];
  }
}

// Calls `f` with a value of the storage type `code` names (its value unused).
template <class F>
__device__ void with_type(DTypeCode code, F&& f) {
  switch (code) {
    case DTypeCode::boolean: f(bool{}); break;
    case DTypeCode::i8: f(std::int8_t{}); break;
    case DTypeCode::i16: f(std::int16_t{}); break;
    case DTypeCode::i32: f(std::int32_t{}); break;
    case DTypeCode::i64: f(std::int64_t{}); break;
    case DTypeCode::u8: f(std::uint8_t{}); break;
    case DTypeCode::u16: f(std::uint16_t{}); break;
    case DTypeCode::u32: f(std::uint32_t{}); break;
    case DTypeCode::u64: f(std::uint64_t{}); break;
    case DTypeCode::f16: f(teeny::f16{}); break;
    case DTypeCode::bf16: f(teeny::bf16{}); break;
    case DTypeCode::f32: f(float{}); break;
    case DTypeCode::f64: f(double{}); break;
  }
}

// Tensor.to(dtype) between any two dtypes, by kernels/math/shape.hpp's rules.
__device__ void cast(const void* x, void* y, std::int64_t n, DTypeCode from, DTypeCode to) {
  with_type(from, [&](auto from_value) {
    using From = decltype(from_value);
    with_type(to, [&](auto to_value) {
      using To = decltype(to_value);
      for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
        static_cast<To*>(y)[i] = math::cast_element<To>(static_cast<const From*>(x)[i]);
      }
    });
  });
}

// ---- Backward kernels (training) ----

// reshape: dx += dy, element for element in row-major order.
template <class T>
__device__ void copy_backward(const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const bool contiguous = is_contiguous(dy) && is_contiguous(dx);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t dyi = contiguous ? i : element_offset(dy, i);
    const std::int64_t dxi = contiguous ? i : element_offset(dx, i);
    store(dx.data + dxi, load(dx.data + dxi) + load(dy.data + dyi));
  }
}

// permute, slice, concat: dx += dy, both through the forward's strides over dy's shape. A permuted
// or sliced view reaches each element of dx at most once, so the threads never share one.
template <class T>
__device__ void strided_add(const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dy);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    T* grad = dx.data + element_offset(dx, i);
    store(grad, load(grad) + load(dy.data + element_offset(dy, i)));
  }
}

// weight: dx += dy summed over the dims dx is broadcast along (stride 0). One thread per
// distinct element of dx adds its terms in dy's order, as the CPU does: deterministic, no atomics.
template <class T>
__device__ void broadcast_add(const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t n = grad_extent(dx, true);
  const std::int64_t terms = grad_extent(dx, false);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    std::int64_t at = 0;  // the kept coordinates: dx's element and the first term's offset in dy
    std::int64_t base = 0;
    std::int64_t rest = i;
    for (int d = dx.rank - 1; d >= 0; --d) {
      if (broadcast_dim(dx, d)) continue;
      const std::int64_t c = rest % dx.shape[d];
      rest /= dx.shape[d];
      at += c * dx.strides[d];
      base += c * dy.strides[d];
    }
    C acc = load(dx.data + at);
    for (std::int64_t r = 0; r < terms; ++r) {
      std::int64_t offset = base;
      std::int64_t k = r;
      for (int d = dx.rank - 1; d >= 0; --d) {
        if (!broadcast_dim(dx, d)) continue;
        offset += (k % dx.shape[d]) * dy.strides[d];
        k /= dx.shape[d];
      }
      acc += load(dy.data + offset);
    }
    store(dx.data + at, acc);
  }
}

// The output indices along one dim that read input index i (pad_source_index(o) == i), as at most
// three ascending runs [lo, hi) inside [0, out): constant padding one index (none where cropped),
// replicate one run (a border index takes its whole border), reflect up to three single indices.
struct PadRuns {
  std::int64_t lo[3];
  std::int64_t hi[3];
  int count;
};
__device__ inline PadRuns pad_runs(math::PadKind kind, std::int64_t i, std::int64_t before, std::int64_t n,
                                   std::int64_t out) {
  PadRuns runs{{}, {}, 0};
  const auto add = [&](std::int64_t lo, std::int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > out ? out : hi;
    if (lo >= hi) return;
    runs.lo[runs.count] = lo;
    runs.hi[runs.count] = hi;
    ++runs.count;
  };
  switch (kind) {
    case math::PadKind::constant: add(i + before, i + before + 1); break;
    case math::PadKind::replicate: add(i == 0 ? 0 : i + before, i == n - 1 ? out : i + before + 1); break;
    case math::PadKind::reflect: {
      // The mirror images in front and behind, and i itself; each kept only if it reads i.
      const std::int64_t candidates[3] = {before - i, before + i, before + 2 * (n - 1) - i};
      for (int k = 0; k < 3; ++k) {
        const std::int64_t o = candidates[k];
        const bool repeat = (k == 0 && i == 0) || (k == 2 && i == n - 1);  // the same index as k = 1
        if (!repeat && o >= 0 && o < out && math::pad_source_index(kind, o, before, n) == i) add(o, o + 1);
      }
      break;
    }
  }
  return runs;
}

// dx[i] += every dy[o] whose forward read x[i]: one thread per element of dx gathers its outputs
// (several at a reflected or replicated border), in dy's row-major order as the CPU adds them.
template <class T>
__device__ void pad_backward(const DeviceTensor<const T>& x, const std::array<std::int64_t, max_rank>& before,
                             math::PadKind kind, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  if (dx.data == nullptr) return;
  const int rank = dx.rank;
  const std::int64_t n = element_count(dx);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    PadRuns runs[max_rank];
    std::int64_t o[max_rank];  // the output coordinates, an odometer over the runs' product
    int run[max_rank];
    std::int64_t offset = 0;  // of o in dy
    bool reached = true;
    std::int64_t rest = i;
    for (int d = rank - 1; d >= 0; --d) {
      runs[d] = pad_runs(kind, rest % x.shape[d], before[d], x.shape[d], dy.shape[d]);
      rest /= x.shape[d];
      reached = reached && runs[d].count > 0;
      run[d] = 0;
      o[d] = runs[d].lo[0];
    }
    if (!reached) continue;  // every output reading x[i] was cropped away
    for (int d = 0; d < rank; ++d) offset += o[d] * dy.strides[d];
    T* grad = dx.data + element_offset(dx, i);
    compute_t<T> acc = load(grad);
    for (;;) {
      acc += load(dy.data + offset);
      bool carry = true;
      for (int d = rank - 1; carry && d >= 0; --d) {
        offset -= o[d] * dy.strides[d];
        if (++o[d] == runs[d].hi[run[d]]) {
          run[d] = run[d] + 1 == runs[d].count ? 0 : run[d] + 1;
          o[d] = runs[d].lo[run[d]];
          carry = run[d] == 0;
        } else {
          carry = false;
        }
        offset += o[d] * dy.strides[d];
      }
      if (carry) break;
    }
    store(grad, acc);
  }
}

// The first output index whose nearest source is at least `source` (out_size if none): sources
// never decrease along the output, so the outputs reading one input are [first(s), first(s + 1)).
__device__ inline std::int64_t first_reading(std::int64_t source, std::int64_t in_size, std::int64_t out_size,
                                             float inv_scale) {
  std::int64_t lo = 0;
  std::int64_t hi = out_size;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (math::nearest_source_index(mid, in_size, out_size, inv_scale) < source) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// dx[n, c, h, w] += dy[n, c, o, p] over the outputs whose nearest source is (h, w): one thread per
// element of dx gathers them in dy's row-major order, so no two threads add into one element.
template <class T>
__device__ void upsample_nearest_backward(float inv_scale_h, float inv_scale_w, const DeviceTensor<T>& dy,
                                          const DeviceTensor<T>& dx) {
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const std::int64_t channels = dx.shape[1];
  const std::int64_t h = dx.shape[2];
  const std::int64_t w = dx.shape[3];
  const std::int64_t oh = dy.shape[2];
  const std::int64_t ow = dy.shape[3];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t iw = i % w;
    const std::int64_t ih = (i / w) % h;
    const std::int64_t plane = i / (w * h);
    const std::int64_t batch = plane / channels;
    const std::int64_t channel = plane % channels;
    const std::int64_t r0 = first_reading(ih, h, oh, inv_scale_h);
    const std::int64_t r1 = first_reading(ih + 1, h, oh, inv_scale_h);
    const std::int64_t c0 = first_reading(iw, w, ow, inv_scale_w);
    const std::int64_t c1 = first_reading(iw + 1, w, ow, inv_scale_w);
    if (r0 >= r1 || c0 >= c1) continue;
    T* grad = dx.data + batch * dx.strides[0] + channel * dx.strides[1] + ih * dx.strides[2] + iw * dx.strides[3];
    const T* in = dy.data + batch * dy.strides[0] + channel * dy.strides[1];
    compute_t<T> acc = load(grad);
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t c = c0; c < c1; ++c) acc += load(in + r * dy.strides[2] + c * dy.strides[3]);
    }
    store(grad, acc);
  }
}

// Calls `f` with a value of the floating storage type `code` names; nothing for another dtype
// (a cast passes a gradient only between floating dtypes: pack_backward_args refuses the rest).
template <class F>
__device__ void with_float_type(DTypeCode code, F&& f) {
  switch (code) {
    case DTypeCode::f16: f(teeny::f16{}); break;
    case DTypeCode::bf16: f(teeny::bf16{}); break;
    case DTypeCode::f32: f(float{}); break;
    case DTypeCode::f64: f(double{}); break;
    default: break;
  }
}

// dx[i] += dy[i] converted back to x's dtype (`from`), added in x's dtype.
__device__ void cast_backward(std::int64_t n, DTypeCode from, DTypeCode to, const void* dy, void* dx) {
  if (dx == nullptr) return;
  with_float_type(from, [&](auto from_value) {
    using From = decltype(from_value);
    with_float_type(to, [&](auto to_value) {
      using To = decltype(to_value);
      for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
        From* grad = static_cast<From*>(dx) + i;
        *grad = math::cast_gradient_add(*grad, static_cast<const To*>(dy)[i]);
      }
    });
  });
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;
using teeny::cuda_kernels::DTypeCode;

#define TEENY_SHAPE_ENTRIES(T, suffix)                                                                                 \
  extern "C" __global__ void teeny_copy_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y) {                         \
    teeny::cuda_kernels::copy<T>(x, y);                                                                                \
  }                                                                                                                    \
  extern "C" __global__ void teeny_strided_copy_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y) {                 \
    teeny::cuda_kernels::strided_copy<T>(x, y);                                                                        \
  }                                                                                                                    \
  extern "C" __global__ void teeny_pad_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                            \
                                                std::array<std::int64_t, teeny::cuda_kernels::max_rank> before,        \
                                                teeny::math::PadKind kind, T value) {                                  \
    teeny::cuda_kernels::pad<T>(x, y, before, kind, value);                                                            \
  }                                                                                                                    \
  extern "C" __global__ void teeny_upsample_nearest_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,               \
                                                             float inv_scale_h, float inv_scale_w) {                   \
    teeny::cuda_kernels::upsample_nearest<T>(x, y, inv_scale_h, inv_scale_w);                                          \
  }                                                                                                                    \
  extern "C" __global__ void teeny_cast_##suffix(const void* x, void* y, std::int64_t n, DTypeCode from,               \
                                                 DTypeCode to) {                                                       \
    teeny::cuda_kernels::cast(x, y, n, from, to);                                                                      \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CastParamList, decltype(teeny_cast_##suffix)>); \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CopyParamList<T>, decltype(teeny_copy_##suffix)>);        \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::StridedCopyParamList<T>,                        \
                                                  decltype(teeny_strided_copy_##suffix)>);                             \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::PadParamList<T>, decltype(teeny_pad_##suffix)>);          \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UpsampleParamList<T>,                           \
                                                  decltype(teeny_upsample_nearest_##suffix)>);                         \
  extern "C" __global__ void teeny_copy_backward_##suffix(DeviceTensor<const T>, DeviceTensor<T>, DeviceTensor<T> dy,  \
                                                          DeviceTensor<T> dx) {                                        \
    teeny::cuda_kernels::copy_backward<T>(dy, dx);                                                                     \
  }                                                                                                                    \
  extern "C" __global__ void teeny_strided_add_##suffix(DeviceTensor<const T>, DeviceTensor<T>, DeviceTensor<T> dy,    \
                                                        DeviceTensor<T> dx) {                                          \
    teeny::cuda_kernels::strided_add<T>(dy, dx);                                                                       \
  }                                                                                                                    \
  extern "C" __global__ void teeny_broadcast_add_##suffix(DeviceTensor<const T>, DeviceTensor<T>, DeviceTensor<T> dy,  \
                                                          DeviceTensor<T> dx) {                                        \
    teeny::cuda_kernels::broadcast_add<T>(dy, dx);                                                                     \
  }                                                                                                                    \
  extern "C" __global__ void teeny_pad_backward_##suffix(                                                              \
      DeviceTensor<const T> x, DeviceTensor<T>, std::array<std::int64_t, teeny::cuda_kernels::max_rank> before,        \
      teeny::math::PadKind kind, T, DeviceTensor<T> dy, DeviceTensor<T> dx) {                                          \
    teeny::cuda_kernels::pad_backward<T>(x, before, kind, dy, dx);                                                     \
  }                                                                                                                    \
  extern "C" __global__ void teeny_upsample_nearest_backward_##suffix(DeviceTensor<const T>, DeviceTensor<T>,          \
                                                                      float inv_scale_h, float inv_scale_w,            \
                                                                      DeviceTensor<T> dy, DeviceTensor<T> dx) {        \
    teeny::cuda_kernels::upsample_nearest_backward<T>(inv_scale_h, inv_scale_w, dy, dx);                               \
  }                                                                                                                    \
  extern "C" __global__ void teeny_cast_backward_##suffix(const void*, void*, std::int64_t n, DTypeCode from,          \
                                                          DTypeCode to, const void* dy, void* dx) {                    \
    teeny::cuda_kernels::cast_backward(n, from, to, dy, dx);                                                           \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CopyBackwardParamList<T>,                       \
                                                  decltype(teeny_copy_backward_##suffix)>);                            \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::StridedAddParamList<T>,                         \
                                                  decltype(teeny_strided_add_##suffix)>);                              \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::StridedAddParamList<T>,                         \
                                                  decltype(teeny_broadcast_add_##suffix)>);                            \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::PadBackwardParamList<T>,                        \
                                                  decltype(teeny_pad_backward_##suffix)>);                             \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UpsampleBackwardParamList<T>,                   \
                                                  decltype(teeny_upsample_nearest_backward_##suffix)>);                \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CastBackwardParamList,                          \
                                                  decltype(teeny_cast_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRIES)
#undef TEENY_SHAPE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable shape_kernels() noexcept {
#define TEENY_SHAPE_ENTRY(T, suffix)                                                                                 \
  TEENY_KERNEL_ENTRY(teeny_copy_##suffix), TEENY_KERNEL_ENTRY(teeny_strided_copy_##suffix),                          \
      TEENY_KERNEL_ENTRY(teeny_pad_##suffix), TEENY_KERNEL_ENTRY(teeny_upsample_nearest_##suffix),                   \
      TEENY_KERNEL_ENTRY(teeny_cast_##suffix), TEENY_KERNEL_ENTRY(teeny_copy_backward_##suffix),                     \
      TEENY_KERNEL_ENTRY(teeny_strided_add_##suffix), TEENY_KERNEL_ENTRY(teeny_broadcast_add_##suffix),              \
      TEENY_KERNEL_ENTRY(teeny_pad_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_upsample_nearest_backward_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_cast_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRY)};
#undef TEENY_SHAPE_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
