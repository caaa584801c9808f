// What a typed MLP adds to a program (bench/embedded_size.sh): the model (batch 1) with its weights
// compiled in, loaded and run once on an input the caller could fill. Its exit status is the class
// it picks, so nothing is optimised away.
#include <cstddef>

import teeny;

#include "fixed_models.hpp"
#include "mlp_weights.hpp"

namespace {
namespace tf = teeny::fixed;
using Mlp = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, 1, 1, 28, 28>()))>;
Mlp model;
float pixels[Mlp::input_size];  // a sensor's frame
}  // namespace

int main() {
  if (!model.load(mlp_weights::tensors)) return 255;
  auto logits = model.forward(pixels);
  if (!logits) return 255;
  int best = 0;
  for (int c = 1; c < static_cast<int>(Mlp::output_size); ++c) best = logits->data[c] > logits->data[best] ? c : best;
  return best;
}
