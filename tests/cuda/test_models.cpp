// Whole models on the CUDA backend (load_cuda): without a GPU, the error that says why; with one,
// the MLP, LeNet and ResNet-18 against the PyTorch fixtures, eagerly and by graph replay (which
// must give eager's exact bits), and other batch sizes on plans of their own; in training builds,
// LeNet's gradients on the GPU against the CPU backend's, the device optimizers (AdamW against
// the CPU's, bf16 master weights, f16 loss scaling) and a whole training step replayed as one
// CUDA graph against the same step run op by op.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/fixtures.hpp"

namespace {

teeny::Graph built(teeny::Result<teeny::Graph> graph) {
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  return std::move(*graph);
}

std::vector<float> logits_of(teeny::cuda::CudaModel& model, std::size_t count) {
  std::vector<float> out(count);
  auto copied = model.copy_output("logits", std::as_writable_bytes(std::span(out)));
  REQUIRE_MESSAGE(copied, (copied ? "" : copied.error().to_string()));
  return out;
}

// Runs `graph` on the GPU at the fixture's batch repeated `times`, with its weights, eagerly and
// then replayed; checks every copy of the logits against PyTorch's (|a - e| <= atol + rtol |e|)
// and replay against eager bit for bit.
void check_model(const char* name, const teeny::Graph& graph, std::int64_t times, double rtol, double atol) {
  CAPTURE(name);
  CAPTURE(times);
  const fixtures::Model fx = fixtures::model(name);
  const teeny::Tensor x = fixtures::repeated(fx.x, times);
  auto model = teeny::cuda::load_cuda(graph, {{"batch", x.shape()[0]}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto loaded = model->load_weights(fx.file, {.strict = false});
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));

  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", x)};
  auto ran = model->forward(input);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  const auto count = static_cast<std::size_t>(fx.logits.numel());
  const auto eager = logits_of(*model, count * static_cast<std::size_t>(times));
  auto want = fx.logits.view<float>();
  REQUIRE(want);
  double worst = 0;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < eager.size(); ++i) {
    const double e = want->data[i % count];
    const double d = std::abs(static_cast<double>(eager[i]) - e);
    worst = std::max(worst, d);
    if (!(d <= atol + rtol * std::abs(e))) ++bad;
  }
  CHECK(bad == 0);
  MESSAGE(name << " on the GPU, batch " << x.shape()[0] << ": max |error| vs PyTorch " << worst);

  // The same input taken from device memory (forward_on_device): the same logits, bit for bit.
  auto device_x = teeny::cuda::DeviceBuffer::allocate(x.bytes());
  REQUIRE(device_x);
  const std::span<const std::byte> host_x(static_cast<const std::byte*>(x.data()), x.bytes());
  REQUIRE(device_x->upload(host_x));
  const teeny::TensorRef on_device[] = {
      {"x", x.dtype(), x.shape(), {static_cast<const std::byte*>(device_x->data()), x.bytes()}}};
  auto ran_on_device = model->forward_on_device(on_device);
  REQUIRE_MESSAGE(ran_on_device, (ran_on_device ? "" : ran_on_device.error().to_string()));
  CHECK(logits_of(*model, eager.size()) == eager);

  REQUIRE(model->set_graph_replay(true));
  for (int replay = 0; replay < 2; ++replay) {
    auto replayed = model->forward(input);
    REQUIRE_MESSAGE(replayed, (replayed ? "" : replayed.error().to_string()));
    CHECK(logits_of(*model, eager.size()) == eager);
  }
}

}  // namespace

TEST_CASE("cuda: load_cuda without a usable GPU fails, saying why") {
  if (teeny::cuda::device_count() > 0) return;  // the GPU case below
  const teeny::Graph graph = built(models::mlp());
  auto model = teeny::cuda::load_cuda(graph, {{"batch", 1}});
  REQUIRE_FALSE(model);
  const std::string message = model.error().message();
  CAPTURE(message);
  CHECK(message.find("CUDA device 0") != std::string::npos);
  CHECK((model.error().code() == teeny::Errc::device || model.error().code() == teeny::Errc::not_found));
  auto context = teeny::cuda::CudaContext::create({.device = 3});
  REQUIRE_FALSE(context);
  CHECK(context.error().message().find("CUDA device 3") != std::string::npos);
}

