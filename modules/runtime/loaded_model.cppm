// teeny.runtime:loaded_model — a lowered graph loaded on a backend: parameters, execution plans
// and forward with named tensors. (One coherent thing at about 700 lines: the class's declaration
// with its forward path; plan building and the training half are defined in their own partitions.)
//
// Loading binds the symbolic dims (e.g. {"batch", 64}) and builds an execution plan: every value's
// concrete shape, one activation arena whose bytes are reused by liveness (memory_plan), the
// parameter buffers, and every step's typed kernel arguments and prepared kernel state (e.g. packed
// weights). forward() then only copies the inputs in and runs the steps: no heap allocation.
// Inputs of other sizes get (and keep) a plan of their own, built on first use. What a backend may
// offer besides kernels is :backend's; the plan-building members declared here are defined in
// :plan and, in training builds, the backward ones in :training.
//
//   auto model = LoadedModel<CpuContext, standard_ops<float>>::load(graph, std::move(*lowered),
//                                                                  CpuContext({.threads = 2}), {{"batch", 64}});
//   model->load_weights(*SafetensorsFile::open("mlp.safetensors"));     // strict by default
//   model->load_weights(weights);             // or tensors in memory: std::span<const TensorRef>
//   const TensorRef in[] = {TensorRef::of<float>("x", pixels, {64, 1, 28, 28})};
//   model->forward(in);                       // named like the graph's inputs
//   auto logits = model->output<float>("logits");   // Result<TensorView<const float>> into the arena
//   auto raw = model->output("logits");       // Result<TensorBinding>: dtype, shape, row stride
export module teeny.runtime:loaded_model;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.io;
import :memory_plan;
import :backend;

export namespace teeny {

template <class Backend, OpSetType Ops>
class LoadedModel {
  static_assert(runs_op_set<Backend, Ops>,
                "every op of the op set needs a kernel on the backend (and, in training builds, a backward kernel "
                "where it has a backward)");

 public:
  /// Named input/output of a graph and the DAG node that holds it.
  struct Port {
    std::string name;
    NodeId node;
  };

  /// Loads `lowered` for the sizes in `dims`. With `weights`, the parameters are loaded from them
  /// (strictly, as load_weights does) before the kernels are prepared, so that weights are packed
  /// once; without, they keep their initial values until load_weights.
  static Result<LoadedModel> load(const Graph& graph, Lowered<Ops> lowered, Backend backend, const Bindings& dims,
                                  const ParamSource* weights = nullptr) {
    LoadedModel model;
    model.lowered_ = std::move(lowered);
    model.backend_ = std::make_unique<Backend>(std::move(backend));
    auto order = model.lowered_.dag.topological_order();
    if (!order) return std::move(order).error();
    model.order_.assign(order->begin(), order->end());
    if (auto wired = check_operands(model.lowered_.dag); !wired) return std::move(wired).error();
    for (NodeId g : graph.inputs()) model.inputs_.push_back({graph.dag()[g].name, model.lowered_.value_of(g)});
    for (const auto& out : graph.outputs()) model.outputs_.push_back({out.name, model.lowered_.value_of(out.node)});
    model.input_nodes_.resize(model.inputs_.size());
#if TEENY_TRAINING
    if constexpr (DeviceMemoryBackend<Backend> && !DeviceTrainingBackend<Backend>) {
      if (model.trainable()) {
        return fail(Errc::unsupported, "a model lowered for training needs a backend that can zero its device ",
                    "memory (DeviceTrainingBackend), and this one cannot");
      }
    }
    if (model.trainable()) {
      if (auto traced = model.trace_gradients(); !traced) return std::move(traced).error();
    }
#endif
    model.initial_weights_ = weights;  // read by the first plan, before it prepares its kernels
    auto plan = model.plan_for(dims);
    model.initial_weights_ = nullptr;
    if (!plan) return std::move(plan).error();
    return model;
  }

  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }
  const Dag<Ops>& dag() const { return lowered_.dag; }
  Backend& backend() { return *backend_; }
  /// Statistics of the plan in use.
  PlanStats stats() const { return current_->stats; }

