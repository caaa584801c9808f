// teeny.fixed:model — a typed model loaded on the CPU: the steps of its StaticPlan as a std::tuple
// of the run-time path's own executable ops (linear_op, conv_op, ...) with their bound arguments and
// prepared CPU kernels, the activation arena and the kernels' memory (packed weights, scratch,
// workspace) member arrays of constexpr sizes, and forward a fold over the tuple: no variant, no
// virtual call, no input matching by name, and no heap in load or forward. (One coherent thing at
// about 700 lines: the typed lowering, its memory plan and the Model that runs them.)
//
//   auto x = tf::input<"x", float, 1, 1, 28, 28>();
//   static tf::Model<decltype(fixed_models::mlp(x))> mlp;       // the arena lives in the object
//   alignas(64) static std::byte weights[decltype(mlp)::param_bytes];
//   tf::read_weights<decltype(mlp)::network>(*file, weights);   // teeny.fixed.io; or compiled in
//   mlp.load(weights);                                           // Result<void>
//   auto logits = mlp.forward(pixels);                           // Result<TensorView<const float>>
//
// The weights are read in place (biases, BatchNorm statistics; the f32 GEMMs' weights are packed
// into the kernels' memory at load): they must outlive the model. The model holds
// pointers into itself, so it is neither copied nor moved: declare it where it is used.
module;
#include "cpu/kernels/memory.hpp"
#include "math/elementwise.hpp"
export module teeny.fixed:model;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.ops;
import teeny.cpu;
import :name;
import :value;
import :layers;
import :network;
import :plan;