TEST_CASE("cuda: the MLP, LeNet and ResNet-18 give PyTorch's logits on the GPU, eager and replayed" *
          doctest::test_suite("gpu")) {
  // The tolerances of the CPU's model tests: the GPU's f32 sums run in yet another order.
  check_model("mlp", built(models::mlp()), 1, 1e-5, 1e-5);
  check_model("mlp", built(models::mlp()), 7, 1e-5, 1e-5);
  check_model("lenet", built(models::lenet()), 1, 1e-5, 1e-5);
  check_model("lenet", built(models::lenet()), 22, 1e-5, 1e-5);
  check_model("resnet18", built(models::resnet18(64)), 1, 1e-4, 1e-5);
  check_model("resnet18", built(models::resnet18(64)), 2, 1e-4, 1e-5);
}

TEST_CASE("cuda: a device model's errors name the input, the output and the sizes" * doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::mlp());
  auto model = teeny::cuda::load_cuda(graph, {{"batch", 2}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  std::vector<double> wrong(2 * 784);
  const teeny::TensorRef input[] = {teeny::TensorRef::of<double>("x", wrong, {2, 1, 28, 28})};
  auto refused = model->forward(input);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == teeny::Errc::dtype_mismatch);
  std::vector<float> small(3);
  auto short_buffer = model->copy_output("logits", std::as_writable_bytes(std::span(small)));
  REQUIRE_FALSE(short_buffer);
  CHECK(short_buffer.error().message().find("output 'logits'") != std::string::npos);
  CHECK(short_buffer.error().message().find("has 80 bytes, but the buffer given for it has 12") != std::string::npos);
}

#if TEENY_TRAINING
TEST_CASE("cuda: a model lowered for training gets the CPU's gradients on the GPU") {
  const teeny::Graph graph = built(models::lenet_bn());  // with batch norm in the training phase
  const fixtures::Model fx = fixtures::model("lenet");
  const std::int64_t batch = fx.x.shape()[0];
  if (teeny::cuda::device_count() == 0) {
    auto refused = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message().find("CUDA device 0") != std::string::npos);
    return;
  }
  auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}});
  REQUIRE_MESSAGE(cpu, (cpu ? "" : cpu.error().to_string()));
  REQUIRE(teeny::init_parameters(*cpu, 3));
  auto gpu = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
  REQUIRE_MESSAGE(gpu, (gpu ? "" : gpu.error().to_string()));
  const auto params = cpu->parameters();
  auto source = teeny::ParamSource::of(params);
  REQUIRE(source);
  REQUIRE(gpu->load_weights(*source, {}));

  // One forward and backward on each with the same dL/dlogits, in the training phase.
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  std::vector<float> dlogits(static_cast<std::size_t>(fx.logits.numel()));
  for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = 0.02F * static_cast<float>(i % 5) - 0.04F;
  REQUIRE(cpu->forward(input));
  auto ran = gpu->forward(input);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  auto grad = cpu->output_grad("logits");
  REQUIRE(grad);
  std::memcpy(grad->data, dlogits.data(), dlogits.size() * sizeof(float));
  REQUIRE(gpu->set_output_grad("logits", std::as_bytes(std::span(dlogits))));
  REQUIRE(cpu->backward());
  auto back = gpu->backward();
  REQUIRE_MESSAGE(back, (back ? "" : back.error().to_string()));

  // Every gradient within 1e-4 of its largest magnitude (f32 sums in another order).
  for (const auto& want : cpu->parameter_gradients()) {
    CAPTURE(want.key);
    const auto count = static_cast<std::size_t>(want.grad.shape.numel());
    std::vector<float> got(count);
    auto copied = gpu->copy_gradient(want.key, std::as_writable_bytes(std::span(got)));
    REQUIRE_MESSAGE(copied, (copied ? "" : copied.error().to_string()));
    const auto* expected = static_cast<const float*>(want.grad.data);
    double scale = 1e-6;
    for (std::size_t i = 0; i < count; ++i) scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
    for (std::size_t i = 0; i < count; ++i) CHECK(std::abs(got[i] - expected[i]) <= 1e-4 * scale);
  }
  // The batch norm's running statistics moved on the GPU as on the CPU.
  REQUIRE(gpu->download_parameters());
  const auto moved = gpu->parameters();
  const auto after = cpu->parameters();
  int statistics = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name.find("running_") == std::string::npos) continue;
    ++statistics;
    CAPTURE(params[i].name);
    const auto n = params[i].data.size() / sizeof(float);
    const auto* want = reinterpret_cast<const float*>(after[i].data.data());
    const auto* got = reinterpret_cast<const float*>(moved[i].data.data());
    for (std::size_t j = 0; j < n; ++j) CHECK(std::abs(got[j] - want[j]) <= 1e-5 * (1 + std::abs(want[j])));
  }
  CHECK(statistics == 4);  // bn1 and bn2: running mean and variance
}

