// teeny.runtime:loaded_model — a lowered graph loaded on a backend: parameters, execution plans
// and forward with named tensors.
//
// Loading binds the symbolic dims (e.g. {"batch", 64}) and builds an execution plan: every value's
// concrete shape, one activation arena whose bytes are reused by liveness (memory_plan), the
// parameter buffers, and every step's typed kernel arguments and prepared kernel state (e.g. packed
// weights). forward() then only copies the inputs in and runs the steps: no heap allocation.
// Inputs of other sizes get (and keep) a plan of their own, built on first use.
//
//   auto model = LoadedModel<CpuContext, standard_ops<float>>::load(graph, std::move(*lowered),
//                                                                  CpuContext({.threads = 2}), {{"batch", 64}});
//   model->load_weights(*SafetensorsFile::open("mlp.safetensors"));     // strict by default
//   model->forward(inputs);                   // std::span<const TensorRef>, named like the graph's inputs
//   auto logits = model->output("logits");    // Result<TensorBinding> into the arena
module;
#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>
export module teeny.runtime:loaded_model;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.io;
import :memory_plan;

export namespace teeny {

/// A backend `B` runs op `Op`: prepare_kernel(op, args, backend) -> Result<State> once per plan
/// (after weights change too), then run_kernel(op, args, state, backend) per forward.
template <class B, class Op>
concept KernelFor = RuntimeOp<Op> && requires(B& backend, const Op& op, const typename Op::Args& args) {
  requires is_result_v<std::remove_cvref_t<decltype(prepare_kernel(op, args, backend))>>;
  requires requires(typename std::remove_cvref_t<decltype(prepare_kernel(op, args, backend))>::value_type& state) {
    run_kernel(op, args, state, backend);
  };
};

namespace loaded_detail {
template <class B, class Op>
struct kernel_state {
  using type = typename std::remove_cvref_t<decltype(prepare_kernel(
      std::declval<const Op&>(), std::declval<const typename Op::Args&>(), std::declval<B&>()))>::value_type;
};

// A plan step: the op, its bound arguments and its prepared kernel state, one of each per launch
// (a concat launches once per input; inputs: nothing to run).
template <class B, class Op>
struct Step {
  const Op* op = nullptr;
  std::vector<typename Op::Args> args;
  std::vector<typename kernel_state<B, Op>::type> states;
};
template <class B>
struct Step<B, InputOp> {
  const InputOp* op = nullptr;
};

template <class B, class Ops>
struct step_variant;
template <class B, class... Ops>
struct step_variant<B, std::variant<Ops...>> {
  using type = std::variant<Step<B, Ops>...>;
};

template <class B, class Ops>
inline constexpr bool backend_runs_all = false;
template <class B, class... Ops>
inline constexpr bool backend_runs_all<B, std::variant<Ops...>> = ((InputOpType<Ops> || KernelFor<B, Ops>) && ...);
}  // namespace loaded_detail

/// What loading made: sizes of the arena (with and without reuse) and of the parameters.
/// A tensor with a name: what the Model concept's forward takes and returns.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct PlanStats {
  std::size_t steps = 0;              // kernel launches per forward
  std::size_t arena_bytes = 0;        // activation arena, memory reused by liveness
  std::size_t naive_arena_bytes = 0;  // one buffer per value
  std::size_t parameter_bytes = 0;
  std::int64_t parameter_count = 0;  // elements of all parameter buffers
};

/// Wall time of one DAG node's kernel launches, summed over the forwards run while profiling.
struct StepTime {
  std::string node;  // the DAG node's name (a graph node's, or a fused group's)
  std::string op;    // its op, as name_of() spells it
  std::int64_t nanoseconds = 0;
};

template <class Backend, OpSetType Ops>
  requires loaded_detail::backend_runs_all<Backend, Ops>
class LoadedModel {
 public:
  /// Named input/output of a graph and the DAG node that holds it.
  struct Port {
    std::string name;
    NodeId node;
  };