  /// Every parameter: its state_dict key, shape and dtype, in DAG order. On a device backend these
  /// are the host copies, as of the load, load_weights or the last download_parameters().
  std::vector<TensorRef> parameters() const {
    std::vector<TensorRef> refs;
    for (const auto& p : params_) refs.push_back(TensorRef::of(p.key, p.tensor));
    return refs;
  }

  /// Copies a device backend's parameters (moved by training: optimizer steps, batch norm's running
  /// statistics) into the host copies that parameters() and save_weights read.
  Result<void> download_parameters()
    requires DeviceMemoryBackend<Backend>
  {
    for (Param& p : params_) {
      if (p.tensor.bytes() == 0) continue;
      if (auto copied = backend_->download(p.tensor.data(), p.device, p.tensor.bytes()); !copied) {
        return std::move(copied).error().context(cat("parameter '", p.key, "'"));
      }
    }
    return ok();
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

  /// Loads parameters by key (`{node}.{slot}`) from a safetensors file or from tensors in memory;
  /// strict by default, with the same checks, conversions and errors for both (see
  /// load_parameters). Kernels are prepared again afterwards (packed weights).
  Result<LoadReport> load_weights(const ParamSource& source, LoadOptions options = {}) {
    auto report = copy_weights(source, options);
    if (!report || options.dry_run) return report;
    for (auto& plan : plans_) {
      // Captured with the old kernel states: captured again on their next forward (and backward).
      plan->graph.reset();
#if TEENY_TRAINING
      plan->backward_graph.reset();
      plan->step_graph.reset();
#endif
      if (auto prepared = prepare(*plan); !prepared) return std::move(prepared).error();
    }
    return report;
  }
  Result<LoadReport> load_weights(const SafetensorsFile& file, LoadOptions options = {}) {
    return load_weights(ParamSource::of(file), options);
  }
  /// From tensors the program holds, e.g. `TensorRef::of<float>("fc1.weight", w, {512, 784})`
  /// (copied into the model; native byte order).
  Result<LoadReport> load_weights(std::span<const TensorRef> tensors, LoadOptions options = {}) {
    auto source = ParamSource::of(tensors);
    if (!source) return std::move(source).error();
    return load_weights(*source, options);
  }
  Result<LoadReport> load_weights(std::span<const NamedTensor> tensors, LoadOptions options = {}) {
    std::vector<TensorRef> refs;
    for (const NamedTensor& t : tensors) refs.push_back(TensorRef::of(t));
    return load_weights(std::span<const TensorRef>(refs), options);
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
      auto tensor = Tensor::zeros(value.dtype, value.shape);
      if (!tensor) return std::move(tensor).error().context(cat("output '", port.name, "'"));
      if (auto copied = copy_output(port.name, {tensor->data(), tensor->bytes()}); !copied) {
        return std::move(copied).error();
      }
      outputs.push_back({port.name, std::move(*tensor)});
    }
    return outputs;
  }

  /// Runs the model. Inputs are matched by name to the graph's inputs; their shapes bind the
  /// symbolic dims. With the shapes of the plan in use this allocates nothing.
  Result<void> forward(std::span<const TensorRef> inputs) { return run_forward(inputs, false); }

  /// Runs the model on inputs already in the device's memory: each TensorRef's data spans memory
  /// of the model's device (another model's output, memory the caller's own kernels wrote), copied
  /// into the plan's arena on the device, queued with the kernels: no trip through the host. The
  /// inputs are checked as forward checks them. The copies run in the backend's order (the CUDA
  /// context's stream): memory written on another stream, another model's output included, must be
  /// complete first (that model's backend().synchronize()). Outputs stay on the device too:
  /// output(name) says where, until the next forward.
  Result<void> forward_on_device(std::span<const TensorRef> inputs)
    requires DeviceCopyBackend<Backend>
  {
    return run_forward(inputs, true);
  }

