// The ONNX backend test data as teeny's conformance suite: each case's model imported, loaded on
// the CPU, run on each of its test_data_sets and compared with ONNX's expected outputs at ONNX's
// tolerance (rtol 1e-3, atol 1e-7; dtype and shape must match).
//
//   teeny-onnx-conformance DATA_DIR [--report FILE.md] [--only CASE] [--verbose]
//
// DATA_DIR holds suites of cases (Debian's libonnx-testdata: /usr/share/libonnx-testdata/data).
// A case passes, is unsupported (an import, load or run error: allowed, reported with its reason)
// or is wrong (it ran and an output differs). Exit 1 on any wrong answer, 77 when DATA_DIR is
// missing (meson's skip). A crash is a crash: the test fails.
//
// A case whose model takes its weights as graph inputs (ONNX's operator tests do: Conv's W is an
// input) is imported a second time with the inputs after the first bound as constants, which is
// how teeny takes weights.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "onnx/proto.hpp"

import teeny;
import teeny.onnx;

namespace fs = std::filesystem;
using teeny::Result;

namespace {

enum class Outcome { pass, unsupported, wrong };

struct CaseResult {
  std::string suite;
  std::string name;
  Outcome outcome = Outcome::unsupported;
  std::string reason;  // why not a pass (its first line)
};

// An error as one line of the report: the case's folder left out of paths, lines joined.
std::string compact(std::string s, const fs::path& dir) {
  const std::string folder = dir.string() + "/";
  for (std::size_t at = s.find(folder); at != std::string::npos; at = s.find(folder)) s.erase(at, folder.size());
  std::string line;
  for (const char c : s) {
    const char d = c == '\n' ? ' ' : c;
    if (d != ' ' || line.empty() || line.back() != ' ') line += d;
  }
  if (line.size() > 240) line = line.substr(0, 237) + "...";
  return line;
}

// A file's tensors in order: input_0.pb, input_1.pb, ... (or output_*).
Result<std::vector<teeny::NamedTensor>> read_set(const fs::path& dir, const std::string& prefix) {
  std::vector<teeny::NamedTensor> out;
  for (int i = 0;; ++i) {
    const fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    auto t = teeny::onnx::read_tensor_file(p.string());
    if (!t) return std::move(t).error();
    out.push_back(std::move(*t));
  }
  return out;
}

double element(const teeny::Tensor& t, std::int64_t i) {
  const std::byte* p = t.data();
  switch (t.dtype()) {
    case teeny::DType::f32: return reinterpret_cast<const float*>(p)[i];
    case teeny::DType::f64: return reinterpret_cast<const double*>(p)[i];
    case teeny::DType::i64: return static_cast<double>(reinterpret_cast<const std::int64_t*>(p)[i]);
    case teeny::DType::i32: return reinterpret_cast<const std::int32_t*>(p)[i];
    case teeny::DType::i16: return reinterpret_cast<const std::int16_t*>(p)[i];
    case teeny::DType::i8: return reinterpret_cast<const std::int8_t*>(p)[i];
    case teeny::DType::u8:
    case teeny::DType::boolean: return reinterpret_cast<const std::uint8_t*>(p)[i];
    case teeny::DType::u16: return reinterpret_cast<const std::uint16_t*>(p)[i];
    case teeny::DType::u32: return reinterpret_cast<const std::uint32_t*>(p)[i];
    case teeny::DType::u64: return static_cast<double>(reinterpret_cast<const std::uint64_t*>(p)[i]);
    case teeny::DType::f16: return static_cast<double>(static_cast<float>(reinterpret_cast<const teeny::f16*>(p)[i]));
    case teeny::DType::bf16: return static_cast<double>(static_cast<float>(reinterpret_cast<const teeny::bf16*>(p)[i]));
    default: return std::nan("");
  }
}

// Why `got` is not `want` at ONNX's tolerance, or nothing.
std::optional<std::string> compare(const std::string& name, const teeny::Tensor& got, const teeny::Tensor& want) {
  // ONNX 1.12's test data stores expected bf16 outputs as their bits, in a u16 tensor.
  const bool bf16_bits = got.dtype() == teeny::DType::bf16 && want.dtype() == teeny::DType::u16;
  if (got.dtype() != want.dtype() && !bf16_bits) {
    return teeny::cat("output '", name, "' is ", got.dtype(), ", expected ", want.dtype());
  }
  // A bf16 result may differ from ONNX 1.12's by one bf16 step (its float-to-bf16 cast truncates;
  // teeny's, as PyTorch's and later ONNX's, rounds to nearest even): rtol 2^-7 there.
  const double rtol = got.dtype() == teeny::DType::bf16 ? 1.0 / 128 : 1e-3;
  if (got.shape() != want.shape()) {
    return teeny::cat("output '", name, "' has shape ", got.shape(), ", expected ", want.shape());
  }
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = element(got, i);
    const double w = bf16_bits ? static_cast<double>(static_cast<float>(std::bit_cast<teeny::bf16>(
                                     reinterpret_cast<const std::uint16_t*>(want.data())[i])))
                               : element(want, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::abs(g - w) <= 1e-7 + rtol * std::abs(w))) {
      return teeny::cat("output '", name, "' element ", i, " is ", g, ", expected ", w);
    }
  }
  return std::nullopt;
}

