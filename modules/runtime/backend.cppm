// teeny.runtime:backend — what a LoadedModel asks of its backend, and the types its plans are made
// of. A backend is any type with a kernel per op of the op set (KernelFor, teeny.model); these
// concepts are the optional capabilities that change how a model is loaded and run on it: memory
// of its own (a GPU's), copies within it, zeroed memory for gradients, graph capture and replay,
// errors reported by a run. A backend without them computes in host memory, as the CPU does.
export module teeny.runtime:backend;
import teeny.std;
import teeny.core;
import teeny.model;

export namespace teeny {

#if TEENY_TRAINING
/// What decides a trainable model's next random draws (dropout masks): its seed and the number of
/// training forwards it has run.
struct RandomState {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
};

/// A kernel whose prepared state depends on parameter values (a packed weight) refreshes it in
/// place when they change: refresh_kernel(op, args, state, backend) -> Result<void>. A trainable
/// model calls it before every forward, since an optimizer step changes them.
template <class B, class Op, class State>
concept RefreshableKernel = requires(B& backend, const Op& op, const typename Op::Args& args, State& state) {
  { refresh_kernel(op, args, state, backend) } -> std::same_as<Result<void>>;
};
#endif

/// A backend whose tensors live in memory of its own (a GPU's). LoadedModel then takes the
/// activation arena and the parameters' memory from it (`allocate`, giving a B::Memory that owns
/// it and whose data() points at it), copies weights and inputs in with `upload` and outputs out
/// with `download`; it keeps a host copy of the parameters (parameters(), save_weights). Without
/// these members a backend computes in host memory.
template <class B>
concept DeviceMemoryBackend = requires(B& backend, std::size_t bytes, void* to, const void* from) {
  { backend.allocate(bytes) } -> std::same_as<Result<typename B::Memory>>;
  { backend.upload(to, from, bytes) } -> std::same_as<Result<void>>;
  { backend.download(to, from, bytes) } -> std::same_as<Result<void>>;
  { std::declval<typename B::Memory&>().data() } -> std::convertible_to<void*>;
};

/// A device backend that can train a model: besides its memory it zeroes that memory (gradient
/// buffers, which backward adds to), in order with the kernels it runs.
template <class B>
concept DeviceTrainingBackend = DeviceMemoryBackend<B> && requires(B& backend, void* to, std::size_t bytes) {
  { backend.zero(to, bytes) } -> std::same_as<Result<void>>;
};

/// A device backend that also copies within its own memory, in order with the kernels it runs:
/// a model on it can take inputs that are already in device memory (forward_on_device).
template <class B>
concept DeviceCopyBackend =
    DeviceMemoryBackend<B> && requires(B& backend, void* to, const void* from, std::size_t bytes) {
      { backend.copy_on_device(to, from, bytes) } -> std::same_as<Result<void>>;
    };

/// A backend that can record a forward's kernel launches once and replay them as one (a CUDA
/// graph): begin_capture(), then the launches (recorded, not run), end_capture() -> the graph;
/// replay(graph) runs them all again, on the same memory.
template <class B>
concept GraphBackend = requires(B& backend, typename B::Graph& graph) {
  { backend.begin_capture() } -> std::same_as<Result<void>>;
  { backend.end_capture() } -> std::same_as<Result<typename B::Graph>>;
  { backend.replay(graph) } -> std::same_as<Result<void>>;
};

#if TEENY_TRAINING
/// What a training step queues besides the model's own passes, for LoadedModel::training_step:
/// stage() runs every step once the inputs are in and the plan is chosen (host work, copies to
/// device memory; never captured); queue_loss() follows the forward (a loss writing the output
/// gradients), queue_update() the backward (an optimizer's updates). The queue functions only
/// queue device work, which reads its per-step values from memory stage() wrote: under graph
/// replay they run only while the step is captured. capture_key() names what they queue (their
/// buffers included): a plan's captured step is captured again when it changes.
template <class P>
concept TrainingStepParts = requires(P& parts) {
  { parts.stage() } -> std::same_as<Result<void>>;
  { parts.queue_loss() } -> std::same_as<Result<void>>;
  { parts.queue_update() } -> std::same_as<Result<void>>;
  { parts.capture_key() } -> std::convertible_to<std::uint64_t>;
};
#endif

/// A backend whose run_kernel can fail (a launch refused by the driver) keeps the first failure
/// and hands it over, clearing it, in take_error(): forward returns it.
template <class B>
concept ReportsRunErrors = requires(B& backend) {
  { backend.take_error() } -> std::same_as<Result<void>>;
};

namespace loaded_detail {
// The memory a plan's arena and (on a device) the parameters live in.
template <class B>
struct memory_of {
  using type = Buffer;
};
template <DeviceMemoryBackend B>
struct memory_of<B> {
  using type = typename B::Memory;
};
template <class B>
struct graph_of {
  using type = std::monostate;
};
template <GraphBackend B>
struct graph_of<B> {
  using type = typename B::Graph;
};

// The prepared state of Op's kernel on B (a placeholder when B has no kernel for Op: LoadedModel
// then stops at its static_assert, not on errors about this type).
struct NoKernel {};
template <class B, class Op>
struct kernel_state {
  using type = NoKernel;
};
template <class B, class Op>
  requires KernelFor<B, Op>
struct kernel_state<B, Op> {
  using type = typename std::remove_cvref_t<decltype(prepare_kernel_at(
      std::declval<const Op&>(), std::declval<const typename Op::Args&>(), std::declval<B&>(),
      std::declval<const LaunchSite&>()))>::value_type;
};

// A plan step: the op, and per launch its bound arguments, grid and prepared kernel state (a
// concat launches once per input; inputs: nothing to run).
template <class B, class Op>
struct Step {
  const Op* op = nullptr;
  std::vector<typename Op::Args> args;
  std::vector<Dim3> grids;
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

#if TEENY_TRAINING
template <class B, class Op>
struct backward_state {
  using type = typename std::remove_cvref_t<decltype(prepare_backward_kernel_at(
      std::declval<const Op&>(), std::declval<const typename Op::BackwardArgs&>(), std::declval<B&>(),
      std::declval<const LaunchSite&>()))>::value_type;
};

// A backward plan step: the op's backward arguments and state, one per backward launch, and the
// gradient buffers whose life starts here (cleared before the op accumulates into them). Ops the
// backend cannot differentiate have no backward step (a training load refuses them where a
// gradient would have to pass).
template <class B, class Op>
struct BackwardStep {};
template <class B, class Op>
  requires BackwardKernelFor<B, Op>
struct BackwardStep<B, Op> {
  const Op* op = nullptr;
  std::vector<typename Op::BackwardArgs> args;
  std::vector<typename backward_state<B, Op>::type> states;
};

template <class B, class Ops>
struct backward_step_variant;
template <class B, class... Ops>
struct backward_step_variant<B, std::variant<Ops...>> {
  using type = std::variant<BackwardStep<B, Ops>...>;
};
#endif

}  // namespace loaded_detail

/// What loading made: sizes of the arena (with and without reuse) and of the parameters.
struct PlanStats {
  std::size_t steps = 0;              // kernel launches per forward
  std::size_t arena_bytes = 0;        // activation arena, memory reused by liveness
  std::size_t naive_arena_bytes = 0;  // one buffer per value
  std::size_t parameter_bytes = 0;
  std::int64_t parameter_count = 0;  // elements of all parameter buffers
};

#if TEENY_TRAINING
/// A trained parameter of a model lowered for training: its state_dict key, its values and the
/// gradient backward accumulates into (same dtype and shape). Both point into the model.
struct ParameterGradient {
  std::string_view key;
  TensorBinding value;
  TensorBinding grad;
};
#endif

/// Wall time of one DAG node's kernel launches, summed over the forwards run while profiling.
struct StepTime {
  std::string node;  // the DAG node's name (a graph node's, or a fused group's)
  std::string op;    // its op, as name_of() spells it
  std::int64_t nanoseconds = 0;
};

}  // namespace teeny
