// The consumer's tests: a graph with teeny's ops and this project's (ffn_ops.hpp), lowered by
// teeny's standard lowering plus this project's middleware, loaded on teeny's CPU backend with
// weights by key, and checked against a reference written here (plain loops in double); in
// training builds, the custom backward kernels against central finite differences.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

import teeny;

#include "ffn_ops.hpp"

namespace {

constexpr std::int64_t features = 6;  // x: [batch, 6]
constexpr std::int64_t width = 8;     // proj: Linear(6, 8), then ReLU
constexpr std::int64_t hidden = 12;   // ffn: SwiGLU(8 -> 12), then SquaredReLU
constexpr std::int64_t classes = 3;   // out: Linear(12, 3)

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

teeny::Result<teeny::Graph> build_graph(teeny::DType dtype = teeny::DType::f32) {
  teeny::GraphBuilder b;
  teeny::Value x = b.input("x", dtype, {teeny::Dim::sym("batch"), features});
  teeny::Value h = b.relu(b.linear(x, width).named("proj"));
  h = b.add(ffn::SwiGLU{.in_features = width, .hidden = hidden}, {h}, "ffn");
  h = b.add(ffn::SquaredReLU{}, {h});
  b.output("y", b.linear(h, classes).named("out"));
  return std::move(b).build();
}

// Named values for every parameter of the graph, at random.
std::map<std::string, std::vector<double>> random_weights(const teeny::Graph& graph, std::mt19937& rng) {
  std::normal_distribution<double> dist(0, 0.5);
  std::map<std::string, std::vector<double>> weights;
  for (const teeny::ParamInfo& p : graph.parameters()) {
    std::vector<double> v(static_cast<std::size_t>(*p.shape.numel()));
    for (double& e : v) e = dist(rng);
    weights[p.key] = std::move(v);
  }
  return weights;
}

// `weights` as f32 tensors named by key, as a program holding them would give them to teeny.
// A TensorRef borrows its name and values: both live here, as long as the refs.
struct Weights {
  std::vector<std::string> keys;
  std::vector<std::vector<float>> values;
  std::vector<teeny::TensorRef> refs;
};
Weights as_f32(const std::map<std::string, std::vector<double>>& weights, const teeny::Graph& graph) {
  Weights w;
  const std::vector<teeny::ParamInfo> params = graph.parameters();
  for (const teeny::ParamInfo& p : params) {
    const auto& values = weights.at(p.key);
    w.keys.push_back(p.key);
    w.values.emplace_back(values.begin(), values.end());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto shape = params[i].shape.bind({});
    REQUIRE(shape);
    w.refs.push_back(teeny::TensorRef::of<float>(w.keys[i], w.values[i], *shape));
  }
  return w;
}

// The reference: the same network written out in double, row by row.
std::vector<double> reference(const std::map<std::string, std::vector<double>>& w, const std::vector<double>& x,
                              std::int64_t batch) {
  auto linear = [](const std::vector<double>& in, std::int64_t n_in, const std::vector<double>& weight,
                   const std::vector<double>& bias, std::int64_t n_out) {
    std::vector<double> out(static_cast<std::size_t>(n_out));
    for (std::int64_t o = 0; o < n_out; ++o) {
      double s = bias[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < n_in; ++i) {
        s += weight[static_cast<std::size_t>(o * n_in + i)] * in[static_cast<std::size_t>(i)];
      }
      out[static_cast<std::size_t>(o)] = s;
    }
    return out;
  };
  std::vector<double> y;
  for (std::int64_t r = 0; r < batch; ++r) {
    std::vector<double> row(x.begin() + r * features, x.begin() + (r + 1) * features);
    auto h = linear(row, features, w.at("proj.weight"), w.at("proj.bias"), width);
    for (double& v : h) v = std::max(v, 0.0);
    const std::vector<double> zero(static_cast<std::size_t>(hidden), 0.0);
    const auto gate = linear(h, width, w.at("ffn.w1.weight"), zero, hidden);
    const auto up = linear(h, width, w.at("ffn.w3.weight"), zero, hidden);
    std::vector<double> g(static_cast<std::size_t>(hidden));
    for (std::size_t j = 0; j < g.size(); ++j) {
      const double swiglu = gate[j] / (1 + std::exp(-gate[j])) * up[j];
      g[j] = std::max(swiglu, 0.0) * std::max(swiglu, 0.0);
    }
    const auto out = linear(g, hidden, w.at("out.weight"), w.at("out.bias"), classes);
    y.insert(y.end(), out.begin(), out.end());
  }
  return y;
}

}  // namespace

