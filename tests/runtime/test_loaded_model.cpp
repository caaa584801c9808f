// The loaded model end to end on the CPU: the MLP against PyTorch, the execution plan (arena,
// allocation-free forward, plans per batch size) and the errors users meet.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

import teeny;

#include "cpu/kernels/gemm.hpp"  // cpu::ColumnOrder (the Linear kernel's state)
#include "models.hpp"
#include "support/allocation_counter.hpp"
#include "support/fixtures.hpp"

namespace {
// The MLP of examples/models.hpp (flatten -> fc1 -> relu -> fc2 -> relu -> fc3).
teeny::Graph mlp() {
  auto graph = models::mlp();
  REQUIRE(graph);
  return std::move(*graph);
}

// y = fc(x): one Linear 2 -> 2 with parameters fc.weight [2, 2] and fc.bias [2].
teeny::Graph one_linear() {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 2});
  b.output("y", b.linear(x, 2).named("fc"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  return std::move(*graph);
}

// Weights whose outputs are easy by hand: y0 = x0 + 2 x1 + 0.5, y1 = 3 x0 + 4 x1 - 1.
const std::vector<float> fc_weight = {1, 2, 3, 4};  // PyTorch's [out, in]
const std::vector<float> fc_bias = {0.5f, -1};
const std::vector<float> two_inputs = {1, 1, 2, -1};  // x = [[1, 1], [2, -1]]
// y = [[1 + 2 + 0.5, 3 + 4 - 1], [2 - 2 + 0.5, 6 - 4 - 1]]
const std::vector<float> two_outputs = {3.5f, 6, 0.5f, 1};

std::vector<float> values_of(const teeny::TensorView<const float>& v) { return {v.span().begin(), v.span().end()}; }

struct MlpFixture {
  teeny::SafetensorsFile file = *teeny::SafetensorsFile::open(fixtures::path("models/mlp.safetensors"));
  teeny::Tensor x = *file.read("in.x");
  teeny::Tensor logits = *file.read("out.logits");
};
}  // namespace

TEST_CASE("MLP 784-512-512-10 loads a PyTorch state_dict and reproduces its logits") {
  MlpFixture fx;
  const teeny::Graph graph = mlp();
  auto model = teeny::load_cpu(graph, {{"batch", 3}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(fx.file, {.strict = false});
  REQUIRE(report);
  CHECK(report->loaded.size() == 6);
  CHECK(report->missing.empty());
  CHECK(report->skipped_unexpected == std::vector<std::string>{"in.x", "out.logits"});

  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(input));
  fixtures::check_close(*model->output("logits"), fx.logits);

  // Two ReLUs fused into their Linears: three GEMM steps, nothing else.
  CHECK(model->stats().steps == 4);  // flatten, fc1+relu, fc2+relu, fc3
  CHECK(model->stats().parameter_count == 669706);
}

TEST_CASE("the loaded model is a teeny::Model: named tensors in, named tensors out") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  std::vector<teeny::NamedTensor> inputs;
  inputs.push_back({"x", std::move(fx.x)});
  auto outputs = model->forward(std::move(inputs));
  REQUIRE(outputs);
  REQUIRE(outputs->size() == 1);
  CHECK((*outputs)[0].name == "logits");
  const teeny::Tensor& logits = (*outputs)[0].tensor;
  fixtures::check_close({const_cast<std::byte*>(logits.data()), logits.dtype(), logits.shape(), 0}, fx.logits);
}

TEST_CASE("strict loading reports every missing or unexpected key at once") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 1}});
  REQUIRE(model);
  auto strict = model->load_weights(fx.file);  // strict: in.x and out.logits are unexpected
  REQUIRE_FALSE(strict);
  CHECK(strict.error().message().find("in.x") != std::string::npos);
  CHECK(strict.error().message().find("out.logits") != std::string::npos);
}

TEST_CASE("the allocation counter sees heap allocations (or 'allocates nothing' would prove nothing)") {
  const std::size_t before = test_support::allocation_count();
  std::vector<int>* volatile kept = new std::vector<int>(100);  // volatile: the pair cannot be elided
  CHECK(test_support::allocation_count() - before >= 2);
  delete kept;
}

