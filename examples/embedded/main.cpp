// teeny-embedded: Fashion-MNIST on a typed MLP with everything compiled in — the weights
// (examples/fashion_mnist/weights/mlp.safetensors) and the first 256 test images with their labels
// and PyTorch's predictions (tests/fixtures/embedded/fashion_mnist_256.safetensors), both turned
// into headers by teeny-embed-weights at build time. Nothing is read from files, and the model's
// load and forward take nothing from the heap: its arena and kernels' memory are static.
//
//   teeny-embedded        prints how many images it classifies right and whether every prediction is
//                         PyTorch's; exit status 1 when one is not, or on any error
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string_view>

import teeny;

#include "fashion_mnist_256.hpp"  // fashion_mnist::tensors: images, labels, predictions
#include "fixed_models.hpp"
#include "mlp_weights.hpp"  // mlp_weights::tensors: fc1.weight ... fc3.bias

namespace {
namespace tf = teeny::fixed;

// One image at a time, as a device classifying what its sensor sees would.
using Mlp = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, 1, 1, 28, 28>()))>;
Mlp model;

// The compiled-in tensor named `key`, as elements of T (its dtype checked), or an empty span.
template <class T>
std::span<const T> tensor(std::string_view key) {
  for (const teeny::TensorRef& t : fashion_mnist::tensors) {
    if (t.name == key && t.dtype == teeny::dtype_of<T>) {
      return {reinterpret_cast<const T*>(t.data.data()), t.data.size() / sizeof(T)};
    }
  }
  return {};
}

}  // namespace

int main() {
  const auto images = tensor<std::uint8_t>("images");
  const auto labels = tensor<std::uint8_t>("labels");
  const auto pytorch = tensor<std::uint8_t>("predictions");
  const std::size_t count = labels.size();
  if (count == 0 || images.size() != count * Mlp::input_size || pytorch.size() != count) {
    std::fprintf(stderr, "error: the compiled-in images, labels and predictions do not match\n");
    return 1;
  }
  if (auto loaded = model.load(mlp_weights::tensors); !loaded) {
    std::fprintf(stderr, "error: %s\n", loaded.error().to_string().c_str());
    return 1;
  }

  std::size_t correct = 0;
  std::size_t as_pytorch = 0;
  float pixels[Mlp::input_size];
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t p = 0; p < Mlp::input_size; ++p) pixels[p] = images[i * Mlp::input_size + p] / 255.0f;
    auto logits = model.forward(pixels);
    if (!logits) {
      std::fprintf(stderr, "error: image %zu: %s\n", i, logits.error().to_string().c_str());
      return 1;
    }
    std::size_t best = 0;
    for (std::size_t c = 1; c < Mlp::output_size; ++c) best = logits->data[c] > logits->data[best] ? c : best;
    correct += best == labels[i] ? 1 : 0;
    as_pytorch += best == pytorch[i] ? 1 : 0;
  }
  std::printf(
      "typed MLP, compiled-in weights: %zu of %zu test images right (%.1f%%); %zu of %zu predictions "
      "as PyTorch's\n",
      correct, count, 100.0 * static_cast<double>(correct) / static_cast<double>(count), as_pytorch, count);
  std::printf("static memory: weights %zu bytes, activation arena %zu bytes, kernels' memory %zu bytes\n",
              Mlp::param_bytes, Mlp::arena_bytes, Mlp::kernel_memory_bytes);
  return as_pytorch == count ? 0 : 1;
}
