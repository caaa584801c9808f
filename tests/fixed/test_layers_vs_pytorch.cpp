// teeny.fixed's layers one at a time against PyTorch: a typed network of one layer named "op" is
// fed a PyTorch op fixture's input (tests/fixtures/ops/<case>.safetensors, tools/make_fixtures.py),
// binds the fixture's `op.*` tensors (the module's state_dict) as its weights and must give the
// fixture's `out`. The fixtures are the ones the run-time path is checked against
// (tests/cpu/test_ops_vs_pytorch.cpp), so both paths answer to the same reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "support/fixtures.hpp"

namespace {
namespace tf = teeny::fixed;

// Runs the typed model M on fixture `name` and checks it against PyTorch's output.
template <class M>
void check_layer(const std::string& name, double rtol, double atol) {
  CAPTURE(name);
  auto file = teeny::SafetensorsFile::open(fixtures::path("ops/" + name + ".safetensors"));
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));
  std::vector<teeny::NamedTensor> params;
  for (const auto& key : {"op.weight", "op.bias"}) {
    if (auto t = file->read(key)) params.push_back({key, std::move(*t)});
  }
  std::vector<teeny::TensorRef> refs;
  for (const auto& p : params) refs.push_back(teeny::TensorRef::of(p));
  auto x = file->read("in.x");
  auto want = file->read("out");
  REQUIRE(x);
  REQUIRE(want);

  M model;
  auto loaded = model.load(refs);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto xs = x->view<float>();
  REQUIRE(xs);
  REQUIRE(static_cast<std::size_t>(xs->numel()) == M::input_size);
  auto y = model.forward(std::span<const float>(xs->data, M::input_size));
  REQUIRE_MESSAGE(y, (y ? "" : y.error().to_string()));
  auto expected = want->view<float>();
  REQUIRE(expected);
  REQUIRE(y->numel() == expected->numel());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < y->numel(); ++i) {
    const double got = y->data[i];
    const double e = expected->data[i];
    if (std::isnan(got) && std::isnan(e)) continue;
    if (!(std::abs(got - e) <= atol + rtol * std::abs(e))) {
      if (bad++ == 0) MESSAGE("first mismatch at " << i << ": " << got << " vs PyTorch's " << e);
    }
  }
  CHECK(bad == 0);
}

template <class Layer, std::int64_t... D>
using one_layer = tf::Model<decltype(Layer{}(tf::input<"x", float, D...>()))>;

}  // namespace

TEST_CASE("typed GroupNorm matches PyTorch's nn.GroupNorm: affine or not, any trailing dims, any group size") {
  check_layer<one_layer<tf::GroupNorm<"op", 2, 6>, 2, 6, 4, 4>>("group_norm", 1e-5, 1e-6);
  check_layer<one_layer<tf::GroupNorm<"op", 3, 6, {.affine = false}>, 2, 6, 5>>("group_norm_no_affine", 1e-5, 1e-6);
  check_layer<one_layer<tf::GroupNorm<"op", 6, 6, {.eps = 1e-3}>, 3, 6, 4>>("group_norm_per_channel_eps", 1e-5, 1e-6);
  check_layer<one_layer<tf::GroupNorm<"op", 1, 4>, 2, 4, 3, 3>>("group_norm_one_group", 1e-5, 1e-6);
  check_layer<one_layer<tf::GroupNorm<"op", 4, 8>, 3, 8>>("group_norm_2d_input", 1e-5, 1e-6);
}

TEST_CASE("typed HardSwish and HardSigmoid match PyTorch's, at the kinks and on NaN") {
  check_layer<one_layer<tf::HardSwish, 44>>("hardswish", 1e-6, 1e-7);
  check_layer<one_layer<tf::HardSigmoid, 45>>("hardsigmoid", 1e-6, 1e-7);
}
