// teeny.io:params — loads named parameters into buffers a model owns, matched by key ("fc1.weight",
// PyTorch's state_dict names), from a ParamSource: a safetensors file, or named tensors the
// program holds in memory. Strict by default: every missing, unexpected, mis-shaped or
// unconvertible key is reported in one error, and nothing is written unless everything loads.
//
//   ParamTarget targets[] = {{"fc1.weight", DType::f32, {512, 784}, weight_bytes},
//                            {"fc1.bias", DType::f32, {512}, bias_bytes}};
//   auto report = load_parameters(*file, targets);          // Result<LoadReport>
//   if (!report) std::puts(report.error().to_string().c_str());
//     // "shape mismatch: safetensors file 'w.safetensors': cannot load 2 parameters (1 problem):
//     //    'fc1.weight': file has [512, 784] but the model expects [512, 785]"
//   load_parameters(*file, targets, {.strict = false});    // loads what fits; the report lists the rest
//
//   const TensorRef held[] = {TensorRef::of<float>("fc1.weight", w, {512, 784}), ...};
//   auto memory = ParamSource::of(held);                    // Result<ParamSource>
//   load_parameters(*memory, targets);   // the same checks; errors say "weights in memory", "tensor has"
//
// Floating data converts to the target's floating dtype (f64/f16/bf16 -> f32, rounding to
// nearest even) and integers to the target's integer dtype when every value fits; those keys are
// listed in `converted`. Floating and integer data never convert into each other.
export module teeny.io:params;
import teeny.std;
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
  /// Check only: the same error, or the report of what would load, but nothing is written.
  bool dry_run = false;
};

/// Named tensors to load parameters from: a safetensors file's tensors (little-endian, read in
/// place) or tensors the program holds (native byte order). One loader reads both, so the checks
/// and the errors are the same; only the words naming the source differ ("safetensors file
/// 'w.safetensors'" and "file has" for a file, "weights in memory" and "tensor has" for tensors).
/// It borrows: the file, or the names and bytes of the tensors, must outlive it.
class ParamSource {
 public:
  /// The tensors of a file, in file order.
  static ParamSource of(const SafetensorsFile& file);
  /// Tensors held in memory, in the order given (the TensorRefs themselves are copied). An error
  /// when two have one name (Errc::duplicate) or when a tensor's bytes do not fill its shape.
  static Result<ParamSource> of(std::span<const TensorRef> tensors);

  /// Names the source at the head of an error: "safetensors file 'w.safetensors'".
  const std::string& name() const { return name_; }
  /// Every tensor, in source order.
  std::span<const TensorRef> tensors() const { return tensors_; }
  /// The tensor named `key`, or nullptr.
  const TensorRef* find(std::string_view key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  /// The same source without the tensors whose names start with `prefix` (a checkpoint's
  /// "optimizer." state, which is not the model's).
  ParamSource without_prefix(std::string_view prefix) const;
  /// How the tensors' bytes are ordered: little-endian in a file, native in memory.
  std::endian byte_order() const { return byte_order_; }
  /// The words a problem line uses for what the source holds ("file has [2, 3]") and for where an
  /// unexpected tensor is ("f32 [3] in the file").
  std::string_view has() const { return has_; }
  std::string_view where_unexpected() const { return where_unexpected_; }

 private:
  ParamSource() = default;

  std::string name_;
  std::string_view has_;
  std::string_view where_unexpected_;
  std::endian byte_order_ = std::endian::little;
  std::vector<TensorRef> tensors_;
  std::map<std::string_view, std::size_t, std::less<>> index_;  // name -> position in tensors_
};

/// What a load did. Keys are in target order, except `skipped_unexpected` (source order).
struct LoadReport {
  std::vector<std::string> loaded;              // written into their destination (dry run: would be)
  std::vector<std::string> skipped_unexpected;  // in the source, asked for by no target
  std::vector<std::string> missing;             // asked for, not in the source
  std::vector<std::string> converted;           // loaded from another dtype (also in `loaded`)
  std::vector<std::string> mismatched;          // non-strict only: in the file but with the wrong shape or dtype
};

/// "loaded 4 (1 converted), missing 1, unexpected 2, mismatched 0".
inline std::string to_string(const LoadReport& r) {
  return cat("loaded ", r.loaded.size(), " (", r.converted.size(), " converted), missing ", r.missing.size(),
             ", unexpected ", r.skipped_unexpected.size(), ", mismatched ", r.mismatched.size());
}

/// Loads every target from `source` by key (see the top of this file). Two targets with one key
/// or a destination of the wrong size are caller errors (Errc::invalid_argument) in either mode. A
/// strict failure lists every problem, one per line; its code is that of the first kind present,
/// in this order: missing (not_found), unexpected (invalid_argument), shape (shape_mismatch),
/// dtype (dtype_mismatch), values that do not fit (out_of_range).
Result<LoadReport> load_parameters(const ParamSource& source, std::span<const ParamTarget> targets,
                                   LoadOptions options = {});

/// The same, from a safetensors file.
inline Result<LoadReport> load_parameters(const SafetensorsFile& file, std::span<const ParamTarget> targets,
                                          LoadOptions options = {}) {
  return load_parameters(ParamSource::of(file), targets, options);
}

}  // namespace teeny

