// The Linear kernel teeny launches itself: y = act(x W^T + b) in 16 x 16 output tiles, each
// block staging 16-wide slices of x and W in shared memory. Instantiated per element type as
// teeny_linear_<dtype>; f16 and bf16 accumulate in f32, f64 in f64. (cuBLASLt with its fused
// epilogue, the faster path for large products, is planned: docs/cuda.md.)
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

namespace teeny::cuda_kernels {
namespace {

constexpr int tile = 16;  // the op's block is tile x tile threads (linear_op::block)

template <class T>
__device__ void linear(const DeviceTensor<const T>& x, const DeviceTensor<const T>& w,
                       const DeviceTensor<const T>& bias, const DeviceTensor<T>& y, const math::Epilogue& epilogue) {
  using C = compute_t<T>;
  __shared__ C xs[tile][tile + 1];  // xs[i][k] = x[row i of the tile][k0 + k]
  __shared__ C ws[tile][tile + 1];  // ws[j][k] = W[column j of the tile][k0 + k]
  const std::int64_t rows = x.shape[0];
  const std::int64_t in = x.shape[1];
  const std::int64_t out = w.shape[0];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  // Grid-stride over tiles in both directions; every thread of a block walks the same tiles.
  for (std::int64_t row0 = std::int64_t{blockIdx.y} * tile; row0 < rows; row0 += std::int64_t{gridDim.y} * tile) {
    for (std::int64_t col0 = std::int64_t{blockIdx.x} * tile; col0 < out; col0 += std::int64_t{gridDim.x} * tile) {
      const std::int64_t r = row0 + ty;
      const std::int64_t c = col0 + tx;
      C acc = C(0);
      for (std::int64_t k0 = 0; k0 < in; k0 += tile) {
        const std::int64_t k = k0 + tx;
        xs[ty][tx] = (r < rows && k < in) ? load(x.data + r * x.strides[0] + k * x.strides[1]) : C(0);
        const std::int64_t wr = col0 + ty;
        ws[ty][tx] = (wr < out && k < in) ? load(w.data + wr * w.strides[0] + k * w.strides[1]) : C(0);
        __syncthreads();
        for (int kk = 0; kk < tile; ++kk) acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
      }
      if (r < rows && c < out) {
        if (bias.data != nullptr) acc += load(bias.data + c * bias.strides[0]);
        store(y.data + r * y.strides[0] + c * y.strides[1], math::apply_epilogue(epilogue, acc));
      }
    }
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_LINEAR_ENTRIES(T, suffix)                                                                   \
  extern "C" __global__ void teeny_linear_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight, \
                                                   DeviceTensor<const T> bias, DeviceTensor<T> y,         \
                                                   teeny::math::Epilogue epilogue) {                      \
    teeny::cuda_kernels::linear<T>(x, weight, bias, y, epilogue);                                         \
  }                                                                                                       \
  static_assert(                                                                                          \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::LinearParamList<T>, decltype(teeny_linear_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRIES)
#undef TEENY_LINEAR_ENTRIES

namespace teeny::cuda_kernels {

KernelTable linear_kernels() noexcept {
#define TEENY_LINEAR_ENTRY(T, suffix) {"teeny_linear_" #suffix, reinterpret_cast<const void*>(&teeny_linear_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRY)};
#undef TEENY_LINEAR_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
