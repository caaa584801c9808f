// The Linear and MatMul kernels teeny launches itself. Linear: y = act(x W^T + b) in 16 x 16
// output tiles, each block staging 16-wide slices of x and W in shared memory. MatMul: one output
// element a thread. Instantiated per element type as teeny_linear_<dtype> and teeny_matmul_<dtype>;
// f16 and bf16 accumulate in f32, f64 in f64. (cuBLASLt with its fused epilogue, the faster path
// for large products, is planned: docs/cuda.md.)
//
// Their backward (training), teeny_linear_backward_<dtype> and teeny_matmul_backward_<dtype>, add to
// the gradients as the CPU's do. Linear: dx += dz W and dW += dz^T x in 16 x 16 tiles of the same
// kind, db += the column sums of dz, with dz = dy * act'(y) computed where dy is read. MatMul: one
// element of da or db a thread, summed over the batches that read it. Each gradient element is
// summed by one thread and written once: no atomics, the same result every run.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/gradient.hpp"

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

// dL/d(pre-activation) at (r, j) of a [rows, out] output: dy through the fused activation's
// derivative, which a fused epilogue takes from the output (as the CPU's epilogue_backward).
template <class T>
__device__ compute_t<T> pre_activation_grad(const math::Epilogue& e, const DeviceTensor<T>& dy,
                                            const DeviceTensor<T>& y, std::int64_t r, std::int64_t j) {
  const compute_t<T> g = load(dy.data + r * dy.strides[0] + j * dy.strides[1]);
  if (!e.active) return g;
  return g * math::unary_derivative_from_output(e.fn, load(y.data + r * y.strides[0] + j * y.strides[1]), e.params);
}

// The linear's backward on a grid of 16 x 16 tiles (x over in_features, y over the larger of rows
// and out_features): the tile (i, j) of dx[rows, in] and the tile (i, j) of dW[out, in], where they
// exist; the first column of blocks also sums db for its 16 outputs.
template <class T>
__device__ void linear_backward(const DeviceTensor<const T>& x, const DeviceTensor<const T>& w,
                                const DeviceTensor<T>& y, const math::Epilogue& epilogue, const DeviceTensor<T>& dy,
                                const DeviceTensor<T>& dx, const DeviceTensor<T>& dweight,
                                const DeviceTensor<T>& dbias) {
  using C = compute_t<T>;
  __shared__ C as[tile][tile + 1];
  __shared__ C bs[tile][tile + 1];
  const std::int64_t rows = x.shape[0];
  const std::int64_t in = x.shape[1];
  const std::int64_t out = w.shape[0];
  const std::int64_t tall = rows > out ? rows : out;
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const auto dz = [&](std::int64_t r, std::int64_t j) { return pre_activation_grad(epilogue, dy, y, r, j); };
  // Grid-stride over tiles in both directions; every thread of a block walks the same tiles, so
  // the conditions below are the same for the whole block (its __syncthreads are reached by all).
  for (std::int64_t row0 = std::int64_t{blockIdx.y} * tile; row0 < tall; row0 += std::int64_t{gridDim.y} * tile) {
    if (blockIdx.x == 0 && dbias.data != nullptr && row0 < out) {
      // db[j] += sum over rows of dz[r, j]: 16 partial sums a column, then added in order.
      const std::int64_t j = row0 + tx;
      C partial = C(0);
      if (j < out) {
        for (std::int64_t r = ty; r < rows; r += tile) partial += dz(r, j);
      }
      as[ty][tx] = partial;
      __syncthreads();
      if (ty == 0 && j < out) {
        C sum = C(0);
        for (int k = 0; k < tile; ++k) sum += as[k][tx];
        T* p = dbias.data + j * dbias.strides[0];
        store(p, load(p) + sum);
      }
      __syncthreads();
    }
    for (std::int64_t col0 = std::int64_t{blockIdx.x} * tile; col0 < in; col0 += std::int64_t{gridDim.x} * tile) {
      const std::int64_t c = col0 + tx;
      if (dx.data != nullptr && row0 < rows) {
        // dx[r, c] += sum over j of dz[r, j] W[j, c]
        const std::int64_t r = row0 + ty;
        C acc = C(0);
        for (std::int64_t k0 = 0; k0 < out; k0 += tile) {
          as[ty][tx] = (r < rows && k0 + tx < out) ? dz(r, k0 + tx) : C(0);  // as[i][k] = dz[row0 + i][k0 + k]
          bs[ty][tx] = (k0 + ty < out && c < in) ? load(w.data + (k0 + ty) * w.strides[0] + c * w.strides[1])
                                                 : C(0);  // bs[k][j] = W[k0 + k][col0 + j]
          __syncthreads();
          for (int kk = 0; kk < tile; ++kk) acc += as[ty][kk] * bs[kk][tx];
          __syncthreads();
        }
        if (r < rows && c < in) {
          T* p = dx.data + r * dx.strides[0] + c * dx.strides[1];
          store(p, load(p) + acc);
        }
      }
      if (dweight.data != nullptr && row0 < out) {
        // dW[o, c] += sum over r of dz[r, o] x[r, c]
        const std::int64_t o = row0 + ty;
        C acc = C(0);
        for (std::int64_t k0 = 0; k0 < rows; k0 += tile) {
          as[ty][tx] = (k0 + tx < rows && o < out) ? dz(k0 + tx, o) : C(0);  // as[i][k] = dz[k0 + k][row0 + i]
          bs[ty][tx] = (k0 + ty < rows && c < in) ? load(x.data + (k0 + ty) * x.strides[0] + c * x.strides[1])
                                                  : C(0);  // bs[k][j] = x[k0 + k][col0 + j]
          __syncthreads();
          for (int kk = 0; kk < tile; ++kk) acc += as[ty][kk] * bs[kk][tx];
          __syncthreads();
        }
        if (o < out && c < in) {
          T* p = dweight.data + o * dweight.strides[0] + c * dweight.strides[1];
          store(p, load(p) + acc);
        }
      }
    }
  }
}