export namespace teeny::fixed {

namespace model_detail {
template <class List, std::size_t I>
struct at;
template <class First, class... Rest>
struct at<TypeList<First, Rest...>, 0> {
  using type = First;
};
template <class First, class... Rest, std::size_t I>
struct at<TypeList<First, Rest...>, I> {
  using type = typename at<TypeList<Rest...>, I - 1>::type;
};

template <class L>
concept Named = requires { L::name.view(); };

template <class L>
constexpr std::string_view name_of() {
  if constexpr (Named<L>) {
    return L::name.view();
  } else {
    return L::kind;
  }
}

// The executable op the run-time path's standard lowering makes for node I, with the plan's
// folds. The ops' symbolic output shape (OpOutput::shape) is left empty: the typed plan has the
// shapes in its types and nothing on the load and run path reads it.
template <class Net, std::size_t I>
auto make_op() {
  using V = typename at<typename Net::nodes, I>::type;
  using L = typename V::layer;
  using T = typename V::element;
  constexpr NodePlan p = StaticPlan<typename Net::output>::nodes[I];
  const OpOutput out{{}, dtype_of<T>};
  const Epilogue epilogue{p.activation, p.fn, {}};
  if constexpr (L::op == LayerOp::linear) {
    return linear_op<T>{
        ::teeny::Linear{.in_features = L::in_features, .out_features = L::out_features, .bias = L::options.bias}, out,
        epilogue};
  } else if constexpr (L::op == LayerOp::conv2d) {
    constexpr auto o = L::options;
    auto op = conv_op<T>::from(::teeny::Conv2d{.in_channels = L::in_channels,
                                               .out_channels = L::out_channels,
                                               .kernel = {L::kernel_size, L::kernel_size},
                                               .stride = {o.stride, o.stride},
                                               .padding = {o.padding, o.padding},
                                               .dilation = {o.dilation, o.dilation},
                                               .groups = o.groups,
                                               .bias = o.bias},
                               out);
    op.epilogue = epilogue;
    if constexpr (p.norm != no_node) {
      using Norm = typename at<typename Net::nodes, p.norm>::type::layer;
      op.norm = ::teeny::BatchNorm{.num_features = Norm::num_features, .eps = Norm::options.eps};
    }
    op.residual = p.residual != no_node;
    return op;
  } else if constexpr (L::op == LayerOp::batch_norm2d) {
    return batch_norm_op<T>{::teeny::BatchNorm{.num_features = L::num_features, .eps = L::options.eps}, out, epilogue};
  } else if constexpr (L::op == LayerOp::group_norm) {
    return group_norm_op<T>{::teeny::GroupNorm{.num_groups = L::num_groups,
                                               .num_channels = L::num_channels,
                                               .eps = L::options.eps,
                                               .affine = L::options.affine},
                            out};
  } else if constexpr (L::op == LayerOp::activation) {
    return unary_op<T>{L::fn, {}, out};
  } else if constexpr (L::op == LayerOp::max_pool2d) {
    return max_pool2d_op<T>{::teeny::MaxPool2d{.kernel = {L::kernel_size, L::kernel_size},
                                               .stride = ::teeny::Size2{L::stride, L::stride},
                                               .padding = {L::padding, L::padding}},
                            out};
  } else if constexpr (L::op == LayerOp::avg_pool2d) {
    return avg_pool2d_op<T>{::teeny::AvgPool2d{.kernel = {L::kernel_size, L::kernel_size},
                                               .stride = ::teeny::Size2{L::stride, L::stride},
                                               .padding = {L::padding, L::padding}},
                            out};
  } else if constexpr (L::op == LayerOp::adaptive_avg_pool2d) {
    return adaptive_avg_pool2d_op<T>{::teeny::AdaptiveAvgPool2d{.output_size = {L::out_h, L::out_w}}, out};
  } else if constexpr (L::op == LayerOp::add) {
    return binary_op<T>{BinaryFn::add, out, epilogue};
  } else if constexpr (L::op == LayerOp::custom) {
    return L::template lower<T>(out);
  } else if constexpr (L::op == LayerOp::input || L::op == LayerOp::flatten) {
    static_assert(sizeof(L) == 0, "inputs and views (Flatten) are not lowered to ops");
  } else {
    static_assert(sizeof(L) == 0,
                  "a LayerOp without its case in make_op (modules/fixed/model.cppm): return the executable op the "
                  "layer runs");
  }
}

// What node I's kernel takes from the CPU context's Memory (see KernelMemory), from its layer and
// shapes alone: the plan for the model's own memory block.
template <class Net, std::size_t I>
constexpr KernelMemory kernel_memory() {
  using V = typename at<typename Net::nodes, I>::type;
  using L = typename V::layer;
  using T = typename V::element;
  constexpr NodePlan p = StaticPlan<typename Net::output>::nodes[I];
  using In = typename at<typename Net::nodes, p.inputs[0]>::type::dims;
  if constexpr (L::op == LayerOp::linear) {
    return linear_memory<T>(static_cast<std::size_t>(In::numel / L::in_features),
                            static_cast<std::size_t>(L::in_features), static_cast<std::size_t>(L::out_features));
  } else if constexpr (L::op == LayerOp::conv2d) {
    constexpr auto o = L::options;
    return conv_memory<T>(ConvSizes{.n = In::array[0],
                                    .c = In::array[1],
                                    .h = In::array[2],
                                    .w = In::array[3],
                                    .o = V::dims::array[1],
                                    .ho = V::dims::array[2],
                                    .wo = V::dims::array[3],
                                    .groups = o.groups,
                                    .kernel_h = L::kernel_size,
                                    .kernel_w = L::kernel_size,
                                    .stride_h = o.stride,
                                    .stride_w = o.stride,
                                    .pad_h = o.padding,
                                    .pad_w = o.padding,
                                    .folded_norm = p.norm != no_node});
  } else if constexpr (L::op == LayerOp::batch_norm2d) {
    return batch_norm_memory<T>(static_cast<std::size_t>(L::num_features));
  } else if constexpr (L::op == LayerOp::max_pool2d) {
    return max_pool2d_memory<T>(static_cast<std::size_t>(In::array[3]));
  } else if constexpr (L::op == LayerOp::custom) {
    return []<class... X>(TypeList<X...>) { return L::template memory<T, X...>(); }(typename inputs_of<V>::type{});
  } else {
    return {};  // activations, adds, average pools: no state, no scratch
  }
}

template <class Net, std::size_t... K>
constexpr KernelMemory steps_memory(std::index_sequence<K...>) {
  using plan = StaticPlan<typename Net::output>;
  KernelMemory total;
  ((total += kernel_memory<Net, plan::steps[K]>()), ...);
  return total;
}

template <class Op>
using state_t = typename std::remove_cvref_t<decltype(prepare_kernel(
    std::declval<const Op&>(), std::declval<const typename Op::Args&>(), std::declval<CpuContext&>()))>::value_type;

/// One step: the op, its arguments (views into the arena and the weights) and its kernel's state.
template <class Op>
struct Step {
  Op op;
  typename Op::Args args{};
  state_t<Op> state{};
};

template <class Net, std::size_t I>
using op_t = decltype(make_op<Net, I>());

}  // namespace model_detail

/// The standard ops typed models run: make_op makes each from a layer (InputOp: the model's
/// inputs). With standard_ops_not_typed they list every op of standard_ops, each once (checked
/// below, naming the op), so a new standard op is placed in one of the two.
template <class T>
using standard_ops_typed =
    std::variant<InputOp, linear_op<T>, conv_op<T>, batch_norm_op<T>, group_norm_op<T>, unary_op<T>, binary_op<T>,
                 max_pool2d_op<T>, avg_pool2d_op<T>, adaptive_avg_pool2d_op<T>>;
/// The standard ops typed models do not run (yet): no layer makes them.
template <class T>
using standard_ops_not_typed =
    std::variant<weight_op<T>, matmul_op<T>, reshape_op<T>, layer_norm_op<T>, rms_norm_op<T>, softmax_op<T>,
                 reduce_op<T>, permute_op<T>, slice_op<T>, concat_op<T>, pad_op<T>, upsample_op<T>, cast_op<T>,
                 embedding_op<T>, attention_op<T>, dropout_op<T>, nll_loss_op<T>, arg_reduce_op<T>, cumsum_op<T>,
                 hardmax_op<T>, compare_op<T>, where_op<T>>;

namespace model_detail {
template <class T, class Op>
consteval bool check_typed_support() {
  using op_checks_detail::always_false;
  constexpr bool typed = op_checks_detail::in_set<Op, standard_ops_typed<T>>;
  constexpr bool not_typed = op_checks_detail::in_set<Op, standard_ops_not_typed<T>>;
  if constexpr (!typed && !not_typed) {
    static_assert(
        always_false<Op>,
        "a standard op is in neither standard_ops_typed nor standard_ops_not_typed (modules/fixed/model.cppm): "
        "list it in one (in standard_ops_typed only with a layer and a make_op case)");
  } else if constexpr (typed && not_typed) {
    static_assert(always_false<Op>, "a standard op is in both standard_ops_typed and standard_ops_not_typed");
  }
  return true;
}
template <class T, class... Ops>
consteval bool check_typed_support(std::type_identity<std::variant<Ops...>>) {
  return (check_typed_support<T, Ops>() && ...);
}
static_assert(check_typed_support<float>(std::type_identity<standard_ops<float>>{}));

template <class Net, class Index>
struct steps_tuple;
template <class Net, std::size_t... K>
struct steps_tuple<Net, std::index_sequence<K...>> {
  using plan = StaticPlan<typename Net::output>;
  using type = std::tuple<Step<op_t<Net, plan::steps[K]>>...>;
};

// The weights bound to `slot` of a step's op: the parameter "scope.slot", or, for a slot
// "norm.<name>", the folded BatchNorm's "norm_scope.<name>". Not a template, so that every step of
// every model shares its code.
Result<TensorBinding> find_param(std::span<const ParamSpec> params, std::span<const std::byte* const> weights,
                                 std::string_view scope, std::string_view norm_scope, std::string_view slot) {
  constexpr std::string_view norm_prefix = "norm.";
  if (!norm_scope.empty() && slot.starts_with(norm_prefix)) {
    scope = norm_scope;
    slot.remove_prefix(norm_prefix.size());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string_view key = params[i].key;
    if (key.size() == scope.size() + 1 + slot.size() && key.starts_with(scope) && key[scope.size()] == '.' &&
        key.ends_with(slot)) {
      // Read only: the kernels view parameters as const.
      return TensorBinding{const_cast<std::byte*>(weights[i]), params[i].dtype, params[i].shape, 0};
    }
  }
  return fail(Errc::invalid_argument, "its op's parameter slot '", slot, "' is not a parameter of the typed model (",
              scope, ".", slot, ")");
}

// Each node's name (its layer's, or its kind), in node order.
template <class... Ns>
constexpr std::array<std::string_view, sizeof...(Ns)> node_names(TypeList<Ns...>) {
  return {name_of<typename Ns::layer>()...};
}

// The model's input nodes, in node order.
template <class Net>
constexpr auto input_nodes() {
  using plan = StaticPlan<typename Net::output>;
  constexpr std::size_t count = [] {
    std::size_t n = 0;
    for (const NodePlan& p : plan::nodes) n += p.role == Role::input ? 1 : 0;
    return n;
  }();
  std::array<std::size_t, count> out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < plan::n_nodes; ++i) {
    if (plan::nodes[i].role == Role::input) out[k++] = i;
  }
  return out;
}

// The input node named `name`, or no_node.
template <class Net>
constexpr std::size_t input_named(std::string_view name) {
  constexpr auto names = node_names(typename Net::nodes{});
  for (std::size_t i : input_nodes<Net>()) {
    if (names[i] == name) return i;
  }
  return no_node;
}

// The first name two inputs share, or empty.
template <class Net>
constexpr std::string_view shared_input_name() {
  constexpr auto names = node_names(typename Net::nodes{});
  constexpr auto inputs = input_nodes<Net>();
  for (std::size_t a = 0; a < inputs.size(); ++a) {
    for (std::size_t b = a + 1; b < inputs.size(); ++b) {
      if (names[inputs[a]] == names[inputs[b]]) return names[inputs[a]];
    }
  }
  return {};
}

// The first input not among `fed`, or empty.
template <class Net, std::size_t F>
constexpr std::string_view unfed_input(const std::array<std::string_view, F>& fed) {
  constexpr auto names = node_names(typename Net::nodes{});
  for (std::size_t i : input_nodes<Net>()) {
    bool found = false;
    for (std::string_view f : fed) found = found || f == names[i];
    if (!found) return names[i];
  }
  return {};
}

// The first name fed twice, or empty.
template <std::size_t F>
constexpr std::string_view fed_twice(const std::array<std::string_view, F>& fed) {
  for (std::size_t a = 0; a < F; ++a) {
    for (std::size_t b = a + 1; b < F; ++b) {
      if (fed[a] == fed[b]) return fed[a];
    }
  }
  return {};
}

/// True when each check holds; the static_asserts on them show the input's name.
template <Name Input>
inline constexpr bool inputs_named_apart = Input.empty();
template <Name Input>
inline constexpr bool is_an_input = false;
template <Name Input>
inline constexpr bool fed_once = Input.empty();
template <Name Input>
inline constexpr bool fed = Input.empty();

// Function templates, so that the messages show the names themselves.
template <Name Input>
consteval bool check_inputs_named_apart() {
  static_assert(inputs_named_apart<Input>, "two inputs of the typed model have the same name");
  return true;
}
template <Name Input, bool Found>
consteval bool check_is_an_input() {
  if constexpr (!Found) static_assert(is_an_input<Input>, "forward: the model has no input of this name");
  return true;
}
template <Name Input>
consteval bool check_fed_once() {
  static_assert(fed_once<Input>, "forward: an input is fed twice");
  return true;
}
template <Name Input>
consteval bool check_fed() {
  static_assert(fed<Input>, "forward: an input of the model is not fed");
  return true;
}
}  // namespace model_detail