 private:
  // forward and forward_on_device: the inputs' bytes in host memory, or in the device's.
  Result<void> run_forward(std::span<const TensorRef> inputs, bool inputs_on_device) {
    if (auto staged = stage_inputs(inputs, inputs_on_device); !staged) return staged;
#if TEENY_TRAINING
    if (trainable()) {
      if (auto started = start_training_forward(); !started) return started;
    }
#endif
    bool replayed = false;
    if constexpr (GraphBackend<Backend>) {
      if (graph_replay_) {
        const auto queue = [&] {
          run_steps();
          return ok();
        };
        if (auto ran = replay_captured(current_->graph, "the forward", queue); !ran) return ran;
        replayed = true;
      }
    }
    if (!replayed) {
      run_steps();
      if constexpr (ReportsRunErrors<Backend>) {
        if (auto ran = backend_->take_error(); !ran) return ran;
      }
    }
#if TEENY_TRAINING
    if (trainable()) {
      if (auto cleared = clear_output_grads(); !cleared) return cleared;
      forward_ran_ = true;
    }
#endif
    return ok();
  }

  // Checks the inputs, selects the plan for their shapes and copies them into its arena.
  Result<void> stage_inputs(std::span<const TensorRef> inputs, bool inputs_on_device) {
    if (auto checked = check_inputs(inputs); !checked) return checked;
    if (!current_matches(inputs)) {
      auto switched = switch_plan(inputs);
      if (!switched) return switched;
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorBinding& dst = current_->values[input_nodes_[i]];
      if constexpr (DeviceMemoryBackend<Backend>) {
        const auto copy = [&](const TensorRef& in) -> Result<void> {
          if constexpr (DeviceCopyBackend<Backend>) {
            if (inputs_on_device) return backend_->copy_on_device(dst.data, in.data.data(), in.data.size());
          }
          return backend_->upload(dst.data, in.data.data(), in.data.size());
        };
        if (auto copied = copy(inputs[i]); !copied) {
          return std::move(copied).error().context(cat("input '", inputs[i].name, "'"));
        }
      } else if constexpr (requires { backend_->copy_input(dst.data, inputs[i].data.data(), inputs[i].data.size()); }) {
        backend_->copy_input(dst.data, inputs[i].data.data(), inputs[i].data.size());  // spread over its threads
      } else {
        std::memcpy(dst.data, inputs[i].data.data(), inputs[i].data.size());
      }
    }
    return ok();
  }

 public:
  /// Whether forward replays the plan's kernel launches as one captured graph (a CUDA graph)
  /// instead of launching each: the graph is captured on the plan's first forward with it on
  /// (and again after load_weights), then replayed. A model lowered for training replays its
  /// backward the same way, as a second graph: a training step is then two graph launches, with
  /// the loss between them and the optimizer step after (the phase, set per forward, is read from
  /// memory the graphs point at). Profiling does not see inside a replay.
  Result<void> set_graph_replay(bool on)
    requires GraphBackend<Backend>
  {
    graph_replay_ = on;
    return ok();
  }
  bool graph_replay() const { return graph_replay_; }

  /// Copies output `name` of the last forward into `out`, which must hold exactly its bytes
  /// (rows unpadded): from device memory on a device backend. Allocates nothing.
  Result<void> copy_output(std::string_view name, std::span<std::byte> out) const {
    auto value = output(name);
    if (!value) return std::move(value).error();
    const std::size_t bytes = static_cast<std::size_t>(value->shape.numel()) * size_of(value->dtype);
    if (out.size() != bytes) {
      return fail(Errc::invalid_argument, "output '", name, "' (", value->dtype, " ", value->shape, ") has ", bytes,
                  " bytes, but the buffer given for it has ", out.size());
    }
    if (bytes == 0) return ok();
    // Rows padded for a kernel's vector width are copied row by row.
    const std::size_t row = static_cast<std::size_t>(value->shape.last()) * size_of(value->dtype);
    const bool padded = value->row_stride != 0 && value->row_stride != value->shape.last();
    const std::size_t stride = padded ? static_cast<std::size_t>(value->row_stride) * size_of(value->dtype) : bytes;
    const std::size_t pieces = padded ? bytes / row : 1;
    const std::size_t piece = padded ? row : bytes;
    for (std::size_t r = 0; r < pieces; ++r) {
      const auto* from = static_cast<const std::byte*>(value->data) + r * stride;
      if constexpr (DeviceMemoryBackend<Backend>) {
        if (auto copied = backend_->download(out.data() + r * piece, from, piece); !copied) {
          return std::move(copied).error().context(cat("output '", name, "'"));
        }
      } else {
        std::memcpy(out.data() + r * piece, from, piece);
      }
    }
    return ok();
  }

