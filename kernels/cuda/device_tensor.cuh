#pragma once
// Device-side helpers the kernels share: loads and stores in each element type's compute type
// (f16 and bf16 store 16 bits and compute in float, as PyTorch does), element counts and offsets
// of a DeviceTensor, grid-stride indices, a block-wide sum, integer indices of a run-time dtype,
// the check that an entry point takes its parameter list, and the list of element types every
// kernel is instantiated for.
#include <cstdint>
#include <type_traits>

#include "cuda/params.hpp"

namespace teeny::cuda_kernels {

template <class T>
struct ComputeType {
  using type = float;  // f16, bf16, f32
};
template <>
struct ComputeType<double> {
  using type = double;
};
template <class T>
using compute_t = typename ComputeType<std::remove_const_t<T>>::type;

template <class T>
__device__ inline compute_t<T> load(const T* p) {
  return static_cast<compute_t<T>>(*p);
}
template <class T>
__device__ inline void store(T* p, compute_t<T> value) {
  *p = T(value);
}

template <class T>
__device__ inline std::int64_t element_count(const DeviceTensor<T>& t) {
  std::int64_t n = 1;
  for (int d = 0; d < t.rank; ++d) n *= t.shape[d];
  return n;
}

template <class T>
__device__ inline bool is_contiguous(const DeviceTensor<T>& t) {
  std::int64_t expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

/// The offset (in elements) of the element with row-major index `index` in `t`'s shape.
template <class T>
__device__ inline std::int64_t element_offset(const DeviceTensor<T>& t, std::int64_t index) {
  std::int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) {
    const std::int64_t n = t.shape[d];
    offset += (index % n) * t.strides[d];
    index /= n;
  }
  return offset;
}

/// Dim d of a broadcast operand's gradient view (the output's shape, stride 0 where the operand
/// was repeated) is one the operand was broadcast along.
template <class T>
__device__ inline bool broadcast_dim(const DeviceTensor<T>& g, int d) {
  return g.strides[d] == 0 && g.shape[d] > 1;
}
/// The number of distinct elements of a gradient view (its operand's element count), or, with
/// keep = false, of the output's elements that add into each.
template <class T>
__device__ inline std::int64_t grad_extent(const DeviceTensor<T>& g, bool keep) {
  std::int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) {
    if (broadcast_dim(g, d) != keep) n *= g.shape[d];
  }
  return n;
}

/// The first index this thread takes in a grid-stride loop over a 1-D grid (of blocks of any
/// shape: all of a block's threads count), and the loop's stride.
__device__ inline std::int64_t block_threads() { return std::int64_t{blockDim.x} * blockDim.y * blockDim.z; }
__device__ inline std::int64_t first_index() {
  const std::int64_t in_block = (std::int64_t{threadIdx.z} * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  return std::int64_t{blockIdx.x} * block_threads() + in_block;
}
__device__ inline std::int64_t grid_stride() { return std::int64_t{gridDim.x} * block_threads(); }

/// The sum of `v` over the block's threads, returned to every thread; every thread of the block
/// must call it (blockDim.x a multiple of 32, at most 1024).
__device__ inline double block_sum(double v) {
  __shared__ double partial[32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x + 31) / 32 ? partial[lane] : 0.0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const double total = partial[0];
  __syncthreads();  // `partial` is reused by the next call
  return total;
}

/// Index `i` of the integers of dtype `code` at `indices` (an embedding's indices, a loss's
/// targets), widened; `in_range_type` is false for a u64 above int64's range and for a dtype that
/// is not an integer one.
__device__ inline std::int64_t index_at(const void* indices, DTypeCode code, std::int64_t i, bool& in_range_type) {
  in_range_type = true;
  switch (code) {
    case DTypeCode::i8: return static_cast<const std::int8_t*>(indices)[i];
    case DTypeCode::i16: return static_cast<const std::int16_t*>(indices)[i];
    case DTypeCode::i32: return static_cast<const std::int32_t*>(indices)[i];
    case DTypeCode::i64: return static_cast<const std::int64_t*>(indices)[i];
    case DTypeCode::u8: return static_cast<const std::uint8_t*>(indices)[i];
    case DTypeCode::u16: return static_cast<const std::uint16_t*>(indices)[i];
    case DTypeCode::u32: return static_cast<const std::uint32_t*>(indices)[i];
    case DTypeCode::u64: {
      const std::uint64_t u = static_cast<const std::uint64_t*>(indices)[i];
      in_range_type = u < (std::uint64_t{1} << 63);
      return static_cast<std::int64_t>(u);
    }
    default: in_range_type = false; return -1;
  }
}

/// `Kernel` (a __global__ function) takes exactly the parameters of `List`, in order.
template <class List, class Kernel>
inline constexpr bool takes_params = false;
template <class... P>
inline constexpr bool takes_params<ParamList<P...>, void(P...)> = true;

}  // namespace teeny::cuda_kernels

// Instantiates `X(type, suffix)` for every floating element type, the suffix naming the entry
// point (teeny_unary_f32, ..._f64, ..._f16, ..._bf16).
#define TEENY_CUDA_FOR_EACH_FLOAT(X) \
  X(float, f32)                      \
  X(double, f64)                     \
  X(teeny::f16, f16)                 \
  X(teeny::bf16, bf16)