/// Data for one input of a typed model, by name: `tf::feed<"x">(pixels)` (any contiguous range).
template <Name N, class T>
struct Feed {
  std::span<const T> data;
};
template <Name N, std::ranges::contiguous_range R>
constexpr Feed<N, std::remove_cv_t<std::ranges::range_value_t<R>>> feed(const R& data) {
  return {std::span<const std::remove_cv_t<std::ranges::range_value_t<R>>>(std::ranges::data(data),
                                                                           std::ranges::size(data))};
}

/// A typed model on the CPU. See the top of this file.
template <Value Output>
class Model {
 public:
  using network = Network<Output>;
  using plan = StaticPlan<Output>;
  using element = typename Output::element;
  /// The model's input nodes (indices into network::nodes), in node order.
  static constexpr auto inputs = model_detail::input_nodes<network>();
  static_assert(inputs.size() >= 1, "a typed model needs an input");
  static constexpr std::string_view shared_input_name = model_detail::shared_input_name<network>();
  static_assert(model_detail::check_inputs_named_apart<name_from<shared_input_name.size() + 1>(shared_input_name)>());
  /// The first input's value (the only one's, in a model with one input) and the value of the
  /// input named N.
  using input_value = typename model_detail::at<typename network::nodes, inputs[0]>::type;
  template <Name N>
  using input_value_of =
      typename model_detail::at<typename network::nodes, model_detail::input_named<network>(N.view())>::type;

