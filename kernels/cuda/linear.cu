// The Linear and MatMul kernels teeny launches itself. Linear: y = act(x W^T + b) in 16 x 16
// output tiles, each block staging 16-wide slices of x and W in shared memory. MatMul: one output
// element a thread. Instantiated per element type as teeny_linear_<dtype> and teeny_matmul_<dtype>;
// f16 and bf16 accumulate in f32, f64 in f64. (cuBLASLt with its fused epilogue, the faster path
// for large products, is planned: docs/cuda.md.)
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

// torch.matmul: one output element a thread; a's and b's batch dims broadcast against each
// other, right-aligned (stride 0 where a size is 1 or the dim is absent).
template <class T>
__device__ void matmul(const DeviceTensor<const T>& a, const DeviceTensor<const T>& b, const DeviceTensor<T>& y) {
  using C = compute_t<T>;
  const int ar = a.rank;
  const int br = b.rank;
  const std::int64_t n = a.shape[ar - 2];
  const std::int64_t k = a.shape[ar - 1];
  const std::int64_t m = b.shape[br - 1];
  const int batch_rank = (ar > br ? ar : br) - 2;
  const std::int64_t total = element_count(y);
  for (std::int64_t i = first_index(); i < total; i += grid_stride()) {
    const std::int64_t col = i % m;
    const std::int64_t row = (i / m) % n;
    std::int64_t rest = i / (m * n);
    std::int64_t oa = row * a.strides[ar - 2];
    std::int64_t ob = col * b.strides[br - 1];
    for (int d = batch_rank - 1; d >= 0; --d) {
      const int da = d - (batch_rank - (ar - 2));
      const int db = d - (batch_rank - (br - 2));
      const std::int64_t sa = da >= 0 ? a.shape[da] : 1;
      const std::int64_t sb = db >= 0 ? b.shape[db] : 1;
      const std::int64_t size = sa > sb ? sa : sb;
      const std::int64_t coordinate = rest % size;
      rest /= size;
      if (sa != 1) oa += coordinate * a.strides[da];
      if (sb != 1) ob += coordinate * b.strides[db];
    }
    C acc = C(0);
    for (std::int64_t t = 0; t < k; ++t) {
      acc += load(a.data + oa + t * a.strides[ar - 1]) * load(b.data + ob + t * b.strides[br - 2]);
    }
    store(y.data + i, acc);
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_LINEAR_ENTRIES(T, suffix)                                                                             \
  extern "C" __global__ void teeny_linear_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,           \
                                                   DeviceTensor<const T> bias, DeviceTensor<T> y,                   \
                                                   teeny::math::Epilogue epilogue) {                                \
    teeny::cuda_kernels::linear<T>(x, weight, bias, y, epilogue);                                                   \
  }                                                                                                                 \
  extern "C" __global__ void teeny_matmul_##suffix(DeviceTensor<const T> a, DeviceTensor<const T> b,                \
                                                   DeviceTensor<T> y) {                                             \
    teeny::cuda_kernels::matmul<T>(a, b, y);                                                                        \
  }                                                                                                                 \
  static_assert(                                                                                                    \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::LinearParamList<T>, decltype(teeny_linear_##suffix)>); \
  static_assert(                                                                                                    \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::MatMulParamList<T>, decltype(teeny_matmul_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRIES)
#undef TEENY_LINEAR_ENTRIES

namespace teeny::cuda_kernels {

KernelTable linear_kernels() noexcept {
#define TEENY_LINEAR_ENTRY(T, suffix)                                               \
  {"teeny_linear_" #suffix, reinterpret_cast<const void*>(&teeny_linear_##suffix)}, \
      {"teeny_matmul_" #suffix, reinterpret_cast<const void*>(&teeny_matmul_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRY)};
#undef TEENY_LINEAR_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
