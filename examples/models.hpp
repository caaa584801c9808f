#pragma once
// The reference models, built exactly like the PyTorch modules they load weights from: node names
// are the PyTorch attribute paths, so state_dict keys map (fc1.weight, layer2.0.downsample.0.weight).
// One definition shared by the demo, the tests and the benchmarks. Include after `import teeny;`.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace models {

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

/// LeNet with BatchNorm (tools/make_parity_fixtures.py's LeNetBN): conv1 Conv2d(1, 8, 5, padding=2)
/// -> bn1 -> ReLU -> MaxPool2d(2) -> conv2 Conv2d(8, 16, 5) -> bn2 -> ReLU -> MaxPool2d(2) -> flatten
/// -> fc1 Linear(400, 120) -> ReLU -> fc2 Linear(120, 84) -> ReLU -> fc3 Linear(84, 10)
inline teeny::Result<teeny::Graph> lenet_bn() {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 1, 28, 28});
  auto h = b.conv2d(x, 8, {5, 5}, {.padding = {2, 2}}).named("conv1");
  h = b.max_pool2d(b.relu(b.batch_norm2d(h).named("bn1")), {2, 2});
  h = b.conv2d(h, 16, {5, 5}).named("conv2");
  h = b.max_pool2d(b.relu(b.batch_norm2d(h).named("bn2")), {2, 2});
  h = b.flatten(h);
  h = b.relu(b.linear(h, 120).named("fc1"));
  h = b.relu(b.linear(h, 84).named("fc2"));
  b.output("logits", b.linear(h, 10).named("fc3"));
  return std::move(b).build();
}

/// torchvision's BasicBlock: conv1 (3x3, stride) -> bn1 -> relu -> conv2 -> bn2, plus the identity
/// or downsample.0 (1x1 conv, stride) -> downsample.1 (bn), then relu.
inline teeny::Value basic_block(teeny::GraphBuilder& b, teeny::Value x, const std::string& name, std::int64_t inplanes,
                                std::int64_t planes, std::int64_t stride) {
  auto out = b.conv2d(x, planes, 3, {.stride = stride, .padding = 1, .bias = false}).named(name + ".conv1");
  out = b.relu(b.batch_norm2d(out).named(name + ".bn1"));
  out = b.conv2d(out, planes, 3, {.padding = 1, .bias = false}).named(name + ".conv2");
  out = b.batch_norm2d(out).named(name + ".bn2");
  teeny::Value identity = x;
  if (stride != 1 || inplanes != planes) {
    identity = b.conv2d(x, planes, 1, {.stride = stride, .bias = false}).named(name + ".downsample.0");
    identity = b.batch_norm2d(identity).named(name + ".downsample.1");
  }
  return b.relu(b.add(out, identity));
}

/// A small residual CNN for [batch, 3, image, image]: conv1 Conv2d(3, 16, 3, padding=1) -> bn1 -> relu,
/// layer1.0 BasicBlock(16, 16), layer2.0 BasicBlock(16, 32, stride 2) with its downsample, global
/// average pool, fc Linear(32, 10).
inline teeny::Result<teeny::Graph> residual_cnn(std::int64_t image = 32) {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 3, image, image});
  auto h = b.conv2d(x, 16, 3, {.padding = 1, .bias = false}).named("conv1");
  h = b.relu(b.batch_norm2d(h).named("bn1"));
  h = basic_block(b, h, "layer1.0", 16, 16, 1);
  h = basic_block(b, h, "layer2.0", 16, 32, 2);
  h = b.flatten(b.adaptive_avg_pool2d(h, 1));
  b.output("logits", b.linear(h, 10).named("fc"));
  return std::move(b).build();
}

/// torchvision.models.resnet18 (tools/make_fixtures.py's ResNet18) for [batch, 3, image, image].
inline teeny::Result<teeny::Graph> resnet18(std::int64_t image = 224) {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 3, image, image});
  auto h = b.conv2d(x, 64, 7, {.stride = 2, .padding = 3, .bias = false}).named("conv1");
  h = b.relu(b.batch_norm2d(h).named("bn1")).named("relu");
  h = b.max_pool2d(h, 3, {.stride = 2, .padding = 1}).named("maxpool");
  const std::int64_t widths[] = {64, 128, 256, 512};
  std::int64_t inplanes = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const std::string prefix = "layer" + std::to_string(layer + 1);
    h = basic_block(b, h, prefix + ".0", inplanes, widths[layer], layer == 0 ? 1 : 2);
    h = basic_block(b, h, prefix + ".1", widths[layer], widths[layer], 1);
    inplanes = widths[layer];
  }
  h = b.flatten(b.adaptive_avg_pool2d(h, 1).named("avgpool"));
  b.output("logits", b.linear(h, 1000).named("fc"));
  return std::move(b).build();
}

}  // namespace models
