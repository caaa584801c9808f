// teeny.train:trainable_model — a loaded model lowered for training, seen by the training loop: its trained
// parameters as Parameter<T> views for the optimizers, PyTorch's default initialisation, and
// checkpoints holding the model's state_dict and the optimizer's state in one safetensors file.
//
//   auto model = load_cpu_for_training(graph, {{"batch", 64}});
//   init_parameters(*model, /*seed=*/1);                     // like a fresh PyTorch module
//   auto params = trainable_parameters<float>(*model);       // views into the model
//   auto opt = AdamW<float>::create(*params, {.lr = 1e-3});
//   ... forward, loss into model->output_grad("logits"), backward, opt->step(), model->zero_grad()
//   save_checkpoint("ckpt.safetensors", *model, *opt);      // load_checkpoint resumes bit for bit
export module teeny.train:trainable_model;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.io;
import teeny.runtime;
import :parameter;
import :data;

namespace teeny::model_detail {
// The whole of `text` as an unsigned decimal integer.
inline bool parse_u64(const std::string& text, std::uint64_t& value) {
  const char* end = text.data() + text.size();
  auto [rest, error] = std::from_chars(text.data(), end, value);
  return error == std::errc{} && rest == end && !text.empty();
}
}  // namespace teeny::model_detail