TEST_CASE("forward allocates nothing once the plan for the input's shape exists") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}}, {.threads = 2});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(input));  // warm: thread-pool scratch grows on first use
  const std::size_t before = test_support::allocation_count();
  for (int i = 0; i < 10; ++i) REQUIRE(model->forward(input));
  const std::size_t after = test_support::allocation_count();
  CHECK(after - before == 0);
  fixtures::check_close(*model->output("logits"), fx.logits);
}

TEST_CASE("the arena reuses memory by liveness") {
  auto model = teeny::load_cpu(mlp(), {{"batch", 64}});
  REQUIRE(model);
  const teeny::PlanStats stats = model->stats();
  // x (64*784 floats), flatten, fc1, fc2 (64*512 each), logits (64*10): at most three live at once.
  const std::size_t floats = 4;
  CHECK(stats.naive_arena_bytes == floats * (64 * 784 * 2 + 64 * 512 * 2 + 64 * 10));
  CHECK(stats.arena_bytes < stats.naive_arena_bytes);
  CHECK(stats.arena_bytes <= floats * (64 * 784 * 2 + 64 * 10) + 3 * 64);
}

TEST_CASE("a reshape of a value nothing else reads shares its bytes; one also read elsewhere is copied") {
  // x [2, 4] -> relu -> reshape [2, 2, 2] -> flatten [2, 4] -> fc [2, 1]: both reshapes take the
  // ReLU's bytes. With the ReLU also an output, the first reshape is a copy, and the flatten takes
  // its bytes. (A Linear's output may have padded rows, which a reshape would not read as such.)
  const auto build = [](bool relu_output) {
    teeny::GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {2, 4});
    auto h = b.relu(x);
    if (relu_output) b.output("h", h);
    b.output("y", b.linear(b.flatten(b.reshape(h, {2, 2, 2})), 1).named("fc"));
    auto graph = std::move(b).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    return std::move(*graph);
  };
  const std::vector<float> x = {1, -2, 3, 0.5f, -0.5f, 4, 6, -1};
  const std::vector<float> w = {1, -1, 2, 0.5f}, bias = {0.25f};
  // By hand, after the ReLU: 1 + 6 + 0.25 + 0.25 and -4 + 12 + 0.25.
  const std::vector<double> expected = {7.5, 8.25};
  std::size_t naive[2] = {};
  for (const bool relu_output : {false, true}) {
    CAPTURE(relu_output);
    auto model = teeny::load_cpu(build(relu_output), {});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    const teeny::TensorRef params[] = {teeny::TensorRef::of<float>("fc.weight", w, {1, 4}),
                                       teeny::TensorRef::of<float>("fc.bias", bias, {1})};
    REQUIRE(model->load_weights(params));
    const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x, {2, 4})};
    for (int run = 0; run < 2; ++run) {
      REQUIRE(model->forward(inputs));
      fixtures::check_near(*model->output("y"), expected, 1e-6, 1e-6);
    }
    if (relu_output) fixtures::check_near(*model->output("h"), {1, 0, 3, 0.5, 0, 4, 6, 0}, 0, 0);
    naive[relu_output ? 1 : 0] = model->stats().naive_arena_bytes;
  }
  // Every value takes 64 bytes here or none: one more buffer where the first reshape copies.
  CHECK(naive[0] + 64 == naive[1]);
}

TEST_CASE("another batch size gets its own plan; results agree row by row") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  // Run the first image alone: batch 1 builds a second plan with the same parameters.
  auto one = teeny::Tensor::zeros(teeny::DType::f32, {1, 1, 28, 28});
  REQUIRE(one);
  std::copy_n(fx.x.data(), one->bytes(), one->data());
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", *one)};
  REQUIRE(model->forward(input));
  auto row = model->output("logits");
  REQUIRE(row);
  CHECK(row->shape == teeny::ConcreteShape{1, 10});
  auto first = teeny::Tensor::from<float>(std::span<const float>(fx.logits.view<float>()->data, 10), {1, 10});
  fixtures::check_close(*row, *first);
}