  /// The activation arena (inputs and step outputs, reused by lifetime) and the weights' size.
  static constexpr std::size_t arena_bytes = plan::arena_bytes;
  static constexpr std::size_t param_bytes = network::param_bytes;
  /// The kernels' memory (packed weights, per-layer constants, scratch, GEMM workspace), planned
  /// from the layers' shapes for one thread: a member block, so that loading allocates nothing.
  static constexpr KernelMemory kernel_memory =
      model_detail::steps_memory<network>(std::make_index_sequence<plan::n_steps>{});
  static constexpr std::size_t kernel_memory_bytes = CpuContext::block_bytes(kernel_memory);
  /// Elements of the first input (the only one's, in a model with one input), of the input named
  /// N, and of the output.
  static constexpr std::size_t input_size = static_cast<std::size_t>(input_value::dims::numel);
  template <Name N>
  static constexpr std::size_t input_size_of = static_cast<std::size_t>(input_value_of<N>::dims::numel);
  static constexpr std::size_t output_size = static_cast<std::size_t>(Output::dims::numel);

  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// Binds `weights` (param_bytes, laid out as network::param_offsets, 64-byte aligned; read in
  /// place, so they must outlive the model) and prepares every kernel. A model loads once.
  Result<void> load(std::span<const std::byte> weights, CpuOptions options = {}) {
    if (loaded_) return fail(Errc::invalid_argument, "the typed model is loaded already");
    if (weights.size() != param_bytes) {
      return fail(Errc::invalid_argument, "weights: ", weights.size(), " bytes, but the model's parameters take ",
                  param_bytes, " (Network::param_bytes)");
    }
    if (reinterpret_cast<std::uintptr_t>(weights.data()) % network::param_alignment != 0) {
      return fail(Errc::invalid_argument, "weights: the buffer must be ", network::param_alignment,
                  "-byte aligned (alignas(", network::param_alignment, "))");
    }
    for (std::size_t i = 0; i < network::params.size(); ++i) weights_[i] = weights.data() + network::param_offsets[i];
    return prepare_all(options);
  }

