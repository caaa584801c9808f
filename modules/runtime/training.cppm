// teeny.runtime:training — (training builds only) the backward half of a LoadedModel: output
// gradients, backward(), the training step replayed as one unit on a device, zero_grad, the
// parameters' gradients, and the plan's backward steps (which ops a gradient flows through, each
// one's backward kernels bound and prepared). LoadedModel (:loaded_model) declares these members;
// their definitions are here, so that a build without training compiles none of them.
export module teeny.runtime:training;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :backend;
import :loaded_model;

namespace teeny {

template <class Backend, OpSetType Ops>
Result<TensorBinding> LoadedModel<Backend, Ops>::output_grad(std::string_view name) const {
  if (!trainable()) return not_trainable();
  auto node = find_port(outputs_, name);
  if (!node) {
    return fail(Errc::not_found, "the model has no output '", name, "' (outputs: ", port_names(outputs_), ")");
  }
  if (current_->grads[*node].data == nullptr) {
    return fail(Errc::invalid_argument, "no gradient flows back from output '", name,
                "': no trained parameter comes before it");
  }
  return current_->grads[*node];
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::backward() {
  if (!trainable()) return not_trainable();
  if (!forward_ran_) return fail(Errc::invalid_argument, "backward() needs a forward() first");
  forward_ran_ = false;  // the activations a backward reads are the last forward's
  if constexpr (GraphBackend<Backend>) {
    if (graph_replay_) {
      return replay_captured(current_->backward_graph, "the backward", [&] { return run_backward_steps(); });
    }
  }
  if (auto ran = run_backward_steps(); !ran) return ran;
  if constexpr (ReportsRunErrors<Backend>) return backend_->take_error();
  return ok();
}

template <class Backend, OpSetType Ops>
template <TrainingStepParts Parts>
Result<void> LoadedModel<Backend, Ops>::training_step(std::span<const TensorRef> inputs, Parts& parts)
  requires DeviceTrainingBackend<Backend>
{
  if (!trainable()) return not_trainable();
  forward_ran_ = false;  // the backward is the step's own
  if (auto staged = stage_inputs(inputs, false); !staged) return staged;
  if (auto started = start_training_forward(); !started) return started;
  if (auto staged = parts.stage(); !staged) return staged;
  const auto queue = [&]() -> Result<void> {
    run_steps();
    if (auto cleared = clear_output_grads(); !cleared) return cleared;
    if (auto loss = parts.queue_loss(); !loss) return std::move(loss).error().context("the loss");
    if (auto cleared = zero_grad(); !cleared) return cleared;
    if (auto ran = run_backward_steps(); !ran) return ran;
    if (auto update = parts.queue_update(); !update) return std::move(update).error().context("the update");
    return ok();
  };
  if constexpr (GraphBackend<Backend>) {
    if (graph_replay_) {
      const auto key = static_cast<std::uint64_t>(parts.capture_key());
      if (current_->step_key != key) {
        current_->step_graph.reset();
        current_->step_key = key;
      }
      return replay_captured(current_->step_graph, "the training step", queue);
    }
  }
  if (auto ran = queue(); !ran) return ran;
  if constexpr (ReportsRunErrors<Backend>) return backend_->take_error();
  return ok();
}

template <class Backend, OpSetType Ops>
void LoadedModel<Backend, Ops>::zero_grad()
  requires(!DeviceMemoryBackend<Backend>)
{
  for (auto& p : params_) {
    if (p.trainable) std::memset(p.grad.data(), 0, p.grad.bytes());
  }
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::zero_grad()
  requires DeviceMemoryBackend<Backend>
{
  for (auto& p : params_) {
    if (!p.trainable) continue;
    if (auto cleared = clear({p.device_grad, p.tensor.dtype(), p.tensor.shape(), 0}); !cleared) {
      return std::move(cleared).error().context(cat("the gradient of '", p.key, "'"));
    }
  }
  return ok();
}

template <class Backend, OpSetType Ops>
std::vector<ParameterGradient> LoadedModel<Backend, Ops>::parameter_gradients()
  requires(!DeviceMemoryBackend<Backend>)
{
  std::vector<ParameterGradient> out;
  for (auto& p : params_) {
    if (!p.trainable) continue;
    out.push_back({p.key,
                   {p.tensor.data(), p.tensor.dtype(), p.tensor.shape(), 0},
                   {p.grad.data(), p.grad.dtype(), p.grad.shape(), 0}});
  }
  return out;
}

template <class Backend, OpSetType Ops>
std::vector<ParameterGradient> LoadedModel<Backend, Ops>::device_parameter_gradients()
  requires DeviceMemoryBackend<Backend>
{
  std::vector<ParameterGradient> out;
  for (auto& p : params_) {
    if (!p.trainable) continue;
    out.push_back({p.key,
                   {p.device, p.tensor.dtype(), p.tensor.shape(), 0},
                   {p.device_grad, p.tensor.dtype(), p.tensor.shape(), 0}});
  }
  return out;
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::copy_gradient(std::string_view key, std::span<std::byte> out) const {
  for (const Param& p : params_) {
    if (p.key != key) continue;
    if (!p.trainable) return fail(Errc::invalid_argument, "parameter '", key, "' is not trained: it has no gradient");
    if (out.size() != p.tensor.bytes()) {
      return fail(Errc::invalid_argument, "the gradient of '", key, "' (", p.tensor.dtype(), " ", p.tensor.shape(),
                  ") has ", p.tensor.bytes(), " bytes, but the buffer given for it has ", out.size());
    }
    if constexpr (DeviceMemoryBackend<Backend>) {
      if (out.empty()) return ok();
      return backend_->download(out.data(), p.device_grad, out.size());
    } else {
      std::memcpy(out.data(), p.grad.data(), out.size());
      return ok();
    }
  }
  return fail(Errc::not_found, "the model has no parameter '", key, "'");
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::set_output_grad(std::string_view name, std::span<const std::byte> grad) {
  auto binding = output_grad(name);
  if (!binding) return std::move(binding).error();
  const std::size_t bytes = static_cast<std::size_t>(binding->shape.numel()) * size_of(binding->dtype);
  if (grad.size() != bytes) {
    return fail(Errc::invalid_argument, "the gradient of output '", name, "' (", binding->dtype, " ", binding->shape,
                ") has ", bytes, " bytes, but the buffer given for it has ", grad.size());
  }
  if (bytes == 0) return ok();
  if constexpr (DeviceMemoryBackend<Backend>) {
    return backend_->upload(binding->data, grad.data(), bytes);
  } else {
    std::memcpy(binding->data, grad.data(), bytes);
    return ok();
  }
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::run_backward_steps() {
  for (auto& step : current_->backward) {
    for (const TensorBinding& grad : step.first_use) {
      if (auto cleared = clear(grad); !cleared) return cleared;
    }
    std::visit(
        [&]<class Op>(loaded_detail::BackwardStep<Backend, Op>& s) {
          if constexpr (BackwardKernelFor<Backend, Op>) {
            for (std::size_t i = 0; i < s.args.size(); ++i)
              run_backward_kernel(*s.op, s.args[i], s.states[i], *backend_);
          }
        },
        step.step);
  }
  return ok();
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::clear_output_grads() {
  for (const Port& port : outputs_) {
    if (auto cleared = clear(current_->grads[port.node]); !cleared) return cleared;
  }
  return ok();
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::clear(const TensorBinding& t) {
  const std::size_t bytes = static_cast<std::size_t>(t.shape.numel()) * size_of(t.dtype);
  if (t.data == nullptr || bytes == 0) return ok();
  if constexpr (DeviceTrainingBackend<Backend>) {
    return backend_->zero(t.data, bytes);
  } else {
    std::memset(t.data, 0, bytes);
    return ok();
  }
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::trace_gradients() {
  const auto& dag = lowered_.dag;
  const std::size_t n = dag.size();
  std::vector<bool> from_param(n, false);
  for (NodeId id : order_) {
    std::visit(
        [&]<class Op>(const Op& op) {
          if constexpr (!InputOpType<Op>) {
            for (std::size_t i = 0; i < param_names(op).size(); ++i)
              from_param[id] = from_param[id] || param_trainable(op, i);
          }
        },
        dag[id].op);
    for (NodeId in : dag[id].inputs) from_param[id] = from_param[id] || from_param[in];
  }
  std::vector<bool> to_output(n, false);
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    to_output[*it] = is_output(*it);
    for (const Use& use : dag.uses(*it)) to_output[*it] = to_output[*it] || to_output[use.consumer];
  }
  flows_.assign(n, false);
  for (NodeId id = 0; id < n; ++id) {
    flows_[id] = from_param[id] && to_output[id];
    if (!flows_[id]) continue;
    const bool differentiable = std::visit(
        [&]<class Op>(const Op& op) {
          if constexpr (InputOpType<Op>) {
            return false;
          } else if constexpr (BackwardKernelFor<Backend, Op>) {
            return has_backward(op);
          } else {
            return false;
          }
        },
        dag[id].op);
    if (!differentiable) {
      return fail(Errc::unsupported, "node '", dag[id].name, "' (", name_of(dag[id].op),
                  "): a trained parameter's gradient must pass through this op, which has no backward",
                  " on this backend");
    }
  }
  return ok();
}

template <class Backend, OpSetType Ops>
auto LoadedModel<Backend, Ops>::backward_entry(Plan& plan, NodeId id) -> Result<BackwardEntry> {
  const auto& node = lowered_.dag[id];
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> grad_inputs;
  for (NodeId in : node.inputs) {
    inputs.push_back(plan.values[in]);
    grad_inputs.push_back(flows_[in] ? plan.grads[in]
                                     : TensorBinding{nullptr, plan.values[in].dtype, plan.values[in].shape, 0});
  }
  std::vector<TensorBinding> params;
  std::vector<TensorBinding> grad_params;
  for (auto& p : params_) {
    if (p.node != id) continue;
    params.push_back({kernel_data(p), p.tensor.dtype(), p.tensor.shape(), 0});
    grad_params.push_back({p.trainable ? grad_data(p) : nullptr, p.tensor.dtype(), p.tensor.shape(), 0});
  }
  const BackwardBindings bindings{inputs, params, plan.values[id], plan.grads[id], grad_inputs, grad_params};
  return std::visit(
      [&]<class Op>(const Op& op) -> Result<BackwardEntry> {
        if constexpr (BackwardKernelFor<Backend, Op>) {
          // The seed's backward members, checked as the forward ones are: a named backward
          // kernel, dL/dy rows as the plan binds them (unpadded), and launch geometry.
          const ConcreteShape& y = plan.values[id].shape;
          if (!backward_kernel(op)) return fail(Errc::internal, "the op has a backward but kernel() names none");
          if (const std::int64_t stride = backward_grad_output_row_stride(op, y); stride != y.last()) {
            return fail(Errc::unsupported, "the op's backward reads dL/dy rows of ", stride,
                        " elements, but the plan binds them unpadded (", y.last(), ")");
          }
          loaded_detail::BackwardStep<Backend, Op> step;
          step.op = &op;
          const std::size_t launches = n_backward_launches(op);
          std::vector<ConcreteShape> shapes;
          for (const TensorBinding& in : inputs) shapes.push_back(in.shape);
          for (std::size_t launch = 0; launch < launches; ++launch) {
            const Dim3 grid = backward_grid_for_launch(op, launch, shapes, y);
            if (auto fits = check_geometry("backward launch", launch, grid, backward_block(op)); !fits)
              return std::move(fits).error();
            auto args = pack_backward_args_for_launch(op, launch, bindings);
            if (!args) return std::move(args).error().context(cat("backward launch ", launch));
            const LaunchSite site{node.name, launch, grid, backward_block(op)};
            auto state = prepare_backward_kernel_at(op, *args, *backend_, site);
            if (!state) return std::move(state).error();
            step.args.push_back(*args);
            step.states.push_back(std::move(*state));
          }
          return BackwardEntry{std::move(step), {}};
        } else {
          return fail(Errc::internal, "no backward kernel");
        }
      },
      node.op);
}

template <class Backend, OpSetType Ops>
Result<void> LoadedModel<Backend, Ops>::start_training_forward() {
  if (training_) ++step_;
  if constexpr (requires { backend_->set_phase(RunPhase{}); }) {
    backend_->set_phase(RunPhase{training_, seed_, step_});
  }
  for (std::size_t s = 0; s < current_->steps.size(); ++s) {
    Result<void> refreshed = std::visit(
        [&]<class Op>(loaded_detail::Step<Backend, Op>& step) -> Result<void> {
          if constexpr (KernelFor<Backend, Op>) {
            using State = typename loaded_detail::kernel_state<Backend, Op>::type;
            if constexpr (RefreshableKernel<Backend, Op, State>) {
              for (std::size_t i = 0; i < step.args.size(); ++i) {
                if (auto r = refresh_kernel(*step.op, step.args[i], step.states[i], *backend_); !r) return r;
              }
            }
          }
          return ok();
        },
        current_->steps[s]);
    if (!refreshed) return std::move(refreshed).error().context(cat("node '", lowered_.dag[order_[s]].name, "'"));
  }
  return ok();
}

}  // namespace teeny
