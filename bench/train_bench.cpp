// teeny's time per training step on the CPU (training builds): forward, cross-entropy, backward,
// AdamW (lr 1e-3, weight decay 1e-2) and zero_grad, for the demo's models at a fixed batch:
//
//   bench-train --model mlp|lenet [--batch 64] [--threads 1] [--seconds 2]
//
// prints one JSON line in tools/bench_peers.py's format, with "mode": "train": the median
// (`p50_us`) and minimum (`min_us`) step time over the timed steps, and the median of each phase
// (`forward_us`, `loss_us`, `backward_us`, `optimizer_us`; zero_grad counts with the optimizer).
// The inputs are U(0, 1) images and uniform labels from a fixed seed; the weights start from
// init_parameters (PyTorch's default initialisation), as the demo's do. bench/train.sh runs it
// side by side with PyTorch (tools/bench_peers.py train-time).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

import teeny;

#include "models.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

int fail(const std::string& model, const teeny::Error& e) {
  std::printf("{\"runtime\": \"teeny\", \"mode\": \"train\", \"model\": \"%s\", \"error\": \"%s\"}\n", model.c_str(),
              e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "mlp";
  std::int64_t batch = 64;
  std::int64_t threads = 1;
  double seconds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view arg = argv[i];
    if (arg == "--model") {
      model_name = argv[i + 1];
    } else if (arg == "--batch") {
      batch = std::atoll(argv[i + 1]);
    } else if (arg == "--threads") {
      threads = std::atoll(argv[i + 1]);
    } else if (arg == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s --model mlp|lenet [--batch B] [--threads N] [--seconds S]\n", argv[0]);
      return 2;
    }
  }
  if ((model_name != "mlp" && model_name != "lenet") || batch < 1 || threads < 1) {
    std::fprintf(stderr, "bench-train: --model is mlp or lenet; --batch and --threads are at least 1\n");
    return 2;
  }

  auto graph = model_name == "mlp" ? models::mlp() : models::lenet();
  if (!graph) return fail(model_name, graph.error());
  auto model = teeny::load_cpu_for_training(*graph, {{"batch", batch}}, {.threads = static_cast<std::size_t>(threads)});
  if (!model) return fail(model_name, model.error());
  if (auto init = teeny::init_parameters(*model, 1); !init) return fail(model_name, init.error());
  auto params = teeny::trainable_parameters<float>(*model);
  if (!params) return fail(model_name, params.error());
  auto optimizer = teeny::AdamW<float>::create(*params, {.lr = 1e-3});
  if (!optimizer) return fail(model_name, optimizer.error());

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> label(0, 9);
  std::vector<float> images(static_cast<std::size_t>(batch) * 28 * 28);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));
  for (float& v : images) v = pixel(rng);
  for (std::int64_t& v : labels) v = label(rng);
  const teeny::TensorRef input[] = {teeny::TensorRef::of<float>("x", images, {batch, 1, 28, 28})};
  const teeny::TensorView<const std::int64_t> targets(labels.data(), {batch});

  std::vector<double> step_us, forward_us, loss_us, backward_us, optimizer_us;
  auto step = [&](bool record) -> teeny::Result<void> {
    const auto t0 = Clock::now();
    if (auto ran = model->forward(input); !ran) return std::move(ran).error();
    const auto t1 = Clock::now();
    auto logits = model->output<float>("logits");
    if (!logits) return std::move(logits).error();
    auto grad = model->output_grad("logits");
    if (!grad) return std::move(grad).error();
    auto loss = teeny::cross_entropy<float>(*logits, targets, *grad->as<float>());
    if (!loss) return std::move(loss).error();
    const auto t2 = Clock::now();
    if (auto back = model->backward(); !back) return std::move(back).error();
    const auto t3 = Clock::now();
    optimizer->step();
    model->zero_grad();
    const auto t4 = Clock::now();
    if (record) {
      step_us.push_back(micros(t0, t4));
      forward_us.push_back(micros(t0, t1));
      loss_us.push_back(micros(t1, t2));
      backward_us.push_back(micros(t2, t3));
      optimizer_us.push_back(micros(t3, t4));
    }
    return {};
  };
  // Warm-up: the first steps grow the thread pool's scratch and bring the weights into cache.
  const auto warm_until = Clock::now() + std::chrono::duration<double>(std::min(0.3, seconds / 4));
  for (int i = 0; i < 5 || Clock::now() < warm_until; ++i) {
    if (auto r = step(false); !r) return fail(model_name, r.error());
  }
  const auto stop_at = Clock::now() + std::chrono::duration<double>(seconds);
  while (step_us.size() < 20 || Clock::now() < stop_at) {
    if (auto r = step(true); !r) return fail(model_name, r.error());
  }
  std::printf(
      "{\"runtime\": \"teeny\", \"mode\": \"train\", \"model\": \"%s\", \"batch\": %lld, \"threads\": %lld, "
      "\"p50_us\": %.2f, \"min_us\": %.2f, \"runs\": %zu, \"forward_us\": %.2f, \"loss_us\": %.2f, "
      "\"backward_us\": %.2f, \"optimizer_us\": %.2f}\n",
      model_name.c_str(), static_cast<long long>(batch), static_cast<long long>(threads), median(step_us),
      *std::min_element(step_us.begin(), step_us.end()), step_us.size(), median(forward_us), median(loss_us),
      median(backward_us), median(optimizer_us));
  return 0;
}
