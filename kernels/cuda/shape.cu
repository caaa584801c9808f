// Shape kernels: copies (reshape; permute, slice and concat through strides), padding, nearest
// upsampling and casts, one template each, instantiated per element type as teeny_<family>_<dtype>. Which
// input element an output reads is kernels/math/shape.hpp's rule, the CPU backend's own.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

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
                                                  decltype(teeny_upsample_nearest_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRIES)
#undef TEENY_SHAPE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable shape_kernels() noexcept {
#define TEENY_SHAPE_ENTRY(T, suffix)                                                                        \
  {"teeny_copy_" #suffix, reinterpret_cast<const void*>(&teeny_copy_##suffix)},                             \
      {"teeny_strided_copy_" #suffix, reinterpret_cast<const void*>(&teeny_strided_copy_##suffix)},         \
      {"teeny_pad_" #suffix, reinterpret_cast<const void*>(&teeny_pad_##suffix)},                           \
      {"teeny_upsample_nearest_" #suffix, reinterpret_cast<const void*>(&teeny_upsample_nearest_##suffix)}, \
      {"teeny_cast_" #suffix, reinterpret_cast<const void*>(&teeny_cast_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRY)};
#undef TEENY_SHAPE_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
