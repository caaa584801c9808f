// fashion-mnist: teeny's main demo. Builds a Fashion-MNIST classifier with the builder (named like
// the PyTorch module), loads its PyTorch-trained weights from safetensors, classifies the 10,000
// test images on the CPU and prints the accuracy and the speed, with what it loaded. In a training
// build (-Dtraining=true) it can train the model first, on the 60,000 training images:
//
//   fashion-mnist [--model mlp|lenet] [--weights FILE.safetensors] [--data DIR] [--threads N] [--batch N]
//   fashion-mnist --train EPOCHS [--optimizer adamw|sgd] [--lr X] [--seed N] --save FILE.safetensors
//                 [--schedule cosine|constant] [--model ...] [--data DIR] [--threads N] [--batch N]
//
// Training shows a progress bar, evaluates on the test images after every epoch, writes the
// learning curve as FILE.csv and FILE.svg beside the weights, saves the weights (a PyTorch
// state_dict), then reloads them into an inference model and classifies the test images with it.
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
#include <vector>

// The modules the demo uses (`import teeny;` gives every module; importing just these lets the
// demo's build skip the others).
import teeny.core;
import teeny.graph;
import teeny.io;
import teeny.runtime;
#if TEENY_TRAINING
import teeny.train;
#endif

#include "curve.hpp"
#include "models.hpp"  // examples/models.hpp
#include "progress.hpp"

