// teeny-run — an ONNX model file in, answers and timings out.
//
//   teeny-run MODEL.onnx [--dims NAME=N ...] [--input NAME=FILE ...] [--save-outputs DIR]
//             [--expect NAME=FILE ...] [--rtol R] [--atol A] [--bench N] [--warmup N]
//             [--threads T] [--device cpu|cuda] [--seed S] [--summary]
//
// It prints the model's inputs and outputs (names, dtypes, dims), its op counts, parameter and
// arena sizes; runs it on the given inputs (NumPy .npy files, or ONNX TensorProto .pb files as
// ONNX's test data stores them) or on seeded random ones; writes each output as DIR/NAME.npy;
// compares with --expect files; and with --bench times N runs (after --warmup ones) and prints
// latency percentiles and throughput. It also prints how long the import and the load took.
// --summary prints the description and runs nothing.
//
// Exit status: 0 done, 1 an error (said on stderr), 2 an output differs from its --expect file.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

import teeny;
import teeny.onnx;

namespace {

using teeny::cat;
using teeny::DType;
using teeny::NamedTensor;
using teeny::Result;
using teeny::Tensor;

constexpr int exit_error = 1;
constexpr int exit_mismatch = 2;

struct Options {
  std::string model;
  std::vector<std::pair<std::string, std::int64_t>> dims;
  std::vector<std::pair<std::string, std::string>> inputs;   // name, file
  std::vector<std::pair<std::string, std::string>> expects;  // name, file
  std::string save_dir;
  double rtol = 1e-3;
  double atol = 1e-5;
  long bench = 0;
  long warmup = 3;
  long threads = 1;
  std::string device = "cpu";
  std::uint64_t seed = 0;
  bool summary = false;
};

constexpr const char* usage_text =
    "usage: teeny-run MODEL.onnx [--dims NAME=N ...] [--input NAME=FILE ...] [--save-outputs DIR]\n"
    "                 [--expect NAME=FILE ...] [--rtol R] [--atol A] [--bench N] [--warmup N]\n"
    "                 [--threads T] [--device cpu|cuda] [--seed S] [--summary]\n"
    "  --dims NAME=N      size of the model's symbolic dim NAME (default: from the inputs, else 1)\n"
    "  --input NAME=FILE  the model input NAME from FILE (.npy, or an ONNX TensorProto .pb);\n"
    "                     inputs not given are random: floats uniform in [-1, 1) from --seed, integers 0\n"
    "  --save-outputs DIR writes each output as DIR/NAME.npy\n"
    "  --expect NAME=FILE compares output NAME with FILE: |got - want| <= atol + rtol * |want|\n"
    "  --rtol R, --atol A the tolerance of --expect (default 1e-3 and 1e-5)\n"
    "  --bench N          times N runs after --warmup runs (default 3): latency p50, p90, p99\n"
    "  --threads T        CPU threads (default 1)\n"
    "  --device cpu|cuda  where the model runs (default cpu)\n"
    "  --summary          prints the model's description and runs nothing\n"
    "exit status: 0 done, 1 an error, 2 an output differs from its --expect file\n";

int usage_error(const std::string& problem) {
  std::fprintf(stderr, "teeny-run: %s\n%s", problem.c_str(), usage_text);
  return exit_error;
}

int fail_with(const teeny::Error& error) {
  std::fprintf(stderr, "teeny-run: %s\n", error.to_string().c_str());
  return exit_error;
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_floating_point_v<T>) {
    out = static_cast<T>(std::strtod(s.c_str(), &end));
  } else {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (v < 0) return false;
    out = static_cast<T>(v);
  }
  return !s.empty() && end == s.c_str() + s.size() && errno == 0;
}

// NAME=VALUE, split at the last '=' (ONNX names may hold '=', file names rarely do).
std::optional<std::pair<std::string, std::string>> split_pair(std::string_view arg) {
  const std::size_t eq = arg.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size()) return std::nullopt;
  return std::pair{std::string(arg.substr(0, eq)), std::string(arg.substr(eq + 1))};
}

