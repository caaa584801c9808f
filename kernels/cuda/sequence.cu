// Sequence kernels: embedding lookups and scaled dot-product attention, instantiated per element
// type as teeny_<op>_<dtype>. Attention here is one output element a thread, its scores
// recomputed per element: exact and simple, not fast (a fused flash-style kernel is planned).
//
// Their backward (training), teeny_<op>_backward_<dtype>, adds to the gradients as the CPU's does,
// each gradient element summed by one thread (no atomics: the same result every run). Embedding:
// a thread per column of dweight and bucket of its rows, adding dy's rows in index order.
// Attention: a block per batch entry (per set of entries sharing a broadcast operand) and per
// gradient, recomputing each row's softmax from q and k: dq a row at a time, dk and dv summed in
// shared memory over the rows for a slice of keys at a time.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/reduce.hpp"

namespace teeny::cuda_kernels {
namespace {

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

// dweight[index[i]] += dy[i] for each i, but for indices out of range and padding_idx (whose row
// gets no gradient), as the CPU's. Thread (bucket, column) adds, in index order, the rows of dy
// whose index is in its bucket (index % buckets): each element of dweight has one writer, and a
// repeated index adds its rows in the CPU's order. The buckets are as many as the grid has threads
// for (each thread scans every index).
template <class T>
__device__ void embedding_backward(const void* indices, DTypeCode index_dtype, std::int64_t count,
                                   const DeviceTensor<const T>& weight, const DeviceTensor<T>& dy,
                                   const DeviceTensor<T>& dweight, std::int64_t padding_idx) {
  const std::int64_t rows = weight.shape[0];
  const std::int64_t dim = weight.shape[1];
  if (dweight.data == nullptr || rows == 0 || dim == 0) return;
  const std::int64_t threads = std::int64_t{gridDim.x} * block_threads();
  std::int64_t buckets = threads / dim;
  buckets = buckets < 1 ? 1 : (buckets > rows ? rows : buckets);
  for (std::int64_t u = first_index(); u < buckets * dim; u += grid_stride()) {
    const std::int64_t col = u % dim;
    const std::int64_t bucket = u / dim;
    for (std::int64_t i = 0; i < count; ++i) {
      bool fits = false;
      const std::int64_t index = index_at(indices, index_dtype, i, fits);
      if (!fits || index < 0 || index >= rows || index == padding_idx || index % buckets != bucket) continue;
      T* p = dweight.data + index * dweight.strides[0] + col * dweight.strides[1];
      store(p, load(p) + load(dy.data + i * dy.strides[0] + col * dy.strides[1]));
    }
  }
}

// The maximum of `v` over the block (math::softmax_max: a NaN wins), returned to every thread; every
// thread of the block must call it (blockDim.x a multiple of 32, at most 1024).
template <class C>
__device__ C block_max(C v) {
  __shared__ C partial[32];
  for (int offset = 16; offset > 0; offset >>= 1) v = math::softmax_max(v, __shfl_down_sync(0xffffffffu, v, offset));
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x + 31) / 32 ? partial[lane] : -C(INFINITY);
    for (int offset = 16; offset > 0; offset >>= 1) v = math::softmax_max(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const C total = partial[0];
  __syncthreads();  // `partial` is reused by the next call
  return total;
}

// What attention's backward reads: the forward's q, k, v, y (for its shape) and scale, dy (as y,
// contiguous), and the gradients (viewed over y's batch dims as the forward read q, k and v: stride
// 0 where broadcast). Batch entry b is y's b-th [L, Ev] matrix.
template <class T>
struct AttentionGrad {
  using C = compute_t<T>;
  const DeviceTensor<const T>& q;
  const DeviceTensor<const T>& k;
  const DeviceTensor<const T>& v;
  const DeviceTensor<T>& y;
  const DeviceTensor<T>& dy;
  C scale;
  bool causal;
  int r;
  std::int64_t l, e, s, ev;
  std::int64_t keys;  // the keys any row sees: causal, min(S, L)

  // The keys row i sees: 0 .. i when causal, else all.
  __device__ std::int64_t visible(std::int64_t i) const { return causal ? (i + 1 < keys ? i + 1 : keys) : keys; }