  /// Binds the weights by PyTorch key from named tensors (the table a source made by
  /// tools/embed_weights declares, or any TensorRefs; read in place, so they must outlive the
  /// model): every parameter once, with its dtype and shape, aligned for its element type, and
  /// nothing else. Every problem is reported at once, one per line.
  Result<void> load(std::span<const TensorRef> tensors, CpuOptions options = {}) {
    if (loaded_) return fail(Errc::invalid_argument, "the typed model is loaded already");
    std::string problems;
    std::size_t n_problems = 0;
    Errc code = Errc::invalid_argument;
    auto problem = [&](Errc c, auto&&... parts) {
      if (n_problems++ == 0) code = c;
      problems += cat("\n  ", parts...);
    };
    for (std::size_t i = 0; i < network::params.size(); ++i) {
      const ParamSpec& p = network::params[i];
      const TensorRef* found = nullptr;
      for (const TensorRef& t : tensors) {
        if (t.name != p.key) continue;
        if (found != nullptr) {
          problem(Errc::duplicate, "'", p.key, "': given twice");
          break;
        }
        found = &t;
      }
      weights_[i] = nullptr;
      if (found == nullptr) {
        problem(Errc::not_found, "'", p.key, "': missing");
        continue;
      }
      const auto bytes = static_cast<std::size_t>(p.shape.numel()) * size_of(p.dtype);
      if (found->dtype != p.dtype || found->shape != p.shape) {
        problem(found->shape != p.shape ? Errc::shape_mismatch : Errc::dtype_mismatch, "'", p.key, "': tensor has ",
                found->dtype, " ", found->shape, " but the model expects ", p.dtype, " ", p.shape);
      } else if (found->data.size() != bytes) {
        problem(Errc::invalid_argument, "'", p.key, "': ", found->data.size(), " bytes for ", p.dtype, " ", p.shape,
                ", which takes ", bytes);
      } else if (bytes != 0 && reinterpret_cast<std::uintptr_t>(found->data.data()) % size_of(p.dtype) != 0) {
        problem(Errc::invalid_argument, "'", p.key, "': the data is not aligned for ", p.dtype);
      } else {
        weights_[i] = found->data.data();
      }
    }
    for (const TensorRef& t : tensors) {
      if (network::param_index(t.name) == network::params.size()) {
        problem(Errc::invalid_argument, "'", t.name, "': not a parameter of the model (", t.dtype, " ", t.shape, ")");
      }
    }
    if (n_problems != 0) {
      return fail(code, "cannot load the typed model's ", network::params.size(), " parameters from ", tensors.size(),
                  " tensors (", n_problems, n_problems == 1 ? " problem):" : " problems):", problems);
    }
    return prepare_all(options);
  }

