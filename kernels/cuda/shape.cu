// Shape kernels: copies (reshape; permute, slice and concat through strides), padding and nearest
// upsampling, one template each, instantiated per element type as teeny_<family>_<dtype>. Which
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

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_SHAPE_ENTRIES(T, suffix)                                                                          \
  extern "C" __global__ void teeny_copy_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y) {                  \
    teeny::cuda_kernels::copy<T>(x, y);                                                                         \
  }                                                                                                             \
  extern "C" __global__ void teeny_strided_copy_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y) {          \
    teeny::cuda_kernels::strided_copy<T>(x, y);                                                                 \
  }                                                                                                             \
  extern "C" __global__ void teeny_pad_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                     \
                                                std::array<std::int64_t, teeny::cuda_kernels::max_rank> before, \
                                                teeny::math::PadKind kind, T value) {                           \
    teeny::cuda_kernels::pad<T>(x, y, before, kind, value);                                                     \
  }                                                                                                             \
  extern "C" __global__ void teeny_upsample_nearest_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,        \
                                                             float inv_scale_h, float inv_scale_w) {            \
    teeny::cuda_kernels::upsample_nearest<T>(x, y, inv_scale_h, inv_scale_w);                                   \
  }                                                                                                             \
  static_assert(                                                                                                \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CopyParamList<T>, decltype(teeny_copy_##suffix)>); \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::StridedCopyParamList<T>,                 \
                                                  decltype(teeny_strided_copy_##suffix)>);                      \
  static_assert(                                                                                                \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::PadParamList<T>, decltype(teeny_pad_##suffix)>);   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UpsampleParamList<T>,                    \
                                                  decltype(teeny_upsample_nearest_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRIES)
#undef TEENY_SHAPE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable shape_kernels() noexcept {
#define TEENY_SHAPE_ENTRY(T, suffix)                                                                \
  {"teeny_copy_" #suffix, reinterpret_cast<const void*>(&teeny_copy_##suffix)},                     \
      {"teeny_strided_copy_" #suffix, reinterpret_cast<const void*>(&teeny_strided_copy_##suffix)}, \
      {"teeny_pad_" #suffix, reinterpret_cast<const void*>(&teeny_pad_##suffix)},                   \
      {"teeny_upsample_nearest_" #suffix, reinterpret_cast<const void*>(&teeny_upsample_nearest_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SHAPE_ENTRY)};
#undef TEENY_SHAPE_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