namespace {
struct Options {
  std::string model = "mlp";
  std::string weights;  // default: the weights shipped in examples/fashion_mnist/weights
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::int64_t threads = 1;
  std::int64_t batch = 0;  // default: 256 to classify, 64 to train
  // Training (training builds): epochs (0: no training), optimizer, learning rate, seed, output.
  std::int64_t epochs = 0;
  std::string optimizer = "adamw";
  double lr = 0;                    // default: 1e-3 for AdamW, 0.05 for SGD
  std::string schedule = "cosine";  // the lr over all steps: cosine annealing to 0, or constant
  std::int64_t seed = 1;
  std::string save;
};

int usage(const char* program, const std::string& problem) {
  std::FILE* out = problem.empty() ? stdout : stderr;
  if (!problem.empty()) std::fprintf(out, "%s: %s\n", program, problem.c_str());
  std::fprintf(out,
               "usage: %s [--model mlp|lenet] [--weights FILE.safetensors] [--data DIR] [--threads N] [--batch N]\n"
               "       %s --train EPOCHS --save FILE.safetensors [--optimizer adamw|sgd] [--lr X] [--schedule "
               "cosine|constant] [--seed N] ...\n"
               "  --weights    a PyTorch state_dict saved as safetensors (default: the shipped <model> weights)\n"
               "  --data       Fashion-MNIST IDX files (default: %s, Debian's dataset-fashion-mnist)\n"
               "  --batch      images per batch (default: 256 to classify, 64 to train)\n"
               "  --train      train the model from scratch for EPOCHS epochs first (training builds)\n"
               "  --optimizer  adamw (default; lr 1e-3 for mlp, 3e-3 for lenet; weight decay 1e-2) or sgd (lr 0.05,\n"
               "               momentum 0.9)\n"
               "  --schedule   cosine (default: the lr anneals to 0 over all steps) or constant\n"
               "  --save       where the trained weights go; the learning curve goes beside them as .csv and .svg\n",
               program, program, "/usr/share/datasets/fashion-mnist");
  return problem.empty() ? 0 : 2;
}

bool parse_number(std::string_view text, double& out) {
  char* end = nullptr;
  const std::string copy(text);
  const double value = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0' || !(value > 0)) return false;
  out = value;
  return true;
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

struct Evaluation {
  std::int64_t correct = 0;
  double loss = 0;  // mean cross-entropy
};

// Runs `data` through `model` in batches of `batch` (a smaller last batch gets its own plan) and
// counts the correct top-1 predictions; with `with_loss`, the mean cross-entropy too.
template <class M>
teeny::Result<Evaluation> evaluate(M& model, const teeny::Dataset& data, std::int64_t batch, bool with_loss) {
  const std::int64_t n = data.size();
  auto images = data.images.view<float>();
  auto labels = data.labels.view<std::int64_t>();
  if (!images) return std::move(images).error();
  if (!labels) return std::move(labels).error();
  constexpr std::size_t pixels = 28 * 28;
  Evaluation result;
  for (std::int64_t first = 0; first < n; first += batch) {
    const std::int64_t count = std::min(batch, n - first);
    const auto batch_pixels =
        images->span().subspan(static_cast<std::size_t>(first) * pixels, static_cast<std::size_t>(count) * pixels);
    const teeny::TensorRef input[] = {teeny::TensorRef::of<float>("x", batch_pixels, {count, 1, 28, 28})};
    if (auto ran = model.forward(input); !ran) return std::move(ran).error();
    auto logits = model.template output<float>("logits");  // [count, 10]
    if (!logits) return std::move(logits).error();
    for (std::int64_t i = 0; i < count; ++i) {
      const float* row = &(*logits)(i, 0);
      result.correct += (std::max_element(row, row + 10) - row) == (*labels)(first + i);
    }
#if TEENY_TRAINING
    if (with_loss) {
      const teeny::TensorView<const std::int64_t> targets(&(*labels)(first), {count});
      auto loss = teeny::cross_entropy<float>(*logits, targets);
      if (!loss) return std::move(loss).error();
      result.loss += *loss * static_cast<double>(count);
    }
#endif
  }
  if (with_loss) result.loss /= static_cast<double>(n);
  return result;
}

#if TEENY_TRAINING
std::string with_extension(const std::string& path, const std::string& extension) {
  const std::size_t dot = path.rfind('.');
  const std::size_t slash = path.rfind('/');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_extension ? path.substr(0, dot) : path) + extension;
}

// Trains `graph` from PyTorch's default initialisation on the training images and saves the
// weights to opt.save; 0 on success, else the exit status.
int train(const Options& opt, const teeny::Graph& graph, const teeny::Dataset& train_set,
          const teeny::Dataset& test_set) {
  auto model =
      teeny::load_cpu_for_training(graph, {{"batch", opt.batch}}, {.threads = static_cast<std::size_t>(opt.threads)});
  if (!model) return fail(model.error());
  if (auto init = teeny::init_parameters(*model, static_cast<std::uint64_t>(opt.seed)); !init)
    return fail(init.error());
  model->set_seed(static_cast<std::uint64_t>(opt.seed));
  auto params = teeny::trainable_parameters<float>(*model);
  if (!params) return fail(params.error());
  auto sampler = teeny::BatchSampler::create(train_set.size(), opt.batch, static_cast<std::uint64_t>(opt.seed));
  if (!sampler) return fail(sampler.error());

  const bool sgd = opt.optimizer == "sgd";
  // Defaults measured for 3 epochs with the cosine schedule: the MLP 88.2%, the LeNet 89.2%.
  const double adamw_lr = opt.model == "lenet" ? 3e-3 : 1e-3;
  const double lr = opt.lr > 0 ? opt.lr : (sgd ? 0.05 : adamw_lr);
  std::printf("\ntraining %lld epoch(s): %s lr %g (%s), batch %lld, seed %lld, %lld thread(s)\n",
              static_cast<long long>(opt.epochs), sgd ? "SGD (momentum 0.9)" : "AdamW (weight decay 1e-2)", lr,
              opt.schedule.c_str(), static_cast<long long>(opt.batch), static_cast<long long>(opt.seed),
              static_cast<long long>(opt.threads));
  // One loop for either optimizer type.
  auto run = [&](auto& optimizer) -> int {
    const std::size_t image_bytes = 28 * 28 * sizeof(float);
    std::vector<float> images(static_cast<std::size_t>(opt.batch) * 28 * 28);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(opt.batch));
    const auto source_images = std::span(train_set.images.data(), train_set.images.bytes());
    const auto source_labels = std::span(train_set.labels.data(), train_set.labels.bytes());
    std::vector<demo::EpochRecord> history;
    demo::ProgressBar progress;
    const auto epochs = static_cast<int>(opt.epochs);
    const teeny::CosineAnnealingLR cosine{.t_max = opt.epochs * sampler->n_batches()};
    std::int64_t global_step = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      model->set_training(true);
      sampler->set_epoch(static_cast<std::uint64_t>(epoch - 1));
      progress.start_epoch();
      const auto start = std::chrono::steady_clock::now();
      double loss_sum = 0;
      std::int64_t correct = 0;
      std::int64_t seen = 0;
      std::int64_t step = 0;
      for (std::span<const std::int64_t> batch : sampler->batches()) {
        const auto count = static_cast<std::int64_t>(batch.size());
        if (auto r = teeny::gather_rows(source_images, image_bytes, batch, std::as_writable_bytes(std::span(images)));
            !r) {
          return fail(r.error());
        }
        if (auto r = teeny::gather_rows(source_labels, sizeof(std::int64_t), batch,
                                        std::as_writable_bytes(std::span(labels)));
            !r) {
          return fail(r.error());
        }
        const teeny::TensorRef input[] = {
            teeny::TensorRef::of<float>("x", std::span(images).first(count * 28 * 28), {count, 1, 28, 28})};
        if (auto ran = model->forward(input); !ran) return fail(ran.error());
        auto logits = model->output<float>("logits");
        if (!logits) return fail(logits.error());
        auto grad = model->output_grad("logits");
        if (!grad) return fail(grad.error());
        const teeny::TensorView<const std::int64_t> targets(labels.data(), {count});
        auto loss = teeny::cross_entropy<float>(*logits, targets, *grad->as<float>());
        if (!loss) return fail(loss.error());
        if (auto back = model->backward(); !back) return fail(back.error());
        if (opt.schedule == "cosine") {
          if (auto r = cosine.apply(optimizer, global_step); !r) return fail(r.error());
        }
        ++global_step;
        optimizer.step();
        model->zero_grad();
        loss_sum += *loss * static_cast<double>(count);
        correct += teeny::argmax_accuracy<float>(*logits, targets).value_or(0);
        seen += count;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress.update(epoch, epochs, ++step, sampler->n_batches(), loss_sum / static_cast<double>(seen),
                        static_cast<double>(correct) / static_cast<double>(seen),
                        static_cast<double>(seen) / std::max(seconds, 1e-9));
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      model->set_training(false);
      auto tested = evaluate(*model, test_set, opt.batch, true);
      if (!tested) return fail(tested.error());
      const double test_accuracy = static_cast<double>(tested->correct) / static_cast<double>(test_set.size());
      history.push_back({epoch, loss_sum / static_cast<double>(seen),
                         static_cast<double>(correct) / static_cast<double>(seen), tested->loss, test_accuracy,
                         seconds});
      char summary[96];
      std::snprintf(summary, sizeof summary, "test loss %.4f  acc %.2f%%", tested->loss, 100.0 * test_accuracy);
      progress.finish_epoch(summary);
    }
    const std::string csv = with_extension(opt.save, ".csv");
    const std::string svg = with_extension(opt.save, ".svg");
    if (auto error = demo::write_csv(csv, history); !error.empty()) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return 1;
    }
    const std::string title = "Fashion-MNIST " + opt.model + ", teeny, " + (sgd ? "SGD" : "AdamW");
    if (auto error = demo::write_svg(svg, history, title); !error.empty()) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return 1;
    }
    if (auto saved = model->save_weights(opt.save); !saved) return fail(saved.error());
    std::printf("learning curve: %s, %s\nweights: %s\n", csv.c_str(), svg.c_str(), opt.save.c_str());
    return 0;
  };
  if (sgd) {
    auto optimizer = teeny::Sgd<float>::create(*params, {.lr = lr, .momentum = 0.9});
    if (!optimizer) return fail(optimizer.error());
    return run(*optimizer);
  }
  auto optimizer = teeny::AdamW<float>::create(*params, {.lr = lr});
  if (!optimizer) return fail(optimizer.error());
  return run(*optimizer);
}
#endif
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
    } else if (arg == "--train") {
      if (!parse_count(value, opt.epochs)) return usage(argv[0], "--train takes a positive number of epochs");
    } else if (arg == "--optimizer") {
      opt.optimizer = value;
      if (opt.optimizer != "adamw" && opt.optimizer != "sgd") return usage(argv[0], "--optimizer is adamw or sgd");
    } else if (arg == "--schedule") {
      opt.schedule = value;
      if (opt.schedule != "cosine" && opt.schedule != "constant") {
        return usage(argv[0], "--schedule is cosine or constant");
      }
    } else if (arg == "--lr") {
      if (!parse_number(value, opt.lr)) return usage(argv[0], "--lr takes a positive number");
    } else if (arg == "--seed") {
      if (!parse_count(value, opt.seed)) return usage(argv[0], "--seed takes a positive integer");
    } else if (arg == "--save") {
      opt.save = value;
    } else {
      return usage(argv[0], "unknown argument '" + std::string(arg) + "'");
    }
  }
  if (opt.model != "mlp" && opt.model != "lenet") {
    return usage(argv[0], "unknown model '" + opt.model + "' (choose mlp or lenet)");
  }
  const bool training = opt.epochs > 0;
  if (opt.batch == 0) opt.batch = training ? 64 : 256;