// At batch 1 a Linear's GEMM alternates the order of its column panels from one forward to the next
// (cpu::ColumnOrder): the results must not change with it.
TEST_CASE("the MLP at batch 1 gives PyTorch's logits, the same bits forward after forward") {
  MlpFixture fx;
  for (const std::size_t threads : {1, 2}) {
    CAPTURE(threads);
    auto model = teeny::load_cpu(mlp(), {{"batch", 1}}, {.threads = threads});
    REQUIRE(model);
    REQUIRE(model->load_weights(fx.file, {.strict = false}));
    for (std::int64_t image = 0; image < 3; ++image) {
      CAPTURE(image);
      auto one = teeny::Tensor::zeros(teeny::DType::f32, {1, 1, 28, 28});
      REQUIRE(one);
      std::copy_n(fx.x.data() + image * one->bytes(), one->bytes(), one->data());
      const teeny::TensorRef input[] = {teeny::TensorRef::of("x", *one)};
      const auto want =
          teeny::Tensor::from<float>(std::span<const float>(fx.logits.view<float>()->data + image * 10, 10), {1, 10});
      std::vector<float> first;
      for (int forward = 0; forward < 3; ++forward) {
        REQUIRE(model->forward(input));
        auto logits = model->output("logits");
        REQUIRE(logits);
        fixtures::check_close(*logits, *want);
        const std::vector<float> got = values_of(*logits->as<const float>());
        if (forward == 0) first = got;
        CHECK(std::equal(got.begin(), got.end(), first.begin(), first.end(), [](float a, float b) {
          return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
        }));
      }
    }
  }
}

// The alternation itself, which the test above cannot see (the bits are the same either way): the
// Linear kernel flips its column order after a batch-1 call and keeps it after a larger one.
TEST_CASE("a batch-1 Linear alternates the order of its weight's column panels; larger batches keep it") {
  teeny::linear_op<float> op;
  op.attrs.in_features = 3;
  op.attrs.out_features = 2;
  op.attrs.bias = false;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, x = {1, -1, 2, 0.5f, 0, -2};
  std::vector<float> y(4);
  teeny::CpuContext cpu;
  const auto args_for = [&](std::int64_t rows) {
    teeny::LinearArgs<float> a;
    a.x = teeny::TensorView<const float>(x.data(), teeny::ConcreteShape{rows, 3});
    a.weight = teeny::TensorView<const float>(w.data(), teeny::ConcreteShape{2, 3});
    a.y = teeny::TensorView<float>(y.data(), teeny::ConcreteShape{rows, 2});
    return a;
  };
  auto state = teeny::prepare_kernel(op, args_for(1), cpu);
  REQUIRE(state);
  using teeny::cpu::ColumnOrder;
  CHECK(state->order == ColumnOrder::ascending);
  for (const ColumnOrder next : {ColumnOrder::descending, ColumnOrder::ascending, ColumnOrder::descending}) {
    teeny::run_kernel(op, args_for(1), *state, cpu);
    CHECK(state->order == next);
    CHECK(y[0] == 1 - 2 + 6);  // by hand: row 0 of x times W^T
    CHECK(y[1] == 4 - 5 + 12);
  }
  teeny::run_kernel(op, args_for(2), *state, cpu);
  CHECK(state->order == ColumnOrder::descending);
  CHECK(y[2] == 0.5f - 6);
  CHECK(y[3] == 2 - 12);
}

TEST_CASE("input errors name the input, the expected and the actual shape or dtype") {
  auto model = teeny::load_cpu(mlp(), {{"batch", 2}});
  REQUIRE(model);
  auto wrong_shape = teeny::Tensor::zeros(teeny::DType::f32, {2, 1, 28, 27});
  const teeny::TensorRef bad[] = {teeny::TensorRef::of("x", *wrong_shape)};
  auto r = model->forward(bad);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "input 'x': expected shape [batch, 1, 28, 28], got [2, 1, 28, 27]");

  auto doubles = teeny::Tensor::zeros(teeny::DType::f64, {2, 1, 28, 28});
  const teeny::TensorRef wrong_dtype[] = {teeny::TensorRef::of("x", *doubles)};
  auto d = model->forward(wrong_dtype);
  REQUIRE_FALSE(d);
  CHECK(d.error().message() == "input 'x' is f64 but the model takes f32");

  auto fine = teeny::Tensor::zeros(teeny::DType::f32, {2, 1, 28, 28});
  const teeny::TensorRef unknown[] = {teeny::TensorRef::of("image", *fine)};
  auto u = model->forward(unknown);
  REQUIRE_FALSE(u);
  CHECK(u.error().message() == "the model has no input 'image' (inputs: 'x')");
  CHECK_FALSE(model->output("probabilities"));
}

