// Weights compiled into the program: tests/meson.build runs tools/embed_weights (teeny-embed-weights)
// on the MLP fixture at build time; its header's table loads the typed MLP, which must then compute
// PyTorch's logits. The table's checks (missing, mis-shaped, unexpected, twice) are tested on
// tensors held here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

import teeny;

#include "fixed_models.hpp"
#include "mlp_weights.hpp"  // generated from tests/fixtures/models/mlp.safetensors
#include "support/fixtures.hpp"

namespace {
namespace tf = teeny::fixed;
using mlp3 = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, 3, 1, 28, 28>()))>;
}  // namespace

TEST_CASE("the typed MLP runs on weights compiled into the program, with PyTorch's logits") {
  auto file = teeny::SafetensorsFile::open(fixtures::path("models/mlp.safetensors"));
  REQUIRE(file);
  auto x = file->read("in.x");
  auto logits = file->read("out.logits");
  REQUIRE(x);
  REQUIRE(logits);

  auto model = std::make_unique<mlp3>();
  CHECK(std::size(mlp_weights::tensors) == 6);
  auto loaded = model->load(mlp_weights::tensors);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto in = x->view<float>();
  REQUIRE(in);
  auto out = model->forward(std::span<const float>(in->data, static_cast<std::size_t>(in->numel())));
  REQUIRE_MESSAGE(out, (out ? "" : out.error().to_string()));
  auto want = logits->view<float>();
  REQUIRE(want);
  REQUIRE(out->numel() == want->numel());
  for (std::int64_t i = 0; i < out->numel(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(out->data[i] - want->data[i]) <= 1e-6 + 1e-5 * std::abs(want->data[i]));
  }
}

TEST_CASE("a typed model loaded from named tensors reports every missing, mis-shaped, unexpected or repeated one") {
  std::vector<float> w1(512 * 784), b1(512), w2(512 * 512), b2(511), w3(10 * 512), extra(3);
  const teeny::TensorRef tensors[] = {
      teeny::TensorRef::of<float>("fc1.weight", w1, {512, 784}),
      teeny::TensorRef::of<float>("fc1.weight", w1, {512, 784}),
      teeny::TensorRef::of<float>("fc1.bias", b1, {512}),
      teeny::TensorRef::of<float>("fc2.weight", w2, {512, 512}),
      teeny::TensorRef::of<float>("fc2.bias", b2, {511}),
      teeny::TensorRef::of<float>("fc3.weight", w3, {10, 512}),
      teeny::TensorRef::of<float>("fc4.bias", extra, {3}),
  };
  auto model = std::make_unique<mlp3>();
  auto loaded = model->load(tensors);
  REQUIRE(!loaded);
  CHECK(loaded.error().code() == teeny::Errc::duplicate);  // the first kind found
  CHECK(loaded.error().message() ==
        "cannot load the typed model's 6 parameters from 7 tensors (4 problems):\n"
        "  'fc1.weight': given twice\n"
        "  'fc2.bias': tensor has f32 [511] but the model expects f32 [512]\n"
        "  'fc3.bias': missing\n"
        "  'fc4.bias': not a parameter of the model (f32 [3])");
  CHECK(!model->loaded());
}
