// teeny.fixed: typed values, shape inference, the analysed network and its parameters. Shapes are
// checked against hand-computed ones (PyTorch's formulas) and parameter keys and shapes against the
// weight files PyTorch wrote (tests/fixtures/models, made by tools/make_fixtures.py).
#include <doctest/doctest.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

import teeny;

#include "fixed_models.hpp"

namespace {
namespace tf = teeny::fixed;

// ---- names ----
constexpr tf::Name block = "layer1.0";
static_assert((block + ".conv1").view() == "layer1.0.conv1");
static_assert((block + ".conv1").size() == 14);
static_assert(tf::Name("").empty());

// ---- the MLP at batch 64: [64, 1, 28, 28] -> flatten [64, 784] -> 512 -> 512 -> 10 ----
using mlp_x = decltype(tf::input<"x", float, 64, 1, 28, 28>());
using mlp = tf::Network<decltype(fixed_models::mlp(mlp_x{}))>;
static_assert(std::same_as<mlp::output::dims, tf::Dims<64, 10>>);
static_assert(std::same_as<mlp::output::element, float>);
static_assert(mlp::size == 7);  // x, flatten, fc1, relu, fc2, relu, fc3
static_assert(std::same_as<mlp::nodes, tf::topological_order<mlp::output>>);
static_assert(mlp::index_of<mlp_x> == 0);
static_assert(mlp::uses == std::array<std::size_t, 7>{1, 1, 1, 1, 1, 1, 1});
static_assert(mlp::params.size() == 6);
static_assert(mlp::params[0].key == "fc1.weight" && mlp::params[0].shape == teeny::ConcreteShape{512, 784});
static_assert(mlp::params[5].key == "fc3.bias" && mlp::params[5].shape == teeny::ConcreteShape{10});
// Each parameter 64-byte aligned in one buffer: fc3.bias (40 bytes) takes 64.
static_assert(mlp::param_offsets[1] == 512 * 784 * 4);
static_assert(mlp::param_bytes == (512 * 784 + 512 + 512 * 512 + 512 + 10 * 512) * 4 + 64);
static_assert(mlp::param_index("fc2.weight") == 2 && mlp::param_index("fc4.weight") == 6);

// ---- LeNet: 28 -conv5 pad2-> 28 -pool2-> 14 -conv5-> 10 -pool2-> 5: 16 * 5 * 5 = 400 ----
using lenet = tf::Network<decltype(fixed_models::lenet(tf::input<"x", double, 3, 1, 28, 28>()))>;
static_assert(std::same_as<lenet::output::dims, tf::Dims<3, 10>>);
static_assert(std::same_as<lenet::output::element, double>);
static_assert(lenet::params[1].dtype == teeny::DType::f64);

// ---- a ResNet basic block: the identity is read twice, the downsample branch joins ----
using block_x = decltype(tf::input<"x", float, 2, 64, 8, 8>());
using identity_block = tf::Network<decltype(fixed_models::basic_block<"layer1.0", 64, 64>(block_x{}))>;
static_assert(std::same_as<identity_block::output::dims, tf::Dims<2, 64, 8, 8>>);
static_assert(identity_block::size == 8);  // x, conv1, bn1, relu, conv2, bn2, add, relu
static_assert(identity_block::uses[identity_block::index_of<block_x>] == 2);
using down_block = tf::Network<decltype(fixed_models::basic_block<"layer2.0", 64, 128, 2>(block_x{}))>;
static_assert(std::same_as<down_block::output::dims, tf::Dims<2, 128, 4, 4>>);
static_assert(down_block::size == 10);
static_assert(down_block::params.size() == 18);  // 2 convs without bias, 2 BNs, downsample conv and BN
static_assert(down_block::params[12].key == "layer2.0.downsample.0.weight");
static_assert(down_block::params[12].shape == teeny::ConcreteShape{128, 64, 1, 1});
static_assert(down_block::params[17].key == "layer2.0.downsample.1.num_batches_tracked");
static_assert(down_block::params[17].dtype == teeny::DType::i64 && down_block::params[17].shape.rank() == 0);

// ---- one layer at two nodes: its weights once (not once per use) ----
constexpr tf::Linear<"shared", 8, 8> shared;
using reused = tf::Network<decltype(shared(tf::relu(shared(tf::input<"x", float, 2, 8>()))))>;
static_assert(reused::size == 4);  // x, shared, relu, shared
static_assert(reused::params.size() == 2);
static_assert(reused::params[0].key == "shared.weight" && reused::params[1].key == "shared.bias");
static_assert(reused::param_bytes == (8 * 8 + 64 / 4) * 4);  // the bias (32 bytes) takes 64

// ---- x + x: one node read twice ----
using twice_x = decltype(tf::input<"x", float, 4>());
using twice = tf::Network<decltype(tf::add(twice_x{}, twice_x{}))>;
static_assert(twice::size == 2 && twice::uses[0] == 2);

// ---- shape rules, by hand ----
using pooled = decltype(tf::MaxPool2d<3, {.stride = 2, .padding = 1}>{}(tf::input<"x", float, 1, 64, 32, 32>()));
static_assert(std::same_as<pooled::dims, tf::Dims<1, 64, 16, 16>>);  // (32 + 2 - 3) / 2 + 1
using strided =
    decltype(tf::Conv2d<"c", 3, 4, 3, {.stride = 2, .dilation = 2}>{}(tf::input<"x", float, 1, 3, 11, 11>()));
static_assert(std::same_as<strided::dims, tf::Dims<1, 4, 4, 4>>);  // (11 - 5) / 2 + 1
using grouped = decltype(tf::Conv2d<"c", 4, 8, 1, {.groups = 2}>{});
static_assert(grouped::params<float>()[0].shape == teeny::ConcreteShape{8, 2, 1, 1});
// A layer's declaration is checked too: 6 channels do not split into 4 groups.
template <std::int64_t In, std::int64_t Groups>
concept conv_declarable = requires { typename tf::Conv2d<"c", In, 16, 5, {.groups = Groups}>; };
static_assert(conv_declarable<8, 4> && !conv_declarable<6, 4> && !conv_declarable<8, 0>);
using avg = decltype(tf::AdaptiveAvgPool2d<1>{}(tf::input<"x", float, 2, 512, 2, 2>()));
static_assert(std::same_as<avg::dims, tf::Dims<2, 512, 1, 1>>);
using on_last = decltype(tf::Linear<"l", 8, 3>{}(tf::input<"x", float, 2, 5, 8>()));  // leading dims kept
static_assert(std::same_as<on_last::dims, tf::Dims<2, 5, 3>>);

// The key -> shape map of a PyTorch weight file, without the fixture's inputs and outputs.
std::map<std::string, std::pair<teeny::ConcreteShape, teeny::DType>> pytorch_params(const std::string& model) {
  auto file = teeny::SafetensorsFile::open(std::string(TEENY_FIXTURES_DIR) + "/models/" + model + ".safetensors");
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));
  std::map<std::string, std::pair<teeny::ConcreteShape, teeny::DType>> out;
  for (const auto& e : file->entries()) {
    if (e.name.starts_with("in.") || e.name.starts_with("out.")) continue;
    out[e.name] = {e.shape, e.dtype};
  }
  return out;
}