TEST_CASE("weights round-trip through save_weights") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const std::string path = std::string(TEENY_BUILD_DIR) + "/mlp_roundtrip.safetensors";
  REQUIRE(model->save_weights(path));
  auto saved = teeny::SafetensorsFile::open(path);
  REQUIRE(saved);
  auto reloaded = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(reloaded);
  REQUIRE(reloaded->load_weights(*saved));  // strict: exactly the six parameters
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(reloaded->forward(input));
  fixtures::check_close(*reloaded->output("logits"), fx.logits);
  std::remove(path.c_str());
}

TEST_CASE("profiling times every step by name, allocates nothing per forward and switches off") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  CHECK(model->profile().empty());  // off by default
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};

  model->set_profiling(true);
  REQUIRE(model->forward(input));
  const std::size_t allocations = test_support::allocation_count();
  REQUIRE(model->forward(input));
  CHECK(test_support::allocation_count() == allocations);
  CHECK(model->profiled_forwards() == 2);
  const auto steps = model->profile();
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.node + ":" + s.op);
  // The input runs nothing and is left out; the ReLUs are fused into fc1 and fc2.
  CHECK(names == std::vector<std::string>{"flatten_0:reshape", "fc1:linear", "fc2:linear", "fc3:linear"});
  for (const auto& s : steps) CHECK(s.nanoseconds > 0);

  model->set_profiling(false);
  REQUIRE(model->forward(input));
  CHECK(model->profile().empty());
  CHECK(model->profiled_forwards() == 0);
}

TEST_CASE("weights held in memory load strictly, converted like a file's, and the typed API runs the model") {
  auto model = teeny::load_cpu(one_linear(), {{"batch", 2}});
  REQUIRE(model);
  const teeny::TensorRef weights[] = {teeny::TensorRef::of<float>("fc.weight", fc_weight, {2, 2}),
                                      teeny::TensorRef::of<float>("fc.bias", fc_bias, {2})};
  auto report = model->load_weights(weights);  // strict: exactly the model's two keys
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->loaded == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(report->converted.empty());

  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", two_inputs, {2, 2})};
  REQUIRE(model->forward(in));
  auto y = model->output<float>("y");
  REQUIRE(y);
  CHECK(y->shape == teeny::ConcreteShape{2, 2});
  CHECK(values_of(*y) == two_outputs);
  CHECK((*y)(1, 0) == 0.5f);

  // f64 data converts to the model's f32 (as from a file) and is reported as converted; named
  // tensors load too. Halved weights and bias halve y.
  const std::vector<double> half_weight = {0.5, 1, 1.5, 2};
  const std::vector<double> half_bias = {0.25, -0.5};
  std::vector<teeny::NamedTensor> halves;
  halves.push_back({"fc.weight", *teeny::Tensor::from<double>(half_weight, {2, 2})});
  halves.push_back({"fc.bias", *teeny::Tensor::from<double>(half_bias, {2})});
  auto converted = model->load_weights(halves);
  REQUIRE_MESSAGE(converted, (converted ? "" : converted.error().to_string()));
  CHECK(converted->converted == std::vector<std::string>{"fc.weight", "fc.bias"});
  REQUIRE(model->forward(in));
  CHECK(values_of(*model->output<float>("y")) == std::vector<float>{1.75f, 3, 0.25f, 0.5f});
}