// torch.matmul's backward, one element of da or db a thread (da's first, then db's): da[.., i, t]
// += sum over col of dy[.., i, col] b[.., t, col], and db[.., t, col] += sum over i of a[.., i, t]
// dy[.., i, col], each summed over every batch of the output that read the operand's element (a
// broadcast operand's batches are shared), in batch order.
template <class T>
__device__ void matmul_backward(const DeviceTensor<const T>& a, const DeviceTensor<const T>& b,
                                const DeviceTensor<T>& dy, const DeviceTensor<T>& da, const DeviceTensor<T>& db) {
  using C = compute_t<T>;
  const int ar = a.rank;
  const int br = b.rank;
  const std::int64_t n = a.shape[ar - 2];
  const std::int64_t m = b.shape[br - 1];
  const int batch_rank = (ar > br ? ar : br) - 2;
  const int lead_a = batch_rank - (ar - 2);  // the output's batch dim d is a's dim d - lead_a
  const int lead_b = batch_rank - (br - 2);
  std::int64_t size[max_rank];  // the output's batch dims
  for (int d = 0; d < batch_rank; ++d) {
    const std::int64_t sa = d >= lead_a ? a.shape[d - lead_a] : 1;
    const std::int64_t sb = d >= lead_b ? b.shape[d - lead_b] : 1;
    size[d] = sa > sb ? sa : sb;
  }
  const std::int64_t na = da.data != nullptr ? element_count(a) : 0;
  const std::int64_t nb = db.data != nullptr ? element_count(b) : 0;
  for (std::int64_t i = first_index(); i < na + nb; i += grid_stride()) {
    const bool of_a = i < na;
    const DeviceTensor<const T>& own = of_a ? a : b;  // the operand whose gradient element this is
    const DeviceTensor<T>& grad = of_a ? da : db;
    const int lead = of_a ? lead_a : lead_b;
    const std::int64_t e = of_a ? i : i - na;
    std::int64_t coordinate[max_rank];
    std::int64_t rest = e;
    for (int d = own.rank - 1; d >= 0; --d) {
      coordinate[d] = rest % own.shape[d];
      rest /= own.shape[d];
    }
    // The output's batches that read this element: its own coordinates where it has a batch dim
    // of size > 1, any where it is broadcast.
    std::int64_t shared = 1;
    for (int d = 0; d < batch_rank; ++d) {
      if (d < lead || own.shape[d - lead] == 1) shared *= size[d];
    }
    const std::int64_t row = coordinate[own.rank - 2];  // a: i; b: t
    const std::int64_t col = coordinate[own.rank - 1];  // a: t; b: col
    C acc = C(0);
    for (std::int64_t f = 0; f < shared; ++f) {
      std::int64_t left = f;
      std::int64_t batch = 0;
      std::int64_t step = 1;
      std::int64_t oa = 0;
      std::int64_t ob = 0;
      for (int d = batch_rank - 1; d >= 0; --d) {
        std::int64_t c;
        if (d >= lead && own.shape[d - lead] != 1) {
          c = coordinate[d - lead];
        } else {
          c = left % size[d];
          left /= size[d];
        }
        batch += c * step;
        step *= size[d];
        if (d >= lead_a && a.shape[d - lead_a] != 1) oa += c * a.strides[d - lead_a];
        if (d >= lead_b && b.shape[d - lead_b] != 1) ob += c * b.strides[d - lead_b];
      }
      const T* g = dy.data + batch * n * m;  // dy is contiguous, as y
      if (of_a) {
        for (std::int64_t j = 0; j < m; ++j) {
          acc += load(g + row * m + j) * load(b.data + ob + col * b.strides[br - 2] + j * b.strides[br - 1]);
        }
      } else {
        for (std::int64_t r = 0; r < n; ++r) {
          acc += load(a.data + oa + r * a.strides[ar - 2] + row * a.strides[ar - 1]) * load(g + r * m + col);
        }
      }
    }
    T* p = grad.data + element_offset(grad, e);
    store(p, load(p) + acc);
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_LINEAR_ENTRIES(T, suffix)                                                                              \
  extern "C" __global__ void teeny_linear_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,            \
                                                   DeviceTensor<const T> bias, DeviceTensor<T> y,                    \
                                                   teeny::math::Epilogue epilogue) {                                 \
    teeny::cuda_kernels::linear<T>(x, weight, bias, y, epilogue);                                                    \
  }                                                                                                                  \
  extern "C" __global__ void teeny_matmul_##suffix(DeviceTensor<const T> a, DeviceTensor<const T> b,                 \
                                                   DeviceTensor<T> y) {                                              \
    teeny::cuda_kernels::matmul<T>(a, b, y);                                                                         \
  }                                                                                                                  \
  static_assert(                                                                                                     \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::LinearParamList<T>, decltype(teeny_linear_##suffix)>);  \
  static_assert(                                                                                                     \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::MatMulParamList<T>, decltype(teeny_matmul_##suffix)>);  \
  extern "C" __global__ void teeny_linear_backward_##suffix(                                                         \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T>, DeviceTensor<T> y,               \
      teeny::math::Epilogue epilogue, DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight,               \
      DeviceTensor<T> dbias) {                                                                                       \
    teeny::cuda_kernels::linear_backward<T>(x, weight, y, epilogue, dy, dx, dweight, dbias);                         \
  }                                                                                                                  \
  extern "C" __global__ void teeny_matmul_backward_##suffix(DeviceTensor<const T> a, DeviceTensor<const T> b,        \
                                                            DeviceTensor<T>, DeviceTensor<T> dy, DeviceTensor<T> da, \
                                                            DeviceTensor<T> db) {                                    \
    teeny::cuda_kernels::matmul_backward<T>(a, b, dy, da, db);                                                       \
  }                                                                                                                  \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::LinearBackwardParamList<T>,                   \
                                                  decltype(teeny_linear_backward_##suffix)>);                        \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::MatMulBackwardParamList<T>,                   \
                                                  decltype(teeny_matmul_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRIES)
#undef TEENY_LINEAR_ENTRIES

namespace teeny::cuda_kernels {

KernelTable linear_kernels() noexcept {
#define TEENY_LINEAR_ENTRY(T, suffix)                                                   \
  TEENY_KERNEL_ENTRY(teeny_linear_##suffix), TEENY_KERNEL_ENTRY(teeny_matmul_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_linear_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_matmul_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINEAR_ENTRY)};
#undef TEENY_LINEAR_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