namespace {
// One forward and backward of `model` (CPU or GPU) on the LeNet fixture's input, with dL/dlogits
// `dlogits`.
template <class M>
void forward_backward(M& model, const teeny::Tensor& x, std::span<const float> dlogits) {
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", x)};
  auto ran = model.forward(input);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  REQUIRE(model.set_output_grad("logits", std::as_bytes(dlogits)));
  auto back = model.backward();
  REQUIRE_MESSAGE(back, (back ? "" : back.error().to_string()));
}

// The parameters of `model` as f64, by key (a GPU model's downloaded first).
template <class T>
std::vector<std::vector<double>> parameter_values(teeny::cuda::CudaModelOf<T>& model) {
  REQUIRE(model.download_parameters());
  std::vector<std::vector<double>> out;
  for (const teeny::TensorRef& p : model.parameters()) {
    const auto* data = reinterpret_cast<const T*>(p.data.data());
    std::vector<double> values(p.data.size() / sizeof(T));
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] =
          static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(data[i]));
    }
    out.push_back(std::move(values));
  }
  return out;
}

// A GPU model of `graph` lowered for training, starting from `cpu`'s parameters.
teeny::cuda::CudaModel gpu_copy_of(const teeny::CpuModel& cpu, const teeny::Graph& graph, std::int64_t batch) {
  auto model = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  const auto params = cpu.parameters();
  auto source = teeny::ParamSource::of(params);
  REQUIRE(source);
  auto loaded = model->load_weights(*source, {});
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  return std::move(*model);
}
}  // namespace

TEST_CASE("cuda: the device optimizers refuse bad options before touching a GPU") {
  auto scaler = teeny::cuda::GradScaler::create({.init_scale = -1});
  REQUIRE_FALSE(scaler);
  CHECK(scaler.error().code() == teeny::Errc::invalid_argument);
  CHECK(scaler.error().message().find("init_scale > 0") != std::string::npos);
}

TEST_CASE("cuda: AdamW steps on the GPU match the CPU AdamW's" * doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::lenet_bn());
  const fixtures::Model fx = fixtures::model("lenet");
  const std::int64_t batch = fx.x.shape()[0];
  std::vector<float> dlogits(static_cast<std::size_t>(fx.logits.numel()));
  for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = 0.02F * static_cast<float>(i % 5) - 0.04F;

  // f32: three AdamW steps (weight decay, bias corrections moving), the same on both.
  auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}});
  REQUIRE(cpu);
  REQUIRE(teeny::init_parameters(*cpu, 4));
  auto gpu = gpu_copy_of(*cpu, graph, batch);
  auto params = teeny::trainable_parameters<float>(*cpu);
  REQUIRE(params);
  auto cpu_opt = teeny::AdamW<float>::create(*params, {.lr = 1e-2});
  REQUIRE(cpu_opt);
  auto gpu_opt = teeny::cuda::AdamW<float>::create(gpu, {.lr = 1e-2});
  REQUIRE_MESSAGE(gpu_opt, (gpu_opt ? "" : gpu_opt.error().to_string()));
  // A third model trains with its forward and backward replayed as CUDA graphs.
  auto replayed = gpu_copy_of(*cpu, graph, batch);
  REQUIRE(replayed.set_graph_replay(true));
  auto replayed_opt = teeny::cuda::AdamW<float>::create(replayed, {.lr = 1e-2});
  REQUIRE(replayed_opt);
  for (int step = 0; step < 3; ++step) {
    forward_backward(*cpu, fx.x, dlogits);
    forward_backward(gpu, fx.x, dlogits);
    forward_backward(replayed, fx.x, dlogits);
    cpu_opt->step();
    REQUIRE(gpu_opt->step());
    REQUIRE(replayed_opt->step());
    cpu_opt->zero_grad();
    REQUIRE(gpu_opt->zero_grad());
    REQUIRE(replayed_opt->zero_grad());
  }
  const auto got = parameter_values(gpu);
  CHECK(parameter_values(replayed) == got);  // the same kernels, replayed: bit for bit
  const auto want = cpu->parameters();
  REQUIRE(got.size() == want.size());
  for (std::size_t p = 0; p < want.size(); ++p) {
    CAPTURE(want[p].name);
    const auto* w = reinterpret_cast<const float*>(want[p].data.data());
    for (std::size_t i = 0; i < got[p].size(); ++i) CHECK(std::abs(got[p][i] - w[i]) <= 1e-4 * (1 + std::abs(w[i])));
  }
}