TEST_CASE("in-memory weights: every strict error names the key as a file's would, and nothing is written") {
  auto model = teeny::load_cpu(one_linear(), {{"batch", 2}});
  REQUIRE(model);
  const teeny::TensorRef good[] = {teeny::TensorRef::of<float>("fc.weight", fc_weight, {2, 2}),
                                   teeny::TensorRef::of<float>("fc.bias", fc_bias, {2})};
  REQUIRE(model->load_weights(good));
  const std::string head = "weights in memory: cannot load 2 parameters (1 problem):\n  ";

  const teeny::TensorRef missing[] = {teeny::TensorRef::of<float>("fc.weight", fc_weight, {2, 2})};
  auto m = model->load_weights(missing);
  REQUIRE_FALSE(m);
  CHECK(m.error().code() == teeny::Errc::not_found);
  CHECK(m.error().message() == head + "missing: 'fc.bias' (the model expects f32 [2])");

  const std::vector<float> scale = {2, 2};
  const teeny::TensorRef unexpected[] = {good[0], good[1], teeny::TensorRef::of<float>("fc.scale", scale, {2})};
  auto u = model->load_weights(unexpected);
  REQUIRE_FALSE(u);
  CHECK(u.error().code() == teeny::Errc::invalid_argument);
  CHECK(u.error().message() == head + "unexpected: 'fc.scale' (f32 [2] among the tensors given)");

  const teeny::TensorRef flat[] = {teeny::TensorRef::of<float>("fc.weight", fc_weight, {4}), good[1]};
  auto s = model->load_weights(flat);
  REQUIRE_FALSE(s);
  CHECK(s.error().code() == teeny::Errc::shape_mismatch);
  CHECK(s.error().message() == head + "'fc.weight': tensor has [4] but the model expects [2, 2]");

  const std::vector<std::int64_t> integer_bias = {1, 2};
  const teeny::TensorRef integers[] = {good[0], teeny::TensorRef::of<std::int64_t>("fc.bias", integer_bias, {2})};
  auto d = model->load_weights(integers);
  REQUIRE_FALSE(d);
  CHECK(d.error().code() == teeny::Errc::dtype_mismatch);
  CHECK(d.error().message() == head +
                                   "'fc.bias': tensor has i64 but the model expects f32 (an i64 value is not "
                                   "converted to the floating dtype f32)");

  // Tensors that cannot be a source at all: two with one name, or bytes that do not fill a shape.
  const teeny::TensorRef twice[] = {good[0], good[1], good[1]};
  auto t = model->load_weights(twice);
  REQUIRE_FALSE(t);
  CHECK(t.error().code() == teeny::Errc::duplicate);
  CHECK(t.error().message() == "weights in memory: two tensors are named 'fc.bias'");
  const std::vector<float> three = {1, 2, 3};
  const teeny::TensorRef short_bias[] = {good[0], teeny::TensorRef::of<float>("fc.bias", three, {2})};
  auto b = model->load_weights(short_bias);
  REQUIRE_FALSE(b);
  CHECK(b.error().code() == teeny::Errc::invalid_argument);
  CHECK(b.error().message() == "weights in memory: tensor 'fc.bias' (f32 [2]) needs 8 bytes of data, got 12");

  // None of the failed loads wrote a parameter: the model still computes with the good weights.
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", two_inputs, {2, 2})};
  REQUIRE(model->forward(in));
  CHECK(values_of(*model->output<float>("y")) == two_outputs);
}

TEST_CASE("typed outputs and inputs: the dtype comes from the element type and is checked, naming the tensor") {
  auto model = teeny::load_cpu(one_linear(), {{"batch", 2}});
  REQUIRE(model);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", two_inputs, {2, 2})};
  CHECK(in[0].dtype == teeny::DType::f32);
  CHECK(in[0].data.size() == 16);
  REQUIRE(model->forward(in));

  auto as_double = model->output<double>("y");
  REQUIRE_FALSE(as_double);
  CHECK(as_double.error().code() == teeny::Errc::dtype_mismatch);
  CHECK(as_double.error().message() == "output 'y' is f32 but was read as f64");
  auto unknown = model->output<float>("z");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message() == "the model has no output 'z' (outputs: 'y')");

  const std::vector<double> doubles(4, 1.0);
  const teeny::TensorRef f64_in[] = {teeny::TensorRef::of<double>("x", doubles, {2, 2})};
  auto wrong_dtype = model->forward(f64_in);
  REQUIRE_FALSE(wrong_dtype);
  CHECK(wrong_dtype.error().message() == "input 'x' is f64 but the model takes f32");
  const std::vector<float> three(3, 1.0f);
  const teeny::TensorRef short_in[] = {teeny::TensorRef::of<float>("x", three, {2, 2})};
  auto too_few = model->forward(short_in);
  REQUIRE_FALSE(too_few);
  CHECK(too_few.error().message() == "input 'x' has 12 bytes but shape [2, 2] f32 takes 16");
}