 private:
  // Runs the current plan's steps, timing each while profiling.
  void run_steps() {
    const bool profiling = !step_ns_.empty();
    for (std::size_t s = 0; s < current_->steps.size(); ++s) {
      const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      std::visit(
          [&]<class Op>(loaded_detail::Step<Backend, Op>& step) {
            if constexpr (KernelFor<Backend, Op>) {
              for (std::size_t i = 0; i < step.args.size(); ++i) {
                run_kernel(*step.op, step.args[i], step.states[i], *backend_);
              }
            }
          },
          current_->steps[s]);
      if (profiling) step_ns_[s] += std::chrono::nanoseconds(std::chrono::steady_clock::now() - start).count();
    }
    if (profiling) ++profiled_forwards_;
  }

  // Replays `graph` (the current plan's forward or backward), capturing it first from what `run`
  // queues if it has none. A failure while capturing leaves no graph.
  template <class Graph, class Run>
  Result<void> replay_captured(std::optional<Graph>& graph, std::string_view what, Run&& run)
    requires GraphBackend<Backend>
  {
    if (!graph) {
      if (auto begun = backend_->begin_capture(); !begun) return begun;
      const auto profiled = std::exchange(step_ns_, {});  // a capture runs nothing: nothing to time
      Result<void> queued = run();
      step_ns_ = profiled;
      auto captured = backend_->end_capture();
      if constexpr (ReportsRunErrors<Backend>) {
        if (auto ran = backend_->take_error(); !ran) return std::move(ran).error().context(cat("capturing ", what));
      }
      if (!queued) return std::move(queued).error().context(cat("capturing ", what));
      if (!captured) return std::move(captured).error();
      graph.emplace(std::move(*captured));
    }
    return backend_->replay(*graph);
  }

 public:
  /// An output of the last forward, in the arena (valid until the next forward): device memory on
  /// a device backend (copy_output copies it out).
  Result<TensorBinding> output(std::string_view name) const {
    auto node = find_port(outputs_, name);
    if (!node)
      return fail(Errc::not_found, "the model has no output '", name, "' (outputs: ", port_names(outputs_), ")");
    return current_->values[*node];
  }
  /// The same as a typed view: `output<float>("logits")`. An error names the output and both
  /// dtypes when T is not its dtype. An output whose op pads its rows (forward_output_row_stride)
  /// comes as a strided view: index it with operator(); span() is for contiguous views only.
  /// Host backends only: a device's output is read with copy_output.
  template <Element T>
    requires(!DeviceMemoryBackend<Backend>)
  Result<TensorView<const T>> output(std::string_view name) const {
    auto binding = output(name);
    if (!binding) return std::move(binding).error();
    if (binding->dtype != dtype_of<T>) {
      return fail(Errc::dtype_mismatch, "output '", name, "' is ", binding->dtype, " but was read as ", dtype_of<T>);
    }
    return binding->template as<const T>();
  }

#if TEENY_TRAINING
  // ---- Training (models lowered with LoweringMode::training, in training builds) ----

  /// Whether the model was lowered for training, so that it can run backward.
  bool trainable() const { return lowered_.mode == LoweringMode::training; }