TEST_CASE("cuda: a bf16 model steps through f32 master weights, and f16 loss scaling skips an overflow" *
          doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::mlp());
  const fixtures::Model fx = fixtures::model("mlp");
  const std::int64_t batch = fx.x.shape()[0];
  auto x32 = fx.x.view<float>();
  REQUIRE(x32);
  const auto x_as = [&]<class T>() {
    std::vector<T> out;
    for (const float v : x32->span()) out.push_back(T(v));
    return out;
  };
  const auto grad_as = [&]<class T>(float scale) {
    std::vector<T> out(static_cast<std::size_t>(fx.logits.numel()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = T(scale * (0.05F * static_cast<float>(i % 3) - 0.05F));
    return out;
  };

  // bf16 SGD, 8 steps on one backward's gradients: the f32 master copy moves by -lr g each step
  // and the weights are it rounded, so steps smaller than half a bf16 ulp still add up (updated in
  // place, such weights would never move).
  {
    using teeny::bf16;
    auto model = teeny::cuda::load_cuda_for_training<bf16>(graph, {{"batch", batch}});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    REQUIRE(model->load_weights(fx.file, {.strict = false}));  // f32 weights, rounded to bf16
    const auto before = parameter_values(*model);
    const std::vector<bf16> x = x_as.template operator()<bf16>();
    const std::vector<bf16> dlogits = grad_as.template operator()<bf16>(1.0F);
    const teeny::TensorRef input[] = {teeny::TensorRef::of<bf16>("x", x, fx.x.shape())};
    REQUIRE(model->forward(input));
    REQUIRE(model->set_output_grad("logits", std::as_bytes(std::span(dlogits))));
    REQUIRE(model->backward());
    const double lr = 1e-2;
    auto sgd = teeny::cuda::Sgd<bf16>::create(*model, {.lr = lr});
    REQUIRE_MESSAGE(sgd, (sgd ? "" : sgd.error().to_string()));
    for (int step = 0; step < 8; ++step) REQUIRE(sgd->step());
    const auto after = parameter_values(*model);
    const auto keys = model->parameters();
    for (std::size_t p = 0; p < keys.size(); ++p) {
      CAPTURE(keys[p].name);
      std::vector<bf16> g(before[p].size());
      REQUIRE(model->copy_gradient(keys[p].name, std::as_writable_bytes(std::span(g))));
      for (std::size_t i = 0; i < g.size(); ++i) {
        float master = static_cast<float>(before[p][i]);
        for (int step = 0; step < 8; ++step) master = master + static_cast<float>(-lr) * static_cast<float>(g[i]);
        const double want = static_cast<float>(bf16(master));
        const double ulp = std::max(std::abs(want), 1e-30) * 0x1p-7;  // one bf16 ulp, at most
        CHECK(std::abs(after[p][i] - want) <= ulp);
      }
    }
  }

  // f16 with a GradScaler: the first gradients, scaled by 65536, overflow; the step is skipped (the
  // weights unchanged) and the scale halved, until a step is taken.
  {
    using teeny::f16;
    auto model = teeny::cuda::load_cuda_for_training<f16>(graph, {{"batch", batch}});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    REQUIRE(model->load_weights(fx.file, {.strict = false}));
    const std::vector<f16> x = x_as.template operator()<f16>();
    const teeny::TensorRef input[] = {teeny::TensorRef::of<f16>("x", x, fx.x.shape())};
    auto scaler = teeny::cuda::GradScaler::create();
    REQUIRE(scaler);
    auto adamw = teeny::cuda::AdamW<f16>::create(*model, {.lr = 1e-3});
    REQUIRE_MESSAGE(adamw, (adamw ? "" : adamw.error().to_string()));
    int skipped = 0;
    bool stepped = false;
    for (int step = 0; step < 24 && !stepped; ++step) {
      const auto before = parameter_values(*model);
      const std::vector<f16> dlogits = grad_as.template operator()<f16>(static_cast<float>(scaler->scale() * 100));
      REQUIRE(model->forward(input));
      REQUIRE(model->set_output_grad("logits", std::as_bytes(std::span(dlogits))));
      REQUIRE(model->backward());
      const double scale = scaler->scale();
      REQUIRE(adamw->step(&*scaler));
      REQUIRE(adamw->zero_grad());
      if (scaler->skipped_last()) {
        ++skipped;
        CHECK(scaler->scale() == scale / 2);
        CHECK(parameter_values(*model) == before);
      } else {
        stepped = true;
        CHECK(parameter_values(*model) != before);
      }
    }
    CHECK(skipped > 0);
    CHECK(stepped);
  }

  // The same through TrainingStep (MSE against a far target, so the scaled gradients overflow),
  // eagerly and replayed as one CUDA graph a step: the scaler's check and multiplier are in the
  // graph, and both models skip the same steps and end bit for bit alike.
  {
    using teeny::f16;
    const std::vector<f16> x = x_as.template operator()<f16>();
    const teeny::TensorRef input[] = {teeny::TensorRef::of<f16>("x", x, fx.x.shape())};
    const std::vector<f16> target(static_cast<std::size_t>(fx.logits.numel()), f16(100.0F));
    struct Run {
      teeny::cuda::CudaModelOf<f16> model;
      teeny::cuda::GradScaler scaler;
      teeny::cuda::AdamW<f16> adamw;
      teeny::cuda::MseLoss<f16> mse;
      std::vector<bool> skipped;
      std::vector<double> losses;
    };
    const auto run = [&](bool replay) {
      auto model = teeny::cuda::load_cuda_for_training<f16>(graph, {{"batch", batch}});
      REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
      REQUIRE(model->load_weights(fx.file, {.strict = false}));
      REQUIRE(model->set_graph_replay(replay));
      auto scaler = teeny::cuda::GradScaler::create();
      REQUIRE(scaler);
      auto adamw = teeny::cuda::AdamW<f16>::create(*model, {.lr = 1e-3});
      REQUIRE(adamw);
      auto r = std::make_unique<Run>(
          Run{std::move(*model), std::move(*scaler), std::move(*adamw), teeny::cuda::MseLoss<f16>{}, {}, {}});
      teeny::cuda::TrainingStep step(r->model, r->mse, r->adamw, "logits", &r->scaler);
      for (int i = 0; i < 24 && std::count(r->skipped.begin(), r->skipped.end(), false) < 2; ++i) {
        const auto loss = step(input, std::span<const f16>(target));
        REQUIRE_MESSAGE(loss, (loss ? "" : loss.error().to_string()));
        r->losses.push_back(*loss);
        r->skipped.push_back(r->scaler.skipped_last());
      }
      return r;
    };
    const auto eager = run(false);
    const auto replayed = run(true);
    CHECK(std::count(eager->skipped.begin(), eager->skipped.end(), true) > 0);
    CHECK(std::count(eager->skipped.begin(), eager->skipped.end(), false) == 2);
    CHECK(replayed->skipped == eager->skipped);
    CHECK(replayed->losses == eager->losses);
    CHECK(parameter_values(replayed->model) == parameter_values(eager->model));
  }
}

// Every member of the device optimizers and losses compiles in 16-bit and 64-bit types too (the
// GPU cases call only some of them, and only what is called is instantiated).
template class teeny::cuda::Sgd<teeny::bf16>;
template class teeny::cuda::AdamFamily<teeny::f16, teeny::AdamOptions, false>;
template class teeny::cuda::AdamFamily<double, teeny::AdamWOptions, true>;
template class teeny::cuda::CrossEntropyLoss<teeny::bf16>;
template class teeny::cuda::MseLoss<double>;
// And a training step of an f16 model with MSE, AdamW and a scaler (operator() is a template).
using F16Step = teeny::cuda::TrainingStep<teeny::cuda::CudaModelOf<teeny::f16>, teeny::cuda::MseLoss<teeny::f16>,
                                          teeny::cuda::AdamW<teeny::f16>>;
template class teeny::cuda::TrainingStep<teeny::cuda::CudaModelOf<teeny::f16>, teeny::cuda::MseLoss<teeny::f16>,
                                         teeny::cuda::AdamW<teeny::f16>>;
template teeny::Result<double> F16Step::operator()<teeny::f16>(std::span<const teeny::TensorRef>,
                                                               std::span<const teeny::f16>);

TEST_CASE("cuda: device optimizers over parameter groups step as the CPU's and save and load their state" *
          doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::mlp());
  const fixtures::Model fx = fixtures::model("mlp");
  const std::int64_t batch = fx.x.shape()[0];
  std::vector<float> dlogits(static_cast<std::size_t>(fx.logits.numel()));
  for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = 0.03F * static_cast<float>(i % 4) - 0.05F;
  const teeny::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true};

  // Two AdamW steps over PyTorch's two groups (decay for weights, none for biases), on the CPU and
  // on the GPU: the same parameters, the same state under the same keys.
  auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}});
  REQUIRE(cpu);
  REQUIRE(cpu->load_weights(fx.file, {.strict = false}));
  auto gpu = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
  REQUIRE_MESSAGE(gpu, (gpu ? "" : gpu.error().to_string()));
  REQUIRE(gpu->load_weights(fx.file, {.strict = false}));
  auto params = teeny::trainable_parameters<float>(*cpu);
  REQUIRE(params);
  auto cpu_opt = teeny::AdamW<float>::create(teeny::weight_decay_groups<float>(*params, options));
  REQUIRE(cpu_opt);
  const auto groups = teeny::cuda::weight_decay_groups(*gpu, options);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].keys.size() == 3);  // fc1, fc2, fc3 weights
  CHECK(groups[1].options.weight_decay == 0);
  auto gpu_opt = teeny::cuda::AdamW<float>::create(*gpu, groups);
  REQUIRE_MESSAGE(gpu_opt, (gpu_opt ? "" : gpu_opt.error().to_string()));
  CHECK(gpu_opt->n_groups() == 2);
  for (int step = 0; step < 2; ++step) {
    forward_backward(*cpu, fx.x, dlogits);
    forward_backward(*gpu, fx.x, dlogits);
    cpu_opt->step();
    REQUIRE(gpu_opt->step());
    cpu_opt->zero_grad();
    REQUIRE(gpu_opt->zero_grad());
  }
  auto saved = gpu_opt->state_tensors();
  REQUIRE_MESSAGE(saved, (saved ? "" : saved.error().to_string()));
  const auto cpu_state = cpu_opt->state_tensors();
  REQUIRE(saved->size() == cpu_state.size());  // f32: no master copies
  for (const teeny::TensorRef& want : cpu_state) {
    CAPTURE(want.name);
    const auto found = std::find_if(saved->begin(), saved->end(), [&](const auto& t) { return t.name == want.name; });
    REQUIRE(found != saved->end());
    REQUIRE(found->tensor.dtype() == want.dtype);
    REQUIRE(found->tensor.shape() == want.shape);
    if (want.dtype == teeny::DType::i64) {
      CHECK(std::memcmp(found->tensor.data(), want.data.data(), sizeof(std::int64_t)) == 0);
      continue;
    }
    const auto* w = reinterpret_cast<const float*>(want.data.data());
    const auto* g = reinterpret_cast<const float*>(found->tensor.data());
    for (std::int64_t i = 0; i < want.shape.numel(); ++i) CHECK(std::abs(g[i] - w[i]) <= 1e-5F * (1 + std::abs(w[i])));
  }

  // A second GPU model at the first's weights, its optimizer given the saved state: one more step
  // on each gives the same parameters, bit for bit.
  REQUIRE(gpu->download_parameters());
  auto resumed = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
  REQUIRE(resumed);
  const auto weights = gpu->parameters();
  auto source = teeny::ParamSource::of(weights);
  REQUIRE(source);
  REQUIRE(resumed->load_weights(*source, {}));
  auto resumed_opt = teeny::cuda::AdamW<float>::create(*resumed, teeny::cuda::weight_decay_groups(*resumed, options));
  REQUIRE(resumed_opt);
  std::vector<teeny::TensorRef> refs;
  for (const auto& t : *saved) refs.push_back(teeny::TensorRef::of(t));
  // A state missing a key is refused whole.
  const std::vector<teeny::TensorRef> partial(refs.begin() + 1, refs.end());
  const auto refused = resumed_opt->load_state(partial);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("missing: '") != std::string::npos);
  auto loaded = resumed_opt->load_state(refs);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  forward_backward(*gpu, fx.x, dlogits);
  forward_backward(*resumed, fx.x, dlogits);
  REQUIRE(gpu_opt->step());
  REQUIRE(resumed_opt->step());
  CHECK(parameter_values(*resumed) == parameter_values(*gpu));

  // A key that is not a trained parameter, or one in two groups, is refused naming it.
  auto bad = groups;
  bad[1].keys.push_back(bad[0].keys.front());
  const auto twice = teeny::cuda::AdamW<float>::create(*gpu, bad);
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message().find(bad[0].keys.front()) != std::string::npos);
  bad = groups;
  bad[0].keys.push_back("no.such.weight");
  const auto unknown = teeny::cuda::AdamW<float>::create(*gpu, bad);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message().find("'no.such.weight' is not a trained parameter") != std::string::npos);
}

