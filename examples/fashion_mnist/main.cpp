// fashion-mnist: teeny's main demo. Builds a Fashion-MNIST classifier with the builder (named like
// the PyTorch module), loads its PyTorch-trained weights from safetensors, classifies the 10,000
// test images on the CPU and prints the accuracy and the speed, with what it loaded.
//
//   fashion-mnist [--model mlp|lenet] [--weights FILE.safetensors] [--data DIR] [--threads N] [--batch N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>

import teeny;

#include "models.hpp"  // examples/models.hpp

namespace {
struct Options {
  std::string model = "mlp";
  std::string weights;  // default: the weights shipped in examples/fashion_mnist/weights
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::int64_t threads = 1;
  std::int64_t batch = 256;
};

int usage(const char* program, const std::string& problem) {
  std::FILE* out = problem.empty() ? stdout : stderr;
  if (!problem.empty()) std::fprintf(out, "%s: %s\n", program, problem.c_str());
  std::fprintf(out,
               "usage: %s [--model mlp|lenet] [--weights FILE.safetensors] [--data DIR] [--threads N] [--batch N]\n"
               "  --weights  a PyTorch state_dict saved as safetensors (default: the shipped %s weights)\n"
               "  --data     Fashion-MNIST IDX files (default: %s, Debian's dataset-fashion-mnist)\n",
               program, "<model>", "/usr/share/datasets/fashion-mnist");
  return problem.empty() ? 0 : 2;
}

bool parse_count(std::string_view text, std::int64_t& out) {
  char* end = nullptr;
  const std::string copy(text);
  const long long value = std::strtoll(copy.c_str(), &end, 10);
  if (end == copy.c_str() || *end != '\0' || value < 1) return false;
  out = value;
  return true;
}

// PyTorch's accuracy for the shipped weights (written by tools/train_fashion_mnist.py).
std::string pytorch_accuracy(const std::string& model) {
  std::ifstream in(std::string(TEENY_WEIGHTS_DIR) + "/pytorch_accuracy.txt");
  std::string name, percent, count;
  while (in >> name >> percent >> count) {
    if (name == model) return percent + "% (" + count + ")";
  }
  return {};
}

int fail(const teeny::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.to_string().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") return usage(argv[0], "");
    if (!has_value) return usage(argv[0], "missing value after '" + std::string(arg) + "'");
    const std::string_view value = argv[++i];
    if (arg == "--model") {
      opt.model = value;
    } else if (arg == "--weights") {
      opt.weights = value;
    } else if (arg == "--data") {
      opt.data = value;
    } else if (arg == "--threads") {
      if (!parse_count(value, opt.threads)) return usage(argv[0], "--threads takes a positive count");
    } else if (arg == "--batch") {
      if (!parse_count(value, opt.batch)) return usage(argv[0], "--batch takes a positive count");
    } else {
      return usage(argv[0], "unknown argument '" + std::string(arg) + "'");
    }
  }
  if (opt.model != "mlp" && opt.model != "lenet") {
    return usage(argv[0], "unknown model '" + opt.model + "' (choose mlp or lenet)");
  }
  const bool shipped_weights = opt.weights.empty();
  if (shipped_weights) opt.weights = std::string(TEENY_WEIGHTS_DIR) + "/" + opt.model + ".safetensors";

  // 1. The graph, built like the PyTorch module.
  auto graph = opt.model == "mlp" ? models::mlp() : models::lenet();
  if (!graph) return fail(graph.error());
  std::printf("Fashion-MNIST %s, built with teeny's GraphBuilder\n\n%s\n", opt.model.c_str(), graph->summary().c_str());

  // 2. Loaded on the CPU for this batch size, 3. with the PyTorch state_dict (strict: every key).
  auto model = teeny::load_cpu(*graph, {{"batch", opt.batch}}, {.threads = static_cast<std::size_t>(opt.threads)});
  if (!model) return fail(model.error());
  auto file = teeny::SafetensorsFile::open(opt.weights);
  if (!file) return fail(file.error());
  auto report = model->load_weights(*file);
  if (!report) return fail(report.error());
  const teeny::PlanStats stats = model->stats();
  std::printf("weights: %s (%zu tensors)\n", opt.weights.c_str(), report->loaded.size());
  std::printf(
      "plan for batch %lld: %zu kernel steps, %lld parameters (%.2f MB), activation arena %.2f MB "
      "(%.2f MB without reuse), %lld thread(s)\n",
      static_cast<long long>(opt.batch), stats.steps, static_cast<long long>(stats.parameter_count),
      stats.parameter_bytes / 1e6, stats.arena_bytes / 1e6, stats.naive_arena_bytes / 1e6,
      static_cast<long long>(opt.threads));

  // 4. The test images, pixel/255 as in training.
  auto data = teeny::load_fashion_mnist(opt.data, teeny::DatasetSplit::test);
  if (!data) return fail(data.error());
  const std::int64_t n = data->size();
  const auto* images = reinterpret_cast<const std::byte*>(data->images.data());
  const auto* labels = reinterpret_cast<const std::int64_t*>(data->labels.data());
  const std::size_t image_bytes = 28 * 28 * sizeof(float);

  // 5. Classify in batches (the last, smaller batch gets a plan of its own).
  std::int64_t correct = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t first = 0; first < n; first += opt.batch) {
    const std::int64_t count = std::min(opt.batch, n - first);
    const teeny::TensorRef input[] = {
        {"x", teeny::DType::f32, {count, 1, 28, 28}, std::span(images + first * image_bytes, count * image_bytes)}};
    if (auto ran = model->forward(input); !ran) return fail(ran.error());
    auto logits = model->output("logits");
    if (!logits) return fail(logits.error());
    const auto* scores = static_cast<const float*>(logits->data);
    for (std::int64_t i = 0; i < count; ++i) {
      const float* row = scores + i * 10;
      correct += (std::max_element(row, row + 10) - row) == labels[first + i];
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("\ntest accuracy: %.2f%% (%lld/%lld)\n", 100.0 * static_cast<double>(correct) / static_cast<double>(n),
              static_cast<long long>(correct), static_cast<long long>(n));
  if (shipped_weights) std::printf("PyTorch's accuracy with these weights: %s\n", pytorch_accuracy(opt.model).c_str());
  std::printf("speed: %.0f images/s (%.3f s for %lld images, batch %lld)\n", static_cast<double>(n) / seconds, seconds,
              static_cast<long long>(n), static_cast<long long>(opt.batch));
  return 0;
}
