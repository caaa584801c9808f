// teeny.graph:ops_sequence — the sequence family: Embedding (torch.nn.Embedding: integer indices
// in, rows of a float table out) and Attention (F.scaled_dot_product_attention).
//
//   Embedding{.num_embeddings = 1000, .embedding_dim = 64}   i64[batch, seq] -> f32[batch, seq, 64]
//   Attention{.causal = true}   q f32[b, h, L, E], k f32[b, h, S, E], v f32[b, h, S, Ev] -> f32[b, h, L, Ev]
export module teeny.graph:ops_sequence;
import teeny.std;
import teeny.core;
import :tensor_type;
import :concepts;
import :rules;

// Returns the error of a failed Result<void>/Result<T> expression from the enclosing function.
#define TEENY_GRAPH_TRY(...) \
  if (auto teeny_try_result = (__VA_ARGS__); !teeny_try_result) return std::move(teeny_try_result).error()

// `{}` on members keeps designated initialisers that omit them warning-free (see :concepts).
// NOLINTBEGIN(readability-redundant-member-init)
export namespace teeny {

/// torch.nn.Embedding: integer indices [...] -> [..., embedding_dim] of `dtype`.
/// Param weight [num_embeddings, embedding_dim] of `dtype`.
struct Embedding {
  static constexpr std::string_view kind = "embedding";
  static constexpr Arity arity{1, 1};
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  std::optional<std::int64_t> padding_idx{};
  DType dtype = DType::f32;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Embedding&, const Embedding&) = default;
};
static_assert(GraphOpWithParams<Embedding>);

/// F.scaled_dot_product_attention(q, k, v): softmax(q k^T * scale [+ causal mask]) v with
/// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; batch dims broadcast.
/// scale none means 1/sqrt(E); causal masks with PyTorch's top-left aligned lower triangle.
struct Attention {
  static constexpr std::string_view kind = "attention";
  static constexpr Arity arity{3, 3};
  bool causal = false;
  std::optional<double> scale{};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Attention&, const Attention&) = default;
};
static_assert(GraphOpType<Attention>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

// ---- Embedding

Result<TensorType> Embedding::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  if (!is_integral(x.dtype)) {
    return fail(Errc::dtype_mismatch, "input ", x, " is ", name(x.dtype), ", but embedding indices must be integers");
  }
  TEENY_GRAPH_TRY(check_non_negative("num_embeddings", num_embeddings));
  TEENY_GRAPH_TRY(check_non_negative("embedding_dim", embedding_dim));
  if (!is_floating(dtype)) {
    return fail(Errc::dtype_mismatch, "dtype ", name(dtype), " of the embedding weight must be floating-point");
  }
  if (padding_idx && (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings)) {
    return fail(Errc::out_of_range, "padding_idx ", *padding_idx, " is out of range for num_embeddings ",
                num_embeddings);
  }
  std::vector<Dim> dims = x.shape.dims();
  dims.emplace_back(embedding_dim);
  return TensorType{dtype, Shape(std::move(dims))};
}

std::vector<ParamSpec> Embedding::params(std::span<const TensorType>) const {
  return {{"weight", {num_embeddings, embedding_dim}, dtype}};
}

std::string Embedding::attributes() const {
  return attrs({{"num_embeddings", fmt(num_embeddings)},
                {"embedding_dim", fmt(embedding_dim)},
                {"padding_idx", fmt(padding_idx)},
                {"dtype", fmt(dtype)}});
}

// ---- Attention

Result<TensorType> Attention::infer(std::span<const TensorType> inputs) const {
  const TensorType& q = inputs[0];
  const TensorType& k = inputs[1];
  const TensorType& v = inputs[2];
  TEENY_GRAPH_TRY(require_float(q, "query"));
  TEENY_GRAPH_TRY(require_same_dtype(q, k));
  TEENY_GRAPH_TRY(require_same_dtype(q, v));
  for (const TensorType* t : {&q, &k, &v}) TEENY_GRAPH_TRY(require_rank(*t, 2, Arity::variadic, "[..., L, E]"));
  const Dim& e_q = q.shape.back();
  const Dim& e_k = k.shape.back();
  if (e_q != e_k) {
    return fail(Errc::shape_mismatch, "query ", q, " has embedding dim ", to_string(e_q), " but key ", k, " has ",
                to_string(e_k));
  }
  const Dim& s_k = k.shape[k.shape.rank() - 2];
  const Dim& s_v = v.shape[v.shape.rank() - 2];
  if (s_k != s_v) {
    return fail(Errc::shape_mismatch, "key ", k, " has sequence length ", to_string(s_k), " but value ", v, " has ",
                to_string(s_v));
  }
  auto qk = broadcast_batch(q, q.shape, k, k.shape);
  if (!qk) return std::move(qk).error();
  std::vector<Dim> batch_v(v.shape.begin(), v.shape.end() - 2);
  auto batch = broadcast_shapes(*qk, Shape(std::move(batch_v)));
  if (!batch) {
    return fail(Errc::shape_mismatch, "the batch dims of ", q, ", ", k, " and ", v,
                " do not broadcast: ", batch.error().message());
  }
  std::vector<Dim> dims = batch->dims();
  dims.push_back(q.shape[q.shape.rank() - 2]);
  dims.push_back(v.shape.back());
  return TensorType{q.dtype, Shape(std::move(dims))};
}

std::string Attention::attributes() const { return attrs({{"causal", fmt(causal)}, {"scale", fmt(scale)}}); }

}  // namespace teeny