// Checks Net's parameters against a PyTorch model's: with `all`, exactly its keys; otherwise each
// of Net's keys must be one of the model's (a part of it: ResNet-18's blocks). `stored_as`: the
// fixture's floating dtype when it differs from the model's (ResNet-18's weights are stored as
// bf16 to keep the file small, and convert on load); integer tensors match exactly.
template <class Net>
void check_params_match(const std::string& model, bool all, teeny::DType stored_as = teeny::DType::f32) {
  const auto expected = pytorch_params(model);
  std::map<std::string, std::pair<teeny::ConcreteShape, teeny::DType>> typed;
  for (const tf::ParamSpec& p : Net::params) typed[std::string(p.key)] = {p.shape, p.dtype};
  CHECK(typed.size() == Net::params.size());  // no key twice
  for (const auto& [key, value] : typed) {
    CAPTURE(key);
    auto it = expected.find(key);
    REQUIRE(it != expected.end());
    CHECK(it->second.first == value.first);
    if (teeny::is_floating(it->second.second)) {
      CHECK(it->second.second == stored_as);
      CHECK(value.second == teeny::DType::f32);
    } else {
      CHECK(it->second.second == value.second);
    }
  }
  if (all) CHECK(typed.size() == expected.size());
}

}  // namespace

TEST_CASE("a typed model's parameters are the PyTorch module's state_dict: keys, shapes, dtypes") {
  SUBCASE("MLP") { check_params_match<mlp>("mlp", true); }
  SUBCASE("LeNet") {
    check_params_match<tf::Network<decltype(fixed_models::lenet(tf::input<"x", float, 3, 1, 28, 28>()))>>("lenet",
                                                                                                          true);
  }
  SUBCASE("ResNet-18's blocks, the identity one and one with a downsample branch") {
    using x = decltype(tf::input<"x", float, 1, 64, 16, 16>());
    using layer1 = tf::Network<decltype(fixed_models::basic_block<"layer1.1", 64, 64>(x{}))>;
    using layer2 = tf::Network<decltype(fixed_models::basic_block<"layer2.0", 64, 128, 2>(x{}))>;
    static_assert(layer1::params.size() == 12 && layer2::params.size() == 18);
    check_params_match<layer1>("resnet18", false, teeny::DType::bf16);
    check_params_match<layer2>("resnet18", false, teeny::DType::bf16);
  }
}

TEST_CASE("a typed model's parameter layout: every parameter 64-byte aligned, disjoint, inside param_bytes") {
  using net = tf::Network<decltype(fixed_models::residual_cnn(tf::input<"x", float, 1, 3, 32, 32>()))>;
  static_assert(net::params.size() == 6 + 12 + 18 + 2);  // stem, layer1.0, layer2.0 (downsample too), fc
  std::size_t end = 0;
  for (std::size_t i = 0; i < net::params.size(); ++i) {
    CAPTURE(net::params[i].key);
    CHECK(net::param_offsets[i] % 64 == 0);
    CHECK(net::param_offsets[i] >= end);
    end = net::param_offsets[i] +
          static_cast<std::size_t>(net::params[i].shape.numel()) * teeny::size_of(net::params[i].dtype);
  }
  CHECK(end <= net::param_bytes);
  CHECK(net::param_bytes - end < 64);
}