namespace teeny {

ParamSource ParamSource::of(const SafetensorsFile& file) {
  ParamSource source;
  source.name_ = cat("safetensors file '", file.path(), "'");
  source.has_ = "file has";
  source.where_unexpected_ = "in the file";
  source.byte_order_ = std::endian::little;
  for (const SafetensorsEntry& e : file.entries()) {
    source.index_.emplace(e.name, source.tensors_.size());
    source.tensors_.push_back({e.name, e.dtype, e.shape, e.data});
  }
  return source;
}

ParamSource ParamSource::without_prefix(std::string_view prefix) const {
  ParamSource kept = *this;
  kept.tensors_.clear();
  kept.index_.clear();
  for (const TensorRef& t : tensors_) {
    if (t.name.starts_with(prefix)) continue;
    kept.index_.emplace(t.name, kept.tensors_.size());
    kept.tensors_.push_back(t);
  }
  return kept;
}

Result<ParamSource> ParamSource::of(std::span<const TensorRef> tensors) {
  ParamSource source;
  source.name_ = "weights in memory";
  source.has_ = "tensor has";
  source.where_unexpected_ = "among the tensors given";
  source.byte_order_ = std::endian::native;
  for (const TensorRef& t : tensors) {
    const auto needed = static_cast<std::uint64_t>(t.shape.numel()) * size_of(t.dtype);
    if (t.shape.numel() < 0 || t.data.size() != needed) {
      return fail(Errc::invalid_argument, "tensor '", t.name, "' (", t.dtype, " ", t.shape, ") needs ", needed,
                  " bytes of data, got ", t.data.size())
          .context(source.name_);
    }
    if (!source.index_.emplace(t.name, source.tensors_.size()).second) {
      return fail(Errc::duplicate, "two tensors are named '", t.name, "'").context(source.name_);
    }
    source.tensors_.push_back(t);
  }
  return source;
}

Result<LoadReport> load_parameters(const ParamSource& source, std::span<const ParamTarget> targets,
                                   LoadOptions options) {
  const std::string& where = source.name();
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
  std::vector<std::pair<const ParamTarget*, const TensorRef*>> plan;

  for (const ParamTarget& t : targets) {
    const TensorRef* e = source.find(t.key);
    if (e == nullptr) {
      problems[missing].push_back(cat("missing: '", t.key, "' (the model expects ", t.dtype, " ", t.shape, ")"));
      report.missing.push_back(t.key);
      continue;
    }
    std::optional<std::string> problem;
    Kind kind = shape;
    if (e->shape != t.shape) {
      problem = cat("'", t.key, "': ", source.has(), " ", e->shape, " but the model expects ", t.shape);
    } else if (auto why = io_detail::refuse_conversion(e->dtype, t.dtype, io_detail::Policy::same_kind)) {
      kind = dtype;
      problem =
          cat("'", t.key, "': ", source.has(), " ", e->dtype, " but the model expects ", t.dtype, " (", *why, ")");
    } else if (auto fits = io_detail::check_values(e->data, e->dtype, t.dtype, source.byte_order()); !fits) {
      kind = values;
      problem = cat("'", t.key, "': ", source.has(), " ", e->dtype, " and the model expects ", t.dtype, ": ",
                    fits.error().message());
    }
    if (problem) {
      problems[kind].push_back(std::move(*problem));
      report.mismatched.push_back(t.key);
      continue;
    }
    plan.emplace_back(&t, e);
  }
  for (const TensorRef& e : source.tensors()) {
    if (wanted.contains(e.name)) continue;
    problems[unexpected].push_back(
        cat("unexpected: '", e.name, "' (", e.dtype, " ", e.shape, " ", source.where_unexpected(), ")"));
    report.skipped_unexpected.emplace_back(e.name);
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
    if (!options.dry_run) io_detail::convert_into(e->data, e->dtype, t->destination, t->dtype, source.byte_order());
    report.loaded.push_back(t->key);
    if (e->dtype != t->dtype) report.converted.push_back(t->key);
  }
  return report;
}

}  // namespace teeny
