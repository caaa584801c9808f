// teeny.cpu:sequence — CPU kernels of embedding_op (a row gather) and attention_op (scaled
// dot-product attention on the GEMM, one block of query rows per task; dgemm in f64), and their
// backward.
module;
#include <cmath>

#include "cpu/kernels/gemm.hpp"
#include "math/reduce.hpp"
export module teeny.cpu:sequence;
import teeny.std;
import teeny.core;
import teeny.ops;
import :context;

export namespace teeny {

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<NoState> prepare_kernel(const embedding_op<T>& op, const EmbeddingArgs<T>& args, CpuContext& cpu);
/// An index outside [0, num_embeddings) gives a row of zeros (PyTorch raises; a kernel cannot).
template <CpuReal T>
void run_kernel(const embedding_op<T>& op, const EmbeddingArgs<T>& args, NoState& state, CpuContext& cpu);
#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const embedding_op<T>& op, const EmbeddingBackwardArgs<T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const embedding_op<T>& op, const EmbeddingBackwardArgs<T>& args, NoState& state,
                         CpuContext& cpu);
#endif

struct AttentionState {
  std::int64_t block_rows = 1;  // query rows per task; its scores (block_rows x S) live in the CPU scratch
};
template <CpuReal T>
Result<AttentionState> prepare_kernel(const attention_op<T>& op, const AttentionArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const attention_op<T>& op, const AttentionArgs<T>& args, AttentionState& state, CpuContext& cpu);

#if TEENY_TRAINING
/// One batch entry's probabilities P and their gradient (L x S each), reused batch after batch.
template <class T>
struct AttentionGradState {
  std::vector<T> probs;
  std::vector<T> dprobs;
};
template <CpuReal T>
Result<AttentionGradState<T>> prepare_backward_kernel(const attention_op<T>& op, const AttentionBackwardArgs<T>& args,
                                                      CpuContext& cpu);
/// Batch entries in order (a broadcast operand's gradient sums deterministically), the GEMMs of
/// each on the pool.
template <CpuReal T>
void run_backward_kernel(const attention_op<T>& op, const AttentionBackwardArgs<T>& args, AttentionGradState<T>& state,
                         CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
namespace {
constexpr std::int64_t chunk = 1 << 14;  // elements per task: big enough to amortise a wake-up
constexpr std::int64_t max_block_rows = 64;

template <class I, class T>
void gather_rows(const I* indices, const EmbeddingArgs<T>& args, CpuContext& cpu) {
  const std::int64_t rows = args.weight.shape[0];
  const std::int64_t dim = args.weight.shape[1];
  const std::int64_t count = args.count;
  const std::int64_t per_task = std::max<std::int64_t>(1, chunk / std::max<std::int64_t>(dim, 1));
  const auto tasks = static_cast<std::size_t>((count + per_task - 1) / per_task);
  cpu.pool().parallel_for(tasks, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * per_task;
    const std::int64_t last = std::min(count, first + per_task);
    for (std::int64_t i = first; i < last; ++i) {
      const I index = indices[i];
      // A negative index wraps to a huge unsigned one: one comparison checks both ends.
      const bool valid = static_cast<std::uint64_t>(index) < static_cast<std::uint64_t>(rows);
      T* out = args.y.data + i * dim;
      if (valid) {
        const T* src = args.weight.data + static_cast<std::int64_t>(index) * args.weight.strides[0];
        std::memcpy(out, src, sizeof(T) * static_cast<std::size_t>(dim));
      } else {
        std::fill(out, out + dim, T(0));
      }
    }
  });
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const embedding_op<T>&, const EmbeddingArgs<T>& args, CpuContext&) {
  if (args.weight.rank() != 2 || args.weight.strides[1] != 1) {
    return fail(Errc::unsupported, "embedding weight ", args.weight.shape, " must be a contiguous matrix");
  }
  return NoState{};
}

template <CpuReal T>
void run_kernel(const embedding_op<T>&, const EmbeddingArgs<T>& args, NoState&, CpuContext& cpu) {
  visit_dtype(args.index_dtype, [&]<class I>(std::type_identity<I>) {
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      gather_rows(static_cast<const I*>(args.indices), args, cpu);
    }
  });
}

template <CpuReal T>
Result<AttentionState> prepare_kernel(const attention_op<T>&, const AttentionArgs<T>& args, CpuContext& cpu) {
  const std::size_t r = args.y.rank();
  AttentionState state;
  state.block_rows = std::clamp<std::int64_t>(args.q.shape[r - 2], 1, max_block_rows);
  const auto keys = static_cast<std::size_t>(args.k.shape[r - 2]);
  if (!cpu.reserve_scratch(static_cast<std::size_t>(state.block_rows) * keys * sizeof(T))) {
    return fail(Errc::out_of_memory, "cannot allocate attention scores of ", state.block_rows, "x", keys,
                " per thread");
  }
  return state;
}