// Parses argv into `opt`; an error message, or nothing.
std::optional<std::string> parse_args(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // Options that take NAME=VALUE pairs take every following argument that is one.
    const auto pairs = [&](auto&& add) -> std::optional<std::string> {
      int taken = 0;
      while (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--") &&
             std::string_view(argv[i + 1]).find('=') != std::string_view::npos) {
        auto pair = split_pair(argv[++i]);
        if (!pair) return cat(arg, " takes NAME=VALUE, got '", argv[i], "'");
        if (auto problem = add(std::move(*pair))) return problem;
        ++taken;
      }
      if (taken == 0) return cat(arg, " takes NAME=VALUE");
      return std::nullopt;
    };
    const auto value = [&]() -> std::optional<std::string_view> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string_view(argv[++i]);
    };
    std::optional<std::string> problem;
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    } else if (arg == "--dims") {
      problem = pairs([&](std::pair<std::string, std::string> p) -> std::optional<std::string> {
        std::int64_t n = 0;
        if (!parse_number(p.second, n) || n < 1)
          return cat("--dims ", p.first, "=", p.second, ": N is a positive integer");
        opt.dims.emplace_back(p.first, n);
        return std::nullopt;
      });
    } else if (arg == "--input" || arg == "--expect") {
      auto& list = arg == "--input" ? opt.inputs : opt.expects;
      problem = pairs([&](std::pair<std::string, std::string> p) -> std::optional<std::string> {
        list.push_back(std::move(p));
        return std::nullopt;
      });
    } else if (arg == "--summary") {
      opt.summary = true;
    } else if (arg.starts_with("--")) {
      // The options that take one value, each with what it does with it (false: a bad value).
      const std::pair<std::string_view, std::function<bool(std::string_view)>> options[] = {
          {"--save-outputs", [&](std::string_view v) { return opt.save_dir = v, true; }},
          {"--rtol", [&](std::string_view v) { return parse_number(v, opt.rtol) && opt.rtol >= 0; }},
          {"--atol", [&](std::string_view v) { return parse_number(v, opt.atol) && opt.atol >= 0; }},
          {"--bench", [&](std::string_view v) { return parse_number(v, opt.bench); }},
          {"--warmup", [&](std::string_view v) { return parse_number(v, opt.warmup); }},
          {"--threads", [&](std::string_view v) { return parse_number(v, opt.threads) && opt.threads >= 1; }},
          {"--seed", [&](std::string_view v) { return parse_number(v, opt.seed); }},
          {"--device", [&](std::string_view v) { return opt.device = v, opt.device == "cpu" || opt.device == "cuda"; }},
      };
      const auto* option = std::ranges::find(options, arg, [](const auto& o) { return o.first; });
      if (option == std::end(options)) return cat("unknown option ", arg);
      const auto v = value();
      if (!v) return cat("missing value after ", arg);
      if (!option->second(*v)) return cat("bad value '", *v, "' for ", arg);
    } else if (opt.model.empty()) {
      opt.model = arg;
    } else {
      return cat("a second model file '", arg, "' (give one)");
    }
    if (problem) return problem;
  }
  if (opt.model.empty()) return "no model file given";
  return std::nullopt;
}

// A tensor from a .npy or an ONNX TensorProto .pb file.
Result<Tensor> read_tensor(const std::string& path) {
  if (path.ends_with(".npy")) return teeny::read_npy(path);
  if (path.ends_with(".pb")) {
    auto named = teeny::onnx::read_tensor_file(path);
    if (!named) return std::move(named).error();
    return std::move(named->tensor);
  }
  return teeny::fail(teeny::Errc::invalid_argument, "'", path,
                     "': a tensor file is a NumPy .npy or an ONNX TensorProto .pb (by its extension)");
}

double element(const Tensor& t, std::int64_t i) {
  return teeny::visit_dtype(t.dtype(), [&]<class T>(std::type_identity<T>) {
    return teeny::convert_element<double>(reinterpret_cast<const T*>(t.data())[i]);
  });
}

