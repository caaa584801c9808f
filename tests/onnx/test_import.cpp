// teeny.onnx against models written by ONNX's own helpers and outputs computed by NumPy
// (tools/make_onnx_fixtures.py), and its errors on bad models. The ONNX backend test data is the
// wider check (tests/onnx/conformance.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>  // before the imports: clang 19 crashed merging string.h declared after them
#include <span>
#include <string>
#include <string_view>
#include <vector>

import teeny;
import teeny.onnx;

#include "support/fixtures.hpp"

namespace {

std::string fixture(const std::string& name) { return fixtures::path("onnx/" + name); }

// A fixture's tensor: a TensorProto (.pb) or a NumPy file (.npy, PyTorch's exports).
teeny::NamedTensor tensor(const std::string& name) {
  if (name.ends_with(".npy")) {
    auto t = teeny::read_npy(fixture(name));
    REQUIRE_MESSAGE(t, (t ? "" : t.error().to_string()));
    return {name, std::move(*t)};
  }
  auto t = teeny::onnx::read_tensor_file(fixture(name));
  REQUIRE_MESSAGE(t, (t ? "" : t.error().to_string()));
  return std::move(*t);
}

void check_close(const teeny::TensorView<const float>& got, const teeny::Tensor& want) {
  REQUIRE(got.shape == want.shape());
  const auto* w = reinterpret_cast<const float*>(want.data());
  for (std::int64_t i = 0; i < want.numel(); ++i) CHECK(got.data[i] == doctest::Approx(w[i]).epsilon(1e-5));
}

// Runs `model` on the tensor file `x` fed as input "x" and checks output `y_name` against file `y`.
template <class Model>
void check_forward(Model& model, const std::string& x_file, const std::string& y_file, const std::string& y_name) {
  const teeny::NamedTensor x = tensor(x_file);
  const teeny::NamedTensor y = tensor(y_file);
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", x.tensor)};
  REQUIRE(model.forward(in));
  auto out = model.template output<float>(y_name);
  REQUIRE(out);
  check_close(*out, y.tensor);
}

}  // namespace

TEST_CASE("onnx: an MLP imports with its names, dims and weights, and runs at batch 1 and 8 as NumPy computes") {
  auto imported = teeny::onnx::import_model(fixture("mlp.onnx"));
  REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().to_string()));
  REQUIRE(imported->inputs.size() == 1);
  CHECK(imported->inputs[0].name == "x");
  CHECK(imported->inputs[0].dtype == teeny::DType::f32);
  CHECK(imported->inputs[0].shape == teeny::Shape{teeny::Dim::sym("batch"), 4});
  REQUIRE(imported->outputs.size() == 1);
  CHECK(imported->outputs[0].name == "y");
  CHECK(imported->producer == "make_onnx_fixtures");
  std::vector<std::string> keys;
  for (const auto& p : imported->graph.parameters()) keys.push_back(p.key);
  CHECK(keys == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"});

  for (const int batch : {1, 8}) {
    CAPTURE(batch);
    auto model = teeny::onnx::load_cpu(fixture("mlp.onnx"), {{"batch", batch}});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    check_forward(*model, "mlp_x_" + std::to_string(batch) + ".pb", "mlp_y_" + std::to_string(batch) + ".pb", "y");
  }
}

TEST_CASE("onnx: one import runs at several batch sizes") {
  auto imported = teeny::onnx::import_model(fixture("mlp.onnx"));
  REQUIRE(imported);
  auto model = teeny::load_cpu(imported->graph, {{"batch", 1}});
  REQUIRE(model);
  auto params = imported->params();
  REQUIRE(params);
  REQUIRE(model->load_weights(*params));
  for (const int batch : {8, 1}) {
    check_forward(*model, "mlp_x_" + std::to_string(batch) + ".pb", "mlp_y_" + std::to_string(batch) + ".pb", "y");
  }
}