TEST_CASE("custom graph ops: built, inferred and summarised like teeny's own") {
  auto graph = build_graph();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  const auto ffn_node = graph->find("ffn");
  REQUIRE(ffn_node);
  CHECK(teeny::kind(graph->op(*ffn_node)) == "swiglu");
  CHECK(teeny::describe(graph->op(*ffn_node)) == "swiglu(in_features=8, hidden=12)");
  CHECK(teeny::to_string(graph->type(*ffn_node)) == "f32[batch, 12]");
  CHECK(teeny::is<ffn::SwiGLU>(graph->op(*ffn_node)));
  CHECK(!teeny::is<ffn::SquaredReLU>(graph->op(*ffn_node)));
  CHECK(graph->find("squared_relu_0"));  // default names count per op kind, as for teeny's ops

  std::vector<std::string> keys;
  for (const auto& p : graph->parameters()) keys.push_back(p.key);
  CHECK(keys == std::vector<std::string>{"proj.weight", "proj.bias", "ffn.w1.weight", "ffn.w3.weight", "out.weight",
                                         "out.bias"});
  CHECK(graph->parameter_count() == (width * features + width) + 2 * hidden * width + (classes * hidden + classes));
  CHECK(contains(graph->summary(), "swiglu(in_features=8, hidden=12)"));

  // A shape error names the node and the op, as for teeny's ops.
  teeny::GraphBuilder b;
  teeny::Value x = b.input("x", teeny::DType::f32, {4, 5});
  b.output("y", b.add(ffn::SwiGLU{.in_features = 8, .hidden = 2}, {x}, "ffn"));
  auto bad = std::move(b).build();
  REQUIRE(!bad);
  CHECK(bad.error().to_string() == "shape mismatch: node 'ffn' (swiglu): input f32[4, 5] must be [..., 8]");
}

TEST_CASE("custom ops run in a model lowered by teeny's standard lowering plus a middleware") {
  auto graph = build_graph();
  REQUIRE(graph);
  std::mt19937 rng(7);
  const auto weights = random_weights(*graph, rng);
  const Weights f32 = as_f32(weights, *graph);

  constexpr std::int64_t batch = 5;
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> x(static_cast<std::size_t>(batch * features));
  for (double& v : x) v = dist(rng);
  const std::vector<float> xf(x.begin(), x.end());
  const auto want = reference(weights, x, batch);

  for (std::size_t threads : {1, 2}) {
    CAPTURE(threads);
    auto model = teeny::load_cpu(*graph, ffn::lowering<float>{}, {{"batch", batch}}, {.threads = threads});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    auto loaded = model->load_weights(f32.refs);  // strict: every key of the graph, nothing else
    REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
    CHECK(loaded->loaded.size() == 6);

    const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xf, {batch, features})};
    REQUIRE(model->forward(in));
    auto y = model->output<float>("y");
    REQUIRE(y);
    REQUIRE(y->shape == teeny::ConcreteShape{batch, classes});
    for (std::int64_t r = 0; r < batch; ++r) {
      for (std::int64_t c = 0; c < classes; ++c) {
        CAPTURE(r);
        CAPTURE(c);
        CHECK((*y)(r, c) == doctest::Approx(want[static_cast<std::size_t>(r * classes + c)]).epsilon(1e-5));
      }
    }
    // The custom ops are steps of their own; teeny's fusion still applies around them (the ReLU
    // after proj is its epilogue): 5 DAG nodes for the graph's 6.
    std::string ops;
    for (const auto& node : model->dag().nodes())
      ops += std::string(ops.empty() ? "" : " ") + std::string(teeny::name_of(node.op));
    CHECK(ops == "x linear swiglu squared_relu linear");  // the input placeholder is named by its input
  }
}