// Random floats uniform in [-1, 1), integers and booleans 0.
Result<Tensor> random_tensor(DType dtype, const teeny::ConcreteShape& shape, std::mt19937_64& rng) {
  auto t = Tensor::zeros(dtype, shape);
  if (!t || !teeny::is_floating(dtype)) return t;
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  teeny::visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    T* p = reinterpret_cast<T*>(t->data());
    for (std::int64_t i = 0; i < t->numel(); ++i) p[i] = teeny::convert_element<T>(uniform(rng));
  });
  return t;
}

std::string multi_index(const teeny::ConcreteShape& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(shape.rank());
  for (std::size_t k = shape.rank(); k-- > 0;) {
    index[k] = flat % shape[k];
    flat /= shape[k];
  }
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) s += cat(k ? ", " : "", index[k]);
  return s + "]";
}

std::string bytes_text(std::size_t bytes) {
  char buf[32];
  if (bytes < 1024) return cat(bytes, " B");
  std::snprintf(buf, sizeof buf, bytes < (1u << 20) ? "%.1f KiB" : "%.1f MiB",
                static_cast<double>(bytes) / (bytes < (1u << 20) ? 1024.0 : 1048576.0));
  return buf;
}

// Every output compared with its --expect file; prints each verdict. False on any mismatch.
bool check_expected(const Options& opt, const std::vector<NamedTensor>& outputs,
                    const std::vector<std::pair<std::string, Tensor>>& expected) {
  bool all = true;
  for (const auto& [name, want] : expected) {
    const auto it = std::ranges::find(outputs, name, &NamedTensor::name);
    const Tensor& got = it->tensor;
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
      std::printf("expect %s: MISMATCH: the output is %s %s, the file holds %s %s\n", name.c_str(),
                  std::string(teeny::name(got.dtype())).c_str(), teeny::to_string(got.shape()).c_str(),
                  std::string(teeny::name(want.dtype())).c_str(), teeny::to_string(want.shape()).c_str());
      all = false;
      continue;
    }
    std::int64_t bad = 0;
    std::int64_t worst = -1;
    double worst_excess = 0;
    double max_diff = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      const double g = element(got, i);
      const double w = element(want, i);
      if (std::isnan(g) && std::isnan(w)) continue;
      if (std::isinf(w) && g == w) continue;
      const double diff = std::abs(g - w);
      if (!(diff <= max_diff)) max_diff = std::isnan(diff) ? INFINITY : diff;
      const double excess = diff - (opt.atol + opt.rtol * std::abs(w));
      if (!(excess <= 0)) {
        ++bad;
        if (worst < 0 || !(excess <= worst_excess)) {
          worst = i;
          worst_excess = std::isnan(excess) ? INFINITY : excess;
        }
      }
    }
    if (bad == 0) {
      std::printf("expect %s: ok (%lld values, max |got - want| %.3g; atol %g, rtol %g)\n", name.c_str(),
                  static_cast<long long>(want.numel()), max_diff, opt.atol, opt.rtol);
    } else {
      std::printf(
          "expect %s: MISMATCH: %lld of %lld values differ; worst at %s: got %.9g, want %.9g (atol %g, rtol %g)\n",
          name.c_str(), static_cast<long long>(bad), static_cast<long long>(want.numel()),
          multi_index(want.shape(), worst).c_str(), element(got, worst), element(want, worst), opt.atol, opt.rtol);
      all = false;
    }
  }
  return all;
}

// Output files are named after the outputs; characters a path cannot hold become '_'.
std::string file_name(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == '\\' || c == '\0') c = '_';
  }
  if (name == "." || name == "..") name = "_" + name;
  return name + ".npy";
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A latency in milliseconds, in microseconds below 1 ms.
std::string duration_text(double ms) {
  char buf[32];
  if (ms < 1) {
    std::snprintf(buf, sizeof buf, "%.1f us", ms * 1000);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  }
  return buf;
}