  /// The phase forward runs in: training (batch statistics, active dropout; the default of a
  /// trainable model) or eval (running statistics, dropout the identity), like PyTorch's
  /// module.train() / module.eval().
  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }
  /// Seeds dropout's masks; each training forward draws new ones (the step count goes on).
  void set_seed(std::uint64_t seed) { seed_ = seed; }
  /// The seed and the count of training forwards so far, which together decide the next dropout
  /// masks: a checkpoint saves them so that a resumed run draws the masks it would have drawn.
  RandomState random_state() const { return {seed_, step_}; }
  void set_random_state(const RandomState& state) {
    seed_ = state.seed;
    step_ = state.step;
  }

  /// dL/d(output `name`) of the last forward, in the arena, zeroed by every forward: the loss
  /// writes its gradient here before backward(). Outputs not written contribute nothing.
  Result<TensorBinding> output_grad(std::string_view name) const;

  /// Backpropagates the output gradients through the last forward, in reverse topological order,
  /// adding each parameter's gradient to its buffer (gradients accumulate until zero_grad(), as in
  /// PyTorch). Allocates nothing.
  Result<void> backward();

  /// One training step as a unit, on a device backend: the forward on `inputs`, the loss
  /// (parts.queue_loss()), the parameter gradients zeroed, the backward and the update
  /// (parts.queue_update()), with parts.stage() before them, once the inputs are in. With graph
  /// replay on, everything from the forward to the update is captured once per plan (and again
  /// when parts.capture_key() changes, or after load_weights) and replayed: a step is then one
  /// graph launch. Gradients do not accumulate across steps (they are zeroed inside); the
  /// forward's outputs stay readable until the next forward.
  template <TrainingStepParts Parts>
  Result<void> training_step(std::span<const TensorRef> inputs, Parts& parts)
    requires DeviceTrainingBackend<Backend>;

  /// Sets every parameter gradient to zero.
  void zero_grad()
    requires(!DeviceMemoryBackend<Backend>);
  /// Sets every parameter gradient to zero, in device memory (queued with the kernels).
  Result<void> zero_grad()
    requires DeviceMemoryBackend<Backend>;

  /// The trained parameters (buffers such as running statistics left out), in DAG order, with
  /// their gradients: host memory, which the optimizers of teeny.train update. (A device
  /// backend's are in device_parameter_gradients().)
  std::vector<ParameterGradient> parameter_gradients()
    requires(!DeviceMemoryBackend<Backend>);
  /// A device backend's trained parameters and their gradients, in device memory.
  std::vector<ParameterGradient> device_parameter_gradients()
    requires DeviceMemoryBackend<Backend>;

  /// Copies trained parameter `key`'s gradient into `out`, which must hold exactly its bytes: from
  /// device memory on a device backend.
  Result<void> copy_gradient(std::string_view key, std::span<std::byte> out) const;

  /// Sets dL/d(output `name`) of the last forward from `grad` (exactly its bytes; a host buffer):
  /// what a loss computed on the host hands to backward(). (output_grad gives where it lives.)
  Result<void> set_output_grad(std::string_view name, std::span<const std::byte> grad);
#endif

 private:
  struct Param {
    std::string key;
    NodeId node;
    Tensor tensor;
    bool trainable = false;  // training models: a gradient buffer, `grad`, of the same shape
    Tensor grad;
    void* device = nullptr;  // a device backend's copy, in device_params_, which kernels read
#if TEENY_TRAINING
    void* device_grad = nullptr;  // a device backend's gradient (trained parameters), in device_params_
#endif
  };
  using Memory = typename loaded_detail::memory_of<Backend>::type;
#if TEENY_TRAINING
  struct BackwardEntry {
    typename loaded_detail::backward_step_variant<Backend, Ops>::type step;
    std::vector<TensorBinding> first_use;  // gradient buffers that start their life here: cleared first
  };