struct Stage {
  std::string error;  // empty: ran
  std::vector<teeny::NamedTensor> outputs;
};

// The model's graph inputs that are not initializers, in order: the test data's input_<i>.pb feed
// them by position (the tensors' own names may be empty).
std::vector<std::pair<std::string, std::int32_t>> graph_inputs(const fs::path& model_path) {
  std::ifstream file(model_path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  teeny::onnx::proto::Model model;
  std::string error;
  if (!teeny::onnx::proto::parse_model(std::as_bytes(std::span(bytes)), model, error)) return {};
  std::set<std::string> initializers;
  for (const auto& t : model.graph.initializers) initializers.insert(t.name);
  std::vector<std::pair<std::string, std::int32_t>> inputs;  // name, ONNX element type
  for (const auto& v : model.graph.inputs) {
    if (!initializers.contains(v.name)) inputs.emplace_back(v.name, v.elem_type);
  }
  return inputs;
}

// Imports, loads and runs the model on `inputs` (the first `constants_from` inputs fed, the rest
// bound as constants at import).
Stage run(const fs::path& model_path, const std::vector<teeny::NamedTensor>& inputs, std::size_t constants_from) {
  const auto declared = graph_inputs(model_path);
  const auto name_of = [&](std::size_t i) -> std::string_view {
    return i < declared.size() ? declared[i].first : inputs[i].name;
  };
  std::vector<teeny::TensorRef> constants;
  for (std::size_t i = constants_from; i < inputs.size(); ++i) {
    teeny::TensorRef ref = teeny::TensorRef::of(name_of(i), inputs[i].tensor);
    constexpr std::int32_t onnx_bfloat16 = 16;  // stored as bits in a u16 tensor, as below
    if (i < declared.size() && declared[i].second == onnx_bfloat16 && ref.dtype == teeny::DType::u16) {
      ref.dtype = teeny::DType::bf16;
    }
    constants.push_back(ref);
  }
  teeny::onnx::ImportOptions options;
  options.constant_inputs = constants;
  auto imported = teeny::onnx::import_model(model_path.string(), options);
  if (!imported) return {"import: " + imported.error().to_string(), {}};
  // The test data's dims bind the model's symbolic ones.
  teeny::Bindings dims;
  std::vector<teeny::TensorRef> fed;
  for (const teeny::onnx::ValueDesc& in : imported->inputs) {
    std::size_t i = 0;
    while (i < inputs.size() && name_of(i) != in.name) ++i;
    if (i == inputs.size()) return {"the test data has no input '" + in.name + "'", {}};
    if (auto matched = teeny::match_shape(in.shape, inputs[i].tensor.shape(), dims); !matched) {
      return {"input '" + in.name + "': " + matched.error().to_string(), {}};
    }
    teeny::TensorRef ref = teeny::TensorRef::of(in.name, inputs[i].tensor);
    // ONNX 1.12's test data stores bf16 inputs as their bits, in a u16 tensor.
    if (in.dtype == teeny::DType::bf16 && ref.dtype == teeny::DType::u16) ref.dtype = teeny::DType::bf16;
    fed.push_back(ref);
  }
  // A model whose float inputs are f64 computes in f64 (teeny's f64 lowering), else in f32.
  bool f64 = false;
  bool f32 = false;
  for (const auto& in : imported->inputs) {
    f64 = f64 || in.dtype == teeny::DType::f64;
    f32 = f32 || in.dtype == teeny::DType::f32;
  }
  const auto load_and_run = [&]<class T>() -> Result<std::vector<teeny::NamedTensor>> {
    auto model = teeny::load_cpu<T>(imported->graph, dims);
    if (!model) return std::move(model).error().context("load");
    auto params = imported->params();
    if (!params) return std::move(params).error().context("weights");
    if (auto loaded = model->load_weights(*params); !loaded) return std::move(loaded).error().context("weights");
    std::vector<teeny::NamedTensor> copies;
    for (const teeny::TensorRef& r : fed) {
      auto t = teeny::Tensor::zeros(r.dtype, r.shape);
      if (!t) return std::move(t).error();
      if (!r.data.empty()) std::memcpy(t->data(), r.data.data(), r.data.size());
      copies.push_back({std::string(r.name), std::move(*t)});
    }
    auto outputs = model->forward(std::move(copies));
    if (!outputs) return std::move(outputs).error().context("run");
    return outputs;
  };
  auto outputs = f64 && !f32 ? load_and_run.template operator()<double>() : load_and_run.template operator()<float>();
  if (!outputs) return {outputs.error().to_string(), {}};
  return {"", std::move(*outputs)};
}

CaseResult run_case(const std::string& suite, const fs::path& dir) {
  CaseResult r{suite, dir.filename().string(), Outcome::unsupported, {}};
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.reason = "no test_data_set";
    return r;
  }
  for (const fs::path& set : sets) {
    auto inputs = read_set(set, "input_");
    auto expected = read_set(set, "output_");
    if (!inputs || !expected) {
      r.reason = compact("test data: " + (!inputs ? inputs.error() : expected.error()).to_string(), dir);
      return r;
    }
    Stage s = run(dir / "model.onnx", *inputs, inputs->size());
    if (!s.error.empty() && inputs->size() > 1) {
      Stage bound = run(dir / "model.onnx", *inputs, 1);
      if (bound.error.empty()) s = std::move(bound);
    }
    if (!s.error.empty()) {
      r.reason = compact(s.error, dir);
      return r;
    }
    if (s.outputs.size() != expected->size()) {
      r.outcome = Outcome::wrong;
      r.reason = teeny::cat(s.outputs.size(), " outputs, expected ", expected->size());
      return r;
    }
    for (std::size_t i = 0; i < expected->size(); ++i) {
      if (auto why = compare(s.outputs[i].name, s.outputs[i].tensor, (*expected)[i].tensor)) {
        r.outcome = Outcome::wrong;
        r.reason = *why + " (" + set.filename().string() + ")";
        return r;
      }
    }
  }
  r.outcome = Outcome::pass;
  return r;
}