#if TEENY_TRAINING
  if (training && opt.save.empty()) return usage(argv[0], "--train needs --save FILE.safetensors");
  if (training && !opt.weights.empty()) return usage(argv[0], "--train starts from scratch: drop --weights");
  if (training) opt.weights = opt.save;
#else
  if (training) {
    return usage(argv[0], "--train needs a training build (configure with -Dtraining=true: tools/demo.sh does)");
  }
#endif
  const bool shipped_weights = opt.weights.empty();
  if (shipped_weights) opt.weights = std::string(TEENY_WEIGHTS_DIR) + "/" + opt.model + ".safetensors";

  // 1. The graph, built like the PyTorch module.
  auto graph = opt.model == "mlp" ? models::mlp() : models::lenet();
  if (!graph) return fail(graph.error());
  std::printf("Fashion-MNIST %s, built with teeny's GraphBuilder\n\n%s\n", opt.model.c_str(), graph->summary().c_str());

  // The test images (pixel / 255, as in training), and the training images when training.
  auto data = teeny::load_fashion_mnist(opt.data, teeny::DatasetSplit::test);
  if (!data) return fail(data.error());
#if TEENY_TRAINING
  if (training) {
    auto train_set = teeny::load_fashion_mnist(opt.data, teeny::DatasetSplit::train);
    if (!train_set) return fail(train_set.error());
    if (const int status = train(opt, *graph, *train_set, *data); status != 0) return status;
    std::printf("\nreloading %s into an inference model\n", opt.save.c_str());
  }
#endif

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

  // 4. Classify the test images in batches (the last, smaller batch gets a plan of its own).
  const std::int64_t n = data->size();
  const auto start = std::chrono::steady_clock::now();
  auto evaluation = evaluate(*model, *data, opt.batch, false);
  if (!evaluation) return fail(evaluation.error());
  const std::int64_t correct = evaluation->correct;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("\ntest accuracy: %.2f%% (%lld/%lld)\n", 100.0 * static_cast<double>(correct) / static_cast<double>(n),
              static_cast<long long>(correct), static_cast<long long>(n));
  if (shipped_weights) std::printf("PyTorch's accuracy with these weights: %s\n", pytorch_accuracy(opt.model).c_str());
  std::printf("speed: %.0f images/s (%.3f s for %lld images, batch %lld)\n", static_cast<double>(n) / seconds, seconds,
              static_cast<long long>(n), static_cast<long long>(opt.batch));
  return 0;
}