#endif
  struct Plan {
    Bindings dims;
    Memory arena;
    std::optional<typename loaded_detail::graph_of<Backend>::type> graph;  // captured launches (GraphBackend)
    std::vector<TensorBinding> values;                                     // per DAG node
    std::vector<typename loaded_detail::step_variant<Backend, Ops>::type> steps;
    PlanStats stats;
#if TEENY_TRAINING
    std::vector<TensorBinding> grads;     // per DAG node: dL/d(its value), or unbound (no gradient flows)
    std::vector<BackwardEntry> backward;  // in execution order: reverse topological
    std::optional<typename loaded_detail::graph_of<Backend>::type> backward_graph;  // (GraphBackend)
    std::optional<typename loaded_detail::graph_of<Backend>::type> step_graph;      // a training_step (GraphBackend)
    std::optional<std::uint64_t> step_key;  // the capture_key() step_graph was captured with
#endif
  };

  LoadedModel() = default;

  // The memory kernels read a parameter from: its device copy on a device backend.
  static void* kernel_data(Param& p) {
    if constexpr (DeviceMemoryBackend<Backend>) {
      return p.device;
    } else {
      return p.tensor.data();
    }
  }
  Result<Memory> allocate(std::size_t bytes) {
    if constexpr (DeviceMemoryBackend<Backend>) {
      return backend_->allocate(bytes);
    } else {
      return Buffer::allocate(bytes);
    }
  }
  static std::byte* bytes_of(Memory& memory) { return static_cast<std::byte*>(static_cast<void*>(memory.data())); }

  // A device backend's parameters: one allocation, each parameter 256-byte aligned in it (as
  // cudaMalloc aligns its own), filled from the host copies.
  Result<void> place_params();
  Result<void> upload_params();
  // Copies `source` into the parameters (and a device backend's copies of them); the kernels are
  // not prepared again.
  Result<LoadReport> copy_weights(const ParamSource& source, LoadOptions options) {
    std::vector<ParamTarget> targets;
    for (auto& p : params_) {
      targets.push_back({p.key, p.tensor.dtype(), p.tensor.shape(), {p.tensor.data(), p.tensor.bytes()}});
    }
    auto report = load_parameters(source, targets, options);
    if (!report || options.dry_run) return report;
    if (auto uploaded = upload_params(); !uploaded) return std::move(uploaded).error();
    return report;
  }

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

  // Checked on every forward, the fast path included (a wrong byte count would overrun the arena,
  // a name given twice would leave another input's stale data in place): each of the model's
  // inputs given once, by a name it has, with bytes that exactly fill its shape and dtype.
  // Leaves the node of inputs[i] in input_nodes_[i].
  Result<void> check_inputs(std::span<const TensorRef> inputs) {
    if (inputs.size() != inputs_.size()) {
      return fail(Errc::invalid_argument, "the model takes ", inputs_.size(), " input(s) (", port_names(inputs_),
                  "), got ", inputs.size());
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorRef& in = inputs[i];
      for (std::size_t j = 0; j < i; ++j) {
        if (inputs[j].name == in.name) {
          return fail(Errc::duplicate, "input '", in.name, "' is given twice (the model takes ", port_names(inputs_),
                      ")");
        }
      }
      auto node = find_port(inputs_, in.name);
      if (!node) {
        return fail(Errc::not_found, "the model has no input '", in.name, "' (inputs: ", port_names(inputs_), ")");
      }
      input_nodes_[i] = *node;
      auto numel = checked_numel(in.shape);
      if (!numel) return std::move(numel).error().context(cat("input '", in.name, "'"));
      const auto bytes = static_cast<std::size_t>(*numel) * size_of(in.dtype);
      if (in.data.size() != bytes) {
        return fail(Errc::invalid_argument, "input '", in.name, "' has ", in.data.size(), " bytes but shape ", in.shape,
                    " ", in.dtype, " takes ", bytes);
      }
      if (bytes != 0 && in.data.data() == nullptr) {
        return fail(Errc::invalid_argument, "input '", in.name, "' (", in.dtype, " ", in.shape,
                    ") has a null data pointer");
      }
    }
    return ok();
  }

  // Whether the plan in use takes `inputs` (already checked) as they are.
  bool current_matches(std::span<const TensorRef> inputs) const {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorBinding& b = current_->values[input_nodes_[i]];
      if (b.shape != inputs[i].shape || b.dtype != inputs[i].dtype) return false;
    }
    return true;
  }

  // Checks the inputs against the graph, binds the symbolic dims from their shapes and selects
  // (or builds) the plan for those dims.
  Result<void> switch_plan(std::span<const TensorRef> inputs) {
    Bindings dims;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorRef& in = inputs[i];
      const auto& op = std::get<InputOp>(lowered_.dag[input_nodes_[i]].op);
      if (in.dtype != op.dtype) {
        return fail(Errc::dtype_mismatch, "input '", in.name, "' is ", in.dtype, " but the model takes ", op.dtype);
      }
      if (auto matched = match_shape(op.shape, in.shape, dims); !matched) {
        return std::move(matched).error().context(cat("input '", in.name, "'"));
      }
    }
    auto plan = plan_for(dims);
    if (!plan) return std::move(plan).error();
    return ok();
  }

  // The plan for `dims`, built on first use.
  Result<Plan*> plan_for(const Bindings& dims);

  Result<std::unique_ptr<Plan>> build_plan(const Bindings& dims);

  // Every op reads as many activations as its DAG node has operands (its n_activation_inputs; an
  // input placeholder none): a lowering that wires a node otherwise is refused here, by name.
  static Result<void> check_operands(const Dag<Ops>& dag);

  // The seed's launch geometry and kernel names, checked once per plan: every launch needs at least
  // one block of at least one thread, and at most 1024 threads per block (CUDA's limit, so that an
  // op that would not launch on a GPU is caught on the CPU too); the forward kernel is named.
  // Returns each launch's grid.
  template <class Op>
  static Result<std::vector<Dim3>> check_launches(const Op& op, std::size_t launches,
                                                  std::span<const TensorBinding> inputs, const ConcreteShape& output);
  static Result<void> check_geometry(std::string_view what, std::size_t launch, const Dim3& grid, const Dim3& block);

  template <class Op>
  Result<void> add_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in, const ConcreteShape& out);

  template <class Op>
  Result<void> check_params(NodeId id, const Op& op, const std::vector<ConcreteShape>& in, const ConcreteShape& out);

  Result<void> prepare(Plan& plan);

