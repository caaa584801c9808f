// Shape and dtype inference of the sequence family (teeny.graph:ops_sequence).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

TEST_CASE("embedding maps integer indices to vectors of its dtype") {
  const Embedding emb{.num_embeddings = 1000, .embedding_dim = 128};
  CHECK(*run(emb, {i64({batch, 16})}) == f32({batch, 16, 128}));
  CHECK(*run(emb, {typed(DType::i32, {7})}) == f32({7, 128}));
  CHECK(*run(Embedding{.num_embeddings = 10, .embedding_dim = 4, .dtype = DType::f16}, {i64({3})}) == half({3, 4}));
  CHECK(params_of(emb, std::vector<TensorType>{i64({1})}) ==
        std::vector<ParamSpec>{{"weight", {1000, 128}, DType::f32, true}});
  CHECK(error_of(emb, {f32({batch, 16})}) == "input f32[batch, 16] is f32, but embedding indices must be integers");
  CHECK(error_of(Embedding{.num_embeddings = 10, .embedding_dim = 4, .padding_idx = 10}, {i64({3})}) ==
        "padding_idx 10 is out of range for num_embeddings 10");
  CHECK(*run(Embedding{.num_embeddings = 10, .embedding_dim = 4, .padding_idx = -1}, {i64({3})}) == f32({3, 4}));
}

TEST_CASE("attention: q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]") {
  const Attention sdpa;
  CHECK(*run(sdpa, {f32({batch, 8, 10, 64}), f32({batch, 8, 20, 64}), f32({batch, 8, 20, 32})}) ==
        f32({batch, 8, 10, 32}));
  CHECK(*run(sdpa, {f32({2, 1, 10, 64}), f32({1, 4, 20, 64}), f32({20, 32})}) == f32({2, 4, 10, 32}));
  CHECK(*run(Attention{.causal = true}, {f32({5, 8}), f32({5, 8}), f32({5, 8})}) == f32({5, 8}));
  CHECK(error_of(sdpa, {f32({10, 64}), f32({20, 32}), f32({20, 32})}) ==
        "query f32[10, 64] has embedding dim 64 but key f32[20, 32] has 32");
  CHECK(error_of(sdpa, {f32({10, 64}), f32({20, 64}), f32({21, 32})}) ==
        "key f32[20, 64] has sequence length 20 but value f32[21, 32] has 21");
  CHECK_CONTAINS(error_of(sdpa, {f32({2, 10, 8}), f32({3, 20, 8}), f32({20, 8})}), "do not broadcast");
  CHECK_CONTAINS(error_of(sdpa, {f32({10, 8}), half({20, 8}), f32({20, 8})}), "f32[10, 8] and f16[20, 8]");
  CHECK(describe(Attention{.scale = 0.125}) == "attention(causal=false, scale=0.125)");
}