double percentile(std::vector<double> sorted, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

// Runs the loaded model: forward, outputs, --save-outputs, --expect, --bench.
template <class Model>
int run_model(Model& model, const Options& opt, const std::vector<NamedTensor>& inputs,
              const std::vector<std::pair<std::string, Tensor>>& expected) {
  const teeny::PlanStats stats = model.stats();
  std::printf("plan: %zu kernel launches, activation arena %s (%s without reuse), parameters %s (%lld values)\n",
              stats.steps, bytes_text(stats.arena_bytes).c_str(), bytes_text(stats.naive_arena_bytes).c_str(),
              bytes_text(stats.parameter_bytes).c_str(), static_cast<long long>(stats.parameter_count));
  if (opt.summary) return 0;

  std::vector<teeny::TensorRef> refs;
  for (const NamedTensor& in : inputs) refs.push_back(teeny::TensorRef::of(in));
  std::vector<NamedTensor> copies;
  for (const NamedTensor& in : inputs) {
    auto t = Tensor::zeros(in.tensor.dtype(), in.tensor.shape());
    if (!t) return fail_with(t.error());
    if (in.tensor.bytes() != 0) std::memcpy(t->data(), in.tensor.data(), in.tensor.bytes());
    copies.push_back({in.name, std::move(*t)});
  }
  auto outputs = model.forward(std::move(copies));
  if (!outputs) return fail_with(std::move(outputs).error().context("run"));
  for (const NamedTensor& out : *outputs) {
    double lo = INFINITY;
    double hi = -INFINITY;
    double sum = 0;
    std::int64_t non_finite = 0;
    for (std::int64_t i = 0; i < out.tensor.numel(); ++i) {
      const double v = element(out.tensor, i);
      if (!std::isfinite(v)) {
        ++non_finite;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    const std::int64_t finite = out.tensor.numel() - non_finite;
    std::printf("output %s: %s %s", out.name.c_str(), std::string(teeny::name(out.tensor.dtype())).c_str(),
                teeny::to_string(out.tensor.shape()).c_str());
    if (finite > 0) std::printf("  min %.6g  max %.6g  mean %.6g", lo, hi, sum / static_cast<double>(finite));
    if (non_finite > 0) std::printf("  (%lld NaN or infinite)", static_cast<long long>(non_finite));
    std::printf("\n");
  }

  if (!opt.save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.save_dir, ec);
    if (ec) {
      return fail_with(teeny::fail(teeny::Errc::io, "cannot create the folder '", opt.save_dir, "': ", ec.message()));
    }
    for (const NamedTensor& out : *outputs) {
      const std::string path = (std::filesystem::path(opt.save_dir) / file_name(out.name)).string();
      if (auto saved = teeny::save_npy(path, teeny::TensorRef::of(out)); !saved) return fail_with(saved.error());
      std::printf("saved %s\n", path.c_str());
    }
  }

  const bool matched = check_expected(opt, *outputs, expected);

  if (opt.bench > 0) {
    for (long i = 0; i < opt.warmup; ++i) {
      if (auto ran = model.forward(std::span<const teeny::TensorRef>(refs)); !ran) return fail_with(ran.error());
    }
    std::vector<double> ms;
    ms.reserve(static_cast<std::size_t>(opt.bench));
    for (long i = 0; i < opt.bench; ++i) {
      const Clock::time_point start = Clock::now();
      if (auto ran = model.forward(std::span<const teeny::TensorRef>(refs)); !ran) return fail_with(ran.error());
      ms.push_back(ms_since(start));
    }
    std::ranges::sort(ms);
    double total = 0;
    for (double m : ms) total += m;
    std::printf(
        "bench: %ld runs (after %ld warm-up), %ld thread(s) on %s: latency p50 %s, p90 %s, p99 %s, min %s; "
        "throughput %.1f runs/s\n",
        opt.bench, opt.warmup, opt.threads, opt.device.c_str(), duration_text(percentile(ms, 50)).c_str(),
        duration_text(percentile(ms, 90)).c_str(), duration_text(percentile(ms, 99)).c_str(),
        duration_text(ms.front()).c_str(), 1000.0 * static_cast<double>(ms.size()) / total);
  }
  return matched ? 0 : exit_mismatch;
}

// `import_ms`: how long the import took, printed with the load's time (the two together are what
// ONNX Runtime's session creation does).
template <class T>
int load_and_run(const teeny::onnx::ImportedModel& imported, const teeny::Bindings& dims, const Options& opt,
                 const std::vector<NamedTensor>& inputs, const std::vector<std::pair<std::string, Tensor>>& expected,
                 double import_ms) {
  const Clock::time_point load_start = Clock::now();
  auto params = imported.params();
  if (!params) return fail_with(params.error());
  const auto finish = [&](auto model) -> int {
    if (!model) return fail_with(std::move(model).error().context("load"));
    const double load_ms = ms_since(load_start);
    std::printf("time: import %s, load %s (plan and weights), together %s\n", duration_text(import_ms).c_str(),
                duration_text(load_ms).c_str(), duration_text(import_ms + load_ms).c_str());
    return run_model(*model, opt, inputs, expected);
  };
  if (opt.device == "cuda") {
#if TEENY_HAS_CUDA
    auto model = teeny::cuda::load_cuda<T>(imported.graph, dims);
    if (model) {
      if (auto loaded = model->load_weights(*params); !loaded) return fail_with(loaded.error());
    }
    return finish(std::move(model));
#else
    // Without CUDA load_cuda only fails, and running its model would compile that model here (the
    // library instantiates it only in CUDA builds): five minutes of the sanitized builds.
    return fail_with(teeny::cuda::not_compiled_in("--device cuda"));
#endif
  }
  teeny::CpuOptions cpu;
  cpu.threads = static_cast<std::size_t>(opt.threads);
  return finish(teeny::load_cpu<T>(imported.graph, dims, cpu, &*params));  // weights packed once
}

void describe(const teeny::onnx::ImportedModel& m, const Options& opt) {
  std::printf("model %s", opt.model.c_str());
  if (!m.producer.empty()) std::printf(" (from %s", m.producer.c_str());
  std::printf("%sIR %lld, opset", m.producer.empty() ? " (" : "; ", static_cast<long long>(m.ir_version));
  for (const auto& [domain, version] : m.opsets) {
    std::printf(" %s%lld", domain.empty() ? "" : (domain + " ").c_str(), static_cast<long long>(version));
  }
  std::printf(")\n");
  for (const auto& in : m.inputs) {
    std::printf("input  %s: %s %s\n", in.name.c_str(), std::string(teeny::name(in.dtype)).c_str(),
                teeny::to_string(in.shape).c_str());
  }
  for (const auto& out : m.outputs) {
    std::printf("output %s: %s %s\n", out.name.c_str(), std::string(teeny::name(out.dtype)).c_str(),
                teeny::to_string(out.shape).c_str());
  }
  std::map<std::string, int> ops;
  for (teeny::NodeId id = 0; id < m.graph.size(); ++id) ++ops[std::string(teeny::kind(m.graph.op(id)))];
  ops.erase("input");
  std::string counts;
  for (const auto& [op, n] : ops) counts += cat(counts.empty() ? "" : ", ", op, " ", n);
  std::printf("ops: %s\n", counts.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (auto problem = parse_args(argc, argv, opt)) return usage_error(*problem);

  const Clock::time_point import_start = Clock::now();
  auto imported = teeny::onnx::import_model(opt.model);
  if (!imported) return fail_with(imported.error());
  const double import_ms = ms_since(import_start);

  const auto input_names = [&] {
    std::string s;
    for (const auto& in : imported->inputs) s += cat(s.empty() ? "" : ", ", in.name);
    return s;
  };
  const auto output_names = [&] {
    std::string s;
    for (const auto& out : imported->outputs) s += cat(s.empty() ? "" : ", ", out.name);
    return s;
  };

  // The dims: --dims first, then what the input files' shapes say, then 1 for the rest.
  teeny::Bindings dims;
  std::vector<std::string> symbols;
  for (const auto& in : imported->inputs) {
    for (const std::string& s : in.shape.symbols()) {
      if (std::ranges::find(symbols, s) == symbols.end()) symbols.push_back(s);
    }
  }
  for (const auto& [name, n] : opt.dims) {
    if (std::ranges::find(symbols, name) == symbols.end()) {
      std::string known;
      for (const std::string& s : symbols) known += cat(known.empty() ? "" : ", ", s);
      return usage_error(
          cat("--dims ", name, ": the model has no dim '", name, "' (its dims: ", known.empty() ? "none" : known, ")"));
    }
    dims[name] = n;
  }
  std::map<std::string, Tensor> given;
  for (const auto& [name, file] : opt.inputs) {
    const auto in = std::ranges::find(imported->inputs, name, &teeny::onnx::ValueDesc::name);
    if (in == imported->inputs.end()) {
      return usage_error(
          cat("--input ", name, ": the model has no input '", name, "' (its inputs: ", input_names(), ")"));
    }
    auto tensor = read_tensor(file);
    if (!tensor) return fail_with(std::move(tensor).error().context(cat("input '", name, "'")));
    if (tensor->dtype() != in->dtype) {
      return fail_with(teeny::fail(teeny::Errc::dtype_mismatch, "input '", name, "': the model takes ", in->dtype,
                                   ", '", file, "' holds ", tensor->dtype(), " (convert it, e.g. numpy's astype)"));
    }
    if (auto matched = teeny::match_shape(in->shape, tensor->shape(), dims); !matched) {
      return fail_with(std::move(matched).error().context(cat("input '", name, "' from '", file, "'")));
    }
    given.insert_or_assign(name, std::move(*tensor));
  }
  for (const std::string& s : symbols) {
    if (!dims.contains(s)) {
      dims[s] = 1;
      std::printf("dim %s: 1 (not given; set it with --dims %s=N)\n", s.c_str(), s.c_str());
    }
  }

  std::vector<std::pair<std::string, Tensor>> expected;
  for (const auto& [name, file] : opt.expects) {
    if (std::ranges::find(imported->outputs, name, &teeny::onnx::ValueDesc::name) == imported->outputs.end()) {
      return usage_error(
          cat("--expect ", name, ": the model has no output '", name, "' (its outputs: ", output_names(), ")"));
    }
    auto tensor = read_tensor(file);
    if (!tensor) return fail_with(std::move(tensor).error().context(cat("expected output '", name, "'")));
    expected.emplace_back(name, std::move(*tensor));
  }

  describe(*imported, opt);

  std::mt19937_64 rng(opt.seed);
  std::vector<NamedTensor> inputs;
  for (const auto& in : imported->inputs) {
    if (auto it = given.find(in.name); it != given.end()) {
      inputs.push_back({in.name, std::move(it->second)});
      continue;
    }
    auto shape = in.shape.bind(dims);
    if (!shape) return fail_with(std::move(shape).error().context(cat("input '", in.name, "'")));
    auto tensor = random_tensor(in.dtype, *shape, rng);
    if (!tensor) return fail_with(tensor.error());
    inputs.push_back({in.name, std::move(*tensor)});
  }

  // A model whose float inputs are all f64 computes in f64 (teeny's f64 lowering), else in f32.
  bool f64 = false;
  bool f32 = false;
  for (const auto& in : imported->inputs) {
    f64 = f64 || in.dtype == DType::f64;
    f32 = f32 || in.dtype == DType::f32;
  }
  return f64 && !f32 ? load_and_run<double>(*imported, dims, opt, inputs, expected, import_ms)
                     : load_and_run<float>(*imported, dims, opt, inputs, expected, import_ms);
}
