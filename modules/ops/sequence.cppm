// teeny.ops:sequence — the ops of sequence models: embedding_op (nn.Embedding: integer indices in,
// rows of a float table out) and attention_op (F.scaled_dot_product_attention), both with a
// backward in training builds.
//
//   embedding_op<float>{.attrs = {.num_embeddings = 1000, .embedding_dim = 64}, .out = ...};
//   attention_op<float>{.attrs = {.causal = true}, .out = ...};   // scale 1/sqrt(E)
export module teeny.ops:sequence;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

template <FloatElement T>
struct EmbeddingArgs {
  const void* indices = nullptr;  // `count` integers of `index_dtype`, contiguous
  DType index_dtype = DType::i64;
  std::int64_t count = 0;
  TensorView<const T> weight;  // [num_embeddings, embedding_dim]
  TensorView<T> y;             // [count, embedding_dim], contiguous
  auto fields() const { return std::tie(indices, index_dtype, count, weight, y); }
};

#if TEENY_TRAINING
/// Backward of embedding_op: dweight[indices[i]] += dy[i] (sparse rows accumulated, a repeated
/// index adds up), except for padding_idx, whose row gets no gradient; the indices get none.
template <FloatElement T>
struct EmbeddingBackwardArgs {
  EmbeddingArgs<T> forward;
  TensorView<T> dy;          // [count, embedding_dim]
  TensorView<T> dweight;     // [num_embeddings, embedding_dim], or empty
  std::int64_t padding_idx;  // -1: none (normalised to [0, num_embeddings))
  auto fields() const { return std::tie(forward, dy, dweight, padding_idx); }
};
#endif

/// nn.Embedding: y[i] = weight[indices[i]], indices of any integer dtype (the dtype is the
/// binding's, so the arguments hold an untyped pointer). padding_idx only matters for training
/// (its row gets no gradient): forward reads whatever that row holds, as PyTorch does. An index
/// outside [0, num_embeddings) makes PyTorch raise; a kernel cannot report errors at run time, so
/// its output row is zeros instead (never an out-of-bounds read).
template <FloatElement T>
struct embedding_op {
  using Args = EmbeddingArgs<T>;
  Embedding attrs;
  OpOutput out;

  std::string_view name() const { return "embedding"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"embedding", "embedding_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight"};
    return slots;
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    return {{attrs.num_embeddings, attrs.embedding_dim}};
  }
  Result<Args> pack_args(const OpBindings& b) const {
    if (b.inputs.empty()) return fail(Errc::invalid_argument, "missing input 0 (0 bound)");
    const TensorBinding& indices = b.inputs[0];
    if (!is_integral(indices.dtype)) {
      return fail(Errc::dtype_mismatch, "indices ", indices.shape, " are ", indices.dtype, ", not integers");
    }
    if (indices.row_stride != 0 && indices.row_stride != indices.shape.last()) {
      return fail(Errc::unsupported, "indices ", indices.shape, " are not contiguous");
    }
    auto weight = param_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(weight, y)) return *e;
    const std::int64_t count = indices.shape.numel();
    auto rows = contiguous_as(*y, {count, attrs.embedding_dim}, "output");
    if (!rows) return std::move(rows).error();
    if (weight->shape != ConcreteShape{attrs.num_embeddings, attrs.embedding_dim}) {
      return fail(Errc::shape_mismatch, "weight ", weight->shape, " is not [", attrs.num_embeddings, ", ",
                  attrs.embedding_dim, "]");
    }
    return Args{indices.data, indices.dtype, count, *weight, *rows};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = EmbeddingBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    std::int64_t padding = -1;
    if (attrs.padding_idx)
      padding = *attrs.padding_idx < 0 ? *attrs.padding_idx + attrs.num_embeddings : *attrs.padding_idx;
    BackwardArgs g{*forward, {}, {}, padding};
    if (auto e =
            first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_param(b, 0, g.forward.weight, g.dweight))) {
      return *e;
    }
    return g;
  }
  /// Threads for the columns of dweight times buckets of its rows (each thread scans every index):
  /// up to 2^16 in all, in blocks of 128 (the default backward block).
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape&) const {
    return {ceil_div(std::min<std::int64_t>(attrs.num_embeddings * attrs.embedding_dim, std::int64_t{1} << 16), 128), 1,
            1};
  }
#endif
};
static_assert(RuntimeOp<embedding_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<embedding_op<float>>);
#endif

namespace ops_detail {
// `view` ([..., rows, cols]) as [batch..., rows, cols] over `out`'s batch dims (all but its last
// two): batch dims it lacks or has as 1 are read with stride 0.
template <class T>
Result<TensorView<T>> batch_broadcast(const TensorView<T>& view, const ConcreteShape& out, std::string_view what) {
  const std::size_t rank = out.rank();
  if (view.rank() < 2 || view.rank() > rank) {
    return fail(Errc::shape_mismatch, what, " ", view.shape, " does not broadcast to the batch of ", out);
  }
  TensorView<T> b(view.data, out, out);
  const std::size_t offset = rank - view.rank();
  for (std::size_t i = 0; i < rank; ++i) {
    const bool matrix = i + 2 >= rank;
    const std::int64_t size = i < offset ? 1 : view.shape[i - offset];
    if (!matrix && size != 1 && size != out[i]) {
      return fail(Errc::shape_mismatch, what, " ", view.shape, " does not broadcast to the batch of ", out);
    }
    b.shape[i] = matrix ? size : out[i];
    b.strides[i] = (i < offset || (!matrix && size == 1)) ? 0 : view.strides[i - offset];
  }
  return b;
}
}  // namespace ops_detail