// The CPU backend copies a large input in over its threads (CpuContext::copy_input), one
// contiguous range each, cut anywhere: every byte must arrive, at any size and thread count.
TEST_CASE("an input copied in over the threads arrives whole") {
  for (const std::int64_t numel : {std::int64_t{7}, std::int64_t{8191}, std::int64_t{16385}, std::int64_t{150001}}) {
    teeny::GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {numel});
    b.output("y", b.relu(x));
    auto graph = std::move(b).build();
    REQUIRE(graph);
    std::vector<float> x_values(static_cast<std::size_t>(numel));
    for (std::size_t i = 0; i < x_values.size(); ++i) x_values[i] = static_cast<float>(i % 1000) - 500.0f;
    for (const std::size_t threads : {1, 2, 3}) {
      CAPTURE(numel);
      CAPTURE(threads);
      auto model = teeny::load_cpu(*graph, {}, {.threads = threads});
      REQUIRE(model);
      const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x_values, {numel})};
      REQUIRE(model->forward(inputs));
      const std::vector<float> y = values_of(*model->output<float>("y"));
      REQUIRE(y.size() == x_values.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < y.size(); ++i) wrong += y[i] != std::max(x_values[i], 0.0f) ? 1 : 0;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("forward checks its inputs on every call, with the plan for their shape already built") {
  // y = a + b: two inputs, so that one given twice would leave the other's stale data in place.
  teeny::GraphBuilder builder;
  auto a = builder.input("a", teeny::DType::f32, {teeny::Dim::sym("batch"), 2});
  auto b = builder.input("b", teeny::DType::f32, {teeny::Dim::sym("batch"), 2});
  builder.output("y", builder.add(a, b));
  auto graph = std::move(builder).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {{"batch", 1}});
  REQUIRE(model);
  const std::vector<float> ones = {1, 1}, twos = {2, 2};
  const teeny::TensorRef good[] = {teeny::TensorRef::of<float>("a", ones, {1, 2}),
                                   teeny::TensorRef::of<float>("b", twos, {1, 2})};
  REQUIRE(model->forward(good));  // the plan for batch 1 exists: later calls take the fast path
  CHECK(values_of(*model->output<float>("y")) == std::vector<float>{3, 3});

  // More bytes than the shape holds (the copy would overrun the input's slot in the arena).
  const std::vector<float> long_data(1000, 1.0f);
  const teeny::TensorRef too_long[] = {{"a", teeny::DType::f32, {1, 2}, std::as_bytes(std::span(long_data))}, good[1]};
  auto l = model->forward(too_long);
  REQUIRE_FALSE(l);
  CHECK(l.error().code() == teeny::Errc::invalid_argument);
  CHECK(l.error().message() == "input 'a' has 4000 bytes but shape [1, 2] f32 takes 8");

  const teeny::TensorRef twice[] = {good[0], good[0]};
  auto t = model->forward(twice);
  REQUIRE_FALSE(t);
  CHECK(t.error().code() == teeny::Errc::duplicate);
  CHECK(t.error().message() == "input 'a' is given twice (the model takes 'a', 'b')");

  const teeny::TensorRef one[] = {good[1]};
  auto missing = model->forward(one);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == teeny::Errc::invalid_argument);
  CHECK(missing.error().message() == "the model takes 2 input(s) ('a', 'b'), got 1");

  const teeny::TensorRef null_data[] = {{"a", teeny::DType::f32, {1, 2}, {static_cast<const std::byte*>(nullptr), 8}},
                                        good[1]};
  auto n = model->forward(null_data);
  REQUIRE_FALSE(n);
  CHECK(n.error().code() == teeny::Errc::invalid_argument);
  CHECK(n.error().message() == "input 'a' (f32 [1, 2]) has a null data pointer");

  // A shape whose element count wraps around int64 is refused, not multiplied out.
  const teeny::TensorRef huge[] = {{"a", teeny::DType::f32, {std::int64_t{1} << 40, std::int64_t{1} << 40}, {}},
                                   good[1]};
  auto h = model->forward(huge);
  REQUIRE_FALSE(h);
  CHECK(h.error().code() == teeny::Errc::out_of_range);
  CHECK(h.error().message() == "input 'a': shape [1099511627776, 1099511627776] has more than 2^56 elements");

  // None of the refused calls changed what a good one computes.
  REQUIRE(model->forward(good));
  CHECK(values_of(*model->output<float>("y")) == std::vector<float>{3, 3});
}
