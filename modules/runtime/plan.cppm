// teeny.runtime:plan — how a LoadedModel makes its execution plans: per set of bound dims, every
// value's concrete shape, the activation arena shared by liveness (memory_plan), the parameter
// buffers (on a device: one allocation, uploaded), each step's typed arguments and prepared
// kernels, and the checks made once per plan (operands, launch geometry, parameter shapes). In
// training builds a plan also holds the gradient buffers and the backward steps. LoadedModel
// (:loaded_model) declares these members; their definitions are here.
export module teeny.runtime:plan;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :memory_plan;
import :backend;
import :loaded_model;

namespace teeny {

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::place_params() {
  if constexpr (DeviceMemoryBackend<Backend>) {
    constexpr std::size_t align = 256;
    const auto aligned = [](std::size_t n) { return (n + align - 1) / align * align; };
    std::size_t bytes = 0;
    for (const Param& p : params_) bytes += aligned(p.tensor.bytes()) * (p.trainable ? 2 : 1);  // and its gradient
    auto memory = backend_->allocate(bytes);
    if (!memory) return std::move(memory).error().context(cat("parameters (", bytes, " bytes)"));
    device_params_ = std::move(*memory);
    std::size_t offset = 0;
    for (Param& p : params_) {
      p.device = bytes_of(device_params_) + offset;
      offset += aligned(p.tensor.bytes());
    }
#if TEENY_TRAINING
    for (Param& p : params_) {
      if (!p.trainable) continue;
      p.device_grad = bytes_of(device_params_) + offset;
      offset += aligned(p.tensor.bytes());
      if (auto zeroed = clear({p.device_grad, p.tensor.dtype(), p.tensor.shape(), 0}); !zeroed) return zeroed;
    }
#endif
  }
  return upload_params();
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::upload_params() {
  if constexpr (DeviceMemoryBackend<Backend>) {
    for (Param& p : params_) {
      if (p.tensor.bytes() == 0) continue;
      if (auto copied = backend_->upload(p.device, p.tensor.data(), p.tensor.bytes()); !copied) {
        return std::move(copied).error().context(cat("parameter '", p.key, "'"));
      }
    }
  }
  return ok();
}

template <class Backend, OpSetType Ops>
auto LoadedModel<Backend, Ops>::plan_for(const Bindings& dims) -> Result<Plan*> {
  for (auto& p : plans_) {
    if (p->dims == dims) return current_ = p.get();
  }
  auto plan = build_plan(dims);
  if (!plan) return std::move(plan).error();
  plans_.push_back(std::move(*plan));
  return current_ = plans_.back().get();
}

template <class Backend, OpSetType Ops>
auto LoadedModel<Backend, Ops>::build_plan(const Bindings& dims) -> Result<std::unique_ptr<Plan>> {
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

  // 2. One arena, bytes reused by liveness. Outputs live to the end. A training plan's steps go on
  // through the backward (step S + k undoes forward step S - 1 - k): a value lives until the last
  // backward that reads it, and a gradient (requests n..2n) from the first backward step that
  // adds to it until its own node's backward.
  const std::size_t total_steps = order_.size();
#if TEENY_TRAINING
  const bool training_plan = trainable();
#else
  constexpr bool training_plan = false;
#endif
  std::vector<BufferRequest> requests(training_plan ? 2 * n : n);
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
  for (const Port& out : outputs_) requests[out.node].last_step = training_plan ? 2 * total_steps : total_steps;
  // A reshape (output_may_alias_input) of a value nothing else reads, neither an input nor an
  // output, takes that value's bytes, its own copy then skipped. Inference plans only: the
  // training plan's backward is not made for shared bytes.
  std::vector<NodeId> alias_of(n, n);  // the node whose bytes a value takes; n: its own
  const auto output_node = [&](NodeId id) {
    return std::any_of(outputs_.begin(), outputs_.end(), [&](const Port& p) { return p.node == id; });
  };
  if (!training_plan) {
    for (NodeId id : order_) {
      const auto& node = dag[id];
      const bool may_alias = std::visit(
          [&]<class Op>(const Op& op) {
            if constexpr (InputOpType<Op>) {
              return false;
            } else {
              return output_may_alias_input(op);
            }
          },
          node.op);
      if (!may_alias || node.inputs.empty() || output_node(id)) continue;
      const NodeId x = node.inputs[0];
      const NodeId root = alias_of[x] == n ? x : alias_of[x];  // a reshape of a reshape: the first's
      const bool plain = row_strides[x] == shapes[x].last() && row_strides[id] == shapes[id].last() &&
                         requests[root].bytes == requests[id].bytes;
      if (!plain || std::holds_alternative<InputOp>(dag[x].op) || output_node(x) || dag.uses(x).size() != 1) {
        continue;
      }
      alias_of[id] = root;
      requests[root].last_step = std::max(requests[root].last_step, requests[id].last_step);
      requests[id].bytes = 0;
    }
  }
#if TEENY_TRAINING
  if (training_plan) {
    const auto backward_step = [&](NodeId id) { return 2 * total_steps - 1 - step_of[id]; };
    for (NodeId id = 0; id < n; ++id) {
      bool read_by_backward = flows_[id];
      for (const Use& use : dag.uses(id)) read_by_backward = read_by_backward || flows_[use.consumer];
      if (read_by_backward) requests[id].last_step = std::max(requests[id].last_step, backward_step(id));
      if (!flows_[id]) continue;
      BufferRequest& grad = requests[n + id];
      grad.bytes = static_cast<std::size_t>(shapes[id].numel()) * size_of(output_dtype_of(dag[id].op));
      grad.first_step = is_output(id) ? total_steps : backward_step(id);
      for (const Use& use : dag.uses(id)) {
        if (flows_[use.consumer]) grad.first_step = std::min(grad.first_step, backward_step(use.consumer));
      }
      grad.last_step = backward_step(id);
    }
  }
#endif
  MemoryPlan memory = plan_memory(requests);
  for (NodeId id = 0; id < n; ++id) {
    if (alias_of[id] != n) memory.offsets[id] = memory.offsets[alias_of[id]];
  }
  auto arena = allocate(memory.arena_bytes);
  if (!arena) return std::move(arena).error().context("activation arena");
  plan->arena = std::move(*arena);
  plan->values.resize(n);
  for (NodeId id = 0; id < n; ++id) {
    plan->values[id] = TensorBinding{bytes_of(plan->arena) + memory.offsets[id], output_dtype_of(dag[id].op),
                                     shapes[id], row_strides[id]};
  }
#if TEENY_TRAINING
  if (training_plan) {
    plan->grads.resize(n);
    for (NodeId id = 0; id < n; ++id) {
      void* data = flows_[id] ? bytes_of(plan->arena) + memory.offsets[n + id] : nullptr;
      plan->grads[id] = TensorBinding{data, output_dtype_of(dag[id].op), shapes[id], 0};
    }
  }
#endif

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
            return first_plan ? add_params(id, op, in_shapes, shapes[id]) : check_params(id, op, in_shapes, shapes[id]);
          }
        },
        node.op);
    if (!made) return std::move(made).error().context(cat("node '", node.name, "'"));
  }
  if (first_plan) {
    if (auto placed = place_params(); !placed) return std::move(placed).error();
    if (initial_weights_ != nullptr) {  // load(..., weights): in place before the kernels pack them
      if (auto copied = copy_weights(*initial_weights_, {}); !copied) return std::move(copied).error();
    }
  }

  // 4. Steps: typed kernel arguments bound once; kernel state prepared.
  for (NodeId id : order_) {
    const auto& node = dag[id];
    std::vector<TensorBinding> in_bindings;
    for (NodeId in : node.inputs) in_bindings.push_back(plan->values[in]);
    std::vector<TensorBinding> param_bindings;
    for (auto& p : params_) {
      if (p.node == id) {
        param_bindings.push_back({kernel_data(p), p.tensor.dtype(), p.tensor.shape(), 0});
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
            auto grids = check_launches(op, launches, in_bindings, plan->values[id].shape);
            if (!grids) return std::move(grids).error();
            s.grids = std::move(*grids);
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
#if TEENY_TRAINING
  if (training_plan) {
    std::vector<std::vector<TensorBinding>> first_use(total_steps);  // by backward step
    for (NodeId id = 0; id < n; ++id) {
      if (flows_[id] && !is_output(id)) first_use[requests[n + id].first_step - total_steps].push_back(plan->grads[id]);
    }
    for (std::size_t k = 0; k < total_steps; ++k) {
      const NodeId id = order_[total_steps - 1 - k];
      if (!flows_[id]) continue;
      auto entry = backward_entry(*plan, id);
      if (!entry) return std::move(entry).error().context(cat("node '", dag[id].name, "' (", name_of(dag[id].op), ")"));
      entry->first_use = std::move(first_use[k]);
      plan->backward.push_back(std::move(*entry));
    }
  }
#endif

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

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::check_operands(const Dag<Ops>& dag) {
  for (NodeId id = 0; id < dag.size(); ++id) {
    const std::size_t reads = std::visit(
        []<class Op>(const Op& op) -> std::size_t {
          if constexpr (InputOpType<Op>) {
            return 0;
          } else {
            return op.n_activation_inputs();
          }
        },
        dag[id].op);
    if (reads != dag[id].inputs.size()) {
      return fail(Errc::invalid_argument, "node '", dag[id].name, "' (", name_of(dag[id].op), ") reads ", reads,
                  " activation input(s) (its n_activation_inputs), but the lowered DAG gives it ",
                  dag[id].inputs.size());
    }
  }
  return ok();
}

template <class Backend, OpSetType Ops>
template <class Op>
Result<std::vector<Dim3>> LoadedModel<Backend, Ops>::check_launches(const Op& op, std::size_t launches,
                                                                    std::span<const TensorBinding> inputs,
                                                                    const ConcreteShape& output) {
  if (op.kernel().forward.name.empty()) return fail(Errc::internal, "the op's kernel() names no forward kernel");
  if (launches == 0) return fail(Errc::internal, "the op has n_launches() == 0");
  std::vector<ConcreteShape> shapes;
  for (const TensorBinding& in : inputs) shapes.push_back(in.shape);
  std::vector<Dim3> grids;
  for (std::size_t launch = 0; launch < launches; ++launch) {
    grids.push_back(grid_for_launch(op, launch, shapes, output));
    if (auto fits = check_geometry("launch", launch, grids.back(), op.block()); !fits) {
      return std::move(fits).error();
    }
  }
  return grids;
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::check_geometry(std::string_view what, std::size_t launch, const Dim3& grid,
                                                       const Dim3& block) {
  if (grid.volume() == 0 || block.volume() == 0 || block.volume() > 1024) {
    return fail(Errc::internal, what, " ", launch, " has grid ", to_string(grid), " and block ", to_string(block),
                ": a launch needs at least one block of 1 to 1024 threads");
  }
  return ok();
}

template <class Backend, OpSetType Ops>
template <class Op>
Result<void> LoadedModel<Backend, Ops>::add_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in,
                                                   const ConcreteShape& out) {
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
    Param param{lowered_.param_key(id, names[i]), id, std::move(*tensor), false, Tensor{}};
#if TEENY_TRAINING
    if (trainable() && param_trainable(op, i)) {
      param.trainable = true;
      if constexpr (!DeviceMemoryBackend<Backend>) {  // a device's gradients are in its memory (place_params)
        auto grad = Tensor::zeros(param.tensor.dtype(), shapes[i]);
        if (!grad) return std::move(grad).error().context(cat("gradient of '", param.key, "'"));
        param.grad = std::move(*grad);
      }
    }
#endif
    params_.push_back(std::move(param));
  }
  return ok();
}

template <class Backend, OpSetType Ops>
template <class Op>
Result<void> LoadedModel<Backend, Ops>::check_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in,
                                                     const ConcreteShape& out) {
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

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::prepare(Plan& plan) {
  for (std::size_t s = 0; s < plan.steps.size(); ++s) {
    Result<void> prepared = std::visit(
        [&]<class Op>(loaded_detail::Step<Backend, Op>& step) -> Result<void> {
          if constexpr (KernelFor<Backend, Op>) {
            step.states.clear();
            for (std::size_t i = 0; i < step.args.size(); ++i) {
              const LaunchSite site{lowered_.dag[order_[s]].name, i, step.grids[i], step.op->block()};
              auto state = prepare_kernel_at(*step.op, step.args[i], *backend_, site);
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

}  // namespace teeny