  /// Runs a model with one input on `x` (input_size elements, row-major in the input's Dims). The
  /// result views the arena: valid until the next forward.
  Result<TensorView<const element>> forward(std::span<const typename input_value::element> x)
    requires(inputs.size() == 1)
  {
    if (!loaded_) return fail(Errc::invalid_argument, "the typed model is not loaded (call load first)");
    if (auto copied = copy_input<inputs[0]>(x); !copied) return std::move(copied).error();
    return run();
  }

  /// Runs the model on its inputs, each fed by name: `forward(tf::feed<"image">(pixels),
  /// tf::feed<"meta">(meta))`. Every input exactly once, each of its element type (checked by the
  /// compiler, naming the input) and size (checked here).
  template <Name... Ns, class... Ts>
  Result<TensorView<const element>> forward(const Feed<Ns, Ts>&... feeds) {
    static constexpr std::array<std::string_view, sizeof...(Ns)> names{Ns.view()...};
    static constexpr std::string_view twice = model_detail::fed_twice(names);
    static constexpr std::string_view missing = model_detail::unfed_input<network>(names);
    static_assert(
        (model_detail::check_is_an_input<Ns, model_detail::input_named<network>(Ns.view()) != no_node>() && ...));
    static_assert(model_detail::check_fed_once<name_from<twice.size() + 1>(twice)>());
    static_assert(model_detail::check_fed<name_from<missing.size() + 1>(missing)>());
    if (!loaded_) return fail(Errc::invalid_argument, "the typed model is not loaded (call load first)");
    Result<void> copied = ok();
    (void)((copied = feed_input<Ns>(feeds.data), static_cast<bool>(copied)) && ...);
    if (!copied) return std::move(copied).error();
    return run();
  }

