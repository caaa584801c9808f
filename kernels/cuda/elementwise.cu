// Elementwise kernels: unary functions (activations, exp/log/...) and broadcasting binary ops,
// one template each, instantiated per element type as the entry points teeny_<op>_<dtype>. The
// per-element formulas are kernels/math/elementwise.hpp's, the CPU backend's own.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

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

}  // namespace
}  // namespace teeny::cuda_kernels

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
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::UnaryParamList<T>, decltype(teeny_unary_##suffix)>);      \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BinaryParamList<T>, decltype(teeny_binary_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_ELEMENTWISE_ENTRIES)
#undef TEENY_ELEMENTWISE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable elementwise_kernels() noexcept {
#define TEENY_ELEMENTWISE_ENTRY(T, suffix)                                        \
  {"teeny_unary_" #suffix, reinterpret_cast<const void*>(&teeny_unary_##suffix)}, \
      {"teeny_binary_" #suffix, reinterpret_cast<const void*>(&teeny_binary_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_ELEMENTWISE_ENTRY)};
#undef TEENY_ELEMENTWISE_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