template <FloatElement T>
struct AttentionArgs {
  TensorView<const T> q;  // [batch..., L, E], batch dims broadcast to y's (stride 0)
  TensorView<const T> k;  // [batch..., S, E]
  TensorView<const T> v;  // [batch..., S, Ev]
  TensorView<T> y;        // [batch..., L, Ev], contiguous
  T scale = T(1.0f);      // PyTorch scales in the element type
  bool causal = false;    // query i sees keys 0..i (top-left aligned, as PyTorch's is_causal)
  auto fields() const { return std::tie(q, k, v, y, scale, causal); }
};

#if TEENY_TRAINING
/// Backward of attention_op, per batch entry of the output, with P recomputed from q and k:
/// dv += P^T dy, dS = P * (dy v^T - rowsum(P * dy v^T)), dq += scale dS k, dk += scale dS^T q.
/// dq, dk and dv are viewed over the batch as the forward read q, k and v (stride 0 where an
/// operand is broadcast), so a broadcast operand's gradient sums over the batches that shared it.
template <FloatElement T>
struct AttentionBackwardArgs {
  AttentionArgs<T> forward;
  TensorView<T> dy;  // like forward.y
  TensorView<T> dq;  // like forward.q, or empty
  TensorView<T> dk;  // like forward.k, or empty
  TensorView<T> dv;  // like forward.v, or empty
  auto fields() const { return std::tie(forward, dy, dq, dk, dv); }
};
#endif

/// F.scaled_dot_product_attention(q, k, v): softmax(q k^T * scale [+ causal mask]) v, batch dims
/// broadcast; scale defaults to 1/sqrt(E).
template <FloatElement T>
struct attention_op {
  using Args = AttentionArgs<T>;
  Attention attrs;
  OpOutput out;

  std::string_view name() const { return "attention"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"attention", "attention_backward", T>(); }
  std::size_t n_activation_inputs() const { return 3; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto q = input_view<const T>(b, 0);
    auto k = input_view<const T>(b, 1);
    auto v = input_view<const T>(b, 2);
    auto y = output_view<T>(b);
    if (auto e = first_error(q, k, v, y)) return *e;
    auto yc = contiguous_as(*y, y->shape, "output");
    if (!yc) return std::move(yc).error();
    auto qb = ops_detail::batch_broadcast(*q, y->shape, "query");
    auto kb = ops_detail::batch_broadcast(*k, y->shape, "key");
    auto vb = ops_detail::batch_broadcast(*v, y->shape, "value");
    if (auto e = first_error(qb, kb, vb)) return *e;
    const std::size_t r = y->rank();
    const std::int64_t e = qb->shape[r - 1];
    const bool fits = kb->shape[r - 1] == e && kb->shape[r - 2] == vb->shape[r - 2] &&
                      qb->shape[r - 2] == y->shape[r - 2] && vb->shape[r - 1] == y->shape[r - 1];
    const bool rows_contiguous = qb->strides[r - 1] == 1 && kb->strides[r - 1] == 1 && vb->strides[r - 1] == 1;
    if (!fits || !rows_contiguous) {
      return fail(Errc::shape_mismatch, "attention of query ", q->shape, ", key ", k->shape, " and value ", v->shape,
                  " cannot give the output ", y->shape);
    }
    const double scale = attrs.scale ? *attrs.scale : 1.0 / std::sqrt(static_cast<double>(e));
    return Args{*qb, *kb, *vb, *yc, static_cast<T>(scale), attrs.causal};
  }
  /// One output element a thread.
  Dim3 block() const { return {128, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 128), 1, 1}; }

#if TEENY_TRAINING
  // One launch for q, k and v: all three gradients come from the same recomputed probabilities.
  using BackwardArgs = AttentionBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    const OpBindings fb = forward_bindings(b);
    auto forward = pack_args(fb);
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}, {}};
    if (auto e = bind_grad_output(b, g.forward.y, g.dy); !e) return std::move(e).error();
    TensorView<T>* grads[] = {&g.dq, &g.dk, &g.dv};
    constexpr std::string_view what[] = {"query", "key", "value"};
    for (std::size_t i = 0; i < 3; ++i) {
      // Bound like the input as given, then broadcast over the batch exactly as pack_args did.
      auto x = input_view<const T>(fb, i);
      if (!x) return std::move(x).error();
      TensorView<T> dx;
      if (auto e = bind_grad_input(b, i, *x, dx); !e) return std::move(e).error();
      if (dx.data == nullptr) continue;
      auto broadcast = ops_detail::batch_broadcast(dx, g.forward.y.shape, what[i]);
      if (!broadcast) return std::move(broadcast).error().context("gradient");
      *grads[i] = *broadcast;
    }
    return g;
  }
  /// One block per batch entry for each of dq, dk and dv.
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const {
    const std::int64_t matrix = y.rank() < 2 ? 0 : y.last() * y[y.rank() - 2];
    return {ceil_div(3 * (matrix == 0 ? 1 : y.numel() / matrix), 1), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<attention_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<attention_op<float>>);
#endif

}  // namespace teeny