  // Where tensor `t` holds batch entry b (its batch dims read through its strides).
  template <class U>
  __device__ std::int64_t batch_offset(const DeviceTensor<U>& t, std::int64_t b) const {
    std::int64_t offset = 0;
    for (int d = r - 3; d >= 0; --d) {
      offset += (b % y.shape[d]) * t.strides[d];
      b /= y.shape[d];
    }
    return offset;
  }
  // Whether batch entry b is the first of those sharing its elements of `grad` (0 along every dim
  // `grad` is broadcast over), and the entries that share them: the f-th of `sharing(grad)`, in order.
  __device__ bool leads(const DeviceTensor<T>& grad, std::int64_t b) const {
    for (int d = r - 3; d >= 0; --d) {
      if (grad.strides[d] == 0 && b % y.shape[d] != 0) return false;
      b /= y.shape[d];
    }
    return true;
  }
  __device__ std::int64_t sharing(const DeviceTensor<T>& grad) const {
    std::int64_t n = 1;
    for (int d = 0; d < r - 2; ++d) n *= grad.strides[d] == 0 ? y.shape[d] : 1;
    return n;
  }
  __device__ std::int64_t sharer(const DeviceTensor<T>& grad, std::int64_t leader, std::int64_t f) const {
    std::int64_t step = 1;
    for (int d = r - 3; d >= 0; --d) {
      if (grad.strides[d] == 0) {
        leader += (f % y.shape[d]) * step;
        f /= y.shape[d];
      }
      step *= y.shape[d];
    }
    return leader;
  }
  // Whether two gradients are broadcast over the same dims (then shared by the same entries).
  __device__ bool same_sharing(const DeviceTensor<T>& a, const DeviceTensor<T>& b) const {
    for (int d = 0; d < r - 2; ++d) {
      if (y.shape[d] > 1 && (a.strides[d] == 0) != (b.strides[d] == 0)) return false;
    }
    return true;
  }
};

// One row's softmax and the pieces of its gradient, for batch entry b and query row i.
template <class T>
struct AttentionRow {
  using C = compute_t<T>;
  const AttentionGrad<T>& a;
  const T* q;   // the row of q
  const T* k;   // k's matrix
  const T* v;   // v's matrix
  const T* dy;  // the row of dy
  C max = C(0);
  C inv = C(0);     // 1 / the sum of the softmax numerators
  C centre = C(0);  // rowsum(P * dP)

  __device__ AttentionRow(const AttentionGrad<T>& grad, std::int64_t b, std::int64_t i)
      : a(grad),
        q(grad.q.data + grad.batch_offset(grad.q, b) + i * grad.q.strides[grad.r - 2]),
        k(grad.k.data + grad.batch_offset(grad.k, b)),
        v(grad.v.data + grad.batch_offset(grad.v, b)),
        dy(grad.dy.data + (b * grad.l + i) * grad.ev) {}

  // The scaled score of key j, rounded as the forward rounds it (q k^T, then * scale).
  __device__ C score(std::int64_t j) const {
    C dot = C(0);
    const T* key = k + j * a.k.strides[a.r - 2];
    for (std::int64_t t = 0; t < a.e; ++t) dot += load(q + t) * load(key + t);
    return dot * a.scale;
  }
  // dP[j] = dy v^T at key j.
  __device__ C dprob(std::int64_t j) const {
    C dot = C(0);
    const T* value = v + j * a.v.strides[a.r - 2];
    for (std::int64_t t = 0; t < a.ev; ++t) dot += load(dy + t) * load(value + t);
    return dot;
  }
  __device__ C prob(std::int64_t j) const { return math::softmax_exp(score(j), max) * inv; }
  // dS[j] = scale * P * (dP - rowsum(P * dP)), the gradient of the unscaled score q k^T.
  __device__ C dscore(std::int64_t j) const { return a.scale * prob(j) * (dprob(j) - centre); }