template <CpuReal T>
void run_kernel(const attention_op<T>&, const AttentionArgs<T>& args, AttentionState& state, CpuContext& cpu) {
  const std::size_t r = args.y.rank();
  const std::int64_t l = args.q.shape[r - 2];
  const std::int64_t e = args.q.shape[r - 1];
  const std::int64_t s = args.k.shape[r - 2];
  const std::int64_t ev = args.v.shape[r - 1];
  std::int64_t batches = 1;
  for (std::size_t d = 0; d + 2 < r; ++d) batches *= args.y.shape[d];
  if (batches * l * ev == 0) return;
  const std::int64_t rows_per_block = state.block_rows;
  const std::int64_t blocks = (l + rows_per_block - 1) / rows_per_block;
  const auto lq = static_cast<std::size_t>(args.q.strides[r - 2]);
  const auto lk = static_cast<std::size_t>(args.k.strides[r - 2]);
  const auto lv = static_cast<std::size_t>(args.v.strides[r - 2]);
  const T scale = args.scale;
  const cpu::GemmEpilogue<T> none;
  // One task per block of query rows of one batch entry: the GEMMs inside run on its thread.
  cpu.pool().parallel_for(static_cast<std::size_t>(batches * blocks), [&](std::size_t job, std::size_t worker) {
    const auto batch = static_cast<std::int64_t>(job) / blocks;
    const std::int64_t r0 = (static_cast<std::int64_t>(job) % blocks) * rows_per_block;
    const std::int64_t r1 = std::min(l, r0 + rows_per_block);
    std::int64_t oq = r0 * args.q.strides[r - 2];
    std::int64_t ok = 0;
    std::int64_t ov = 0;
    std::int64_t rest = batch;
    for (std::size_t d = r - 2; d-- > 0;) {
      const std::int64_t coordinate = rest % args.y.shape[d];
      rest /= args.y.shape[d];
      oq += coordinate * args.q.strides[d];
      ok += coordinate * args.k.strides[d];
      ov += coordinate * args.v.strides[d];
    }
    T* out = args.y.data + (batch * l + r0) * ev;
    // Causal: row i sees keys 0..i, so the block needs no key past its last row.
    const std::int64_t keys = args.causal ? std::min(s, r1) : s;
    const auto m = static_cast<std::size_t>(r1 - r0);
    if (keys == 0) {
      std::fill(out, out + (r1 - r0) * ev, T(0));
      return;
    }
    T* scores = cpu.scratch_as<T>(worker);
    const auto n = static_cast<std::size_t>(keys);
    cpu::gemm({m, n, static_cast<std::size_t>(e)}, args.q.data + oq, lq, false, args.k.data + ok, lk, true, scores, n,
              none, cpu.pool());
    for (std::int64_t i = 0; i < r1 - r0; ++i) {
      T* row = scores + i * keys;
      const std::int64_t visible = args.causal ? std::min(keys, r0 + i + 1) : keys;
      T max = -INFINITY;
      for (std::int64_t j = 0; j < visible; ++j) {
        row[j] *= scale;  // rounded like PyTorch's (q k^T) * scale
        max = math::softmax_max(max, row[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < visible; ++j) {
        row[j] = math::softmax_exp(row[j], max);
        sum += row[j];
      }
      const auto inv = static_cast<T>(1.0 / sum);
      for (std::int64_t j = 0; j < visible; ++j) row[j] *= inv;
      std::fill(row + visible, row + keys, T(0));  // masked: weight 0
    }
    cpu::gemm({m, static_cast<std::size_t>(ev), n}, scores, n, false, args.v.data + ov, lv, false, out,
              static_cast<std::size_t>(ev), none, cpu.pool());
  });
}

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const embedding_op<T>&, const EmbeddingBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const embedding_op<T>&, const EmbeddingBackwardArgs<T>& g, NoState&, CpuContext&) {
  if (g.dweight.data == nullptr) return;
  const std::int64_t rows = g.forward.weight.shape[0];
  const std::int64_t dim = g.forward.weight.shape[1];
  // In index order on one thread: a repeated index adds its rows in a fixed order.
  visit_dtype(g.forward.index_dtype, [&]<class I>(std::type_identity<I>) {
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      const auto* indices = static_cast<const I*>(g.forward.indices);
      for (std::int64_t i = 0; i < g.forward.count; ++i) {
        const auto index = static_cast<std::int64_t>(indices[i]);
        if (index < 0 || index >= rows || index == g.padding_idx) continue;
        T* dst = g.dweight.data + index * g.dweight.strides[0];
        const T* src = g.dy.data + i * dim;
        for (std::int64_t k = 0; k < dim; ++k) dst[k] += src[k];
      }
    }
  });
}