  /// The output of the last forward.
  TensorView<const element> output() const {
    return {reinterpret_cast<const element*>(arena_ + plan::offset_of(plan::n_nodes - 1)), Output::dims::shape()};
  }
  bool loaded() const { return loaded_; }

 private:
  // Copies the data fed to input node I into its buffer.
  template <std::size_t I, class T>
  Result<void> copy_input(std::span<const T> x) {
    using V = typename model_detail::at<typename network::nodes, I>::type;
    static_assert(std::is_same_v<T, typename V::element>, "forward: an input is fed data of another element type");
    constexpr auto size = static_cast<std::size_t>(V::dims::numel);
    if (x.size() != size) {
      return fail(Errc::invalid_argument, "input '", V::layer::name.view(), "' has ", x.size(),
                  " elements but its shape ", V::dims::shape(), " takes ", size);
    }
    std::memcpy(arena_ + plan::offset_of(I), x.data(), sizeof(T) * size);
    return ok();
  }

  // Copies the data fed to the input named N (none: the compiler has said so already).
  template <Name N, class T>
  Result<void> feed_input(std::span<const T> x) {
    constexpr std::size_t node = model_detail::input_named<network>(N.view());
    if constexpr (node == no_node) {
      return ok();
    } else {
      return copy_input<node>(x);
    }
  }

  Result<TensorView<const element>> run() {
    std::apply([this](auto&... step) { (run_kernel(step.op, step.args, step.state, *cpu_), ...); }, steps_);
    return output();
  }

  template <std::size_t I>
  TensorBinding binding() {
    using V = typename model_detail::at<typename network::nodes, I>::type;
    return {arena_ + plan::offset_of(I), dtype_of<typename V::element>, V::dims::shape(), 0};
  }

  // What a step's preparation needs to know of its node beyond its bindings, as values, so that
  // the steps of one op type share one copy of prepare_op.
  struct StepSite {
    std::string_view name;        // the layer's name (its kind if unnamed): errors, parameter keys
    std::string_view kind;        // "linear", ...
    std::string_view norm_scope;  // the folded BatchNorm's name, or empty
    std::size_t declared_params;  // a custom layer's param_slots count; npos for teeny's layers
  };

  template <std::size_t K>
  Result<void> prepare_step() {
    constexpr std::size_t I = plan::steps[K];
    constexpr NodePlan p = plan::nodes[I];
    using V = typename model_detail::at<typename network::nodes, I>::type;
    using L = typename V::layer;
    StepSite site{model_detail::name_of<L>(), L::kind, {}, static_cast<std::size_t>(-1)};
    if constexpr (p.norm != no_node) {
      site.norm_scope =
          model_detail::name_of<typename model_detail::at<typename network::nodes, p.norm>::type::layer>();
    }
    if constexpr (L::op == LayerOp::custom) site.declared_params = network_detail::node_params<V>::get().size();

    std::array<TensorBinding, 3> inputs{};
    std::size_t n_inputs = 0;
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      ((inputs[n_inputs++] = binding<plan::nodes[I].inputs[S]>()), ...);
    }(std::make_index_sequence<p.n_inputs>{});
    if constexpr (p.residual != no_node) inputs[n_inputs++] = binding<p.residual>();