TEST_CASE("custom ops' weights load strictly by key") {
  auto graph = build_graph();
  REQUIRE(graph);
  std::mt19937 rng(3);
  auto weights = random_weights(*graph, rng);
  auto model = teeny::load_cpu(*graph, ffn::lowering<float>{}, {{"batch", 2}});
  REQUIRE(model);

  // Weights whose SwiGLU keys are named differently (w2 for w3) are refused, naming both keys.
  weights["ffn.w2.weight"] = weights.at("ffn.w3.weight");
  weights.erase("ffn.w3.weight");
  std::vector<std::vector<float>> values;
  std::vector<teeny::TensorRef> refs;
  for (const auto& [key, v] : weights) values.emplace_back(v.begin(), v.end());
  std::size_t i = 0;
  for (const auto& entry : weights) {
    const std::string& key = entry.first;
    const teeny::ConcreteShape shape = key.starts_with("ffn.") ? teeny::ConcreteShape{hidden, width}
                                       : key == "proj.weight"  ? teeny::ConcreteShape{width, features}
                                       : key == "proj.bias"    ? teeny::ConcreteShape{width}
                                       : key == "out.weight"   ? teeny::ConcreteShape{classes, hidden}
                                                               : teeny::ConcreteShape{classes};
    refs.push_back(teeny::TensorRef::of<float>(key, values[i++], shape));
  }
  auto loaded = model->load_weights(refs);
  REQUIRE(!loaded);
  const std::string message = loaded.error().to_string();
  CAPTURE(message);
  CHECK(contains(message, "'ffn.w3.weight'"));
  CHECK(contains(message, "'ffn.w2.weight'"));
}

TEST_CASE("teeny's standard lowering alone refuses a custom op, naming node and op") {
  auto graph = build_graph();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {{"batch", 2}});
  REQUIRE(!model);
  CHECK(model.error().to_string() ==
        "unsupported: node 'ffn' (swiglu): op 'swiglu' is defined outside teeny and no middleware of this lowering "
        "lowers it (give standard_lowering one: see docs/custom-ops.md)");
}

namespace tf = teeny::fixed;

// The same network as a typed model (teeny.fixed): the custom ops are layers of it, their shapes
// checked by the compiler with their own infer_shape, run by the same executable ops and kernels.
constexpr tf::Linear<"proj", features, width> proj;
constexpr tf::Custom<"ffn", ffn::SwiGLU{.in_features = width, .hidden = hidden}> swiglu;
constexpr tf::Custom<"squared_relu_0", ffn::SquaredReLU{}> squared_relu;
constexpr tf::Linear<"out", hidden, classes> out;
template <tf::Value X>
constexpr auto typed_network(X x) {
  return out(squared_relu(swiglu(tf::relu(proj(x)))));
}