namespace {
// The keys a causal attention's rows can see at all (query i sees keys 0..i), else all of them.
template <class T>
std::int64_t visible_keys(const AttentionArgs<T>& f) {
  const std::size_t r = f.y.rank();
  return f.causal ? std::min(f.k.shape[r - 2], f.q.shape[r - 2]) : f.k.shape[r - 2];
}

// Row i of `scores` (q k^T of query rows 0..L, `keys` wide) becomes the softmax of its first
// `visible` scaled entries, rounded as the forward rounds them; masked entries become 0.
template <class T>
void attention_probabilities(T* scores, std::int64_t rows, std::int64_t keys, T scale, bool causal) {
  for (std::int64_t i = 0; i < rows; ++i) {
    T* row = scores + i * keys;
    const std::int64_t visible = causal ? std::min(keys, i + 1) : keys;
    T max = -INFINITY;
    for (std::int64_t j = 0; j < visible; ++j) {
      row[j] *= scale;
      max = math::softmax_max(max, row[j]);
    }
    double sum = 0;
    for (std::int64_t j = 0; j < visible; ++j) {
      row[j] = math::softmax_exp(row[j], max);
      sum += row[j];
    }
    const auto inv = static_cast<T>(1.0 / sum);
    for (std::int64_t j = 0; j < visible; ++j) row[j] *= inv;
    std::fill(row + visible, row + keys, T(0));
  }
}

template <class T>
void attention_backward(const AttentionBackwardArgs<T>& g, AttentionGradState<T>& state, CpuContext& cpu) {
  const AttentionArgs<T>& f = g.forward;
  const std::size_t r = f.y.rank();
  const std::int64_t l = f.q.shape[r - 2];
  const std::int64_t e = f.q.shape[r - 1];
  const std::int64_t ev = f.v.shape[r - 1];
  const std::int64_t keys = visible_keys(f);
  std::int64_t batches = 1;
  for (std::size_t d = 0; d + 2 < r; ++d) batches *= f.y.shape[d];
  if (batches * l * keys == 0 || (g.dq.data == nullptr && g.dk.data == nullptr && g.dv.data == nullptr)) return;
  const auto m = static_cast<std::size_t>(l);
  const auto n = static_cast<std::size_t>(keys);
  const auto lq = static_cast<std::size_t>(f.q.strides[r - 2]);
  const auto lk = static_cast<std::size_t>(f.k.strides[r - 2]);
  const auto lv = static_cast<std::size_t>(f.v.strides[r - 2]);
  const auto ly = static_cast<std::size_t>(ev);
  const cpu::GemmEpilogue<T> none;
  cpu::GemmEpilogue<T> accumulate;
  accumulate.accumulate = true;
  T* p = state.probs.data();
  T* dp = state.dprobs.data();
  for (std::int64_t batch = 0; batch < batches; ++batch) {
    // Where this batch entry reads q, k, v (and their gradients: the same strides) and dy.
    std::int64_t oq = 0;
    std::int64_t ok = 0;
    std::int64_t ov = 0;
    std::int64_t odq = 0;
    std::int64_t odk = 0;
    std::int64_t odv = 0;
    std::int64_t rest = batch;
    for (std::size_t d = r - 2; d-- > 0;) {
      const std::int64_t coordinate = rest % f.y.shape[d];
      rest /= f.y.shape[d];
      oq += coordinate * f.q.strides[d];
      ok += coordinate * f.k.strides[d];
      ov += coordinate * f.v.strides[d];
      odq += coordinate * g.dq.strides[d];
      odk += coordinate * g.dk.strides[d];
      odv += coordinate * g.dv.strides[d];
    }
    const T* q = f.q.data + oq;
    const T* k = f.k.data + ok;
    const T* v = f.v.data + ov;
    const T* dy = g.dy.data + batch * l * ev;
    // P = softmax(q k^T * scale), recomputed as the forward computed it.
    cpu::gemm({m, n, static_cast<std::size_t>(e)}, q, lq, false, k, lk, true, p, n, none, cpu.pool());
    attention_probabilities(p, l, keys, static_cast<T>(f.scale), f.causal);
    // dv[keys, Ev] += P^T dy
    if (g.dv.data != nullptr) {
      cpu::gemm({n, static_cast<std::size_t>(ev), m}, p, n, true, dy, ly, false, g.dv.data + odv,
                static_cast<std::size_t>(g.dv.strides[r - 2]), accumulate, cpu.pool());
    }
    if (g.dq.data == nullptr && g.dk.data == nullptr) continue;
    // dP = dy v^T, then dS = scale * P * (dP - rowsum(P * dP)) in its place (0 where masked).
    cpu::gemm({m, n, static_cast<std::size_t>(ev)}, dy, ly, false, v, lv, true, dp, n, none, cpu.pool());
    for (std::int64_t i = 0; i < l; ++i) {
      const T* prow = p + i * keys;
      T* drow = dp + i * keys;
      double dot = 0;
      for (std::int64_t j = 0; j < keys; ++j) dot += static_cast<double>(prow[j]) * drow[j];
      const auto centre = static_cast<T>(dot);
      for (std::int64_t j = 0; j < keys; ++j) drow[j] = f.scale * prow[j] * (drow[j] - centre);
    }
    // dq[L, E] += dS k;  dk[keys, E] += dS^T q
    if (g.dq.data != nullptr) {
      cpu::gemm({m, static_cast<std::size_t>(e), n}, dp, n, false, k, lk, false, g.dq.data + odq,
                static_cast<std::size_t>(g.dq.strides[r - 2]), accumulate, cpu.pool());
    }
    if (g.dk.data != nullptr) {
      cpu::gemm({n, static_cast<std::size_t>(e), m}, dp, n, true, q, lq, false, g.dk.data + odk,
                static_cast<std::size_t>(g.dk.strides[r - 2]), accumulate, cpu.pool());
    }
  }
}
}  // namespace