TEST_CASE("onnx: weights given to load_cpu are loaded before the kernels pack them, checked as load_weights checks") {
  auto imported = teeny::onnx::import_model(fixture("mlp.onnx"));
  REQUIRE(imported);
  auto params = imported->params();
  REQUIRE(params);
  auto model = teeny::load_cpu(imported->graph, {{"batch", 8}}, {}, &*params);
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  check_forward(*model, "mlp_x_8.pb", "mlp_y_8.pb", "y");

  REQUIRE(imported->weights.size() == 3);
  const teeny::TensorRef first[] = {teeny::TensorRef::of(imported->weights[0].name, imported->weights[0].tensor)};
  auto partial = teeny::ParamSource::of(first);
  REQUIRE(partial);
  auto refused = teeny::load_cpu(imported->graph, {{"batch", 8}}, {}, &*partial);
  REQUIRE_FALSE(refused);
  CAPTURE(refused.error().to_string());
  CHECK(refused.error().to_string().find(imported->weights[1].name) != std::string::npos);
}

TEST_CASE("onnx: arithmetic with a constant operand on either side imports as the op's parameter") {
  auto imported = teeny::onnx::import_model(fixture("constants.onnx"));
  REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().to_string()));
  std::vector<std::string> keys;
  for (const auto& p : imported->graph.parameters()) keys.push_back(p.key);
  CHECK(keys ==
        std::vector<std::string>{"one_minus.other", "scale.other", "shift.other", "square.other", "third.other"});
  auto model = teeny::onnx::load_cpu(fixture("constants.onnx"), {{"batch", 2}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  check_forward(*model, "constants_x.pb", "constants_y.pb", "y");
}

TEST_CASE("onnx: shape arithmetic and arithmetic on constants fold at import") {
  auto imported = teeny::onnx::import_model(fixture("folding.onnx"));
  REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().to_string()));
  // What is left to run: the reshape and the two ops with a constant operand, nothing else.
  std::vector<std::string> nodes;
  for (teeny::NodeId id = 0; id < imported->graph.size(); ++id) nodes.push_back(imported->graph.name(id));
  CHECK(nodes == std::vector<std::string>{"x", "reshape", "double", "plus_one"});
  auto model = teeny::onnx::load_cpu(fixture("folding.onnx"), {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  check_forward(*model, "folding_x.pb", "folding_y.pb", "y");

  auto zero = teeny::onnx::import_model(fixture("fold_div_zero.onnx"));
  REQUIRE_FALSE(zero);
  const std::string& m = zero.error().message();
  CAPTURE(m);
  CHECK(m.find("node 'div_by_zero' (Div)") != std::string::npos);
  CHECK(m.find("divides by zero") != std::string::npos);
}

TEST_CASE("onnx: weights in an external data file beside the model load; a location out of its folder is refused") {
  auto model = teeny::onnx::load_cpu(fixture("external.onnx"), {{"batch", 1}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  const teeny::NamedTensor x = tensor("mlp_x_1.pb");
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", x.tensor)};
  REQUIRE(model->forward(in));
  auto a = model->output<float>("a");
  REQUIRE(a);
  CHECK(a->shape == teeny::ConcreteShape{1, 6});

  auto escaped = teeny::onnx::import_model(fixture("external_escape.onnx"));
  REQUIRE_FALSE(escaped);
  CHECK(escaped.error().message().find("leaves the model's folder") != std::string::npos);
  CHECK(escaped.error().message().find("initializer 'w1'") != std::string::npos);
}

TEST_CASE("onnx: an unsupported model gets one error naming every node teeny cannot import") {
  auto imported = teeny::onnx::import_model(fixture("unsupported.onnx"));
  REQUIRE_FALSE(imported);
  CHECK(imported.error().code() == teeny::Errc::unsupported);
  const std::string& m = imported.error().message();
  CAPTURE(m);
  CHECK(m.find("3 node(s)") != std::string::npos);
  CHECK(m.find("node 'unique' (Unique, opset 13)") != std::string::npos);
  CHECK(m.find("node 'det' (Det, opset 13)") != std::string::npos);
  CHECK(m.find("node 'twice' (Twice, domain 'com.example', opset 1)") != std::string::npos);
  CHECK(m.find("after_unique") == std::string::npos);  // blocked by unique, not reported again
}

TEST_CASE("onnx: a converter the user registers imports their domain's op") {
  teeny::onnx::ImportOptions options;
  options.converters.push_back({"com.example", "Twice", [](teeny::onnx::NodeContext& n) -> teeny::Result<void> {
                                  auto x = n.value(0);
                                  if (!x) return std::move(x).error();
                                  n.set_output(
                                      0, n.builder().add(teeny::Binary{teeny::BinaryOp::add}, {*x, *x}, n.name()));
                                  return teeny::ok();
                                }});
  auto model = teeny::onnx::load_cpu(fixture("custom_domain.onnx"), {}, options);
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  const std::vector<float> x{1, -2, 3, 4, 5, 6, 7, 8, 9.5F};
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", x, {3, 3})};
  REQUIRE(model->forward(in));
  auto t = model->output<float>("t");
  REQUIRE(t);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(t->data[i] == 2 * x[i]);
}

TEST_CASE("onnx: bad files get errors that say what and where") {
  auto undefined = teeny::onnx::import_model(fixture("undefined_input.onnx"));
  REQUIRE_FALSE(undefined);
  CHECK(undefined.error().message().find("node 'lost' (Relu): input 'nowhere' is not defined") != std::string::npos);

  const std::byte garbage[] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}, std::byte{0x01}};
  auto parsed = teeny::onnx::import_model(std::span<const std::byte>(garbage));
  REQUIRE_FALSE(parsed);
  CHECK(parsed.error().code() == teeny::Errc::parse);

  auto missing = teeny::onnx::import_model(fixture("no_such_model.onnx"));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == teeny::Errc::not_found);

  // Each repeat is within the element limit; their product (2^40 ones) is not, and is refused
  // before anything that size is allocated.
  auto tiled = teeny::onnx::import_model(fixture("tile_too_large.onnx"));
  REQUIRE_FALSE(tiled);
  CAPTURE(tiled.error().message());
  CHECK(tiled.error().code() == teeny::Errc::out_of_range);
  CHECK(tiled.error().message().find("node 'tile' (Tile)") != std::string::npos);
  CHECK(tiled.error().message().find("over the limit") != std::string::npos);
}

