// Sequence kernels: embedding lookups and scaled dot-product attention, instantiated per element
// type as teeny_<op>_<dtype>. Attention here is one output element a thread, its scores
// recomputed per element: exact and simple, not fast (a fused flash-style kernel is planned).
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

namespace teeny::cuda_kernels {
namespace {

// Index `i` of `count` integers of dtype `code` at `indices`, widened; -1 for a non-integer dtype.
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

template <class T>
__device__ void embedding(const void* indices, DTypeCode index_dtype, std::int64_t count,
                          const DeviceTensor<const T>& weight, const DeviceTensor<T>& y) {
  const std::int64_t rows = weight.shape[0];
  const std::int64_t dim = weight.shape[1];
  const std::int64_t n = count * dim;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    bool fits = false;
    const std::int64_t index = index_at(indices, index_dtype, i / dim, fits);
    const bool valid = fits && index >= 0 && index < rows;  // out of range: a row of zeros, as the CPU's
    y.data[i] = valid ? weight.data[index * weight.strides[0] + (i % dim) * weight.strides[1]] : T(0.0f);
  }
}

template <class T>
__device__ void attention(const DeviceTensor<const T>& q, const DeviceTensor<const T>& k,
                          const DeviceTensor<const T>& v, const DeviceTensor<T>& y, T scale_as_t, bool causal) {
  using C = compute_t<T>;
  const int r = y.rank;
  const std::int64_t l = q.shape[r - 2];
  const std::int64_t e = q.shape[r - 1];
  const std::int64_t s = k.shape[r - 2];
  const std::int64_t ev = v.shape[r - 1];
  const C scale = static_cast<C>(scale_as_t);
  const std::int64_t n = element_count(y);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t col = i % ev;
    const std::int64_t row = (i / ev) % l;
    std::int64_t rest = i / (ev * l);
    std::int64_t oq = row * q.strides[r - 2];
    std::int64_t ok = 0;
    std::int64_t ov = col * v.strides[r - 1];
    for (int d = r - 3; d >= 0; --d) {
      const std::int64_t coordinate = rest % y.shape[d];
      rest /= y.shape[d];
      oq += coordinate * q.strides[d];
      ok += coordinate * k.strides[d];
      ov += coordinate * v.strides[d];
    }
    const std::int64_t visible = causal ? (row + 1 < s ? row + 1 : s) : s;
    const auto score = [&](std::int64_t j) {
      C dot = C(0);
      for (std::int64_t t = 0; t < e; ++t) {
        dot +=
            load(q.data + oq + t * q.strides[r - 1]) * load(k.data + ok + j * k.strides[r - 2] + t * k.strides[r - 1]);
      }
      return dot * scale;
    };
    C max = -C(INFINITY);
    for (std::int64_t j = 0; j < visible; ++j) max = math::softmax_max(max, score(j));
    double sum = 0;
    for (std::int64_t j = 0; j < visible; ++j) sum += static_cast<double>(math::softmax_exp(score(j), max));
    C out = C(0);
    if (visible > 0) {
      const auto inv = static_cast<C>(1.0 / sum);
      for (std::int64_t j = 0; j < visible; ++j) {
        out += math::softmax_exp(score(j), max) * inv * load(v.data + ov + j * v.strides[r - 2]);
      }
    }
    store(y.data + i, out);
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;
using teeny::cuda_kernels::DTypeCode;

#define TEENY_SEQUENCE_ENTRIES(T, suffix)                                                                             \
  extern "C" __global__ void teeny_embedding_##suffix(const void* indices, DTypeCode index_dtype, std::int64_t count, \
                                                      DeviceTensor<const T> weight, DeviceTensor<T> y) {              \
    teeny::cuda_kernels::embedding<T>(indices, index_dtype, count, weight, y);                                        \
  }                                                                                                                   \
  extern "C" __global__ void teeny_attention_##suffix(DeviceTensor<const T> q, DeviceTensor<const T> k,               \
                                                      DeviceTensor<const T> v, DeviceTensor<T> y, T scale,            \
                                                      bool causal) {                                                  \
    teeny::cuda_kernels::attention<T>(q, k, v, y, scale, causal);                                                     \
  }                                                                                                                   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::EmbeddingParamList<T>,                         \
                                                  decltype(teeny_embedding_##suffix)>);                               \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AttentionParamList<T>,                         \
                                                  decltype(teeny_attention_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SEQUENCE_ENTRIES)
#undef TEENY_SEQUENCE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable sequence_kernels() noexcept {
#define TEENY_SEQUENCE_ENTRY(T, suffix)                                                   \
  {"teeny_embedding_" #suffix, reinterpret_cast<const void*>(&teeny_embedding_##suffix)}, \
      {"teeny_attention_" #suffix, reinterpret_cast<const void*>(&teeny_attention_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SEQUENCE_ENTRY)};
#undef TEENY_SEQUENCE_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