template <CpuReal T>
Result<AttentionGradState<T>> prepare_backward_kernel(const attention_op<T>&, const AttentionBackwardArgs<T>& g,
                                                      CpuContext& cpu) {
  const AttentionArgs<T>& f = g.forward;
  const std::size_t r = f.y.rank();
  const auto l = static_cast<std::size_t>(f.q.shape[r - 2]);
  const auto e = static_cast<std::size_t>(f.q.shape[r - 1]);
  const auto ev = static_cast<std::size_t>(f.v.shape[r - 1]);
  const auto keys = static_cast<std::size_t>(visible_keys(f));
  AttentionGradState<T> state;
  state.probs.resize(l * keys);
  state.dprobs.resize(l * keys);
  std::size_t bytes = 0;
  for (const cpu::GemmShape& shape :
       {cpu::GemmShape{l, keys, e}, cpu::GemmShape{keys, ev, l}, cpu::GemmShape{l, keys, ev},
        cpu::GemmShape{l, e, keys}, cpu::GemmShape{keys, e, l}}) {
    bytes = std::max(bytes, cpu::gemm_workspace_bytes(shape, false, false));
  }
  if (!cpu.reserve_gemm_workspace(bytes)) return fail(Errc::out_of_memory, "cannot allocate the GEMM workspace");
  return state;
}

template <CpuReal T>
void run_backward_kernel(const attention_op<T>&, const AttentionBackwardArgs<T>& g, AttentionGradState<T>& state,
                         CpuContext& cpu) {
  attention_backward(g, state, cpu);
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                                  \
  template Result<NoState> prepare_kernel(const embedding_op<T>&, const EmbeddingArgs<T>&, CpuContext&);        \
  template void run_kernel(const embedding_op<T>&, const EmbeddingArgs<T>&, NoState&, CpuContext&);             \
  template Result<AttentionState> prepare_kernel(const attention_op<T>&, const AttentionArgs<T>&, CpuContext&); \
  template void run_kernel(const attention_op<T>&, const AttentionArgs<T>&, AttentionState&, CpuContext&);      \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                              \
  template Result<NoState> prepare_backward_kernel(const embedding_op<T>&, const EmbeddingBackwardArgs<T>&,          \
                                                   CpuContext&);                                                     \
  template void run_backward_kernel(const embedding_op<T>&, const EmbeddingBackwardArgs<T>&, NoState&, CpuContext&); \
  template Result<AttentionGradState<T>> prepare_backward_kernel(const attention_op<T>&,                             \
                                                                 const AttentionBackwardArgs<T>&, CpuContext&);      \
  template void run_backward_kernel(const attention_op<T>&, const AttentionBackwardArgs<T>&, AttentionGradState<T>&, \
                                    CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
