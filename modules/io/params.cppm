// teeny.io:params — loads named parameters from a safetensors file into buffers a model owns,
// matched by key ("fc1.weight", PyTorch's state_dict names). Strict by default: every missing,
// unexpected, mis-shaped or unconvertible key is reported in one error, and nothing is written
// unless everything loads.
//
//   ParamTarget targets[] = {{"fc1.weight", DType::f32, {512, 784}, weight_bytes},
//                            {"fc1.bias", DType::f32, {512}, bias_bytes}};
//   auto report = load_parameters(*file, targets);          // Result<LoadReport>
//   if (!report) std::puts(report.error().to_string().c_str());
//     // "shape mismatch: safetensors file 'w.safetensors': cannot load 2 parameters (1 problem):
//     //    'fc1.weight': file has [512, 784] but the model expects [512, 785]"
//   load_parameters(*file, targets, {.strict = false});    // loads what fits; the report lists the rest
//
// Floating data converts to the target's floating dtype (f64/f16/bf16 -> f32, rounding to
// nearest even) and integers to the target's integer dtype when every value fits; those keys are
// listed in `converted`. Floating and integer data never convert into each other.
module;
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module teeny.io:params;
import teeny.core;
import :safetensors;
import :convert;

export namespace teeny {

/// One parameter a model wants: its key, dtype and shape, and where its bytes go (native,
/// row-major; the size must be numel x dtype size).
struct ParamTarget {
  std::string key;
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::span<std::byte> destination;
};

struct LoadOptions {
  /// Strict: any problem fails the whole load, writing nothing. Otherwise load what matches.
  bool strict = true;
};

/// What a load did. Keys are in target order, except `skipped_unexpected` (file order).
struct LoadReport {
  std::vector<std::string> loaded;              // written into their destination
  std::vector<std::string> skipped_unexpected;  // in the file, asked for by no target
  std::vector<std::string> missing;             // asked for, not in the file
  std::vector<std::string> converted;           // loaded from another dtype (also in `loaded`)
  std::vector<std::string> mismatched;          // non-strict only: in the file but with the wrong shape or dtype
};

/// "loaded 4 (1 converted), missing 1, unexpected 2, mismatched 0".
inline std::string to_string(const LoadReport& r) {
  return cat("loaded ", r.loaded.size(), " (", r.converted.size(), " converted), missing ", r.missing.size(),
             ", unexpected ", r.skipped_unexpected.size(), ", mismatched ", r.mismatched.size());
}

/// Loads every target from `file` by key (see the top of this file). Two targets with one key or a
/// destination of the wrong size are caller errors (Errc::invalid_argument) in either mode. A
/// strict failure lists every problem, one per line; its code is that of the first kind present,
/// in this order: missing (not_found), unexpected (invalid_argument), shape (shape_mismatch),
/// dtype (dtype_mismatch), values that do not fit (out_of_range).
Result<LoadReport> load_parameters(const SafetensorsFile& file, std::span<const ParamTarget> targets,
                                   LoadOptions options = {});

}  // namespace teeny

namespace teeny {

Result<LoadReport> load_parameters(const SafetensorsFile& file, std::span<const ParamTarget> targets,
                                   LoadOptions options) {
  const std::string where = cat("safetensors file '", file.path(), "'");
  std::set<std::string_view> wanted;
  for (const ParamTarget& t : targets) {
    if (!wanted.insert(t.key).second) {
      return fail(Errc::invalid_argument, "two parameter targets have the key '", t.key, "'").context(where);
    }
    const auto needed = static_cast<std::uint64_t>(t.shape.numel()) * size_of(t.dtype);
    if (t.shape.numel() < 0 || t.destination.size() != needed) {
      return fail(Errc::invalid_argument, "parameter '", t.key, "' (", t.dtype, " ", t.shape, ") needs a ", needed,
                  "-byte destination, got ", t.destination.size())
          .context(where);
    }
  }

  // Each problem is one line, grouped by kind in the order the error code is chosen by.
  enum Kind : std::size_t { missing, unexpected, shape, dtype, values, kinds };
  constexpr Errc codes[kinds] = {Errc::not_found, Errc::invalid_argument, Errc::shape_mismatch, Errc::dtype_mismatch,
                                 Errc::out_of_range};
  std::vector<std::string> problems[kinds];
  LoadReport report;
  std::vector<std::pair<const ParamTarget*, const SafetensorsEntry*>> plan;

  for (const ParamTarget& t : targets) {
    const SafetensorsEntry* e = file.find(t.key);
    if (e == nullptr) {
      problems[missing].push_back(cat("missing: '", t.key, "' (the model expects ", t.dtype, " ", t.shape, ")"));
      report.missing.push_back(t.key);
      continue;
    }
    std::optional<std::string> problem;
    Kind kind = shape;
    if (e->shape != t.shape) {
      problem = cat("'", t.key, "': file has ", e->shape, " but the model expects ", t.shape);
    } else if (auto why = io_detail::refuse_conversion(e->dtype, t.dtype, io_detail::Policy::same_kind)) {
      kind = dtype;
      problem = cat("'", t.key, "': file has ", e->dtype, " but the model expects ", t.dtype, " (", *why, ")");
    } else if (auto fits = io_detail::check_values(e->data, e->dtype, t.dtype); !fits) {
      kind = values;
      problem =
          cat("'", t.key, "': file has ", e->dtype, " and the model expects ", t.dtype, ": ", fits.error().message());
    }
    if (problem) {
      problems[kind].push_back(std::move(*problem));
      report.mismatched.push_back(t.key);
      continue;
    }
    plan.emplace_back(&t, e);
  }
  for (const SafetensorsEntry& e : file.entries()) {
    if (wanted.contains(e.name)) continue;
    problems[unexpected].push_back(cat("unexpected: '", e.name, "' (", e.dtype, " ", e.shape, " in the file)"));
    report.skipped_unexpected.push_back(e.name);
  }

  if (options.strict) {
    std::size_t count = 0;
    std::optional<Errc> code;
    for (std::size_t k = 0; k < kinds; ++k) {
      count += problems[k].size();
      if (!code && !problems[k].empty()) code = codes[k];
    }
    if (code) {
      std::string message =
          cat("cannot load ", targets.size(), " parameters (", count, count == 1 ? " problem" : " problems", "):");
      for (const auto& group : problems) {
        for (const std::string& line : group) message += cat("\n  ", line);
      }
      return Error(*code, std::move(message)).context(where);
    }
  }

  for (const auto& [t, e] : plan) {
    io_detail::convert_into(e->data, e->dtype, t->destination, t->dtype);
    report.loaded.push_back(t->key);
    if (e->dtype != t->dtype) report.converted.push_back(t->key);
  }
  return report;
}

}  // namespace teeny
