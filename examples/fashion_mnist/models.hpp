#pragma once
// The two Fashion-MNIST classifiers, built exactly like the PyTorch modules they load weights
// from: node names are the PyTorch attribute names, so state_dict keys map (fc1.weight, ...).
// Include after `import teeny;`.
#include <string_view>
#include <utility>

namespace fashion {

/// flatten -> fc1 Linear(784, 512) -> ReLU -> fc2 Linear(512, 512) -> ReLU -> fc3 Linear(512, 10)
inline teeny::Result<teeny::Graph> mlp() {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 1, 28, 28});
  auto h = b.flatten(x);
  h = b.relu(b.linear(h, 512).named("fc1"));
  h = b.relu(b.linear(h, 512).named("fc2"));
  b.output("logits", b.linear(h, 10).named("fc3"));
  return std::move(b).build();
}

/// conv1 Conv2d(1, 8, 5, padding=2) -> ReLU -> MaxPool2d(2) -> conv2 Conv2d(8, 16, 5) -> ReLU ->
/// MaxPool2d(2) -> flatten -> fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10)
inline teeny::Result<teeny::Graph> lenet() {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 1, 28, 28});
  auto h = b.relu(b.conv2d(x, 8, {5, 5}, {.padding = {2, 2}}).named("conv1"));
  h = b.max_pool2d(h, {2, 2});
  h = b.relu(b.conv2d(h, 16, {5, 5}).named("conv2"));
  h = b.max_pool2d(h, {2, 2});
  h = b.flatten(h);
  h = b.relu(b.linear(h, 120).named("fc1"));
  h = b.relu(b.linear(h, 84).named("fc2"));
  b.output("logits", b.linear(h, 10).named("fc3"));
  return std::move(b).build();
}

}  // namespace fashion