  static Result<LoadedModel> load(const Graph& graph, Lowered<Ops> lowered, Backend backend, const Bindings& dims) {
    LoadedModel model;
    model.lowered_ = std::move(lowered);
    model.backend_ = std::make_unique<Backend>(std::move(backend));
    auto order = model.lowered_.dag.topological_order();
    if (!order) return std::move(order).error();
    model.order_.assign(order->begin(), order->end());
    for (NodeId g : graph.inputs()) model.inputs_.push_back({graph.dag()[g].name, model.lowered_.value_of(g)});
    for (const auto& out : graph.outputs()) model.outputs_.push_back({out.name, model.lowered_.value_of(out.node)});
    auto plan = model.plan_for(dims);
    if (!plan) return std::move(plan).error();
    return model;
  }

  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }
  const Dag<Ops>& dag() const { return lowered_.dag; }
  Backend& backend() { return *backend_; }
  /// Statistics of the plan in use.
  PlanStats stats() const { return current_->stats; }

  /// Every parameter: its state_dict key, shape and dtype, in DAG order.
  std::vector<TensorRef> parameters() const {
    std::vector<TensorRef> refs;
    for (const auto& p : params_) refs.push_back(TensorRef::of(p.key, p.tensor));
    return refs;
  }

  /// Turns per-step timing on or off; either way the counters restart from zero. Timing reads
  /// the steady clock twice per step and allocates nothing per forward.
  void set_profiling(bool on) {
    step_ns_.assign(on ? order_.size() : 0, 0);
    profiled_forwards_ = 0;
  }
  /// Forwards run since profiling was turned on.
  std::int64_t profiled_forwards() const { return profiled_forwards_; }
  /// Per-step times in execution order (inputs, which run nothing, left out); empty when
  /// profiling is off.
  std::vector<StepTime> profile() const {
    std::vector<StepTime> times;
    for (std::size_t s = 0; s < step_ns_.size(); ++s) {
      const auto& node = lowered_.dag[order_[s]];
      if (std::holds_alternative<InputOp>(node.op)) continue;
      times.push_back({node.name, std::string(name_of(node.op)), step_ns_[s]});
    }
    return times;
  }

  /// Loads parameters by key (`{node}.{slot}`); strict by default (see load_parameters). Kernels
  /// are prepared again afterwards (packed weights).
  Result<LoadReport> load_weights(const SafetensorsFile& file, LoadOptions options = {}) {
    std::vector<ParamTarget> targets;
    for (auto& p : params_) {
      targets.push_back({p.key, p.tensor.dtype(), p.tensor.shape(), {p.tensor.data(), p.tensor.bytes()}});
    }
    auto report = load_parameters(file, targets, options);
    if (!report) return report;
    for (auto& plan : plans_) {
      if (auto prepared = prepare(*plan); !prepared) return std::move(prepared).error();
    }
    return report;
  }

  /// Writes every parameter to a safetensors file (a state_dict PyTorch can load).
  Result<void> save_weights(const std::string& path) const { return save_safetensors(path, parameters()); }

  /// The Model concept's types: named tensors in, named tensors out.
  using Input = std::vector<NamedTensor>;
  using Output = std::vector<NamedTensor>;

  /// Model::forward: runs `inputs` and copies every output out of the arena into its own tensor
  /// (which allocates; the span overload below does not).
  Result<Output> forward(Input inputs) {
    std::vector<TensorRef> refs;
    for (const NamedTensor& in : inputs) refs.push_back(TensorRef::of(in.name, in.tensor));
    if (auto ran = forward(std::span<const TensorRef>(refs)); !ran) return std::move(ran).error();
    Output outputs;
    for (const Port& port : outputs_) {
      const TensorBinding& value = current_->values[port.node];
      if (value.row_stride != 0 && value.row_stride != value.shape.last()) {
        return fail(Errc::unsupported, "output '", port.name, "' has padded rows; read it with output()");
      }
      auto tensor = Tensor::zeros(value.dtype, value.shape);
      if (!tensor) return std::move(tensor).error().context(cat("output '", port.name, "'"));
      if (tensor->bytes() != 0) std::memcpy(tensor->data(), value.data, tensor->bytes());
      outputs.push_back({port.name, std::move(*tensor)});
    }
    return outputs;
  }

  /// Runs the model. Inputs are matched by name to the graph's inputs; their shapes bind the
  /// symbolic dims. With the shapes of the plan in use this allocates nothing.
  Result<void> forward(std::span<const TensorRef> inputs) {
    if (inputs.size() != inputs_.size()) {
      return fail(Errc::invalid_argument, "the model takes ", inputs_.size(), " input(s) (", port_names(inputs_),
                  "), got ", inputs.size());
    }
    if (!current_matches(inputs)) {
      auto switched = switch_plan(inputs);
      if (!switched) return switched;
    }
    for (const TensorRef& in : inputs) {
      const TensorBinding& dst = current_->values[*find_port(inputs_, in.name)];
      std::memcpy(dst.data, in.data.data(), in.data.size());
    }
    const bool profiling = !step_ns_.empty();
    for (std::size_t s = 0; s < current_->steps.size(); ++s) {
      const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      std::visit(
          [&]<class Op>(loaded_detail::Step<Backend, Op>& step) {
            if constexpr (!InputOpType<Op>) {
              for (std::size_t i = 0; i < step.args.size(); ++i) {
                run_kernel(*step.op, step.args[i], step.states[i], *backend_);
              }
            }
          },
          current_->steps[s]);
      if (profiling) step_ns_[s] += std::chrono::nanoseconds(std::chrono::steady_clock::now() - start).count();
    }
    if (profiling) ++profiled_forwards_;
    return ok();
  }

  /// An output of the last forward, in the arena (valid until the next forward).
  Result<TensorBinding> output(std::string_view name) const {
    auto node = find_port(outputs_, name);
    if (!node)
      return fail(Errc::not_found, "the model has no output '", name, "' (outputs: ", port_names(outputs_), ")");
    return current_->values[*node];
  }

 private:
  struct Param {
    std::string key;
    NodeId node;
    Tensor tensor;
  };
  struct Plan {
    Bindings dims;
    Buffer arena;
    std::vector<TensorBinding> values;  // per DAG node
    std::vector<typename loaded_detail::step_variant<Backend, Ops>::type> steps;
    PlanStats stats;
  };

  LoadedModel() = default;

  static std::optional<NodeId> find_port(const std::vector<Port>& ports, std::string_view name) {
    for (const Port& p : ports) {
      if (p.name == name) return p.node;
    }
    return std::nullopt;
  }
  static std::string port_names(const std::vector<Port>& ports) {
    std::string names;
    for (const Port& p : ports) names += (names.empty() ? "'" : ", '") + p.name + "'";
    return names;
  }

  bool current_matches(std::span<const TensorRef> inputs) const {
    for (const TensorRef& in : inputs) {
      auto node = find_port(inputs_, in.name);
      if (!node) return false;
      const TensorBinding& b = current_->values[*node];
      if (b.shape != in.shape || b.dtype != in.dtype) return false;
    }
    return true;
  }

  // Checks the inputs against the graph, binds the symbolic dims from their shapes and selects
  // (or builds) the plan for those dims.
  Result<void> switch_plan(std::span<const TensorRef> inputs) {
    Bindings dims;
    for (const TensorRef& in : inputs) {
      auto node = find_port(inputs_, in.name);
      if (!node) {
        return fail(Errc::not_found, "the model has no input '", in.name, "' (inputs: ", port_names(inputs_), ")");
      }
      const auto& op = std::get<InputOp>(lowered_.dag[*node].op);
      if (in.dtype != op.dtype) {
        return fail(Errc::dtype_mismatch, "input '", in.name, "' is ", in.dtype, " but the model takes ", op.dtype);
      }
      if (auto matched = match_shape(op.shape, in.shape, dims); !matched) {
        return std::move(matched).error().context(cat("input '", in.name, "'"));
      }
      if (in.data.size() != static_cast<std::size_t>(in.shape.numel()) * size_of(in.dtype)) {
        return fail(Errc::invalid_argument, "input '", in.name, "' has ", in.data.size(), " bytes for shape ", in.shape,
                    " ", in.dtype);
      }
    }
    auto plan = plan_for(dims);
    if (!plan) return std::move(plan).error();
    return ok();
  }

  // The plan for `dims`, built on first use.
  Result<Plan*> plan_for(const Bindings& dims) {
    for (auto& p : plans_) {
      if (p->dims == dims) return current_ = p.get();
    }
    auto plan = build_plan(dims);
    if (!plan) return std::move(plan).error();
    plans_.push_back(std::move(*plan));
    return current_ = plans_.back().get();
  }

  Result<std::unique_ptr<Plan>> build_plan(const Bindings& dims) {
    auto plan = std::make_unique<Plan>();
    plan->dims = dims;
    const auto& dag = lowered_.dag;
    const std::size_t n = dag.size();
    std::vector<ConcreteShape> shapes(n);
    std::vector<std::size_t> step_of(n, 0);
    for (std::size_t s = 0; s < order_.size(); ++s) step_of[order_[s]] = s;

    // 1. Concrete shapes, in topological order.
    for (NodeId id : order_) {
      const auto& node = dag[id];
      auto bound = output_shape_of(node.op).bind(dims);
      if (!bound) return std::move(bound).error().context(cat("node '", node.name, "'"));
      std::vector<ConcreteShape> in_shapes;
      for (NodeId in : node.inputs) in_shapes.push_back(shapes[in]);
      shapes[id] = std::visit(
          [&]<class Op>(const Op& op) {
            if constexpr (InputOpType<Op>) {
              return *bound;
            } else {
              return compute_concrete_output_shape(op, in_shapes, *bound);
            }
          },
          node.op);
    }

    // 2. One arena, bytes reused by liveness. Outputs live to the end.
    std::vector<BufferRequest> requests(n);
    std::vector<std::int64_t> row_strides(n);
    for (NodeId id = 0; id < n; ++id) {
      const auto& node = dag[id];
      row_strides[id] = std::visit(
          [&]<class Op>(const Op& op) -> std::int64_t {
            if constexpr (InputOpType<Op>) {
              return shapes[id].last();
            } else {
              return forward_output_row_stride(op, shapes[id]);
            }
          },
          node.op);
      const std::int64_t last = std::max<std::int64_t>(shapes[id].last(), 1);
      const std::int64_t rows = shapes[id].numel() / last;
      requests[id].bytes =
          static_cast<std::size_t>(rows * std::max(row_strides[id], last)) * size_of(output_dtype_of(node.op));
      requests[id].first_step = std::holds_alternative<InputOp>(node.op) ? 0 : step_of[id];
      requests[id].last_step = requests[id].first_step;
      for (const Use& use : dag.uses(id))
        requests[id].last_step = std::max(requests[id].last_step, step_of[use.consumer]);
    }
    for (const Port& out : outputs_) requests[out.node].last_step = order_.size();
    const MemoryPlan memory = plan_memory(requests);
    auto arena = Buffer::allocate(memory.arena_bytes);
    if (!arena) return std::move(arena).error().context("activation arena");
    plan->arena = std::move(*arena);
    plan->values.resize(n);
    for (NodeId id = 0; id < n; ++id) {
      plan->values[id] = TensorBinding{plan->arena.data() + memory.offsets[id], output_dtype_of(dag[id].op), shapes[id],
                                       row_strides[id]};
    }

    // 3. Parameters (allocated with the first plan; later plans must agree on their shapes).
    const bool first_plan = params_.empty() && plans_.empty();
    for (NodeId id : order_) {
      const auto& node = dag[id];
      std::vector<ConcreteShape> in_shapes;
      for (NodeId in : node.inputs) in_shapes.push_back(shapes[in]);
      auto made = std::visit(
          [&]<class Op>(const Op& op) -> Result<void> {
            if constexpr (InputOpType<Op>) {
              return ok();
            } else {
              return first_plan ? add_params(id, op, in_shapes, shapes[id])
                                : check_params(id, op, in_shapes, shapes[id]);
            }
          },
          node.op);
      if (!made) return std::move(made).error().context(cat("node '", node.name, "'"));
    }

    // 4. Steps: typed kernel arguments bound once; kernel state prepared.
    for (NodeId id : order_) {
      const auto& node = dag[id];
      std::vector<TensorBinding> in_bindings;
      for (NodeId in : node.inputs) in_bindings.push_back(plan->values[in]);
      std::vector<TensorBinding> param_bindings;
      for (auto& p : params_) {
        if (p.node == id) {
          param_bindings.push_back({p.tensor.data(), p.tensor.dtype(), p.tensor.shape(), 0});
        }
      }
      auto step = std::visit(
          [&]<class Op>(const Op& op) -> Result<typename loaded_detail::step_variant<Backend, Ops>::type> {
            loaded_detail::Step<Backend, Op> s;
            s.op = &op;
            if constexpr (!InputOpType<Op>) {
              // Stored bindings outlive the call: the views in Args point into the arena and params.
              const OpBindings bindings{in_bindings, param_bindings, plan->values[id]};
              const std::size_t launches = n_launches(op);
              for (std::size_t launch = 0; launch < launches; ++launch) {
                auto args = pack_args_for_launch(op, launch, bindings);
                if (!args && launches > 1) return std::move(args).error().context(cat("launch ", launch));
                if (!args) return std::move(args).error();
                s.args.push_back(*args);
              }
            }
            return s;
          },
          node.op);
      if (!step) return std::move(step).error().context(cat("node '", node.name, "' (", name_of(node.op), ")"));
      plan->steps.push_back(std::move(*step));
    }
    if (auto prepared = prepare(*plan); !prepared) return std::move(prepared).error();

    plan->stats.steps = 0;
    for (const auto& step : plan->steps) {
      plan->stats.steps += std::visit(
          []<class Op>(const loaded_detail::Step<Backend, Op>& s) -> std::size_t {
            if constexpr (InputOpType<Op>) {
              return 0;
            } else {
              return s.args.size();
            }
          },
          step);
    }
    plan->stats.arena_bytes = memory.arena_bytes;
    plan->stats.naive_arena_bytes = memory.naive_bytes;
    for (const auto& p : params_) {
      plan->stats.parameter_bytes += p.tensor.bytes();
      plan->stats.parameter_count += p.tensor.numel();
    }
    return plan;
  }

  template <class Op>
  Result<void> add_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in, const ConcreteShape& out) {
    const auto shapes = op.param_shapes(in, out);
    const auto names = param_names(op);
    if (names.size() != shapes.size()) {
      return fail(Errc::internal, "op declares ", shapes.size(), " parameter shapes but ", names.size(), " names");
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      auto tensor = Tensor::zeros(param_dtype(op, i), shapes[i]);
      if (!tensor) return std::move(tensor).error();
      if (auto init = param_init_data(op, i)) {
        if (init->size() != tensor->bytes()) {
          return fail(Errc::internal, "init data of parameter '", names[i], "' has ", init->size(), " bytes, not ",
                      tensor->bytes());
        }
        std::memcpy(tensor->data(), init->data(), init->size());
      }
      params_.push_back({lowered_.param_key(id, names[i]), id, std::move(*tensor)});
    }
    return ok();
  }

  template <class Op>
  Result<void> check_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in, const ConcreteShape& out) {
    const auto shapes = op.param_shapes(in, out);
    std::size_t i = 0;
    for (const auto& p : params_) {
      if (p.node != id) continue;
      if (i >= shapes.size() || shapes[i] != p.tensor.shape()) {
        return fail(Errc::shape_mismatch, "parameter '", p.key, "' would change shape with these input sizes");
      }
      ++i;
    }
    return ok();
  }

  Result<void> prepare(Plan& plan) {
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
      Result<void> prepared = std::visit(
          [&]<class Op>(loaded_detail::Step<Backend, Op>& step) -> Result<void> {
            if constexpr (!InputOpType<Op>) {
              step.states.clear();
              for (const auto& args : step.args) {
                auto state = prepare_kernel(*step.op, args, *backend_);
                if (!state) return std::move(state).error();
                step.states.push_back(std::move(*state));
              }
            }
            return ok();
          },
          plan.steps[s]);
      if (!prepared) return std::move(prepared).error().context(cat("node '", lowered_.dag[order_[s]].name, "'"));
    }
    return ok();
  }

  Lowered<Ops> lowered_;
  std::unique_ptr<Backend> backend_;
  std::vector<NodeId> order_;
  std::vector<Port> inputs_;
  std::vector<Port> outputs_;
  std::vector<Param> params_;
  std::vector<std::unique_ptr<Plan>> plans_;
  Plan* current_ = nullptr;
  std::vector<std::int64_t> step_ns_;  // per step of order_, while profiling
  std::int64_t profiled_forwards_ = 0;
};

}  // namespace teeny