    auto& step = std::get<K>(steps_);
    step.op = model_detail::make_op<network, I>();
    return prepare_op(step, std::span<const TensorBinding>(inputs.data(), n_inputs), binding<I>(), site);
  }

  // Binds a step's parameters (by key: "name.slot", or the folded BatchNorm's for "norm.*"),
  // packs its arguments and prepares its kernel.
  template <class Op>
  Result<void> prepare_op(model_detail::Step<Op>& step, std::span<const TensorBinding> inputs, TensorBinding output,
                          const StepSite& site) {
    const auto where = [&] { return cat("node '", site.name, "' (", site.kind, ")"); };
    std::array<TensorBinding, 8> params{};
    const auto slots = param_names(step.op);
    if (slots.size() > params.size()) {
      return fail(Errc::unsupported, "its op has ", slots.size(), " parameter slots; a typed model binds at most ",
                  params.size())
          .context(where());
    }
    // A custom op's executable op must name the slots its layer declared (param_slots), which the
    // weights were laid out for.
    if (site.declared_params != static_cast<std::size_t>(-1) && slots.size() != site.declared_params) {
      return fail(Errc::invalid_argument, "its executable op names ", slots.size(),
                  " parameters (param_names) but its graph op's param_slots declares ", site.declared_params)
          .context(where());
    }
    for (std::size_t s = 0; s < slots.size(); ++s) {
      auto bound = model_detail::find_param(network::params, weights_, site.name, site.norm_scope, slots[s]);
      if (!bound) return std::move(bound).error().context(where());
      params[s] = *bound;
    }
    const OpBindings bindings{inputs, std::span<const TensorBinding>(params.data(), slots.size()), output};
    auto args = step.op.pack_args(bindings);
    if (!args) return std::move(args).error().context(where());
    step.args = *args;
    auto state = prepare_kernel(step.op, step.args, *cpu_);
    if (!state) return std::move(state).error().context(where());
    step.state = std::move(*state);
    return ok();
  }

  // One thread: the kernels' memory comes from the member block, planned to fit. More threads
  // need more than was planned (a workspace each, and the threads themselves): the heap.
  Result<void> prepare_all(CpuOptions options) {
    const bool planned = options.threads <= 1;
    cpu_.emplace(options, planned ? static_cast<cpu::Memory&>(block_) : cpu::heap_memory());
    if (!cpu_->ok()) return fail(Errc::out_of_memory, "cannot allocate the typed model's thread pool");
    cpu_->defer_reservations();
    auto prepared = prepare(std::make_index_sequence<plan::n_steps>{});
    if (prepared && !cpu_->commit_reservations()) {
      prepared = fail(Errc::out_of_memory, "cannot allocate the kernels' scratch and GEMM workspace");
    }
    if (!prepared && planned && block_.needed() > kernel_memory_bytes) {
      // A plan smaller than what the kernels took is teeny's bug, or a custom op's that does not
      // declare what its kernel takes: not the caller's.
      constexpr bool has_custom = [] {
        for (const NodePlan& p : plan::nodes) {
          if (p.op == LayerOp::custom) return true;
        }
        return false;
      }();
      return fail(has_custom ? Errc::invalid_argument : Errc::internal, "the typed model's kernels needed at least ",
                  block_.needed(), " bytes of memory, but ", kernel_memory_bytes,
                  " were planned (Model::kernel_memory_bytes)",
                  has_custom ? "; a custom layer's op whose kernel takes memory must declare it (memory<T>)" : "", ": ",
                  prepared.error().message());
    }
    if (!prepared) return prepared;
    loaded_ = true;
    return ok();
  }

  template <std::size_t... K>
  Result<void> prepare(std::index_sequence<K...>) {
    Result<void> result = ok();
    (void)((result = prepare_step<K>(), static_cast<bool>(result)) && ...);
    return result;
  }

  // Declared in the order they are needed: each is destroyed before what it takes memory from.
  alignas(plan::arena_alignment) std::byte arena_[arena_bytes]{};
  std::array<const std::byte*, network::params.size()> weights_{};  // each parameter's bytes
  alignas(cpu::Memory::alignment) std::byte kernel_block_[kernel_memory_bytes];
  cpu::MemoryBlock block_{kernel_block_, kernel_memory_bytes};
  std::optional<CpuContext> cpu_;
  typename model_detail::steps_tuple<network, std::make_index_sequence<plan::n_steps>>::type steps_{};
  bool loaded_ = false;
};

}  // namespace teeny::fixed
