#pragma once
// Models of models.hpp as typed models (teeny.fixed): the same layers, the same PyTorch names, so
// the same weight files load into either. Each takes its input value and returns
// its output value; shapes are checked when a function is instantiated for an input:
//   using mlp = teeny::fixed::Network<decltype(fixed_models::mlp(teeny::fixed::input<"x", float, 64, 1, 28, 28>()))>;
// Include after `import teeny;` (or `import teeny.fixed;`).
#include <cstdint>

namespace fixed_models {
namespace tf = teeny::fixed;

/// flatten -> fc1 Linear(784, 512) -> ReLU -> fc2 Linear(512, 512) -> ReLU -> fc3 Linear(512, 10)
constexpr auto mlp(tf::Value auto x) {
  constexpr tf::Linear<"fc1", 784, 512> fc1;
  constexpr tf::Linear<"fc2", 512, 512> fc2;
  constexpr tf::Linear<"fc3", 512, 10> fc3;
  return fc3(tf::relu(fc2(tf::relu(fc1(tf::flatten(x))))));
}

/// conv1 Conv2d(1, 8, 5, padding=2) -> ReLU -> MaxPool2d(2) -> conv2 Conv2d(8, 16, 5) -> ReLU ->
/// MaxPool2d(2) -> flatten -> fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10)
constexpr auto lenet(tf::Value auto x) {
  using features = tf::Sequential<tf::Conv2d<"conv1", 1, 8, 5, {.padding = 2}>, tf::ReLU, tf::MaxPool2d<2>,
                                  tf::Conv2d<"conv2", 8, 16, 5>, tf::ReLU, tf::MaxPool2d<2>, tf::Flatten>;
  using classifier = tf::Sequential<tf::Linear<"fc1", 400, 120>, tf::ReLU, tf::Linear<"fc2", 120, 84>, tf::ReLU,
                                    tf::Linear<"fc3", 84, 10>>;
  return classifier{}(features{}(x));
}

/// torchvision's BasicBlock named P: conv1 (3x3, stride S) -> bn1 -> relu -> conv2 -> bn2, plus the
/// identity, or downsample.0 (1x1 conv, stride S) -> downsample.1 (bn) when the shape changes; then relu.
template <tf::Name P, std::int64_t In, std::int64_t Out, std::int64_t S = 1>
constexpr auto basic_block(tf::Value auto x) {
  using body = tf::Sequential<tf::Conv2d<P + ".conv1", In, Out, 3, {.stride = S, .padding = 1, .bias = false}>,
                              tf::BatchNorm2d<P + ".bn1", Out>, tf::ReLU,
                              tf::Conv2d<P + ".conv2", Out, Out, 3, {.padding = 1, .bias = false}>,
                              tf::BatchNorm2d<P + ".bn2", Out>>;
  if constexpr (S != 1 || In != Out) {
    using downsample = tf::Sequential<tf::Conv2d<P + ".downsample.0", In, Out, 1, {.stride = S, .bias = false}>,
                                      tf::BatchNorm2d<P + ".downsample.1", Out>>;
    return tf::relu(tf::add(body{}(x), downsample{}(x)));
  } else {
    return tf::relu(tf::add(body{}(x), x));
  }
}

/// A small residual CNN (models::residual_cnn) for [N, 3, H, W]: conv1 Conv2d(3, 16, 3, padding=1) -> bn1
/// -> relu, layer1.0 BasicBlock(16, 16), layer2.0 BasicBlock(16, 32, stride 2) with its downsample,
/// global average pool, fc Linear(32, 10).
constexpr auto residual_cnn(tf::Value auto x) {
  using stem = tf::Sequential<tf::Conv2d<"conv1", 3, 16, 3, {.padding = 1, .bias = false}>, tf::BatchNorm2d<"bn1", 16>,
                              tf::ReLU>;
  auto h = basic_block<"layer2.0", 16, 32, 2>(basic_block<"layer1.0", 16, 16>(stem{}(x)));
  constexpr tf::Linear<"fc", 32, 10> fc;
  return fc(tf::flatten(tf::AdaptiveAvgPool2d<1>{}(h)));
}

}  // namespace fixed_models