export namespace teeny {

/// A loaded model that trains: forward, backward from the output gradients, and its trained
/// parameters with their gradients. Satisfied by LoadedModel lowered with LoweringMode::training.
template <class M>
concept TrainableModel = Model<M> && requires(M& m, const ParamSource& source, LoadOptions options) {
  { m.parameter_gradients() } -> std::same_as<std::vector<ParameterGradient>>;
  { m.backward() } -> std::same_as<Result<void>>;
  m.zero_grad();
  { m.parameters() } -> std::same_as<std::vector<TensorRef>>;
  { m.load_weights(source, options) } -> std::same_as<Result<LoadReport>>;
  { std::as_const(m).random_state() } -> std::same_as<RandomState>;
  m.set_random_state(RandomState{});
};

/// The model's trained parameters as typed views (buffers such as running statistics are not
/// among them); an error names a parameter whose dtype is not T.
template <TrainFloat T, TrainableModel M>
Result<std::vector<Parameter<T>>> trainable_parameters(M& model) {
  std::vector<Parameter<T>> params;
  for (const ParameterGradient& p : model.parameter_gradients()) {
    auto value = p.value.template as<T>();
    auto grad = p.grad.template as<T>();
    if (!value) return std::move(value).error().context(cat("parameter '", p.key, "'"));
    if (!grad) return std::move(grad).error().context(cat("gradient of '", p.key, "'"));
    params.push_back({std::string(p.key), *value, *grad});
  }
  return params;
}

/// Initialises the trained parameters as a new PyTorch module would (same distributions, not the
/// same numbers): a weight of rank >= 2 (Linear, Conv) from U(-b, b) with b = 1 / sqrt(fan_in),
/// PyTorch's kaiming_uniform_(a = sqrt(5)); the bias beside it from the same U(-b, b); rank-1
/// weights (norms) keep their initial ones. Seeded: the same seed gives the same parameters.
/// T is the parameters' type (f32 or f64 models).
template <TrainFloat T, TrainableModel M>
Result<void> init_parameters_as(M& model, std::uint64_t seed) {
  auto params = trainable_parameters<T>(model);
  if (!params) return std::move(params).error();
  Xoshiro256 rng(seed);
  auto uniform = [&rng](double bound) {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;  // [0, 1)
    return static_cast<T>((2 * u - 1) * bound);
  };
  std::map<std::string, double, std::less<>> bounds;  // by scope ("fc1"): its weight's b
  for (const Parameter<T>& p : *params) {
    const std::string_view key = p.key;
    const std::size_t dot = key.rfind('.');
    if (dot == std::string_view::npos || key.substr(dot + 1) != "weight" || p.value.rank() < 2) continue;
    const std::int64_t fan_in = p.value.shape[0] == 0 ? 0 : p.value.numel() / p.value.shape[0];
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    bounds.emplace(std::string(key.substr(0, dot)), bound);
    for (T& v : p.value.span()) v = uniform(bound);
  }
  for (const Parameter<T>& p : *params) {
    const std::string_view key = p.key;
    const std::size_t dot = key.rfind('.');
    if (dot == std::string_view::npos || key.substr(dot + 1) != "bias") continue;
    const auto weight = bounds.find(key.substr(0, dot));
    if (weight == bounds.end()) continue;  // a norm's bias stays 0
    for (T& v : p.value.span()) v = uniform(weight->second);
  }
  return ok();
}

/// The same, in the parameters' own type: f64 for a model computing in f64, else f32.
template <TrainableModel M>
Result<void> init_parameters(M& model, std::uint64_t seed) {
  const std::vector<ParameterGradient> params = model.parameter_gradients();
  const bool f64 = !params.empty() && params.front().value.dtype == DType::f64;
  return f64 ? init_parameters_as<double>(model, seed) : init_parameters_as<float>(model, seed);
}

/// The prefix of the optimizer's tensors in a checkpoint, before its own keys (`state.0.exp_avg`).
inline constexpr std::string_view optimizer_prefix = "optimizer.";

/// The metadata keys of a checkpoint that hold the model's RandomState (dropout's seed and step).
inline constexpr std::string_view random_seed_key = "random_seed";
inline constexpr std::string_view random_step_key = "random_step";

/// Writes the model's state_dict (parameters and buffers, PyTorch's keys), the optimizer's state
/// (under `optimizer.`) and, as metadata, the model's random state to one safetensors file.
/// PyTorch loads the model part with load_state_dict(strict=False) after dropping the
/// optimizer.* keys.
template <TrainableModel M, class O>
  requires requires(const O& o) {
    { o.state_tensors() } -> std::same_as<std::vector<TensorRef>>;
  }
Result<void> save_checkpoint(const std::string& path, M& model, const O& optimizer) {
  std::vector<TensorRef> tensors = model.parameters();
  const std::vector<TensorRef> state = optimizer.state_tensors();
  std::vector<std::string> names;  // the prefixed names the refs point to
  names.reserve(state.size());
  for (const TensorRef& t : state) names.push_back(std::string(optimizer_prefix) + std::string(t.name));
  for (std::size_t i = 0; i < state.size(); ++i) {
    tensors.push_back({names[i], state[i].dtype, state[i].shape, state[i].data});
  }
  const RandomState random = model.random_state();
  return save_safetensors(path, tensors,
                          {{"format", "pt"},
                           {"teeny", "checkpoint"},
                           {std::string(random_seed_key), std::to_string(random.seed)},
                           {std::string(random_step_key), std::to_string(random.step)}});
}

/// Loads a checkpoint written by save_checkpoint: the model's part (every tensor but the
/// optimizer's) strictly, as load_weights loads a file, and the optimizer's state strictly. Both
/// are checked before either is written; on an error the message names the file and the keys.
template <TrainableModel M, class O>
  requires requires(O& o, std::span<const TensorRef> refs) {
    { o.load_state(refs) } -> std::same_as<Result<void>>;
  }
Result<void> load_checkpoint(const std::string& path, M& model, O& optimizer) {
  auto file = SafetensorsFile::open(path);
  if (!file) return std::move(file).error();
  std::vector<TensorRef> state;
  for (const SafetensorsEntry& e : file->entries()) {
    const std::string_view name = e.name;
    if (name.starts_with(optimizer_prefix))
      state.push_back({name.substr(optimizer_prefix.size()), e.dtype, e.shape, e.data});
  }
  // The model's part, checked (a dry run of the strict load) before anything is written.
  const ParamSource weights = ParamSource::of(*file).without_prefix(optimizer_prefix);
  if (auto checked = model.load_weights(weights, {.dry_run = true}); !checked) {
    return std::move(checked).error().context("checkpoint does not match the model");
  }
  // The random state, when the file has it (a checkpoint from elsewhere may not): read first, so
  // that a malformed value is refused before anything changes.
  std::optional<RandomState> random;
  if (auto seed = file->metadata().find(std::string(random_seed_key)); seed != file->metadata().end()) {
    auto step = file->metadata().find(std::string(random_step_key));
    RandomState r;
    if (step == file->metadata().end() || !model_detail::parse_u64(seed->second, r.seed) ||
        !model_detail::parse_u64(step->second, r.step)) {
      return fail(Errc::parse, "checkpoint '", path, "': metadata '", random_seed_key, "' and '", random_step_key,
                  "' must both be unsigned integers");
    }
    random = r;
  }
  // The optimizer's state first: it is checked as it loads and changes nothing on an error.
  if (auto loaded = optimizer.load_state(state); !loaded)
    return std::move(loaded).error().context(cat("checkpoint '", path, "'"));
  if (auto loaded = model.load_weights(weights); !loaded) return std::move(loaded).error();
  if (random) model.set_random_state(*random);
  return ok();
}

}  // namespace teeny