  // The row's max, sum and (with_centre) rowsum(P * dP) over its visible keys, as the CPU's
  // attention_probabilities and backward compute them; by the whole block.
  __device__ void reduce(std::int64_t visible, bool with_centre) {
    C m = -C(INFINITY);
    for (std::int64_t j = threadIdx.x; j < visible; j += blockDim.x) m = math::softmax_max(m, score(j));
    max = block_max(m);
    double sum = 0;
    for (std::int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
      sum += static_cast<double>(math::softmax_exp(score(j), max));
    }
    inv = static_cast<C>(1.0 / block_sum(sum));
    if (!with_centre) return;
    double dot = 0;
    for (std::int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
      dot += static_cast<double>(prob(j)) * static_cast<double>(dprob(j));
    }
    centre = static_cast<C>(block_sum(dot));
  }
};

// dq += dS k for the rows of the batch entries that `leader` leads: a row at a time, thread t
// summing dq[i, t] over the keys (their dS staged in `work`, blockDim at a time) and the sharing
// entries, then adding it once.
template <class T>
__device__ void attention_dq(const AttentionGrad<T>& a, const DeviceTensor<T>& dq, std::int64_t leader,
                             compute_t<T>* work) {
  using C = compute_t<T>;
  const int r = a.r;
  const std::int64_t sharing = a.sharing(dq);
  T* out = dq.data + a.batch_offset(dq, leader);
  for (std::int64_t i = 0; i < a.l; ++i) {
    const std::int64_t visible = a.visible(i);
    for (std::int64_t t0 = 0; t0 < a.e; t0 += blockDim.x) {  // once unless E > blockDim
      const std::int64_t t = t0 + threadIdx.x;
      C acc = C(0);
      for (std::int64_t f = 0; f < sharing; ++f) {
        const std::int64_t b = a.sharer(dq, leader, f);
        AttentionRow<T> row(a, b, i);
        row.reduce(visible, true);
        for (std::int64_t j0 = 0; j0 < visible; j0 += blockDim.x) {
          const std::int64_t j = j0 + threadIdx.x;
          if (j < visible) work[threadIdx.x] = row.dscore(j);
          __syncthreads();
          const std::int64_t n = visible - j0 < blockDim.x ? visible - j0 : blockDim.x;
          if (t < a.e) {
            for (std::int64_t jj = 0; jj < n; ++jj) acc += work[jj] * load(row.k + (j0 + jj) * a.k.strides[r - 2] + t);
          }
          __syncthreads();
        }
      }
      if (t < a.e) {
        T* p = out + i * dq.strides[r - 2] + t * dq.strides[r - 1];
        store(p, load(p) + acc);
      }
    }
  }
}

// dk += dS^T q and dv += P^T dy for the keys of the batch entries that `leader` leads (dk's and
// dv's, or only one of them): for a slice of keys and of their columns at a time (as many as fit in
// `work` after the slice's P and dS), every row of every sharing entry adds its share there, each
// element by one thread; the slice is then added to dk and dv once.
template <class T>
__device__ void attention_dkv(const AttentionGrad<T>& a, const DeviceTensor<T>& dk, const DeviceTensor<T>& dv,
                              std::int64_t leader, compute_t<T>* work, std::int64_t work_size) {
  using C = compute_t<T>;
  constexpr std::int64_t max_keys = 256;
  const int r = a.r;
  const DeviceTensor<T>& owner = dk.data != nullptr ? dk : dv;
  const std::int64_t sharing = a.sharing(owner);
  const std::int64_t ek = dk.data != nullptr ? a.e : 0;
  const std::int64_t width = ek + (dv.data != nullptr ? a.ev : 0);  // dk's columns, then dv's
  C* probs = work;
  C* dscores = work + max_keys;
  C* acc = work + 2 * max_keys;
  const std::int64_t capacity = work_size - 2 * max_keys;
  const std::int64_t tc = width < capacity ? width : capacity;
  const std::int64_t jc = tc == 0 ? 1 : (capacity / tc < max_keys ? capacity / tc : max_keys);
  T* out_k = dk.data != nullptr ? dk.data + a.batch_offset(dk, leader) : nullptr;
  T* out_v = dv.data != nullptr ? dv.data + a.batch_offset(dv, leader) : nullptr;
  for (std::int64_t u0 = 0; u0 < width; u0 += tc) {
    const std::int64_t tw = width - u0 < tc ? width - u0 : tc;
    for (std::int64_t j0 = 0; j0 < a.keys; j0 += jc) {
      const std::int64_t jw = a.keys - j0 < jc ? a.keys - j0 : jc;
      for (std::int64_t x = threadIdx.x; x < jw * tw; x += blockDim.x) acc[x] = C(0);
      for (std::int64_t f = 0; f < sharing; ++f) {
        const std::int64_t b = a.sharer(owner, leader, f);
        // Causal: row i sees keys 0 .. i, so rows before the slice see none of it.
        for (std::int64_t i = a.causal ? j0 : 0; i < a.l; ++i) {
          const std::int64_t visible = a.visible(i);
          AttentionRow<T> row(a, b, i);
          row.reduce(visible, ek > 0);
          for (std::int64_t jj = threadIdx.x; jj < jw; jj += blockDim.x) {
            const std::int64_t j = j0 + jj;
            probs[jj] = j < visible ? row.prob(j) : C(0);
            dscores[jj] = j < visible && ek > 0 ? row.dscore(j) : C(0);
          }
          __syncthreads();
          for (std::int64_t x = threadIdx.x; x < jw * tw; x += blockDim.x) {
            const std::int64_t jj = x / tw;
            const std::int64_t u = u0 + x % tw;
            acc[x] += u < ek ? dscores[jj] * load(row.q + u) : probs[jj] * load(row.dy + (u - ek));
          }
          __syncthreads();
        }
      }
      for (std::int64_t x = threadIdx.x; x < jw * tw; x += blockDim.x) {
        const std::int64_t j = j0 + x / tw;
        const std::int64_t u = u0 + x % tw;
        T* p = u < ek ? out_k + j * dk.strides[r - 2] + u * dk.strides[r - 1]
                      : out_v + j * dv.strides[r - 2] + (u - ek) * dv.strides[r - 1];
        store(p, load(p) + acc[x]);
      }
      __syncthreads();  // `acc` is reused by the next slice
    }
  }
}

// Attention's backward, as the CPU's (P recomputed from q and k; dv += P^T dy, dS = scale * P *
// (dy v^T - rowsum(P * dy v^T)), dq += dS k, dk += dS^T q). Block units, grid-stride: for each
// batch entry b, unit b makes dq, unit B + b dk (and dv, when dk and dv are shared alike), unit
// 2B + b dv, each only if b leads the entries sharing that gradient's elements.
template <class T>
__device__ void attention_backward(const DeviceTensor<const T>& q, const DeviceTensor<const T>& k,
                                   const DeviceTensor<const T>& v, const DeviceTensor<T>& y, T scale, bool causal,
                                   const DeviceTensor<T>& dy, const DeviceTensor<T>& dq, const DeviceTensor<T>& dk,
                                   const DeviceTensor<T>& dv) {
  using C = compute_t<T>;
  constexpr std::int64_t work_size = 32768 / sizeof(C);  // 32 KiB of shared memory
  __shared__ C work[work_size];
  const int r = y.rank;
  AttentionGrad<T> a{
      q, k, v, y, dy, static_cast<C>(scale), causal, r, q.shape[r - 2], q.shape[r - 1], k.shape[r - 2], v.shape[r - 1],
      0};
  a.keys = causal ? (a.s < a.l ? a.s : a.l) : a.s;
  std::int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= y.shape[d];
  if (batches * a.l * a.keys == 0) return;
  const bool kv_together = dk.data != nullptr && dv.data != nullptr && a.same_sharing(dk, dv);
  for (std::int64_t unit = blockIdx.x; unit < 3 * batches; unit += gridDim.x) {
    const std::int64_t b = unit % batches;
    switch (unit / batches) {
      case 0:
        if (dq.data != nullptr && a.leads(dq, b)) attention_dq(a, dq, b, work);
        break;
      case 1:
        if (dk.data != nullptr && a.leads(dk, b)) {
          attention_dkv(a, dk, kv_together ? dv : DeviceTensor<T>{}, b, work, work_size);
        }
        break;
      default:
        if (dv.data != nullptr && !kv_together && a.leads(dv, b))
          attention_dkv(a, DeviceTensor<T>{}, dv, b, work, work_size);
        break;
    }
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
                                                  decltype(teeny_attention_##suffix)>);                               \
  extern "C" __global__ void teeny_embedding_backward_##suffix(                                                       \
      const void* indices, DTypeCode index_dtype, std::int64_t count, DeviceTensor<const T> weight, DeviceTensor<T>,  \
      DeviceTensor<T> dy, DeviceTensor<T> dweight, std::int64_t padding_idx) {                                        \
    teeny::cuda_kernels::embedding_backward<T>(indices, index_dtype, count, weight, dy, dweight, padding_idx);        \
  }                                                                                                                   \
  extern "C" __global__ void teeny_attention_backward_##suffix(                                                       \
      DeviceTensor<const T> q, DeviceTensor<const T> k, DeviceTensor<const T> v, DeviceTensor<T> y, T scale,          \
      bool causal, DeviceTensor<T> dy, DeviceTensor<T> dq, DeviceTensor<T> dk, DeviceTensor<T> dv) {                  \
    teeny::cuda_kernels::attention_backward<T>(q, k, v, y, scale, causal, dy, dq, dk, dv);                            \
  }                                                                                                                   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::EmbeddingBackwardParamList<T>,                 \
                                                  decltype(teeny_embedding_backward_##suffix)>);                      \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AttentionBackwardParamList<T>,                 \
                                                  decltype(teeny_attention_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SEQUENCE_ENTRIES)
#undef TEENY_SEQUENCE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable sequence_kernels() noexcept {
#define TEENY_SEQUENCE_ENTRY(T, suffix)                                                       \
  TEENY_KERNEL_ENTRY(teeny_embedding_##suffix), TEENY_KERNEL_ENTRY(teeny_attention_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_embedding_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_attention_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_SEQUENCE_ENTRY)};
#undef TEENY_SEQUENCE_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