// A node test's op family: its name's first word ("test_conv_with_strides" -> "conv").
std::string family(const CaseResult& r) {
  std::string name = r.name.starts_with("test_") ? r.name.substr(5) : r.name;
  if (r.suite != "node") return r.suite;
  return name.substr(0, name.find('_'));
}

void write_report(const std::string& path, const std::vector<CaseResult>& results) {
  std::ofstream out(path);
  out << "# ONNX conformance\n\n"
      << "Generated by `tools/onnx-conformance.sh` (tests/onnx/conformance.cpp) over the ONNX backend test data "
         "Debian ships (`libonnx-testdata`, ONNX 1.12). Each case's model is imported, loaded on the CPU and run on "
         "every test_data_set; outputs must match ONNX's expected ones at rtol 1e-3, atol 1e-7 with the same dtype "
         "and shape (bf16 outputs at rtol 2^-7, one bf16 step: ONNX 1.12's float-to-bf16 cast truncates, teeny's "
         "rounds to nearest even as PyTorch's does). *Unsupported* is an import, load or run error (the first line of "
         "its message below); "
         "*wrong* is a case that ran and gave a different answer, which fails CI. A model that takes its weights "
         "as graph inputs is run with the inputs after the first bound as constants. Do not edit: regenerate.\n\n";
  out << "Ops with a converter (`standard_converters`, modules/onnx/converters.cppm):";
  for (const teeny::onnx::Converter& c : teeny::onnx::standard_converters) out << " `" << c.op_type << "`";
  out << ".\n\n";
  std::map<std::string, std::array<int, 3>> by_suite;
  std::map<std::string, std::array<int, 3>> by_family;
  for (const CaseResult& r : results) {
    by_suite[r.suite][static_cast<int>(r.outcome)]++;
    if (r.suite == "node") by_family[family(r)][static_cast<int>(r.outcome)]++;
  }
  out << "| suite | cases | pass | unsupported | wrong |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [suite, c] : by_suite) {
    out << "| " << suite << " | " << c[0] + c[1] + c[2] << " | " << c[0] << " | " << c[1] << " | " << c[2] << " |\n";
  }
  out << "\n## node/ by op family\n\n| family | pass | unsupported | wrong |\n|---|---:|---:|---:|\n";
  for (const auto& [f, c] : by_family) out << "| " << f << " | " << c[0] << " | " << c[1] << " | " << c[2] << " |\n";
  out << "\n## Every case that does not pass\n\n| suite | case | outcome | reason |\n|---|---|---|---|\n";
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::pass) continue;
    std::string reason = r.reason;
    std::replace(reason.begin(), reason.end(), '|', '/');
    out << "| " << r.suite << " | " << r.name << " | " << (r.outcome == Outcome::wrong ? "**wrong**" : "unsupported")
        << " | " << reason << " |\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA_DIR [--report FILE.md] [--only CASE] [--verbose]\n", argv[0]);
    return 1;
  }
  const fs::path data = argv[1];
  std::string report;
  std::string only;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--report" && i + 1 < argc)
      report = argv[++i];
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--verbose")
      verbose = true;
    else {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return 1;
    }
  }
  if (!fs::is_directory(data)) {
    std::printf("no ONNX test data at %s (libonnx-testdata): skipped\n", data.c_str());
    return 77;
  }
  std::vector<CaseResult> results;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    if (!fs::is_directory(data / suite)) continue;
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(data / suite)) {
      if (fs::exists(e.path() / "model.onnx") && (only.empty() || e.path().filename() == only))
        cases.push_back(e.path());
    }
    std::sort(cases.begin(), cases.end());
    for (const fs::path& c : cases) {
      results.push_back(run_case(suite, c));
      const CaseResult& r = results.back();
      if (verbose || r.outcome == Outcome::wrong) {
        std::printf("%-8s %s/%s %s\n",
                    r.outcome == Outcome::pass          ? "pass"
                    : r.outcome == Outcome::unsupported ? "unsup"
                                                        : "WRONG",
                    suite, r.name.c_str(), r.reason.c_str());
      }
    }
  }
  std::map<std::string, std::array<int, 3>> by_suite;
  int wrong = 0;
  for (const CaseResult& r : results) {
    by_suite[r.suite][static_cast<int>(r.outcome)]++;
    wrong += r.outcome == Outcome::wrong;
  }
  for (const auto& [suite, c] : by_suite) {
    std::printf("%-18s %4d cases: %4d pass, %4d unsupported, %d wrong\n", suite.c_str(), c[0] + c[1] + c[2], c[0], c[1],
                c[2]);
  }
  if (!report.empty()) write_report(report, results);
  return wrong == 0 ? 0 : 1;
}
