// Weights compiled into the program: tests/meson.build runs tools/embed_weights (teeny-embed-weights)
// on the LeNet fixture at build time; its header's table loads the typed LeNet, which must then
// compute PyTorch's logits. The table's checks (missing, mis-shaped, unexpected, twice) are tested
// on tensors held here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

import teeny;

#include "fixed_models.hpp"
#include "lenet_weights.hpp"  // generated from tests/fixtures/models/lenet.safetensors
#include "support/fixtures.hpp"

namespace {
namespace tf = teeny::fixed;
using lenet3 = tf::Model<decltype(fixed_models::lenet(tf::input<"x", float, 3, 1, 28, 28>()))>;
}  // namespace

TEST_CASE("the typed LeNet runs on weights compiled into the program, with PyTorch's logits") {
  const fixtures::Model fx = fixtures::model("lenet");

  auto model = std::make_unique<lenet3>();
  CHECK(std::size(lenet_weights::tensors) == 10);
  auto loaded = model->load(lenet_weights::tensors);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto in = fx.x.view<float>();
  REQUIRE(in);
  auto out = model->forward(std::span<const float>(in->data, static_cast<std::size_t>(in->numel())));
  REQUIRE_MESSAGE(out, (out ? "" : out.error().to_string()));
  auto want = fx.logits.view<float>();
  REQUIRE(want);
  REQUIRE(out->numel() == want->numel());
  for (std::int64_t i = 0; i < out->numel(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(out->data[i] - want->data[i]) <= 1e-6 + 1e-5 * std::abs(want->data[i]));
  }
}

TEST_CASE("a typed model loaded from named tensors reports every missing, mis-shaped, unexpected or repeated one") {
  std::vector<float> c1(8 * 25), b1(8), c2(16 * 8 * 25), b2(15), f1(120 * 400), g1(120), f2(84 * 120), g2(84),
      f3(10 * 84), extra(3);
  const teeny::TensorRef tensors[] = {
      teeny::TensorRef::of<float>("conv1.weight", c1, {8, 1, 5, 5}),
      teeny::TensorRef::of<float>("conv1.weight", c1, {8, 1, 5, 5}),
      teeny::TensorRef::of<float>("conv1.bias", b1, {8}),
      teeny::TensorRef::of<float>("conv2.weight", c2, {16, 8, 5, 5}),
      teeny::TensorRef::of<float>("conv2.bias", b2, {15}),
      teeny::TensorRef::of<float>("fc1.weight", f1, {120, 400}),
      teeny::TensorRef::of<float>("fc1.bias", g1, {120}),
      teeny::TensorRef::of<float>("fc2.weight", f2, {84, 120}),
      teeny::TensorRef::of<float>("fc2.bias", g2, {84}),
      teeny::TensorRef::of<float>("fc3.weight", f3, {10, 84}),
      teeny::TensorRef::of<float>("fc4.bias", extra, {3}),
  };
  auto model = std::make_unique<lenet3>();
  auto loaded = model->load(tensors);
  REQUIRE(!loaded);
  CHECK(loaded.error().code() == teeny::Errc::duplicate);  // the first kind found
  CHECK(loaded.error().message() ==
        "cannot load the typed model's 10 parameters from 11 tensors (4 problems):\n"
        "  'conv1.weight': given twice\n"
        "  'conv2.bias': tensor has f32 [15] but the model expects f32 [16]\n"
        "  'fc3.bias': missing\n"
        "  'fc4.bias': not a parameter of the model (f32 [3])");
  CHECK(!model->loaded());
}