TEST_CASE("cuda: a training step replayed as one CUDA graph matches the step run op by op" *
          doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::lenet_bn());
  const fixtures::Model fx = fixtures::model("lenet");
  const std::int64_t batch = fx.x.shape()[0];
  auto cpu = teeny::load_cpu_for_training<float>(graph, {{"batch", batch}});
  REQUIRE(cpu);
  REQUIRE(teeny::init_parameters(*cpu, 11));
  const auto load = [&] { return gpu_copy_of(*cpu, graph, batch); };
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));

  // SGD with momentum (its buffer starts at the second step) and Adam (bias corrections), each on
  // three models: op by op, a TrainingStep run eagerly, and the same replayed as one graph a step.
  // Each step has its own labels and learning rate: a replay must read this step's.
  const auto check = [&]<class Optimizer>(auto create) {
    auto by_ops = load();
    auto eager = load();
    auto replayed = load();
    REQUIRE(replayed.set_graph_replay(true));
    auto opt_ops = create(by_ops);
    auto opt_eager = create(eager);
    auto opt_replayed = create(replayed);
    REQUIRE_MESSAGE(opt_ops, (opt_ops ? "" : opt_ops.error().to_string()));
    REQUIRE(opt_eager);
    REQUIRE(opt_replayed);
    teeny::cuda::CrossEntropyLoss<float> loss_ops;
    teeny::cuda::CrossEntropyLoss<float> loss_eager;
    teeny::cuda::CrossEntropyLoss<float> loss_replayed;
    teeny::cuda::TrainingStep step_eager(eager, loss_eager, *opt_eager, "logits");
    teeny::cuda::TrainingStep step_replayed(replayed, loss_replayed, *opt_replayed, "logits");
    for (int step = 0; step < 4; ++step) {
      CAPTURE(step);
      for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((i * 7 + step) % 10);
      const double lr = 0.05 / (step + 1);
      for (Optimizer* opt : {&*opt_ops, &*opt_eager, &*opt_replayed}) REQUIRE(opt->set_lr(0, lr));
      REQUIRE(by_ops.forward(input));
      const auto want = loss_ops(by_ops, "logits", labels);
      REQUIRE(want);
      REQUIRE(by_ops.backward());
      REQUIRE(opt_ops->step());
      REQUIRE(opt_ops->zero_grad());
      const auto got_eager = step_eager(input, std::span<const std::int64_t>(labels));
      REQUIRE_MESSAGE(got_eager, (got_eager ? "" : got_eager.error().to_string()));
      const auto got_replayed = step_replayed(input, std::span<const std::int64_t>(labels));
      REQUIRE_MESSAGE(got_replayed, (got_replayed ? "" : got_replayed.error().to_string()));
      CHECK(*got_eager == *want);
      CHECK(*got_replayed == *want);
    }
    const auto want = parameter_values(by_ops);
    CHECK(parameter_values(eager) == want);  // the same kernels in the same order: bit for bit
    CHECK(parameter_values(replayed) == want);
  };
  check.operator()<teeny::cuda::Sgd<float>>([](teeny::cuda::CudaModel& model) {
    return teeny::cuda::Sgd<float>::create(model, {.lr = 0.05, .momentum = 0.9});
  });
  check.operator()<teeny::cuda::Adam<float>>(
      [](teeny::cuda::CudaModel& model) { return teeny::cuda::Adam<float>::create(model, {.lr = 0.05}); });
}