TEST_CASE("custom ops as layers of a typed model: shapes at compile time, the run-time path's numbers") {
  constexpr std::int64_t batch = 5;
  using typed_model = tf::Model<decltype(typed_network(tf::input<"x", float, batch, features>()))>;
  using network = typed_model::network;
  static_assert(std::is_same_v<decltype(swiglu(tf::input<"h", float, 2, 3, width>()))::dims, tf::Dims<2, 3, hidden>>);
  static_assert(std::is_same_v<typed_model::element, float> &&
                std::is_same_v<decltype(typed_network(tf::input<"x", float, batch, features>()))::dims,
                               tf::Dims<batch, classes>>);
  static_assert(network::params.size() == 6);
  static_assert(network::params[2].key == "ffn.w1.weight" && network::params[3].key == "ffn.w3.weight");
  static_assert(network::params[3].shape == teeny::ConcreteShape{hidden, width});
  static_assert(typed_model::plan::n_steps == 4);  // proj (+ReLU), ffn, squared_relu_0, out

  auto graph = build_graph();
  REQUIRE(graph);
  std::mt19937 rng(11);
  const auto weights = random_weights(*graph, rng);
  const Weights f32 = as_f32(weights, *graph);
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> x(static_cast<std::size_t>(batch * features));
  for (double& v : x) v = dist(rng);
  const std::vector<float> xf(x.begin(), x.end());
  const auto want = reference(weights, x, batch);

  auto runtime = teeny::load_cpu(*graph, ffn::lowering<float>{}, {{"batch", batch}});
  REQUIRE(runtime);
  REQUIRE(runtime->load_weights(f32.refs));
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xf, {batch, features})};
  REQUIRE(runtime->forward(in));
  auto expected = runtime->output<float>("y");
  REQUIRE(expected);

  typed_model model;
  auto loaded = model.load(f32.refs);  // by key, as the run-time model's
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto y = model.forward(xf);
  REQUIRE(y);
  for (std::int64_t r = 0; r < batch; ++r) {
    for (std::int64_t c = 0; c < classes; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      CHECK((*y)(r, c) == doctest::Approx((*expected)(r, c)).epsilon(1e-6));
      CHECK((*y)(r, c) == doctest::Approx(want[static_cast<std::size_t>(r * classes + c)]).epsilon(1e-5));
    }
  }

  // Its weights load strictly by key too: without ffn.w3.weight, the load names it.
  std::vector<teeny::TensorRef> partial;
  for (const teeny::TensorRef& t : f32.refs) {
    if (t.name != "ffn.w3.weight") partial.push_back(t);
  }
  typed_model missing;
  auto refused = missing.load(partial);
  REQUIRE(!refused);
  CHECK(refused.error().code() == teeny::Errc::not_found);
  CHECK(contains(refused.error().message(), "'ffn.w3.weight': missing"));
}

// A custom op whose kernel takes scratch memory from the CpuContext: SquaredReLU's executable op,
// computed through the scratch. A typed model plans its kernels' memory ahead: ScratchSquaredReLU
// declares what its kernel takes (memory<T>), UndeclaredScratchSquaredReLU does not.
template <teeny::FloatElement T>
struct scratch_squared_relu_op : ffn::squared_relu_op<T> {
  std::string_view name() const { return "scratch_squared_relu"; }
};

template <teeny::CpuReal T>
teeny::Result<teeny::NoState> prepare_kernel(const scratch_squared_relu_op<T>&, const ffn::SquaredReLUArgs<T>& a,
                                             teeny::CpuContext& cpu) {
  if (!cpu.reserve_scratch(static_cast<std::size_t>(a.x.numel()) * sizeof(T))) {
    return teeny::fail(teeny::Errc::out_of_memory, "cannot reserve the op's scratch");
  }
  return teeny::NoState{};
}

template <teeny::CpuReal T>
void run_kernel(const scratch_squared_relu_op<T>&, const ffn::SquaredReLUArgs<T>& a, teeny::NoState&,
                teeny::CpuContext& cpu) {
  T* scratch = cpu.scratch_as<T>(0);
  for (std::int64_t i = 0; i < a.x.numel(); ++i) scratch[i] = std::max(a.x.data[i], T(0));
  for (std::int64_t i = 0; i < a.x.numel(); ++i) a.y.data[i] = scratch[i] * scratch[i];
}

// SquaredReLU's graph op, lowered to the scratch-using executable op, with or without memory<T>.
template <bool Declares>
struct ScratchSquaredReLUOp : ffn::SquaredReLU {
  template <teeny::FloatElement T>
  scratch_squared_relu_op<T> lower(const teeny::OpOutput& out) const {
    return {{out}};
  }
  template <class T>
  constexpr teeny::KernelMemory memory(std::span<const teeny::ConcreteShape> inputs) const
    requires Declares
  {
    return {.scratch = static_cast<std::size_t>(inputs[0].numel()) * sizeof(T)};
  }
};
using ScratchSquaredReLU = ScratchSquaredReLUOp<true>;
using UndeclaredScratchSquaredReLU = ScratchSquaredReLUOp<false>;