#if TEENY_TRAINING
  static Error not_trainable() {
    return fail(Errc::unsupported,
                "the model was lowered for inference; lower it with LoweringMode::training to train");
  }
  bool is_output(NodeId id) const {
    return std::any_of(outputs_.begin(), outputs_.end(), [&](const Port& p) { return p.node == id; });
  }
  // Queues the current plan's backward: each gradient buffer cleared where its life starts, then
  // the backward kernels, in reverse topological order.
  Result<void> run_backward_steps();
  // The output gradients start each forward at zero: a loss writes those it has a gradient for.
  Result<void> clear_output_grads();
  // Zeroes a gradient buffer: through the backend on a device.
  Result<void> clear(const TensorBinding& t);
  // The memory a trained parameter's gradient lives in: a device backend's own.
  static void* grad_data(Param& p) {
    if constexpr (DeviceMemoryBackend<Backend>) {
      return p.device_grad;
    } else {
      return p.grad.data();
    }
  }

  // Which DAG nodes a gradient flows through: those computed from a trained parameter that lead
  // to an output. Each must have a backward the backend runs, else the load fails naming it (the
  // seed silently stopped the gradient there).
  Result<void> trace_gradients();

  // The backward step of DAG node `id`: its backward arguments bound to the plan's values and
  // gradients, and its backward kernels prepared.
  Result<BackwardEntry> backward_entry(Plan& plan, NodeId id);

  // Sets the backend's phase for this forward and refreshes the kernels' parameter-derived state
  // (the parameters change with every optimizer step).
  Result<void> start_training_forward();

  std::vector<bool> flows_;  // per DAG node: a gradient flows through it (training models)
  bool training_ = true;
  bool forward_ran_ = false;
  std::uint64_t seed_ = 0;
  std::uint64_t step_ = 0;
#endif

  Lowered<Ops> lowered_;
  std::unique_ptr<Backend> backend_;
  std::vector<NodeId> order_;
  std::vector<Port> inputs_;
  std::vector<NodeId> input_nodes_;  // of the inputs of the forward in progress, in the caller's order
  std::vector<Port> outputs_;
  std::vector<Param> params_;
  const ParamSource* initial_weights_ = nullptr;  // load's weights, while its first plan is built
  Memory device_params_;                          // a device backend's parameters (place_params)
  std::vector<std::unique_ptr<Plan>> plans_;
  Plan* current_ = nullptr;
  bool graph_replay_ = false;
  std::vector<std::int64_t> step_ns_;  // per step of order_, while profiling
  std::int64_t profiled_forwards_ = 0;
};

}  // namespace teeny