TEST_CASE("onnx: a class token expanded to the symbolic batch, and constant operands of run-time ops, are Weights") {
  auto imported = teeny::onnx::import_model(fixture("class_token.onnx"));
  REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().to_string()));
  // The initializers a Weight holds are trained, as PyTorch's parameters are; Greater's 0.5 is not.
  std::string trained;
  std::string fixed;
  for (const auto& p : imported->graph.parameters()) (p.trainable ? trained : fixed) += p.key + " ";
  CHECK(trained == "/patch/Conv.weight /patch/Conv.bias /Expand.value fill.value ");
  // pos, Add's constant operand, is the add's parameter "other" (not trained, as for every binary op).
  CHECK(fixed == "/Add.other /Constant_10_output_0.value ");
  // One import, two batch sizes, as PyTorch computed them.
  auto model = teeny::load_cpu(imported->graph, {{"batch", 2}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto params = imported->params();
  REQUIRE(params);
  REQUIRE(model->load_weights(*params));
  for (const int batch : {2, 3}) {
    CAPTURE(batch);
    check_forward(*model, "class_token_x_" + std::to_string(batch) + ".npy",
                  "class_token_y_" + std::to_string(batch) + ".npy", "y");
  }
}

TEST_CASE("onnx: x * sigmoid(x) imports as one node unless fusion is off") {
  auto fused = teeny::onnx::import_model(fixture("silu.onnx"));
  REQUIRE_MESSAGE(fused, (fused ? "" : fused.error().to_string()));
  teeny::onnx::ImportOptions options;
  options.fuse = false;
  auto unfused = teeny::onnx::import_model(fixture("silu.onnx"), options);
  REQUIRE_MESSAGE(unfused, (unfused ? "" : unfused.error().to_string()));
  CHECK(unfused->graph.size() == fused->graph.size() + 1);  // the fused sigmoid is back
}

TEST_CASE("onnx: the list of converters names each op type once") {
  std::vector<std::string_view> names;
  for (const teeny::onnx::Converter& c : teeny::onnx::standard_converters) names.push_back(c.op_type);
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  CHECK((teeny::onnx::find_converter("Relu") != nullptr));
  CHECK((teeny::onnx::find_converter("NoSuchOp") == nullptr));
}