TEST_CASE("cuda: cross-entropy and MSE on the GPU give the CPU losses' values and gradients" *
          doctest::test_suite("gpu")) {
  const teeny::Graph graph = built(models::mlp());
  const fixtures::Model fx = fixtures::model("mlp");
  const std::int64_t batch = fx.x.shape()[0];
  auto model = teeny::cuda::load_cuda_for_training(graph, {{"batch", batch}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(input));
  const auto n = static_cast<std::size_t>(fx.logits.numel());
  std::vector<float> logits(n);
  REQUIRE(model->copy_output("logits", std::as_writable_bytes(std::span(logits))));
  const teeny::ConcreteShape shape{batch, static_cast<std::int64_t>(n) / batch};
  const auto grad_on_device = [&] {
    auto binding = model->output_grad("logits");
    REQUIRE(binding);
    std::vector<float> out(n);
    REQUIRE(model->backend().download(out.data(), binding->data, n * sizeof(float)));
    return out;
  };

  // Cross-entropy with label smoothing, a loss scale and an ignored sample, against the CPU's on
  // the same logits: the same double sums of the same terms.
  std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((3 * i + 1) % 10);
  labels[1] = -100;
  const teeny::CrossEntropyOptions options{.label_smoothing = 0.1};
  std::vector<float> cpu_grad(n);
  const auto cpu_loss = teeny::cross_entropy<float>(teeny::TensorView<const float>(logits.data(), shape),
                                                    teeny::TensorView<const std::int64_t>(labels.data(), {batch}),
                                                    teeny::TensorView<float>(cpu_grad.data(), shape), options);
  REQUIRE(cpu_loss);
  teeny::cuda::CrossEntropyLoss<float> cross_entropy(options);
  const auto gpu_loss = cross_entropy(*model, "logits", labels, 8.0);
  REQUIRE_MESSAGE(gpu_loss, (gpu_loss ? "" : gpu_loss.error().to_string()));
  CHECK(std::abs(*gpu_loss - *cpu_loss) <= 1e-12 * std::abs(*cpu_loss));
  const auto gpu_grad = grad_on_device();
  for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(gpu_grad[i] - 8.0F * cpu_grad[i]) <= 1e-6F);

  // A target out of range is refused before anything runs, naming the sample.
  labels[2] = 10;
  const auto refused = cross_entropy(*model, "logits", labels);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("sample 2") != std::string::npos);

  // MSE against a target of the logits' shape.
  std::vector<float> target(n);
  for (std::size_t i = 0; i < n; ++i) target[i] = 0.25F * static_cast<float>(i % 7) - 0.5F;
  const auto cpu_mse = teeny::mse_loss<float>(teeny::TensorView<const float>(logits.data(), shape),
                                              teeny::TensorView<const float>(target.data(), shape),
                                              teeny::TensorView<float>(cpu_grad.data(), shape));
  REQUIRE(cpu_mse);
  teeny::cuda::MseLoss<float> mse;
  const auto gpu_mse = mse(*model, "logits", target);
  REQUIRE_MESSAGE(gpu_mse, (gpu_mse ? "" : gpu_mse.error().to_string()));
  CHECK(std::abs(*gpu_mse - *cpu_mse) <= 1e-12 * std::abs(*cpu_mse));
  const auto mse_grad = grad_on_device();
  for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(mse_grad[i] - cpu_grad[i]) <= 1e-6F);
  std::vector<float> short_target(n - 1);
  CHECK_FALSE(mse(*model, "logits", short_target));
}
#endif