TEST_CASE("a custom layer's kernel memory: planned when its op declares it, a clear error when not") {
  constexpr std::int64_t n = 4096;  // 16 KiB of scratch: more than any slack in the plan
  auto x = tf::input<"x", float, 4, n / 4>();
  std::vector<float> values(n);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * (static_cast<float>(i) - n / 2);

  constexpr tf::Custom<"scratchy", ScratchSquaredReLU{}> declared;
  using planned_model = tf::Model<decltype(declared(x))>;
  static_assert(planned_model::kernel_memory.scratch == n * sizeof(float));
  planned_model planned;
  auto loaded = planned.load(std::span<const teeny::TensorRef>{});
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto y = planned.forward(values);
  REQUIRE(y);
  for (std::int64_t i = 0; i < n; ++i) {
    const float r = std::max(values[static_cast<std::size_t>(i)], 0.0f);
    CHECK(y->data[i] == r * r);
  }

  constexpr tf::Custom<"scratchy", UndeclaredScratchSquaredReLU{}> undeclared;
  using unplanned_model = tf::Model<decltype(undeclared(x))>;
  static_assert(unplanned_model::kernel_memory.scratch == 0);
  unplanned_model unplanned;
  auto refused = unplanned.load(std::span<const teeny::TensorRef>{});
  REQUIRE(!refused);
  CHECK(refused.error().code() == teeny::Errc::invalid_argument);
  CAPTURE(refused.error().to_string());
  CHECK(contains(refused.error().message(), "a custom layer's op whose kernel takes memory must declare it"));
}

#if TEENY_TRAINING
TEST_CASE("custom ops' backward kernels against central finite differences (f64)") {
  auto graph = build_graph(teeny::DType::f64);
  REQUIRE(graph);
  constexpr std::int64_t batch = 3;
  auto model = teeny::load_cpu_for_training(*graph, ffn::lowering<double>{}, {{"batch", batch}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));

  std::mt19937 rng(11);
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> x(static_cast<std::size_t>(batch * features));
  for (double& v : x) v = dist(rng);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<double>("x", x, {batch, features})};
  auto params = model->parameter_gradients();
  REQUIRE(params.size() == 6);
  for (auto& p : params) {
    auto* v = static_cast<double*>(p.value.data);
    for (std::int64_t i = 0; i < p.value.shape.numel(); ++i) v[i] = 0.5 * dist(rng);
  }
  std::vector<double> r(static_cast<std::size_t>(batch * classes));
  for (double& v : r) v = dist(rng);
  // L = sum(y * r): dL/dy = r.
  auto loss = [&] {
    REQUIRE(model->forward(in));
    auto y = model->output<double>("y");
    REQUIRE(y);
    double l = 0;
    for (std::size_t i = 0; i < r.size(); ++i) l += y->data[i] * r[i];
    return l;
  };
  loss();
  auto dy = model->output_grad("y");
  REQUIRE(dy);
  std::memcpy(dy->data, r.data(), r.size() * sizeof(double));
  model->zero_grad();
  REQUIRE(model->backward());

  // proj's gradients pass back through both custom ops' dx; ffn's are their dW.
  for (auto& p : params) {
    CAPTURE(std::string(p.key));
    auto* v = static_cast<double*>(p.value.data);
    const auto* grad = static_cast<const double*>(p.grad.data);
    for (std::int64_t i = 0; i < p.value.shape.numel(); ++i) {
      const double saved = v[i];
      constexpr double step = 1e-6;
      v[i] = saved + step;
      const double up = loss();
      v[i] = saved - step;
      const double down = loss();
      v[i] = saved;
      const double numeric = (up - down) / (2 * step);
      CAPTURE(i);
      CHECK(std::abs(grad[i] - numeric) <= 1e-7 * std::max(1.0, std::abs(numeric)));
    }
  }
}
#endif
